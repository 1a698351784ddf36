// Softmax over the middle axis of a [outer][axis][inner] view (inner == 1 is
// the common contiguous-row case).
#pragma once
#include <cstdint>

#include "thread_pool.hpp"

namespace nxrt::cpu {

void softmax(int64_t outer, int64_t axis, int64_t inner, const float* x, float* y, ThreadPool* pool);

}  // namespace nxrt::cpu
