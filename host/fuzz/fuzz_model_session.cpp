// libFuzzer target: model bytes -> nxrt_model_load_bytes -> a session on the cpu plugin ->
// one run with generated inputs when the session is created. Every outcome but a crash, a
// sanitizer report, a leak or a hang is fine: a hostile model must get an error.
#include <nxrt/nxrt.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_env.hpp"

namespace {

// Inputs larger than this are not generated (a valid but huge model is not a bug).
constexpr uint64_t kMaxInputBytes = 16u << 20;
// The session's memory cap keeps run-time shapes the model computes from allocating without
// bound: going over it is an error (RESOURCE_EXHAUSTED), as for any caller that sets it.
constexpr uint64_t kSessionMemoryLimit = 256u << 20;

void release(nxrt_error* e) {
  if (e) nxrt_error_release(e);
}

// Small values of each dtype (1, 2, 3, ...; floats 0.5, 1, 1.5; bools 0 and 1), so that a
// scalar input used as a count or a size (Range, Tile, ...) stays small: a valid model asked
// for a huge output is not a bug, only slow. STRING (8) stays zeroed: empty strings.
void fill(int32_t dtype, uint64_t elements, unsigned char* out) {
  for (uint64_t e = 0; e < elements; ++e) {
    const int64_t v = int64_t(e % 3) + 1;
    switch (dtype) {
      case 1: { const float f = 0.5f * float(v); std::memcpy(out + e * 4, &f, 4); break; }
      case 11: { const double d = 0.5 * double(v); std::memcpy(out + e * 8, &d, 8); break; }
      case 10: { const uint16_t h = uint16_t(0x3800 + 0x400 * (v - 1)); std::memcpy(out + e * 2, &h, 2); break; }  // 0.5, 1, 2
      case 16: { const uint16_t h = uint16_t(0x3f00 + 0x80 * (v - 1)); std::memcpy(out + e * 2, &h, 2); break; }   // 0.5, 1, 2
      case 9: out[e] = static_cast<unsigned char>(e % 2); break;
      case 2: case 3: out[e] = static_cast<unsigned char>(v); break;
      case 4: case 5: { const int16_t x = int16_t(v); std::memcpy(out + e * 2, &x, 2); break; }
      case 6: case 12: { const int32_t x = int32_t(v); std::memcpy(out + e * 4, &x, 4); break; }
      case 7: case 13: std::memcpy(out + e * 8, &v, 8); break;
      default: break;  // STRING and others: zero bytes
    }
  }
}

// One tensor per graph input: symbolic dims are 1, data from fill(). Returns false when an input is not a tensor or too large to generate.
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
    fill(info.dtype, elements, data[i].data());
    inputs[i] = nxrt_host_tensor{info.name, info.dtype, uint32_t(info.rank), dims[i].data(), data[i].data()};
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  nxrt_env* env = fuzz_env("fuzz_model_session", {NXRT_FUZZ_CPU_PLUGIN});
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
