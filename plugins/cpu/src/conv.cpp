#include "conv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "conv_depthwise.hpp"
#include "conv_winograd.hpp"
#include "conv_winograd_2x2.hpp"
#include "conv_winograd_2x2_lanes.hpp"
#include "conv_stem_winograd.hpp"
#include "conv_tap_rects.hpp"
#include "cpu_info.hpp"
#include "gemm.hpp"
#include "pooling.hpp"
#include "simd.hpp"
#include "transpose16_avx512.hpp"

namespace nxrt::cpu {

bool conv_is_depthwise(const ConvShape& s) { return s.icg() == 1 && s.group > 1; }

// Whether tap k (offset k * dil - pad) of an axis reads inside [0, in) for some output.
static bool tap_live(int64_t k, int64_t dil, int64_t pad, int64_t stride, int64_t out, int64_t in) {
  const int64_t first = k * dil - pad, last = (out - 1) * stride + first;  // input index at outputs 0 and out-1
  return last >= 0 && first < in;
}

std::optional<ConvShape> conv_centre_tap_only(const ConvShape& s) {
  if (s.group != 1 || s.k_h % 2 == 0 || s.k_w % 2 == 0 || (s.k_h == 1 && s.k_w == 1) || s.out_h <= 0 || s.out_w <= 0)
    return std::nullopt;
  const int64_t ch = s.k_h / 2, cw = s.k_w / 2;
  // The centre tap must land where a 1x1 conv without padding reads (offset 0).
  if (ch * s.dil_h != s.pad_top || cw * s.dil_w != s.pad_left) return std::nullopt;
  for (int64_t k = 0; k < s.k_h; ++k)
    if (k != ch && tap_live(k, s.dil_h, s.pad_top, s.stride_h, s.out_h, s.in_h)) return std::nullopt;
  for (int64_t k = 0; k < s.k_w; ++k)
    if (k != cw && tap_live(k, s.dil_w, s.pad_left, s.stride_w, s.out_w, s.in_w)) return std::nullopt;
  ConvShape p = s;
  p.k_h = p.k_w = 1;
  p.dil_h = p.dil_w = 1;
  p.pad_top = p.pad_left = 0;
  return p;
}

std::vector<float> conv_centre_tap_weights(const ConvShape& s, const float* w) {
  const int64_t taps = s.k_h * s.k_w, centre = (s.k_h / 2) * s.k_w + s.k_w / 2, n = s.out_c * s.icg();
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = w[i * taps + centre];
  return out;
}

size_t packed_conv_floats(const ConvShape& s) {
  if (conv_is_depthwise(s)) return size_t(s.out_c * s.k_h * s.k_w);
  return packed_a_floats(s.ocg(), s.gemm_k()) * size_t(s.group);
}

void pack_conv_weights_into(const ConvShape& s, const float* w, float* dst) {
  if (conv_is_depthwise(s)) {
    std::copy(w, w + s.out_c * s.k_h * s.k_w, dst);
    return;
  }
  const int64_t M = s.ocg(), K = s.gemm_k(), per_group = int64_t(packed_a_floats(M, K));
  for (int64_t g = 0; g < s.group; ++g) pack_a(w + g * M * K, K, false, M, K, 1.f, dst + g * per_group);
}

PackedConvWeights conv_weights_view(const ConvShape& s, const float* packed) {
  PackedConvWeights p;
  p.data = packed;
  p.depthwise = conv_is_depthwise(s);
  if (!p.depthwise) p.per_group = int64_t(packed_a_floats(s.ocg(), s.gemm_k()));
  return p;
}

// d[r * 8 + m] = src[r * 8 + m] * scale[r] for r < rows (rows of pack_a's 8-float tiles).
static void scale_rows8_scalar(const float* src, const float* scale, int64_t rows, float* d) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t m = 0; m < kGemmMR; ++m) d[r * kGemmMR + m] = src[r * kGemmMR + m] * scale[r];
}
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void scale_rows8_avx512(const float* src, const float* scale, int64_t rows,
                                                                  float* d) {
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {  // two rows a vector
    const __m512 f = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(scale[r]), _mm512_set1_ps(scale[r + 1]));
    _mm512_storeu_ps(d + r * kGemmMR, _mm512_mul_ps(_mm512_loadu_ps(src + r * kGemmMR), f));
  }
  scale_rows8_scalar(src + r * kGemmMR, scale + r, rows - r, d + r * kGemmMR);
}
#endif

// Rows of 8 floats scaled one factor a row, on this CPU's kernel.
static void scale_rows8(const float* src, const float* scale, int64_t rows, float* d) {
  static_assert(kGemmMR == 8, "rows of 8 floats");
#if defined(__x86_64__)
  static const auto fn = active_isa() == Isa::avx512 ? &scale_rows8_avx512 : &scale_rows8_scalar;
#else
  static const auto fn = &scale_rows8_scalar;
#endif
  fn(src, scale, rows, d);
}

void scale_packed_conv_input_channels(const ConvShape& s, const float* packed, const float* scale, float* dst) {
  // pack_a's tiles: [tile][K][kGemmMR] per group, K = icg * taps, k = channel * taps + tap.
  const int64_t taps = s.k_h * s.k_w, K = s.gemm_k(), tiles = gemm_tiles(s.ocg()), icg = s.icg();
  std::vector<float> per_k;  // the scale of each k (taps > 1 only)
  if (taps > 1) per_k.resize(size_t(K));
  for (int64_t g = 0; g < s.group; ++g) {
    const float* sg = scale + g * icg;
    if (taps > 1)
      for (int64_t k = 0; k < K; ++k) per_k[size_t(k)] = sg[k / taps];
    for (int64_t t = 0; t < tiles; ++t) {
      const size_t at = size_t((g * tiles + t) * K * kGemmMR);
      scale_rows8(packed + at, taps > 1 ? per_k.data() : sg, K, dst + at);
    }
  }
}

PackedConvWeights pack_conv_weights(const ConvShape& s, const float* w) {
  if (conv_is_depthwise(s)) return conv_weights_view(s, w);
  AlignedFloats owned(packed_conv_floats(s));
  pack_conv_weights_into(s, w, owned.data());
  PackedConvWeights p = conv_weights_view(s, owned.data());
  p.owned = std::move(owned);
  return p;
}

// dst[q] = src[2 q] for q < n, reading src[0, 2n - 1) only.
static void even_floats_scalar(float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t q = 0; q < n; ++q) dst[q] = src[2 * q];
}
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void even_floats_avx512(float* __restrict dst, const float* __restrict src,
                                                                 int64_t n) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  int64_t q = 0;
  for (; q + 16 <= n; q += 16)  // the second load ends at src[2q + 31]: within 2n - 1 when q + 16 < n
    _mm512_storeu_ps(dst + q, _mm512_permutex2var_ps(_mm512_loadu_ps(src + 2 * q), even,
                                                      q + 16 < n ? _mm512_loadu_ps(src + 2 * q + 16)
                                                                 : _mm512_maskz_loadu_ps(0x7FFF, src + 2 * q + 16)));
  if (q < n) {  // the last < 16: lanes 2 (q + i) < 2n - 1
    const int64_t left = 2 * (n - q) - 1;  // 1..31 floats readable
    const __m512 a = _mm512_maskz_loadu_ps(__mmask16(left >= 16 ? 0xFFFFu : (1u << left) - 1u), src + 2 * q);
    const __m512 b = _mm512_maskz_loadu_ps(__mmask16(left > 16 ? (1u << (left - 16)) - 1u : 0u), src + 2 * q + 16);
    _mm512_mask_storeu_ps(dst + q, __mmask16((1u << (n - q)) - 1u), _mm512_permutex2var_ps(a, even, b));
  }
}
__attribute__((target("avx2"))) static void even_floats_avx2(float* __restrict dst, const float* __restrict src,
                                                            int64_t n) {
  int64_t q = 0;
  for (; q + 8 < n; q += 8) {  // reads src[2q, 2q + 16): within 2n - 1 as q + 8 < n
    const __m256 v = _mm256_shuffle_ps(_mm256_loadu_ps(src + 2 * q), _mm256_loadu_ps(src + 2 * q + 8), 0x88);
    _mm256_storeu_ps(dst + q, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xD8)));
  }
  even_floats_scalar(dst + q, src + 2 * q, n - q);
}
#endif
using EvenFloatsFn = void (*)(float* __restrict, const float* __restrict, int64_t);
static EvenFloatsFn even_floats_active() {
#if defined(__x86_64__)
  static const EvenFloatsFn fn = active_isa() == Isa::avx512 ? &even_floats_avx512
                                 : active_isa() == Isa::avx2 ? &even_floats_avx2
                                                             : &even_floats_scalar;
  return fn;
#else
  return &even_floats_scalar;
#endif
}

// out[q] = row[base + q * stride] for q in the span, 0 elsewhere in [0, n).
NXRT_CLONES
static void gather_row_span(float* __restrict out, const float* __restrict row, int64_t base, int64_t stride,
                            int64_t n, GatherSpan sp) {
  for (int64_t q = 0; q < sp.lo; ++q) out[q] = 0.f;
  if (stride == 1) {
    if (sp.hi > sp.lo) std::memcpy(out + sp.lo, row + base + sp.lo, size_t(sp.hi - sp.lo) * sizeof(float));
  } else if (stride == 2) {
    if (sp.hi > sp.lo) even_floats_active()(out + sp.lo, row + base + 2 * sp.lo, sp.hi - sp.lo);
  } else {
    for (int64_t q = sp.lo; q < sp.hi; ++q) out[q] = row[base + q * stride];
  }
  for (int64_t q = sp.hi; q < n; ++q) out[q] = 0.f;
}

// Copies out[q] = row[base + q*stride] for q in [0, n), zero where the source
// column falls outside [0, width).
static void gather_row(float* __restrict out, const float* __restrict row, int64_t base, int64_t stride, int64_t n,
                       int64_t width) {
  gather_row_span(out, row, base, stride, n, gather_span(base, stride, n, width));
}

void im2col_pack(const ConvShape& s, const float* x, float* dst, int64_t p0, int64_t p1) {
  const int64_t K = s.gemm_k(), N = s.out_h * s.out_w;
  const int64_t H = s.in_h, W = s.in_w, OW = s.out_w;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n0 = p * kGemmNR, w = gemm_panel_width(N, p), cols = std::min(kGemmNR, N - n0);
    float* panel = dst + n0 * K;
    const int64_t oy0 = n0 / OW, ox0 = n0 % OW;
    int64_t k = 0;
    for (int64_t ic = 0; ic < s.icg(); ++ic) {
      const float* plane = x + ic * H * W;
      for (int64_t ky = 0; ky < s.k_h; ++ky) {
        for (int64_t kx = 0; kx < s.k_w; ++kx, ++k) {
          float* d = panel + k * w;
          int64_t j = 0, oy = oy0, ox = ox0;
          while (j < cols) {
            const int64_t seg = std::min(OW - ox, cols - j);
            const int64_t iy = oy * s.stride_h - s.pad_top + ky * s.dil_h;
            if (iy < 0 || iy >= H) {
              for (int64_t q = 0; q < seg; ++q) d[j + q] = 0.f;
            } else {
              gather_row(d + j, plane + iy * W, ox * s.stride_w - s.pad_left + kx * s.dil_w, s.stride_w, seg, W);
            }
            j += seg;
            ox = 0;
            ++oy;
          }
          for (; j < w; ++j) d[j] = 0.f;
        }
      }
    }
  }
}

struct DwGeometry {
  int64_t sh, sw, hq, wq, oy_off_max;
  size_t phase_floats, out_floats;
};

static DwGeometry dw_geometry(const ConvShape& s) {
  DwGeometry g;
  g.sh = s.stride_h;
  g.sw = s.stride_w;
  const int64_t ekh = (s.k_h - 1) * s.dil_h + 1, ekw = (s.k_w - 1) * s.dil_w + 1;
  const int64_t hp = std::max(s.pad_top + s.in_h, (s.out_h - 1) * g.sh + ekh);
  const int64_t wp = std::max(s.pad_left + s.in_w, (s.out_w - 1) * g.sw + ekw);
  g.oy_off_max = ((s.k_h - 1) * s.dil_h) / g.sh;
  g.wq = (wp + g.sw - 1) / g.sw;
  g.hq = std::max((hp + g.sh - 1) / g.sh, s.out_h + g.oy_off_max + 1);
  g.phase_floats = size_t(g.sh * g.sw * g.hq * g.wq);
  g.out_floats = size_t(s.out_h * g.wq);
  return g;
}

// out[q] = act(src[q] + residual[q]) over one output row.
NXRT_CLONES
static void finish_row(float* __restrict out, const float* __restrict src, const float* __restrict res, int64_t n,
                       bool clamp, float lo, float hi, bool hardswish) {
  if (hardswish) {
    for (int64_t q = 0; q < n; ++q) {
      float v = src[q] + (res ? res[q] : 0.f);
      if (clamp) {
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
      }
      out[q] = hard_swish(v);
    }
  } else if (res) {
    for (int64_t q = 0; q < n; ++q) {
      float v = src[q] + res[q];
      if (clamp) {
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
      }
      out[q] = v;
    }
  } else if (clamp) {
    for (int64_t q = 0; q < n; ++q) {
      float v = src[q];
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
      out[q] = v;
    }
  } else {
    std::memcpy(out, src, size_t(n) * sizeof(float));
  }
}

// Splits one zero-padded input plane into sh x sw phase planes:
// phase (py, px)[r][c] = padded_input[r*sh + py][c*sw + px]. Every tap of a
// window is then a shifted view of one phase plane, and a run of outputs along
// a row reads a contiguous run of it.
static void build_phases(const ConvShape& s, const DwGeometry& g, const float* in, float* phases) {
  auto used = [](int64_t phase, int64_t k, int64_t dil, int64_t stride) {
    for (int64_t t = 0; t < k; ++t)
      if ((t * dil) % stride == phase) return true;
    return false;
  };
  for (int64_t py = 0; py < g.sh; ++py)
    for (int64_t px = 0; px < g.sw; ++px) {
      if (!used(py, s.k_h, s.dil_h, g.sh) || !used(px, s.k_w, s.dil_w, g.sw)) continue;  // no tap reads it
      float* ph = phases + (py * g.sw + px) * g.hq * g.wq;
      // The same columns are padding on every row: the span is worked out once
      // (its divisions cost more than copying a 7..14-wide row).
      const int64_t base = px - s.pad_left;
      const GatherSpan span = gather_span(base, g.sw, g.wq, s.in_w);
      for (int64_t r = 0; r < g.hq; ++r) {
        float* row = ph + r * g.wq;
        const int64_t iy = r * g.sh + py - s.pad_top;
        if (iy < 0 || iy >= s.in_h) {
          std::memset(row, 0, size_t(g.wq) * sizeof(float));
        } else {
          gather_row_span(row, in + iy * s.in_w, base, g.sw, g.wq, span);
        }
      }
    }
}

// Offset of tap (ky, kx) in the phase planes of one channel.
static int64_t tap_offset(const ConvShape& s, const DwGeometry& g, int64_t ky, int64_t kx) {
  const int64_t dy = ky * s.dil_h, dx = kx * s.dil_w;
  return ((dy % g.sh) * g.sw + (dx % g.sw)) * g.hq * g.wq + (dy / g.sh) * g.wq + dx / g.sw;
}

