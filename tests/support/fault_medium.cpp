#include "fault_medium.hpp"

#include <csignal>
#include <new>
#include <stdexcept>

namespace amphora::testing {

namespace {

// A staged file whose writes reach "before:write RELPATH" first (a disk
// filling up as a save writes its payload).
class FaultStagedFile : public StagedFile {
 public:
  FaultStagedFile(FaultMedium& medium, std::unique_ptr<StagedFile> inner, std::string relpath)
      : medium_(medium), inner_(std::move(inner)), relpath_(std::move(relpath)) {}
  void write_at(std::uint64_t offset, ConstBytes data) override {
    medium_.reach("before:write", relpath_);
    inner_->write_at(offset, data);
  }
  void write_parts_at(std::uint64_t offset, std::span<const ConstBytes> parts) override {
    medium_.reach("before:write", relpath_);
    inner_->write_parts_at(offset, parts);
  }
  void reserve(std::uint64_t size) override { inner_->reserve(size); }
  void close() override { inner_->close(); }

 private:
  FaultMedium& medium_;
  std::unique_ptr<StagedFile> inner_;
  std::string relpath_;
};

class FaultStaging : public Staging {
 public:
  FaultStaging(FaultMedium& medium, std::unique_ptr<Staging> inner) : medium_(medium), inner_(std::move(inner)) {}
  std::unique_ptr<StagedFile> create_file(std::string_view relpath) override {
    return std::make_unique<FaultStagedFile>(medium_, inner_->create_file(relpath), std::string(relpath));
  }
  bool publish(std::string_view prefix, std::string_view marker, std::string_view bytes) override {
    medium_.reach("before:publish", prefix);
    bool done = inner_->publish(prefix, marker, bytes);
    medium_.reach("after:publish", prefix);
    return done;
  }
  void replace(std::string_view prefix, std::string_view marker, std::string_view bytes) override {
    medium_.reach("before:replace", prefix);
    inner_->replace(prefix, marker, bytes);
    medium_.reach("after:replace", prefix);
  }

 private:
  FaultMedium& medium_;
  std::unique_ptr<Staging> inner_;
};

}  // namespace

FaultMedium::FaultMedium(std::shared_ptr<Medium> inner, bool generic_staging)
    : inner_(std::move(inner)), generic_staging_(generic_staging) {}

void FaultMedium::arm(std::string point, Action action, std::string key_prefix, int skip, bool once) {
  if (action == Action::run) throw std::invalid_argument("FaultMedium::arm: Action::run is armed with on()");
  std::lock_guard lock(mutex_);
  arms_.push_back({std::move(point), action, std::move(key_prefix), skip, once});
}

void FaultMedium::on(std::string point, std::function<void()> then, std::string key_prefix, int skip) {
  std::lock_guard lock(mutex_);
  arms_.push_back({std::move(point), Action::run, std::move(key_prefix), skip, true, false, std::move(then)});
}

void FaultMedium::disarm() {
  std::lock_guard lock(mutex_);
  arms_.clear();
}

int FaultMedium::triggered() const {
  std::lock_guard lock(mutex_);
  return triggered_;
}

std::vector<std::string> FaultMedium::trace() const {
  std::lock_guard lock(mutex_);
  return trace_;
}

void FaultMedium::reach(std::string_view point, std::string_view key) {
  std::unique_lock lock(mutex_);
  trace_.push_back(std::string(point) + " " + std::string(key));
  for (auto& arm : arms_) {
    if (arm.spent || arm.point != point || !key.starts_with(arm.prefix)) continue;
    if (arm.skip > 0) {
      --arm.skip;
      continue;
    }
    arm.spent = arm.once;
    ++triggered_;
    Action action = arm.action;
    auto then = arm.then;
    lock.unlock();
    if (action == Action::run) {
      then();
      return;
    }
    const std::string what = "injected fault at " + std::string(point) + " on " + std::string(key);
    switch (action) {
      case Action::kill: ::raise(SIGKILL); break;
      case Action::foreign: throw std::runtime_error(what);
      case Action::no_memory: throw std::bad_alloc();
      case Action::fail:
      case Action::run: break;
    }
    throw IoError(what);
  }
}

std::string FaultMedium::location() const { return inner_->location(); }

std::optional<ObjectInfo> FaultMedium::head(std::string_view key) {
  reach("before:head", key);
  auto out = inner_->head(key);
  reach("after:head", key);
  return out;
}

std::string FaultMedium::get(std::string_view key, std::size_t max_bytes) {
  reach("before:get", key);
  auto out = inner_->get(key, max_bytes);
  reach("after:get", key);
  return out;
}

std::unique_ptr<RandomAccessFile> FaultMedium::open(std::string_view key) {
  reach("before:open", key);
  auto out = inner_->open(key);
  reach("after:open", key);
  return out;
}

std::shared_ptr<const Buffer> FaultMedium::map(std::string_view key) {
  reach("before:map", key);
  auto out = inner_->map(key);
  reach("after:map", key);
  return out;
}

std::optional<ObjectInfo> FaultMedium::put(std::string_view key, std::string_view bytes, const PutCondition& condition) {
  reach("before:put", key);
  auto out = inner_->put(key, bytes, condition);
  reach("after:put", key);
  return out;
}

bool FaultMedium::remove(std::string_view key) {
  reach("before:remove", key);
  bool out = inner_->remove(key);
  reach("after:remove", key);
  return out;
}

ListPage FaultMedium::list(std::string_view prefix, std::string_view start_after, bool shallow, std::size_t limit) {
  reach("before:list", prefix);
  auto out = inner_->list(prefix, start_after, shallow, limit);
  reach("after:list", prefix);
  return out;
}

void FaultMedium::make_folder(std::string_view prefix) { inner_->make_folder(prefix); }

std::unique_ptr<Staging> FaultMedium::begin_staging() {
  return std::make_unique<FaultStaging>(*this, generic_staging_ ? Medium::begin_staging() : inner_->begin_staging());
}

std::uint64_t FaultMedium::remove_folder(std::string_view prefix, std::string_view marker) {
  reach("before:remove_folder", prefix);
  auto out = inner_->remove_folder(prefix, marker);
  reach("after:remove_folder", prefix);
  return out;
}

std::unique_ptr<Lease> FaultMedium::lease(std::string_view name, LeaseMode mode, bool wait) {
  reach("before:lease", name);
  auto out = inner_->lease(name, mode, wait);
  reach("after:lease", name);
  return out;
}

StagingSweep FaultMedium::sweep_staging(bool dry_run, std::chrono::seconds grace) {
  reach("before:sweep", "");
  auto out = inner_->sweep_staging(dry_run, grace);
  reach("after:sweep", "");
  return out;
}

}  // namespace amphora::testing
