// Quantized convolution and matmul with constant 8-bit weights, prepared once (weights
// copied or packed at kernel creation) and run many times. They are the kernels of the
// QDQ groups ops_fusion claims (DequantizeLinear -> Conv | MatMul -> [Relu | Clip] ->
// [QuantizeLinear]) and of QLinearConv / QLinearMatMul / ConvInteger / MatMulInteger
// whose weights are constants.
//
// The accumulator is exact: acc = sum (x - x_zp)(w - w_zp) in int32 (wrapping), over the
// window (conv) or K (matmul). What it becomes is QOutput's business, per output channel c
// (conv) or column n (matmul):
//   INT32:   acc + bias[c]
//   FLOAT32: clamp((acc + bias[c]) * scale[c] + float_bias[c], flo, fhi)
//   UINT8 / INT8: clamp(saturate(round_half_even((acc + bias[c]) * scale[c]) + zero_point), lo, hi)
//            (scale in double, as requantize() in integer_linalg.hpp)
//   UINT8 / INT8 with q_scale > 0: FLOAT32's value f, then QuantizeLinear's
//            saturate(round_half_even(f / q_scale) + zero_point) in float (lo, hi unused): the
//            float output and a QuantizeLinear node after it, bit for bit, in one store
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "conv.hpp"
#include "scratch.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

struct QEpilogue;
class QMatMul;

enum class QType { U8, S8, I32, F32 };

struct QOutput {
  QType type = QType::U8;
  std::vector<int32_t> bias;     // empty: none; else one per channel
  std::vector<double> scale;     // FLOAT32 / 8-bit: one per channel (x_scale * w_scale[c] [/ y_scale])
  std::vector<float> float_bias; // FLOAT32 only; empty: none
  int32_t zero_point = 0;        // 8-bit only
  int32_t lo = std::numeric_limits<int32_t>::lowest(), hi = std::numeric_limits<int32_t>::max();  // 8-bit clamp
  float flo = -std::numeric_limits<float>::infinity(), fhi = std::numeric_limits<float>::infinity();  // FLOAT32 clamp
  float q_scale = 0.f;           // 8-bit: > 0 quantizes FLOAT32's value (float_bias, flo, fhi as FLOAT32)
};

// Where QConv and QMatMul keep what they derive from the constant weights (the packed tiles, the
// per-channel zero-point correction): their own memory when no store is given. The plugin's
// kernel cache passes one (ops glue over sdk::Prepacked) that hands back buffers an earlier
// session stored; then the fills are not called and the weights are not read. param() names a
// value the buffers depend on: a store holding buffers made for another value refuses them.
class QPackedStore {
 public:
  virtual ~QPackedStore() = default;
  virtual void param(const char* name, int64_t value) = 0;
  virtual std::span<const uint32_t> words(const char* name, size_t count, const std::function<void(std::span<uint32_t>)>& fill) = 0;
  virtual std::span<const int32_t> ints(const char* name, size_t count, const std::function<void(std::span<int32_t>)>& fill) = 0;
  // Buffers handed back that the kernel cannot use (values it would index by out of range):
  // throws; the plugin's store makes it the blob's rejection, so the kernel is made again.
  [[noreturn]] virtual void corrupt(const std::string& reason) = 0;
};

// y = conv(x - x_zp, w - w_zp[oc]) through `out`; x [N][C][H][W] (1-D: H = 1) of x_type
// (U8 or S8), w [OC][IC/g][KH][KW] of w_type (U8 or S8), w_zp OC values.
// The weights are packed at construction as the 8-bit GEMM's A tiles (gemm_int8.hpp); run()
// packs im2col panels of x (1x1 stride-1 convs read x in place) and stores through `out` from
// the micro-kernel's tiles. The zero points must lie in their 8-bit type's range, and the
// QOutput vectors hold 0, 1 (scale) or OC values; else std::invalid_argument.
// The kernel positions per input channel of conv weights [OC][IC/g][KH][KW] (1-D: KW): QConv's `taps`.
inline int64_t conv_taps(const std::vector<int64_t>& w_dims) {
  int64_t taps = 1;
  for (size_t i = 2; i < w_dims.size(); ++i) taps *= w_dims[i];
  return taps;
}

