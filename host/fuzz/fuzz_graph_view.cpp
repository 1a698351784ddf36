// libFuzzer target: the graph view a plugin sees. Model bytes -> nxrt_model_load_bytes -> a
// session asking for the graphwalk test plugin (graphwalk_plugin.cpp), whose get_capability
// reads every node, value, attribute, constant and control-flow body of the view and claims
// nothing. The cpu plugin is loaded too, so the optimizer folds constants as it does for a
// real session before the view is built. Session creation then fails (nothing is claimed):
// any outcome but a crash, a sanitizer report or a leak is fine.
#include <nxrt/nxrt.h>

#include <cstddef>
#include <cstdint>

#include "fuzz_env.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  nxrt_env* env = fuzz_env("fuzz_graph_view", {NXRT_FUZZ_CPU_PLUGIN, NXRT_FUZZ_GRAPHWALK_PLUGIN});
  nxrt_model* model = nullptr;
  if (nxrt_error* e = nxrt_model_load_bytes(bytes, size, &model)) {
    nxrt_error_release(e);
    return 0;
  }
  nxrt_session_options options{};
  options.eps = "graphwalk";
  options.threads = 1;
  nxrt_session* session = nullptr;
  if (nxrt_error* e = nxrt_session_create(env, model, &options, &session)) nxrt_error_release(e);
  else nxrt_session_release(session);  // a model without nodes needs no claim
  nxrt_model_release(model);
  return 0;
}
