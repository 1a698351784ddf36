#include "pooling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu_info.hpp"
#include "simd.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the masked max's builtin.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace nxrt::cpu {

template <typename T>
static void max_pool_plane(const PoolShape& s, const T* x, T* y) {
  for (int64_t od = 0; od < s.out[0]; ++od)
    for (int64_t oh = 0; oh < s.out[1]; ++oh)
      for (int64_t ow = 0; ow < s.out[2]; ++ow) {
        T best = std::numeric_limits<T>::lowest();
        bool any = false;
        for (int64_t kd = 0; kd < s.kernel[0]; ++kd) {
          const int64_t id = od * s.stride[0] - s.pad_begin[0] + kd * s.dilation[0];
          if (id < 0 || id >= s.in[0]) continue;
          for (int64_t kh = 0; kh < s.kernel[1]; ++kh) {
            const int64_t ih = oh * s.stride[1] - s.pad_begin[1] + kh * s.dilation[1];
            if (ih < 0 || ih >= s.in[1]) continue;
            const T* row = x + (id * s.in[1] + ih) * s.in[2];
            for (int64_t kw = 0; kw < s.kernel[2]; ++kw) {
              const int64_t iw = ow * s.stride[2] - s.pad_begin[2] + kw * s.dilation[2];
              if (iw < 0 || iw >= s.in[2]) continue;
              const T v = row[iw];
              if (!any || v > best || v != v) best = v;
              any = true;
            }
          }
        }
        y[(od * s.out[1] + oh) * s.out[2] + ow] = best;
      }
}

// 2-D max pool, no dilation (float and 8-bit): per output row, the max of its window's
// input rows (clipped to the input: padding never wins) into vmax, then of each window's
// columns of vmax. Both loops run over whole rows with a compile-time stride (1, 2, or any),
// so they vectorise (a per-window loop ran at ~3.5 G compares/s on ResNet's 3x3/2 pool).
// `v > m ? v : m` throughout: a float NaN is skipped.
template <typename T>
constexpr T pool_lowest() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
}

template <typename T, int64_t SW>
__attribute__((always_inline)) inline void max_pool_columns(const T* __restrict vmax, T* __restrict yrow, int64_t OW,
                                                            int64_t W, int64_t KW, int64_t PL, int64_t sw) {
  const int64_t st = SW > 0 ? SW : sw;
  for (int64_t ow = 0; ow < OW; ++ow) yrow[ow] = pool_lowest<T>();
  for (int64_t kw = 0; kw < KW; ++kw) {
    const int64_t off = kw - PL;  // iw = ow*SW + off
    int64_t lo = off >= 0 ? 0 : (-off + st - 1) / st;
    int64_t hi = off >= W ? 0 : (W - 1 - off) / st + 1;
    lo = std::min(lo, OW);
    hi = std::clamp(hi, lo, OW);
    const T* src = vmax + off;
    for (int64_t ow = lo; ow < hi; ++ow) {
      const T v = src[ow * st];
      yrow[ow] = v > yrow[ow] ? v : yrow[ow];
    }
  }
}

// Output rows [oh0, oh1) of a plane whose input row ih lies at x + (ih - row0) * pitch.
template <typename T>
__attribute__((always_inline)) inline void max_pool_plane_2d_body(const PoolShape& s, const T* x, T* y, T* vmax,
                                                                  int64_t pitch, int64_t row0, int64_t oh0,
                                                                  int64_t oh1) {
  const int64_t H = s.in[1], W = s.in[2], OW = s.out[2];
  const int64_t KH = s.kernel[1], KW = s.kernel[2], SH = s.stride[1], SW = s.stride[2];
  const int64_t PT = s.pad_begin[1], PL = s.pad_begin[2];
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const int64_t h0 = oh * SH - PT;
    const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + KH, H);
    for (int64_t iw = 0; iw < W; ++iw) vmax[iw] = pool_lowest<T>();
    for (int64_t ih = hb; ih < he; ++ih) {
      const T* row = x + (ih - row0) * pitch;
      for (int64_t iw = 0; iw < W; ++iw) vmax[iw] = row[iw] > vmax[iw] ? row[iw] : vmax[iw];
    }
    T* yrow = y + oh * OW;
    if (SW == 1)
      max_pool_columns<T, 1>(vmax, yrow, OW, W, KW, PL, 1);
    else if (SW == 2)
      max_pool_columns<T, 2>(vmax, yrow, OW, W, KW, PL, 2);
    else
      max_pool_columns<T, 0>(vmax, yrow, OW, W, KW, PL, SW);
  }
}

