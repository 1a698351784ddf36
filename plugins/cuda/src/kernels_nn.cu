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
  NXRT_GRID_STRIDE(o, n_out) {
    const int64_t base = math::offset_of(o, outer);
    float shift = 0.f;
    if (op == math::Reduce::LogSumExp) {
      shift = -INFINITY;
      for (int64_t r = 0; r < n_inner; ++r) shift = fmaxf(shift, load(x, base + math::offset_of(r, inner)));
      if (!isfinite(shift)) shift = 0.f;
    }
    float acc = math::reduce_init(op);
    for (int64_t r = 0; r < n_inner; ++r) acc = math::reduce_add(op, acc, load(x, base + math::offset_of(r, inner)), shift);
    store(y, o, math::reduce_final(op, acc, n_inner, shift));
  }
}

template <typename T>
__global__ void batchnorm_kernel(const T* x, const T* scale, const T* bias, const T* mean, const T* var, T* y, int64_t n,
                                 int64_t c, int64_t spatial, float eps, math::Unary act, float alpha, float beta) {
  const int64_t total = n * c * spatial;
  NXRT_GRID_STRIDE(i, total) {
    const int64_t ch = (i / spatial) % c;
    const float v = (load(x, i) - load(mean, ch)) * rsqrtf(load(var, ch) + eps) * load(scale, ch) + load(bias, ch);
    store(y, i, math::unary(act, v, alpha, beta));
  }
}

template <typename T>
__global__ void im2col_kernel(const T* x, T* col, math::Conv2d g, int64_t image, int64_t group) {
  const int64_t cg = g.c / g.group, cols = g.oh * g.ow, total = cg * g.kh * g.kw * cols;
  NXRT_GRID_STRIDE(i, total) {
    const int64_t p = i % cols, row = i / cols;
    const int64_t kx = row % g.kw, ky = (row / g.kw) % g.kh, ci = row / (g.kw * g.kh);
    const int64_t src = math::im2col_source(g, image, group * cg + ci, ky, kx, p / g.ow, p % g.ow);
    store(col, i, src < 0 ? 0.f : load(x, src));
  }
}

template <typename T>
__global__ void conv_direct_kernel(const T* x, const T* w, const T* bias, T* y, math::Conv2d g, math::Unary act, float alpha,
                                   float beta) {
  const int64_t total = g.n * g.k * g.oh * g.ow;
  const int64_t cg = g.c / g.group, kg = g.k / g.group;
  NXRT_GRID_STRIDE(i, total) {
    const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, ko = (i / (g.ow * g.oh)) % g.k, n = i / (g.ow * g.oh * g.k);
    const int64_t grp = ko / kg;
    float acc = bias ? load(bias, ko) : 0.f;
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t ky = 0; ky < g.kh; ++ky)
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const int64_t src = math::im2col_source(g, n, grp * cg + ci, ky, kx, oy, ox);
          if (src >= 0) acc += load(x, src) * load(w, ((ko * cg + ci) * g.kh + ky) * g.kw + kx);
        }
    store(y, i, math::unary(act, acc, alpha, beta));
  }
}

template <typename T>
__global__ void pool_kernel(const T* x, T* y, math::Conv2d g, bool max, bool count_include_pad) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  NXRT_GRID_STRIDE(i, total) {
    const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, nc = i / (g.ow * g.oh);
    float acc = max ? -INFINITY : 0.f;
    int64_t count = 0;
    for (int64_t ky = 0; ky < g.kh; ++ky)
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t yy = oy * g.sh - g.ph + ky, xx = ox * g.sw - g.pw + kx;
        const bool inside = yy >= 0 && yy < g.h && xx >= 0 && xx < g.w;
        if (inside) {
          const float v = load(x, (nc * g.h + yy) * g.w + xx);
          acc = max ? fmaxf(acc, v) : acc + v;
          ++count;
        } else if (count_include_pad && yy < g.h + g.peh && xx < g.w + g.pew) {
          ++count;  // a pad position (inside the padded input): counts as a zero
        }
      }
    store(y, i, max ? acc : (count ? acc / float(count) : 0.f));
  }
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
