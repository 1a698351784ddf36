// 2-D convolution, NCHW in and out (1-D runs as 2-D with H = 1).
//
//   general: weights packed once as GEMM A ([OC/g] x [IC/g*KH*KW] per group),
//            the input unfolded straight into packed-B panels (im2col fused
//            with packing), bias added in the GEMM store.
//   pointwise (1x1, stride 1, no pad): the same GEMM reading the input in
//            place as an unpacked B (no im2col, no packing).
//   few output pixels (group 1, cost model in conv_pointwise_transposed):
//            the transposed product out^T = x^T W^T, channels along the
//            48-wide panels, then a transposing store.
//   direct (AVX2 / AVX-512, group 1, 64 / 32+ output channels): out^T = x^T W^T, x^T read in place
//            through pixel pointers into a zero-padded copy of the rows it reads (no im2col),
//            W^T's panels streaming through L1, then a transposing store.
//   3x3 stride 1 with enough tiles and channels: Winograd F(4x4, 3x3)
//            (conv_winograd.hpp), when the kernel prepared its weights; 5x5 stride 1 the
//            same way over its kernel's four 3x3 blocks (winograd_5x5_blocks).
//   taps that mostly read padding (dilated ASPP convs): one product per tap over the
//            outputs it reads inside the input (conv_tap_rects.hpp), the same way.
//   depthwise (IC/g == 1): 3x3, 5x5 and 7x7 (strides 1/2) direct AVX-512 / AVX2
//            kernels reading the input rows in place; other shapes a phase-plane
//            sliding window; both vectorised along output columns, bias fused.
//   7x7 / 8x8 stride-2 stems on <= 4 input channels with a max pool (conv2d_max_pool):
//            Winograd F(4x4, 4x4) over the input's stride phases, channels-last rows
//            pooled as they are made (conv_stem_winograd.hpp).
// Post-ops (residual add, clamp) are applied in the store of every path.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "scratch.hpp"
#include "gemm.hpp"
#include "hard_swish.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

struct ConvShape {
  int64_t batch = 1, in_c = 0, in_h = 1, in_w = 0;
  int64_t out_c = 0, out_h = 1, out_w = 0;
  int64_t group = 1;
  int64_t k_h = 1, k_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dil_h = 1, dil_w = 1;
  int64_t pad_top = 0, pad_left = 0;  // begin pads; end pads only shape out_h/out_w
  int64_t icg() const { return in_c / group; }
  int64_t ocg() const { return out_c / group; }
  int64_t gemm_k() const { return icg() * k_h * k_w; }
  // x's rows / columns with the begin pads, through the last tap any output reads (the end
  // pads as far as they are read): the extent of a padded copy of x.
  int64_t padded_h() const { return std::max(in_h + pad_top, (out_h - 1) * stride_h + (k_h - 1) * dil_h + 1); }
  int64_t padded_w() const { return std::max(in_w + pad_left, (out_w - 1) * stride_w + (k_w - 1) * dil_w + 1); }
};

// Weights [OC][IC/g][KH][KW] as conv2d reads them: packed per group as GEMM A operands
// (per_group floats each), or for depthwise convs as given ([OC][KH][KW]). `data` points at
// `owned` when pack_conv_weights made it, else at a kernel's prepacked buffer (which may lie
// in an imported cache blob) or, depthwise at run time, at the weights themselves.
struct PackedConvWeights {
  const float* data = nullptr;
  int64_t per_group = 0;  // floats per group
  bool depthwise = false;
  // Winograd F(4x4, 3x3) weights (winograd_pack_weights, a prepacked buffer) for a shape
  // conv_uses_winograd chose at kernel creation; `data` is then null and conv2d runs them
  // for that shape only (the caller's guard).
  const float* winograd = nullptr;
  // Winograd F(2x2, 3x3) weights (winograd_2x2_pack_weights) where conv_uses_winograd_2x2
  // chose it, the same way.
  const float* winograd_2x2 = nullptr;
  // Weights packed per tap (tap_rects_pack_weights) where conv_uses_tap_rects chose the
  // tap-rectangle products (conv_tap_rects.hpp), the same way.
  const float* tap_rects = nullptr;
  AlignedFloats owned;
  // Pointwise convs with few output pixels run transposed (out^T = x^T W^T,
  // the channels along the 48-wide panels); W^T is packed as GEMM B on first
  // use, from `data`.
  struct Transposed {
    std::once_flag once;
    AlignedFloats data;
    const float* prepacked = nullptr;  // W^T made at kernel creation (a prepacked buffer): used instead
  };
  std::shared_ptr<Transposed> transposed = std::make_shared<Transposed>();
  // W^T in 64-wide panels (pack_b64) for the direct product's 6 x 64 tiles
  // (conv_direct_panels64) and 64-channel stems with their max pool (conv_stem64_ok).
  std::shared_ptr<Transposed> transposed64 = std::make_shared<Transposed>();
  // The stem's Winograd weights (stem_winograd_pack_weights) where conv_stem_winograd_ok,
  // made on first use from `data` the same way.
  std::shared_ptr<Transposed> stem_winograd = std::make_shared<Transposed>();
};