NXRT_CLONES
static void max_pool_plane_2d(const PoolShape& s, const float* x, float* y, float* vmax, int64_t pitch, int64_t row0,
                              int64_t oh0, int64_t oh1) {
  max_pool_plane_2d_body(s, x, y, vmax, pitch, row0, oh0, oh1);
}

#if defined(__x86_64__)
// Lanes j of a 16-wide load at columns [start, start + 16) that fall inside [0, W).
__attribute__((target("avx512f"))) static inline __mmask16 pool_cols_mask(int64_t start, int64_t W) {
  const int64_t lo = std::clamp<int64_t>(-start, 0, 16), hi = std::clamp<int64_t>(W - start, lo, 16);
  return __mmask16(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

// The same plane for float, column stride SW 1 or 2, on AVX-512: 16 outputs at a time, the
// window's rows and columns all in registers (the two-pass form above stores and reloads
// its row buffer per input row: ResNet's 3x3/2 pool over 64 x 112 x 112 took 223 us, 2.5x
// this). Columns outside the input load as -inf; `max(v, m)` returns m when v is NaN, so a
// NaN is skipped as above.
template <int SW>
__attribute__((target("avx512f"))) static void max_pool_plane_2d_avx512(const PoolShape& s, const float* x, float* y,
                                                                        int64_t pitch, int64_t row0, int64_t oh0,
                                                                        int64_t oh1) {
  const int64_t H = s.in[1], W = s.in[2], OW = s.out[2];
  const int64_t KH = s.kernel[1], KW = s.kernel[2], SH = s.stride[1], PT = s.pad_begin[1], PL = s.pad_begin[2];
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512i next = _mm512_set_epi32(16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
  x -= row0 * pitch;  // (row ih at x + ih * pitch; only rows from row0 are read)
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const int64_t h0 = oh * SH - PT;
    const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + KH, H);
    float* yrow = y + oh * OW;
    for (int64_t o0 = 0; o0 < OW; o0 += 16) {
      __m512 m = lowest;
      if (SW == 2 && KW <= 3) {
        // Each row's 33 columns from lane 0 once (a, b and c's first lane), their maximum
        // over the rows, then the taps: even lanes (kw 0), odd (1), even shifted by one (2).
        const int64_t start = o0 * 2 - PL;
        const bool inside = start >= 0 && start + 33 <= W;  // (all but the edge chunks)
        const __mmask16 ma = inside ? 0xFFFF : pool_cols_mask(start, W),
                        mb = inside ? 0xFFFF : pool_cols_mask(start + 16, W),
                        mc = KW < 3 ? 0 : inside ? 1 : pool_cols_mask(start + 32, W) & 1;
        __m512 a = lowest, b = lowest, c = lowest;
        for (int64_t ih = hb; ih < he; ++ih) {
          const float* r = x + ih * pitch + start;
          a = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, ma, r), a);
          b = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, mb, r + 16), b);
          if (KW == 3) c = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, mc, r + 32), c);
        }
        const __m512 e = _mm512_permutex2var_ps(a, even, b);
        m = e;
        if (KW >= 2) m = _mm512_max_ps(_mm512_permutex2var_ps(a, odd, b), m);
        if (KW == 3) m = _mm512_max_ps(_mm512_permutex2var_ps(e, next, c), m);
      } else {
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t start = o0 * SW - PL + kw;  // column of lane 0
          const __mmask16 ma = pool_cols_mask(start, W);
          if constexpr (SW == 1) {
            for (int64_t ih = hb; ih < he; ++ih)
              m = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, ma, x + ih * pitch + start), m);
          } else {
            const __mmask16 mb = pool_cols_mask(start + 16, W);
            __m512 a = lowest, b = lowest;
            for (int64_t ih = hb; ih < he; ++ih) {
              a = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, ma, x + ih * pitch + start), a);
              b = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, mb, x + ih * pitch + start + 16), b);
            }
            m = _mm512_max_ps(_mm512_permutex2var_ps(a, even, b), m);
          }
        }
      }
      const int64_t n = std::min<int64_t>(16, OW - o0);
      _mm512_mask_storeu_ps(yrow + o0, __mmask16((1u << n) - 1u), m);
    }
  }
}