class QConv {
 public:
  // taps: KH * KW (1-D: KW), or 0 when unknown. Known, with VNNI and IC/g a multiple of 4,
  // the weights go in channel-quad order (each quad of k: 4 input channels at one tap), so
  // run() reads im2col quads as whole words from a channel-interleaved copy of x.
  // shape: the conv's shape where the caller knows it (null: unknown). Where the exact
  // Winograd pays for it (q_winograd_pays, conv_int8_winograd.hpp), that path runs and the
  // weights keep it exact, the weights are also transformed for it (8x the bytes of the packed
  // ones) and run() takes it for the shapes it pays on. Else, where the channels-last product
  // pays (q_nhwc_pays, conv_int8_nhwc.hpp) and runs, the weights are packed for it alone and
  // run() takes it for every shape.
  QConv(QType x_type, int32_t x_zp, QType w_type, const void* w, int64_t w_count, std::vector<int32_t> w_zp, QOutput out,
        QPackedStore* store = nullptr, int64_t taps = 0, const ConvShape* shape = nullptr);
  ~QConv();
  // y's element type is out.type; y holds s.batch * s.out_c * s.out_h * s.out_w values.
  void run(const ConvShape& s, const void* x, void* y, ThreadPool* pool) const;
  // run() with y channels-last ([batch][out_h][out_w][out_c]), where uses_nhwc() (the path
  // makes it so before its transposes; a channels-last consumer skips them); else throws.
  void run_channels_last(const ConvShape& s, const void* x, void* y, ThreadPool* pool) const;
  const QOutput& output() const { return out_; }
  bool uses_quads() const { return quads_; }  // the u8 x s8 path: vpdpbusd, or vpmaddubsw + rest
  // The latter's rest: its work in row steps (a tile's dense quad step is kQMR of them).
  int64_t rest_rows() const { return rest_rows_; }
  // The path and micro-kernel, for `nxrt inspect`: "int16 pairs avx2-6x16", "u8 x s8 quads
  // avx512vnni-u8s8-6x64", "u8 x s8 split quads, rest 6% of the steps, avx2-u8s8-6x16+rest";
  // "..., exact Winograd F(4x4, 3x3) ..." when its weights were made (the shape it was made
  // for takes it).
  std::string describe() const;
  // Whether run() reads B straight from the channel-interleaved copy of x for shape s, with
  // no panels packed (stride-1 channel quads on maps of 20+ columns: conv_int8.cpp).
  bool reads_b_in_place(const ConvShape& s) const;
  // Whether run() takes the exact Winograd F(4x4, 3x3) in int16 pairs for shape s.
  bool uses_winograd(const ConvShape& s) const;
  // Whether run() takes the channels-last product (conv_int8_nhwc.hpp), for every shape.
  bool uses_nhwc() const { return nhwc_; }

 private:
  void check_shape(const ConvShape& s) const;  // throws where run() cannot take s
  void keep_rest(QPackedStore* store, std::vector<int32_t> index, std::vector<uint32_t> entries);
  void keep_order(QPackedStore* store, std::vector<int32_t> order);
  QType x_type_, w_type_;
  int32_t x_zp_;
  int64_t oc_ = 0, k_ = 0;  // output channels, weights per channel (IC/g * KH * KW)
  // quads_: the u8 x s8 path (gemm_int8.hpp) when VNNI runs; packed_w_ then holds
  // q_pack_a_quads of w' (w - 128 for uint8 w), ep_'s bias the per-channel correction.
  bool quads_ = false;
  bool channel_quads_ = false;  // quads_ in channel-quad order (conv_int8.cpp)
  bool nhwc_ = false;           // quads_ by q_conv_nhwc: packed_w_ holds q_nhwc_pack of w'
  int64_t taps_ = 0;
  int32_t xq_zp_ = 0;           // x_zp' = x's zero point as uint8 (+ 128 for int8 x)
  std::vector<int32_t> wq_zp_;  // w_zp' per channel; empty when all 0 (no per-pixel term)
  std::span<const uint32_t> packed_w_;  // uint32 pairs: q_pack_a of [OC][k_] (or quads); in own_ or the store
  AlignedFloats own_;
  std::span<const uint32_t> winograd_;  // q_winograd_pack of w' (empty: no Winograd); in own_winograd_ or the store
  AlignedFloats own_winograd_;
  // Without VNNI, packed_w_ holds the dense part of the split quads and these the rest
  // (QQuadRest's index and entries; in the *_own_ vectors or the store).
  std::span<const int32_t> rest_index_;
  std::span<const uint32_t> rest_entries_;
  int64_t rest_rows_ = 0;
  // and the tap order of packed_w_ and the im2col panels (q_pair_order); empty: k itself.
  std::span<const int32_t> k_order_;
  std::vector<int32_t> k_order_own_;
  std::vector<int32_t> rest_index_own_;
  std::vector<uint32_t> rest_entries_own_;
  QOutput out_;
  std::unique_ptr<QEpilogue> ep_;
};

// y[M][N] = (a - a_zp)(b - b_zp[n]) through `out`; a [M][K] of a_type (U8 or S8) with one
// zero point, b [K][N] of b_type, b_zp N values. b is packed at construction as the 8-bit
// GEMM's B panels; run() packs a per call. Argument rules as QConv's (N channels).
class QMatMul {
 public:
  QMatMul(QType a_type, int32_t a_zp, QType b_type, const void* b, int64_t K, int64_t N, std::vector<int32_t> b_zp,
          QOutput out, QPackedStore* store = nullptr);
  ~QMatMul();
  int64_t K() const { return K_; }
  int64_t N() const { return N_; }
  void run(int64_t M, const void* a, void* y, ThreadPool* pool) const;
  const QOutput& output() const { return out_; }
  bool uses_quads() const { return quads_; }
  std::string describe() const;  // as QConv's

 private:
  QType a_type_, b_type_;
  int32_t a_zp_;
  int64_t K_, N_;
  bool quads_ = false;      // as QConv's: packed_b_ then holds q_pack_b_quads of b'
  int32_t aq_zp_ = 0;
  std::vector<int32_t> bq_zp_;  // b_zp' per column; empty when all 0 (no per-row term)
  std::span<const uint32_t> packed_b_;  // uint32 pairs: q_pack_b of b (or quads); in own_ or the store
  AlignedFloats own_;
  QOutput out_;
  std::unique_ptr<QEpilogue> ep_;
};

// Applies `out` to `count` accumulators, writing y (of out.type) from element offset `at`:
// all of channel c (a conv output plane), or of channels c, c+1, ... (a matmul row).
void q_store_channel(const QOutput& out, const int32_t* acc, int64_t count, int64_t c, void* y, int64_t at);
void q_store_row(const QOutput& out, const int32_t* acc, int64_t count, int64_t c, void* y, int64_t at);

}  // namespace nxrt::cpu
