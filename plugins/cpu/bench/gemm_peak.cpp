// Measures this core's FP32 FMA peak with a register-only FMA loop (the ISA the
// GEMM uses: AVX-512 or AVX2), then the packed GEMM on the bench models' shapes,
// and prints each as GFLOP/s and as a share of the peak. Best of several runs,
// so other load on the machine lowers the numbers less.
// Usage: nxrt_cpu_gemm_peak [--threads N] [--reps R] [--cpu-time] [--cold] [--bf16]
// --bf16 times the bf16 fast-math GEMM (cpu.precision=bf16, gemm_bf16.hpp) instead; its
// share is of twice the FP32 FMA peak (VDPBF16PS: two multiply-adds per lane).
// --cold runs each rep on another copy of the packed weights (copies of at
// least 256 MB in all), so B comes from memory as in a model run, where the
// weights of all layers together exceed the cache, instead of from L3.
// --cpu-time (1 thread) times by the thread's CPU time instead of the wall
// clock: on a shared machine, time the scheduler gives to other jobs then
// does not count (their cache and memory traffic still does).
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu_info.hpp"
#include "gemm.hpp"
#include "gemm_bf16.hpp"
#include "scratch.hpp"
#include "thread_pool.hpp"

using namespace nxrt::cpu;

namespace {

bool g_cpu_time = false;

double now_seconds() {
  if (g_cpu_time) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_seconds();
    f();
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

#if defined(__x86_64__)
// 12 independent accumulators: enough to cover FMA latency x throughput on
// current cores (4 cycles x 2 pipes = 8 in flight).
__attribute__((target("avx2,fma"), noinline)) float fma_loop_avx2(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(float(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}
__attribute__((target("avx512f"), noinline)) float fma_loop_avx512(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(float(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}
#endif

// FLOP/s of one core's FMA units, for the ISA the GEMM runs.
double fma_peak(int reps) {
#if defined(__x86_64__)
  const int64_t iters = 5'000'000;
  volatile float sink = 0;
  if (active_isa() == Isa::avx512) {
    const double s = best_seconds(reps, [&] { sink = fma_loop_avx512(iters); });
    return double(iters) * 12 * 16 * 2 / s;
  }
  if (active_isa() == Isa::avx2) {
    const double s = best_seconds(reps, [&] { sink = fma_loop_avx2(iters); });
    return double(iters) * 12 * 8 * 2 / s;
  }
  (void)sink;
#endif
  return 0;
}

struct Shape {
  const char* what;
  int64_t M, N, K;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 7;
  bool cold = false, bf16 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--cpu-time")) g_cpu_time = true;
    else if (!std::strcmp(argv[i], "--cold")) cold = true;
    else if (!std::strcmp(argv[i], "--bf16")) bf16 = true;
    else {
      fmt::print(stderr, "usage: nxrt_cpu_gemm_peak [--threads N] [--reps R] [--cpu-time] [--cold] [--bf16]\n");
      return 2;
    }
  }
  if (g_cpu_time && threads != 1) {
    fmt::print(stderr, "nxrt_cpu_gemm_peak: --cpu-time needs --threads 1 (one thread's CPU time)\n");
    return 2;
  }
  if (bf16 && !gemm_bf16_supported()) {
    fmt::print(stderr, "nxrt_cpu_gemm_peak: --bf16 needs AVX-512 BF16, which this CPU (or NXRT_CPU_ISA) lacks\n");
    return 2;
  }
  const double peak = fma_peak(reps);  // re-measured beside each shape below
  fmt::print("cpu: {} ({}), gemm kernel {}\n", cpu_info().model_name, cpu_info().isa_name(), gemm_kernel_name());
  fmt::print("fma peak, 1 core: {:.1f} GFLOP/s{}\n", peak / 1e9, cold ? "; weights from memory (--cold)" : "");
  ThreadPool pool(threads);
  const Shape shapes[] = {{"mlp layer 1", 64, 4096, 1024},        {"mlp layer 2", 64, 4096, 4096},
                          {"mlp layer 3", 64, 1024, 4096},        {"transformer qkv/out", 128, 768, 768},
                          {"transformer ffn up", 128, 3072, 768}, {"transformer ffn down", 128, 768, 3072}};
  fmt::print("{:<22} {:>5} {:>5} {:>5} {:>9} {:>8}\n", "shape", "M", "N", "K", "GFLOP/s", "of peak");
  for (const Shape& s : shapes) {
    std::vector<float> a(size_t(s.M * s.K)), b(size_t(s.K * s.N)), c(size_t(s.M * s.N));
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 13) * 0.01f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 7) * 0.01f;
    const size_t pb_floats = bf16 ? packed_b_bf16_slots(s.K, s.N) : packed_b_floats(s.K, s.N);
    const size_t copies = cold ? std::max<size_t>(2, (size_t(256) << 20) / (pb_floats * sizeof(float)) + 1) : 1;
    std::vector<AlignedFloats> pb(copies);
    for (AlignedFloats& p : pb) {
      p.resize(pb_floats);
      if (bf16) pack_b_bf16(b.data(), s.N, false, s.K, s.N, p.data());
      else pack_b(b.data(), s.N, false, s.K, s.N, p.data());  // weights: packed once, as at kernel creation
    }
    size_t rep = 0;
    const double sec = best_seconds(reps, [&] {
      const float* w = pb[rep++ % copies].data();
      // Activations packed per run, as MatMul does (per thread where the threads split B).
      GemmPackA A;
      A.a = a.data();
      A.lda = s.K;
      A.bf16 = bf16;
      gemm_pack_a_and_multiply(s.M, s.N, s.K, A, w, c.data(), s.N, GemmEpilogue{}, threads > 1 ? &pool : nullptr);
    });
    // The peak again right after: clock and neighbours drift on shared machines,
    // so the share uses the better of the two peak measurements.
    const double local_peak = std::max(peak, fma_peak(reps));
    const double gf = 2.0 * double(s.M) * double(s.N) * double(s.K) / sec / 1e9;
    fmt::print("{:<22} {:>5} {:>5} {:>5} {:>9.1f} {:>7.0f}%\n", s.what, s.M, s.N, s.K, gf,
               local_peak > 0 ? 100.0 * gf * 1e9 / (local_peak * threads * (bf16 ? 2 : 1)) : 0.0);
  }
  if (threads > 1) fmt::print("(% of {} x the 1-core peak)\n", threads);
  if (bf16) fmt::print("(bf16 GEMM: % of 2 x the FP32 FMA peak)\n");
  // The micro-kernel alone on one 8 x 48 tile whose operands stay in L1 (the kc the driver
  // uses for this ISA): what it can do when memory does not limit it. The gap between this
  // line and the shapes above is the driver's and the caches' share.
  {
    const GemmTileFn tile = gemm_tile_active();
    const int64_t kc = gemm_kc_for(tile), calls = 20000;
    AlignedFloats ta(size_t(kc * kGemmMR)), tb(size_t(kc * kGemmNR)), tc(size_t(kGemmMR * kGemmNR));
    for (size_t i = 0; i < ta.size(); ++i) ta.data()[i] = float(i % 5) * 0.01f;
    for (size_t i = 0; i < tb.size(); ++i) tb.data()[i] = float(i % 3) * 0.01f;
    GemmTileStore st;
    st.accumulate = true;
    const double sec = best_seconds(reps, [&] {
      for (int64_t i = 0; i < calls; ++i)
        tile(kc, ta.data(), tb.data(), kGemmNR, kGemmNR, false, tc.data(), kGemmNR, kGemmMR, kGemmNR, st);
    });
    const double gf = 2.0 * double(kGemmMR * kGemmNR * kc) * double(calls) / sec / 1e9;
    const double local_peak = std::max(peak, fma_peak(reps));
    fmt::print("{:<22} {:>5} {:>5} {:>5} {:>9.1f} {:>7.0f}%  (1 thread, operands in L1)\n", "micro-kernel alone",
               kGemmMR, kGemmNR, kc, gf, local_peak > 0 ? 100.0 * gf * 1e9 / local_peak : 0.0);
  }
  return 0;
}
