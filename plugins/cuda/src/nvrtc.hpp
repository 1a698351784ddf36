// NVRTC, dlopen'ed at first use (like cuBLASLt and cuDNN): the plugin loads and runs its
// precompiled kernels where libnvrtc is absent; only compiling generated code needs it,
// and then the error names what failed to load. Compiles CUDA C++ for one architecture
// into a cubin (SASS for that sm) plus its PTX (which the driver can JIT-compile for
// newer GPUs). Needs no driver and no GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nxrt::cuda {

// What NVRTC made of one source for one architecture.
struct CompiledCode {
  int arch = 0;                // compute capability * 10: 90 = sm_90
  std::vector<uint8_t> cubin;  // ELF for sm_<arch>
  std::string ptx;             // compute_<arch> PTX of the same source
};

class Nvrtc {
 public:
  // The loaded library, or nullptr with *why set ("cannot load libnvrtc.so.13 (...)").
  // $NXRT_CUDA_NVRTC replaces the library path (tests point it at nothing).
  static const Nvrtc* get(std::string* why);
  // "13.0".
  std::string version() const;
  // Compiles `source` (which may include "kernel_math.hpp") for sm_<arch>. Throws
  // sdk::Error (NXRT_INTERNAL) with NVRTC's log when it does not compile.
  CompiledCode compile(const std::string& source, int arch) const;

  struct Fns;
  const Fns* fns = nullptr;
};

// "13.0", or "none" when NVRTC does not load.
std::string nvrtc_version_text();

// The text of kernel_math.hpp, embedded at build time (kernel_math_source.cpp.in).
extern const char* const kKernelMathSource;

}  // namespace nxrt::cuda
