// What a core pays to write (or read) a buffer, by who touched it last: the cost behind the
// 2-thread splits that hand operands between cores (docs/performance.md, "Thirty-seventh
// session"). Thread A (this one, CPU 0) times one pass over the buffer after thread B (CPU 1)
// or A itself prepared it; before each case both threads read 64 MB, so nothing else of the
// buffer stays cached. Prints the fastest of the runs in ns per 64-byte line. The figures depend
// on where the two CPUs sit (on a 2-vCPU guest, where the hypervisor put them).
// Usage: nxrt_cpu_coherence [--kb N] [--reps R]   (x86-64 with AVX-512, 2+ CPUs)
#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) && defined(__linux__)
// GCC 12's _mm512_reduce_add_ps reads an "undefined" vector.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include "cpu_info.hpp"

namespace {

constexpr size_t kLine = 64;
std::atomic<float> g_sink{0.f};

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

__attribute__((target("avx512f"), noinline)) void read_all(const float* p, size_t n) {
  __m512 a = _mm512_setzero_ps();
  for (size_t i = 0; i < n; i += 16) a = _mm512_add_ps(a, _mm512_load_ps(p + i));
  g_sink.store(_mm512_reduce_add_ps(a), std::memory_order_relaxed);
}

__attribute__((target("avx512f"), noinline)) void write_all(float* p, size_t n, float v) {
  const __m512 a = _mm512_set1_ps(v);
  for (size_t i = 0; i < n; i += 16) _mm512_store_ps(p + i, a);
}

__attribute__((target("avx512f"), noinline)) void stream_all(float* p, size_t n, float v) {
  const __m512 a = _mm512_set1_ps(v);
  for (size_t i = 0; i < n; i += 16) _mm512_stream_ps(p + i, a);
  _mm_sfence();
}

__attribute__((noinline)) void prefetchw_all(float* p, size_t n) {
  for (size_t i = 0; i < n; i += 16) asm volatile("prefetchw %0" ::"m"(p[i]));
}

__attribute__((target("clflushopt"), noinline)) void flush_all(float* p, size_t n) {
  for (size_t i = 0; i < n; i += 16) _mm_clflushopt(p + i);
  _mm_sfence();
}

// Thread B: runs the step it is handed, on CPU 1.
class Other {
 public:
  enum Step { kIdle, kRead, kWrite, kEvict, kStop };
  Other(float* buf, size_t n, const std::vector<float>& big) : buf_(buf), n_(n), big_(big) {
    thread_ = std::thread([this] {
      pin_to(1);
      for (;;) {
        int s;
        while ((s = step_.load(std::memory_order_acquire)) == kIdle) _mm_pause();
        if (s == kStop) return;
        if (s == kRead) read_all(buf_, n_);
        if (s == kWrite) write_all(buf_, n_, 2.f);
        if (s == kEvict) read_all(big_.data(), big_.size());
        step_.store(kIdle, std::memory_order_release);
      }
    });
  }
  ~Other() {
    step_.store(kStop, std::memory_order_release);
    thread_.join();
  }
  void run(Step s) {
    step_.store(s, std::memory_order_release);
    while (step_.load(std::memory_order_acquire) != kIdle) _mm_pause();
  }

 private:
  float* buf_;
  size_t n_;
  const std::vector<float>& big_;
  std::atomic<int> step_{kIdle};
  std::thread thread_;
};

// Prepares the buffer (after both threads have read 64 MB), then a timed pass over it.
struct Case {
  const char* name;
  void (*prepare)(float* buf, size_t n, Other& b, const std::vector<float>& big);
  void (*timed)(float* buf, size_t n);
};

void a_wrote(float* p, size_t n, Other&, const std::vector<float>&) { write_all(p, n, 1.f); }
void a_wrote_read(float* p, size_t n, Other&, const std::vector<float>&) {
  write_all(p, n, 1.f);
  read_all(p, n);
}
void in_memory(float* p, size_t n, Other&, const std::vector<float>& big) {
  write_all(p, n, 1.f);
  read_all(big.data(), big.size());
}
void b_wrote(float*, size_t, Other& b, const std::vector<float>&) { b.run(Other::kWrite); }
void b_read(float* p, size_t n, Other& b, const std::vector<float>&) {
  write_all(p, n, 1.f);
  b.run(Other::kRead);
}
void b_read_prefetchw(float* p, size_t n, Other& b, const std::vector<float>& big) {
  b_read(p, n, b, big);
  prefetchw_all(p, n);
}
void b_read_flushed(float* p, size_t n, Other& b, const std::vector<float>& big) {
  b_read(p, n, b, big);
  flush_all(p, n);
}

void a_writes(float* p, size_t n) { write_all(p, n, 3.f); }
void a_streams(float* p, size_t n) { stream_all(p, n, 3.f); }
void a_reads(float* p, size_t n) { read_all(p, n); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> kbs = {256, 1024};
  int reps = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--kb" && i + 1 < argc) kbs = {size_t(std::atoll(argv[++i]))};
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else {
      fmt::print(stderr, "usage: nxrt_cpu_coherence [--kb N] [--reps R]\n");
      return 2;
    }
  }
  if (std::thread::hardware_concurrency() < 2 || !nxrt::cpu::cpu_info().avx512f) {
    fmt::print("nxrt_cpu_coherence needs 2 CPUs and AVX-512; this machine has {} CPUs\n",
               std::thread::hardware_concurrency());
    return 0;
  }
  pin_to(0);
  std::vector<float> big(size_t(64) << 20 >> 2, 1.f);  // 64 MB read to evict the buffer
  const Case cases[] = {
      {"A wrote, A writes", a_wrote, a_writes},
      {"A wrote, A read, A writes", a_wrote_read, a_writes},
      {"in memory, A writes", in_memory, a_writes},
      {"B wrote, A writes", b_wrote, a_writes},
      {"A wrote, B read, A writes", b_read, a_writes},
      {"A wrote, B read, A streams (movntps)", b_read, a_streams},
      {"A wrote, B read, A prefetchw, A writes", b_read_prefetchw, a_writes},
      {"A wrote, B read, A clflushopt, A writes", b_read_flushed, a_writes},
      {"  (the clflushopt pass itself)", b_read, flush_all},
      {"B wrote, A reads", b_wrote, a_reads},
      {"A wrote, B read, A reads", b_read, a_reads},
  };
  for (size_t kb : kbs) {
    const size_t n = kb * 1024 / sizeof(float), lines = kb * 1024 / kLine;
    float* buf = static_cast<float*>(std::aligned_alloc(kLine, kb * 1024));
    std::memset(buf, 0, kb * 1024);
    {
      Other b(buf, n, big);
      fmt::print("{} KB ({} lines), fastest of {} runs, ns per line:\n", kb, lines, reps);
      for (const Case& c : cases) {
        double best = 1e30;
        for (int r = 0; r < reps; ++r) {
          b.run(Other::kEvict);
          read_all(big.data(), big.size());
          c.prepare(buf, n, b, big);
          const auto t0 = std::chrono::steady_clock::now();
          c.timed(buf, n);
          const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - t0;
          best = std::min(best, took.count());
        }
        fmt::print("  {:<42} {:6.2f}\n", c.name, best / double(lines));
      }
    }
    std::free(buf);
  }
  return 0;
}

#else
int main() {
  fmt::print("nxrt_cpu_coherence: x86-64 Linux only\n");
  return 0;
}
#endif
