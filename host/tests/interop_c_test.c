/* Device-resident I/O through the C API alone (C11): the cnn32 bench model on Vulkan
 * with its input uploaded once into a device tensor and its output written into a
 * caller-provided device tensor, 10 runs. The result must equal the host-tensor
 * path, and the plugin's transfer counters must not move during the 10 runs.
 * Usage: nxrt_interop_c_test PATH/libnxrt_ep_vulkan.so PATH/cnn32.onnx
 * Exit 0: pass; 1: failure; 77 (ctest SKIP): no Vulkan device, said on stdout. */
#include <nxrt/nxrt.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define EXPECT(cond, ...)                        \
  do {                                           \
    if (!(cond)) {                               \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                       \
      printf("\n");                              \
      ++failures;                                \
    }                                            \
  } while (0)

/* Aborts the test on an API error, printing it. */
static void ok(nxrt_error* e, const char* what) {
  if (!e) return;
  printf("FAIL %s: %s\n", what, nxrt_error_message(e));
  nxrt_error_release(e);
  exit(1);
}

static nxrt_memory_stats vulkan_stats(const nxrt_session* s) {
  nxrt_memory_usage u;
  for (size_t e = 0; e < nxrt_session_ep_count(s); ++e) {
    ok(nxrt_session_memory_usage(s, e, &u), "memory usage");
    if (strcmp(u.ep, "vulkan") == 0 && u.has_plugin_stats) return u.plugin;
  }
  printf("FAIL: the vulkan EP reports no memory stats\n");
  exit(1);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    printf("usage: %s LIBNXRT_EP_VULKAN MODEL\n", argv[0]);
    return 2;
  }
  nxrt_env* env = NULL;
  ok(nxrt_env_create_empty(&env), "env");
  const char* name = NULL;
  ok(nxrt_env_register_plugin(env, argv[1], &name), "register vulkan");
  nxrt_plugin_info info;
  ok(nxrt_env_plugin_info(env, 0, &info), "plugin info");
  if (info.device_count == 0) {
    printf("skipped: no Vulkan device (%s)\n", info.no_device_reason);
    nxrt_env_release(env);
    return 77;
  }
  nxrt_model* model = NULL;
  ok(nxrt_model_load(argv[2], &model), "load model");
  nxrt_session_options opts;
  memset(&opts, 0, sizeof opts);
  opts.eps = "vulkan";
  nxrt_session* s = NULL;
  ok(nxrt_session_create_take_model(env, model, &opts, &s), "session");

  enum { IN = 3 * 32 * 32, OUT = 1000, RUNS = 10 }; /* 1.5 s a run on lavapipe */
  const int64_t in_dims[4] = {1, 3, 32, 32}, out_dims[2] = {1, 1000};
  static float image[IN], reference[OUT], got[OUT];
  for (int i = 0; i < IN; ++i) image[i] = (float)((i * 7919) % 2001 - 1000) / 1000.f;

  /* The host-tensor path: the reference. */
  nxrt_host_tensor in = {"input", 1, 4, in_dims, image};
  nxrt_outputs* outs = NULL;
  ok(nxrt_session_run(s, &in, 1, &outs), "host run");
  nxrt_host_tensor r = nxrt_outputs_get(outs, 0);
  EXPECT(r.rank == 2 && r.dims[1] == 1000, "reference shape");
  memcpy(reference, r.data, sizeof reference);
  nxrt_outputs_release(outs);

  /* Device-resident input and output. */
  nxrt_device_tensor *x = NULL, *y = NULL;
  ok(nxrt_device_tensor_alloc(s, "vulkan", 1, in_dims, 4, &x), "alloc input");
  ok(nxrt_device_tensor_alloc(s, "vulkan", 1, out_dims, 2, &y), "alloc output");
  ok(nxrt_device_tensor_upload(x, image, sizeof image), "upload");
  nxrt_binding* b = NULL;
  ok(nxrt_binding_create(s, &b), "binding");
  ok(nxrt_binding_bind_input(b, "input", x), "bind input");
  ok(nxrt_binding_bind_output(b, "output", y), "bind output");
  const nxrt_memory_stats before = vulkan_stats(s);
  for (int i = 0; i < RUNS; ++i) {
    ok(nxrt_session_run_binding(s, b, NULL, NULL, &outs), "bound run");
    nxrt_host_tensor o = nxrt_outputs_get(outs, 0);
    EXPECT(o.data == NULL && o.rank == 2, "run %d: the output is on the device (shape only)", i);
    nxrt_outputs_release(outs);
  }
  const nxrt_memory_stats after = vulkan_stats(s);
  EXPECT(after.host_to_device_copies == before.host_to_device_copies, "host-to-device copies during the runs: %llu",
         (unsigned long long)(after.host_to_device_copies - before.host_to_device_copies));
  EXPECT(after.device_to_host_copies == before.device_to_host_copies, "device-to-host copies during the runs: %llu",
         (unsigned long long)(after.device_to_host_copies - before.device_to_host_copies));
  ok(nxrt_device_tensor_download(y, got, sizeof got), "download");
  float worst = 0;
  for (int i = 0; i < OUT; ++i) worst = fmaxf(worst, fabsf(got[i] - reference[i]));
  EXPECT(worst <= 1e-5f, "device-resident result differs from the host path by %g", worst);

  /* Wrong use is an error, not a crash. */
  nxrt_error* e = nxrt_device_tensor_upload(x, image, 12);
  EXPECT(e && nxrt_error_code_of(e) == NXRT_ERR_INVALID_ARGUMENT, "short upload refused");
  nxrt_error_release(e);

  nxrt_binding_release(b);
  nxrt_device_tensor_release(x);
  nxrt_device_tensor_release(y);
  nxrt_session_release(s);
  nxrt_env_release(env);
  printf("%s: %d device-resident runs of cnn32 on vulkan, max |diff| vs host path %g, %d failure(s)\n",
         failures ? "FAIL" : "ok", RUNS, worst, failures);
  return failures ? 1 : 0;
}