// Output rows [oy0, oy1) of s as a conv of their own: the input rows they read start at
// in_row0, the top pad is what of it lies above row 0, and the rows past the band's last
// window are left out. The shift is a whole number of strides, so every phase is the same.
static ConvShape conv_row_band(const ConvShape& s, int64_t oy0, int64_t oy1, int64_t& in_row0) {
  ConvShape b = s;
  const int64_t first = oy0 * s.stride_h - s.pad_top, end = (oy1 - 1) * s.stride_h - s.pad_top + (s.k_h - 1) * s.dil_h + 1;
  in_row0 = std::clamp<int64_t>(first, 0, s.in_h);
  b.pad_top = std::max<int64_t>(0, in_row0 - first);  // 0 for a band below the input (all zeros)
  b.in_h = std::max<int64_t>(0, std::min(s.in_h, end) - in_row0);
  b.out_h = oy1 - oy0;
  return b;
}

// The phase planes of output rows [oy0, oy1) of every input channel of group input xg (one
// channel's planes every g.phase_floats), built in this thread's scratch slot A: the rows
// a band reads, as a conv of its own (conv_row_band) with its geometry.
struct BandPhases {
  ConvShape s;
  DwGeometry g;
  const float* planes;
};
static BandPhases build_band_phases(const ConvShape& s, const float* xg, int64_t oy0, int64_t oy1) {
  int64_t in_row0;
  const ConvShape sb = conv_row_band(s, oy0, oy1, in_row0);
  const DwGeometry gb = dw_geometry(sb);
  float* planes = scratch_floats(kScratchA, size_t(s.icg()) * gb.phase_floats);
  for (int64_t c = 0; c < s.icg(); ++c)
    build_phases(sb, gb, xg + (c * s.in_h + in_row0) * s.in_w, planes + size_t(c) * gb.phase_floats);
  return {sb, gb, planes};
}

// Row k = (ic, ky, kx) of the GEMM's B for a band: tap (ky, kx)'s phase plane of input
// channel ic, read in place by the row-pointer micro-kernel (gemm_rows_serial).
static std::vector<const float*> band_tap_rows(const ConvShape& s, const BandPhases& bp) {
  const int64_t taps = s.k_h * s.k_w;
  std::vector<const float*> rows(static_cast<size_t>(s.icg() * taps));
  for (int64_t ic = 0; ic < s.icg(); ++ic)
    for (int64_t ky = 0; ky < s.k_h; ++ky)
      for (int64_t kx = 0; kx < s.k_w; ++kx)
        rows[size_t(ic * taps + ky * s.k_w + kx)] = bp.planes + size_t(ic) * bp.g.phase_floats + tap_offset(bp.s, bp.g, ky, kx);
  return rows;
}

// A panel's columns as runs along output rows: dst column j..j+len reads the
// phase plane from offset src (the same for every k of the panel).
struct PanelRun {
  int64_t j, len, src;
};

static void copy_runs_generic(float* d, const float* plane, const PanelRun* runs, int64_t nruns, int64_t cols,
                              int64_t w) {
  for (int64_t r = 0; r < nruns; ++r) {
    const PanelRun& u = runs[r];
    for (int64_t q = 0; q < u.len; ++q) d[u.j + q] = plane[u.src + q];
  }
  for (int64_t j = cols; j < w; ++j) d[j] = 0.f;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void copy_runs_avx512(float* d, const float* plane, const PanelRun* runs,
                                                                int64_t nruns, int64_t cols, int64_t w) {
  for (int64_t r = 0; r < nruns; ++r) {
    const PanelRun& u = runs[r];
    for (int64_t q = 0; q < u.len; q += 16) {
      const int64_t n = std::min<int64_t>(16, u.len - q);
      const __mmask16 m = __mmask16(n >= 16 ? 0xFFFF : (1u << n) - 1u);
      _mm512_mask_storeu_ps(d + u.j + q, m, _mm512_maskz_loadu_ps(m, plane + u.src + q));
    }
  }
  for (int64_t j = cols; j < w; j += 16) {
    const int64_t n = std::min<int64_t>(16, w - j);
    _mm512_mask_storeu_ps(d + j, __mmask16(n >= 16 ? 0xFFFF : (1u << n) - 1u), _mm512_setzero_ps());
  }
}
// The same with 8-lane AVX2 masked loads and plain stores of the valid lanes (columns past
// them are not touched).
__attribute__((target("avx2"))) static void copy_runs_avx2(float* d, const float* plane, const PanelRun* runs,
                                                           int64_t nruns, int64_t cols, int64_t w) {
  for (int64_t r = 0; r < nruns; ++r) {
    const PanelRun& u = runs[r];
    int64_t q = 0;
    for (; q + 8 <= u.len; q += 8) _mm256_storeu_ps(d + u.j + q, _mm256_loadu_ps(plane + u.src + q));
    if (q < u.len) {
      const __m256i m = avx2_lane_mask(u.len - q);
      avx2_store_first(d + u.j + q, _mm256_maskload_ps(plane + u.src + q, m), u.len - q);
    }
  }
  for (int64_t j = cols; j < w; j += 8) avx2_store_first(d + j, _mm256_setzero_ps(), w - j);
}
#endif

size_t conv_phase_floats(const ConvShape& s) { return dw_geometry(s).phase_floats; }
void conv_build_phases(const ConvShape& s, const float* x_plane, float* phases) {
  build_phases(s, dw_geometry(s), x_plane, phases);
}

void im2col_pack_phased(const ConvShape& s, const float* phases, float* dst, int64_t p0, int64_t p1) {
  const DwGeometry g = dw_geometry(s);
  const int64_t K = s.gemm_k(), N = s.out_h * s.out_w, OW = s.out_w;
  const int64_t taps = s.k_h * s.k_w;
  std::vector<int64_t> toff(static_cast<size_t>(taps));
  for (int64_t ky = 0; ky < s.k_h; ++ky)
    for (int64_t kx = 0; kx < s.k_w; ++kx) toff[size_t(ky * s.k_w + kx)] = tap_offset(s, g, ky, kx);
#if defined(__x86_64__)
  static const Isa isa = active_isa();
  auto copy = isa == Isa::avx512 ? &copy_runs_avx512 : isa == Isa::avx2 ? &copy_runs_avx2 : &copy_runs_generic;
#else
  auto copy = &copy_runs_generic;
#endif
  std::vector<PanelRun> runs;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n0 = p * kGemmNR, w = gemm_panel_width(N, p), cols = std::min(kGemmNR, N - n0);
    runs.clear();
    for (int64_t j = 0; j < cols;) {
      const int64_t oy = (n0 + j) / OW, ox = (n0 + j) % OW, len = std::min(OW - ox, cols - j);
      runs.push_back({j, len, oy * g.wq + ox});
      j += len;
    }
    float* d = dst + (p - p0) * kGemmNR * K;
    for (int64_t ic = 0; ic < s.icg(); ++ic) {
      const float* ph = phases + size_t(ic) * g.phase_floats;
      for (int64_t t = 0; t < taps; ++t, d += w) copy(d, ph + toff[size_t(t)], runs.data(), int64_t(runs.size()), cols, w);
    }
  }
}

// ---------------------------------------------------------------- depthwise

// Depthwise planes are small (7..112 wide), so per-row loops are too short
// to vectorise well. Instead the zero-padded input is split into stride x
// stride phase planes of width Wq; every tap of the window is then a shifted
// view of one phase plane and the output, kept with row pitch Wq, is one long
// flat multiply-add per tap. Columns past OW are junk and dropped at the end.
static void dw_accumulate_generic(float* out, int64_t n, const float* const* src, const float* w, int64_t taps,
                                  float bias) {
  constexpr int64_t kChunk = 64;
  float acc[kChunk];
  for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
    const int64_t len = std::min(kChunk, n - j0);
    for (int64_t j = 0; j < len; ++j) acc[j] = bias;
    for (int64_t t = 0; t < taps; ++t) {
      const float* sp = src[t] + j0;
      const float wt = w[t];
      for (int64_t j = 0; j < len; ++j) acc[j] += wt * sp[j];
    }
    for (int64_t j = 0; j < len; ++j) out[j0 + j] = acc[j];
  }
}

#if defined(__x86_64__)
// NV (1..8) vectors of 16 outputs at once, taps streamed through them; lanes
// past `last` of the final vector are neither read nor written. NV independent
// accumulators: one alone would wait on its own FMA latency every tap.
template <int NV>
__attribute__((target("avx512f"), always_inline)) static inline void dw_accumulate_block(
    float* out, int64_t j0, const float* const* src, const float* w, int64_t taps, __m512 b, __mmask16 last) {
  __m512 acc[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = b;
  for (int64_t t = 0; t < taps; ++t) {
    const float* sp = src[t] + j0;
    const __m512 wt = _mm512_set1_ps(w[t]);
#pragma GCC unroll 8
    for (int v = 0; v < NV - 1; ++v) acc[v] = _mm512_fmadd_ps(wt, _mm512_loadu_ps(sp + v * 16), acc[v]);
    acc[NV - 1] = _mm512_fmadd_ps(wt, _mm512_maskz_loadu_ps(last, sp + (NV - 1) * 16), acc[NV - 1]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV - 1; ++v) _mm512_storeu_ps(out + j0 + v * 16, acc[v]);
  _mm512_mask_storeu_ps(out + j0 + (NV - 1) * 16, last, acc[NV - 1]);
}

// 128 outputs (8 zmm) per step, then the rest (the whole plane, for the 7x7
// and 14x14 planes of MobileNet's late stages) in one step of up to 8.
__attribute__((target("avx512f"))) static void dw_accumulate_avx512(float* out, int64_t n, const float* const* src,
                                                                    const float* w, int64_t taps, float bias) {
  const __m512 b = _mm512_set1_ps(bias);
  int64_t j0 = 0;
  for (; j0 + 128 <= n; j0 += 128) dw_accumulate_block<8>(out, j0, src, w, taps, b, 0xFFFF);
  const int64_t rest = n - j0;
  if (rest <= 0) return;
  const int64_t tail = rest % 16;
  const __mmask16 last = __mmask16(tail == 0 ? 0xFFFF : (1u << tail) - 1u);
  switch ((rest + 15) / 16) {
    case 1: dw_accumulate_block<1>(out, j0, src, w, taps, b, last); break;
    case 2: dw_accumulate_block<2>(out, j0, src, w, taps, b, last); break;
    case 3: dw_accumulate_block<3>(out, j0, src, w, taps, b, last); break;
    case 4: dw_accumulate_block<4>(out, j0, src, w, taps, b, last); break;
    case 5: dw_accumulate_block<5>(out, j0, src, w, taps, b, last); break;
    case 6: dw_accumulate_block<6>(out, j0, src, w, taps, b, last); break;
    case 7: dw_accumulate_block<7>(out, j0, src, w, taps, b, last); break;
    default: dw_accumulate_block<8>(out, j0, src, w, taps, b, last); break;
  }
}
#endif

static void dw_accumulate(float* out, int64_t n, const float* const* src, const float* w, int64_t taps, float bias) {
#if defined(__x86_64__)
  static const Isa isa = active_isa();
  if (isa == Isa::avx512) {
    dw_accumulate_avx512(out, n, src, w, taps, bias);
    return;
  }
  if (isa == Isa::avx2) {
    dw_accumulate_avx2(out, n, src, w, taps, bias);
    return;
  }
#endif
  dw_accumulate_generic(out, n, src, w, taps, bias);
}

// toff: each tap's offset in the phase planes (tap_offset), the same for every plane.
static void depthwise_plane(const ConvShape& s, const DwGeometry& g, const int64_t* toff, const float* in,
                            const float* wk, float bias, float* o, const float* res, const ConvPostOps& post) {
  float* phases = scratch_floats(kScratchA, g.phase_floats);
  float* outq = scratch_floats(kScratchC, g.out_floats);
  build_phases(s, g, in, phases);
  const float* src[64];
  std::vector<const float*> big;
  const int64_t taps = s.k_h * s.k_w;
  const float** sp = src;
  if (taps > 64) {
    big.resize(size_t(taps));
    sp = big.data();
  }
  for (int64_t t = 0; t < taps; ++t) sp[t] = phases + toff[t];
  dw_accumulate(outq, int64_t(g.out_floats), sp, wk, taps, bias);
  for (int64_t oy = 0; oy < s.out_h; ++oy)
    finish_row(o + oy * s.out_w, outq + oy * g.wq, res ? res + oy * s.out_w : nullptr, s.out_w, post.clamp, post.lo,
               post.hi, post.hardswish);
}

#if defined(__x86_64__)
// Direct 3x3 depthwise kernel (dilation 1, strides 1 or 2), AVX-512: R output rows
// per pass, 16 columns at a time straight from the input rows. Each input row is
// loaded once per 16 columns and the shifted taps made in registers (valignd, or
// the even / odd lanes for stride 2; valignd in its zero-masking form, which GCC 12
// does not flag): three unaligned loads per row and chunk, as
// a first version did, ran at a third of the FMA rate (nxrt_cpu_kernels_test's
// depthwise cases time it). Padding: masked loads (masked-off lanes read nothing
// and are zero); rows above and below the input load under an empty mask. Bias,
// residual and clamp in the store. No copies.
constexpr int64_t kDwMaxChunks = kDw3x3MaxWidth / 16;

static bool dw3x3_direct_ok(const ConvShape& s) {
  return active_isa() >= Isa::avx2 && s.k_h == 3 && s.k_w == 3 && s.dil_h == 1 && s.dil_w == 1 &&
         (s.stride_w == 1 || s.stride_w == 2) && (s.stride_h == 1 || s.stride_h == 2) &&
         s.pad_left <= 2 && s.out_w <= 16 * kDwMaxChunks && s.in_w < (int64_t(1) << 30);
}

// Lanes i of a 16-wide load at row[start + i] that fall inside [0, width).
static inline __mmask16 dw_in_mask(int64_t start, int64_t width) {
  const int64_t lo = std::clamp<int64_t>(-start, 0, 16), hi = std::clamp<int64_t>(width - start, 0, 16);
  if (hi <= lo) return 0;
  const uint32_t m = (hi >= 16 ? 0xFFFFu : (1u << hi) - 1u) & ~((1u << lo) - 1u);
  return __mmask16(m);
}

// A load of the lanes under m, by a plain load where m is full (PLAIN, avx512_load_lanes): in
// the 3x3 kernel the masked form, its mask made from two words of memory in a general
// register, cost 15-20% on this Zen 5 (144 planes of 56x56: 105 -> 86 us, 32 of 112x112 80 ->
// 64; the planes' interior rows and chunks are full). The 5x5 and 7x7 kernels keep the masked
// form: with a branch beside each of their 5-7 row loads they ran 15-38% slower (mobilenet_v3's
// 28x28 and 14x14 planes, whose row vectors are mostly partial).
template <bool PLAIN>
__attribute__((target("avx512f"), always_inline)) static inline __m512 dw_load(__mmask16 m, const float* p) {
  if constexpr (PLAIN) return avx512_load_lanes(m, p);
  else return _mm512_maskz_loadu_ps(m, p);
}

__attribute__((target("avx512f"), always_inline)) static inline void dw_finish(__m512 v, float* o, const float* res,
                                                                               __mmask16 om, bool clamp, __m512 lo,
                                                                               __m512 hi, bool hardswish) {
  if (res) v = _mm512_add_ps(v, avx512_load_lanes(om, res));
  if (clamp) v = _mm512_maskz_min_ps(0xFFFF, hi, _mm512_maskz_max_ps(0xFFFF, lo, v));
  if (hardswish) v = hard_swish_avx512(v);
  avx512_store_lanes(o, om, v);
}

// row + off through uintptr_t: a window may start before the row (masked lanes).
static inline const float* dw_at(const float* row, int64_t off) {
  return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + uintptr_t(off * int64_t(sizeof(float))));
}

// Per-plane load masks, per 16-column chunk c (made once per call): stride 1, the column
// vector 16c + 16 that rolls in; stride 2, the two vectors of the window that rolls in
// (pad 1 at 3x3: columns 32c and 32c + 16; else 32(c + 1) - pad and + 16); the output columns.
struct DwMasks {
  __mmask16 first = 0, first2 = 0;  // the vectors loaded before chunk 0
  __mmask16 next[kDwMaxChunks], next2[kDwMaxChunks], out[kDwMaxChunks];
};

template <int N>
__attribute__((target("avx512f"), always_inline)) static inline __m512 dw_align(__m512 hi, __m512 lo) {
  if constexpr (N == 0) return lo;
  else
    return _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(0xFFFF, _mm512_castps_si512(hi), _mm512_castps_si512(lo), N));
}

