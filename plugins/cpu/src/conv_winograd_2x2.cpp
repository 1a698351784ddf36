#include "conv_winograd_2x2.hpp"

#include <algorithm>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "conv.hpp"
#include "conv_winograd.hpp"
#include "conv_winograd_2x2_lanes.hpp"
#include "cpu_info.hpp"
#include "gemm.hpp"
#include "hard_swish.hpp"
#include "scratch.hpp"

namespace nxrt::cpu {

namespace {

constexpr int64_t kXi = 16;  // 4x4 transformed points

struct Grid {
  int64_t ty, tx, count;  // tiles of 2x2 outputs
};
Grid grid_of(const ConvShape& s) {
  Grid g;
  g.ty = (s.out_h + 1) / 2;
  g.tx = (s.out_w + 1) / 2;
  g.count = g.ty * g.tx;
  return g;
}

// Where (tile t, input channel c) of one transformed point lies in its packed-A operand:
// tiles are the rows, 8 to a group, [K][8] per group.
inline size_t a_offset(int64_t t, int64_t c, int64_t IC) { return size_t((t / kGemmMR) * kGemmMR * IC + c * kGemmMR + t % kGemmMR); }

// One input channel: V = B^T d B for every tile, d the 4x4 input patch at (2a - pad_top,
// 2b - pad_left) (zero outside), written to the 16 operands (v + xi * per). `pad` holds the
// channel's zero-padded plane of (2 ty + 2) x (2 tx + 2).
void input_transform_channel(const ConvShape& s, const Grid& g, const float* xc, int64_t c, float* v, size_t per,
                             float* pad) {
  const int64_t ph = 2 * g.ty + 2, pw = 2 * g.tx + 2;
  std::fill(pad, pad + ph * pw, 0.f);
  for (int64_t y = 0; y < s.in_h; ++y) {
    const int64_t py = y + s.pad_top;
    if (py < 0 || py >= ph) continue;
    const int64_t x0 = std::max<int64_t>(0, -s.pad_left), x1 = std::min<int64_t>(s.in_w, pw - s.pad_left);
    if (x1 > x0) std::copy(xc + y * s.in_w + x0, xc + y * s.in_w + x1, pad + py * pw + x0 + s.pad_left);
  }
  for (int64_t a = 0; a < g.ty; ++a)
    for (int64_t b = 0; b < g.tx; ++b) {
      const float* d = pad + 2 * a * pw + 2 * b;
      float t[4][4];  // B^T d: rows d0 - d2, d1 + d2, d2 - d1, d1 - d3
      for (int j = 0; j < 4; ++j) {
        const float d0 = d[j], d1 = d[pw + j], d2 = d[2 * pw + j], d3 = d[3 * pw + j];
        t[0][j] = d0 - d2;
        t[1][j] = d1 + d2;
        t[2][j] = d2 - d1;
        t[3][j] = d1 - d3;
      }
      float* dst = v + a_offset(a * g.tx + b, c, s.in_c);
      for (int i = 0; i < 4; ++i) {  // (B^T d) B: the same along the columns
        dst[(i * 4 + 0) * per] = t[i][0] - t[i][2];
        dst[(i * 4 + 1) * per] = t[i][1] + t[i][2];
        dst[(i * 4 + 2) * per] = t[i][2] - t[i][1];
        dst[(i * 4 + 3) * per] = t[i][1] - t[i][3];
      }
    }
}

inline float post_op(float val, const ConvPostOps& post) {
  if (post.clamp) {
    val = val < post.lo ? post.lo : val;  // NaN stays NaN
    val = val > post.hi ? post.hi : val;
  }
  return post.hardswish ? hard_swish(val) : val;
}

// Y = A^T m A (A^T = [1 1 1 0; 0 1 -1 -1]) of tile t, output channel oc, from the 16
// products m[xi * per + t * OC + oc], then bias, residual and activation, stored where
// the tile's outputs lie.
void output_tile_scalar(const ConvShape& s, const Grid& g, int64_t t, int64_t oc, const float* m, size_t per,
                        const float* bias, float* out, const ConvPostOps& post) {
  float q[16];
  for (int xi = 0; xi < 16; ++xi) q[xi] = m[size_t(xi) * per + size_t(t * s.out_c + oc)];
  float r[2][4];  // A^T along y
  for (int j = 0; j < 4; ++j) {
    r[0][j] = q[j] + q[4 + j] + q[8 + j];
    r[1][j] = q[4 + j] - q[8 + j] - q[12 + j];
  }
  const int64_t a = t / g.tx, b = t % g.tx, plane = s.out_h * s.out_w;
  const float bv = bias ? bias[oc] : 0.f;
  for (int i = 0; i < 2; ++i) {
    const int64_t oy = 2 * a + i;
    if (oy >= s.out_h) break;
    const float y[2] = {r[i][0] + r[i][1] + r[i][2], r[i][1] - r[i][2] - r[i][3]};
    for (int j = 0; j < 2; ++j) {
      const int64_t ox = 2 * b + j;
      if (ox >= s.out_w) break;
      const size_t o = size_t(oc * plane + oy * s.out_w + ox);
      out[o] = post_op(y[j] + bv + (post.residual ? post.residual[o] : 0.f), post);
    }
  }
}

#if defined(__x86_64__)
// The same for output channels [oc, oc + 8) of tile t: the 16 products are contiguous over
// the channels, so the transform runs on vectors and the outputs go out lane by lane.
__attribute__((target("avx2,fma"))) void output_tile8_avx2(const ConvShape& s, const Grid& g, int64_t t, int64_t oc,
                                                          const float* m, size_t per, const float* bias, float* out,
                                                          const ConvPostOps& post) {
  __m256 q[16];
  for (int xi = 0; xi < 16; ++xi) q[xi] = _mm256_loadu_ps(m + size_t(xi) * per + size_t(t * s.out_c + oc));
  __m256 r[2][4];
  for (int j = 0; j < 4; ++j) {
    r[0][j] = _mm256_add_ps(_mm256_add_ps(q[j], q[4 + j]), q[8 + j]);
    r[1][j] = _mm256_sub_ps(_mm256_sub_ps(q[4 + j], q[8 + j]), q[12 + j]);
  }
  const int64_t a = t / g.tx, b = t % g.tx, plane = s.out_h * s.out_w;
  const __m256 bv = bias ? _mm256_loadu_ps(bias + oc) : _mm256_setzero_ps();
  const __m256 lo = _mm256_set1_ps(post.lo), hi = _mm256_set1_ps(post.hi);
  const __m256i lanes = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(int(plane)));
  for (int i = 0; i < 2; ++i) {
    const int64_t oy = 2 * a + i;
    if (oy >= s.out_h) break;
    const __m256 y[2] = {_mm256_add_ps(_mm256_add_ps(r[i][0], r[i][1]), r[i][2]),
                         _mm256_sub_ps(_mm256_sub_ps(r[i][1], r[i][2]), r[i][3])};
    for (int j = 0; j < 2; ++j) {
      const int64_t ox = 2 * b + j;
      if (ox >= s.out_w) break;
      const size_t o = size_t(oc * plane + oy * s.out_w + ox);
      __m256 val = _mm256_add_ps(y[j], bv);
      if (post.residual) val = _mm256_add_ps(val, _mm256_i32gather_ps(post.residual + o, lanes, 4));
      // max / min return their second operand when either is NaN: NaN propagates.
      if (post.clamp) val = _mm256_min_ps(hi, _mm256_max_ps(lo, val));
      if (post.hardswish) val = hard_swish_avx2(val);
      alignas(32) float lane[8];
      _mm256_store_ps(lane, val);
      for (int l = 0; l < 8; ++l) out[o + size_t(l * plane)] = lane[l];
    }
  }
}
#endif

// Output channels [o0, o1) of every tile.
void output_transform(const ConvShape& s, const Grid& g, int64_t o0, int64_t o1, const float* m, size_t per,
                      const float* bias, float* out, const ConvPostOps& post) {
  int64_t oc = o0;
#if defined(__x86_64__)
  static const bool avx2 = active_isa() != Isa::generic;
  if (avx2) {
    for (; oc + 8 <= o1; oc += 8)
      for (int64_t t = 0; t < g.count; ++t) output_tile8_avx2(s, g, t, oc, m, per, bias, out, post);
  }
#endif
  for (; oc < o1; ++oc)
    for (int64_t t = 0; t < g.count; ++t) output_tile_scalar(s, g, t, oc, m, per, bias, out, post);
}

}  // namespace

