#pragma once
// SHA-256 hashing and the self-describing digest strings used for artifacts.

#include <amphora/export.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

AMPHORA_API_BEGIN

namespace amphora {

/// A raw 32-byte SHA-256 value. Value type; freely copyable.
struct Sha256Value {
  std::array<std::uint8_t, 32> bytes{};

  /// Lower-case hex, 64 characters.
  std::string hex() const;
  /// Parses exactly 64 lower-case hex characters; throws InvalidArgument otherwise.
  static Sha256Value from_hex(std::string_view hex);

  friend bool operator==(const Sha256Value&, const Sha256Value&) = default;
  friend auto operator<=>(const Sha256Value&, const Sha256Value&) = default;
};

/// Incremental SHA-256 (OpenSSL libcrypto). Not thread-safe; use one per thread.
class Sha256 {
 public:
  /// Throws OutOfResources when libcrypto cannot make a hashing context.
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  /// Adds `size` bytes; throws Error if libcrypto fails.
  void update(const void* data, std::size_t size);
  void update(std::span<const std::byte> data) { update(data.data(), data.size()); }
  /// Returns the digest and resets the hasher for reuse.
  Sha256Value finish();

  /// One-shot hash of a buffer.
  static Sha256Value of(const void* data, std::size_t size);
  static Sha256Value of(std::string_view text) { return of(text.data(), text.size()); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// An artifact identifier, `sha256:<64 hex>`. The algorithm prefix keeps the
/// format open to other algorithms later.
class Digest {
 public:
  /// The all-zero digest: a placeholder that names no artifact.
  Digest() = default;
  explicit Digest(Sha256Value value) : value_(value) {}

  /// Parses `sha256:<64 lower-case hex>`; throws InvalidArgument naming the text otherwise.
  static Digest parse(std::string_view text);
  /// True when `text` is a full `sha256:<64 hex>` digest string.
  static bool is_digest(std::string_view text);

  const Sha256Value& value() const { return value_; }
  std::string hex() const { return value_.hex(); }
  std::string str() const { return "sha256:" + value_.hex(); }
  /// `sha256:` and the first 12 hex digits, for humans.
  std::string short_str() const { return "sha256:" + value_.hex().substr(0, 12); }

  friend bool operator==(const Digest&, const Digest&) = default;
  friend auto operator<=>(const Digest&, const Digest&) = default;

 private:
  Sha256Value value_;
};

}  // namespace amphora

AMPHORA_API_END