// Input columns 16c + j + D (|D| < 16) from the column vectors c - 1, c, c + 1.
template <int D>
__attribute__((target("avx512f"), always_inline)) static inline __m512 dw_shifted(__m512 prev, __m512 cur, __m512 next) {
  if constexpr (D < 0) return dw_align<16 + D>(cur, prev);
  else if constexpr (D == 0) return cur;
  else return dw_align<D>(next, cur);
}

// The K taps of one input row, stride 1: input columns 16c + j + kx - PL.
template <int PL, int... KX>
__attribute__((target("avx512f"), always_inline)) static inline void dw_taps_s1(__m512* x, __m512 prev, __m512 cur,
                                                                                __m512 next,
                                                                                std::integer_sequence<int, KX...>) {
  ((x[KX] = dw_shifted<KX - PL>(prev, cur, next)), ...);
}

// The K taps of one input row, stride 2, from the even / odd lanes e, o of this window and
// en, on of the next: tap 2m is e shifted by m lanes, tap 2m + 1 is o shifted by m.
template <int... KX>
__attribute__((target("avx512f"), always_inline)) static inline void dw_taps_s2(__m512* x, __m512 e, __m512 o,
                                                                                __m512 en, __m512 on,
                                                                                std::integer_sequence<int, KX...>) {
  ((x[KX] = KX % 2 == 0 ? dw_align<KX / 2>(en, e) : dw_align<KX / 2>(on, o)), ...);
}

// What a pass of R output rows keeps in registers: stride 1 four rows (K + 3 input rows, two
// vectors each); stride 2 four rows at 3x3 (9 input rows), two at 5x5 and 7x7.
template <int K, int SW>
constexpr int dw_rows_per_pass() {
  return SW == 1 || K == 3 ? 4 : 2;
}

// Output rows [oy, oy + R) of one plane of a KxK depthwise conv (dilation 1). rows[i] is
// input row oy*SH - pad_top + i (or any row, with rm[i] = 0, when that one is padding).
//   Stride 1: column vectors at 16c (aligned when the rows are), each loaded once; the taps'
//   shifts made from the neighbours (PL: pad_left).
//   Stride 2, 3x3, pad 1 (PL == 1): the even / odd lanes of the column vectors at 32c and
//   32c + 16; column 32c - 1 from the previous chunk's odd lanes.
//   Stride 2 otherwise: the even / odd lanes E, O of the window at 32c - pad, the next
//   window's rolling in; tap 2m is E shifted by m lanes, tap 2m + 1 is O shifted by m.
template <int K, int SH, int SW, int R, int PL>
__attribute__((target("avx512f"))) static void dw_pass_avx512(const float* const* rows, const __mmask16* rm,
                                                              const DwMasks& mk, int64_t chunks, int64_t pl,
                                                              const float* wk, __m512 b, float* o, const float* res,
                                                              int64_t OW, bool clamp, __m512 lo, __m512 hi,
                                                              bool hardswish) {
  constexpr int NI = (R - 1) * SH + K;
  constexpr bool aligned_s2 = SW == 2 && K == 3 && PL == 1;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  // 3x3: the nine weights in registers; larger kernels broadcast theirs from memory at use.
  __m512 k3[K == 3 ? 9 : 1];
  if constexpr (K == 3)
    for (int i = 0; i < 9; ++i) k3[i] = _mm512_set1_ps(wk[i]);
  __m512 prev[NI], cur[NI];
#pragma GCC unroll 16
  for (int i = 0; i < NI; ++i) {
    prev[i] = _mm512_setzero_ps();
    if constexpr (SW == 1) {
      cur[i] = dw_load<K == 3>(__mmask16(mk.first & rm[i]), rows[i]);
    } else if constexpr (!aligned_s2) {
      const __m512 w0 = dw_load<K == 3>(__mmask16(mk.first & rm[i]), dw_at(rows[i], -pl));
      const __m512 w1 = dw_load<K == 3>(__mmask16(mk.first2 & rm[i]), dw_at(rows[i], 16 - pl));
      cur[i] = _mm512_permutex2var_ps(w0, even, w1);   // E
      prev[i] = _mm512_permutex2var_ps(w0, odd, w1);   // O
    }
  }
  for (int64_t c = 0; c < chunks; ++c) {
    __m512 acc[R];
#pragma GCC unroll 16
    for (int q = 0; q < R; ++q) acc[q] = b;
#pragma GCC unroll 16
    for (int i = 0; i < NI; ++i) {
      __m512 x[K];
      if constexpr (SW == 1) {
        const __m512 nx = dw_load<K == 3>(__mmask16(mk.next[c] & rm[i]), rows[i] + c * 16 + 16);
        dw_taps_s1<PL>(x, prev[i], cur[i], nx, std::make_integer_sequence<int, K>{});
        prev[i] = cur[i];
        cur[i] = nx;
      } else if constexpr (aligned_s2) {
        const __m512 a = dw_load<K == 3>(__mmask16(mk.next[c] & rm[i]), rows[i] + c * 32);
        const __m512 b1 = dw_load<K == 3>(__mmask16(mk.next2[c] & rm[i]), rows[i] + c * 32 + 16);
        x[1] = _mm512_permutex2var_ps(a, even, b1);
        x[2] = _mm512_permutex2var_ps(a, odd, b1);
        x[0] = dw_align<15>(x[2], prev[i]);
        prev[i] = x[2];
      } else {
        const int64_t base = (c + 1) * 32 - pl;
        const __m512 w0 = dw_load<K == 3>(__mmask16(mk.next[c] & rm[i]), dw_at(rows[i], base));
        const __m512 w1 = dw_load<K == 3>(__mmask16(mk.next2[c] & rm[i]), dw_at(rows[i], base + 16));
        const __m512 en = _mm512_permutex2var_ps(w0, even, w1), on = _mm512_permutex2var_ps(w0, odd, w1);
        dw_taps_s2(x, cur[i], prev[i], en, on, std::make_integer_sequence<int, K>{});
        cur[i] = en;
        prev[i] = on;
      }
#pragma GCC unroll 16
      for (int q = 0; q < R; ++q) {
        const int ky = i - q * SH;
        if (ky < 0 || ky >= K) continue;
#pragma GCC unroll 8
        for (int kx = 0; kx < K; ++kx) {
          __m512 wv;
          if constexpr (K == 3) wv = k3[ky * 3 + kx];
          else wv = _mm512_set1_ps(wk[ky * K + kx]);
          acc[q] = _mm512_fmadd_ps(wv, x[kx], acc[q]);
        }
      }
    }
    const int64_t j0 = c * 16;
#pragma GCC unroll 16
    for (int q = 0; q < R; ++q)
      dw_finish(acc[q], o + q * OW + j0, res ? res + q * OW + j0 : nullptr, mk.out[c], clamp, lo, hi, hardswish);
  }
}

// Output rows [oy, oy + RR): the pass's input rows (padding rows load under an empty mask).
template <int K, int SH, int SW, int RR, int PL>
__attribute__((target("avx512f"))) static void dw_rows_avx512(const ConvShape& s, const float* in, int64_t oy,
                                                              const DwMasks& mk, int64_t chunks, const float* wk,
                                                              __m512 b, float* o, const float* res,
                                                              const ConvPostOps& post, __m512 lo, __m512 hi) {
  constexpr int NI = (RR - 1) * SH + K;
  const float* rows[NI];
  __mmask16 rm[NI];
  for (int i = 0; i < NI; ++i) {
    const int64_t iy = oy * SH - s.pad_top + i;
    const bool inside = iy >= 0 && iy < s.in_h;
    rows[i] = inside ? in + iy * s.in_w : in;
    rm[i] = inside ? __mmask16(0xFFFF) : __mmask16(0);
  }
  dw_pass_avx512<K, SH, SW, RR, PL>(rows, rm, mk, chunks, s.pad_left, wk, b, o + oy * s.out_w,
                                    res ? res + oy * s.out_w : nullptr, s.out_w, post.clamp, lo, hi, post.hardswish);
}

// All output rows of one plane: passes of R rows, then of 2 and 1.
// (No lambdas here: they would not inherit the target attribute, and clang refuses __m512
// arguments passed from code without it.)
template <int K, int SH, int SW, int PL>
__attribute__((target("avx512f"))) static void dw_passes_avx512(const ConvShape& s, const float* in,
                                                                const DwMasks& mk, int64_t chunks, const float* wk,
                                                                __m512 b, float* o, const float* res,
                                                                const ConvPostOps& post, __m512 lo, __m512 hi,
                                                                const char* pf = nullptr, int64_t pf_per_pass = 0) {
  constexpr int R = dw_rows_per_pass<K, SW>();
  int64_t oy = 0;
  for (; oy + R <= s.out_h; oy += R) {
    for (int64_t l = 0; l < pf_per_pass; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
    pf += 64 * pf_per_pass;
    dw_rows_avx512<K, SH, SW, R, PL>(s, in, oy, mk, chunks, wk, b, o, res, post, lo, hi);
  }
  if constexpr (R > 2)
    if (oy + 2 <= s.out_h) {
      dw_rows_avx512<K, SH, SW, 2, PL>(s, in, oy, mk, chunks, wk, b, o, res, post, lo, hi);
      oy += 2;
    }
  for (; oy < s.out_h; ++oy) dw_rows_avx512<K, SH, SW, 1, PL>(s, in, oy, mk, chunks, wk, b, o, res, post, lo, hi);
}

template <int K, int SH, int SW, int PL>
__attribute__((target("avx512f"))) static void dw_planes_avx512(const ConvShape& s, const DwPlanes& p,
                                                                const ConvPostOps& post) {
  const int64_t W = s.in_w, OW = s.out_w, pl = s.pad_left;
  const int64_t chunks = (OW + 15) / 16;
  // The masks depend on the row geometry only: made once for all planes (a band of a
  // block runs hundreds of short planes, conv_inverted_residual).
  constexpr bool aligned_s2 = SW == 2 && K == 3 && PL == 1;
  DwMasks mk;
  mk.first = SW == 1 ? dw_in_mask(0, W) : dw_in_mask(-pl, W);
  mk.first2 = SW == 1 ? __mmask16(0) : dw_in_mask(16 - pl, W);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t j0 = c * 16, n = std::min<int64_t>(16, OW - j0);
    mk.out[c] = __mmask16(n >= 16 ? 0xFFFF : (1u << n) - 1u);
    if (SW == 1) {
      mk.next[c] = dw_in_mask(j0 + 16, W);
      mk.next2[c] = 0;
    } else if (aligned_s2) {
      mk.next[c] = dw_in_mask(j0 * 2, W);
      mk.next2[c] = dw_in_mask(j0 * 2 + 16, W);
    } else {
      mk.next[c] = dw_in_mask(j0 * 2 + 32 - pl, W);
      mk.next2[c] = dw_in_mask(j0 * 2 + 48 - pl, W);
    }
  }
  const __m512 lo = _mm512_set1_ps(post.lo), hi = _mm512_set1_ps(post.hi);
  // Planes read from memory (a block's input, not an L2 buffer): the next plane's rows are
  // fetched while this one computes, a share per pass of R rows.
  const int64_t lines = (s.in_h * W * int64_t(sizeof(float)) + 63) / 64;
  const int64_t passes = std::max<int64_t>(1, s.out_h / dw_rows_per_pass<K, SW>());
  // (Planes under 4 KB: a 5x5 on 7x7 runs 2-4% slower with it, as noise allows to see.)
  const int64_t per_pass = p.prefetch_next && lines >= 64 ? (lines + passes - 1) / passes : 0;
  for (int64_t c = 0; c < p.count; ++c) {
    const __m512 b = _mm512_set1_ps(p.bias ? p.bias[c] : 0.f);
    const char* pf = c + 1 < p.count ? reinterpret_cast<const char*>(p.in + (c + 1) * p.in_stride) : nullptr;
    dw_passes_avx512<K, SH, SW, PL>(s, p.in + c * p.in_stride, mk, chunks, p.w + c * K * K, b,
                                    p.out + c * p.out_stride, p.res ? p.res + c * p.res_stride : nullptr, post, lo, hi,
                                    pf, pf ? per_pass : 0);
  }
}

// Stride 1 takes pad_left as a constant (the taps' shifts), 0 .. K / 2 (3x3: .. 2); stride 2
// at run time (3x3 with pad 1 has its own aligned variant).
template <int K>
static void dw_planes_avx512_k(const ConvShape& s, const DwPlanes& p, const ConvPostOps& post) {
  auto by_sh = [&]<int SW, int PL>() {
    if (s.stride_h == 1) dw_planes_avx512<K, 1, SW, PL>(s, p, post);
    else dw_planes_avx512<K, 2, SW, PL>(s, p, post);
  };
  if (s.stride_w == 2) {
    if (K == 3 && s.pad_left == 1) by_sh.template operator()<2, 1>();
    else by_sh.template operator()<2, 0>();
    return;
  }
  [&]<int... PL>(std::integer_sequence<int, PL...>) {
    ((s.pad_left == PL ? (by_sh.template operator()<1, PL>(), 0) : 0), ...);
  }(std::make_integer_sequence<int, (K == 3 ? 3 : K / 2 + 1)>{});
}

static void dw_planes_avx512_any(const ConvShape& s, const DwPlanes& p, const ConvPostOps& post) {
  switch (s.k_h) {
    case 3: return dw_planes_avx512_k<3>(s, p, post);
    case 5: return dw_planes_avx512_k<5>(s, p, post);
    default: return dw_planes_avx512_k<7>(s, p, post);
  }
}

// 5x5 and 7x7 (MobileNetV3, EfficientNet) on AVX-512: the same kernel as 3x3.
static bool dwkxk_avx512_ok(const ConvShape& s) {
  return active_isa() == Isa::avx512 && s.k_h == s.k_w && (s.k_h == 3 || s.k_h == 5 || s.k_h == 7) &&
         s.dil_h == 1 && s.dil_w == 1 && (s.stride_w == 1 || s.stride_w == 2) &&
         (s.stride_h == 1 || s.stride_h == 2) && s.pad_left <= (s.k_w == 3 ? 2 : s.k_w / 2) &&
         s.out_w <= 16 * kDwMaxChunks && s.in_w < (int64_t(1) << 30);
}
#else
static bool dw3x3_direct_ok(const ConvShape&) { return false; }
static bool dwkxk_avx512_ok(const ConvShape&) { return false; }
#endif

