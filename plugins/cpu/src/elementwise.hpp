// Elementwise math: multidirectional (numpy) broadcasting for binary ops,
// unary float functions with vectorisable exp/erf, Relu and Clip for several
// element types.
#pragma once
#include <cstdint>
#include <span>
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

enum class UnaryOp { Relu, Erf, Sqrt, Tanh, Sigmoid, Exp, Neg, Abs };
void unary(UnaryOp op, const float* x, float* y, int64_t n, ThreadPool* pool);

template <typename T>
void relu(const T* x, T* y, int64_t n, ThreadPool* pool);
template <typename T>
void clip(const T* x, T* y, int64_t n, T lo, T hi, ThreadPool* pool);

// Vectorisable approximations (max error ~2 ulp for exp, ~1e-7 absolute for erf).
float exp_approx(float x);
float erf_approx(float x);

}  // namespace nxrt::cpu