// The same on AVX2, 8 outputs at a time. Edge chunks (a window column outside the row) read
// their rows through a copy padded with -inf instead of masked loads.
template <int SW>
__attribute__((target("avx2"))) static void max_pool_plane_2d_avx2(const PoolShape& s, const float* x, float* y,
                                                                   int64_t pitch, int64_t row0, int64_t oh0,
                                                                   int64_t oh1) {
  const int64_t H = s.in[1], W = s.in[2], OW = s.out[2];
  const int64_t KH = s.kernel[1], KW = s.kernel[2], SH = s.stride[1], PT = s.pad_begin[1], PL = s.pad_begin[2];
  const float lowest_f = -std::numeric_limits<float>::infinity();
  const __m256 lowest = _mm256_set1_ps(lowest_f);
  const __m256i next = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
  // Columns a chunk of 8 outputs loads from `start` (whole vectors: at stride 2 the last
  // tap's 16 columns, odd ones unused).
  const int64_t span = SW == 2 ? KW + 15 : KW + 7;
  float edge[64];  // (KW <= 48 takes this form)
  x -= row0 * pitch;
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const int64_t h0 = oh * SH - PT;
    const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + KH, H);
    float* yrow = y + oh * OW;
    for (int64_t o0 = 0; o0 < OW; o0 += 8) {
      const int64_t start = o0 * SW - PL;
      const bool inside = start >= 0 && start + span <= W;
      // Row ih's columns from `start`: in place, or copied with -inf outside [0, W).
      auto row = [&](int64_t ih) -> const float* {
        const float* r = x + ih * pitch + start;
        if (inside) return r;
        for (int64_t j = 0; j < span; ++j) edge[j] = start + j >= 0 && start + j < W ? r[j] : lowest_f;
        return edge;
      };
      __m256 m = lowest;
      if (SW == 2 && KW <= 3) {
        __m256 a = lowest, b = lowest, c = lowest;
        for (int64_t ih = hb; ih < he; ++ih) {
          const float* r = row(ih);
          a = _mm256_max_ps(_mm256_loadu_ps(r), a);
          b = _mm256_max_ps(_mm256_loadu_ps(r + 8), b);
          if (KW == 3) c = _mm256_max_ps(_mm256_broadcast_ss(r + 16), c);
        }
        // [a0 a2 b0 b2 a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6]: even columns; odd likewise.
        const __m256 e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
        m = e;
        if (KW >= 2)
          m = _mm256_max_ps(
              _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8)), m);
        if (KW == 3) m = _mm256_max_ps(_mm256_blend_ps(_mm256_permutevar8x32_ps(e, next), c, 0x80), m);
      } else {
        for (int64_t ih = hb; ih < he; ++ih) {
          const float* r = row(ih);
          for (int64_t kw = 0; kw < KW; ++kw) {
            __m256 v;
            if (SW == 1) v = _mm256_loadu_ps(r + kw);
            else {  // stride 2: the even lanes of the 16 columns from kw
              const __m256 a = _mm256_loadu_ps(r + kw), b = _mm256_loadu_ps(r + kw + 8);
              v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
            }
            m = _mm256_max_ps(v, m);
          }
        }
      }
      const int64_t n = std::min<int64_t>(8, OW - o0);
      if (n == 8) {
        _mm256_storeu_ps(yrow + o0, m);
      } else {
        alignas(32) float tail[8];
        _mm256_store_ps(tail, m);
        std::copy(tail, tail + n, yrow + o0);
      }
    }
  }
}