bool conv_uses_winograd_2x2(const ConvShape& s) {
  if (!winograd_shape_ok(s) || s.dil_h != 1 || s.dil_w != 1 || conv_uses_winograd(s)) return false;
  // Tiles along the lanes (at most 16 tiles, AVX-512): a whole vector of 16 lanes a tile group
  // costs 256 multiplies an (input, output) channel pair, against the direct product's 9 an
  // output; it runs at the direct product's rate from memory (conv_winograd_2x2_lanes.hpp), so
  // where that is at most ~0.6 of the direct's: 7x7 (0.58) and 8x8 (0.44) maps, not 6x6 (0.79).
  if (winograd_2x2_lanes_fit(s)) return s.in_c >= 64 && s.out_c >= 64 && 256 <= 6 * s.out_h * s.out_w;
  // On Zen 3 (AVX2) F(2x2) beat the direct product (256ch 10x10 1.88 -> 1.23 ms). On Zen 5
  // (AVX-512) it lost to it until its 16 V and M operands stopped sharing one L1 set
  // (3464b40); since, with weights cold (conv2d harness, best of 3, 1 / 2 threads, us): 512ch
  // 7x7 1461 -> 1328 / 853 -> 696, 256ch 10x10 644 -> 417 / 454 -> 308, det_fpn's 256 -> 80ch
  // 10x10 241 -> 149 / 144 -> 93, 128ch 7x7 93 -> 63 / 65 -> 62. From fewer input channels
  // the direct product stays: det_fpn's 64- and 80-channel 10x10 convs ran no faster alone and
  // slower on 2 threads inside the model (56 -> 73, 71 -> 105 us).
  const int64_t min_in = active_isa() == Isa::avx512 ? 128 : 64;
  if (s.in_c < min_in || s.out_c < 64) return false;
  const Grid g = grid_of(s);
  // Against AVX-512's direct product F(2x2) needs its 16 multiplies a tile to do at most
  // half the direct's 9 an output: ResNet-18's 512-channel 7x7 convs (16 tiles, 0.58 of the
  // multiplies) ran 5-11% faster direct in the model on 1 and 2 threads; det_fpn's 10x10 ones
  // (0.44) 8-20% slower on 1 thread (5-20% faster on 2).
  if (active_isa() == Isa::avx512 && conv_uses_direct(s) && 32 * g.count > 9 * s.out_h * s.out_w) return false;
  return 2 * s.out_h * s.out_w >= g.count * 4;
}

