// The host's definition of the ABI's kernel context: one kernel call in one run.
#pragma once
#include <nxrt_ep.h>

#include <cstdint>
#include <vector>

namespace nxrt {
class Session;
struct RunState;
struct Step;
}  // namespace nxrt

struct nxrt_kernel_context {
  nxrt::RunState* rs = nullptr;
  const nxrt::Session* session = nullptr;
  const nxrt::Step* step = nullptr;
  nxrt_stream* stream = nullptr;
  uint64_t bound = 0;  // bit per output already bound (outputs beyond 64 tracked in `more`)
  std::vector<bool> more;
};

namespace nxrt {
nxrt_status* ctx_input(const nxrt_kernel_context* ctx, size_t i, nxrt_tensor* out);
nxrt_status* ctx_output(nxrt_kernel_context* ctx, size_t i, nxrt_dtype dtype, uint32_t rank, const int64_t* dims,
                        nxrt_tensor* out);
int ctx_cancelled(const nxrt_kernel_context* ctx);
}  // namespace nxrt