// Which depthwise kernel runs a shape on this CPU.
enum class DwPath { direct3x3_avx2, directkxk_avx2, directkxk_avx512, phase_planes };
static DwPath dw_path(const ConvShape& s) {
#if defined(__x86_64__)
  const bool direct = dw3x3_direct_ok(s), avx512 = active_isa() == Isa::avx512;
  if (direct && !avx512) return DwPath::direct3x3_avx2;
  // 5x5 and 7x7 (MobileNetV3, EfficientNet): direct kernels too, AVX2 or (with 3x3) AVX-512;
  // other shapes (dilated, strides > 2, larger pads) the phase-plane path.
  if (active_isa() == Isa::avx2 && s.k_h == s.k_w && (s.k_h == 5 || s.k_h == 7) && s.dil_h == 1 && s.dil_w == 1 &&
      (s.stride_w == 1 || s.stride_w == 2) && s.out_w <= kDw3x3MaxWidth && s.in_w < (int64_t(1) << 30))
    return DwPath::directkxk_avx2;
  if (dwkxk_avx512_ok(s)) return DwPath::directkxk_avx512;
#else
  (void)s;
#endif
  return DwPath::phase_planes;
}

bool dw_direct_ok(const ConvShape& s) {
  return s.group == s.in_c && s.out_c == s.in_c && dw_path(s) != DwPath::phase_planes;
}

bool dw_split_cols_ok(const ConvShape& s) {
#if defined(__x86_64__)
  const DwPath path = dw_path(s);
  return dw_direct_ok(s) && s.stride_w == 2 && !dw_lanes_ok(s) &&
         (path == DwPath::direct3x3_avx2 || path == DwPath::directkxk_avx2);
#else
  (void)s;
  return false;
#endif
}

#if defined(__x86_64__)
// Planes [c, ...) of p.
static DwPlanes planes_shifted(const DwPlanes& p, int64_t c, int64_t taps) {
  DwPlanes q = p;
  q.count = p.count - c;
  q.in += c * p.in_stride;
  q.w += c * taps;
  if (q.bias) q.bias += c;
  q.out += c * p.out_stride;
  if (q.res) q.res += c * p.res_stride;
  return q;
}
#endif

void dw_planes(const ConvShape& s, const DwPlanes& p, const ConvPostOps& post) {
#if defined(__x86_64__)
  const DwPath path = dw_path(s);
  if (p.split_cols && !dw_split_cols_ok(s)) throw std::logic_error("dw_planes: no split-column kernel for this shape");
  const int64_t taps = s.k_h * s.k_w;
  if (path == DwPath::directkxk_avx512) {
    int64_t c = 0;
    if (dw_lanes_ok(s, 2, kDwLanes16MaxWidth))  // 16 planes at a time, the rest per plane
      for (; c + 16 <= p.count; c += 16) dw_planes16_avx512(s, planes_shifted(p, c, taps), post);
    if (c < p.count) dw_planes_avx512_any(s, planes_shifted(p, c, taps), post);
    return;
  }
  const bool lanes = dw_lanes_ok(s);
  for (int64_t c = 0; c < p.count; ++c) {
    if (lanes && c + 8 <= p.count) {
      dw_planes8_avx2(s, planes_shifted(p, c, taps), post);
      c += 7;
      continue;
    }
    const float* in = p.in + c * p.in_stride;
    const float* res = p.res ? p.res + c * p.res_stride : nullptr;
    const float bias = p.bias ? p.bias[c] : 0.f;
    if (path == DwPath::direct3x3_avx2)
      dw3x3_plane_avx2(s, in, p.w + c * taps, bias, p.out + c * p.out_stride, res, post, p.split_cols);
    else
      dwkxk_plane_avx2(s, in, p.w + c * taps, bias, p.out + c * p.out_stride, res, post, p.split_cols);
  }
#else
  (void)s, (void)p, (void)post;
#endif
}

static void conv_depthwise(const ConvShape& s, const float* x, const float* w, const float* bias, float* out,
                           ThreadPool* pool, const ConvPostOps& post) {
  const int64_t planes = s.batch * s.out_c, ocg = s.ocg();
  const int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w, taps = s.k_h * s.k_w;
  const int t = threads_for(pool, double(planes) * double(out_plane) * double(taps));
  // One contiguous range of planes per thread, the calling thread's first: the transposed
  // 1x1 convs around it split their channels the same way, so each thread reads and
  // overwrites lines its own core holds. With dynamic quarters MobileNetV2's 7x7-stage expand
  // convs, writing lines the depthwise conv before them had left on the other core, took 72 us
  // on 2 threads; with this split 55.
  const int64_t tasks = t <= 1 ? 1 : std::min<int64_t>(planes, t);
  const DwGeometry g = dw_geometry(s);
  const DwPath path = dw_path(s);
#if defined(__x86_64__)
  const bool lanes = (path == DwPath::direct3x3_avx2 || path == DwPath::directkxk_avx2) && dw_lanes_ok(s);
#endif
  std::vector<int64_t> toff;
  if (path == DwPath::phase_planes) {
    toff.resize(size_t(taps));
    for (int64_t ky = 0; ky < s.k_h; ++ky)
      for (int64_t kx = 0; kx < s.k_w; ++kx) toff[size_t(ky * s.k_w + kx)] = tap_offset(s, g, ky, kx);
  }
  parallel_for(t <= 1 ? nullptr : pool, tasks, [&](int64_t i) {
    int64_t b, e;
    split_range(planes, tasks, i, b, e);
    for (int64_t pl = b; pl < e; ++pl) {
      const int64_t n = pl / s.out_c, oc = pl % s.out_c, ic = oc / ocg;
      const float* xin = x + (n * s.in_c + ic) * in_plane;
      const float* res = post.residual ? post.residual + pl * out_plane : nullptr;
      const float bv = bias ? bias[oc] : 0.f;
#if defined(__x86_64__)
      // `count` planes from pl on, which lie in one image (channel multiplier 1).
      auto planes_from_here = [&](int64_t count) {
        DwPlanes p;
        p.count = count;
        p.in = xin;
        p.in_stride = in_plane;
        p.w = w + oc * taps;
        p.bias = bias ? bias + oc : nullptr;
        p.out = out + pl * out_plane;
        p.out_stride = out_plane;
        p.res = res;
        p.res_stride = out_plane;
        p.prefetch_next = true;  // a node's input: in memory or L3, not in a buffer of ours
        return p;
      };
      if (lanes && ocg == 1 && pl + 8 <= e && oc + 8 <= s.out_c) {  // 8 planes of one image at once
        dw_planes8_avx2(s, planes_from_here(8), post);
        pl += 7;
        continue;
      }
      if (path == DwPath::direct3x3_avx2) {
        dw3x3_plane_avx2(s, xin, w + oc * taps, bv, out + pl * out_plane, res, post);
        continue;
      }
      if (path == DwPath::directkxk_avx2) {
        dwkxk_plane_avx2(s, xin, w + oc * taps, bv, out + pl * out_plane, res, post);
        continue;
      }
      if (path == DwPath::directkxk_avx512) {
        // Planes pl.. of this range that lie in one image, one call (masks made once, 16
        // planes as the lanes where dw_lanes_ok); one at a time with a channel multiplier
        // (planes then share input planes).
        const int64_t run = ocg == 1 ? std::min(e - pl, s.out_c - oc) : 1;
        dw_planes(s, planes_from_here(run), post);
        pl += run - 1;
        continue;
      }
#endif
      depthwise_plane(s, g, toff.data(), xin, w + oc * taps, bv, out + pl * out_plane, res, post);
    }
  });
}

// ------------------------------------------------------------------ general

// Rough cycles per k step of a tile of mr rows x nv 16-column vectors: FMA
// throughput (2/cycle), loads (2/cycle: nv B vectors, mr broadcasts) or the
// FMA latency (4 cycles) of one pass over the accumulators.
static double tile_cost(int64_t mr, int64_t nv) {
  return std::max({double(mr * nv) / 2.0, double(mr + nv) / 2.0, 4.0});
}
static double gemm_cost(int64_t M, int64_t N) {
  double per_tile_row = 0;  // one full row tile across all panels
  const int64_t full = N / kGemmNR, rem = N % kGemmNR;
  double c8 = double(full) * tile_cost(8, 3) + (rem ? tile_cost(8, (rem + 15) / 16) : 0.0);
  per_tile_row = c8;
  double cost = double(M / kGemmMR) * per_tile_row;
  if (M % kGemmMR)
    cost += double(full) * tile_cost(M % kGemmMR, 3) + (rem ? tile_cost(M % kGemmMR, (rem + 15) / 16) : 0.0);
  return cost;
}

bool conv_is_pointwise(const ConvShape& s) {
  return s.k_h == 1 && s.k_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_top == 0 && s.pad_left == 0 &&
         s.out_h == s.in_h && s.out_w == s.in_w;
}

bool conv_pointwise_transposed(int64_t M, int64_t N, bool im2col) {
  // In place, the pointwise GEMM reads x without packing, so the transposed
  // one (which packs x^T and transposes C) must win clearly; an im2col conv
  // packs either way (measured: ResNet's 14x14 layers gain 13% at a 0.93 model ratio).
  if (im2col) return N < 5 * kGemmNR && gemm_cost(N, M) < 0.97 * gemm_cost(M, N);
  return N < 4 * kGemmNR && gemm_cost(N, M) < 0.85 * gemm_cost(M, N);
}

// W(m, k) of one group's weights packed as GEMM A tiles ([tile][k][kGemmMR]).
static float packed_a_at(const PackedConvWeights& p, int64_t K, int64_t m, int64_t k) {
  return p.data[(m / kGemmMR) * kGemmMR * K + k * kGemmMR + m % kGemmMR];
}

// W^T as packed GEMM B (K x M), unpacked from the A tiles of `p` (one group).
static void pack_weights_transposed(const PackedConvWeights& p, int64_t M, int64_t K, float* dst) {
  const int64_t panels = gemm_panels(M);
  for (int64_t q = 0; q < panels; ++q) {
    const int64_t m0 = q * kGemmNR, w = gemm_panel_width(M, q), cols = std::min(kGemmNR, M - m0);
    float* d = dst + m0 * K;
    for (int64_t k = 0; k < K; ++k) {
      float* row = d + k * w;
      for (int64_t j = 0; j < cols; ++j) row[j] = packed_a_at(p, K, m0 + j, k);
      for (int64_t j = cols; j < w; ++j) row[j] = 0.f;
    }
  }
}

// out[M][N] = act(ct[N][M]^T + residual), rows [m0, m1) x columns [n0, n1); ct's rows are
// ldct apart and hold out rows from c0 on, columns from n0 on (ct[n - n0][m - c0]).
NXRT_CLONES
static void transpose_store_scalar(const float* __restrict ct, int64_t ldct, int64_t c0, int64_t n0, int64_t n1, int64_t N,
                            float* __restrict out, const float* __restrict res, const ConvPostOps& post, int64_t m0,
                            int64_t m1) {
  const bool clamp = post.clamp, hardswish = post.hardswish;
  const float lo = post.lo, hi = post.hi;
  constexpr int64_t B = 16;
  for (int64_t mb = m0; mb < m1; mb += B)
    for (int64_t nb = n0; nb < n1; nb += B) {
      const int64_t me = std::min(m1, mb + B), ne = std::min(n1, nb + B);
      for (int64_t m = mb; m < me; ++m)
        for (int64_t n = nb; n < ne; ++n) {
          float v = ct[(n - n0) * ldct + m - c0];
          if (res) v += res[m * N + n];
          if (clamp) {
            v = v < lo ? lo : v;
            v = v > hi ? hi : v;
          }
          if (hardswish) v = hard_swish(v);
          out[m * N + n] = v;
        }
    }
}

#if defined(__x86_64__)
// transpose_store by 16 x 16 blocks in registers (MobileNetV2's 960 -> 160 1x1 conv at 7x7:
// the scalar store was 11% of the conv), and 8 x 8 on AVX2.
__attribute__((target("avx512f"))) static void transpose_store_avx512(const float* __restrict ct, int64_t ldct,
                                                                      int64_t c0, int64_t n0, int64_t n1, int64_t N,
                                                                      float* __restrict out,
                                                                      const float* __restrict res,
                                                                      const ConvPostOps& post, int64_t m0, int64_t m1) {
  const __m512 lo = _mm512_set1_ps(post.lo), hi = _mm512_set1_ps(post.hi);
  for (int64_t mb = m0; mb < m1; mb += 16) {
    const int64_t mc = std::min<int64_t>(16, m1 - mb);
    const __mmask16 mm = __mmask16(mc >= 16 ? 0xFFFF : (1u << mc) - 1u);
    for (int64_t nb = n0; nb < n1; nb += 16) {
      const int64_t nc = std::min<int64_t>(16, n1 - nb);
      const __mmask16 nm = __mmask16(nc >= 16 ? 0xFFFF : (1u << nc) - 1u);
      __m512 r[16];
      for (int64_t i = 0; i < 16; ++i)
        r[i] = i < nc ? _mm512_maskz_loadu_ps(mm, ct + (nb + i - n0) * ldct + mb - c0) : _mm512_setzero_ps();
      avx512::transpose16x16(r);
      for (int64_t j = 0; j < mc; ++j) {
        const int64_t o = (mb + j) * N + nb;
        __m512 v = r[j];
        if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(nm, res + o));
        // max / min return their second operand when either is NaN: NaN propagates.
        if (post.clamp) v = _mm512_maskz_min_ps(0xFFFF, hi, _mm512_maskz_max_ps(0xFFFF, lo, v));
        if (post.hardswish) v = hard_swish_avx512(v);
        _mm512_mask_storeu_ps(out + o, nm, v);
      }
    }
  }
}

// The same by 8 x 8 blocks on AVX2.
__attribute__((target("avx2,fma"))) static void transpose_store_avx2(const float* __restrict ct, int64_t ldct,
                                                                    int64_t c0, int64_t n0, int64_t n1, int64_t N,
                                                                    float* __restrict out,
                                                                    const float* __restrict res,
                                                                    const ConvPostOps& post, int64_t m0, int64_t m1) {
  const __m256 lo = _mm256_set1_ps(post.lo), hi = _mm256_set1_ps(post.hi);
  for (int64_t mb = m0; mb < m1; mb += 8) {
    const int64_t mc = std::min<int64_t>(8, m1 - mb);
    const __m256i mm = avx2_lane_mask(mc);
    for (int64_t nb = n0; nb < n1; nb += 8) {
      const int64_t nc = std::min<int64_t>(8, n1 - nb);
      const __m256i nm = avx2_lane_mask(nc);
      __m256 r[8];
      for (int64_t i = 0; i < 8; ++i)
        r[i] = i < nc ? _mm256_maskload_ps(ct + (nb + i - n0) * ldct + mb - c0, mm) : _mm256_setzero_ps();
      avx2_transpose8x8(r);
      for (int64_t j = 0; j < mc; ++j) {
        const int64_t o = (mb + j) * N + nb;
        __m256 v = r[j];
        if (res) v = _mm256_add_ps(v, _mm256_maskload_ps(res + o, nm));
        // max / min return their second operand when either is NaN: NaN propagates.
        if (post.clamp) v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
        if (post.hardswish) v = hard_swish_avx2(v);
        _mm256_maskstore_ps(out + o, nm, v);
      }
    }
  }
}
#endif