size_t winograd_2x2_packed_floats(const ConvShape& s) {
  if (winograd_2x2_lanes_fit(s)) return winograd_2x2_lanes_packed_floats(s);
  return size_t(kXi) * packed_b_floats(s.in_c, s.out_c);
}

void winograd_2x2_pack_weights(const ConvShape& s, const float* w, float* dst) {
  const int64_t OC = s.out_c, IC = s.in_c;
  std::vector<float> u(size_t(kXi * IC * OC));  // [xi][ic][oc]: U^T per point
  static const float G[4][3] = {{1.f, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1.f}};
  for (int64_t oc = 0; oc < OC; ++oc)
    for (int64_t ic = 0; ic < IC; ++ic) {
      const float* gw = w + (oc * IC + ic) * 9;
      double t[4][3];  // G g, in double: the weights are transformed once
      for (int a = 0; a < 4; ++a)
        for (int j = 0; j < 3; ++j)
          t[a][j] = double(G[a][0]) * gw[j] + double(G[a][1]) * gw[3 + j] + double(G[a][2]) * gw[6 + j];
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b)
          u[size_t(((a * 4 + b) * IC + ic) * OC + oc)] = float(t[a][0] * G[b][0] + t[a][1] * G[b][1] + t[a][2] * G[b][2]);
    }
  if (winograd_2x2_lanes_fit(s)) {
    winograd_2x2_lanes_pack(s, u.data(), dst);
    return;
  }
  const size_t per = packed_b_floats(IC, OC);
  for (int64_t xi = 0; xi < kXi; ++xi) pack_b(u.data() + xi * IC * OC, OC, false, IC, OC, dst + xi * per);
}

