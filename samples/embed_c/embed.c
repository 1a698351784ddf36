/* Embeds nxrt from C: load plugins, load a model, run it once on zeros, print outputs. */
#include <nxrt/nxrt.h>

#include <stdio.h>
#include <stdlib.h>

static int fail(nxrt_error* e) {
  fprintf(stderr, "embed: %s\n", nxrt_error_message(e));
  nxrt_error_release(e);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.onnx [EP_LIST]\n", argv[0]);
    return 2;
  }
  nxrt_env* env = NULL;
  nxrt_model* model = NULL;
  nxrt_session* session = NULL;
  nxrt_outputs* outputs = NULL;
  nxrt_error* e = nxrt_env_create(&env);
  if (e) return fail(e);
  if ((e = nxrt_model_load(argv[1], &model))) return fail(e);
  nxrt_session_options opts = {.eps = argc > 2 ? argv[2] : "cpu"};
  if ((e = nxrt_session_create(env, model, &opts, &session))) return fail(e);

  size_t n = nxrt_session_input_count(session);
  nxrt_host_tensor* inputs = calloc(n ? n : 1, sizeof *inputs);
  void** buffers = calloc(n ? n : 1, sizeof *buffers);
  for (size_t i = 0; i < n; ++i) {
    nxrt_io_info info = nxrt_session_input(session, i);
    size_t count = 1;
    for (int64_t d = 0; d < info.rank; ++d) count *= (size_t)(info.dims[d] > 0 ? info.dims[d] : 1);
    buffers[i] = calloc(count, 8); /* zeros, wide enough for any element type */
    inputs[i] = (nxrt_host_tensor){info.name, info.dtype, (uint32_t)info.rank, info.dims, buffers[i]};
  }
  if ((e = nxrt_session_run(session, inputs, n, &outputs))) return fail(e);
  for (size_t i = 0; i < nxrt_outputs_count(outputs); ++i) {
    nxrt_host_tensor t = nxrt_outputs_get(outputs, i);
    printf("output %s: rank %u, dtype %d\n", t.name, t.rank, t.dtype);
  }
  nxrt_outputs_release(outputs);
  for (size_t i = 0; i < n; ++i) free(buffers[i]);
  free(buffers);
  free(inputs);
  nxrt_session_release(session);
  nxrt_model_release(model);
  nxrt_env_release(env);
  return 0;
}
