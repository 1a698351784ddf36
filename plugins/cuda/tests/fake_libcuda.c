/* A stand-in for libcuda.so.1 with no GPU behind it, for the driver probe's tests: it
 * reports the driver version in $NXRT_FAKE_CUDA_VERSION (default 13000) and no device.
 * Loaded only through $NXRT_CUDA_DRIVER; the CUDA runtime never sees it. */
#include <stdlib.h>

int cuDriverGetVersion(int* v) {
  const char* e = getenv("NXRT_FAKE_CUDA_VERSION");
  *v = e ? atoi(e) : 13000;
  return 0;
}
int cuInit(unsigned flags) {
  (void)flags;
  return 100; /* CUDA_ERROR_NO_DEVICE */
}
int cuDeviceGetCount(int* n) {
  *n = 0;
  return 0;
}
