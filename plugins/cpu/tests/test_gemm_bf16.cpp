// The bf16 fast-math GEMM (cpu.precision=bf16): rounding, packing and the product against a
// double-precision reference of the same bf16-rounded operands.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu_info.hpp"
#include "gemm_bf16.hpp"
#include "scratch.hpp"
#include "thread_pool.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

TEST_CASE("to_bf16 rounds to nearest even, flushes subnormals, keeps NaN and infinity") {
  CHECK(to_bf16(1.f) == 0x3F80);
  CHECK(to_bf16(-2.f) == 0xC000);
  CHECK(to_bf16(1.f + 0x1p-8f) == 0x3F80);      // a tie: to the even 1.0
  CHECK(to_bf16(1.f + 3 * 0x1p-8f) == 0x3F82);  // a tie: to the even 1 + 2^-6
  CHECK(to_bf16(1.f + 0x1p-8f + 0x1p-20f) == 0x3F81);
  CHECK(to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds up to infinity
  CHECK(to_bf16(std::numeric_limits<float>::denorm_min()) == 0);
  CHECK(to_bf16(-std::numeric_limits<float>::denorm_min()) == 0x8000);
  CHECK(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(from_bf16(to_bf16(3.5f)) == 3.5f);
}

TEST_CASE("bf16 GEMM is available exactly where the CPU has AVX-512 BF16") {
  const bool want = cpu_info().avx512bf16 && active_isa() == Isa::avx512;
  CHECK(gemm_bf16_supported() == want);
  CHECK((gemm_tile_bf16() != nullptr) == want);
  CHECK((gemm_pack_a_bf16_tile() != nullptr) == want);
  if (!want) MESSAGE("no AVX-512 BF16 here (or NXRT_CPU_ISA caps it): the kernel checks below are skipped");
}

namespace {

std::vector<float> rounded(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = from_bf16(to_bf16(v[i]));
  return r;
}

}  // namespace

TEST_CASE("bf16 A packing: the vector path rounds as the scalar one") {
  if (!gemm_bf16_supported()) return;
  const int64_t M = 13, K = 37;
  auto a = random_floats(size_t(M * K), 5, -3.f, 3.f);
  // Values the rounding treats specially: ties, subnormals, NaN, infinities, overflow.
  a[0] = 1.f + 0x1p-8f;
  a[1] = 1.f + 3 * 0x1p-8f;
  a[2] = std::numeric_limits<float>::denorm_min() * 5;
  a[3] = -std::numeric_limits<float>::quiet_NaN();
  a[4] = std::numeric_limits<float>::infinity();
  a[5] = std::numeric_limits<float>::max();
  a[6] = -0.f;
  std::vector<float> at(a.size());  // A transposed: packed by the scalar path
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) at[size_t(k * M + m)] = a[size_t(m * K + k)];
  std::vector<float> vec(packed_a_bf16_slots(M, K)), scalar(vec.size());
  pack_a_bf16_parallel(a.data(), K, false, M, K, 0.5f, vec.data(), nullptr);
  pack_a_bf16_parallel(at.data(), M, true, M, K, 0.5f, scalar.data(), nullptr);
  CHECK(std::memcmp(vec.data(), scalar.data(), vec.size() * sizeof(float)) == 0);
}

namespace {

void check_bf16_gemm(int64_t M, int64_t N, int64_t K, bool bias, bool residual, bool clamp, bool accumulate,
                     ThreadPool* pool) {
  INFO("M=" << M << " N=" << N << " K=" << K << " bias=" << bias << " residual=" << residual << " clamp=" << clamp
            << " accumulate=" << accumulate);
  auto a = random_floats(size_t(M * K), uint32_t(M * 7 + K));
  auto b = random_floats(size_t(K * N), uint32_t(N * 11 + K));
  auto cb = random_floats(size_t(N), 3);
  auto res = random_floats(size_t(M * N), 4);
  auto c0 = random_floats(size_t(M * N), 6);
  const auto ar = rounded(a), br = rounded(b);
  std::vector<float> want(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(ar[size_t(m * K + k)]) * double(br[size_t(k * N + n)]);
      if (bias) s += cb[size_t(n)];
      if (accumulate) s += c0[size_t(m * N + n)];
      if (residual) s += res[size_t(m * N + n)];
      if (clamp) s = std::clamp(s, 0.0, 0.5);
      want[size_t(m * N + n)] = float(s);
    }
  std::vector<float> pb(packed_b_bf16_slots(K, N)), pa(packed_a_bf16_slots(M, K)), got = c0;
  pack_b_bf16(b.data(), N, false, K, N, pb.data());
  pack_a_bf16_parallel(a.data(), K, false, M, K, 1.f, pa.data(), pool);
  GemmEpilogue ep;
  ep.col_bias = bias ? cb.data() : nullptr;
  ep.residual = residual ? res.data() : nullptr;
  ep.ldr = N;
  ep.accumulate = accumulate;
  ep.clamp = clamp;
  ep.lo = 0.f;
  ep.hi = 0.5f;
  gemm_packed_bf16(M, N, K, pa.data(), pb.data(), got.data(), N, ep, pool);
  // What MatMul calls: packing A inside (per thread where the threads split B's panels).
  std::vector<float> packing = c0;
  GemmPackA A;
  A.a = a.data();
  A.lda = K;
  A.bf16 = true;
  gemm_pack_a_and_multiply(M, N, K, A, pb.data(), packing.data(), N, ep, pool);
  CHECK(packing == got);
  // The same bf16 operands, summed in float32 (K up to ~1000 terms of |x| <= 1).
  CHECK(worst(got, want, 1e-4, 2e-5 * double(K)) <= 1.0);
  // And against the float32 product of the unrounded operands: bf16's precision.
  if (!bias && !residual && !clamp && !accumulate) {
    double err = 0, mag = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += double(a[size_t(m * K + k)]) * double(b[size_t(k * N + n)]);
        err = std::max(err, std::fabs(s - double(got[size_t(m * N + n)])));
        mag = std::max(mag, std::fabs(s));
      }
    CHECK(err <= 0.02 * std::max(1.0, mag));
  }
}

}  // namespace

TEST_CASE("bf16 GEMM matches a reference of the bf16-rounded operands") {
  if (!gemm_bf16_supported()) return;
  ThreadPool pool(3);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    check_bf16_gemm(1, 1, 1, false, false, false, false, p);
    check_bf16_gemm(7, 17, 3, false, false, false, false, p);
    check_bf16_gemm(8, 48, 32, false, false, false, false, p);
    check_bf16_gemm(13, 100, 33, false, false, false, false, p);
    check_bf16_gemm(64, 200, 515, false, false, false, false, p);  // K odd, more than one K block
    check_bf16_gemm(128, 768, 64, false, false, false, false, p);
    check_bf16_gemm(33, 96, 1025, true, true, false, false, p);
    check_bf16_gemm(9, 50, 40, true, false, true, false, p);
    check_bf16_gemm(16, 64, 20, false, false, false, true, p);
    check_bf16_gemm(5, 7, 600, true, true, true, true, p);
  }
}
