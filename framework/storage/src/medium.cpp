// The generic capabilities of a medium, built on its object calls, and the
// registry of URI schemes.

#include <amphora/storage/medium.hpp>

#include "builtin_schemes.hpp"
#include "posix.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace amphora {

namespace {

// A staged file held in memory until publish() puts it.
class MemoryStagedFile : public StagedFile {
 public:
  MemoryStagedFile(std::string& bytes, std::mutex& mutex) : bytes_(bytes), mutex_(mutex) {}
  void write_at(std::uint64_t offset, ConstBytes data) override {
    std::lock_guard lock(mutex_);
    if (offset + data.size() > bytes_.size()) bytes_.resize(static_cast<std::size_t>(offset + data.size()));
    if (!data.empty()) std::memcpy(bytes_.data() + offset, data.data(), data.size());
  }
  void close() override {}

 private:
  std::string& bytes_;
  std::mutex& mutex_;
};

class MemoryStaging : public Staging {
 public:
  explicit MemoryStaging(Medium& medium) : medium_(medium) {}

  std::unique_ptr<StagedFile> create_file(std::string_view relpath) override {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = files_.try_emplace(std::string(relpath));
    if (!fresh) throw InvalidArgument("staged file '" + std::string(relpath) + "' is created twice");
    return std::make_unique<MemoryStagedFile>(it->second, mutex_);
  }

  bool publish(std::string_view prefix, std::string_view marker, std::string_view marker_bytes) override {
    const std::string marker_key = std::string(prefix) + std::string(marker);
    if (medium_.head(marker_key)) return false;
    put_files(prefix);
    return medium_.put(marker_key, marker_bytes, PutCondition::absent()).has_value();
  }

  void replace(std::string_view prefix, std::string_view marker, std::string_view marker_bytes) override {
    put_files(prefix);
    medium_.put(std::string(prefix) + std::string(marker), marker_bytes);
  }

 private:
  void put_files(std::string_view prefix) {
    std::lock_guard lock(mutex_);
    for (const auto& [path, bytes] : files_) medium_.put(std::string(prefix) + path, bytes);
  }

  Medium& medium_;
  std::mutex mutex_;
  std::map<std::string, std::string> files_;
};

struct Schemes {
  std::mutex mutex;
  std::map<std::string, MediumFactory, std::less<>> factories;
};

Schemes& schemes() {
  static Schemes* all = [] {
    auto* s = new Schemes;  // never destroyed: factories may be used while other statics are torn down
    s->factories.emplace("file", [](const MediumRequest& request) {
      if (request.rest.empty() || request.rest.front() != '/')
        throw InvalidArgument("'" + request.uri + "' is not a file URI of an absolute path: write file:///PATH");
      return open_local_medium(request.rest, request.create, request.durable);
    });
    detail::add_remote_schemes([s](std::string scheme, MediumFactory factory) {
      s->factories.emplace(std::move(scheme), std::move(factory));
    });
    return s;
  }();
  return *all;
}

bool valid_scheme(std::string_view scheme) {
  return !scheme.empty() && std::isalpha(static_cast<unsigned char>(scheme.front())) &&
         std::all_of(scheme.begin(), scheme.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
         });
}

}  // namespace

std::vector<HeadAnswer> Medium::head_each(std::string_view prefix, std::span<const std::string> names) {
  std::vector<HeadAnswer> out(names.size());
  for (std::size_t k = 0; k < names.size(); ++k) {
    try {
      out[k].info = head(std::string(prefix) + names[k]);
    } catch (const CorruptData& e) {
      out[k].problem = e.what();
    }
  }
  return out;
}

std::shared_ptr<const Buffer> Medium::map(std::string_view key) {
  auto file = open(key);
  auto buffer = detail::allocate_for_overwrite(static_cast<std::size_t>(file->size()));
  file->read_at(0, static_cast<std::size_t>(file->size()), buffer->mutable_data());
  return buffer;
}

std::unique_ptr<RandomAccessFile> Medium::open_sized(std::string_view key, std::uint64_t) { return open(key); }

std::shared_ptr<const Buffer> Medium::map_sized(std::string_view key, std::uint64_t) { return map(key); }

void Medium::make_folder(std::string_view) {}

std::unique_ptr<Staging> Medium::begin_staging() { return std::make_unique<MemoryStaging>(*this); }

std::unique_ptr<Staging> Medium::begin_staging_at(std::string_view) { return begin_staging(); }

