#include <amphora/digest.hpp>
#include <amphora/error.hpp>

#include <openssl/evp.h>

#include <new>

namespace amphora {

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is rejected so every digest has one spelling
}
}  // namespace

std::string Sha256Value::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(64, '0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

Sha256Value Sha256Value::from_hex(std::string_view hex) {
  Sha256Value v;
  if (hex.size() != 64) throw InvalidArgument("invalid SHA-256 hex '" + std::string(hex) + "': expected 64 digits");
  for (std::size_t i = 0; i < 32; ++i) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      throw InvalidArgument("invalid SHA-256 hex '" + std::string(hex) + "': only lower-case hex digits allowed");
    v.bytes[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return v;
}

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
  Impl() {
    ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
      EVP_MD_CTX_free(ctx);
      throw OutOfResources("cannot start a SHA-256 computation: libcrypto is out of memory");
    }
  }
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() try : impl_(std::make_unique<Impl>()) {
} catch (const std::bad_alloc&) {
  throw OutOfResources("cannot start a SHA-256 computation: out of memory");
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, std::size_t size) {
  if (size && EVP_DigestUpdate(impl_->ctx, data, size) != 1) throw Error("SHA-256 update failed");
}

Sha256Value Sha256::finish() {
  Sha256Value v;
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(impl_->ctx, v.bytes.data(), &len) != 1 || len != 32 ||
      EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1)
    throw Error("SHA-256 finalisation failed");
  return v;
}

Sha256Value Sha256::of(const void* data, std::size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.finish();
}

bool Digest::is_digest(std::string_view text) {
  if (text.size() != 71 || text.substr(0, 7) != "sha256:") return false;
  for (char c : text.substr(7))
    if (hex_value(c) < 0) return false;
  return true;
}

Digest Digest::parse(std::string_view text) {
  if (!is_digest(text))
    throw InvalidArgument("invalid digest '" + std::string(text) + "': expected sha256: and 64 lower-case hex digits");
  return Digest(Sha256Value::from_hex(text.substr(7)));
}

}  // namespace amphora
