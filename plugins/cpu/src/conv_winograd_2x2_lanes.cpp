#include "conv_winograd_2x2_lanes.hpp"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu_info.hpp"
#include "hard_swish.hpp"
#include "scratch.hpp"

namespace nxrt::cpu {

namespace {

constexpr int64_t kXi = 16;     // 4x4 transformed points
constexpr int64_t kLanes = 16;  // tiles in one vector
constexpr int64_t kBlock = 16;  // output channels a block accumulates: 16 registers

[[maybe_unused]] int64_t tiles_y(const ConvShape& s) { return (s.out_h + 1) / 2; }
[[maybe_unused]] int64_t tiles_x(const ConvShape& s) { return (s.out_w + 1) / 2; }
[[maybe_unused]] int64_t blocks_of(const ConvShape& s) { return (s.out_c + kBlock - 1) / kBlock; }

}  // namespace

#if defined(__x86_64__)

bool winograd_2x2_lanes_fit(const ConvShape& s) {
  return active_isa() == Isa::avx512 && tiles_y(s) * tiles_x(s) <= kLanes;
}

size_t winograd_2x2_lanes_packed_floats(const ConvShape& s) {
  return size_t(blocks_of(s) * kXi * s.in_c * kBlock);
}

void winograd_2x2_lanes_pack(const ConvShape& s, const float* u, float* dst) {
  const int64_t IC = s.in_c, OC = s.out_c;
  for (int64_t b = 0; b < blocks_of(s); ++b)
    for (int64_t xi = 0; xi < kXi; ++xi)
      for (int64_t ic = 0; ic < IC; ++ic) {
        float* d = dst + size_t(((b * kXi + xi) * IC + ic) * kBlock);
        const float* src = u + size_t((xi * IC + ic) * OC);
        for (int64_t j = 0; j < kBlock; ++j) d[j] = b * kBlock + j < OC ? src[b * kBlock + j] : 0.f;
      }
}

namespace {

// Where each lane (tile) reads and writes: offsets into a plane and the lanes that are real.
struct LaneMap {
  alignas(64) int32_t in[16][kLanes];  // x offset of input point (r, c) of the 4x4 patch, r * 4 + c
  alignas(64) int32_t out[4][kLanes];  // output (i, j) of the 2x2 tile, i * 2 + j
  __mmask16 in_ok[16], out_ok[4];
};

LaneMap lane_map(const ConvShape& s) {
  LaneMap lm;
  const int64_t tx = tiles_x(s), count = tiles_y(s) * tx;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      __mmask16 ok = 0;
      for (int64_t t = 0; t < kLanes; ++t) {
        const int64_t y = 2 * (t / tx) + r - s.pad_top, x = 2 * (t % tx) + c - s.pad_left;
        const bool live = t < count && y >= 0 && y < s.in_h && x >= 0 && x < s.in_w;
        lm.in[r * 4 + c][t] = live ? int32_t(y * s.in_w + x) : 0;
        if (live) ok = __mmask16(ok | (1u << t));
      }
      lm.in_ok[r * 4 + c] = ok;
    }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      __mmask16 ok = 0;
      for (int64_t t = 0; t < kLanes; ++t) {
        const int64_t y = 2 * (t / tx) + i, x = 2 * (t % tx) + j;
        const bool live = t < count && y < s.out_h && x < s.out_w;
        lm.out[i * 2 + j][t] = live ? int32_t(y * s.out_w + x) : 0;
        if (live) ok = __mmask16(ok | (1u << t));
      }
      lm.out_ok[i * 2 + j] = ok;
    }
  return lm;
}

