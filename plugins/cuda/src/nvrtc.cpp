#include "nvrtc.hpp"

#include <nvrtc.h>  // types only: the functions come from the dlopen'ed library

#include <nxrt_sdk/status.hpp>

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace nxrt::cuda {

struct Nvrtc::Fns {
#define NXRT_NVRTC_FN(name) decltype(&::name) name = nullptr;
  NXRT_NVRTC_FN(nvrtcGetErrorString)
  NXRT_NVRTC_FN(nvrtcVersion)
  NXRT_NVRTC_FN(nvrtcGetNumSupportedArchs)
  NXRT_NVRTC_FN(nvrtcGetSupportedArchs)
  NXRT_NVRTC_FN(nvrtcCreateProgram)
  NXRT_NVRTC_FN(nvrtcDestroyProgram)
  NXRT_NVRTC_FN(nvrtcCompileProgram)
  NXRT_NVRTC_FN(nvrtcGetProgramLogSize)
  NXRT_NVRTC_FN(nvrtcGetProgramLog)
  NXRT_NVRTC_FN(nvrtcGetPTXSize)
  NXRT_NVRTC_FN(nvrtcGetPTX)
  NXRT_NVRTC_FN(nvrtcGetCUBINSize)
  NXRT_NVRTC_FN(nvrtcGetCUBIN)
#undef NXRT_NVRTC_FN
};

namespace {

// Stand-ins for the two standard headers kernel_math.hpp includes: NVRTC has the math
// functions built in but no C++ standard library.
constexpr const char* kCstdint =
    "typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;\n"
    "typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;\n"
    "typedef unsigned long long uint64_t;\n";
constexpr const char* kCmath =
    "#define INFINITY __int_as_float(0x7f800000)\n"
    "#define NAN __int_as_float(0x7fffffff)\n";

}  // namespace

const Nvrtc* Nvrtc::get(std::string* why) {
  static std::once_flag once;
  static Fns fns;
  static Nvrtc lib;
  static const Nvrtc* loaded = nullptr;
  static std::string error;
  std::call_once(once, [] {
    const char* override_path = std::getenv("NXRT_CUDA_NVRTC");
    const std::string soname = "libnvrtc.so." NXRT_CUBLAS_MAJOR;
    void* h = nullptr;
    if (override_path && *override_path) {
      h = dlopen(override_path, RTLD_NOW | RTLD_LOCAL);
    } else {
      h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) h = dlopen(fmt::format("{}/{}", NXRT_CUDA_LIB_DIR, soname).c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) {
      const char* e = dlerror();
      error = fmt::format("NVRTC is needed to compile the plugin's generated kernels: cannot load {} ({})",
                          override_path && *override_path ? override_path : soname.c_str(), e ? e : "not found");
      return;
    }
    Fns f;
    bool ok = true;
    auto bind = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && ok) error = fmt::format("the NVRTC library lacks {}", name);
      ok = ok && fn;
    };
#define NXRT_BIND(name) bind(f.name, #name);
    NXRT_BIND(nvrtcGetErrorString) NXRT_BIND(nvrtcVersion) NXRT_BIND(nvrtcGetNumSupportedArchs)
    NXRT_BIND(nvrtcGetSupportedArchs) NXRT_BIND(nvrtcCreateProgram) NXRT_BIND(nvrtcDestroyProgram)
    NXRT_BIND(nvrtcCompileProgram) NXRT_BIND(nvrtcGetProgramLogSize) NXRT_BIND(nvrtcGetProgramLog)
    NXRT_BIND(nvrtcGetPTXSize) NXRT_BIND(nvrtcGetPTX) NXRT_BIND(nvrtcGetCUBINSize) NXRT_BIND(nvrtcGetCUBIN)
#undef NXRT_BIND
    if (!ok) return;
    fns = f;
    lib.fns = &fns;
    loaded = &lib;
  });
  if (!loaded && why) *why = error;
  return loaded;
}

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  fns->nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::string nvrtc_version_text() {
  const Nvrtc* n = Nvrtc::get(nullptr);
  return n ? n->version() : "none";
}

CompiledCode Nvrtc::compile(const std::string& source, int arch) const {
  int count = 0;
  std::vector<int> archs;
  if (fns->nvrtcGetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0) {
    archs.resize(size_t(count));
    fns->nvrtcGetSupportedArchs(archs.data());
  }
  if (!archs.empty() && std::find(archs.begin(), archs.end(), arch) == archs.end())
    sdk::fail(NXRT_UNSUPPORTED, "NVRTC {} cannot compile for sm_{} (it supports sm_{} .. sm_{})", version(), arch,
              archs.front(), archs.back());
  const char* headers[] = {kKernelMathSource, kCstdint, kCmath};
  const char* names[] = {"kernel_math.hpp", "cstdint", "cmath"};
  nvrtcProgram prog = nullptr;
  auto check = [&](nvrtcResult r, const char* what) {
    if (r != NVRTC_SUCCESS) sdk::fail(NXRT_INTERNAL, "NVRTC {}: {}", what, fns->nvrtcGetErrorString(r));
  };
  check(fns->nvrtcCreateProgram(&prog, source.c_str(), "nxrt_generated.cu", 3, headers, names), "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&prog, [](nvrtcProgram* p) {
    if (*p) Nvrtc::get(nullptr)->fns->nvrtcDestroyProgram(p);
  });
  const std::string gpu = fmt::format("--gpu-architecture=sm_{}", arch);
  const char* opts[] = {gpu.c_str(), "-std=c++17", "-DNXRT_GENERATED=1"};
  const nvrtcResult r = fns->nvrtcCompileProgram(prog, 3, opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    fns->nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    if (n) fns->nvrtcGetProgramLog(prog, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    sdk::fail(NXRT_INTERNAL, "NVRTC could not compile the generated kernels for sm_{}: {}", arch, log);
  }
  CompiledCode c;
  c.arch = arch;
  size_t n = 0;
  check(fns->nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize");
  c.cubin.resize(n);
  if (n) check(fns->nvrtcGetCUBIN(prog, reinterpret_cast<char*>(c.cubin.data())), "nvrtcGetCUBIN");
  check(fns->nvrtcGetPTXSize(prog, &n), "nvrtcGetPTXSize");
  c.ptx.resize(n);
  if (n) check(fns->nvrtcGetPTX(prog, c.ptx.data()), "nvrtcGetPTX");
  while (!c.ptx.empty() && c.ptx.back() == '\0') c.ptx.pop_back();  // the size counts the NUL
  return c;
}

}  // namespace nxrt::cuda
