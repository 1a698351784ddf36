// The kernel base class every SDK kernel derives from (bound to one claim).
//
// Ownership: the SDK glue owns each Kernel it hands out and destroys it on kernel_release.
// Thread class: compute() is [per-object], or [any-thread] under NXRT_FEATURE_CONCURRENT_RUN.
#pragma once
#include "context.hpp"
#include "kernel_cache.hpp"

namespace nxrt::sdk {

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void compute(Context& ctx) = 0;
  // ABI 2.4 (NXRT_FEATURE_KERNEL_CACHE): what rebuilds this kernel without compiling it
  // (Session::import_kernel reads it back). The default has nothing worth keeping.
  virtual void export_blob(BlobWriter&) { fail(NXRT_UNSUPPORTED, "this kernel has nothing to cache"); }
  // ABI 2.5 kernel_describe: one line saying how this kernel computes (algorithm, tile,
  // layout, ISA) for `nxrt inspect`; read once, right after the kernel was made. "" = nothing.
  virtual std::string describe() const { return {}; }
};

}  // namespace nxrt::sdk
