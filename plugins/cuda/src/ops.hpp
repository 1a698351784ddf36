// What the CUDA plugin computes, decided without a device: per op its claim check
// (exact: every dtype, attribute and shape it does not compute is refused with a
// reason) and its output-shape function over the runtime input shapes; and the
// epilogue fusion of activations into Conv/Gemm/MatMul. Host C++ only (unit-tested);
// the launches live in launch.cpp.
#pragma once
#include "ir.hpp"

#include <nxrt_sdk/kernel_registry.hpp>

#include <optional>
#include <string>
#include <vector>

namespace nxrt::cuda {

// The element types kernels accept (bit 1 << dtype), for device_info.
uint64_t supported_dtypes();

// nullopt when the node (alone in `g`, or inside a group) is computed exactly.
std::optional<sdk::Refusal> check_node(const IrGraph& g, const IrNode& n);

// Output shapes from the input shapes (`in[i]` empty-and-unused for absent inputs).
// Throws sdk::Error (INVALID_ARGUMENT) on shapes the op cannot take.
std::vector<Shape> infer_shapes(const IrGraph& g, const IrNode& n, const std::vector<Shape>& in);

// Folds an activation (Relu, Clip with constant bounds, LeakyRelu, Sigmoid, Tanh,
// HardSwish) into the Conv/Gemm/MatMul/BatchNormalization/Add that produces its only
// input, when nothing else reads that input. Returns the number of nodes folded.
size_t fuse_epilogues(IrGraph& g);

// Numpy broadcast of two shapes; throws on incompatible shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Normalised axis in [0, rank) or a throw naming the op.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* op);

// The unary op of an activation node (nullopt: not an activation).
std::optional<Epilogue> activation_of(const IrGraph& g, const IrNode& n);

// The unary op of any element-wise unary node with its constants (Clip bounds, LeakyRelu
// alpha); nullopt for other ops or a Clip with non-constant bounds.
std::optional<Epilogue> unary_of(const IrGraph& g, const IrNode& n);
// The binary op of Add/Sub/Mul/Div/Pow/Max/Min.
std::optional<math::Binary> binary_of(const std::string& op);

// The reduced axes of a Reduce* node (sorted, normalised) given the input rank;
// empty with noop (noop_with_empty_axes=1 and no axes).
std::vector<int64_t> reduce_axes(const IrGraph& g, const IrNode& n, int64_t rank, bool* noop);

// Slice parameters per axis after clamping (starts, steps, output sizes) over `dims`.
struct SliceAxes {
  std::vector<int64_t> start, step, size;
};
SliceAxes slice_params(const IrGraph& g, const IrNode& n, const Shape& dims);

// Data movement as strided copies (kernels.hpp strided_copy): y[dst_base + offset_of(i, dst)]
// = x[src_base + offset_of(i, src)] for i < count.
struct CopyView {
  math::Strides src, dst;
  int64_t src_base = 0, dst_base = 0, count = 0;
};
// Slice of x (dims) into y (the sliced dims).
CopyView slice_view(const Shape& x, const SliceAxes& s);
// One copy per present input of a Concat along `axis` into y; absent inputs (empty dims
// with `present` false) are skipped.
std::vector<CopyView> concat_views(const std::vector<Shape>& inputs, const std::vector<bool>& present, int64_t axis,
                                   const Shape& y);

// A reduction over `axes` of x as views: output element o reads offset_of(o, outer) +
// offset_of(r, inner) for r < n_inner.
struct ReduceView {
  math::Strides outer, inner;
  int64_t n_inner = 1;
};
ReduceView reduce_view(const Shape& x, const std::vector<int64_t>& axes);

// Batched MatMul as GEMMs over row-major matrices (element offsets): one strided-batched
// call (stride 0 for a side that broadcasts whole), or one call per output matrix when both
// sides broadcast on different batch axes.
struct MatmulPlan {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool strided = true;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  std::vector<std::pair<int64_t, int64_t>> offsets;  // (a, b) per output matrix when !strided
};
MatmulPlan matmul_plan(const Shape& a, const Shape& b);

// Conv/pool geometry from a node's attributes and the runtime shapes ([n,c,h,w] in, output).
math::Conv2d conv_geometry(const IrNode& n, const Shape& x, const Shape& y, int64_t kh, int64_t kw);

}  // namespace nxrt::cuda
