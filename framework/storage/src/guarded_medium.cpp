#include "guarded_medium.hpp"

#include "error_boundary.hpp"

namespace amphora::detail {

namespace {

// Runs one call of the medium at `where`, translating what escapes it.
template <class F>
auto guarded(const std::string& where, F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const Error&) {
    throw;
  } catch (...) {
    rethrow_translated(Blame::medium, "storage " + where);
  }
}

class GuardedFile : public RandomAccessFile {
 public:
  GuardedFile(std::unique_ptr<RandomAccessFile> inner, std::string where)
      : inner_(std::move(inner)), where_(std::move(where)) {}
  std::uint64_t size() const override { return guarded(where_, [&] { return inner_->size(); }); }
  void read_at(std::uint64_t offset, std::size_t size, std::byte* dst) const override {
    guarded(where_, [&] { inner_->read_at(offset, size, dst); });
  }

 private:
  std::unique_ptr<RandomAccessFile> inner_;
  std::string where_;
};

class GuardedStagedFile : public StagedFile {
 public:
  GuardedStagedFile(std::unique_ptr<StagedFile> inner, std::string where)
      : inner_(std::move(inner)), where_(std::move(where)) {}
  void write_at(std::uint64_t offset, ConstBytes data) override {
    guarded(where_, [&] { inner_->write_at(offset, data); });
  }
  void write_parts_at(std::uint64_t offset, std::span<const ConstBytes> parts) override {
    guarded(where_, [&] { inner_->write_parts_at(offset, parts); });
  }
  void reserve(std::uint64_t size) override { guarded(where_, [&] { inner_->reserve(size); }); }
  std::uint64_t hashed_write_size() const override { return guarded(where_, [&] { return inner_->hashed_write_size(); }); }
  void write_hashed_at(std::uint64_t offset, ConstBytes data, const Sha256Value& sha256) override {
    guarded(where_, [&] { inner_->write_hashed_at(offset, data, sha256); });
  }
  void close() override { guarded(where_, [&] { inner_->close(); }); }

 private:
  std::unique_ptr<StagedFile> inner_;
  std::string where_;
};

class GuardedStaging : public Staging {
 public:
  GuardedStaging(std::unique_ptr<Staging> inner, std::string where) : inner_(std::move(inner)), where_(std::move(where)) {}
  std::unique_ptr<StagedFile> create_file(std::string_view relpath) override {
    return std::make_unique<GuardedStagedFile>(guarded(where_, [&] { return inner_->create_file(relpath); }), where_);
  }
  bool publish(std::string_view prefix, std::string_view marker, std::string_view bytes) override {
    return guarded(where_, [&] { return inner_->publish(prefix, marker, bytes); });
  }
  void replace(std::string_view prefix, std::string_view marker, std::string_view bytes) override {
    guarded(where_, [&] { inner_->replace(prefix, marker, bytes); });
  }

 private:
  std::unique_ptr<Staging> inner_;
  std::string where_;
};

class GuardedLease : public Lease {
 public:
  GuardedLease(std::unique_ptr<Lease> inner, std::string where) : inner_(std::move(inner)), where_(std::move(where)) {}
  bool held() const override { return guarded(where_, [&] { return inner_->held(); }); }

 private:
  std::unique_ptr<Lease> inner_;
  std::string where_;
};

class GuardedMedium : public Medium {
 public:
  explicit GuardedMedium(std::shared_ptr<Medium> inner) : inner_(std::move(inner)) {
    where_ = guarded("medium", [&] { return inner_->location(); });
  }
  std::string location() const override { return where_; }
  bool maps_in_place() const override { return inner_->maps_in_place(); }
  std::optional<ObjectInfo> head(std::string_view key) override {
    return guarded(where_, [&] { return inner_->head(key); });
  }
  std::vector<HeadAnswer> head_each(std::string_view prefix, std::span<const std::string> names) override {
    return guarded(where_, [&] { return inner_->head_each(prefix, names); });
  }
  std::string get(std::string_view key, std::size_t max_bytes) override {
    return guarded(where_, [&] { return inner_->get(key, max_bytes); });
  }
  std::unique_ptr<RandomAccessFile> open(std::string_view key) override {
    return std::make_unique<GuardedFile>(guarded(where_, [&] { return inner_->open(key); }), where_);
  }
  std::optional<ObjectInfo> put(std::string_view key, std::string_view bytes, const PutCondition& condition) override {
    return guarded(where_, [&] { return inner_->put(key, bytes, condition); });
  }
  bool remove(std::string_view key) override { return guarded(where_, [&] { return inner_->remove(key); }); }
  ListPage list(std::string_view prefix, std::string_view start_after, bool shallow, std::size_t limit) override {
    return guarded(where_, [&] { return inner_->list(prefix, start_after, shallow, limit); });
  }
  std::shared_ptr<const Buffer> map(std::string_view key) override {
    return guarded(where_, [&] { return inner_->map(key); });
  }
  std::unique_ptr<RandomAccessFile> open_sized(std::string_view key, std::uint64_t size) override {
    return std::make_unique<GuardedFile>(guarded(where_, [&] { return inner_->open_sized(key, size); }), where_);
  }
  std::shared_ptr<const Buffer> map_sized(std::string_view key, std::uint64_t size) override {
    return guarded(where_, [&] { return inner_->map_sized(key, size); });
  }
  void make_folder(std::string_view prefix) override { guarded(where_, [&] { inner_->make_folder(prefix); }); }
  std::unique_ptr<Staging> begin_staging() override {
    return std::make_unique<GuardedStaging>(guarded(where_, [&] { return inner_->begin_staging(); }), where_);
  }
  std::unique_ptr<Staging> begin_staging_at(std::string_view prefix) override {
    return std::make_unique<GuardedStaging>(guarded(where_, [&] { return inner_->begin_staging_at(prefix); }), where_);
  }
  std::uint64_t remove_folder(std::string_view prefix, std::string_view marker) override {
    return guarded(where_, [&] { return inner_->remove_folder(prefix, marker); });
  }
  std::unique_ptr<Lease> lease(std::string_view name, LeaseMode mode, bool wait) override {
    auto held = guarded(where_, [&] { return inner_->lease(name, mode, wait); });
    if (!held) return nullptr;
    return std::make_unique<GuardedLease>(std::move(held), where_);
  }
  StagingSweep sweep_staging(bool dry_run, std::chrono::seconds grace) override {
    return guarded(where_, [&] { return inner_->sweep_staging(dry_run, grace); });
  }

 private:
  std::shared_ptr<Medium> inner_;
  std::string where_;
};

}  // namespace

std::shared_ptr<Medium> guard_medium(std::shared_ptr<Medium> inner) {
  return std::make_shared<GuardedMedium>(std::move(inner));
}

}  // namespace amphora::detail
