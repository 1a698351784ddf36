#include "thread_pool.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_PAUSE() _mm_pause()
#else
#define NXRT_PAUSE() ((void)0)
#endif

namespace nxrt::cpu {

namespace {
constexpr int kSpinIterations = 1 << 12;  // a few tens of microseconds before sleeping
constexpr uint64_t kOpen = uint64_t(1) << 16;
constexpr uint64_t kActiveMask = kOpen - 1;
inline uint64_t gen_of(uint64_t s) { return s >> 32; }
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) threads = 1;
  if (threads > int(kActiveMask)) threads = int(kActiveMask);
  blocks_ = std::make_unique<Block[]>(size_t(threads));
  workers_.reserve(size_t(threads - 1));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  publish((generation_ + 1) << 32);
  for (auto& t : workers_) t.join();
}

void ThreadPool::publish(uint64_t state) {
  state_.store(state, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(sleep_mu_);  // a sleeper is either waiting or will see the new state
    sleep_cv_.notify_all();
  }
}

void ThreadPool::work(Task task, void* ctx, int slot) {
  const int t = threads();
  for (int k = 0; k < t; ++k) {  // own block first, then the others' in turn
    Block& b = blocks_[size_t((slot + k) % t)];
    for (;;) {
      const int64_t i = b.next.fetch_add(1, std::memory_order_relaxed);
      if (i >= b.end) break;
      task(ctx, i);
    }
  }
}

void ThreadPool::worker_main(int slot) {
  uint64_t seen = 0;  // generation at construction: a job published before this thread runs is still seen
  for (;;) {
    uint64_t s = state_.load(std::memory_order_acquire);
    for (int k = 0; gen_of(s) == seen && k < kSpinIterations; ++k) {
      NXRT_PAUSE();
      s = state_.load(std::memory_order_acquire);
    }
    if (gen_of(s) == seen) {
      std::unique_lock lock(sleep_mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (gen_of(state_.load(std::memory_order_seq_cst)) == seen) sleep_cv_.wait(lock);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      continue;
    }
    seen = gen_of(s);
    if (stop_.load(std::memory_order_acquire)) return;
    // Join the job if it is still open.
    bool joined = false;
    while ((s & kOpen) && gen_of(s) == seen) {
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    work(task_, ctx_, slot);
    state_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run_raw(int64_t n, Task task, void* ctx) {
  if (n <= 0) return;
  std::unique_lock lock(busy_, std::try_to_lock);
  if (workers_.empty() || n == 1 || !lock.owns_lock()) {
    for (int64_t i = 0; i < n; ++i) task(ctx, i);
    return;
  }
  task_ = task;
  ctx_ = ctx;
  const int t = threads();
  for (int b = 0; b < t; ++b) {
    int64_t begin = 0, end = 0;
    split_range(n, t, b, begin, end);
    blocks_[size_t(b)].next.store(begin, std::memory_order_relaxed);
    blocks_[size_t(b)].end = end;
  }
  ++generation_;
  publish((generation_ << 32) | kOpen);
  work(task, ctx, 0);
  // Close the job; wait for the workers that joined it.
  uint64_t s = state_.fetch_and(~kOpen, std::memory_order_acq_rel) & ~kOpen;
  for (int k = 0; (s & kActiveMask) != 0; ++k) {
    if (k < (1 << 16)) NXRT_PAUSE();
    else std::this_thread::yield();
    s = state_.load(std::memory_order_acquire);
  }
}

}  // namespace nxrt::cpu
