// Expiring leases kept as objects of a medium (docs/FORMAT.md §1.5): what a
// medium without kernel locks (an object store, hosts sharing a bucket)
// offers its writers. A holder renews its lease in the background; one that
// dies or stalls past the expiry loses it to the next taker.

#include <amphora/json.hpp>
#include <amphora/storage/medium.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <condition_variable>
#include <map>
#include <random>
#include <thread>
#include <unistd.h>

namespace amphora {

namespace {

using Clock = std::chrono::system_clock;
constexpr std::size_t kMaxLeaseRecord = 4096;
constexpr std::int64_t kMaxTtlMs = 3600 * 1000;  // AMPHORA_LEASE_SECONDS' bound

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

std::string holder_id() {
  char host[64] = {};
  ::gethostname(host, sizeof host - 1);
  std::string h;
  for (char c : std::string(host)) h += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  std::mt19937_64 rng(std::random_device{}());
  char tail[17];
  std::snprintf(tail, sizeof tail, "%016llx", static_cast<unsigned long long>(rng()));
  return (h.empty() ? std::string("host") : h) + "-" + std::to_string(::getpid()) + "-" + tail;
}

}  // namespace

struct ObjectLeases::Impl {
  Medium& medium;
  Options options;
  std::string holder = holder_id();

  // What this process holds, renewed by `renewer`.
  struct Held {
    std::string key;
    std::string tag;
    bool lost = false;
    std::size_t handles = 1;  // shared leases of one name in this process share one object
    std::string shared_name;  // for a shared lease: its name
  };
  std::mutex mutex;
  // Held across one renewal's put and its bookkeeping, so a release sees the
  // tag of the last renewal, never one in flight.
  std::mutex renewing;
  std::condition_variable wake;
  std::map<std::uint64_t, std::shared_ptr<Held>> held;
  std::map<std::string, std::uint64_t> shared_ids;  // a shared lease's name -> its id in `held`
  std::uint64_t next_id = 0;
  std::atomic<std::uint64_t> next_key{0};
  std::thread renewer;
  bool stopping = false;

  Impl(Medium& m, Options o) : medium(m), options(o) {}

  std::string record(std::int64_t expires) const {
    return nlohmann::json{{"holder", holder},
                          {"pid", ::getpid()},
                          {"expires_at_ms", expires},
                          {"ttl_ms", options.ttl.count()}}
               .dump() +
           "\n";
  }

  // What a lease object says of its expiry, or nullopt when it is gone. A
  // record that does not parse counts as expired: garbage must not block forever.
  struct Seen {
    std::string tag;
    std::int64_t expires = 0;  // by its holder's clock
    std::int64_t ttl = 0;      // 0: not recorded
    ObjectInfo info;           // its write time and the medium's clock, when the medium gives them
  };
  std::optional<Seen> look(const std::string& key) {
    auto info = medium.head(key);
    if (!info) return std::nullopt;
    Seen seen{info->tag, 0, 0, *info};
    try {
      auto doc = parse_untrusted_json(medium.get(key, kMaxLeaseRecord));
      auto number = [&](const char* field, std::int64_t& out) {
        auto it = doc.find(field);
        if (it != doc.end() && it->is_number_integer()) out = it->get<std::int64_t>();
      };
      number("expires_at_ms", seen.expires);
      number("ttl_ms", seen.ttl);
      if (seen.ttl > kMaxTtlMs) seen.ttl = 0;  // past any ttl a holder sets (and no overflow below)
    } catch (const NotFound&) {
      return std::nullopt;
    } catch (const CorruptData&) {
    }
    return seen;
  }
  // On a medium that tells its own clock (an object store's Last-Modified
  // and Date), a lease is judged by that clock alone: expired once the
  // medium's now is past its last write by its ttl, plus a second for the
  // whole seconds those headers carry. Elsewhere by the holder's expiry and
  // the reader's clock, allowing `clock_skew` between them.
  bool expired(const Seen& seen) const {
    const std::chrono::system_clock::time_point never{};
    if (seen.ttl > 0 && seen.info.observed != never && seen.info.modified != never)
      return seen.info.observed - seen.info.modified > std::chrono::milliseconds(seen.ttl) + std::chrono::seconds(1);
    return now_ms() > seen.expires + options.clock_skew.count();
  }

  void sleep(int& round) {
    auto pause = options.poll * (1 << std::min(round++, 4));
    std::this_thread::sleep_for(pause);
  }

  // Puts the lease object `key` if absent, or over an expired holder's.
  std::optional<ObjectInfo> take(const std::string& key) {
    auto mine = record(now_ms() + options.ttl.count());
    if (auto info = medium.put(key, mine, PutCondition::absent())) return info;
    auto seen = look(key);
    if (!seen) return medium.put(key, mine, PutCondition::absent());
    if (expired(*seen)) return medium.put(key, mine, PutCondition::matching(seen->tag));
    return std::nullopt;
  }

  // Whether an unexpired exclusive holder of `name` exists.
  bool exclusive_held(const std::string& name) {
    auto seen = look("leases/" + name);
    return seen && !expired(*seen);
  }

  // Shared holders of `name` that have not expired; expired ones are removed.
  std::size_t live_shared(const std::string& name) {
    std::size_t live = 0;
    for (const auto& e : list_all(medium, "leases/" + name + ".shared/", true)) {
      if (e.kind != ListedEntry::Kind::object) continue;
      auto seen = look(e.key);
      if (!seen) continue;
      if (expired(*seen))
        medium.remove(e.key);
      else
        ++live;
    }
    return live;
  }

  void start_renewer() {
    if (renewer.joinable()) return;
    renewer = std::thread([this] { renew_loop(); });
  }

