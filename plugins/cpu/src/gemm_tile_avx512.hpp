// What the AVX-512 GEMM micro-kernels (float32: gemm_avx512.cpp, bf16: gemm_bf16_avx512.cpp)
// share around their k loops: the paced prefetch of the next B slice and the store of the
// 8 x 48 accumulator block with the GemmTileStore epilogue. Included only by files compiled
// for x86-64; the functions carry the AVX-512 F target themselves.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "gemm.hpp"
#include "hard_swish.hpp"

namespace nxrt::cpu::avx512 {

#define NXRT_AVX512_TILE __attribute__((target("avx512f,fma,avx2"), always_inline)) inline

// The lanes of the last of nv column vectors that hold one of ncols columns (1..16 of them).
inline __mmask16 last_vector_mask(int64_t ncols, int nv) {
  const int64_t tail = ncols - int64_t(nv - 1) * 16;
  return __mmask16(tail >= 16 ? 0xFFFF : (1u << tail) - 1u);
}

// The next B slice into L2 (gemm_rect), one line every `every` k steps: spread out, so the
// misses do not fill the load queue in a burst. step() once per k step.
struct SlicePrefetch {
  const char* at;
  const char* end;
  int64_t every, count;
  bool nta;
  NXRT_AVX512_TILE SlicePrefetch(const GemmTileStore& st, int64_t kc)
      : at(st.prefetch),
        end(st.prefetch + 64 * std::min(st.prefetch_lines, kc)),
        every(st.prefetch_lines > 0 ? std::max<int64_t>(1, kc / st.prefetch_lines) : kc + 1),
        count(every),
        nta(st.prefetch_nta) {}
  NXRT_AVX512_TILE void step() {
    if (--count == 0) {
      count = every;
      if (at < end) {
        if (nta) _mm_prefetch(at, _MM_HINT_NTA);
        else _mm_prefetch(at, _MM_HINT_T1);
        at += 64;
      }
    }
  }
};

// C rows [0, MR) x NV vectors (the last under `last`) = epilogue(r): row and column bias,
// the old C, the residual, then clamp and / or HardSwish. One pass over the registers per
// term, each tested once per tile, and the stores last: tested per vector, every store made
// the compiler re-read and re-test st (C may alias it), 100+ branches a tile, which cost an
// 8 x 48 tile with 16 k steps (an expand conv's) 10-15% of its time.
template <int MR, int NV>
NXRT_AVX512_TILE void store_tile(__m512 (&r)[MR][NV], float* c, int64_t ldc, __mmask16 last, const GemmTileStore& st) {
  const float* const row_bias = st.row_bias;
  const float* const col_bias = st.col_bias;
  const float* const residual = st.residual;
  const int64_t ldr = st.ldr;
  const bool accumulate = st.accumulate, clamp = st.clamp, hardswish = st.hardswish;
  const __m512 lo = _mm512_set1_ps(st.lo), hi = _mm512_set1_ps(st.hi);
  // Every (m, v) of the tile, mk the store mask of v. (A macro: lambdas would not inherit
  // the AVX-512 target.)
#define NXRT_EACH_VECTOR(body)                                        \
  _Pragma("GCC unroll 8") for (int m = 0; m < MR; ++m)                \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v) {          \
    const __mmask16 mk = v == NV - 1 ? last : __mmask16(0xFFFF);      \
    (void)mk;                                                         \
    body;                                                             \
  }
  if (row_bias) NXRT_EACH_VECTOR(r[m][v] = _mm512_add_ps(r[m][v], _mm512_set1_ps(row_bias[m])))
  if (col_bias) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __m512 cb = _mm512_maskz_loadu_ps(v == NV - 1 ? last : __mmask16(0xFFFF), col_bias + v * 16);
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) r[m][v] = _mm512_add_ps(r[m][v], cb);
    }
  }
  if (accumulate) NXRT_EACH_VECTOR(r[m][v] = _mm512_add_ps(r[m][v], _mm512_maskz_loadu_ps(mk, c + m * ldc + v * 16)))
  if (residual) NXRT_EACH_VECTOR(r[m][v] = _mm512_add_ps(r[m][v], _mm512_maskz_loadu_ps(mk, residual + m * ldr + v * 16)))
  // max/min return their second operand when either is NaN: NaN propagates.
  // (Zero-masked forms with a full mask: GCC 12's plain ones warn about _mm512_undefined_ps.)
  if (clamp) NXRT_EACH_VECTOR(r[m][v] = _mm512_maskz_min_ps(0xFFFF, hi, _mm512_maskz_max_ps(0xFFFF, lo, r[m][v])))
  if (hardswish) NXRT_EACH_VECTOR(r[m][v] = hard_swish_avx512(r[m][v]))
  NXRT_EACH_VECTOR(_mm512_mask_storeu_ps(c + m * ldc + v * 16, mk, r[m][v]))
#undef NXRT_EACH_VECTOR
}

#undef NXRT_AVX512_TILE

}  // namespace nxrt::cpu::avx512
#endif
