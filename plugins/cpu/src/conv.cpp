#include "conv.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu_info.hpp"
#include "gemm.hpp"
#include "simd.hpp"

namespace nxrt::cpu {

bool conv_is_depthwise(const ConvShape& s) { return s.icg() == 1 && s.group > 1; }

PackedConvWeights pack_conv_weights(const ConvShape& s, const float* w) {
  PackedConvWeights p;
  if (conv_is_depthwise(s)) {
    p.depthwise = true;
    p.raw.assign(w, w + s.out_c * s.k_h * s.k_w);
    return p;
  }
  const int64_t M = s.ocg(), K = s.gemm_k();
  p.per_group = int64_t(packed_a_floats(M, K));
  p.data.resize(size_t(p.per_group * s.group));
  for (int64_t g = 0; g < s.group; ++g) pack_a(w + g * M * K, K, false, M, K, 1.f, p.data.data() + g * p.per_group);
  return p;
}

// Copies out[q] = row[base + q*stride] for q in [0, n), zero where the source
// column falls outside [0, width).
NXRT_CLONES
static void gather_row(float* __restrict out, const float* __restrict row, int64_t base, int64_t stride, int64_t n,
                       int64_t width) {
  // valid q: 0 <= base + q*stride < width
  int64_t lo = base >= 0 ? 0 : (-base + stride - 1) / stride;
  int64_t hi = base >= width ? 0 : (width - 1 - base) / stride + 1;
  lo = std::min(lo, n);
  hi = std::clamp(hi, lo, n);
  for (int64_t q = 0; q < lo; ++q) out[q] = 0.f;
  if (stride == 1) {
    if (hi > lo) std::memcpy(out + lo, row + base + lo, size_t(hi - lo) * sizeof(float));
  } else if (stride == 2) {
    const float* src = row + base;
    for (int64_t q = lo; q < hi; ++q) out[q] = src[2 * q];
  } else {
    for (int64_t q = lo; q < hi; ++q) out[q] = row[base + q * stride];
  }
  for (int64_t q = hi; q < n; ++q) out[q] = 0.f;
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
// 128 outputs (8 zmm) per step, taps streamed through them.
__attribute__((target("avx512f"))) static void dw_accumulate_avx512(float* out, int64_t n, const float* const* src,
                                                                    const float* w, int64_t taps, float bias) {
  const __m512 b = _mm512_set1_ps(bias);
  int64_t j0 = 0;
  for (; j0 + 128 <= n; j0 += 128) {
    __m512 acc[8];
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) acc[v] = b;
    for (int64_t t = 0; t < taps; ++t) {
      const float* sp = src[t] + j0;
      const __m512 wt = _mm512_set1_ps(w[t]);
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) acc[v] = _mm512_fmadd_ps(wt, _mm512_loadu_ps(sp + v * 16), acc[v]);
    }
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) _mm512_storeu_ps(out + j0 + v * 16, acc[v]);
  }
  for (; j0 < n; j0 += 16) {
    const int64_t len = std::min<int64_t>(16, n - j0);
    const __mmask16 m = __mmask16(len >= 16 ? 0xFFFF : (1u << len) - 1u);
    __m512 acc = b;
    for (int64_t t = 0; t < taps; ++t)
      acc = _mm512_fmadd_ps(_mm512_set1_ps(w[t]), _mm512_maskz_loadu_ps(m, src[t] + j0), acc);
    _mm512_mask_storeu_ps(out + j0, m, acc);
  }
}
#endif

