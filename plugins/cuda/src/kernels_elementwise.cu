// Element-wise and data-movement kernels: unary, broadcasting binary, GEMM/conv
// epilogues, strided copies (transpose/slice/expand/concat), gather, cast.
#include "kernels_common.cuh"

namespace nxrt::cuda::k {
namespace {

template <typename T>
__global__ void unary_kernel(const T* x, T* y, int64_t n, math::Unary op, float a, float b) {
  NXRT_GRID_STRIDE(i, n) store(y, i, math::unary(op, load(x, i), a, b));
}

template <typename T>
__global__ void binary_kernel(const T* a, math::Strides sa, const T* b, math::Strides sb, T* y, int64_t n, math::Binary op,
                              math::Unary act, float alpha, float beta) {
  NXRT_GRID_STRIDE(i, n) {
    const float v = math::binary(op, load(a, math::offset_of(i, sa)), load(b, math::offset_of(i, sb)));
    store(y, i, math::unary(act, v, alpha, beta));
  }
}

// Same-shape operands: no index arithmetic.
template <typename T>
__global__ void binary_dense_kernel(const T* a, const T* b, T* y, int64_t n, math::Binary op, math::Unary act, float alpha,
                                    float beta) {
  NXRT_GRID_STRIDE(i, n) store(y, i, math::unary(act, math::binary(op, load(a, i), load(b, i)), alpha, beta));
}

template <typename T>
__global__ void epilogue_kernel(T* y, int64_t n, const T* c, math::Strides sc, float beta, math::Unary act, float alpha,
                                float act_beta) {
  NXRT_GRID_STRIDE(i, n) {
    float v = load(y, i);
    if (c) v += beta * load(c, math::offset_of(i, sc));
    store(y, i, math::unary(act, v, alpha, act_beta));
  }
}

template <typename E>
__global__ void strided_copy_kernel(const E* x, math::Strides sv, int64_t sb, E* y, math::Strides dv, int64_t db, int64_t n) {
  NXRT_GRID_STRIDE(i, n) y[db + math::offset_of(i, dv)] = x[sb + math::offset_of(i, sv)];
}

template <typename E, typename I>
__global__ void gather_kernel(const E* x, const I* idx, int64_t outer, int64_t axis_dim, int64_t inner, int64_t n_idx, E* y) {
  const int64_t n = outer * n_idx * inner;
  NXRT_GRID_STRIDE(i, n) {
    const int64_t src = math::gather_source(i, axis_dim, inner, n_idx, [&](int64_t j) { return idx[j]; });
    y[i] = src >= 0 ? x[src] : E(0);
  }
}

template <typename A, typename B>
__global__ void cast_kernel(const A* x, B* y, int64_t n) {
  NXRT_GRID_STRIDE(i, n) store(y, i, load(x, i));
}

template <typename E>
cudaError_t launch_copy(const void* x, const math::Strides& sv, int64_t sb, void* y, const math::Strides& dv, int64_t db,
                        int64_t n, cudaStream_t s) {
  strided_copy_kernel<E><<<grid_for(n), kThreads, 0, s>>>(static_cast<const E*>(x), sv, sb, static_cast<E*>(y), dv, db, n);
  return cudaGetLastError();
}

template <typename E>
cudaError_t launch_gather(const void* x, const void* idx, bool idx64, int64_t outer, int64_t axis_dim, int64_t inner,
                          int64_t n_idx, void* y, cudaStream_t s) {
  const int64_t n = outer * n_idx * inner;
  if (idx64)
    gather_kernel<E, int64_t><<<grid_for(n), kThreads, 0, s>>>(static_cast<const E*>(x), static_cast<const int64_t*>(idx), outer,
                                                               axis_dim, inner, n_idx, static_cast<E*>(y));
  else
    gather_kernel<E, int32_t><<<grid_for(n), kThreads, 0, s>>>(static_cast<const E*>(x), static_cast<const int32_t*>(idx), outer,
                                                               axis_dim, inner, n_idx, static_cast<E*>(y));
  return cudaGetLastError();
}

bool same_dense(const math::Strides& a, const math::Strides& b) {
  if (a.rank != b.rank) return false;
  int64_t acc = 1;
  for (int i = a.rank - 1; i >= 0; --i) {
    if (a.strides[i] != acc || b.strides[i] != acc) return false;
    acc *= a.dims[i];
  }
  return true;
}

}  // namespace

cudaError_t unary(Float t, const void* x, void* y, int64_t n, math::Unary op, float alpha, float beta, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  return by_float(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    unary_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n, op, alpha, beta);
    return cudaGetLastError();
  });
}

cudaError_t binary(Float t, const void* a, const math::Strides& sa, const void* b, const math::Strides& sb, void* y, int64_t n,
                   math::Binary op, math::Unary act, float alpha, float beta, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  const bool dense = same_dense(sa, sb);
  return by_float(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (dense)
      binary_dense_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y),
                                                             n, op, act, alpha, beta);
    else
      binary_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(a), sa, static_cast<const T*>(b), sb,
                                                       static_cast<T*>(y), n, op, act, alpha, beta);
    return cudaGetLastError();
  });
}

cudaError_t epilogue(Float t, void* y, int64_t n, const void* c, const math::Strides& sc, float beta, math::Unary act,
                     float alpha, float act_beta, cudaStream_t s) {
  if (n == 0 || (!c && act == math::Unary::Identity)) return cudaSuccess;
  return by_float(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    epilogue_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(y), n, static_cast<const T*>(c), sc, beta, act, alpha,
                                                       act_beta);
    return cudaGetLastError();
  });
}

cudaError_t strided_copy(int elem_bytes, const void* x, const math::Strides& sv, int64_t src_base, void* y,
                         const math::Strides& dv, int64_t dst_base, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1: return launch_copy<uint8_t>(x, sv, src_base, y, dv, dst_base, n, s);
    case 2: return launch_copy<uint16_t>(x, sv, src_base, y, dv, dst_base, n, s);
    case 4: return launch_copy<uint32_t>(x, sv, src_base, y, dv, dst_base, n, s);
    case 8: return launch_copy<uint64_t>(x, sv, src_base, y, dv, dst_base, n, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t gather(int elem_bytes, const void* x, const void* idx, bool idx64, int64_t outer, int64_t axis_dim, int64_t inner,
                   int64_t n_idx, void* y, cudaStream_t s) {
  if (outer * inner * n_idx == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1: return launch_gather<uint8_t>(x, idx, idx64, outer, axis_dim, inner, n_idx, y, s);
    case 2: return launch_gather<uint16_t>(x, idx, idx64, outer, axis_dim, inner, n_idx, y, s);
    case 4: return launch_gather<uint32_t>(x, idx, idx64, outer, axis_dim, inner, n_idx, y, s);
    case 8: return launch_gather<uint64_t>(x, idx, idx64, outer, axis_dim, inner, n_idx, y, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t cast(Float from, const void* x, Float to, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  return by_float(from, [&](auto* ftag) {
    using A = std::remove_pointer_t<decltype(ftag)>;
    return by_float(to, [&](auto* ttag) {
      using B = std::remove_pointer_t<decltype(ttag)>;
      cast_kernel<A, B><<<grid_for(n), kThreads, 0, s>>>(static_cast<const A*>(x), static_cast<B*>(y), n);
      return cudaGetLastError();
    });
  });
}

}  // namespace nxrt::cuda::k
