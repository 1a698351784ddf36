// The host's definition of the ABI's opaque status object.
#pragma once
#include <nxrt_ep.h>

#include <string>

struct nxrt_status {
  nxrt_status_code code = NXRT_INTERNAL;
  bool retryable = false;
  std::string message;
};

namespace nxrt {
const nxrt_host_services& host_services();
nxrt_status* new_status(nxrt_status_code code, std::string message);
const char* status_code_name(nxrt_status_code code);
}  // namespace nxrt