// 8-bit planes with column stride 2 and windows of at most 3 columns (ResNet's 3x3/2 pool
// after the 8-bit stem) on AVX-512 VBMI: 32 outputs from one 64-byte load per window row
// and the 65th byte, their maximum over the rows, then each tap's even lanes by a byte
// permute. Columns outside the input load as the type's lowest, which the maximum ignores
// as the reference ignores padding. The rows-then-columns form above took 135 us for
// 64 x 112 x 112 on a Zen 5 (its strided column loop is scalar).
template <typename T>
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline __m512i max_8bit(__m512i a, __m512i b) {
  if constexpr (std::is_signed_v<T>) return _mm512_max_epi8(a, b);
  else return _mm512_max_epu8(a, b);
}

template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void max_pool_plane_2d_8bit_s2(
    const PoolShape& s, const T* x, T* y) {
  const int64_t H = s.in[1], W = s.in[2], OW = s.out[2];
  const int64_t KH = s.kernel[1], KW = s.kernel[2], SH = s.stride[1], PT = s.pad_begin[1], PL = s.pad_begin[2];
  const __m512i lowest = _mm512_set1_epi8(char(std::numeric_limits<T>::lowest()));
  alignas(64) uint8_t idx[3][64] = {};
  for (int j = 0; j < 32; ++j)
    for (int k = 0; k < 3; ++k) idx[k][j] = uint8_t(2 * j + k);
  const __m512i i0 = _mm512_load_si512(idx[0]), i1 = _mm512_load_si512(idx[1]), i2 = _mm512_load_si512(idx[2]);
  auto cols = [W](int64_t start) {  // lanes l with start + l in [0, W)
    const int64_t lo = std::clamp<int64_t>(-start, 0, 64), hi = std::clamp<int64_t>(W - start, lo, 64);
    const __mmask64 below = lo == 64 ? ~__mmask64(0) : (__mmask64(1) << lo) - 1;
    return (hi == 64 ? ~__mmask64(0) : (__mmask64(1) << hi) - 1) & ~below;
  };
  for (int64_t oh = 0; oh < s.out[1]; ++oh) {
    const int64_t h0 = oh * SH - PT;
    const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + KH, H);
    for (int64_t o0 = 0; o0 < OW; o0 += 32) {
      const int64_t start = 2 * o0 - PL;
      const __mmask64 ma = cols(start), mc = KW == 3 ? cols(start + 64) & 1 : 0;
      __m512i a = lowest, c = lowest;
      for (int64_t ih = hb; ih < he; ++ih) {
        const T* r = x + ih * W + start;
        a = max_8bit<T>(_mm512_mask_loadu_epi8(lowest, ma, r), a);
        if (mc) c = max_8bit<T>(_mm512_mask_loadu_epi8(lowest, mc, r + 64), c);
      }
      __m512i m = _mm512_permutexvar_epi8(i0, a);
      if (KW >= 2) m = max_8bit<T>(_mm512_permutexvar_epi8(i1, a), m);
      if (KW == 3) m = max_8bit<T>(_mm512_permutex2var_epi8(a, i2, c), m);
      const int64_t n = std::min<int64_t>(32, OW - o0);
      _mm256_mask_storeu_epi8(y + oh * OW + o0, n >= 32 ? __mmask32(~0u) : __mmask32((1u << n) - 1u),
                              _mm512_castsi512_si256(m));
    }
  }
}

