// Elementwise math: multidirectional (numpy) broadcasting for binary ops,
// unary float functions with vectorisable exp/erf, Relu and Clip for several
// element types.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "thread_pool.hpp"

namespace nxrt::cpu {

enum class BinaryOp { Add, Sub, Mul, Div, Pow };

// numpy broadcasting of two shapes; false when incompatible.
bool broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b, std::vector<int64_t>& out);

// out = a (op) b with broadcasting; out_dims must be broadcast_shape(a, b).
// Integer division truncates toward zero; a zero divisor gives 0.
// Pow is implemented for float only.
template <typename T>
void binary(BinaryOp op, const T* a, std::span<const int64_t> a_dims, const T* b, std::span<const int64_t> b_dims,
            T* out, std::span<const int64_t> out_dims, ThreadPool* pool);

// Pow with a base and an exponent of possibly different types (ONNX Pow 12+,
// numpy semantics, the result has the base's type): integer ^ integer exactly
// by repeated squaring (wrapping like numpy; a negative exponent gives the
// truncated real result: 1 or -1 for a base of 1 or -1, else 0); with a float
// on either side the power is taken in double and converted once (float ->
// integer truncates toward zero and saturates, NaN gives 0).
template <typename B, typename E>
B pow_mixed(B base, E e) {
  if constexpr (std::is_integral_v<B> && std::is_integral_v<E>) {
    if constexpr (std::is_signed_v<E>) {
      if (e < 0) {
        if (base == 1) return B(1);
        if constexpr (std::is_signed_v<B>)
          if (base == -1) return (e % 2 == 0) ? B(1) : B(-1);
        return B(0);
      }
    }
    using U = std::make_unsigned_t<B>;  // unsigned arithmetic wraps without UB
    U r = 1, b = U(base);
    for (auto k = static_cast<std::make_unsigned_t<E>>(e); k; k >>= 1) {
      if (k & 1u) r = U(r * b);
      b = U(b * b);
    }
    return B(r);
  } else {
    const double p = std::pow(double(base), double(e));
    if constexpr (std::is_floating_point_v<B>) {
      return B(p);
    } else {
      if (std::isnan(p)) return B(0);
      const double t = std::trunc(p);
      if (t <= double(std::numeric_limits<B>::lowest())) return std::numeric_limits<B>::lowest();
      if (t >= double(std::numeric_limits<B>::max())) return std::numeric_limits<B>::max();
      return B(t);
    }
  }
}

enum class UnaryOp { Relu, Erf, Sqrt, Tanh, Sigmoid, Exp, Neg, Abs, HardSwish };
void unary(UnaryOp op, const float* x, float* y, int64_t n, ThreadPool* pool);
// y = ((erf(x / c) + a) * x) * h: the exact-Gelu chain Div -> Erf -> Add -> Mul -> Mul in
// one pass, with the same float operations in the same order (bit-identical to the chain),
// except for a == 1, where 1 + erf(u) is computed as erfc(-u) (accurate in the far negative
// tail, where the chain cancels to 0).
void gelu_erf_chain(const float* x, float* y, int64_t n, float c, float a, float h, ThreadPool* pool);
// Its a == 1 form (the Gelu exporters write) on AVX-512 (gelu_avx512.cpp; null where not built).
using GeluChainFn = void (*)(const float* x, float* y, int64_t n, float c, float h);
GeluChainFn gelu_erfc_chain_avx512_fn();
// y = clamp(alpha * x + beta, 0, 1).
void hard_sigmoid(const float* x, float* y, int64_t n, float alpha, float beta, ThreadPool* pool);

template <typename T>
void relu(const T* x, T* y, int64_t n, ThreadPool* pool);
template <typename T>
void clip(const T* x, T* y, int64_t n, T lo, T hi, ThreadPool* pool);

// Vectorisable approximations (max error ~2 ulp for exp, ~1e-7 absolute for erf).
float exp_approx(float x);
float erf_approx(float x);

}  // namespace nxrt::cpu
