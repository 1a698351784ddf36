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
  NXRT_AVX512_TILE SlicePrefetch(const GemmTileStore& st, int64_t kc)
      : at(st.prefetch),
        end(st.prefetch + 64 * std::min(st.prefetch_lines, kc)),
        every(st.prefetch_lines > 0 ? std::max<int64_t>(1, kc / st.prefetch_lines) : kc + 1),
        count(every) {}
  NXRT_AVX512_TILE void step() {
    if (--count == 0) {
      count = every;
      if (at < end) {
        _mm_prefetch(at, _MM_HINT_T1);
        at += 64;
      }
    }
  }
};

// C rows [0, MR) x NV vectors (the last under `last`) = epilogue(r): row and column bias,
// the old C, the residual, then clamp and / or HardSwish.
template <int MR, int NV>
NXRT_AVX512_TILE void store_tile(__m512 (&r)[MR][NV], float* c, int64_t ldc, __mmask16 last, const GemmTileStore& st) {
  __m512 cbv[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v)
    cbv[v] = st.col_bias ? _mm512_maskz_loadu_ps(v == NV - 1 ? last : __mmask16(0xFFFF), st.col_bias + v * 16)
                         : _mm512_setzero_ps();
  const __m512 lo = _mm512_set1_ps(st.lo), hi = _mm512_set1_ps(st.hi);
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    float* cr = c + m * ldc;
    const float* rr = st.residual ? st.residual + m * st.ldr : nullptr;
    const __m512 rb = _mm512_set1_ps(st.row_bias ? st.row_bias[m] : 0.f);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mk = v == NV - 1 ? last : __mmask16(0xFFFF);
      __m512 x = _mm512_add_ps(r[m][v], rb);
      if (st.col_bias) x = _mm512_add_ps(x, cbv[v]);
      if (st.accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, cr + v * 16));
      if (rr) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, rr + v * 16));
      // max/min return their second operand when either is NaN: NaN propagates.
      // (Zero-masked forms with a full mask: GCC 12's plain ones warn about _mm512_undefined_ps.)
      if (st.clamp) x = _mm512_maskz_min_ps(0xFFFF, hi, _mm512_maskz_max_ps(0xFFFF, lo, x));
      if (st.hardswish) x = hard_swish_avx512(x);
      _mm512_mask_storeu_ps(cr + v * 16, mk, x);
    }
  }
}

#undef NXRT_AVX512_TILE

}  // namespace nxrt::cpu::avx512
#endif
