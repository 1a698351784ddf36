// The bf16 GEMM's portable half: rounding, packing and the driver call (the micro-kernel
// and the vector A packing are in gemm_bf16_avx512.cpp).
#include "gemm_bf16.hpp"

#include <algorithm>
#include <cstring>

#include "cpu_info.hpp"

namespace nxrt::cpu {

uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40u);  // NaN: quiet, sign kept
  if ((u & 0x7F800000u) == 0) return uint16_t((u >> 16) & 0x8000u);         // zero or subnormal: signed zero
  u += 0x7FFFu + ((u >> 16) & 1u);                                          // nearest, ties to even
  return uint16_t(u >> 16);
}

float from_bf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

void store_bf16_pair(float* slot, uint16_t lo, uint16_t hi) {
  const uint32_t v = uint32_t(lo) | uint32_t(hi) << 16;
  std::memcpy(slot, &v, sizeof v);
}

bool gemm_bf16_supported() {
#if defined(__x86_64__)
  static const bool ok = cpu_info().avx512bf16 && active_isa() == Isa::avx512;
  return ok;
#else
  return false;
#endif
}

const char* gemm_bf16_kernel_name() { return "avx512bf16-8x48"; }

void pack_b_bf16(const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst) {
  const int64_t K2 = bf16_pairs(K);
  auto at = [&](int64_t k, int64_t n) -> uint16_t {
    if (k >= K) return 0;
    return to_bf16(trans ? b[n * ldb + k] : b[k * ldb + n]);
  };
  for (int64_t p = 0; p < gemm_panels(N); ++p) {
    const int64_t n0 = p * kGemmNR, w = gemm_panel_width(N, p), cols = std::min(kGemmNR, N - n0);
    float* d = dst + p * kGemmNR * K2;
    for (int64_t kp = 0; kp < K2; ++kp)
      for (int64_t j = 0; j < w; ++j)
        store_bf16_pair(d + kp * w + j, j < cols ? at(2 * kp, n0 + j) : 0, j < cols ? at(2 * kp + 1, n0 + j) : 0);
  }
}

void pack_a_bf16_parallel(const float* a, int64_t lda, bool trans, int64_t M, int64_t K, float alpha, float* dst,
                          ThreadPool* pool) {
  const GemmPackABf16Fn vec = gemm_pack_a_bf16_tile();
  const int64_t tiles = gemm_tiles(M), K2 = bf16_pairs(K);
  auto pack = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* d = dst + t * kGemmMR * K2;
      const int64_t m0 = t * kGemmMR, mr = std::min<int64_t>(kGemmMR, M - m0);
      if (!trans && vec) {
        vec(a + m0 * lda, lda, mr, K, alpha, d);
        continue;
      }
      auto at = [&](int64_t m, int64_t k) -> uint16_t {
        if (m >= mr || k >= K) return 0;
        return to_bf16(alpha * (trans ? a[k * lda + m0 + m] : a[(m0 + m) * lda + k]));
      };
      for (int64_t kp = 0; kp < K2; ++kp)
        for (int64_t m = 0; m < kGemmMR; ++m) store_bf16_pair(d + kp * kGemmMR + m, at(m, 2 * kp), at(m, 2 * kp + 1));
    }
  };
  // A copy bound by memory, as pack_a_parallel: a second thread from ~32K values.
  parallel_ranges(pool, tiles, threads_for(pool, double(M) * double(K), 1 << 15), pack);
}

void gemm_packed_bf16(int64_t M, int64_t N, int64_t K, const float* packed_a, const float* packed_b, float* c,
                      int64_t ldc, const GemmEpilogue& ep, ThreadPool* pool) {
  gemm_packed_with(gemm_tile_bf16(), M, N, bf16_pairs(K), packed_a, packed_b, c, ldc, ep, pool);
}

}  // namespace nxrt::cpu