std::uint64_t Medium::remove_folder(std::string_view prefix, std::string_view marker) {
  const std::string marker_key = std::string(prefix) + std::string(marker);
  std::uint64_t bytes = 0;
  if (auto info = head(marker_key)) bytes += info->size;
  remove(marker_key);
  for (const auto& entry : list_all(*this, prefix, false)) {
    if (entry.kind != ListedEntry::Kind::object) continue;
    if (auto info = head(entry.key)) bytes += info->size;
    remove(entry.key);
  }
  return bytes;
}

ObjectLeases::Options object_lease_options() {
  ObjectLeases::Options options;
  // How long a killed holder blocks the others; for tests, and for links
  // slow enough that a renewal every ttl/3 could miss.
  if (const char* text = std::getenv("AMPHORA_LEASE_SECONDS"); text && *text) {
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    if (*end != '\0' || !(seconds >= 1 && seconds <= 3600))
      throw InvalidArgument("AMPHORA_LEASE_SECONDS is '" + std::string(text) + "': give seconds from 1 to 3600");
    options.ttl = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
  }
  return options;
}

std::unique_ptr<Lease> Medium::lease(std::string_view name, LeaseMode mode, bool wait) {
  std::call_once(leases_once_, [&] { leases_ = ObjectLeases::create(*this, object_lease_options()); });
  return leases_->acquire(name, mode, wait);
}

StagingSweep Medium::sweep_staging(bool, std::chrono::seconds) { return {}; }

void check_storage_key(std::string_view key, bool folder) {
  std::string_view body = folder && key.ends_with('/') ? key.substr(0, key.size() - 1) : key;
  bool ok = !body.empty() && body.size() <= 4096 && body.find('\0') == std::string_view::npos;
  for (std::size_t start = 0; ok;) {
    auto slash = body.find('/', start);
    auto part = body.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    ok = !part.empty() && part != "." && part != "..";
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (!ok) throw InvalidArgument("invalid storage key '" + std::string(key) + "': empty, '.' or '..' component");
}

void check_lease_name(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 100 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
  if (!ok) throw InvalidArgument("invalid lease name '" + std::string(name) + "': use letters, digits, '-' and '_'");
}

std::vector<ListedEntry> list_all(Medium& medium, std::string_view prefix, bool shallow) {
  std::vector<ListedEntry> out;
  std::string after;
  for (;;) {
    auto page = medium.list(prefix, after, shallow, kMaxListPage);
    if (page.entries.empty()) break;
    after = page.entries.back().key;
    for (auto& e : page.entries) out.push_back(std::move(e));
    if (!page.truncated) break;
  }
  return out;
}

bool is_medium_uri(std::string_view text) {
  auto colon = text.find("://");
  return colon != std::string_view::npos && valid_scheme(text.substr(0, colon));
}

void register_medium_scheme(std::string_view scheme, MediumFactory factory) {
  if (!valid_scheme(scheme))
    throw InvalidArgument("invalid URI scheme '" + std::string(scheme) +
                          "': use lower-case letters, digits, '+', '-' and '.', starting with a letter");
  if (!factory) throw InvalidArgument("URI scheme '" + std::string(scheme) + "' registered without a factory");
  auto& all = schemes();
  std::lock_guard lock(all.mutex);
  if (!all.factories.emplace(std::string(scheme), std::move(factory)).second)
    throw InvalidArgument("URI scheme '" + std::string(scheme) + "' is registered already");
}

std::shared_ptr<Medium> open_medium(std::string_view uri, bool create, bool durable) {
  if (!is_medium_uri(uri)) throw InvalidArgument("'" + std::string(uri) + "' is not a URI of the form SCHEME://...");
  auto colon = uri.find("://");
  MediumFactory factory;
  {
    auto& all = schemes();
    std::lock_guard lock(all.mutex);
    auto it = all.factories.find(uri.substr(0, colon));
    if (it == all.factories.end()) {
      std::string known;
      for (const auto& [name, f] : all.factories) known += (known.empty() ? "" : ", ") + name;
      throw Unsupported("no storage is registered for URI scheme '" + std::string(uri.substr(0, colon)) + "' (of '" +
                        std::string(uri) + "'); known schemes: " + known);
    }
    factory = it->second;
  }
  MediumRequest request{std::string(uri), std::string(uri.substr(colon + 3)), create, durable};
  auto medium = factory(request);
  if (!medium) throw IoError("the factory for '" + std::string(uri.substr(0, colon)) + "' returned no storage for " +
                             std::string(uri));
  return medium;
}

}  // namespace amphora
