// The pixel-pointer GEMM (gemm_pixels_serial: A read in place through pixel pointers, B
// packed) on the channels-last inverted-residual blocks' shapes, its 8 x 48 tiles beside the
// 6 x 64 ones (gemm_pixels64_serial, whole 64-column panels: N in 64s) and beside 48-wide
// panels with a 64-wide last one (gemm_pixels_tail64_serial: N = 48 q + 16), each as GFLOP/s
// and as a share of 232 GFLOP/s (the Zen 5
// FMA peak nxrt_cpu_gemm_peak measures; that tool gives this core's own). Best of 7 runs of
// 200 calls after one to warm up, one thread, the operands hot: the tile shapes alone, not a
// model's cache state.
// The channels-last blocks take the last form wherever gemm_pixels_tail64 says (their
// expands and projects).
// Usage: nxrt_cpu_gemm_pixels (AVX-512 only: prints nothing else where the CPU lacks it).
#include <fmt/core.h>

#include <vector>

#include "best_seconds.hpp"
#include "cpu_info.hpp"
#include "gemm.hpp"

using namespace nxrt::cpu;

namespace {

// A call's seconds: the fastest of 7 runs of 200 calls (best_seconds), per call.
template <typename F>
double call_seconds(F&& f) {
  return best_seconds(7, [&] {
           for (int i = 0; i < 200; ++i) f();
         }) /
         200;
}

// M pixels x N output channels over K input channels. expand: A is x's NCHW planes (pixel m at
// x + m, channel k at + k M); project: A is the depthwise rows (pixel m at d + m K, channel k at + k).
void run(const char* name, int64_t M, int64_t N, int64_t K, bool expand) {
  std::vector<float> a(size_t(M * K), 0.5f), b48(packed_b_floats(K, N), 0.25f), b64(packed_b64_floats(K, N), 0.25f);
  std::vector<float> c(size_t(M * N));
  std::vector<const float*> rows(static_cast<size_t>(M));
  std::vector<int32_t> off(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) rows[size_t(m)] = expand ? a.data() + m : a.data() + m * K;
  for (int64_t k = 0; k < K; ++k) off[size_t(k)] = int32_t(expand ? k * M : k);
  const GemmEpilogue ep{};
  const double t48 =
      call_seconds([&] { gemm_pixels_serial(M, N, K, rows.data(), off.data(), b48.data(), c.data(), N, ep); });
  const double gflop = 2.0 * double(M * N * K) * 1e-9;
  fmt::print("{:<26} {:5} {:5} {:5}  {:7.1f} us {:4.0f}%", name, M, N, K, t48 * 1e6, gflop / t48 / 232 * 100);
  if (N % 64 == 0) {  // 6 x 64 stores whole 64-column panels
    const double t64 =
        call_seconds([&] { gemm_pixels64_serial(M, N, K, rows.data(), off.data(), b64.data(), c.data(), N, ep); });
    fmt::print("  {:7.1f} us {:4.0f}%", t64 * 1e6, gflop / t64 / 232 * 100);
  } else {
    fmt::print("  {:>16}", "-");
  }
  if (gemm_pixels_tail64(N)) {
    std::vector<float> bt(packed_b_tail64_floats(K, N), 0.25f);
    const double tt = call_seconds(
        [&] { gemm_pixels_tail64_serial(M, N, K, rows.data(), off.data(), bt.data(), c.data(), N, ep); });
    fmt::print("  {:7.1f} us {:4.0f}%", tt * 1e6, gflop / tt / 232 * 100);
  }
  fmt::print("\n");
}

}  // namespace

int main() {
  if (active_isa() != Isa::avx512 || !gemm_pixels64_panel_avx512()) {
    fmt::print("nxrt_cpu_gemm_pixels: no AVX-512 here (the 6 x 64 pixel tile is AVX-512 only)\n");
    return 0;
  }
  fmt::print("{:<26} {:>5} {:>5} {:>5}  {:>16}  {:>16}  {:>16}   (us, % of 232 GFLOP/s)\n", "shape", "M", "N", "K",
             "8 x 48", "6 x 64", "48s, then 64");
  run("project 14x14 384->64", 196, 64, 384, false);
  run("project 7x7 384->64", 49, 64, 384, false);
  run("project 28x28 192->64", 784, 64, 192, false);
  run("project 56x56 144->64", 3136, 64, 144, false);
  run("project 14x14 768->256", 196, 256, 768, false);
  run("project 7x7 768->256", 49, 256, 768, false);
  run("project 14x14 384->128", 196, 128, 384, false);
  run("project 7x7 960->160", 49, 160, 960, false);
  run("project 7x7 576->160", 49, 160, 576, false);
  run("project 14x14 672->112", 196, 112, 672, false);
  run("project 28x28 336->112", 784, 112, 336, false);
  run("project 7x7 960->320", 49, 320, 960, false);
  run("expand 14x14 64->384", 196, 384, 64, true);
  run("expand 7x7 160->960", 49, 960, 160, true);
  run("expand 112x112 16->96", 560, 96, 16, true);
  run("project 56x56 96->24", 112, 24, 96, false);
  run("expand 56x56 24->144", 1008, 144, 24, true);
  run("project 56x56 144->24", 336, 24, 144, false);
  run("project 28x28 144->32", 196, 32, 144, false);
  run("expand 28x28 32->192", 784, 192, 32, true);
}
