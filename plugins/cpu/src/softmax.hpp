// Softmax, LogSoftmax and Hardmax over the middle axis of a
// [outer][axis][inner] view (inner == 1 is the common contiguous-row case).
#pragma once
#include <cstdint>

#include "thread_pool.hpp"

namespace nxrt::cpu {

void softmax(int64_t outer, int64_t axis, int64_t inner, const float* x, float* y, ThreadPool* pool);

// One contiguous row's softmax: the AVX-512 kernel (softmax_avx512.cpp; null where not built).
using SoftmaxRowFn = void (*)(const float* x, float* y, int64_t n);
SoftmaxRowFn softmax_row_avx512_fn();

// y = x - log(sum(exp(x))) along the axis, in double (max subtracted first).
void log_softmax(int64_t outer, int64_t axis, int64_t inner, const float* x, float* y, ThreadPool* pool);
// y = 1 at the first maximum along the axis, 0 elsewhere.
void hardmax(int64_t outer, int64_t axis, int64_t inner, const float* x, float* y, ThreadPool* pool);

}  // namespace nxrt::cpu
