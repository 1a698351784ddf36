// Neural-network kernels: softmax, layer normalization, reductions, batch
// normalization, im2col, direct (grouped/depthwise) convolution, pooling. The row math
// is kernel_math.hpp's (unit-tested on the CPU); these add the thread layout.
#include "kernels_common.cuh"

namespace nxrt::cuda::k {
namespace {

constexpr int kRowThreads = 256;

// Tree reduction of one value per thread over the block with `combine`; every thread
// gets the result.
template <typename V, typename C>
__device__ V block_combine(V v, C combine) {
  __shared__ V shared[kRowThreads];
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kRowThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] = combine(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  V r = shared[0];
  __syncthreads();
  return r;
}

template <typename T>
__global__ void softmax_kernel(const T* x, T* y, int64_t cols, bool log) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  math::MaxSum m;
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) m = math::maxsum_add(m, load(xr, c));
  m = block_combine(m, [](math::MaxSum a, math::MaxSum b) { return math::maxsum_combine(a, b); });
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) store(yr, c, math::softmax_value(load(xr, c), m, log));
}

template <typename T>
__global__ void layernorm_kernel(const T* x, const T* scale, const T* bias, T* y, int64_t cols, float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  math::Welford w;
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) w = math::welford_add(w, load(xr, c));
  w = block_combine(w, [](math::Welford a, math::Welford b) { return math::welford_combine(a, b); });
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads)
    store(yr, c, math::layernorm_value(load(xr, c), w, eps, load(scale, c), bias ? load(bias, c) : 0.f));
}

template <typename T>
__global__ void reduce_kernel(const T* x, math::Strides outer, math::Strides inner, T* y, int64_t n_out, int64_t n_inner,
                              math::Reduce op) {
  NXRT_GRID_STRIDE(o, n_out) store(y, o, math::reduce_element(o, outer, inner, n_inner, op, [&](int64_t k) { return load(x, k); }));
}

template <typename T>
__global__ void batchnorm_kernel(const T* x, const T* scale, const T* bias, const T* mean, const T* var, T* y, int64_t n,
                                 int64_t c, int64_t spatial, float eps, math::Unary act, float alpha, float beta) {
  const int64_t total = n * c * spatial;
  NXRT_GRID_STRIDE(i, total) {
    const int64_t ch = (i / spatial) % c;
    const float v = math::batchnorm_value(load(x, i), load(scale, ch), load(bias, ch), load(mean, ch), load(var, ch), eps);
    store(y, i, math::unary(act, v, alpha, beta));
  }
}

template <typename T>
__global__ void im2col_kernel(const T* x, T* col, math::Conv2d g, int64_t image, int64_t group) {
  const int64_t total = (g.c / g.group) * g.kh * g.kw * g.oh * g.ow;
  NXRT_GRID_STRIDE(i, total) {
    const int64_t src = math::im2col_element(i, g, image, group);
    store(col, i, src < 0 ? 0.f : load(x, src));
  }
}

template <typename T>
__global__ void conv_direct_kernel(const T* x, const T* w, const T* bias, T* y, math::Conv2d g, math::Unary act, float alpha,
                                   float beta) {
  const int64_t total = g.n * g.k * g.oh * g.ow;
  NXRT_GRID_STRIDE(i, total) {
    const int64_t ko = (i / (g.ow * g.oh)) % g.k;
    const float v = math::conv_direct_element(i, g, [&](int64_t k) { return load(x, k); }, [&](int64_t k) { return load(w, k); },
                                              bias ? load(bias, ko) : 0.f);
    store(y, i, math::unary(act, v, alpha, beta));
  }
}

template <typename T>
__global__ void pool_kernel(const T* x, T* y, math::Conv2d g, bool max, bool count_include_pad) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  NXRT_GRID_STRIDE(i, total) store(y, i, math::pool_element(i, g, [&](int64_t k) { return load(x, k); }, max, count_include_pad));
}

}  // namespace

cudaError_t softmax(Float t, const void* x, void* y, int64_t rows, int64_t cols, bool log, cudaStream_t s) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return by_float(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    softmax_kernel<T><<<unsigned(rows), kRowThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), cols, log);
    return cudaGetLastError();
  });
}

cudaError_t layernorm(Float t, const void* x, const void* scale, const void* bias, void* y, int64_t rows, int64_t cols,
                      float epsilon, cudaStream_t s) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return by_float(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    layernorm_kernel<T><<<unsigned(rows), kRowThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(scale),
                                                               static_cast<const T*>(bias), static_cast<T*>(y), cols, epsilon);
    return cudaGetLastError();
  });
}

cudaError_t reduce(Float t, const void* x, const math::Strides& outer, const math::Strides& inner, void* y, int64_t n_out,
                   int64_t n_inner, math::Reduce op, cudaStream_t s) {
  if (n_out == 0) return cudaSuccess;
  return by_float(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    reduce_kernel<T><<<grid_for(n_out), kThreads, 0, s>>>(static_cast<const T*>(x), outer, inner, static_cast<T*>(y), n_out,
                                                          n_inner, op);
    return cudaGetLastError();
  });
}

cudaError_t batchnorm(Float t, const void* x, const void* scale, const void* bias, const void* mean, const void* var, void* y,
                      int64_t n, int64_t c, int64_t spatial, float epsilon, math::Unary act, float alpha, float beta,
                      cudaStream_t s) {
  const int64_t total = n * c * spatial;
  if (total == 0) return cudaSuccess;
  return by_float(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    batchnorm_kernel<T><<<grid_for(total), kThreads, 0, s>>>(
        static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias), static_cast<const T*>(mean),
        static_cast<const T*>(var), static_cast<T*>(y), n, c, spatial, epsilon, act, alpha, beta);
    return cudaGetLastError();
  });
}

cudaError_t im2col(Float t, const void* x, void* col, const math::Conv2d& g, int64_t image, int64_t group, cudaStream_t s) {
  const int64_t total = (g.c / g.group) * g.kh * g.kw * g.oh * g.ow;
  if (total == 0) return cudaSuccess;
  return by_float(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    im2col_kernel<T><<<grid_for(total), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(col), g, image, group);
    return cudaGetLastError();
  });
}

cudaError_t conv_direct(Float t, const void* x, const void* w, const void* bias, void* y, const math::Conv2d& g,
                        math::Unary act, float alpha, float beta, cudaStream_t s) {
  const int64_t total = g.n * g.k * g.oh * g.ow;
  if (total == 0) return cudaSuccess;
  return by_float(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    conv_direct_kernel<T><<<grid_for(total), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                                               static_cast<const T*>(bias), static_cast<T*>(y), g, act, alpha,
                                                               beta);
    return cudaGetLastError();
  });
}

cudaError_t pool(Float t, const void* x, void* y, const math::Conv2d& g, bool max, bool count_include_pad, cudaStream_t s) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  if (total == 0) return cudaSuccess;
  return by_float(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    pool_kernel<T><<<grid_for(total), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), g, max, count_include_pad);
    return cudaGetLastError();
  });
}

}  // namespace nxrt::cuda::k