// V = B^T d B of every tile of one input channel (d gathered from the plane, zero outside
// it), as 16 vectors v[xi * IC * 16 + c * 16 + tile].
__attribute__((target("avx512f"))) void input_transform_channel(const LaneMap& lm, const float* xc, int64_t c,
                                                                int64_t IC, float* v) {
  __m512 d[16];
  for (int k = 0; k < 16; ++k) d[k] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lm.in_ok[k], _mm512_load_si512(lm.in[k]), xc, 4);
  __m512 t[16];  // B^T d: rows d0 - d2, d1 + d2, d2 - d1, d1 - d3
  for (int j = 0; j < 4; ++j) {
    t[0 + j] = _mm512_sub_ps(d[j], d[8 + j]);
    t[4 + j] = _mm512_add_ps(d[4 + j], d[8 + j]);
    t[8 + j] = _mm512_sub_ps(d[8 + j], d[4 + j]);
    t[12 + j] = _mm512_sub_ps(d[4 + j], d[12 + j]);
  }
  float* dst = v + c * kLanes;
  const size_t per = size_t(IC * kLanes);
  for (int i = 0; i < 4; ++i) {  // (B^T d) B: the same along the columns
    const __m512* r = t + i * 4;
    _mm512_store_ps(dst + (i * 4 + 0) * per, _mm512_sub_ps(r[0], r[2]));
    _mm512_store_ps(dst + (i * 4 + 1) * per, _mm512_add_ps(r[1], r[2]));
    _mm512_store_ps(dst + (i * 4 + 2) * per, _mm512_sub_ps(r[2], r[1]));
    _mm512_store_ps(dst + (i * 4 + 3) * per, _mm512_sub_ps(r[1], r[3]));
  }
}

// m[xi][j] = sum over ic of v[xi][ic] * ub[xi][ic][j] for the block's 16 channels j, every
// tile in the lanes. U is read once, in order; the fetch 4 KB ahead keeps memory busy (the
// hardware prefetcher alone gave ~62 G multiply-adds/s on 512 x 512 at 7x7, this ~97). The
// fetch is non-temporal: U's lines, each used once a run, are not kept in L2 and L3 over V
// (512 KB at 512 channels) and the rest of the run's data (ResNet-18's 7x7 layers 1.5-5%
// faster on 1 thread, its conv kernels 1.3%; 0.5% on 2 threads).
__attribute__((target("avx512f"))) void block_products(const float* v, const float* ub, int64_t IC, float* m) {
  constexpr int64_t kAhead = 1024;  // floats (2048: 6% slower in the model on 1 thread)
  for (int64_t xi = 0; xi < kXi; ++xi) {
    __m512 acc[kBlock];
#pragma GCC unroll 16
    for (int j = 0; j < kBlock; ++j) acc[j] = _mm512_setzero_ps();
    const float* vx = v + xi * IC * kLanes;
    const float* ux = ub + xi * IC * kBlock;
    for (int64_t ic = 0; ic < IC; ++ic) {
      const __m512 vv = _mm512_load_ps(vx + ic * kLanes);
      _mm_prefetch(reinterpret_cast<const char*>(ux + ic * kBlock + kAhead), _MM_HINT_NTA);
#pragma GCC unroll 16
      for (int j = 0; j < kBlock; ++j) acc[j] = _mm512_fmadd_ps(vv, _mm512_set1_ps(ux[ic * kBlock + j]), acc[j]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < kBlock; ++j) _mm512_store_ps(m + (xi * kBlock + j) * kLanes, acc[j]);
  }
}

// Y = A^T m A (A^T = [1 1 1 0; 0 1 -1 -1]) for channels [oc, oc + n) of the block, then bias,
// residual and activation, scattered to where each tile's outputs lie.
__attribute__((target("avx512f"))) void block_outputs(const ConvShape& s, const LaneMap& lm, int64_t oc, int64_t n,
                                                      const float* m, const float* bias, float* out,
                                                      const ConvPostOps& post) {
  const int64_t plane = s.out_h * s.out_w;
  const __m512 lo = _mm512_set1_ps(post.lo), hi = _mm512_set1_ps(post.hi);
  for (int64_t j = 0; j < n; ++j) {
    __m512 q[16];
    for (int xi = 0; xi < 16; ++xi) q[xi] = _mm512_load_ps(m + (xi * kBlock + j) * kLanes);
    __m512 r[2][4];  // A^T along y
    for (int c = 0; c < 4; ++c) {
      r[0][c] = _mm512_add_ps(_mm512_add_ps(q[c], q[4 + c]), q[8 + c]);
      r[1][c] = _mm512_sub_ps(_mm512_sub_ps(q[4 + c], q[8 + c]), q[12 + c]);
    }
    const __m512 bv = _mm512_set1_ps(bias ? bias[oc + j] : 0.f);
    float* op = out + (oc + j) * plane;
    for (int i = 0; i < 2; ++i) {
      const __m512 y[2] = {_mm512_add_ps(_mm512_add_ps(r[i][0], r[i][1]), r[i][2]),
                           _mm512_sub_ps(_mm512_sub_ps(r[i][1], r[i][2]), r[i][3])};
      for (int k = 0; k < 2; ++k) {
        const int o = i * 2 + k;
        const __m512i at = _mm512_load_si512(lm.out[o]);
        __m512 val = _mm512_add_ps(y[k], bv);
        if (post.residual)
          val = _mm512_add_ps(val, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lm.out_ok[o], at,
                                                             post.residual + (oc + j) * plane, 4));
        // max / min return their second operand when either is NaN: NaN propagates. (Zero-masked
        // forms with a full mask: GCC 12's plain ones warn about _mm512_undefined_ps.)
        if (post.clamp) val = _mm512_maskz_min_ps(0xFFFF, hi, _mm512_maskz_max_ps(0xFFFF, lo, val));
        if (post.hardswish) val = hard_swish_avx512(val);
        _mm512_mask_i32scatter_ps(op, lm.out_ok[o], at, val, 4);
      }
    }
  }
}

}  // namespace