// out[M][N] = act(ct[N][M]^T + residual), rows [m0, m1) x columns [n0, n1) (see the scalar one).
void transpose_store(const float* __restrict ct, int64_t ldct, int64_t c0, int64_t n0, int64_t n1, int64_t N,
                            float* __restrict out, const float* __restrict res, const ConvPostOps& post, int64_t m0,
                            int64_t m1) {
#if defined(__x86_64__)
  static const bool avx512 = active_isa() == Isa::avx512;
  if (avx512) {
    transpose_store_avx512(ct, ldct, c0, n0, n1, N, out, res, post, m0, m1);
    return;
  }
  static const bool avx2 = active_isa() == Isa::avx2;
  if (avx2) {
    transpose_store_avx2(ct, ldct, c0, n0, n1, N, out, res, post, m0, m1);
    return;
  }
#endif
  transpose_store_scalar(ct, ldct, c0, n0, n1, N, out, res, post, m0, m1);
}

// Packs x^T (the im2col matrix, pixels as rows) as GEMM A tiles from the
// phase planes of every input channel: tile row i of k = (c, tap) is
// phases[c][toff[tap] + off[i]], off[i] the pixel's offset in a phase plane
// (off[i] < 0: a row past the pixels, 0).
NXRT_CLONES
static void pack_a_from_phases_scalar(const float* __restrict phases, size_t phase_floats, int64_t icg,
                                      const int64_t* __restrict toff, int64_t taps, const int64_t* __restrict off,
                                      float* __restrict d) {
  for (int64_t c = 0; c < icg; ++c) {
    const float* ph = phases + size_t(c) * phase_floats;
    for (int64_t t = 0; t < taps; ++t, d += kGemmMR) {
      const float* src = ph + toff[t];
      for (int64_t i = 0; i < kGemmMR; ++i) d[i] = off[i] >= 0 ? src[off[i]] : 0.f;
    }
  }
}
#if defined(__x86_64__)
// A tile's 8 pixels lie in a few runs along output rows (2 for the 7-wide rows of a 7x7
// output): each run is one masked 8-lane load at the same offsets in every (c, tap) plane,
// instead of 8 scalar loads and stores (the pack was 7% of ResNet-18's 7x7x512 convs).
struct PixelRuns {
  int n = 0;
  __mmask8 mask[kGemmMR];
  int64_t at[kGemmMR];  // plane offset of lane 0 of the run (lanes outside the mask unread)
};
static PixelRuns pixel_runs(const int64_t* off) {
  PixelRuns r;
  for (int64_t i = 0; i < kGemmMR;) {
    if (off[i] < 0) {
      ++i;
      continue;
    }
    int64_t j = i + 1;
    while (j < kGemmMR && off[j] == off[j - 1] + 1) ++j;
    r.mask[r.n] = __mmask8(((1u << j) - 1u) & ~((1u << i) - 1u));
    r.at[r.n] = off[i] - i;
    ++r.n;
    i = j;
  }
  return r;
}
__attribute__((target("avx512f,avx512vl"))) static void pack_a_from_phases_avx512(
    const float* __restrict phases, size_t phase_floats, int64_t icg, const int64_t* __restrict toff, int64_t taps,
    const int64_t* __restrict off, float* __restrict d) {
  const PixelRuns r = pixel_runs(off);
  for (int64_t c = 0; c < icg; ++c) {
    const float* ph = phases + size_t(c) * phase_floats;
    for (int64_t t = 0; t < taps; ++t, d += kGemmMR) {
      const float* src = ph + toff[t];
      __m256 v = _mm256_setzero_ps();
      for (int q = 0; q < r.n; ++q) v = _mm256_mask_loadu_ps(v, r.mask[q], src + r.at[q]);
      _mm256_storeu_ps(d, v);
    }
  }
}
#endif
static void pack_a_from_phases(const float* phases, size_t phase_floats, int64_t icg, const int64_t* toff,
                               int64_t taps, const int64_t* off, float* d) {
#if defined(__x86_64__)
  if (active_isa() == Isa::avx512) return pack_a_from_phases_avx512(phases, phase_floats, icg, toff, taps, off, d);
#endif
  pack_a_from_phases_scalar(phases, phase_floats, icg, toff, taps, off, d);
}

// x^T of a 1x1 conv with strides or pads as GEMM A tiles [t0, t1) from d on: row i of tile t
// is output pixel t * kGemmMR + i, column k input channel k (0 past the pixels or in a pad).
// ResNet's downsamples on 14x14 / 7x7 outputs: 196 / 49 pixels, the transposed product.
static void pack_a_strided_1x1(const ConvShape& s, const float* x, int64_t t0, int64_t t1, float* d) {
  const int64_t N = s.out_h * s.out_w, K = s.icg(), plane = s.in_h * s.in_w;
  for (int64_t t = t0; t < t1; ++t, d += kGemmMR * K) {
    int64_t src[kGemmMR];
    for (int64_t i = 0; i < kGemmMR; ++i) {
      const int64_t p = t * kGemmMR + i, iy = p / s.out_w * s.stride_h - s.pad_top,
                    ix = p % s.out_w * s.stride_w - s.pad_left;
      src[i] = p < N && iy >= 0 && iy < s.in_h && ix >= 0 && ix < s.in_w ? iy * s.in_w + ix : -1;
    }
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < kGemmMR; ++i) d[k * kGemmMR + i] = src[i] >= 0 ? x[k * plane + src[i]] : 0.f;
  }
}

// W^T in pack_b64's 64-wide panels, unpacked from the A tiles of `p` (one group).
static void pack_weights_transposed64(const PackedConvWeights& p, int64_t M, int64_t K, float* dst) {
  pack_b64(K, M, [&](int64_t m, int64_t k) { return packed_a_at(p, K, m, k); }, dst);
}

// W^T as GEMM B panels (48 or 64 wide): the kernel's prepacked buffer, else packed on first use.
template <typename Pack>
static const float* transposed_once(PackedConvWeights::Transposed& tw, size_t floats, Pack pack) {
  if (tw.prepacked) return tw.prepacked;
  std::call_once(tw.once, [&] {
    tw.data.resize(floats);
    pack(tw.data.data());
  });
  return tw.data.data();
}

static const float* transposed64_weights(const PackedConvWeights& w, int64_t M, int64_t K) {
  return transposed_once(*w.transposed64, packed_b64_floats(K, M),
                         [&](float* dst) { pack_weights_transposed64(w, M, K, dst); });
}

static const float* transposed_weights(const PackedConvWeights& w, int64_t M, int64_t K) {
  return transposed_once(*w.transposed, packed_b_floats(K, M), [&](float* dst) { pack_weights_transposed(w, M, K, dst); });
}

// out = conv as the transposed product: ct[N][M] = A * W^T with A = x^T (pack(pa, t0, t1)
// packs its row tiles [t0, t1) from pa on; called on several threads at once), then
// out = clamp(ct^T + residual). On several threads each one packs the A it multiplies itself
// and stores the transpose of what it computed, one parallel region with nothing handed
// between cores. Packing A once and sharing it made the other core re-read the 190 KB it had
// just seen rewritten, and the shared store read back what the other core multiplied:
// MobileNetV2's 7x7 1x1 convs ran no faster on 2 threads than on 1. small_w (W^T of at most
// 2 MB): threads may take ranges of pixels, each streaming all of W^T; else each takes a
// share of W^T's panels.
template <typename PackA>
static void conv_transposed(int64_t M, int64_t N, int64_t K, const PackedConvWeights& w, const float* bias,
                            float* out, const ConvPostOps& post, const float* res, ThreadPool* pool, bool small_w,
                            PackA&& pack) {
  const float* wt = transposed_weights(w, M, K);
  const int64_t panels = gemm_panels(M), tiles = gemm_tiles(N);
  // With few pixels the product streams W^T at a few multiply-adds per weight, so the weights'
  // size sets the time: squeeze-excite's 1x1 convs on one pixel (672 x 168, 450 KB) ran on one
  // thread at 113K multiply-adds, ~40 us, which two cores stream in ~25.
  const double work = double(M) * double(K) * double(std::max<int64_t>(N, kGemmMR));
  const int t = std::min<int64_t>(threads_for(pool, work), std::max(panels, tiles));
  // Panels of W^T split by whole panels only: 160 output channels (48 + 48 | 48 + 16) kept
  // one of 2 threads busy 20% longer. Then the threads take ranges of pixels instead (each
  // reads all of W^T): MobileNet's 7x7 1x1 convs, 672 / 960 -> 160 channels on 49 pixels.
  const int64_t busiest = (panels + t - 1) / t * kGemmNR;
  if (small_w && t > 1 && tiles >= t && 10 * busiest * t > 11 * M) {
    parallel_for(pool, t, [&](int64_t i) {
      // Whole tiles with about N / t pixels each (49 on 2: 24 | 25).
      const int64_t t0 = std::min(tiles, (i * N / t + kGemmMR / 2) / kGemmMR);
      const int64_t t1 = i + 1 == t ? tiles : std::min(tiles, ((i + 1) * N / t + kGemmMR / 2) / kGemmMR);
      if (t0 >= t1) return;
      const int64_t n0 = t0 * kGemmMR, n1 = std::min(N, t1 * kGemmMR);
      float* pa = scratch_floats(kScratchB, packed_a_floats(n1 - n0, K));
      float* ct = scratch_floats(kScratchC, size_t((n1 - n0) * M));
      pack(pa, t0, t1);
      GemmEpilogue ep;
      ep.col_bias = bias;
      gemm_packed_serial(n1 - n0, M, K, pa, wt, ct, M, ep);
      transpose_store(ct, M, 0, n0, n1, N, out, res, post, 0, M);
    });
    return;
  }
  const int tp = int(std::min<int64_t>(t, panels));
  if (small_w && tp > 1) {
    parallel_for(pool, tp, [&](int64_t i) {
      int64_t p0, p1;
      split_range(panels, tp, i, p0, p1);
      const int64_t c0 = p0 * kGemmNR, c1 = std::min(M, p1 * kGemmNR);
      float* pa = scratch_floats(kScratchB, packed_a_floats(N, K));
      float* ct = scratch_floats(kScratchC, size_t(N * (c1 - c0)));
      pack(pa, 0, tiles);
      GemmEpilogue ep;
      ep.col_bias = bias ? bias + c0 : nullptr;
      gemm_packed_serial(N, c1 - c0, K, pa, wt + p0 * kGemmNR * K, ct, c1 - c0, ep);
      transpose_store(ct, c1 - c0, c0, 0, N, N, out, res, post, c0, c1);
    });
    return;
  }
  GemmEpilogue ep;
  ep.col_bias = bias;
  if (t > 1 && panels >= 2 * int64_t(t)) {
    // A large W^T: each thread packs all of A too and multiplies a share of W^T equal in work
    // (cut at row tiles), then stores the transpose of what it computed. A packed by both
    // threads and read by both ran ResNet-18's 7x7x512 convs 6% slower on 2 threads.
    float* ct = scratch_floats(kScratchC, size_t(N * M));
    parallel_for(pool, t, [&](int64_t i) {
      float* pa = scratch_floats(kScratchB, packed_a_floats(N, K));
      pack(pa, 0, tiles);
      GemmRegion done[3];
      const int n = gemm_packed_share(N, M, K, pa, wt, ct, M, ep, t, i, done);
      for (int r = 0; r < n; ++r)
        transpose_store(ct + done[r].m0 * M, M, 0, done[r].m0, done[r].m1, N, out, res, post, done[r].n0, done[r].n1);
    });
    return;
  }
  float* pa = scratch_floats(kScratchB, packed_a_floats(N, K));
  float* ct = scratch_floats(kScratchC, size_t(N * M));
  pack(pa, 0, tiles);
  gemm_packed(N, M, K, pa, wt, ct, M, ep, pool);
  const int ts = threads_for(pool, double(M) * double(N), 1 << 15);
  parallel_for(ts <= 1 ? nullptr : pool, ts, [&](int64_t i) {
    int64_t m0, m1;
    split_range(M, ts, i, m0, m1);
    transpose_store(ct, M, 0, 0, N, N, out, res, post, m0, m1);
  });
}

// The direct product: out^T = x^T W^T as conv_transposed, with x^T read in place. The input
// rows a range of output pixels reads are copied into a zero-padded block (pads, strides and
// dilations become plain offsets: pixel (oy, ox) starts at (oy - oy0) * sh * wp + ox * sw,
// tap (c, ky, kx) reads c * rows * wp + ky * dh * wp + kx * dw further on), and the
// micro-kernel broadcasts each pixel's inputs through its pointer while W^T's panels stream
// through L1: no im2col and no phase planes (ResNet-18's stride-2 3x3 convs: 75-91 G
// multiply-adds/s with them, 100-112 without, one thread).
struct DirectBlock {
  std::vector<const float*> pixels;  // where each output pixel's window starts
  std::vector<int32_t> aoff;         // where each tap (c, ky, kx) reads, from there
};
// Input rows / columns (pads included) that n consecutive output rows / columns read.
static int64_t window_rows(const ConvShape& s, int64_t n) { return (n - 1) * s.stride_h + (s.k_h - 1) * s.dil_h + 1; }
static int64_t window_cols(const ConvShape& s, int64_t n) { return (n - 1) * s.stride_w + (s.k_w - 1) * s.dil_w + 1; }
static DirectBlock direct_block(const ConvShape& s, const float* xg, int64_t n0, int64_t n1) {
  const int64_t OW = s.out_w, oy0 = n0 / OW, oy1 = (n1 - 1) / OW + 1;
  const int64_t rows = window_rows(s, oy1 - oy0), wp = window_cols(s, OW);
  const int64_t icg = s.icg(), plane = rows * wp;
  float* xp = scratch_floats(kScratchA, size_t(icg * plane));
  // Input column j - pad_left lands at column j; the columns the input has there, [j0, j1).
  const int64_t j0 = std::min(wp, s.pad_left), j1 = std::clamp(s.in_w + s.pad_left, j0, wp);
  for (int64_t c = 0; c < icg; ++c)
    for (int64_t r = 0; r < rows; ++r) {
      float* d = xp + c * plane + r * wp;
      const int64_t iy = oy0 * s.stride_h - s.pad_top + r;
      if (iy < 0 || iy >= s.in_h) {
        std::fill(d, d + wp, 0.f);
        continue;
      }
      std::fill(d, d + j0, 0.f);
      std::memcpy(d + j0, xg + (c * s.in_h + iy) * s.in_w + (j0 - s.pad_left), size_t(j1 - j0) * sizeof(float));
      std::fill(d + j1, d + wp, 0.f);
    }
  DirectBlock b;
  b.pixels.resize(size_t(n1 - n0));
  for (int64_t n = n0; n < n1; ++n)
    b.pixels[size_t(n - n0)] = xp + (n / OW - oy0) * s.stride_h * wp + n % OW * s.stride_w;
  b.aoff.resize(size_t(s.gemm_k()));
  int32_t* o = b.aoff.data();
  for (int64_t c = 0; c < icg; ++c)
    for (int64_t ky = 0; ky < s.k_h; ++ky)
      for (int64_t kx = 0; kx < s.k_w; ++kx) *o++ = int32_t(c * plane + ky * s.dil_h * wp + kx * s.dil_w);
  return b;
}

// The direct product's tile: 8 x 48 (pack_b's panels), or 6 x 64 where the output channels
// come in whole 64s on AVX-512 (pack_b64's; conv_direct_panels64).
struct DirectTile {
  int64_t mr, nr;
};
static DirectTile direct_tile(bool panels64) { return panels64 ? DirectTile{kGemmPixels64MR, 64} : DirectTile{kGemmMR, kGemmNR}; }

