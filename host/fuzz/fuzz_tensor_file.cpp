// libFuzzer target: value files (.pb) as `nxrt run --input-dir` and the node-test runner read
// them (nxrt::read_value_file, the code behind nxrt_value_file_read): the first byte picks the
// kind (TensorProto, SequenceProto, OptionalProto), the rest is the file. A bad file must be a
// HostError, never a crash, an over-read or an allocation its bytes do not back.
#include "error.hpp"
#include "host_value.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

// One private folder per process: external data named by a fuzzed tensor resolves inside it
// (the file itself, or nothing), never somewhere else.
const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nxrt-fuzz-pb-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      std::perror("fuzz_tensor_file: mkdtemp");
      std::abort();
    }
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const auto kind = static_cast<nxrt::Value::Kind>(bytes[0] % 3);
  const std::filesystem::path file = scratch() / "value.pb";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes + 1), std::streamsize(size - 1));
  }
  try {
    nxrt::Value v = nxrt::read_value_file(file, kind);
    (void)v;
  } catch (const nxrt::HostError&) {
  }
  return 0;
}
