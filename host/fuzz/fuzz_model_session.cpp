// libFuzzer target: model bytes -> nxrt_model_load_bytes -> a session on the cpu plugin ->
// one run with generated inputs when the session is created. Every outcome but a crash, a
// sanitizer report, a leak or a hang is fine: a hostile model must get an error.
#include <nxrt/nxrt.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

// Inputs larger than this are not generated (a valid but huge model is not a bug).
constexpr uint64_t kMaxInputBytes = 16u << 20;
// The session's memory cap keeps run-time shapes the model computes from allocating without
// bound: going over it is an error (RESOURCE_EXHAUSTED), as for any caller that sets it.
constexpr uint64_t kSessionMemoryLimit = 256u << 20;

nxrt_env* cpu_env() {
  static nxrt_env* env = [] {
    nxrt_env* e = nullptr;
    nxrt_error* err = nxrt_env_create_empty(&e);
    if (!err) err = nxrt_env_register_plugin(e, NXRT_FUZZ_CPU_PLUGIN, nullptr);
    if (err) {
      std::fprintf(stderr, "fuzz_model_session: cannot load the cpu plugin: %s\n", nxrt_error_message(err));
      std::abort();
    }
    return e;
  }();
  return env;
}

void release(nxrt_error* e) {
  if (e) nxrt_error_release(e);
}

// One tensor per graph input: symbolic dims are 1, data a repeating byte pattern (BOOL: 0 and 1; STRING:
// empty strings). Returns false when an input is not a tensor or too large to generate.
bool make_inputs(nxrt_session* s, std::vector<nxrt_host_tensor>& inputs, std::vector<std::vector<int64_t>>& dims,
                 std::vector<std::vector<unsigned char>>& data) {
  const size_t n = nxrt_session_input_count(s);
  inputs.resize(n);
  dims.resize(n);
  data.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (nxrt_session_input_kind(s, i) != NXRT_VALUE_TENSOR) return false;
    const nxrt_io_info info = nxrt_session_input(s, i);
    if (info.rank < 0 || info.rank > 8) return false;
    uint64_t elements = 1;
    for (int64_t d = 0; d < info.rank; ++d) {
      const int64_t v = info.dims[d] < 0 ? 1 : info.dims[d];
      dims[i].push_back(v);
      if (v > 0 && elements > kMaxInputBytes / uint64_t(v)) return false;
      elements *= uint64_t(v);
    }
    const uint64_t element_size = info.dtype == 8 ? 16 : 8;  // an upper bound for every dtype
    if (elements * element_size > kMaxInputBytes) return false;
    data[i].resize(size_t(elements * element_size) + 1);
    if (info.dtype == 9)  // BOOL: only 0 and 1 are bools (any other byte is the caller's undefined behaviour)
      for (size_t b = 0; b < data[i].size(); ++b) data[i][b] = static_cast<unsigned char>(b % 2);
    else if (info.dtype != 8)  // other non-string dtypes: small integers and floats near 1 alike
      for (size_t b = 0; b < data[i].size(); ++b) data[i][b] = (b % 4 == 3) ? 0x3f : static_cast<unsigned char>(b % 5);
    inputs[i] = nxrt_host_tensor{info.name, info.dtype, uint32_t(info.rank), dims[i].data(), data[i].data()};
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  nxrt_env* env = cpu_env();
  nxrt_model* model = nullptr;
  if (nxrt_error* e = nxrt_model_load_bytes(bytes, size, &model)) {
    release(e);
    return 0;
  }
  nxrt_session_options options{};
  options.eps = "cpu";
  options.threads = 1;
  options.device_memory_limit = kSessionMemoryLimit;
  nxrt_session* session = nullptr;
  nxrt_error* e = nxrt_session_create(env, model, &options, &session);
  nxrt_model_release(model);
  if (e) {
    release(e);
    return 0;
  }
  std::vector<nxrt_host_tensor> inputs;
  std::vector<std::vector<int64_t>> dims;
  std::vector<std::vector<unsigned char>> data;
  if (make_inputs(session, inputs, dims, data)) {
    nxrt_outputs* outputs = nullptr;
    if (nxrt_error* r = nxrt_session_run(session, inputs.data(), inputs.size(), &outputs)) release(r);
    else nxrt_outputs_release(outputs);
  }
  nxrt_session_release(session);
  return 0;
}
