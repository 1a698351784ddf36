// host_embed (C++): the same program as host_embed.c on the C++ wrapper nxrt.hpp (RAII handles,
// errors as nxrt::Error). Loads a model, asks for an ordered EP list with fallback, prints the
// placement, runs with inputs and outputs resident in the first EP's memory.
//   host_embed_cpp MODEL.onnx EP_LIST [PLUGIN.so...]
#include <nxrt/nxrt.hpp>

#include <cstdio>
#include <functional>
#include <numeric>
#include <vector>

int main(int argc, char** argv) try {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.onnx EP_LIST [PLUGIN.so...]\n", argv[0]);
    return 2;
  }
  nxrt::Env env;  // finds the installed plugins by itself
  for (int i = 3; i < argc; ++i) env.register_plugin(argv[i]);
  nxrt::Model model(argv[1]);
  nxrt::SessionOptions options;
  options.eps = argv[2];
  options.fallback = true;
  nxrt::Session session(env, model, options);
  for (const auto& n : session.nodes())
    std::printf("node %s (%s) -> %s%s\n", n.node_name, n.op_type, n.ep, n.fell_back ? " (fallback)" : "");

  const std::string ep = nxrt_session_ep_name(session.get(), 0);  // I/O lives in the first EP's memory
  nxrt::Binding binding(session);
  size_t k = 0;
  for (const auto& in : session.inputs()) {
    if (in.dtype != 1 || in.rank < 0) throw nxrt::Error(NXRT_ERR_INVALID_ARGUMENT, std::string("input ") + in.name + " is not float32 of known rank");
    std::vector<int64_t> dims(in.dims, in.dims + in.rank);
    for (auto& d : dims) d = d > 0 ? d : 2;
    std::vector<float> data(size_t(std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<>())));
    for (size_t i = 0; i < data.size(); ++i) data[i] = float((i * 7 + k * 3) % 11) * 0.25f - 1.0f;
    nxrt::DeviceTensor t(session, ep, in.dtype, dims);
    t.upload(data.data(), data.size() * sizeof(float));
    binding.bind_input(in.name, t);
    ++k;
  }
  for (const auto& out : session.outputs()) binding.bind_output_to_device(out.name, ep);
  session.run(binding);
  for (const auto& out : session.outputs()) {
    nxrt::DeviceTensor t = binding.output(out.name);
    auto values = t.download<float>();
    double sum = std::accumulate(values.begin(), values.end(), 0.0);
    auto info = t.info();
    std::printf("output %s %s on %s: sum %.6f\n", out.name, nxrt_shape_string(info.dims, info.rank), info.ep, sum);
  }
  return 0;
} catch (const nxrt::Error& e) {
  std::fprintf(stderr, "host_embed_cpp: %s\n", e.what());
  return 1;
}
