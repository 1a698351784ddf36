// Launchers of the plugin's own CUDA kernels (kernels_elementwise.cu, kernels_nn.cu).
// Host-callable; each enqueues on `s` and returns the launch error (cudaSuccess when
// queued). Float kernels take float32 or float16 storage (Float) and compute in
// float32; data-movement kernels move elements of 1, 2, 4 or 8 bytes.
#pragma once
#include "kernel_math.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nxrt::cuda::k {

enum class Float { F32, F16 };

// y[i] = op(x[i]) for n elements.
cudaError_t unary(Float t, const void* x, void* y, int64_t n, math::Unary op, float alpha, float beta, cudaStream_t s);
// y[i] = act(op(a[offset_of(i, sa)], b[offset_of(i, sb)])), sa/sb broadcast views over y.
cudaError_t binary(Float t, const void* a, const math::Strides& sa, const void* b, const math::Strides& sb, void* y,
                   int64_t n, math::Binary op, math::Unary act, float alpha, float beta, cudaStream_t s);
// In place on y ([rows, cols] row-major): y = act(y * scale + beta * c[offset_of(i, sc)]),
// c optional (NULL). Gemm/MatMul/Conv epilogues: bias per column (Gemm) or per row (Conv).
cudaError_t epilogue(Float t, void* y, int64_t n, const void* c, const math::Strides& sc, float beta, math::Unary act,
                     float alpha, float act_beta, cudaStream_t s);
// y[dst_base + offset_of(i, dv)] = x[src_base + offset_of(i, sv)] for i < n (elements):
// transpose, slice, expand, concat, views.
cudaError_t strided_copy(int elem_bytes, const void* x, const math::Strides& sv, int64_t src_base, void* y,
                         const math::Strides& dv, int64_t dst_base, int64_t n, cudaStream_t s);
// Gather along an axis: x viewed as [outer, axis_dim, inner], n_idx indices (int32 or
// int64, negative from the end, out-of-range rows read zero).
cudaError_t gather(int elem_bytes, const void* x, const void* idx, bool idx64, int64_t outer, int64_t axis_dim,
                   int64_t inner, int64_t n_idx, void* y, cudaStream_t s);
cudaError_t cast(Float from, const void* x, Float to, void* y, int64_t n, cudaStream_t s);

// One block per row of `cols` elements.
cudaError_t softmax(Float t, const void* x, void* y, int64_t rows, int64_t cols, bool log, cudaStream_t s);
cudaError_t layernorm(Float t, const void* x, const void* scale, const void* bias, void* y, int64_t rows, int64_t cols,
                      float epsilon, cudaStream_t s);
// y[o] = reduce over r < n_inner of x[offset_of(o, outer) + offset_of(r, inner)].
cudaError_t reduce(Float t, const void* x, const math::Strides& outer, const math::Strides& inner, void* y,
                   int64_t n_out, int64_t n_inner, math::Reduce op, cudaStream_t s);
// Inference batch normalization over [n, c, spatial], with an epilogue activation.
cudaError_t batchnorm(Float t, const void* x, const void* scale, const void* bias, const void* mean, const void* var,
                      void* y, int64_t n, int64_t c, int64_t spatial, float epsilon, math::Unary act, float alpha,
                      float beta, cudaStream_t s);
// im2col of image `image`, group `group`: col is [(c/group)*kh*kw, oh*ow].
cudaError_t im2col(Float t, const void* x, void* col, const math::Conv2d& g, int64_t image, int64_t group,
                   cudaStream_t s);
// Direct convolution (grouped/depthwise), bias optional, epilogue activation.
cudaError_t conv_direct(Float t, const void* x, const void* w, const void* bias, void* y, const math::Conv2d& g,
                        math::Unary act, float alpha, float beta, cudaStream_t s);
// Max or average pooling (count_include_pad for the average).
cudaError_t pool(Float t, const void* x, void* y, const math::Conv2d& g, bool max, bool count_include_pad, cudaStream_t s);

}  // namespace nxrt::cuda::k