// Output pixels [n0, n1) x W^T's panels [p0, p1) of image xg into out (NCHW, N pixels a
// channel), on the calling thread, wt in the layout direct_tile(panels64) names: bands of
// output rows whose padded block stays about 2 MB (a whole 64-channel 320x320 input padded is
// 26 MB of scratch, written and read back from memory: its 64 -> 128 stride-2 conv took
// 24.8-27.8 ms that way, 22.0-26.9 in bands), in each a block of pixels at a time, its
// product in this thread's scratch (about 256 KB, in L2) and stored transposed with the
// residual and the activation.
static void direct_range(const ConvShape& s, const float* xg, const float* wt, bool panels64, const float* bias,
                         float* out, const float* res, const ConvPostOps& post, int64_t n0, int64_t n1, int64_t p0,
                         int64_t p1) {
  const int64_t M = s.ocg(), N = s.out_h * s.out_w, K = s.gemm_k(), OW = s.out_w;
  const DirectTile dt = direct_tile(panels64);
  const int64_t c0 = p0 * dt.nr, c1 = std::min(M, p1 * dt.nr), cols = c1 - c0;
  if (n0 >= n1 || cols <= 0) return;
  const int64_t chunk = std::max<int64_t>(dt.mr, (256 << 10) / (cols * int64_t(sizeof(float))) / dt.mr * dt.mr);
  // Output rows a band holds: each adds stride_h input rows of icg * wp floats to the block.
  const int64_t band_rows =
      std::max<int64_t>(1, (1 << 19) / std::max<int64_t>(1, s.icg() * window_cols(s, OW) * s.stride_h));
  const int64_t band = std::max(chunk, band_rows * OW);
  float* ct = scratch_floats(kScratchC, size_t(std::min(chunk, n1 - n0) * cols));
  GemmEpilogue ep;
  ep.col_bias = bias ? bias + c0 : nullptr;
  for (int64_t b0 = n0; b0 < n1; b0 += band) {
    const int64_t b1 = std::min(n1, b0 + band);
    const DirectBlock b = direct_block(s, xg, b0, b1);
    for (int64_t a = b0; a < b1; a += chunk) {
      const int64_t e = std::min(b1, a + chunk);
      if (panels64)
        gemm_pixels64_serial(e - a, cols, K, b.pixels.data() + (a - b0), b.aoff.data(), wt + p0 * 64 * K, ct, cols,
                             ep);
      else
        gemm_pixels_serial(e - a, cols, K, b.pixels.data() + (a - b0), b.aoff.data(), wt + p0 * kGemmNR * K, ct,
                           cols, ep);
      transpose_store(ct, cols, c0, a, e, N, out, res, post, c0, c1);
    }
  }
}

// Whether conv2d runs `s` directly: AVX2 or AVX-512, group 1, the padded block's offsets in
// 32 bits, and enough channels. With 16 output channels a k step's 8 broadcasts feed 8
// multiply-adds (a 16 -> 16 3x3 conv on 80x80: 159 us as phase rows, 251 direct); with 3
// input channels (stems: 27-147 taps) the phase rows' long rows beat it too (ResNet's 7x7
// stem 1.31 -> 1.36 ms, one thread, before losing its fused max pool). AVX2's 4 x 24 blocks
// need 64 output channels (32 -> 32 on 40x40: 296 us as phase rows, 341 direct; from 64 on
// direct was 0.85-1.02x the phase rows' or im2col's time, on 1 and 2 threads); strided, 96
// (unmeasured below). On AVX-512, since the tile store tests its epilogue once a tile and
// the 6 x 64 tiles (d5d7251, 52c3654), strided convs from 32 output channels run direct too
// (conv2d harness, 1 / 2 threads, us: det_fpn's 16 -> 32 @160 369 -> 342 /
// 211 -> 185 and 32 -> 64 @80 357 -> 305 / 202 -> 163, seg_dilated's 32 -> 64 @64 217 -> 199
// / 130 -> 107, 32 -> 32 @112 366 -> 289 / 192 -> 164, 64 -> 64 5x5 @56 861 -> 676 /
// 459 -> 373; before, the phase rows won below 96). 1x1 convs have paths of their own.
bool conv_uses_direct(const ConvShape& s) {
  if (!gemm_pixels_panel_active() || s.group != 1 || s.out_h <= 0 || s.out_w <= 0) return false;
  if (s.k_h == 1 && s.k_w == 1) return false;
  const int64_t min_oc = active_isa() == Isa::avx512 ? 32 : s.stride_h > 1 || s.stride_w > 1 ? 96 : 64;
  if (s.ocg() < min_oc || s.icg() < 8) return false;
  return double(s.icg()) * double(window_rows(s, s.out_h)) * double(window_cols(s, s.out_w)) < double(INT32_MAX);
}

// Whether the direct product of `s` runs 6 x 64 tiles (its W^T in 64-wide panels): AVX-512,
// output channels in whole 64s, and 100 output pixels or more. On a 7x7 map 49 pixels make 8
// tiles of 6 and one of 1, each streaming the whole W^T slice: ResNet-18's 7x7-stage convs
// ran 1.00-1.01x the 8 x 48 time on one thread and 1.09-1.15x on two (see the commit).
bool conv_direct_panels64(const ConvShape& s) {
  return conv_uses_direct(s) && s.ocg() % 64 == 0 && s.out_h * s.out_w >= 100 && gemm_pixels64_panel_avx512() &&
         active_isa() == Isa::avx512;
}

static void conv_direct(const ConvShape& s, const float* xg, const PackedConvWeights& w, const float* bias,
                        float* out, const float* res, const ConvPostOps& post, ThreadPool* pool) {
  const int64_t M = s.ocg(), N = s.out_h * s.out_w, K = s.gemm_k();
  const bool p64 = conv_direct_panels64(s);
  const DirectTile dt = direct_tile(p64);
  const float* wt = p64 ? transposed64_weights(w, M, K) : transposed_weights(w, M, K);
  const int64_t panels = (M + dt.nr - 1) / dt.nr, tiles = (N + dt.mr - 1) / dt.mr;
  const int t = int(std::min<int64_t>(threads_for(pool, double(M) * double(N) * double(K)), std::max(panels, tiles)));
  if (t <= 1) {
    direct_range(s, xg, wt, p64, bias, out, res, post, 0, N, 0, panels);
    return;
  }
  // As conv_transposed: with W^T up to 2 MB each thread takes whole tiles of pixels (its own
  // padded rows, all of W^T); a larger W^T is split by panels (each thread all pixels).
  const bool by_pixels = K * M * int64_t(sizeof(float)) <= (2 << 20) && tiles >= t;
  parallel_for(pool, t, [&](int64_t i) {
    if (by_pixels) {
      const int64_t t0 = (i * N / t + dt.mr / 2) / dt.mr;
      const int64_t t1 = i + 1 == t ? tiles : ((i + 1) * N / t + dt.mr / 2) / dt.mr;
      direct_range(s, xg, wt, p64, bias, out, res, post, std::min(N, t0 * dt.mr), std::min(N, t1 * dt.mr), 0, panels);
    } else {
      int64_t p0, p1;
      split_range(panels, t, i, p0, p1);
      direct_range(s, xg, wt, p64, bias, out, res, post, 0, N, p0, p1);
    }
  });
}

bool conv_uses_transposed(const ConvShape& s) {
  if (conv_is_depthwise(s) || s.group != 1) return false;
  const int64_t M = s.ocg(), N = s.out_h * s.out_w;
  if (N == 0 || M == 0) return false;
  // As conv2d decides: 1x1 convs (in place, or strided and gathered) by the in-place rule,
  // the others (x^T packed from the phase planes either way) by the im2col one.
  if (s.k_h == 1 && s.k_w == 1) return conv_pointwise_transposed(M, N);
  return conv_uses_direct(s) || conv_pointwise_transposed(M, N, true);
}

size_t conv_transposed_floats(const ConvShape& s) {
  return conv_direct_panels64(s) ? packed_b64_floats(s.gemm_k(), s.ocg()) : packed_b_floats(s.gemm_k(), s.ocg());
}

void pack_conv_weights_transposed(const ConvShape& s, const float* packed, float* dst) {
  if (conv_direct_panels64(s)) pack_weights_transposed64(conv_weights_view(s, packed), s.ocg(), s.gemm_k(), dst);
  else pack_weights_transposed(conv_weights_view(s, packed), s.ocg(), s.gemm_k(), dst);
}

void conv_set_prepacked_transposed(const ConvShape& s, PackedConvWeights& w, const float* wt) {
  (conv_direct_panels64(s) ? w.transposed64 : w.transposed)->prepacked = wt;
}

// Which algorithm conv2d runs a shape with (conv2d and conv_describe both follow it).
enum class ConvPath {
  depthwise,             // conv_depthwise (dw_path picks the kernel)
  winograd,              // F(4x4,3x3), weights packed for it at kernel creation
  winograd_2x2,          // F(2x2,3x3), the same
  tap_rects,             // one product per tap over its live outputs, the same
  pointwise_transposed,  // 1x1 with few pixels: out^T = x^T W^T
  pointwise,             // 1x1 stride 1: GEMM reading X in place
  strided_1x1,           // gathered straight into packed panels, one GEMM
  strided_1x1_transposed,  // few pixels: x^T gathered as A, channels along the panels
  direct,                // x^T read in place from padded input rows, channels along the panels
  im2col_transposed,     // few pixels: channels along the panels
  phase_rows,            // the GEMM reads the phase planes' rows in place, per block of output rows
  im2col_blocked,        // pack-and-multiply per L2-sized block of panels, per thread
  im2col,                // pack everything, then one threaded GEMM
};
static ConvPath conv_path(const ConvShape& s, const PackedConvWeights& w, ThreadPool* pool) {
  if (w.depthwise) return ConvPath::depthwise;
  if (w.winograd) return ConvPath::winograd;
  if (w.winograd_2x2) return ConvPath::winograd_2x2;
  if (w.tap_rects) return ConvPath::tap_rects;
  const int64_t M = s.ocg(), K = s.gemm_k(), N = s.out_h * s.out_w;
  if (conv_is_pointwise(s)) return s.group == 1 && conv_pointwise_transposed(M, N) ? ConvPath::pointwise_transposed : ConvPath::pointwise;
  if (s.k_h == 1 && s.k_w == 1)
    // The gather is cheap either way (K = input channels), so by the in-place rule: ResNet-18's
    // 7x7 downsample 0.82x, its 14x14 one (196 pixels) 1.09x slower transposed.
    return s.group == 1 && conv_pointwise_transposed(M, N) ? ConvPath::strided_1x1_transposed : ConvPath::strided_1x1;
  if (conv_uses_direct(s)) return ConvPath::direct;
  if (s.group == 1 && conv_pointwise_transposed(M, N, true)) return ConvPath::im2col_transposed;
  // Pack-and-multiply in blocks of panels (about 192 KB of B), each thread on its own
  // panels, when the weights (A) stay in L2 across panels and there are enough panels to
  // share among the threads. Otherwise pack everything, then one threaded GEMM (K blocks
  // outside, A slices reused by all panels, M split too).
  const int gemm_threads = threads_for(pool, double(M) * double(N) * double(K));
  const bool few_panels = gemm_threads > 1 && gemm_panels(N) < 4 * int64_t(gemm_threads);
  if (few_panels) return ConvPath::im2col;
  // No im2col copy where the micro-kernel can read B as row pointers: row k of B is tap k's
  // phase plane, the output computed with the planes' row pitch wq (its columns past OW are
  // computed and dropped: at most 1/8 of them). A is read again for every 48 columns, from
  // L3 when it is larger than L2: 24 flops per byte, far from what L3 limits (a 5x5 conv of
  // 128 channels with 1.6 MB of weights ran 11% faster than packing its B, one thread).
  const DwGeometry g = dw_geometry(s);
  if (gemm_rows_tile_active() && 8 * g.wq <= 9 * s.out_w) return ConvPath::phase_rows;
  return M * K * int64_t(sizeof(float)) > (640 << 10) ? ConvPath::im2col : ConvPath::im2col_blocked;
}

// The direct product's words in conv_describe, and in conv_max_pool_describe for the stems
// that run it with 6 x 64 tiles.
constexpr const char* kDirectDescription = "direct: pixels read in place, channels along the lanes";
constexpr const char* kPanels64Description = " avx512f-6x64";

std::string conv_describe(const ConvShape& s, const PackedConvWeights& w, ThreadPool* pool) {
  std::string what;
  switch (conv_path(s, w, pool)) {
    case ConvPath::depthwise:
#if defined(__x86_64__)
      if ((dw_path(s) == DwPath::direct3x3_avx2 || dw_path(s) == DwPath::directkxk_avx2) && dw_lanes_ok(s) &&
          s.ocg() == 1 && s.out_c >= 8)
        return fmt::format("depthwise {}x{}, 8 channels as the lanes avx2", s.k_h, s.k_w);
      if (dw_path(s) == DwPath::directkxk_avx512 && dw_lanes_ok(s, 2, kDwLanes16MaxWidth) && s.ocg() == 1 && s.out_c >= 16)
        return fmt::format("depthwise {}x{}, 16 channels as the lanes avx512", s.k_h, s.k_w);
#endif
      switch (dw_path(s)) {
        case DwPath::direct3x3_avx2: return "depthwise direct 3x3 avx2";
        case DwPath::directkxk_avx2: return fmt::format("depthwise direct {}x{} avx2", s.k_h, s.k_w);
        case DwPath::directkxk_avx512: return fmt::format("depthwise direct {}x{} avx512", s.k_h, s.k_w);
        case DwPath::phase_planes: return fmt::format("depthwise {}x{} over phase planes", s.k_h, s.k_w);
      }
      break;
    case ConvPath::winograd:
      return fmt::format("winograd F(4x4,3x3){} + gemm {}",
                         winograd_5x5_blocks(s) ? " over the 5x5 kernel's four 3x3 blocks" : "", gemm_kernel_name());
    case ConvPath::winograd_2x2:
      if (winograd_2x2_lanes_fit(s)) return "winograd F(2x2,3x3), tiles along the lanes avx512";
      return fmt::format("winograd F(2x2,3x3), tiles as rows + gemm {}", gemm_kernel_name());
    case ConvPath::tap_rects:
      return fmt::format("one gemm per tap over the outputs it reads inside the input ({:.0f}% of the taps' reads) {}",
                         100.0 * conv_live_tap_share(s), gemm_kernel_name());
    case ConvPath::pointwise_transposed: what = "1x1 as transposed gemm (few pixels)"; break;
    case ConvPath::pointwise: what = "1x1 gemm reading X in place"; break;
    case ConvPath::strided_1x1: what = "strided 1x1: gather + gemm"; break;
    case ConvPath::strided_1x1_transposed: what = "strided 1x1 as transposed gemm (few pixels)"; break;
    case ConvPath::direct:
      what = kDirectDescription;
      if (conv_direct_panels64(s)) return what + kPanels64Description;
      break;
    case ConvPath::im2col_transposed: what = "im2col as transposed gemm (few pixels)"; break;
    case ConvPath::phase_rows: what = "gemm reading phase-plane rows in place (no im2col)"; break;
    case ConvPath::im2col_blocked: what = "im2col + gemm per L2 block"; break;
    case ConvPath::im2col: what = "im2col + gemm"; break;
  }
  return what + " " + gemm_kernel_name();
}

