#include "memory_medium.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

namespace amphora::testing {

namespace {

struct Object {
  std::shared_ptr<const std::string> bytes;
  std::string tag;
  std::chrono::system_clock::time_point modified;
};

void check_key(std::string_view key) { check_storage_key(key); }

void count(ReadCount* reads, std::uint64_t bytes) {
  if (!reads) return;
  ++reads->calls;
  reads->bytes += bytes;
}

class MemoryFile : public RandomAccessFile {
 public:
  MemoryFile(std::shared_ptr<const std::string> bytes, std::shared_ptr<ReadCount> reads)
      : bytes_(std::move(bytes)), reads_(std::move(reads)) {}
  std::uint64_t size() const override { return bytes_->size(); }
  void read_at(std::uint64_t offset, std::size_t size, std::byte* dst) const override {
    if (offset > bytes_->size() || size > bytes_->size() - offset)
      throw CorruptData("in-memory object of " + std::to_string(bytes_->size()) + " bytes ends before byte " +
                        std::to_string(offset + size));
    if (size) std::memcpy(dst, bytes_->data() + offset, size);
    count(reads_.get(), size);
  }

 private:
  std::shared_ptr<const std::string> bytes_;  // a replaced object's old bytes stay readable
  std::shared_ptr<ReadCount> reads_;
};

class MemoryMedium : public Medium {
 public:
  MemoryMedium(std::string location, std::shared_ptr<ReadCount> reads)
      : location_(std::move(location)), reads_(std::move(reads)) {}

  std::string location() const override { return location_; }

  std::optional<ObjectInfo> head(std::string_view key) override {
    check_key(key);
    std::lock_guard lock(mutex_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return std::nullopt;
    return info(it->second);
  }

  std::string get(std::string_view key, std::size_t max_bytes) override {
    auto bytes = find(key);
    if (bytes->size() > max_bytes)
      throw CorruptData(location_ + "/" + std::string(key) + " is " + std::to_string(bytes->size()) +
                        " bytes, more than the " + std::to_string(max_bytes) + " allowed");
    count(reads_.get(), bytes->size());
    return *bytes;
  }

  std::unique_ptr<RandomAccessFile> open(std::string_view key) override {
    return std::make_unique<MemoryFile>(find(key), reads_);
  }

  std::shared_ptr<const Buffer> map(std::string_view key) override {
    auto bytes = find(key);
    count(reads_.get(), bytes->size());
    return Buffer::wrap(bytes->data(), bytes->size(), bytes);
  }

  std::optional<ObjectInfo> put(std::string_view key, std::string_view bytes, const PutCondition& condition) override {
    check_key(key);
    auto stored = std::make_shared<const std::string>(bytes);
    std::lock_guard lock(mutex_);
    auto it = objects_.find(key);
    if (condition.kind == PutCondition::Kind::if_absent && it != objects_.end()) return std::nullopt;
    if (condition.kind == PutCondition::Kind::if_match && (it == objects_.end() || it->second.tag != condition.tag))
      return std::nullopt;
    Object object{std::move(stored), "m" + std::to_string(++version_), std::chrono::system_clock::now()};
    if (it == objects_.end())
      it = objects_.emplace(std::string(key), std::move(object)).first;
    else
      it->second = std::move(object);
    return info(it->second);
  }

  bool remove(std::string_view key) override {
    check_key(key);
    std::lock_guard lock(mutex_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return false;
    objects_.erase(it);
    return true;
  }

  ListPage list(std::string_view prefix, std::string_view start_after, bool shallow, std::size_t limit) override {
    limit = std::clamp<std::size_t>(limit, 1, kMaxListPage);
    ListPage page;
    std::lock_guard lock(mutex_);
    auto it = objects_.lower_bound(prefix);
    if (!start_after.empty() && start_after >= prefix) it = objects_.upper_bound(start_after);
    while (it != objects_.end() && std::string_view(it->first).starts_with(prefix)) {
      std::string_view key = it->first;
      auto slash = shallow ? key.find('/', prefix.size()) : std::string_view::npos;
      if (slash == std::string_view::npos) {
        if (page.entries.size() == limit) {
          page.truncated = true;
          break;
        }
        page.entries.push_back({std::string(key), ListedEntry::Kind::object, {}});
        ++it;
        continue;
      }
      // Every key below this folder is rolled into one entry.
      std::string folder(key.substr(0, slash + 1));
      if (!start_after.empty() && folder <= start_after) {
        it = objects_.lower_bound(folder + "\xff");
        continue;
      }
      if (page.entries.size() == limit) {
        page.truncated = true;
        break;
      }
      page.entries.push_back({folder, ListedEntry::Kind::folder, {}});
      it = objects_.lower_bound(folder + "\xff");
    }
    return page;
  }

 private:
  std::shared_ptr<const std::string> find(std::string_view key) {
    check_key(key);
    std::lock_guard lock(mutex_);
    auto it = objects_.find(key);
    if (it == objects_.end()) throw NotFound("no object " + std::string(key) + " in " + location_);
    return it->second.bytes;
  }

  // Says its own clock, as an object store's Date does.
  static ObjectInfo info(const Object& o) {
    return {o.bytes->size(), o.tag, o.modified, std::chrono::system_clock::now()};
  }

  std::string location_;
  std::shared_ptr<ReadCount> reads_;
  std::mutex mutex_;
  std::map<std::string, Object, std::less<>> objects_;
  std::uint64_t version_ = 0;
};

}  // namespace

std::shared_ptr<Medium> make_memory_medium(std::string location, std::shared_ptr<ReadCount> reads) {
  return std::make_shared<MemoryMedium>(std::move(location), std::move(reads));
}

void register_memory_scheme() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_medium_scheme("memory", [](const MediumRequest& request) -> std::shared_ptr<Medium> {
      static std::mutex mutex;
      static std::map<std::string, std::shared_ptr<Medium>> media;
      std::lock_guard lock(mutex);
      auto it = media.find(request.rest);
      if (it != media.end()) return it->second;
      if (!request.create) throw NotFound("no in-memory storage '" + request.rest + "' in this process");
      return media.emplace(request.rest, make_memory_medium(request.uri)).first->second;
    });
  });
}

}  // namespace amphora::testing