void conv2d_winograd_2x2_lanes(const ConvShape& s, const float* x, const float* u, const float* bias, float* out,
                               ThreadPool* pool, const ConvPostOps& post) {
  const int64_t IC = s.in_c, OC = s.out_c, blocks = blocks_of(s);
  const LaneMap lm = lane_map(s);
  const int in_threads = threads_for(pool, double(IC) * 256.0 * 4.0);
  const int prod_threads = threads_for(pool, double(kXi * kLanes) * double(OC) * double(IC));
  float* v = scratch_floats(kScratchA, size_t(kXi * IC * kLanes));  // the caller's slot, for the whole call
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* xn = x + n * IC * s.in_h * s.in_w;
    const int64_t out_off = n * OC * s.out_h * s.out_w;
    ConvPostOps pn = post;
    if (post.residual) pn.residual = post.residual + out_off;
    parallel_ranges(in_threads <= 1 ? nullptr : pool, IC, in_threads, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) input_transform_channel(lm, xn + c * s.in_h * s.in_w, c, IC, v);
    });
    // Each thread its own blocks of output channels: its share of U, streamed once, and
    // those channels' outputs straight from its L1.
    parallel_ranges(prod_threads <= 1 ? nullptr : pool, blocks, prod_threads, [&](int64_t b0, int64_t b1) {
      alignas(64) float m[kXi * kBlock * kLanes];
      for (int64_t b = b0; b < b1; ++b) {
        block_products(v, u + size_t(b * kXi * IC * kBlock), IC, m);
        block_outputs(s, lm, b * kBlock, std::min(kBlock, OC - b * kBlock), m, bias, out + out_off, pn);
      }
    });
  }
}

#else  // no AVX-512 kernel: conv_winograd_2x2.cpp never picks the layout

bool winograd_2x2_lanes_fit(const ConvShape&) { return false; }
size_t winograd_2x2_lanes_packed_floats(const ConvShape&) { return 0; }
void winograd_2x2_lanes_pack(const ConvShape&, const float*, float*) {}
void conv2d_winograd_2x2_lanes(const ConvShape&, const float*, const float*, const float*, float*, ThreadPool*,
                               const ConvPostOps&) {}

#endif

}  // namespace nxrt::cpu
