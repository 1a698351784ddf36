// N-D transpose of elements of 1, 2, 4 or 8 bytes (any dtype by size).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "thread_pool.hpp"

namespace nxrt::cpu {

// out[i_0..i_{r-1}] = in[j] with out dim k = in dim perm[k].
void transpose(const void* in, void* out, size_t elem_size, std::span<const int64_t> in_dims,
               std::span<const int64_t> perm, ThreadPool* pool);

}  // namespace nxrt::cpu