static bool max_pool_8bit_s2_ok(const PoolShape& s) {
  static const bool vbmi = avx512bw_active() && cpu_info().avx512vbmi;
  return vbmi && max_pool_rows_ok(s) && s.stride[2] == 2 && s.kernel[2] <= 3;
}
#endif

// The AVX-512 or AVX2 plane kernel for `s` (float, 2-D, undilated), or null.
using MaxPoolPlaneFn = void (*)(const PoolShape&, const float*, float*, int64_t, int64_t, int64_t, int64_t);
static MaxPoolPlaneFn max_pool_plane_fast(const PoolShape& s) {
#if defined(__x86_64__)
  if (active_isa() == Isa::avx512 && s.in[2] < (int64_t(1) << 40)) {
    if (s.stride[2] == 1) return &max_pool_plane_2d_avx512<1>;
    if (s.stride[2] == 2) return &max_pool_plane_2d_avx512<2>;
  }
  if (active_isa() == Isa::avx2 && s.kernel[2] <= 48) {
    if (s.stride[2] == 1) return &max_pool_plane_2d_avx2<1>;
    if (s.stride[2] == 2) return &max_pool_plane_2d_avx2<2>;
  }
#else
  (void)s;
#endif
  return nullptr;
}

template <typename T>
static void max_pool_plane_2d_int(const PoolShape& s, const T* x, T* y, T* vmax) {
  max_pool_plane_2d_body(s, x, y, vmax, s.in[2], 0, 0, s.out[1]);
}

template <typename T>
void max_pool(const PoolShape& s, const T* x, T* y, ThreadPool* pool) {
  const int64_t planes = s.batch * s.channels;
  const int64_t in_plane = s.in[0] * s.in[1] * s.in[2], out_plane = s.out[0] * s.out[1] * s.out[2];
  const bool fast = max_pool_rows_ok(s);
  const double work = double(planes) * double(out_plane) * double(s.kernel[0] * s.kernel[1] * s.kernel[2]);
  const int t = threads_for(pool, work);
  const int64_t tasks = t <= 1 ? 1 : std::min<int64_t>(planes, int64_t(t) * 4);
  const MaxPoolPlaneFn plane_fn = fast && std::is_same_v<T, float> ? max_pool_plane_fast(s) : nullptr;
#if defined(__x86_64__)
  const bool fast_8bit = sizeof(T) == 1 && max_pool_8bit_s2_ok(s);
#endif
  parallel_for(t <= 1 ? nullptr : pool, tasks, [&](int64_t i) {
    int64_t b, e;
    split_range(planes, tasks, i, b, e);
    std::vector<float> vmax;  // one input row's window max (float fast path)
    for (int64_t p = b; p < e; ++p) {
      if (fast) {
        if constexpr (std::is_same_v<T, float>) {
          if (plane_fn) {
            plane_fn(s, x + p * in_plane, y + p * out_plane, s.in[2], 0, 0, s.out[1]);
            continue;
          }
          vmax.resize(static_cast<size_t>(s.in[2]));
          max_pool_plane_2d(s, x + p * in_plane, y + p * out_plane, vmax.data(), s.in[2], 0, 0, s.out[1]);
        } else {
#if defined(__x86_64__)
          if (fast_8bit) {
            max_pool_plane_2d_8bit_s2(s, x + p * in_plane, y + p * out_plane);
            continue;
          }
#endif
          std::vector<T> vmax(static_cast<size_t>(s.in[2]));
          max_pool_plane_2d_int(s, x + p * in_plane, y + p * out_plane, vmax.data());
        }
        continue;
      }
      max_pool_plane(s, x + p * in_plane, y + p * out_plane);
    }
  });
}