static void dw_accumulate(float* out, int64_t n, const float* const* src, const float* w, int64_t taps, float bias) {
#if defined(__x86_64__)
  static const bool avx512 = active_isa() == Isa::avx512;
  if (avx512) {
    dw_accumulate_avx512(out, n, src, w, taps, bias);
    return;
  }
#endif
  dw_accumulate_generic(out, n, src, w, taps, bias);
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

static void depthwise_plane(const ConvShape& s, const DwGeometry& g, const float* in, const float* wk, float bias,
                            float* o) {
  float* phases = scratch_floats(kScratchA, g.phase_floats);
  float* outq = scratch_floats(kScratchC, g.out_floats);
  // phase (py, px)[r][c] = padded_input[r*sh + py][c*sw + px]
  for (int64_t py = 0; py < g.sh; ++py)
    for (int64_t px = 0; px < g.sw; ++px) {
      float* ph = phases + (py * g.sw + px) * g.hq * g.wq;
      for (int64_t r = 0; r < g.hq; ++r) {
        float* row = ph + r * g.wq;
        const int64_t iy = r * g.sh + py - s.pad_top;
        if (iy < 0 || iy >= s.in_h) {
          for (int64_t c = 0; c < g.wq; ++c) row[c] = 0.f;
        } else {
          gather_row(row, in + iy * s.in_w, px - s.pad_left, g.sw, g.wq, s.in_w);
        }
      }
    }
  const float* src[64];
  std::vector<const float*> big;
  const int64_t taps = s.k_h * s.k_w;
  const float** sp = src;
  if (taps > 64) {
    big.resize(size_t(taps));
    sp = big.data();
  }
  for (int64_t ky = 0; ky < s.k_h; ++ky)
    for (int64_t kx = 0; kx < s.k_w; ++kx) {
      const int64_t dy = ky * s.dil_h, dx = kx * s.dil_w;
      const float* ph = phases + ((dy % g.sh) * g.sw + (dx % g.sw)) * g.hq * g.wq;
      sp[ky * s.k_w + kx] = ph + (dy / g.sh) * g.wq + dx / g.sw;
    }
  dw_accumulate(outq, int64_t(g.out_floats), sp, wk, taps, bias);
  for (int64_t oy = 0; oy < s.out_h; ++oy)
    std::memcpy(o + oy * s.out_w, outq + oy * g.wq, size_t(s.out_w) * sizeof(float));
}

static void conv_depthwise(const ConvShape& s, const float* x, const float* w, const float* bias, float* out,
                           ThreadPool* pool) {
  const int64_t planes = s.batch * s.out_c, ocg = s.ocg();
  const int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w, taps = s.k_h * s.k_w;
  const int t = threads_for(pool, double(planes) * double(out_plane) * double(taps));
  const int64_t tasks = t <= 1 ? 1 : std::min<int64_t>(planes, int64_t(t) * 4);
  const DwGeometry g = dw_geometry(s);
  parallel_for(t <= 1 ? nullptr : pool, tasks, [&](int64_t i) {
    int64_t b, e;
    split_range(planes, tasks, i, b, e);
    for (int64_t pl = b; pl < e; ++pl) {
      const int64_t n = pl / s.out_c, oc = pl % s.out_c, ic = oc / ocg;
      depthwise_plane(s, g, x + (n * s.in_c + ic) * in_plane, w + oc * taps, bias ? bias[oc] : 0.f,
                      out + pl * out_plane);
    }
  });
}

// ------------------------------------------------------------------ general

void conv2d(const ConvShape& s, const float* x, const PackedConvWeights& w, const float* bias, float* out,
            ThreadPool* pool) {
  if (w.depthwise) {
    conv_depthwise(s, x, w.raw.data(), bias, out, pool);
    return;
  }
  const int64_t M = s.ocg(), K = s.gemm_k(), N = s.out_h * s.out_w;
  if (N == 0 || M == 0) return;
  const bool pointwise = s.k_h == 1 && s.k_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_top == 0 &&
                         s.pad_left == 0 && s.out_h == s.in_h && s.out_w == s.in_w;
  float* pb = scratch_floats(kScratchB, packed_b_floats(K, N));
  const int64_t panels = gemm_panels(N);
  const int pack_threads = threads_for(pool, double(K) * double(N), 1 << 15);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t g = 0; g < s.group; ++g) {
      const float* xg = x + (n * s.in_c + g * s.icg()) * s.in_h * s.in_w;
      if (pointwise) {
        pack_b_parallel(xg, N, false, K, N, pb, pool);
      } else if (pack_threads <= 1) {
        im2col_pack(s, xg, pb, 0, panels);
      } else {
        parallel_for(pool, pack_threads, [&](int64_t i) {
          int64_t p0, p1;
          split_range(panels, pack_threads, i, p0, p1);
          im2col_pack(s, xg, pb, p0, p1);
        });
      }
      GemmEpilogue ep;
      ep.row_bias = bias ? bias + g * M : nullptr;
      gemm_packed(M, N, K, w.data.data() + g * w.per_group, pb, out + (n * s.out_c + g * M) * N, N, ep, pool);
    }
  }
}

void conv2d_reference(const ConvShape& s, const float* x, const float* w, const float* bias, float* out) {
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
          out[((n * s.out_c + oc) * s.out_h + oy) * s.out_w + ox] = float(acc);
        }
    }
}

}  // namespace nxrt::cpu
