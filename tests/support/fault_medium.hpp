#pragma once
// A medium wrapping another that fails, or kills its process, at a named
// point: how tests reach the moments between a store's steps (a publish
// that dies, a name record that cannot be written) without any switch in
// the library itself.

#include <amphora/storage/medium.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace amphora::testing {

/// Passes every call to `inner`. Fault points are "before:OP" and
/// "after:OP" for OP one of head, get, open, map, put, remove, list,
/// publish, replace (of a staged folder), remove_folder, lease, sweep, and
/// "before:write" for each write to a staged file (keyed by its path in
/// the staged folder).
class FaultMedium : public Medium {
 public:
  enum class Action {
    fail,     ///< throw IoError("injected fault at POINT on KEY")
    kill,     ///< SIGKILL this process, as a crash at that moment would
    foreign,  ///< throw std::runtime_error, as a medium not written for Amphora might
    no_memory, ///< throw std::bad_alloc
    run       ///< call the function given to on(), then carry on: what another process does at that moment
  };
  /// With `generic_staging`, folders are staged by Medium's generic staging
  /// through this wrapper (each file a put it sees), as an object store
  /// stages them, instead of by `inner`'s own.
  explicit FaultMedium(std::shared_ptr<Medium> inner, bool generic_staging = false);

  /// Arms `point` for calls on keys starting with `key_prefix`: the
  /// `skip`+1-th such call (and, unless `once`, every one after it) triggers
  /// `action`. Thread-safe.
  void arm(std::string point, Action action, std::string key_prefix = {}, int skip = 0, bool once = true);
  /// Arms `point` to call `then` once (Action::run), on the medium's calling
  /// thread and with no lock of the wrapper held: it may use the medium.
  void on(std::string point, std::function<void()> then, std::string key_prefix = {}, int skip = 0);
  void disarm();
  /// How many times armed points have triggered.
  int triggered() const;
  /// Every point reached so far, with its key ("before:put names/x/1.json").
  std::vector<std::string> trace() const;

  std::string location() const override;
  std::optional<ObjectInfo> head(std::string_view key) override;
  std::string get(std::string_view key, std::size_t max_bytes) override;
  std::unique_ptr<RandomAccessFile> open(std::string_view key) override;
  std::shared_ptr<const Buffer> map(std::string_view key) override;
  std::optional<ObjectInfo> put(std::string_view key, std::string_view bytes, const PutCondition& condition) override;
  bool remove(std::string_view key) override;
  ListPage list(std::string_view prefix, std::string_view start_after, bool shallow, std::size_t limit) override;
  void make_folder(std::string_view prefix) override;
  std::unique_ptr<Staging> begin_staging() override;
  std::uint64_t remove_folder(std::string_view prefix, std::string_view marker) override;
  std::unique_ptr<Lease> lease(std::string_view name, LeaseMode mode, bool wait) override;
  StagingSweep sweep_staging(bool dry_run, std::chrono::seconds grace) override;

  /// Called by the wrappers: triggers `point` for `key` if armed.
  void reach(std::string_view point, std::string_view key);

 private:
  struct Arm {
    std::string point;
    Action action;
    std::string prefix;
    int skip;
    bool once;
    bool spent = false;
    std::function<void()> then{};
  };
  std::shared_ptr<Medium> inner_;
  bool generic_staging_;
  mutable std::mutex mutex_;
  std::vector<Arm> arms_;
  std::vector<std::string> trace_;
  int triggered_ = 0;
};

}  // namespace amphora::testing