bool conv_max_pool_fuses(const ConvShape& s, const PackedConvWeights& w, const PoolShape& ps, ThreadPool* pool) {
  return s.group == 1 && !w.depthwise && s.out_h > 0 && s.out_w > 0 && max_pool_rows_ok(ps) &&
         ps.in[1] == s.out_h && ps.in[2] == s.out_w && conv_path(s, w, pool) == ConvPath::phase_rows;
}

// A stem of 64 output channels with a 5x5 or larger kernel on few input channels (ResNet's
// 7x7 stride-2 3 -> 64): conv2d_max_pool makes its rows as the direct product with the 6 x 64
// pixel tile (gemm_pixels64_serial) instead of phase rows. The phase rows' GEMM reads B
// through 147 shifted, unaligned row windows; here the 147 taps are broadcasts and W^T's
// aligned [k][64] rows the vectors, and the pool works channels-last (conv2d_max_pool_stem):
// ResNet's stem with its pool, one thread 1375-1402 -> 1340-1374 us, two 784-816 -> 736-743.
bool conv_stem64_ok(const ConvShape& s) {
  return gemm_pixels64_panel_avx512() && active_isa() == Isa::avx512 && s.group == 1 && s.ocg() == 64 &&
         s.icg() <= 4 && s.k_h * s.k_w >= 25 && s.out_h > 0 && s.out_w > 0 &&
         double(s.icg()) * double(window_rows(s, s.out_h)) * double(window_cols(s, s.out_w)) < double(INT32_MAX);
}

// The stem's F(4x4, 4x4) weights, unpacked from the A tiles of `w` and transformed on first use.
static const float* stem_winograd_weights(const ConvShape& s, const PackedConvWeights& w) {
  return transposed_once(*w.stem_winograd, stem_winograd_packed_floats(s), [&](float* dst) {
    const int64_t K = s.gemm_k();
    std::vector<float> raw(size_t(s.out_c * K));
    for (int64_t m = 0; m < s.out_c; ++m)
      for (int64_t k = 0; k < K; ++k) raw[size_t(m * K + k)] = packed_a_at(w, K, m, k);
    stem_winograd_pack_weights(s, raw.data(), dst);
  });
}

// Conv rows [first, end) the window of pooled row p reads (clipped to the conv's rows).
struct PoolWindowRows {
  int64_t first, end;
};
static PoolWindowRows pool_window_rows(const ConvShape& s, const PoolShape& ps, int64_t p) {
  const int64_t r = p * ps.stride[1] - ps.pad_begin[1];
  return {std::clamp<int64_t>(r, 0, s.out_h), std::clamp<int64_t>(r + ps.kernel[1], 0, s.out_h)};
}

// The row walk of both conv2d_max_pool forms, on one thread: pooled rows [p0, p1), the conv
// rows their windows read made block by block (block_rows at a time) into cb, whose `planes`
// planes (plane_stride floats apart) hold conv rows [h0, h1), row r at (r - h0) * row_floats.
// Before each block the rows a later pooled row still needs move to the front (fewer than the
// pool's kernel rows); each pooled row is made as soon as its window's rows are all there.
// make(c0, c1, b0, b1, dst): conv rows [b0, b1) of this thread's [c0, c1) at dst (row stride
// row_floats, plane stride plane_stride). pool(h0, q0, q1): pooled rows [q0, q1) from cb; the
// last call may hold rows whose windows have no conv row (-inf, as max_pool).
template <typename Make, typename Pool>
static void pool_row_walk(const ConvShape& s, const PoolShape& ps, int64_t p0, int64_t p1, int64_t block_rows, float* cb,
                          int64_t planes, int64_t plane_stride, int64_t row_floats, Make&& make, Pool&& pool) {
  const int64_t c0 = pool_window_rows(s, ps, p0).first, c1 = std::max(c0, pool_window_rows(s, ps, p1 - 1).end);
  int64_t next = p0;         // the first pooled row not made yet
  int64_t h0 = c0, h1 = c0;  // the conv rows in cb
  for (int64_t b0 = c0; b0 < c1; b0 += block_rows) {
    const int64_t b1 = std::min(c1, b0 + block_rows);
    const int64_t keep0 = next < p1 ? std::clamp(pool_window_rows(s, ps, next).first, h0, h1) : h1;
    if (keep0 > h0 && h1 > keep0)
      for (int64_t m = 0; m < planes; ++m)
        std::memmove(cb + m * plane_stride, cb + m * plane_stride + (keep0 - h0) * row_floats,
                     size_t((h1 - keep0) * row_floats) * sizeof(float));
    h0 = keep0;
    make(c0, c1, b0, b1, cb + (h1 - h0) * row_floats);
    h1 = b1;
    int64_t q = next;
    while (q < p1 && pool_window_rows(s, ps, q).end <= h1) ++q;
    if (q > next) pool(h0, next, q);
    next = q;
  }
  if (next < p1) pool(h0, next, p1);
}

#if defined(__x86_64__)
// Pooled row q of a channels-last stem block buffer (conv rows [h0, ...) as [row][OW][OC],
// OC = 16 J <= 64): rows [r0, r1) of its window, the channels as J vectors, into
// prow[PW][OC]. Padding is skipped (-inf when a window holds nothing); max(v, m) returns m
// when v is NaN, so a NaN is skipped as max_pool does.
template <int J>
__attribute__((target("avx512f"))) static void stem_pool_row(const PoolShape& ps, const float* cb, int64_t h0,
                                                             int64_t r0, int64_t r1, int64_t OW, float* prow) {
  constexpr int64_t OC = 16 * J;
  const int64_t PW = ps.out[2], PKW = ps.kernel[2], PSW = ps.stride[2], PPL = ps.pad_begin[2];
  for (int64_t pw = 0; pw < PW; ++pw) {
    const int64_t x0 = std::max<int64_t>(0, pw * PSW - PPL), x1 = std::min<int64_t>(OW, pw * PSW - PPL + PKW);
    __m512 m[J];
    for (int j = 0; j < J; ++j) m[j] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = x0; c < x1; ++c) {
        const float* v = cb + ((r - h0) * OW + c) * OC;
        for (int j = 0; j < J; ++j) m[j] = _mm512_maskz_max_ps(0xFFFF, _mm512_load_ps(v + 16 * j), m[j]);
      }
    for (int j = 0; j < J; ++j) _mm512_store_ps(prow + pw * OC + 16 * j, m[j]);
  }
}

static void stem_pool_row_any(int64_t OC, const PoolShape& ps, const float* cb, int64_t h0, int64_t r0, int64_t r1,
                              int64_t OW, float* prow) {
  switch (OC) {
    case 16: stem_pool_row<1>(ps, cb, h0, r0, r1, OW, prow); break;
    case 32: stem_pool_row<2>(ps, cb, h0, r0, r1, OW, prow); break;
    case 48: stem_pool_row<3>(ps, cb, h0, r0, r1, OW, prow); break;
    default: stem_pool_row<4>(ps, cb, h0, r0, r1, OW, prow); break;
  }
}
#endif

// conv2d_max_pool for conv_stem_winograd_ok shapes (16-64 channels) and conv_stem64_ok ones:
// the conv rows made by Winograd over the stride phases or as the direct product with 6 x 64
// tiles and kept in their layout, channels-last ([row][OW][OC]: no transposing store); the
// pool takes the channels as vectors, and only the pooled rows are transposed into the NCHW
// output. Threads and row blocks as conv2d_max_pool's phase rows.
static void conv2d_max_pool_stem(const ConvShape& s, const float* x, const PackedConvWeights& w, const float* bias,
                                   const PoolShape& ps, float* pooled, ThreadPool* pool, const ConvPostOps& post) {
#if defined(__x86_64__)
  const int64_t K = s.gemm_k(), OH = s.out_h, OW = s.out_w, N = OH * OW;
  const int64_t PH = ps.out[1], PW = ps.out[2], PKH = ps.kernel[1], PSH = ps.stride[1];
  const bool wino = conv_stem_winograd_ok(s);
  const float* wt64 = wino ? nullptr : transposed64_weights(w, 64, K);
  const float* u = wino ? stem_winograd_weights(s, w) : nullptr;
  const GemmEpilogue e = conv_epilogue_cols(bias, post);
  const int64_t OC = s.out_c, row_floats = OW * OC;
  const int bands = int(std::min<int64_t>(threads_for(pool, double(OC) * double(N) * double(K)), PH));
  const int64_t block_rows =
      wino ? std::max(kStemWinogradBlockRows, PSH)
           : std::max<int64_t>({1, PSH, (160 << 10) / (row_floats * int64_t(sizeof(float)))});
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* xn = x + n * s.in_c * s.in_h * s.in_w;
    float* on = pooled + n * OC * PH * PW;
    parallel_for(bands <= 1 ? nullptr : pool, bands, [&](int64_t i) {
      int64_t p0, p1;
      split_range(PH, bands, i, p0, p1);
      float* cb = scratch_floats(kScratchB, size_t((block_rows + PKH) * row_floats));
      float* prow = scratch_floats(kScratchC, size_t(PW * OC));
      pool_row_walk(
          s, ps, p0, p1, block_rows, cb, 1, 0, row_floats,
          [&](int64_t, int64_t, int64_t b0, int64_t b1, float* dst) {
            if (wino) {
              stem_winograd_rows(s, xn, u, bias, post, b0, b1, dst);
              return;
            }
            const DirectBlock db = direct_block(s, xn, b0 * OW, b1 * OW);
            gemm_pixels64_serial((b1 - b0) * OW, 64, K, db.pixels.data(), db.aoff.data(), wt64, dst, 64, e);
          },
          [&](int64_t h0, int64_t q0, int64_t q1) {
            for (int64_t q = q0; q < q1; ++q) {
              const PoolWindowRows r = pool_window_rows(s, ps, q);
              stem_pool_row_any(OC, ps, cb, h0, r.first, r.end, OW, prow);
              transpose_store(prow, OC, 0, 0, PW, PH * PW, on + q * PW, nullptr, ConvPostOps{}, 0, OC);
            }
          });
    });
  }
#else
  (void)s, (void)x, (void)w, (void)bias, (void)ps, (void)pooled, (void)pool, (void)post;
#endif
}

std::string conv_max_pool_describe(const ConvShape& s, const PackedConvWeights& w, ThreadPool* pool) {
  const char* pooled = ", max pool over each block of rows it makes";
  if (conv_stem_winograd_ok(s))
    return std::string("stem by winograd F(4x4,4x4) over the input's stride phases, channels-last rows") + pooled;
  if (conv_stem64_ok(s)) return std::string(kDirectDescription) + kPanels64Description + pooled;
  return conv_describe(s, w, pool) + pooled;
}

void conv2d_max_pool(const ConvShape& s, const float* x, const PackedConvWeights& w, const float* bias,
                     const PoolShape& ps, float* pooled, ThreadPool* pool, const ConvPostOps& post) {
  if (post.residual) throw std::logic_error("conv2d_max_pool: no residual");
  if (!conv_max_pool_fuses(s, w, ps, pool)) {
    std::vector<float> c(size_t(s.batch * s.out_c * s.out_h * s.out_w));
    conv2d(s, x, w, bias, c.data(), pool, post);
    max_pool(ps, c.data(), pooled, pool);
    return;
  }
  if (conv_stem_winograd_ok(s) || conv_stem64_ok(s)) {
    conv2d_max_pool_stem(s, x, w, bias, ps, pooled, pool, post);
    return;
  }
  // The phase_rows path of conv2d, its row blocks pooled instead of copied out. Each thread
  // takes a range of pooled rows and makes the conv rows their windows read (a range's first
  // rows are made by both threads: 1 of 57 at 3x3 / 2 over 112 rows). Rows a later pooled row
  // still needs stay at the front of the block buffer, the next block goes after them.
  const int64_t M = s.out_c, K = s.gemm_k(), N = s.out_h * s.out_w;
  const int64_t PH = ps.out[1], PW = ps.out[2], PKH = ps.kernel[1], PSH = ps.stride[1];
  const int64_t wq = dw_geometry(s).wq;
  const int gemm_threads = threads_for(pool, double(M) * double(N) * double(K));
  const int bands = int(std::min<int64_t>(gemm_threads, PH));
  const int64_t block_rows = std::max<int64_t>({1, PSH, (160 << 10) / (M * wq * int64_t(sizeof(float)))});
  const int64_t cap = block_rows + PKH;  // rows the buffer holds: a block and what is kept
  const GemmEpilogue e = conv_epilogue(bias, post);
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* xn = x + n * s.in_c * s.in_h * s.in_w;
    float* on = pooled + n * M * PH * PW;
    parallel_for(bands <= 1 ? nullptr : pool, bands, [&](int64_t i) {
      int64_t p0, p1;
      split_range(PH, bands, i, p0, p1);
      float* cb = scratch_floats(kScratchB, size_t(M * cap * wq));
      std::vector<const float*> rows;  // this band's tap rows, made with its first block
      pool_row_walk(
          s, ps, p0, p1, block_rows, cb, M, cap * wq, wq,
          [&](int64_t c0, int64_t c1, int64_t b0, int64_t b1, float* dst) {
            if (rows.empty()) rows = band_tap_rows(s, build_band_phases(s, xn, c0, c1));
            gemm_rows_serial(M, (b1 - b0) * wq, K, w.data, rows.data(), (b0 - c0) * wq, dst, cap * wq, e);
          },
          [&](int64_t h0, int64_t q0, int64_t q1) {
            for (int64_t m = 0; m < M; ++m) max_pool_plane_rows(ps, cb + m * cap * wq, wq, h0, on + m * PH * PW, q0, q1);
          });
    });
  }
}

// One image and group of a 1x1 conv as the transposed product: x^T packed from xg ([K][N]),
// its rows (channels) multiplied by scale[k] right after packing when scale is given.
static void pointwise_transposed(int64_t M, int64_t N, int64_t K, const PackedConvWeights& w, const float* xg,
                                 const float* scale, const GemmEpilogue& ep, float* out, const ConvPostOps& post,
                                 ThreadPool* pool) {
  conv_transposed(M, N, K, w, ep.row_bias, out, post, ep.residual, pool, true, [&](float* pa, int64_t t0, int64_t t1) {
    const int64_t n0 = t0 * kGemmMR;
    pack_a(xg + n0, N, true, std::min(N, t1 * kGemmMR) - n0, K, 1.f, pa);
    if (scale)
      for (int64_t t = 0; t < t1 - t0; ++t) {
        float* tile = pa + t * K * kGemmMR;  // [K][8]: row k of x^T's tile is channel k
        scale_rows8(tile, scale, K, tile);
      }
  });
}

