// The host's definition of the ABI's opaque status object.
#pragma once
#include <nxrt_ep.h>

#include <memory>
#include <string>
#include <string_view>

struct nxrt_status {
  nxrt_status_code code = NXRT_INTERNAL;
  bool retryable = false;
  bool is_static = false;  // the preallocated out-of-memory status: never freed
  std::string message;
};

namespace nxrt {
const nxrt_host_services& host_services();
// Never NULL: when it cannot allocate it returns the static out-of-memory status.
nxrt_status* new_status(nxrt_status_code code, std::string_view message, bool retryable = false) noexcept;
// Frees a status; a no-op for NULL and for the static out-of-memory status.
void release_status(nxrt_status* status) noexcept;
const char* status_code_name(nxrt_status_code code);

struct StatusDeleter {
  void operator()(nxrt_status* s) const noexcept { release_status(s); }
};
using StatusPtr = std::unique_ptr<nxrt_status, StatusDeleter>;
}  // namespace nxrt