bool max_pool_rows_ok(const PoolShape& s) {
  return s.out[0] == 1 && s.in[0] == 1 && s.kernel[0] == 1 && s.dilation[1] == 1 && s.dilation[2] == 1;
}

void max_pool_plane_rows(const PoolShape& s, const float* x, int64_t pitch, int64_t row0, float* y, int64_t oh0,
                         int64_t oh1) {
  if (oh1 <= oh0) return;
  if (const MaxPoolPlaneFn fn = max_pool_plane_fast(s)) {
    fn(s, x, y, pitch, row0, oh0, oh1);
    return;
  }
  std::vector<float> vmax(static_cast<size_t>(s.in[2]));
  max_pool_plane_2d(s, x, y, vmax.data(), pitch, row0, oh0, oh1);
}

template void max_pool<float>(const PoolShape&, const float*, float*, ThreadPool*);
template void max_pool<int8_t>(const PoolShape&, const int8_t*, int8_t*, ThreadPool*);
template void max_pool<uint8_t>(const PoolShape&, const uint8_t*, uint8_t*, ThreadPool*);

template <typename T>
void max_pool_with_indices(const PoolShape& s, bool column_major, const T* x, T* y, int64_t* indices, ThreadPool* pool) {
  const int64_t planes = s.batch * s.channels;
  const int64_t in_plane = s.in[0] * s.in[1] * s.in[2], out_plane = s.out[0] * s.out[1] * s.out[2];
  const double work = double(planes) * double(out_plane) * double(s.kernel[0] * s.kernel[1] * s.kernel[2]);
  const int parts = threads_for(pool, work);
  parallel_ranges(pool, planes, parts, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const T* xp = x + p * in_plane;
      T* yp = y + p * out_plane;
      int64_t* ip = indices + p * out_plane;
      for (int64_t od = 0; od < s.out[0]; ++od)
        for (int64_t oh = 0; oh < s.out[1]; ++oh)
          for (int64_t ow = 0; ow < s.out[2]; ++ow) {
            T best = std::numeric_limits<T>::lowest();
            int64_t at = -1;  // stays -1 only for a window entirely in the padding
            for (int64_t kd = 0; kd < s.kernel[0]; ++kd) {
              const int64_t id = od * s.stride[0] - s.pad_begin[0] + kd * s.dilation[0];
              if (id < 0 || id >= s.in[0]) continue;
              for (int64_t kh = 0; kh < s.kernel[1]; ++kh) {
                const int64_t ih = oh * s.stride[1] - s.pad_begin[1] + kh * s.dilation[1];
                if (ih < 0 || ih >= s.in[1]) continue;
                for (int64_t kw = 0; kw < s.kernel[2]; ++kw) {
                  const int64_t iw = ow * s.stride[2] - s.pad_begin[2] + kw * s.dilation[2];
                  if (iw < 0 || iw >= s.in[2]) continue;
                  const int64_t row_major = (id * s.in[1] + ih) * s.in[2] + iw;
                  const T v = xp[row_major];
                  if (at < 0 || v > best || (v != v && best == best)) {  // first maximum; a NaN wins once
                    best = v;
                    at = column_major ? id + (ih + iw * s.in[1]) * s.in[0] : row_major;
                  }
                }
              }
            }
            const int64_t o = (od * s.out[1] + oh) * s.out[2] + ow;
            yp[o] = best;
            ip[o] = at < 0 ? -1 : p * in_plane + at;
          }
    }
  });
}

template void max_pool_with_indices<float>(const PoolShape&, bool, const float*, float*, int64_t*, ThreadPool*);
template void max_pool_with_indices<int8_t>(const PoolShape&, bool, const int8_t*, int8_t*, int64_t*, ThreadPool*);
template void max_pool_with_indices<uint8_t>(const PoolShape&, bool, const uint8_t*, uint8_t*, int64_t*, ThreadPool*);

