#include <amphora/digest.hpp>
#include <amphora/parallel.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
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

// Helpers only ever pick up work the caller is also pulling from, so a full
// pool slows a loop down but never blocks it.
class Pool {
 public:
  static Pool& instance() {
    static Pool pool(configured_threads() - 1);
    return pool;
  }

  void submit(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

  ~Pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

 private:
  explicit Pool(std::size_t helpers) {
    // libcrypto initialises itself on first use and keeps state for the thread
    // that did so; let the calling thread do it rather than a worker.
    (void)Sha256::of("", 0);
    for (std::size_t i = 0; i < helpers; ++i) workers_.emplace_back([this] { run(); });
  }

  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
};

struct Loop {
  std::size_t count = 0;
  const std::function<void(std::size_t)>* body = nullptr;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::condition_variable cv;
  std::size_t finished = 0;
  std::exception_ptr error;

  void work() {
    for (;;) {
      std::size_t i = next.fetch_add(1);
      if (i >= count) return;
      if (!failed.load(std::memory_order_relaxed)) {
        try {
          (*body)(i);
        } catch (...) {
          std::lock_guard lock(mutex);
          if (!error) error = std::current_exception();
          failed = true;
        }
      }
      std::lock_guard lock(mutex);
      if (++finished == count) cv.notify_all();
    }
  }
};

}  // namespace

std::size_t parallel_threads() {
  static const std::size_t n = configured_threads();
  return n;
}

void parallel_for(std::size_t count, const std::function<void(std::size_t)>& body, std::size_t max_threads) {
  std::size_t threads = std::min(count, max_threads ? std::min(max_threads, parallel_threads()) : parallel_threads());
  if (threads <= 1) {
    for (std::size_t i = 0; i < count; ++i) body(i);
    return;
  }
  auto loop = std::make_shared<Loop>();
  loop->count = count;
  loop->body = &body;
  for (std::size_t t = 1; t < threads; ++t) Pool::instance().submit([loop] { loop->work(); });
  loop->work();
  std::unique_lock lock(loop->mutex);
  loop->cv.wait(lock, [&] { return loop->finished == count; });
  if (loop->error) std::rethrow_exception(loop->error);
}

}  // namespace amphora
