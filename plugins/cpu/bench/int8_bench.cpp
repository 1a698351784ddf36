// The 8-bit kernels (QMatMul, QConv: uint8 x int8 -> uint8, per-channel scales) beside the
// float GEMM on the same shapes: the transformer's matmuls (M = 128) and ResNet-18's 3x3
// convolutions. int8 GOP/s and fp32 GFLOP/s count 2 per multiply-add of the direct
// product; the fp32 conv column is conv2d as the plugin runs it (Winograd where it picks it),
// the fp32 GEMM column the same product as one packed GEMM (im2col not counted). Best of
// several runs, so other load on the machine lowers the numbers less.
// Usage: nxrt_cpu_int8_bench [--threads N] [--reps R]
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "best_seconds.hpp"
#include "conv.hpp"
#include "cpu_info.hpp"
#include "gemm.hpp"
#include "gemm_int8.hpp"
#include "qlinear.hpp"
#include "scratch.hpp"
#include "thread_pool.hpp"

using namespace nxrt::cpu;

namespace {

QOutput u8_output(int64_t channels) {
  QOutput o;
  o.type = QType::U8;
  o.zero_point = 3;
  for (int64_t c = 0; c < channels; ++c) {
    o.bias.push_back(int32_t(c * 37 % 1000) - 500);
    o.scale.push_back(1e-4 * double(1 + c % 7));
  }
  return o;
}

double fp32_gemm_seconds(int64_t M, int64_t N, int64_t K, int reps, ThreadPool* pool) {
  std::vector<float> a(size_t(M * K)), b(size_t(K * N)), c(size_t(M * N));
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 13) * 0.01f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 7) * 0.01f;
  AlignedFloats pa(packed_a_floats(M, K)), pb(packed_b_floats(K, N));
  pack_b(b.data(), N, false, K, N, pb.data());
  return best_seconds(reps, [&] {
    pack_a(a.data(), K, false, M, K, 1.f, pa.data());
    gemm_packed(M, N, K, pa.data(), pb.data(), c.data(), N, GemmEpilogue{}, pool);
  });
}

// Weights as trained convs have them, per-channel quantized: most near 0, a few at +-127
// (a sum of three uniforms, clamped).
void bell_weights(std::vector<int8_t>& w) {
  uint32_t r = 12345;
  auto uniform = [&] {
    r = r * 1664525u + 1013904223u;
    return double(r >> 8) / double(1u << 24) - 0.5;
  };
  for (auto& v : w) v = int8_t(std::clamp(int(std::lround((uniform() + uniform() + uniform()) * 75.0)), -127, 127));
}