void conv2d(const ConvShape& s, const float* x, const PackedConvWeights& w, const float* bias, float* out,
            ThreadPool* pool, const ConvPostOps& post) {
  if (w.depthwise) {
    conv_depthwise(s, x, w.data, bias, out, pool, post);
    return;
  }
  const int64_t M = s.ocg(), K = s.gemm_k(), N = s.out_h * s.out_w;
  if (N == 0 || M == 0) return;
  const ConvPath path = conv_path(s, w, pool);
  if (path == ConvPath::winograd) {  // packed for this shape when conv_uses_winograd chose it
    conv2d_winograd(s, x, w.winograd, bias, out, pool, post);
    return;
  }
  if (path == ConvPath::winograd_2x2) {
    conv2d_winograd_2x2(s, x, w.winograd_2x2, bias, out, pool, post);
    return;
  }
  if (path == ConvPath::tap_rects) {
    conv2d_tap_rects(s, x, w.tap_rects, bias, out, pool, post);
    return;
  }
  const int64_t panels = gemm_panels(N);
  const int pack_threads = threads_for(pool, double(K) * double(N), 1 << 15);
  const DwGeometry geo = dw_geometry(s);
  // Strided 1x1 kernels gather straight into the panels (phase planes would copy twice).
  const int gemm_threads = threads_for(pool, double(M) * double(N) * double(K));
  const int64_t block_panels = std::max<int64_t>(1, (192 << 10) / (kGemmNR * K * int64_t(sizeof(float))));
  const int64_t tasks = gemm_threads <= 1 ? 1 : std::min<int64_t>(panels, 4 * int64_t(gemm_threads));
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t g = 0; g < s.group; ++g) {
      const float* xg = x + (n * s.in_c + g * s.icg()) * s.in_h * s.in_w;
      const int64_t off = (n * s.out_c + g * M) * N;
      const GemmEpilogue ep =
          conv_epilogue(bias ? bias + g * M : nullptr, post, post.residual ? post.residual + off : nullptr, N);
      if (path == ConvPath::pointwise_transposed) {
        pointwise_transposed(M, N, K, w, xg, nullptr, ep, out + off, post, pool);
        continue;
      }
      if (path == ConvPath::pointwise) {
        gemm_packed_a(M, N, K, w.data + g * w.per_group, xg, N, out + off, N, ep, pool);
        continue;
      }
      if (path == ConvPath::strided_1x1_transposed) {
        conv_transposed(M, N, K, w, ep.row_bias, out + off, post, ep.residual, pool, true,
                        [&](float* pa, int64_t t0, int64_t t1) { pack_a_strided_1x1(s, xg, t0, t1, pa); });
        continue;
      }
      const float* pa = w.data ? w.data + g * w.per_group : nullptr;  // null: W^T only (transposed paths)
      if (path == ConvPath::strided_1x1) {
        // x at the strides as a plain [K][n] matrix, one output row per gather (per panel and
        // row segment, the calls cost more than the copy: ResNet's 64 -> 128 downsample spent
        // 30 us gathering for a 64 us GEMM), then the GEMM reading it in place. With threads,
        // each gathers the pixels of its own output rows into its scratch and multiplies them
        // by all the weights: it reads the input rows the layer before wrote on its core and
        // writes what no other core reads back (the gather split by channels and the GEMM by
        // rows had each thread read half its operands from the other core: ResNet-18's 128 ->
        // 256 downsample took longer on 2 threads than on 1).
        const GatherSpan span = gather_span(-s.pad_left, s.stride_w, s.out_w, s.in_w);  // the same for every row
        const int64_t parts = std::min<int64_t>(gemm_threads, s.out_h);
        parallel_for(parts <= 1 ? nullptr : pool, parts, [&](int64_t i) {
          int64_t oy0, oy1;
          split_range(s.out_h, parts, i, oy0, oy1);
          const int64_t n0 = oy0 * s.out_w, nl = (oy1 - oy0) * s.out_w;  // parts <= out_h: never empty
          float* xs = scratch_floats(kScratchB, size_t(K * nl));
          for (int64_t c = 0; c < K; ++c)
            for (int64_t oy = oy0; oy < oy1; ++oy) {
              float* d = xs + c * nl + (oy - oy0) * s.out_w;
              const int64_t iy = oy * s.stride_h - s.pad_top;
              if (iy < 0 || iy >= s.in_h) std::fill(d, d + s.out_w, 0.f);
              else gather_row_span(d, xg + (c * s.in_h + iy) * s.in_w, -s.pad_left, s.stride_w, s.out_w, span);
            }
          GemmEpilogue e = ep;
          if (e.residual) e.residual += n0;
          gemm_packed_a(M, nl, K, pa, xs, nl, out + off + n0, N, e, nullptr);
        });
        continue;
      }
      if (path == ConvPath::phase_rows) {
        // B(k, n') for n' = oy * wq + ox is the phase plane of tap k at n': the output is
        // computed with the planes' row pitch, a block of output rows at a time into this
        // thread's scratch, and its rows (columns < OW) copied out with the residual and
        // the activation when there is a residual (the GEMM's store cannot add it: other pitch).
        // One band of output rows per thread, each building the phase rows its band reads in
        // its own scratch: planes built by both threads and read by both made every GEMM read
        // half its rows from the other core (220 ns a line on the 2-vCPU Zen 5 guest), and the
        // micro-kernel's K row streams are too many for the prefetcher to hide that.
        const int64_t wq = geo.wq, OH = s.out_h, OW = s.out_w;
        const int bands = int(std::min<int64_t>(gemm_threads, OH));
        // Blocks of about 160 KB of output, and at least two per band.
        int64_t block_rows = std::max<int64_t>(1, (160 << 10) / (M * wq * int64_t(sizeof(float))));
        if (bands > 1) block_rows = std::min(block_rows, std::max<int64_t>(1, OH / (2 * int64_t(bands))));
        GemmEpilogue e;
        e.row_bias = ep.row_bias;
        if (!ep.residual) {
          e.clamp = ep.clamp;
          e.lo = ep.lo;
          e.hi = ep.hi;
          e.hardswish = ep.hardswish;
        }
        parallel_for(bands <= 1 ? nullptr : pool, bands, [&](int64_t i) {
          int64_t oy0, oy1;
          split_range(OH, bands, i, oy0, oy1);
          const BandPhases bp = build_band_phases(s, xg, oy0, oy1);
          const ConvShape& sb = bp.s;
          const std::vector<const float*> rows = band_tap_rows(s, bp);
          float* cb = scratch_floats(kScratchB, size_t(M * block_rows * wq));
          for (int64_t b0 = 0; b0 < sb.out_h; b0 += block_rows) {
            const int64_t b1 = std::min(sb.out_h, b0 + block_rows), cols = (b1 - b0) * wq;
            gemm_rows_serial(M, cols, K, pa, rows.data(), b0 * wq, cb, cols, e);
            for (int64_t m = 0; m < M; ++m)
              for (int64_t oy = b0; oy < b1; ++oy) {
                const int64_t o = m * N + (oy0 + oy) * OW;
                finish_row(out + off + o, cb + m * cols + (oy - b0) * wq, ep.residual ? ep.residual + o : nullptr, OW,
                           ep.residual && ep.clamp, ep.lo, ep.hi, ep.residual && ep.hardswish);
              }
          }
        });
        continue;
      }
      if (path == ConvPath::direct) {
        conv_direct(s, xg, w, ep.row_bias, out + off, ep.residual, post, pool);
        continue;
      }
      if (path == ConvPath::im2col_transposed) {
        // Few output pixels: channels along the panels (see conv_pointwise_transposed).
        // Each thread packs the x^T tiles it multiplies, from phase rows it builds itself (those
        // of its pixels' output rows): one A packed by both threads and read by both ran
        // ResNet-18's 128 -> 256 stride-2 conv (W^T 1.2 MB) only 1.15x faster on 2 threads than
        // on 1 (the pack 60 -> 100 us, each half read from the other core); private, 0.56 ->
        // 0.48 ms. With a large W^T (its 256 -> 512 one, 4.7 MB on 49 pixels) two threads
        // streaming all of it were slower (0.50 -> 0.58 ms) than half of W^T each.
        const int64_t taps = s.k_h * s.k_w, icg = s.icg(), OW = s.out_w;
        const bool small_w = K * M * int64_t(sizeof(float)) <= (2 << 20);
        conv_transposed(M, N, K, w, ep.row_bias, out + off, post, ep.residual, pool, small_w,
                        [&](float* pa, int64_t ta, int64_t tb) {
                          const int64_t p0 = ta * kGemmMR, p1 = std::min(N, tb * kGemmMR), oy0 = p0 / OW;
                          const BandPhases bp = build_band_phases(s, xg, oy0, (p1 - 1) / OW + 1);
                          const DwGeometry& gb = bp.g;
                          std::vector<int64_t> toff(static_cast<size_t>(taps));
                          for (int64_t ky = 0; ky < s.k_h; ++ky)
                            for (int64_t kx = 0; kx < s.k_w; ++kx) toff[size_t(ky * s.k_w + kx)] = tap_offset(bp.s, gb, ky, kx);
                          for (int64_t t = ta; t < tb; ++t) {
                            int64_t poff[kGemmMR];
                            for (int64_t i = 0; i < kGemmMR; ++i) {
                              const int64_t p = t * kGemmMR + i;
                              poff[i] = p < N ? (p / OW - oy0) * gb.wq + p % OW : -1;
                            }
                            pack_a_from_phases(bp.planes, gb.phase_floats, icg, toff.data(), taps, poff,
                                               pa + (t - ta) * kGemmMR * K);
                          }
                        });
        continue;
      }
      // Phase planes of every input channel first, then panels copied from them in runs.
      float* phases = scratch_floats(kScratchA, size_t(s.icg()) * geo.phase_floats);
      const int64_t icg = s.icg();
      parallel_for(pack_threads <= 1 ? nullptr : pool, pack_threads, [&](int64_t i) {
        int64_t c0, c1;
        split_range(icg, pack_threads, i, c0, c1);
        for (int64_t c = c0; c < c1; ++c) build_phases(s, geo, xg + c * s.in_h * s.in_w, phases + size_t(c) * geo.phase_floats);
      });
      if (path == ConvPath::im2col_blocked) {
        // Each task packs a few panels into its own (L2-sized) buffer and
        // multiplies them at once, so B is read back from cache.
        parallel_for(gemm_threads <= 1 ? nullptr : pool, tasks, [&](int64_t i) {
          int64_t q0, q1;
          split_range(panels, tasks, i, q0, q1);
          float* bb = scratch_floats(kScratchB, size_t(block_panels * kGemmNR * K));
          for (int64_t b0 = q0; b0 < q1; b0 += block_panels) {
            const int64_t b1 = std::min(q1, b0 + block_panels), n0 = b0 * kGemmNR;
            im2col_pack_phased(s, phases, bb, b0, b1);
            GemmEpilogue e = ep;
            if (e.residual) e.residual += n0;
            gemm_packed_serial(M, std::min(N - n0, (b1 - b0) * kGemmNR), K, pa, bb, out + off + n0, N, e);
          }
        });
        continue;
      }
      float* pb = scratch_floats(kScratchB, packed_b_floats(K, N));
      parallel_for(pack_threads <= 1 ? nullptr : pool, pack_threads, [&](int64_t i) {
        int64_t p0, p1;
        split_range(panels, pack_threads, i, p0, p1);
        im2col_pack_phased(s, phases, pb + p0 * kGemmNR * K, p0, p1);
      });
      gemm_packed(M, N, K, pa, pb, out + off, N, ep, pool);
    }
  }
}

bool conv_channel_scale_folds(const ConvShape& s) {
  if (s.group != 1 || !conv_is_pointwise(s) || s.in_c <= 0 || s.out_c <= 0) return false;
  // Transposed, the scale costs a pass over x^T in cache, where it was just packed.
  if (conv_pointwise_transposed(s.out_c, s.out_h * s.out_w)) return true;
  return s.out_c * s.in_c <= s.in_c * s.in_h * s.in_w;
}

void conv2d_channel_scaled(const ConvShape& s, const float* x, const PackedConvWeights& w, const float* scale,
                           const float* bias, float* out, ThreadPool* pool, const ConvPostOps& post) {
  if (!conv_channel_scale_folds(s) || w.depthwise || w.winograd || w.winograd_2x2 || w.tap_rects)
    throw std::logic_error("conv2d_channel_scaled: not a plain 1x1 conv whose scale folds");
  const int64_t M = s.out_c, N = s.out_h * s.out_w, K = s.in_c;
  if (conv_pointwise_transposed(M, N)) {
    for (int64_t n = 0; n < s.batch; ++n) {
      const float* xn = x + n * K * N;
      const int64_t off = n * M * N;
      const GemmEpilogue ep = conv_epilogue(bias, post, post.residual ? post.residual + off : nullptr, N);
      pointwise_transposed(M, N, K, w, xn, scale, ep, out + off, post, pool);
    }
    return;
  }
  // Threaded with 4+ row tiles a thread, each thread scales all of W into its own scratch and
  // runs its own range of pixels alone, as the panel split would: the pixels the block before
  // wrote on this core (its row bands), and no scaled tile another core has just written (one
  // shared copy read by both). MobileNetV3's 480 / 672 -> 112 convs at 14x14 on 2 threads
  // (tools/ab_kernels.py, 12 rounds): 93 -> 79 and 140 -> 113 us. Its 40-channel ones keep the
  // shared copy (each its own: 8-24% slower); split by row tiles instead, x crossed cores: 89 / 125.
  const int threads = threads_for(pool, double(M) * double(N) * double(K), 1 << 20);
  const int64_t panels = N / kGemmNR;
  if (threads > 1 && gemm_tiles(M) >= 4 * threads && panels >= threads) {
    parallel_for(pool, threads, [&](int64_t i) {
      int64_t p0, p1;
      split_range(panels, threads, i, p0, p1);
      const int64_t n0 = p0 * kGemmNR, n1 = i == threads - 1 ? N : p1 * kGemmNR;
      float* ws = scratch_floats(kScratchD, packed_conv_floats(s));
      scale_packed_conv_input_channels(s, w.data, scale, ws);  // once: every image shares the scale
      for (int64_t n = 0; n < s.batch; ++n) {
        const int64_t at = n * M * N + n0;
        const GemmEpilogue ep = conv_epilogue(bias, post, post.residual ? post.residual + at : nullptr, N);
        gemm_packed_a(M, n1 - n0, K, ws, x + n * K * N + n0, N, out + at, N, ep, nullptr);  // conv2d's pointwise path
      }
    });
    return;
  }
  float* ws = scratch_floats(kScratchD, packed_conv_floats(s));
  scale_packed_conv_input_channels(s, w.data, scale, ws);
  conv2d(s, x, conv_weights_view(s, ws), bias, out, pool, post);
}

void conv2d_reference(const ConvShape& s, const float* x, const float* w, const float* bias, float* out,
                      const ConvPostOps& post) {
  const int64_t icg = s.icg(), ocg = s.ocg();
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oc = 0; oc < s.out_c; ++oc) {
      const int64_t g = oc / ocg;
      for (int64_t oy = 0; oy < s.out_h; ++oy)
        for (int64_t ox = 0; ox < s.out_w; ++ox) {
          double acc = bias ? bias[oc] : 0.0;
          for (int64_t ic = 0; ic < icg; ++ic)
            for (int64_t ky = 0; ky < s.k_h; ++ky)
              for (int64_t kx = 0; kx < s.k_w; ++kx) {
                int64_t iy = oy * s.stride_h - s.pad_top + ky * s.dil_h;
                int64_t ix = ox * s.stride_w - s.pad_left + kx * s.dil_w;
                if (iy < 0 || iy >= s.in_h || ix < 0 || ix >= s.in_w) continue;
                acc += double(x[((n * s.in_c + g * icg + ic) * s.in_h + iy) * s.in_w + ix]) *
                       double(w[((oc * icg + ic) * s.k_h + ky) * s.k_w + kx]);
              }
          const int64_t o = ((n * s.out_c + oc) * s.out_h + oy) * s.out_w + ox;
          float v = float(acc);
          if (post.residual) v += post.residual[o];
          if (post.clamp) v = std::min(std::max(v, post.lo), post.hi);
          if (post.hardswish) v = hard_swish(v);
          out[o] = v;
        }
    }
}

}  // namespace nxrt::cpu
