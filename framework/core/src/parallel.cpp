#include <amphora/digest.hpp>
#include <amphora/parallel.hpp>

#include "io_parallel.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <unistd.h>
#include <vector>

namespace amphora {

namespace {

std::size_t configured_threads() {
  if (const char* env = std::getenv("AMPHORA_THREADS")) {
    try {
      long n = std::stol(env);
      if (n >= 1 && n <= 1024) return static_cast<std::size_t>(n);
    } catch (...) {
    }
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// One parallel_for: its indices, taken one at a time by whichever threads
// run work(). `parent` is the loop whose index was running on the thread that
// started this one (null at top level): the loops a thread may help with
// while it waits for its own are those started, directly or not, by it.
class Pool;

struct Loop : std::enable_shared_from_this<Loop> {
  Pool* pool = nullptr;  // told when the last index finishes, to wake the waiting caller
  std::size_t count = 0;
  const std::function<void(std::size_t)>* body = nullptr;
  std::shared_ptr<Loop> parent;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::size_t finished = 0;
  std::atomic<bool> done{false};  // finished == count, readable without `mutex`
  std::exception_ptr error;

  static inline thread_local Loop* running = nullptr;  // the loop whose index this thread runs

  bool exhausted() const { return next.load(std::memory_order_relaxed) >= count; }
  bool descends_from(const Loop* ancestor) const {
    for (const Loop* p = parent.get(); p; p = p->parent.get())
      if (p == ancestor) return true;
    return false;
  }

  void work() {
    Loop* outer = std::exchange(running, this);
    for (;;) {
      std::size_t i = next.fetch_add(1);
      if (i >= count) break;
      if (!failed.load(std::memory_order_relaxed)) {
        try {
          (*body)(i);
        } catch (...) {
          std::lock_guard lock(mutex);
          if (!error) error = std::current_exception();
          failed = true;
        }
      }
      bool last;
      {
        std::lock_guard lock(mutex);
        last = ++finished == count;
        if (last) done = true;
      }
      if (last) finished_all();
    }
    running = outer;
  }

  void finished_all();
};

// Helpers only ever pick up work the caller is also pulling from, so a full
// pool (or an empty one) slows a loop down but never blocks it.
class Pool {
 public:
  // A forked child gets a copy of the pool's memory but none of its threads,
  // and possibly a mutex some parent thread held: it must never touch the
  // parent's pool. The child handler forgets it (leaks it, deliberately) and
  // the child's first parallel loop builds a pool of its own.
  static Pool& instance() {
    std::call_once(atfork_once_, [] { ::pthread_atfork(&lock_for_fork, &unlock_after_fork, &reset_in_child); });
    if (Pool* pool = current_.load(std::memory_order_acquire)) return *pool;
    std::lock_guard lock(creation_mutex());
    if (!current_.load(std::memory_order_relaxed)) {
      Pool* pool = new Pool(configured_threads() - 1);
      pool->older_ = abandoned_;
      current_.store(pool, std::memory_order_release);
    }
    return *current_.load(std::memory_order_relaxed);
  }

  std::size_t helpers() const { return workers_.size(); }

  void submit(std::shared_ptr<Loop> loop) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(loop));
    }
    cv_.notify_one();
    waiting_.notify_all();
  }

  /// Returns once every index of `loop` has finished. Meanwhile the calling
  /// thread runs queued helpers of loops started beneath `loop`, and sleeps
  /// when there are none. Helping only with descendants adds no wait the
  /// caller did not already have: `loop` cannot finish before they do,
  /// whoever runs them.
  void wait_helping(const Loop& loop) {
    std::unique_lock lock(mutex_);
    while (!loop.done) {
      std::shared_ptr<Loop> job;
      for (auto it = jobs_.begin(); it != jobs_.end();) {
        if ((*it)->exhausted()) {  // nothing left to take: running it is a no-op
          it = jobs_.erase(it);
        } else if ((*it)->descends_from(&loop)) {
          job = std::move(*it);
          jobs_.erase(it);
          break;
        } else {
          ++it;
        }
      }
      if (job) {
        lock.unlock();
        job->work();
        lock.lock();
      } else {
        waiting_.wait(lock);
      }
    }
  }