void conv2d_winograd_2x2(const ConvShape& s, const float* x, const float* u, const float* bias, float* out,
                         ThreadPool* pool, const ConvPostOps& post) {
  if (winograd_2x2_lanes_fit(s)) {
    conv2d_winograd_2x2_lanes(s, x, u, bias, out, pool, post);
    return;
  }
  const int64_t IC = s.in_c, OC = s.out_c;
  const Grid g = grid_of(s);
  const size_t v_per = winograd_operand_stride(packed_a_floats(g.count, IC)),
               m_per = winograd_operand_stride(size_t(g.count * OC)), u_per = packed_b_floats(IC, OC);
  const size_t pad_floats = size_t((2 * g.ty + 2) * (2 * g.tx + 2));
  const int in_threads = threads_for(pool, double(IC) * double(g.count) * 64.0);
  const int gemm_threads = threads_for(pool, double(kXi) * double(OC) * double(g.count) * double(IC));
  const int out_threads = threads_for(pool, double(OC) * double(g.count) * 64.0);
  // The calling thread's slots hold V and M for the whole call; tasks take their own slot C.
  float* v = scratch_floats(kScratchA, size_t(kXi) * v_per);
  float* m = scratch_floats(kScratchB, size_t(kXi) * m_per);
  // Rows of the last group past the tiles are read by no block; zeroed all the same (scratch
  // may hold anything), the last group of each operand only.
  if (g.count % kGemmMR)
    for (int64_t xi = 0; xi < kXi; ++xi)
      std::fill(v + size_t(xi) * v_per + a_offset(g.count / kGemmMR * kGemmMR, 0, IC), v + size_t(xi + 1) * v_per, 0.f);
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* xn = x + n * IC * s.in_h * s.in_w;
    const size_t out_off = size_t(n * OC * s.out_h * s.out_w);
    ConvPostOps pn = post;
    if (post.residual) pn.residual = post.residual + out_off;
    parallel_ranges(in_threads <= 1 ? nullptr : pool, IC, in_threads, [&](int64_t c0, int64_t c1) {
      float* pad = scratch_floats(kScratchC, pad_floats);
      for (int64_t c = c0; c < c1; ++c) input_transform_channel(s, g, xn + c * s.in_h * s.in_w, c, v, v_per, pad);
    });
    // Each thread its own points: it reads only their share of U.
    parallel_for(gemm_threads <= 1 ? nullptr : pool, kXi, [&](int64_t xi) {
      gemm_packed_serial(g.count, OC, IC, v + size_t(xi) * v_per, u + size_t(xi) * u_per, m + size_t(xi) * m_per, OC,
                         GemmEpilogue{});
    });
    // Channel ranges in whole vectors of 8.
    const int64_t groups = (OC + 7) / 8;
    parallel_ranges(out_threads <= 1 ? nullptr : pool, groups, out_threads, [&](int64_t g0, int64_t g1) {
      output_transform(s, g, g0 * 8, std::min(OC, g1 * 8), m, m_per, bias, out + out_off, pn);
    });
  }
}

}  // namespace nxrt::cpu
