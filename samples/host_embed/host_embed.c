/* host_embed (C): embed nxrt through nxrt.h. Loads a model, asks for an ordered EP list with
 * fallback (nodes the first EPs refuse go to any loaded EP), prints where each node runs, then
 * runs with device-resident I/O: inputs uploaded once into the first EP's memory, outputs left
 * there by the run and downloaded afterwards. Float32 models; dynamic dims are taken as 2.
 *   host_embed_c MODEL.onnx EP_LIST [PLUGIN.so...]
 * Inputs are a fixed pattern, so two EP lists can be compared by their printed sums. */
#include <nxrt/nxrt.h>

#include <stdio.h>
#include <stdlib.h>

static int fail(nxrt_error* e) {
  fprintf(stderr, "host_embed_c: %s\n", nxrt_error_message(e));
  nxrt_error_release(e);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.onnx EP_LIST [PLUGIN.so...]\n", argv[0]);
    return 2;
  }
  nxrt_env* env = NULL;
  nxrt_model* model = NULL;
  nxrt_session* s = NULL;
  nxrt_binding* b = NULL;
  nxrt_error* e = nxrt_env_create(&env); /* finds the installed plugins by itself */
  if (e) return fail(e);
  for (int i = 3; i < argc; ++i)
    if ((e = nxrt_env_register_plugin(env, argv[i], NULL))) return fail(e);
  if ((e = nxrt_model_load(argv[1], &model))) return fail(e);
  nxrt_session_options opts = {.eps = argv[2], .fallback = 1};
  if ((e = nxrt_session_create(env, model, &opts, &s))) return fail(e);
  for (size_t i = 0; i < nxrt_session_node_count(s); ++i) {
    nxrt_node_assignment n = nxrt_session_node(s, i);
    printf("node %s (%s) -> %s%s\n", n.node_name, n.op_type, n.ep, n.fell_back ? " (fallback)" : "");
  }
  const char* ep = nxrt_session_ep_name(s, 0); /* I/O lives in the first EP's memory */
  if ((e = nxrt_binding_create(s, &b))) return fail(e);
  size_t n_in = nxrt_session_input_count(s);
  for (size_t k = 0; k < n_in; ++k) {
    nxrt_io_info info = nxrt_session_input(s, k);
    int64_t dims[8];
    if (info.dtype != 1 || info.rank < 0 || info.rank > 8) {
      fprintf(stderr, "host_embed_c: input %s is not a float32 tensor of known rank up to 8\n", info.name);
      return 1;
    }
    size_t count = 1;
    for (int64_t d = 0; d < info.rank; ++d) count *= (size_t)(dims[d] = info.dims[d] > 0 ? info.dims[d] : 2);
    float* data = malloc(count ? count * sizeof *data : 1);
    if (!data) return 1;
    for (size_t i = 0; i < count; ++i) data[i] = (float)((i * 7 + k * 3) % 11) * 0.25f - 1.0f;
    nxrt_device_tensor* t = NULL;
    if ((e = nxrt_device_tensor_alloc(s, ep, info.dtype, dims, (size_t)info.rank, &t))) return fail(e);
    e = nxrt_device_tensor_upload(t, data, count * sizeof *data);
    free(data);
    if (e || (e = nxrt_binding_bind_input(b, info.name, t))) return fail(e);
    nxrt_device_tensor_release(t); /* the binding holds its own reference */
  }
  for (size_t k = 0; k < nxrt_session_output_count(s); ++k)
    if ((e = nxrt_binding_bind_output_to_device(b, nxrt_session_output(s, k).name, ep))) return fail(e);
  if ((e = nxrt_session_run_binding(s, b, NULL, NULL, NULL))) return fail(e);
  for (size_t k = 0; k < nxrt_session_output_count(s); ++k) {
    const char* name = nxrt_session_output(s, k).name;
    nxrt_device_tensor* t = NULL;
    if ((e = nxrt_binding_output(b, name, &t))) return fail(e);
    nxrt_device_tensor_info info = nxrt_device_tensor_get_info(t);
    float* data = malloc(info.bytes ? info.bytes : 1);
    if (!data) return 1;
    if ((e = nxrt_device_tensor_download(t, data, info.bytes))) return fail(e);
    double sum = 0;
    for (size_t i = 0; i < info.bytes / sizeof(float); ++i) sum += data[i];
    printf("output %s %s on %s: sum %.6f\n", name, nxrt_shape_string(info.dims, info.rank), info.ep, sum);
    free(data);
    nxrt_device_tensor_release(t);
  }
  nxrt_binding_release(b);
  nxrt_session_release(s);
  nxrt_model_release(model);
  nxrt_env_release(env);
  return 0;
}
