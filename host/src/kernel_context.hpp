// The host's definition of the ABI's kernel context: one kernel call in one run.
#pragma once
#include <nxrt_ep.h>

#include <cstdint>
#include <exception>
#include <string>
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
  // A host-side consistency check that failed during the call (an output shape that
  // disagrees with shape inference): the run fails with it as a plugin failure, whatever
  // the plugin returns.
  std::string host_error;
  // The host's own refusal during the call (ValueTooLarge: an output above the session's cap):
  // the kernel sees a failed status; the run rethrows this, whatever the plugin returns.
  std::exception_ptr host_refusal;
};