  void renew_loop() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      wake.wait_for(lock, options.ttl / 3);
      if (stopping) break;
      auto snapshot = held;
      lock.unlock();
      for (auto& [id, h] : snapshot) {
        std::lock_guard renewal(renewing);
        std::string tag;
        {
          std::lock_guard guard(mutex);
          if (h->lost || !held.count(id)) continue;  // lost, or released since the snapshot
          tag = h->tag;
        }
        try {
          auto info = medium.put(h->key, record(now_ms() + options.ttl.count()), PutCondition::matching(tag));
          std::lock_guard guard(mutex);
          if (info)
            h->tag = info->tag;
          else
            h->lost = true;  // replaced: another holder took it over
        } catch (...) {
          // The medium failed this time; the next round tries again before the
          // expiry. Whatever it threw: a medium of the user's own need not
          // throw amphora::Error, and an exception leaving this thread would
          // end the process.
        }
      }
      lock.lock();
    }
  }

  void release(std::uint64_t id) {
    std::shared_ptr<Held> h;
    {
      std::lock_guard lock(mutex);
      auto it = held.find(id);
      if (it == held.end()) return;
      h = it->second;
      if (--h->handles > 0) return;  // another handle of this process still holds it
      if (!h->shared_name.empty()) shared_ids.erase(h->shared_name);
      held.erase(it);
    }
    std::lock_guard renewal(renewing);  // no renewal of it in flight from here on
    std::string tag;
    {
      std::lock_guard lock(mutex);
      tag = h->tag;
    }
    try {
      // Only our own version goes: a lease taken over belongs to its new holder.
      if (auto info = medium.head(h->key); info && info->tag == tag) medium.remove(h->key);
    } catch (...) {
      // Left to expire. Whatever the medium threw: this runs in a destructor.
    }
  }
};

namespace {

class ObjectLease : public Lease {
 public:
  ObjectLease(ObjectLeases::Impl& impl, std::shared_ptr<ObjectLeases> keep, std::uint64_t id,
              std::shared_ptr<const bool> lost_flag)
      : impl_(impl), keep_(std::move(keep)), id_(id), lost_(std::move(lost_flag)) {}
  ~ObjectLease() override { impl_.release(id_); }
  bool held() const override {
    std::lock_guard lock(impl_.mutex);
    return !*lost_;
  }

 private:
  ObjectLeases::Impl& impl_;
  std::shared_ptr<ObjectLeases> keep_;  // the renewer runs while a lease lives
  std::uint64_t id_;
  std::shared_ptr<const bool> lost_;
};

}  // namespace

std::shared_ptr<ObjectLeases> ObjectLeases::create(Medium& medium, Options options) {
  if (options.ttl.count() < 3) throw InvalidArgument("a lease's ttl must be at least 3 ms");
  return std::shared_ptr<ObjectLeases>(new ObjectLeases(std::make_unique<Impl>(medium, options)));
}

ObjectLeases::ObjectLeases(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ObjectLeases::~ObjectLeases() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->renewer.joinable()) impl_->renewer.join();
}

std::unique_ptr<Lease> ObjectLeases::acquire(std::string_view name_view, LeaseMode mode, bool wait) {
  check_lease_name(name_view);
  const std::string name(name_view);
  auto& impl = *impl_;
  std::string key;
  std::optional<ObjectInfo> info;
  int round = 0;
  if (mode == LeaseMode::exclusive) {
    key = "leases/" + name;
    while (!(info = impl.take(key))) {
      if (!wait) return nullptr;
      impl.sleep(round);
    }
  } else {
    {
      // This process holds the name shared already: one more handle on it.
      std::lock_guard lock(impl.mutex);
      if (auto it = impl.shared_ids.find(name); it != impl.shared_ids.end()) {
        auto h = impl.held.at(it->second);
        if (!h->lost) {
          ++h->handles;
          return std::make_unique<ObjectLease>(impl, shared_from_this(), it->second,
                                               std::shared_ptr<const bool>(h, &h->lost));
        }
        h->shared_name.clear();  // lost: the next one taken below stands for the name
        impl.shared_ids.erase(it);
      }
    }
    for (;;) {
      if (!impl.exclusive_held(name)) {
        key = "leases/" + name + ".shared/" + impl.holder + "-" + std::to_string(impl.next_key++);
        info = impl.medium.put(key, impl.record(now_ms() + impl.options.ttl.count()), PutCondition::absent());
        // An exclusive taker that came meanwhile goes first: it may already
        // have counted the shared holders without this one.
        if (info && !impl.exclusive_held(name)) break;
        if (info) impl.medium.remove(key);
        info.reset();
      }
      if (!wait) return nullptr;
      impl.sleep(round);
    }
  }
  auto held = std::make_shared<Impl::Held>(Impl::Held{key, info->tag, false, 1, {}});
  std::uint64_t id;
  {
    std::lock_guard lock(impl.mutex);
    id = impl.next_id++;
    impl.held.emplace(id, held);
    if (mode == LeaseMode::shared && !impl.shared_ids.count(name)) {
      held->shared_name = name;
      impl.shared_ids.emplace(name, id);
    }
    impl.start_renewer();
  }
  // The handle refers to the flag through the Held it lives in.
  auto lost = std::shared_ptr<const bool>(held, &held->lost);
  auto lease = std::make_unique<ObjectLease>(impl, shared_from_this(), id, lost);
  if (mode == LeaseMode::exclusive) {
    // Shared holders that came before this one finish first.
    round = 0;
    while (impl.live_shared(name) > 0) {
      if (!wait) return nullptr;  // the lease is released with the handle
      impl.sleep(round);
    }
  }
  return lease;
}

}  // namespace amphora