bool conv_is_depthwise(const ConvShape& s);

// The outputs q in [lo, hi) of a strided row gather that read inside the row:
// 0 <= base + q * stride < width (the rest are padding). Per axis, tap k of a conv reads
// inside the input at outputs gather_span(k * dil - pad, stride, out, in).
struct GatherSpan {
  int64_t lo, hi;
};
inline GatherSpan gather_span(int64_t base, int64_t stride, int64_t n, int64_t width) {
  int64_t lo = base >= 0 ? 0 : (-base + stride - 1) / stride;
  int64_t hi = base >= width ? 0 : (width - 1 - base) / stride + 1;
  lo = std::min(lo, n);
  hi = std::clamp(hi, lo, n);
  return {lo, hi};
}
// Floats pack_conv_weights_into writes for `s`.
size_t packed_conv_floats(const ConvShape& s);
// Packs w into dst (packed_conv_floats(s) floats, 64-byte aligned): GEMM A tiles per group,
// or the weights as given for depthwise convs.
void pack_conv_weights_into(const ConvShape& s, const float* w, float* dst);
// A view of weights pack_conv_weights_into packed (kept alive by the caller).
PackedConvWeights conv_weights_view(const ConvShape& s, const float* packed);
// dst = the packing of W with each input channel c's weights multiplied by scale[c] (W's
// columns scaled: conv(x * scale, W) = conv(x, W') for x scaled per channel), made from
// `packed` (pack_conv_weights_into's layout, not depthwise; packed_conv_floats(s) floats).
void scale_packed_conv_input_channels(const ConvShape& s, const float* packed, const float* scale, float* dst);
// Whether conv2d runs the full shape `s` as the transposed product (it must match conv2d's
// choice), which reads W^T as GEMM B: conv_transposed_floats(s) floats that
// pack_conv_weights_transposed makes from the packed weights.
bool conv_uses_transposed(const ConvShape& s);
// Whether conv2d runs `s` as the direct product (x^T read in place from padded input rows,
// W^T's panels as B: AVX2 / AVX-512, group 1, at least 64 / 32 output channels (strided: 96)
// and 8 input channels, not 1x1); it is then one of the shapes conv_uses_transposed names.
bool conv_uses_direct(const ConvShape& s);
size_t conv_transposed_floats(const ConvShape& s);
void pack_conv_weights_transposed(const ConvShape& s, const float* packed, float* dst);
// Whether the direct product of `s` reads W^T in 64-wide panels (6 x 64 tiles: AVX-512,
// output channels in whole 64s); conv_transposed_floats and pack_conv_weights_transposed then
// make that layout, and conv_set_prepacked_transposed hands it to the right slot of `w`.
bool conv_direct_panels64(const ConvShape& s);
void conv_set_prepacked_transposed(const ConvShape& s, PackedConvWeights& w, const float* wt);
// A dilated conv whose taps other than the centre read only padding at every output
// (DeepLab's ASPP at dilation 12-24 on small maps) is the 1x1 conv of the centre tap:
// that 1x1 shape (stride kept, no padding), or nullopt. Odd kernels, group 1.
std::optional<ConvShape> conv_centre_tap_only(const ConvShape& s);
// The centre tap of w ([OC][IC][KH][KW]) as 1x1 weights [OC][IC].
std::vector<float> conv_centre_tap_weights(const ConvShape& s, const float* w);
// Packs w into owned memory (depthwise: points at w, which must outlive the result).
PackedConvWeights pack_conv_weights(const ConvShape& s, const float* w);

// What is applied to the convolution's result as it is stored (fused
// residual Add and Relu / Clip / HardSwish): out = act(conv + bias + residual), act =
// clamp to [lo, hi] and / or HardSwish.
struct ConvPostOps {
  const float* residual = nullptr;  // same shape as out, or null
  bool clamp = false;
  float lo = 0.f, hi = 0.f;
  bool hardswish = false;  // then x * clamp(x / 6 + 1/2, 0, 1), as the HardSwish node
};

// The store of a conv's transposed product (channels along the columns): bias per column,
// then `post`'s activation (its residual is not read).
inline GemmEpilogue conv_epilogue_cols(const float* col_bias, const ConvPostOps& post) {
  GemmEpilogue ep;
  ep.col_bias = col_bias;
  ep.clamp = post.clamp;
  ep.lo = post.lo;
  ep.hi = post.hi;
  ep.hardswish = post.hardswish;
  return ep;
}

// The GEMM store of a conv: bias per output channel (row), then `post`'s activation; the
// residual (rows ldr apart, null: none) is the caller's offset into post's, or another buffer.
inline GemmEpilogue conv_epilogue(const float* row_bias, const ConvPostOps& post, const float* residual = nullptr,
                                  int64_t ldr = 0) {
  GemmEpilogue ep = conv_epilogue_cols(nullptr, post);
  ep.row_bias = row_bias;
  ep.residual = residual;
  ep.ldr = ldr;
  return ep;
}

