// One persistent pool of intra-op threads per session. The calling thread
// takes part in every job. Workers spin briefly after a job, then sleep on a
// condition variable. A job's indices are split into one contiguous block per
// thread (the caller's the first, each worker always the same one after it): a
// thread runs its own block first, then takes what is left of the others'. So
// the same part of consecutive jobs (a layer's output pixels and the next
// layer's reads of them) runs on the same core, and no thread waits on a late
// one. If another thread is already using the pool (concurrent runs on one
// session), a job runs serially on its caller, so the pool is safe to share
// without ever blocking one run on another.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace nxrt::cpu {

class ThreadPool {
 public:
  // `threads` counts the caller: threads - 1 workers are started.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }

  // Calls fn(i) for every i in [0, n), spread over the pool; returns when all
  // calls are done. fn must not throw.
  template <typename F>
  void run(int64_t n, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_raw(n, [](void* c, int64_t i) { (*static_cast<Fn*>(c))(i); }, const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Task = void (*)(void*, int64_t);
  void run_raw(int64_t n, Task task, void* ctx);
  void worker_main(int slot);
  void work(Task task, void* ctx, int slot);
  void publish(uint64_t state);  // stores the new state and wakes sleepers

  std::vector<std::thread> workers_;
  std::mutex busy_;  // held by the thread that owns the current job
  // Job description, written before the job is published.
  Task task_ = nullptr;
  void* ctx_ = nullptr;
  // Next index of each thread's block (slot 0: the caller), on lines of their own.
  struct alignas(64) Block {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<Block[]> blocks_;
  // state_: generation << 32 | open bit << 16 | workers inside the job. A
  // worker joins only an open job of the generation it saw; the caller closes
  // the job when it runs out of indices and then waits only for workers that
  // joined, never for one that has not been scheduled yet.
  std::atomic<uint64_t> state_{0};
  uint64_t generation_ = 0;  // owned by the busy_ holder
  std::atomic<bool> stop_{false};
  // Sleeping workers (after their spin) wait here.
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  std::atomic<int> sleepers_{0};
};

// Runs fn(i) for i in [0, n): on the pool when given and worth it, else inline.
template <typename F>
inline void parallel_for(ThreadPool* pool, int64_t n, F&& fn) {
  if (!pool || pool->threads() <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->run(n, fn);
}

// How many threads a job of `work` multiply-adds (or element operations)
// deserves: about one thread per `per_thread` units, at most the pool size.
inline int threads_for(const ThreadPool* pool, double work, double per_thread = 65536.0) {
  if (!pool) return 1;
  double t = work / per_thread;
  int n = t < 1.0 ? 1 : t > pool->threads() ? pool->threads() : int(t);
  return n < 1 ? 1 : n;
}

// Splits [0, total) into `parts` near-equal ranges; returns range `i`.
inline void split_range(int64_t total, int64_t parts, int64_t i, int64_t& begin, int64_t& end) {
  int64_t base = total / parts, rem = total % parts;
  begin = i * base + (i < rem ? i : rem);
  end = begin + base + (i < rem ? 1 : 0);
}

// Runs fn(begin, end) over [0, total) split into min(parts, total) near-equal
// ranges: on the pool when that is more than one, else once, inline.
template <typename F>
inline void parallel_ranges(ThreadPool* pool, int64_t total, int64_t parts, F&& fn) {
  if (parts > total) parts = total;
  if (parts <= 1) {
    fn(int64_t(0), total);
    return;
  }
  parallel_for(pool, parts, [&](int64_t c) {
    int64_t b = 0, e = 0;
    split_range(total, parts, c, b, e);
    fn(b, e);
  });
}

}  // namespace nxrt::cpu
