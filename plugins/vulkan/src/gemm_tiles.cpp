#include "gemm_tiles.hpp"

#include <cstdio>
#include <cstdlib>

namespace nxrt::vk {

std::vector<uint32_t> tile_spec(int64_t M, int64_t N) {
  // Developer override: NXRT_VULKAN_TILE="BM,BN,BK,TM,TN" for the large class.
  static const std::vector<uint32_t> forced = [] {
    std::vector<uint32_t> v;
    if (const char* e = std::getenv("NXRT_VULKAN_TILE")) {
      unsigned a[5];
      if (std::sscanf(e, "%u,%u,%u,%u,%u", &a[0], &a[1], &a[2], &a[3], &a[4]) == 5 && a[3] && a[4] && a[0] % a[3] == 0 &&
          a[1] % a[4] == 0)
        v = {(a[0] / a[3]) * (a[1] / a[4]), a[0], a[1], a[2], a[3], a[4]};
    }
    return v;
  }();
  if (!forced.empty() && M >= 64 && N >= 64) return forced;
  // {threads, BM, BN, BK, TM, TN}: shared memory (BM+BN)*BK*4 bytes <= 8 KiB.
  if (M <= 8) return {128, 8, 64, 16, 1, 4};
  // Measured on lavapipe (mlp bench): 64x64 tiles with 8x8 outputs per thread
  // beat 4x4 per thread by 2x.
  if (M >= 64 && N >= 64) return {64, 64, 64, 8, 8, 8};
  return {64, 32, 32, 8, 4, 4};
}

}  // namespace nxrt::vk
