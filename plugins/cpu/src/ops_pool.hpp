// The MaxPool / AveragePool attributes and the window geometry of one call, shared by the
// pool ops (ops_pool.cpp) and the QDQ group that ends in a MaxPool (ops_fusion_qdq.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops.hpp"
#include "pooling.hpp"

namespace nxrt::cpu {

// The attributes MaxPool and AveragePool share, read at kernel_create.
struct PoolAttrs {
  std::vector<int64_t> k, s, d, pads;
  std::string auto_pad;
  bool ceil = false;
};

PoolAttrs read_pool_attrs(const Node& n);

// The window geometry of one call from X's run-time dims, right-aligned into the 3-D
// PoolShape (unused dims: size 1, kernel 1); `od` gets Y's dims. Fails (INVALID_ARGUMENT)
// on a rank other than the kernel's + 2.
PoolShape pool_shape(const PoolAttrs& a, const std::vector<int64_t>& xd, const char* op, std::vector<int64_t>& od);

}  // namespace nxrt::cpu