NXRT_CLONES
static float plane_sum(const float* x, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j];
  float s = 0.f;
  for (; i < n; ++i) s += x[i];
  for (int j = 0; j < 16; ++j) s += acc[j];
  return s;
}

void global_average_pool(int64_t planes, int64_t spatial, const float* x, float* y, ThreadPool* pool) {
  const int t = threads_for(pool, double(planes) * double(spatial), 1 << 17);
  const int64_t tasks = t <= 1 ? 1 : std::min<int64_t>(planes, int64_t(t) * 4);
  const float inv = spatial ? 1.f / float(spatial) : 0.f;
  parallel_for(t <= 1 ? nullptr : pool, tasks, [&](int64_t i) {
    int64_t b, e;
    split_range(planes, tasks, i, b, e);
    for (int64_t p = b; p < e; ++p) y[p] = plane_sum(x + p * spatial, spatial) * inv;
  });
}

void global_max_pool(int64_t planes, int64_t sp, const float* xp, float* yp, ThreadPool* pool) {
  const int parts = threads_for(pool, double(planes * sp), 1 << 17);
  parallel_ranges(pool, planes, parts, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      float m = -std::numeric_limits<float>::infinity();
      const float* r = xp + p * sp;
      for (int64_t i = 0; i < sp; ++i) m = (r[i] > m || std::isnan(r[i])) && !std::isnan(m) ? r[i] : m;
      yp[p] = m;
    }
  });
}

void average_pool(const PoolShape& s, bool count_include_pad, const float* xp, float* yp, ThreadPool* pool) {
  // Local copies of the geometry (s.spatial is not needed: unused dims are 1).
  int64_t in[3], out[3], k[3], st[3], dl[3], pb[3], pe[3];
  for (int d = 0; d < 3; ++d) {
    in[d] = s.in[d];
    out[d] = s.out[d];
    k[d] = s.kernel[d];
    st[d] = s.stride[d];
    dl[d] = s.dilation[d];
    pb[d] = s.pad_begin[d];
    pe[d] = s.pad_end[d];
  }
  const int64_t planes = s.batch * s.channels, isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2];
  const bool inc = count_include_pad;
  const int parts = int(std::min<int64_t>(planes, threads_for(pool, double(planes * osz) * double(k[0] * k[1] * k[2]))));
  parallel_ranges(pool, planes, parts, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* xs = xp + p * isz;
      float* ys = yp + p * osz;
      for (int64_t oz = 0; oz < out[0]; ++oz)
        for (int64_t oy = 0; oy < out[1]; ++oy)
          for (int64_t ox = 0; ox < out[2]; ++ox) {
            double sum = 0;
            int64_t cnt = 0, cnt_pad = 0;
            for (int64_t kz = 0; kz < k[0]; ++kz) {
              const int64_t iz = oz * st[0] - pb[0] + kz * dl[0];
              if (iz < -pb[0] || iz >= in[0] + pe[0]) continue;
              const bool vz = iz >= 0 && iz < in[0];
              for (int64_t ky = 0; ky < k[1]; ++ky) {
                const int64_t iy = oy * st[1] - pb[1] + ky * dl[1];
                if (iy < -pb[1] || iy >= in[1] + pe[1]) continue;
                const bool vy = vz && iy >= 0 && iy < in[1];
                for (int64_t kx = 0; kx < k[2]; ++kx) {
                  const int64_t ix = ox * st[2] - pb[2] + kx * dl[2];
                  if (ix < -pb[2] || ix >= in[2] + pe[2]) continue;
                  ++cnt_pad;
                  if (vy && ix >= 0 && ix < in[2]) {
                    sum += xs[(iz * in[1] + iy) * in[2] + ix];
                    ++cnt;
                  }
                }
              }
            }
            const int64_t div = inc ? cnt_pad : cnt;
            ys[(oz * out[1] + oy) * out[2] + ox] = div ? float(sum / double(div)) : 0.f;
          }
    }
  });
}

}  // namespace nxrt::cpu
