#include "conv_stem_winograd.hpp"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu_info.hpp"
#include "hard_swish.hpp"
#include "scratch.hpp"

namespace nxrt::cpu {

namespace {

constexpr int64_t kAlpha = 7;            // input tile edge
constexpr int64_t kPoints = 49;          // kAlpha^2 transformed points
constexpr int64_t kTile = 4;             // output tile edge
constexpr int64_t kLanes = 16;           // phase channels of one vector (4 x IC <= 16)
constexpr int64_t kMaxOC = 64;           // output channels: at most four vectors
constexpr int kGroup = 6;                // tiles one product block holds (6 x 4 registers)

int64_t phase_channels(const ConvShape& s) { return 4 * s.in_c; }
int64_t tiles_x(const ConvShape& s) { return (s.out_w + kTile - 1) / kTile; }
// Phase columns the tiles read, rounded up to the 8-column chunks the phase build writes.
int64_t phase_cols(const ConvShape& s) { return (tiles_x(s) * kTile + kAlpha - kTile + 7) / 8 * 8; }

// F(4, 4) over points 0, 1, -1, 2, -2, 1/2 and infinity: G (7 x 4), the weights' transform.
constexpr double kG[kAlpha][4] = {{-1.0 / 2, 0, 0, 0},
                                  {-1.0 / 3, -1.0 / 3, -1.0 / 3, -1.0 / 3},
                                  {1.0 / 9, -1.0 / 9, 1.0 / 9, -1.0 / 9},
                                  {1.0 / 36, 1.0 / 18, 1.0 / 9, 2.0 / 9},
                                  {-1.0 / 60, 1.0 / 30, -1.0 / 15, 2.0 / 15},
                                  {32.0 / 45, 16.0 / 45, 8.0 / 45, 4.0 / 45},
                                  {0, 0, 0, 1}};

}  // namespace

bool conv_stem_winograd_ok(const ConvShape& s) {
  return active_isa() == Isa::avx512 && s.group == 1 && s.out_c % 16 == 0 && s.out_c <= kMaxOC && s.in_c >= 1 &&
         s.in_c <= 4 && s.k_h >= 7 && s.k_h <= 8 && s.k_w >= 7 && s.k_w <= 8 && s.stride_h == 2 && s.stride_w == 2 &&
         s.dil_h == 1 && s.dil_w == 1 && s.out_h > 0 && s.out_w > 0;
}

size_t stem_winograd_packed_floats(const ConvShape& s) { return size_t(kPoints * phase_channels(s) * s.out_c); }

void stem_winograd_pack_weights(const ConvShape& s, const float* w, float* dst) {
  const int64_t IC = s.in_c, KH = s.k_h, KW = s.k_w, K = phase_channels(s), OC = s.out_c;
  for (int64_t oc = 0; oc < OC; ++oc)
    for (int64_t c = 0; c < IC; ++c)
      for (int64_t py = 0; py < 2; ++py)
        for (int64_t px = 0; px < 2; ++px) {
          // The phase kernel: tap (a, b) is w's (2a + py, 2b + px), zero past the kernel.
          double g[4][4];
          for (int64_t a = 0; a < 4; ++a)
            for (int64_t b = 0; b < 4; ++b) {
              const int64_t ky = 2 * a + py, kx = 2 * b + px;
              g[a][b] = ky < KH && kx < KW ? double(w[((oc * IC + c) * KH + ky) * KW + kx]) : 0.0;
            }
          const int64_t kk = c * 4 + py * 2 + px;
          double t[kAlpha][4];  // G g
          for (int64_t i = 0; i < kAlpha; ++i)
            for (int64_t b = 0; b < 4; ++b) {
              double acc = 0;
              for (int64_t a = 0; a < 4; ++a) acc += kG[i][a] * g[a][b];
              t[i][b] = acc;
            }
          for (int64_t i = 0; i < kAlpha; ++i)
            for (int64_t j = 0; j < kAlpha; ++j) {
              double acc = 0;
              for (int64_t b = 0; b < 4; ++b) acc += t[i][b] * kG[j][b];
              dst[((i * kAlpha + j) * K + kk) * OC + oc] = float(acc);
            }
        }
}

#if defined(__x86_64__)

namespace {

#define NXRT_AVX512 __attribute__((target("avx512f"), always_inline)) inline

// The input transform along one axis, B^T d.
NXRT_AVX512 __m512 lin(float a, __m512 x, __m512 acc) { return _mm512_fmadd_ps(_mm512_set1_ps(a), x, acc); }
NXRT_AVX512 void bt7(const __m512 d[7], __m512 o[7]) {
  o[0] = lin(-2.f, d[0], lin(4.f, d[1], lin(2.5f, d[2], lin(-5.f, d[3], lin(-0.5f, d[4], d[5])))));
  o[1] = lin(2.f, d[1], lin(-2.f, d[2], lin(-4.5f, d[3], lin(0.5f, d[4], d[5]))));
  o[2] = lin(-2.f, d[1], lin(6.f, d[2], lin(-3.5f, d[3], lin(-1.5f, d[4], d[5]))));
  o[3] = _mm512_add_ps(d[1], lin(-1.5f, d[2], lin(-2.f, d[3], lin(1.5f, d[4], d[5]))));
  o[4] = _mm512_sub_ps(lin(2.5f, d[2], lin(-2.5f, d[4], d[5])), d[1]);
  o[5] = lin(4.f, d[1], lin(-5.f, d[3], d[5]));
  o[6] = lin(-2.f, d[1], lin(4.f, d[2], lin(2.5f, d[3], lin(-5.f, d[4], lin(-0.5f, d[5], d[6])))));
}

// The output transform along one axis, A^T m: four outputs from seven points.
NXRT_AVX512 void at7(const __m512 m[7], __m512 y[4]) {
  const __m512 a = _mm512_add_ps(m[1], m[2]), b = _mm512_sub_ps(m[1], m[2]);
  const __m512 c = _mm512_add_ps(m[3], m[4]), d = _mm512_sub_ps(m[3], m[4]);
  y[0] = _mm512_add_ps(_mm512_add_ps(m[0], a), _mm512_add_ps(c, m[5]));
  y[1] = lin(2.f, d, lin(0.5f, m[5], b));
  y[2] = lin(4.f, c, lin(0.25f, m[5], a));
  y[3] = lin(8.f, d, lin(0.125f, m[5], _mm512_add_ps(b, m[6])));
}

// Phase rows [i0, i0 + rows) into p ([row][phase_cols][16]): lane c * 4 + py * 2 + px of
// column j holds x[c][2i + py - pad_top][2j + px - pad_left] (zero outside x). Each (c, py)
// row's float pairs (px = 0, 1) at columns j0..j0+7 are eight doubles; eight such rows
// transposed as doubles give the eight columns' vectors.
__attribute__((target("avx512f"))) void build_phase_rows(const ConvShape& s, const float* xn, int64_t i0, int64_t rows,
                                                         float* p) {
  const int64_t IC = s.in_c, H = s.in_h, W = s.in_w, cols = phase_cols(s);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src[8] = {};
    for (int64_t c = 0; c < IC; ++c)
      for (int64_t py = 0; py < 2; ++py) {
        const int64_t y = 2 * (i0 + r) + py - s.pad_top;
        if (y >= 0 && y < H) src[c * 2 + py] = xn + (c * H + y) * W;
      }
    float* prow = p + r * cols * kLanes;
    for (int64_t j0 = 0; j0 < cols; j0 += 8) {
      const int64_t f0 = 2 * j0 - s.pad_left;  // x column of lane 0
      const int64_t e0 = std::clamp<int64_t>(-f0, 0, 16), e1 = std::clamp<int64_t>(W - f0, e0, 16);
      const __mmask16 edge = __mmask16(((1u << e1) - 1u) & ~((1u << e0) - 1u));  // lanes e0 .. e1 - 1
      __m512d q[8];
      for (int k = 0; k < 8; ++k) {
        if (!src[k]) {
          q[k] = _mm512_setzero_pd();
        } else if (f0 >= 0 && f0 + 16 <= W) {
          q[k] = _mm512_castps_pd(_mm512_loadu_ps(src[k] + f0));
        } else {  // the row's ends: the lanes inside it, loaded in order from its first one
          q[k] = _mm512_castps_pd(_mm512_maskz_expandloadu_ps(edge, src[k] + std::max<int64_t>(f0, 0)));
        }
      }
      // 8 x 8 transpose of doubles: out[t] = (q[0][t], ..., q[7][t]). (Zero-masked forms with a
      // full mask: GCC 12's plain ones warn about _mm512_undefined_pd.)
      __m512d t[8], u[8];
      for (int k = 0; k < 4; ++k) {
        t[2 * k] = _mm512_maskz_unpacklo_pd(0xFF, q[2 * k], q[2 * k + 1]);
        t[2 * k + 1] = _mm512_maskz_unpackhi_pd(0xFF, q[2 * k], q[2 * k + 1]);
      }
      // u[0]: rows 0-3 at columns 0, 4; u[1]: 2, 6; u[2]: 1, 5; u[3]: 3, 7 (u[4..7]: rows 4-7).
      for (int h = 0; h < 2; ++h) {
        u[4 * h + 0] = _mm512_maskz_shuffle_f64x2(0xFF, t[4 * h + 0], t[4 * h + 2], 0x88);
        u[4 * h + 1] = _mm512_maskz_shuffle_f64x2(0xFF, t[4 * h + 0], t[4 * h + 2], 0xDD);
        u[4 * h + 2] = _mm512_maskz_shuffle_f64x2(0xFF, t[4 * h + 1], t[4 * h + 3], 0x88);
        u[4 * h + 3] = _mm512_maskz_shuffle_f64x2(0xFF, t[4 * h + 1], t[4 * h + 3], 0xDD);
      }
      // Columns k and k + 4 from rows 0-3 (u[from[k]]) and rows 4-7 (u[from[k] + 4]).
      constexpr int from[4] = {0, 2, 1, 3};
      for (int k = 0; k < 4; ++k) {
        const __m512d lo = u[from[k]], hi = u[from[k] + 4];
        _mm512_store_pd(prow + (j0 + k) * kLanes, _mm512_maskz_shuffle_f64x2(0xFF, lo, hi, 0x88));
        _mm512_store_pd(prow + (j0 + k + 4) * kLanes, _mm512_maskz_shuffle_f64x2(0xFF, lo, hi, 0xDD));
      }
    }
  }
}

// V of `nt` tiles of one tile row: tile i's input is the 7x7 phase patch at p's row 0,
// column x0 + 4 i; v[(point * kGroup + i) * 16 + lane].
__attribute__((target("avx512f"))) void input_transform(const float* p, int64_t cols, int64_t x0, int nt, float* v) {
  for (int i = 0; i < nt; ++i) {
    __m512 w[kAlpha][kAlpha];  // w[u][t]: B^T along the columns of patch row u
    for (int64_t u = 0; u < kAlpha; ++u) {
      __m512 d[kAlpha];
      const float* row = p + (u * cols + x0 + kTile * i) * kLanes;
      for (int64_t c = 0; c < kAlpha; ++c) d[c] = _mm512_load_ps(row + c * kLanes);
      bt7(d, w[u]);
    }
    for (int64_t t = 0; t < kAlpha; ++t) {
      const __m512 d[kAlpha] = {w[0][t], w[1][t], w[2][t], w[3][t], w[4][t], w[5][t], w[6][t]};
      __m512 o[kAlpha];
      bt7(d, o);
      for (int64_t sp = 0; sp < kAlpha; ++sp) _mm512_store_ps(v + ((sp * kAlpha + t) * kGroup + i) * kLanes, o[sp]);
    }
  }
}

// m[(i * 49 + point) * OC + oc] = sum over the K phase channels of U[point][k][oc] V[point][i][k],
// for tiles i < NT and OC = 16 J: NT x J accumulators, U's row of OC as J vectors, V's values
// broadcast. The bias (or null) starts point (1, 1)'s sums: A^T's column for the point 1 is
// all ones, so it reaches every output of the tile, and the output transform adds nothing.
constexpr int64_t kBiasPoint = 1 * kAlpha + 1;
template <int NT, int J>
__attribute__((target("avx512f"))) void products(const float* u, const float* v, int64_t K, const float* bias,
                                                 float* m) {
  constexpr int64_t OC = 16 * J;
  for (int64_t pt = 0; pt < kPoints; ++pt) {
    const float* up = u + pt * K * OC;
    const float* vp = v + pt * kGroup * kLanes;
    float* mp = m + pt * OC;
    __m512 acc[NT][J];
    const bool with_bias = bias && pt == kBiasPoint;
#pragma GCC unroll 8
    for (int i = 0; i < NT; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[i][j] = with_bias ? _mm512_loadu_ps(bias + 16 * j) : _mm512_setzero_ps();
    for (int64_t k = 0; k < K; ++k) {
      __m512 w[J];
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) w[j] = _mm512_load_ps(up + k * OC + 16 * j);
#pragma GCC unroll 8
      for (int i = 0; i < NT; ++i) {
        const __m512 b = _mm512_set1_ps(vp[i * kLanes + k]);
#pragma GCC unroll 4
        for (int j = 0; j < J; ++j) acc[i][j] = _mm512_fmadd_ps(b, w[j], acc[i][j]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NT; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) _mm512_store_ps(mp + i * kPoints * OC + 16 * j, acc[i][j]);
  }
}

template <int J>
void run_products_j(int nt, const float* u, const float* v, int64_t K, const float* bias, float* m) {
  switch (nt) {
    case 1: products<1, J>(u, v, K, bias, m); break;
    case 2: products<2, J>(u, v, K, bias, m); break;
    case 3: products<3, J>(u, v, K, bias, m); break;
    case 4: products<4, J>(u, v, K, bias, m); break;
    case 5: products<5, J>(u, v, K, bias, m); break;
    default: products<6, J>(u, v, K, bias, m); break;
  }
}

void run_products(int64_t OC, int nt, const float* u, const float* v, int64_t K, const float* bias, float* m) {
  switch (OC) {
    case 16: run_products_j<1>(nt, u, v, K, bias, m); break;
    case 32: run_products_j<2>(nt, u, v, K, bias, m); break;
    case 48: run_products_j<3>(nt, u, v, K, bias, m); break;
    default: run_products_j<4>(nt, u, v, K, bias, m); break;
  }
}

// Y = A^T M A for `nt` tiles at output (y0, x0 + 4 i), rows below `y_end` and columns below
// OW stored into dst ([row - r0][OW][OC]) with post's clamp / HardSwish (the bias is in m).
__attribute__((target("avx512f"))) void output_transform(const ConvShape& s, const float* m, int nt, int64_t y0,
                                                         int64_t x0, int64_t y_end, int64_t r0,
                                                         const ConvPostOps& post, float* dst) {
  const int64_t OW = s.out_w, OC = s.out_c;
  const __m512 lo = _mm512_set1_ps(post.lo), hi = _mm512_set1_ps(post.hi);
  for (int i = 0; i < nt; ++i) {
    const int64_t tx = x0 + kTile * i;
    const int64_t rows = std::min<int64_t>(kTile, y_end - y0), cols = std::min<int64_t>(kTile, OW - tx);
    for (int64_t j = 0; j < OC / 16; ++j) {
      __m512 r[kTile][kAlpha];  // A^T along the points' rows, per column t
      for (int64_t t = 0; t < kAlpha; ++t) {
        __m512 col[kAlpha];
        for (int64_t sp = 0; sp < kAlpha; ++sp)
          col[sp] = _mm512_load_ps(m + (i * kPoints + sp * kAlpha + t) * OC + 16 * j);
        __m512 y[kTile];
        at7(col, y);
        for (int a = 0; a < kTile; ++a) r[a][t] = y[a];
      }
      for (int64_t a = 0; a < rows; ++a) {
        __m512 y[kTile];
        at7(r[a], y);
        float* drow = dst + ((y0 + a - r0) * OW + tx) * OC + 16 * j;
        for (int64_t b = 0; b < cols; ++b) {
          __m512 val = y[b];
          if (post.clamp) val = _mm512_maskz_min_ps(0xFFFF, hi, _mm512_maskz_max_ps(0xFFFF, lo, val));
          if (post.hardswish) val = hard_swish_avx512(val);
          _mm512_store_ps(drow + b * OC, val);
        }
      }
    }
  }
}

#undef NXRT_AVX512

}  // namespace

void stem_winograd_rows(const ConvShape& s, const float* xn, const float* u, const float* bias, const ConvPostOps& post,
                        int64_t r0, int64_t r1, float* dst) {
  if (r1 <= r0) return;
  const int64_t K = phase_channels(s), cols = phase_cols(s), TX = tiles_x(s);
  const int64_t tile_rows = (r1 - r0 + kTile - 1) / kTile, prow_count = tile_rows * kTile + kAlpha - kTile;
  const size_t p_floats = size_t(prow_count * cols * kLanes), v_floats = size_t(kPoints * kGroup * kLanes);
  float* p = scratch_floats(kScratchA, p_floats + v_floats + size_t(kPoints * kGroup * s.out_c));
  float* v = p + p_floats;
  float* m = v + v_floats;
  build_phase_rows(s, xn, r0, prow_count, p);
  for (int64_t ty = 0; ty < tile_rows; ++ty) {
    const int64_t y0 = r0 + ty * kTile;
    const float* prow = p + ty * kTile * cols * kLanes;
    // Groups of near-equal size (28 tiles: 6, 5, 6, 5, 6): a short last group's few
    // accumulators per U load ran at half the rate.
    const int64_t groups = (TX + kGroup - 1) / kGroup;
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t g = gi * TX / groups;
      const int nt = int((gi + 1) * TX / groups - g);
      input_transform(prow, cols, g * kTile, nt, v);
      run_products(s.out_c, nt, u, v, K, bias, m);
      output_transform(s, m, nt, y0, g * kTile, r1, r0, post, dst);
    }
  }
}

#else  // no AVX-512: conv_stem_winograd_ok is false

void stem_winograd_rows(const ConvShape&, const float*, const float*, const float*, const ConvPostOps&, int64_t,
                        int64_t, float*) {}

#endif

}  // namespace nxrt::cpu