// out[M][N] = act(ct[N][M]^T + residual) for rows [m0, m1) x columns [n0, n1), act: post's
// clamp and / or HardSwish (its residual is not read): the transposed products' store. ct's
// rows are ldct apart and hold out rows from c0 on, columns from n0 on (ct[n - n0][m - c0]).
void transpose_store(const float* ct, int64_t ldct, int64_t c0, int64_t n0, int64_t n1, int64_t N, float* out,
                     const float* res, const ConvPostOps& post, int64_t m0, int64_t m1);

// out[N][OC][OH][OW] = conv(x, w) + bias (bias may be null), then post-ops.
// out must not overlap x or the residual.
// How conv2d runs `s` with `w` on this CPU and pool, in words ("winograd F(4x4,3x3) + gemm
// avx512f-8x48", "depthwise direct 3x3 avx512"): the kernel's ABI 2.5 description.
std::string conv_describe(const ConvShape& s, const PackedConvWeights& w, ThreadPool* pool);
void conv2d(const ConvShape& s, const float* x, const PackedConvWeights& w, const float* bias, float* out,
            ThreadPool* pool, const ConvPostOps& post = {});

// A 1x1 conv at stride 1, unpadded (any group): the GEMM can read X in place.
bool conv_is_pointwise(const ConvShape& s);
// Whether conv2d_channel_scaled runs `s`: a plain 1x1 conv (group 1, stride 1, no pad)
// whose scale goes into an operand smaller than x: W's packed tiles when W is no larger than
// an image of x, x^T as it is packed where the product runs transposed (few pixels).
bool conv_channel_scale_folds(const ConvShape& s);
// conv2d of x with each input channel c multiplied by scale[c] (the same C values for every
// image), for a shape conv_channel_scale_folds: the scale in a copy of W's packed tiles (this
// thread's scratch slot D) or in the packed x^T (w as make_conv_kernel packs it for s).
void conv2d_channel_scaled(const ConvShape& s, const float* x, const PackedConvWeights& w, const float* scale,
                           const float* bias, float* out, ThreadPool* pool, const ConvPostOps& post = {});

// pooled = max_pool(conv2d(x) with post's clamp / HardSwish) for `ps`, the 2-D pool over the
// conv's output (ps.batch / channels / in: s's batch, out_c, out_h x out_w). Where
// conv_max_pool_fuses, the pool runs over each block of output rows as the conv makes them
// (the conv output is never written out: ResNet's stem makes 3.2 MB that the pool reads
// back); otherwise the conv writes a buffer of its own and the pool reads it. No residual.
struct PoolShape;
bool conv_max_pool_fuses(const ConvShape& s, const PackedConvWeights& w, const PoolShape& ps, ThreadPool* pool);
// Whether conv2d_max_pool makes the conv rows of `s` as the direct product with 6 x 64 tiles
// (AVX-512; group 1, 64 output channels, <= 4 input channels, a 5x5 or larger kernel).
bool conv_stem64_ok(const ConvShape& s);
// conv_describe for a conv whose max pool fuses (conv_max_pool_fuses): how its rows are made.
std::string conv_max_pool_describe(const ConvShape& s, const PackedConvWeights& w, ThreadPool* pool);
void conv2d_max_pool(const ConvShape& s, const float* x, const PackedConvWeights& w, const float* bias,
                     const PoolShape& ps, float* pooled, ThreadPool* pool, const ConvPostOps& post = {});

// Whether a conv of M output channels over N pixels runs as the transposed
// product (exposed for tests); im2col: a conv that is not a plain 1x1.
bool conv_pointwise_transposed(int64_t M, int64_t N, bool im2col = false);

// Reference implementation (tests), post-ops included.
void conv2d_reference(const ConvShape& s, const float* x, const float* w, const float* bias, float* out,
                      const ConvPostOps& post = {});

// Unfolds the input of image n / group g into packed-B panels [p0, p1), directly: the
// tests' oracle for im2col_pack_phased (the runs use the phase planes).
void im2col_pack(const ConvShape& s, const float* x_image_group, float* dst, int64_t p0, int64_t p1);
// Size of the zero-padded stride-phase planes of one input channel.
size_t conv_phase_floats(const ConvShape& s);
// Phase planes of one input channel (conv_phase_floats(s) floats), see conv.cpp.
void conv_build_phases(const ConvShape& s, const float* x_plane, float* phases);
// Same packed-B panels as im2col_pack, copied in row runs from the phase
// planes of all icg channels (channel c at phases + c * conv_phase_floats(s)).
// Panel p goes to dst + (p - p0) * kGemmNR * K.
void im2col_pack_phased(const ConvShape& s, const float* phases, float* dst, int64_t p0, int64_t p1);

}  // namespace nxrt::cpu