  /// Wakes the callers waiting in wait_helping (one of them owns `loop`).
  void loop_done() {
    { std::lock_guard lock(mutex_); }  // a waiter is either before its check or asleep
    waiting_.notify_all();
  }

 private:
  explicit Pool(std::size_t wanted) {
    // libcrypto initialises itself on first use and keeps state for the thread
    // that did so; let the calling thread do it rather than a worker.
    (void)Sha256::of("", 0);
    for (std::size_t i = 0; i < wanted; ++i) {
      try {
        workers_.emplace_back([this] { run(); });
      } catch (const std::system_error& e) {
        // Under a thread limit (ulimit -u, a pids cgroup) run with what started:
        // the caller always takes part, so every loop still completes.
        std::fprintf(stderr, "amphora: warning: started %zu of %zu worker threads (%s); continuing with %zu\n",
                     workers_.size(), wanted, e.what(), workers_.size() + 1);
        break;
      }
    }
    // Workers live until the process exits; a pool is never destroyed, so
    // exit never waits on (or races with) a busy worker.
    for (auto& t : workers_) t.detach();
  }

  void run() {
    for (;;) {
      std::shared_ptr<Loop> job;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job->work();
    }
  }

  static std::mutex& creation_mutex() {
    static std::mutex* m = new std::mutex;
    return *m;
  }
  static void lock_for_fork() { creation_mutex().lock(); }
  static void unlock_after_fork() { creation_mutex().unlock(); }
  static void reset_in_child() {
    abandoned_ = current_.exchange(nullptr);  // kept reachable, never used again
    new (&creation_mutex()) std::mutex;  // the parent's lock state means nothing here
  }

  static inline std::once_flag atfork_once_;
  static inline std::atomic<Pool*> current_{nullptr};
  static inline Pool* abandoned_ = nullptr;

  Pool* older_ = nullptr;
  std::mutex mutex_;
  std::condition_variable cv_;       // workers: a job was queued
  std::condition_variable waiting_;  // callers: a job was queued, or a loop finished
  std::deque<std::shared_ptr<Loop>> jobs_;
  std::vector<std::thread> workers_;
};

void Loop::finished_all() { pool->loop_done(); }

}  // namespace

std::size_t parallel_threads() { return Pool::instance().helpers() + 1; }

void parallel_for(std::size_t count, const std::function<void(std::size_t)>& body, std::size_t max_threads) {
  std::size_t threads = std::min(count, max_threads ? std::min(max_threads, parallel_threads()) : parallel_threads());
  if (threads <= 1) {
    for (std::size_t i = 0; i < count; ++i) body(i);
    return;
  }
  Pool& pool = Pool::instance();
  auto loop = std::make_shared<Loop>();
  loop->pool = &pool;
  loop->count = count;
  loop->body = &body;
  if (Loop::running) loop->parent = Loop::running->shared_from_this();
  for (std::size_t t = 1; t < threads; ++t) pool.submit(loop);
  loop->work();
  // With loops nested (children saved side by side, each hashing its pieces
  // side by side) the inner loops' helpers would otherwise wait for a worker
  // while this thread sits idle.
  pool.wait_helping(*loop);
  std::exception_ptr error;
  {
    std::lock_guard lock(loop->mutex);
    // Taken out of the loop, so the exception's last reference is dropped by
    // the thread that handles it, never by a worker releasing the loop.
    error = std::exchange(loop->error, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void detail::run_parallel(std::size_t count, std::size_t jobs, const std::function<void(std::size_t)>& body) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (std::size_t k; (k = next.fetch_add(1)) < count;) {
      try {
        body(k);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = count;
      }
    }
  };
  {
    std::vector<std::jthread> threads;  // joined however this block is left
    try {
      for (std::size_t t = 1; t < std::min(jobs, count); ++t) threads.emplace_back(worker);
    } catch (const std::system_error&) {
      // No more threads to be had: fewer do it all.
    }
    worker();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace amphora