// The micro-kernels alone, on one tile whose operands stay in L1 (kc = 128): the int16 pairs
// (q_tile_active), where they run the vpdpbusd 6 x 64 tiles (four B slices), or the AVX2 u8 x
// s8 quads with a rest in 0%, 5% and 50% of the quads. GOP/s of the product itself (the
// rest's work not counted).
void micro_kernels(int reps) {
  constexpr int64_t kc = 128, calls = 20000;
  AlignedFloats a(size_t(2 * kc * kQMR)), b(size_t(kQWide * kc * kQNR));  // room for 2 kc pairs, 4 slices
  for (size_t i = 0; i < a.size(); ++i) reinterpret_cast<uint32_t*>(a.data())[i] = uint32_t(i * 0x01030507u) & 0x3f3f3f3fu;
  for (size_t i = 0; i < b.size(); ++i) reinterpret_cast<uint32_t*>(b.data())[i] = uint32_t(i * 0x09070503u);
  const auto* pa = reinterpret_cast<const uint32_t*>(a.data());
  const auto* pb = reinterpret_cast<const uint32_t*>(b.data());
  alignas(64) int32_t acc[kQMR * kQNR] = {};
  const QTileFn pairs = q_tile_active();
  const double t_pairs = best_seconds(reps, [&] {
    for (int64_t i = 0; i < calls; ++i) pairs(2 * kc, pa, pb, acc, true);  // 2 kc pairs: the same k
  });
  fmt::print("micro-kernel alone (operands in L1, {} k): int16 pairs {:.1f} GOP/s", 4 * kc,
             2.0 * double(calls * 4 * kc * kQMR * kQNR) / t_pairs / 1e9);
  if (const QTileWideFn wide = q_tile_wide_dpbusd(kQWide, true)) {
    int32_t* accs = reinterpret_cast<int32_t*>(std::aligned_alloc(64, sizeof(int32_t) * kQWide * kQMR * kQNR));
    const uint32_t* slices[kQWide];
    for (int j = 0; j < kQWide; ++j) slices[j] = pb + j * kc * kQNR;
    const double t = best_seconds(reps, [&] {
      for (int64_t i = 0; i < calls; ++i) wide(kc, pa, slices, accs, true, pa);
    });
    std::free(accs);
    fmt::print(", u8 x s8 quads 6x64 {:.1f}", 2.0 * double(calls * 4 * kc * kQMR * kQNR * kQWide) / t / 1e9);
  }
  const QTileRestFn quads = q_tile_quads_avx2();
  if (quads) {
    for (int every : {0, 20, 2}) {  // rest steps for every 20th / 2nd quad
      std::vector<uint32_t> rest;
      int64_t steps = 0;
      for (int64_t q = 0; every && q < kc; q += every, ++steps)  // rows 0-3's steps, then 4-5's
        for (int64_t m = 0; m < kQRestRowsA; ++m) rest.insert(rest.end(), {uint32_t(q), 0x01ff01ffu});
      for (int64_t q = 0; every && q < kc; q += every)
        for (int64_t m = kQRestRowsA; m < kQMR; ++m) rest.insert(rest.end(), {uint32_t(q), 0x01ff01ffu});
      const double t = best_seconds(reps, [&] {
        for (int64_t i = 0; i < calls; ++i) quads(kc, pa, pb, acc, true, rest.data(), steps, steps, 0);
      });
      fmt::print(", u8 x s8 quads (rest {}%) {:.1f}", every ? 100 / every : 0,
                 2.0 * double(calls * 4 * kc * kQMR * kQNR) / t / 1e9);
    }
  }
  fmt::print("\n");
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 7;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else {
      fmt::print(stderr, "usage: nxrt_cpu_int8_bench [--threads N] [--reps R]\n");
      return 2;
    }
  }
  ThreadPool pool_obj(threads);
  ThreadPool* pool = threads > 1 ? &pool_obj : nullptr;
  fmt::print("cpu: {} ({}), int8 kernel {}, fp32 gemm kernel {}, {} thread(s)\n", cpu_info().model_name,
             cpu_info().isa_name(), q_kernel_name(), gemm_kernel_name(), threads);
  fmt::print("{:<26} {:>5} {:>5} {:>5} {:>10} {:>10} {:>10} {:>7}\n", "shape", "M", "N", "K", "int8 GOP/s",
             "fp32 GEMM", "fp32 conv", "int8/fp32");

  struct MM {
    const char* what;
    int64_t M, N, K;
  };
  const MM mms[] = {{"transformer qkv/out", 128, 768, 768},
                    {"transformer ffn up", 128, 3072, 768},
                    {"transformer ffn down", 128, 768, 3072}};
  for (const MM& s : mms) {
    std::vector<uint8_t> a(size_t(s.M * s.K)), y(size_t(s.M * s.N));
    std::vector<int8_t> b(size_t(s.K * s.N));
    for (size_t i = 0; i < a.size(); ++i) a[i] = uint8_t(i * 7 % 251);
    for (size_t i = 0; i < b.size(); ++i) b[i] = int8_t(int(i * 5 % 255) - 127);
    const QMatMul q(QType::U8, 128, QType::S8, b.data(), s.K, s.N, std::vector<int32_t>(size_t(s.N), 0), u8_output(s.N));
    const double ops = 2.0 * double(s.M) * double(s.N) * double(s.K);
    const double ti = best_seconds(reps, [&] { q.run(s.M, a.data(), y.data(), pool); });
    const double tf = fp32_gemm_seconds(s.M, s.N, s.K, reps, pool);
    fmt::print("{:<26} {:>5} {:>5} {:>5} {:>10.1f} {:>10.1f} {:>10} {:>6.2f}x\n", s.what, s.M, s.N, s.K, ops / ti / 1e9,
               ops / tf / 1e9, "-", tf / ti);
  }

  struct CV {
    const char* what;
    int64_t c, hw, stride;
  };
  double rest_quads = 0, all_quads = 0;
  const CV cvs[] = {{"resnet18 3x3 64 @56", 64, 56, 1},
                    {"resnet18 3x3 128 @28", 128, 28, 1},
                    {"resnet18 3x3 256 @14", 256, 14, 1},
                    {"resnet18 3x3 512 @7", 512, 7, 1},
                    {"resnet18 3x3 128 @56 s2", 128, 56, 2}};
  for (const CV& c : cvs) {
    ConvShape s;
    s.in_c = c.stride == 2 ? c.c / 2 : c.c;
    s.in_h = s.in_w = c.hw;
    s.out_c = c.c;
    s.k_h = s.k_w = 3;
    s.stride_h = s.stride_w = c.stride;
    s.pad_top = s.pad_left = 1;
    s.out_h = s.out_w = (c.hw + 2 - 3) / c.stride + 1;
    const int64_t P = s.out_h * s.out_w, K = s.gemm_k();
    std::vector<uint8_t> x(size_t(s.in_c * s.in_h * s.in_w)), y(size_t(s.out_c * P));
    std::vector<int8_t> w(size_t(s.out_c * K));
    for (size_t i = 0; i < x.size(); ++i) x[i] = uint8_t(i * 7 % 251);
    bell_weights(w);
    const QConv q(QType::U8, 120, QType::S8, w.data(), int64_t(w.size()), std::vector<int32_t>(size_t(s.out_c), 0),
                  u8_output(s.out_c), nullptr, s.k_h * s.k_w);
    rest_quads += double(q.rest_rows()) / double(kQMR);
    all_quads += double(q_tiles(s.out_c) * q_quads(K));
    const double ops = 2.0 * double(s.out_c) * double(P) * double(K);
    const double ti = best_seconds(reps, [&] { q.run(s, x.data(), y.data(), pool); });
    const double tg = fp32_gemm_seconds(s.out_c, P, K, reps, pool);
    std::vector<float> xf(x.size()), wf(w.size()), yf(y.size());
    for (size_t i = 0; i < x.size(); ++i) xf[i] = float(x[i]) * 0.01f;
    for (size_t i = 0; i < w.size(); ++i) wf[i] = float(w[i]) * 0.01f;
    const PackedConvWeights pw = pack_conv_weights(s, wf.data());
    const double tc = best_seconds(reps, [&] { conv2d(s, xf.data(), pw, nullptr, yf.data(), pool); });
    fmt::print("{:<26} {:>5} {:>5} {:>5} {:>10.1f} {:>10.1f} {:>10.1f} {:>6.2f}x\n", c.what, s.out_c, P, K,
               ops / ti / 1e9, ops / tg / 1e9, ops / tc / 1e9, tg / ti);
  }
  const double rest_share = all_quads > 0 ? rest_quads / all_quads : 0.0;
  fmt::print("(int8/fp32: against the fp32 GEMM on the same shape; conv weights bell-shaped over [-127, 127], "
             "the AVX2 rest {:.1f}% of the quad steps)\n", 100.0 * rest_share);
  micro_kernels(reps);
  return 0;
}
