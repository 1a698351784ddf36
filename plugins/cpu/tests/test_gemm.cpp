#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <string>
#include <limits>

#include "cpu_info.hpp"
#include "gemm.hpp"
#include "scratch.hpp"
#include "thread_pool.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

static std::vector<float> naive(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const std::vector<float>& a,
                                const std::vector<float>& b, float beta, const std::vector<float>& c) {
  std::vector<float> out(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(ta ? a[size_t(k * M + m)] : a[size_t(m * K + k)]) * double(tb ? b[size_t(n * K + k)] : b[size_t(k * N + n)]);
      out[size_t(m * N + n)] = float(alpha * s + (beta != 0.f ? beta * c[size_t(m * N + n)] : 0.0));
    }
  return out;
}

static void check_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, ThreadPool* pool) {
  auto a = random_floats(size_t(M * K), uint32_t(M * 131 + K));
  auto b = random_floats(size_t(K * N), uint32_t(N * 17 + K));
  auto c = random_floats(size_t(M * N), 7);
  auto want = naive(ta, tb, M, N, K, alpha, a, b, beta, c);
  std::vector<float> got = c;
  sgemm(ta, tb, M, N, K, alpha, a.data(), ta ? M : K, b.data(), tb ? K : N, beta, got.data(), N, pool);
  INFO("M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb << " alpha=" << alpha << " beta=" << beta);
  CHECK(worst(got, want) <= 1.0);
}

TEST_CASE("sgemm matches the naive product on odd sizes and transposes") {
  ThreadPool pool(2);
  const int64_t sizes[] = {1, 2, 7, 8, 9, 15, 16, 17, 33, 47, 48, 49, 65, 97};
  for (int64_t M : {1, 3, 8, 9, 17, 64})
    for (int64_t N : sizes)
      for (int64_t K : {1, 5, 16, 31}) check_sgemm(false, false, M, N, K, 1.f, 0.f, nullptr);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_sgemm(ta, tb, 13, 29, 11, 0.5f, 0.f, nullptr);
      check_sgemm(ta, tb, 70, 100, 300, 1.f, 1.f, &pool);  // K spans two KC blocks
      check_sgemm(ta, tb, 5, 3, 2, -2.f, 0.25f, &pool);
    }
  // A transposed B is packed 8 columns at a time through 8 x 8 register transposes: every
  // panel width (N mod 48 around 8 and 16) and K around 8.
  for (int64_t N : sizes)
    for (int64_t K : {3, 8, 13}) check_sgemm(false, true, 9, N, K, 1.f, 0.f, nullptr);
  check_sgemm(false, true, 64, 1000, 512, 1.f, 0.f, &pool);  // threaded, N split
  check_sgemm(false, false, 300, 40, 600, 1.f, 0.f, &pool);  // threaded, M split
}

TEST_CASE("sgemm with K = 0 writes beta*C") {
  std::vector<float> c = {1, 2, 3, 4};
  sgemm(false, false, 2, 2, 0, 1.f, nullptr, 0, nullptr, 2, 0.f, c.data(), 2, nullptr);
  CHECK(c == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("pack_a lays out alpha * A as [K][8] tiles with zero rows past M") {
  // Sizes around the 8 x 8 blocks the vector packing transposes, rows lda > K apart.
  for (int64_t M : {1, 7, 8, 13, 24})
    for (int64_t K : {1, 7, 8, 9, 31, 64}) {
      const int64_t lda = K + 3;
      std::vector<float> a(size_t(M * lda));
      for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 23) - 11) * 0.37f;
      AlignedFloats pa(packed_a_floats(M, K));
      std::fill(pa.data(), pa.data() + pa.size(), 99.f);
      pack_a(a.data(), lda, false, M, K, -1.5f, pa.data());
      int bad = 0;
      for (int64_t m = 0; m < gemm_tiles(M) * kGemmMR; ++m)
        for (int64_t k = 0; k < K; ++k) {
          const float want = m < M ? -1.5f * a[size_t(m * lda + k)] : 0.f;
          bad += pa.data()[(m / kGemmMR) * kGemmMR * K + k * kGemmMR + m % kGemmMR] != want;
        }
      INFO("M=" << M << " K=" << K);
      CHECK(bad == 0);
    }
}

TEST_CASE("threaded gemm_packed and pack_a_parallel equal the serial ones bit for bit") {
  // Same K blocking and summation order on every split: the per-thread ranges
  // of equal work (panels >= 2 per thread; ranges that start or end inside a
  // panel: 49 x 512 is 11 panels, the last 32 wide, over 7 row tiles), the task
  // grid (fewer panels) and 3 threads. gemm_pack_a_and_multiply too: A packed per
  // thread (up to 2 MB) or shared (700 x 800: 2.2 MB).
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (auto [M, N, K] : {std::array<int64_t, 3>{128, 768, 300}, {9, 200, 17}, {70, 100, 513}, {64, 40, 600},
                           {300, 1000, 64}, {1, 290, 5}, {49, 512, 300}, {57, 530, 40}, {8, 700, 9},
                           {700, 400, 800}}) {
      auto a = random_floats(size_t(M * K), uint32_t(M + K));
      auto b = random_floats(size_t(K * N), uint32_t(N + 3 * K));
      auto bias = random_floats(size_t(N), 5);
      auto res = random_floats(size_t(M * N), 6);
      AlignedFloats pa(packed_a_floats(M, K)), pa_par(packed_a_floats(M, K)), pb(packed_b_floats(K, N));
      pack_a(a.data(), K, false, M, K, 0.75f, pa.data());
      std::fill(pa_par.data(), pa_par.data() + pa_par.size(), 99.f);
      pack_a_parallel(a.data(), K, false, M, K, 0.75f, pa_par.data(), &pool);
      pack_b(b.data(), N, false, K, N, pb.data());
      INFO("threads=" << threads << " M=" << M << " N=" << N << " K=" << K);
      CHECK(std::equal(pa.data(), pa.data() + pa.size(), pa_par.data()));
      GemmEpilogue ep;
      ep.col_bias = bias.data();
      ep.residual = res.data();
      ep.ldr = N;
      std::vector<float> serial(size_t(M * N)), threaded(size_t(M * N), 99.f);
      gemm_packed_serial(M, N, K, pa.data(), pb.data(), serial.data(), N, ep);
      gemm_packed(M, N, K, pa.data(), pb.data(), threaded.data(), N, ep, &pool);
      CHECK(serial == threaded);
      std::vector<float> at(a.size()), packing(size_t(M * N), 99.f), packing_t(size_t(M * N), 99.f);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) at[size_t(k * M + m)] = a[size_t(m * K + k)];
      GemmPackA A;
      A.a = a.data();
      A.lda = K;
      A.alpha = 0.75f;
      gemm_pack_a_and_multiply(M, N, K, A, pb.data(), packing.data(), N, ep, &pool);
      CHECK(serial == packing);
      A.a = at.data();
      A.lda = M;
      A.trans = true;
      gemm_pack_a_and_multiply(M, N, K, A, pb.data(), packing_t.data(), N, ep, &pool);
      CHECK(serial == packing_t);
    }
  }
}

TEST_CASE("gemm epilogue adds row and column bias") {
  const int64_t M = 11, N = 50, K = 9;
  auto a = random_floats(size_t(M * K), 1), b = random_floats(size_t(K * N), 2);
  auto rb = random_floats(size_t(M), 3), cb = random_floats(size_t(N), 4);
  std::vector<float> pa(packed_a_floats(M, K)), pb(packed_b_floats(K, N));
  AlignedFloats apa(pa.size()), apb(pb.size());
  pack_a(a.data(), K, false, M, K, 1.f, apa.data());
  pack_b(b.data(), N, false, K, N, apb.data());
  std::vector<float> got(size_t(M * N));
  GemmEpilogue ep;
  ep.row_bias = rb.data();
  ep.col_bias = cb.data();
  gemm_packed(M, N, K, apa.data(), apb.data(), got.data(), N, ep, nullptr);
  auto want = naive(false, false, M, N, K, 1.f, a, b, 0.f, got);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) want[size_t(m * N + n)] += rb[size_t(m)] + cb[size_t(n)];
  CHECK(worst(got, want) <= 1.0);
}

TEST_CASE("a last panel of 1..4 columns (the narrow kernel) equals the micro-kernel bit for bit") {
  // The same A and B columns multiplied with N = 48 + cols (the last cols columns in the narrow
  // kernel) and with N = 96 (all in the 8 x 48 micro-kernel): K > the K block so the old C is
  // accumulated, every epilogue part and none, packed and plain B, partial last row tile, row
  // tiles in blocks of up to 8 (1 column) / 6 (2) / 4 and their remainders.
  const int64_t K = 300, NW = 96;
  for (int64_t M : {5, 8, 37, 61, 70, 100})
    for (int64_t cols : {1, 2, 3, 4}) {
      const int64_t N = 48 + cols;
      auto a = random_floats(size_t(M * K), uint32_t(M + 1)), b = random_floats(size_t(K * NW), 21);
      auto rb = random_floats(size_t(M), 22), cb = random_floats(size_t(NW), 23), res = random_floats(size_t(M * NW), 24);
      AlignedFloats pa(packed_a_floats(M, K));
      pack_a(a.data(), K, false, M, K, 1.f, pa.data());
      std::vector<float> bn(size_t(K * N));
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) bn[size_t(k * N + j)] = b[size_t(k * NW + j)];
      AlignedFloats pbn(packed_b_floats(K, N)), pbw(packed_b_floats(K, NW));
      pack_b(bn.data(), N, false, K, N, pbn.data());
      pack_b(b.data(), NW, false, K, NW, pbw.data());
      for (int variant = 0; variant < 4; ++variant) {
        GemmEpilogue ep;
        if (variant < 3) {  // 3: no epilogue (Winograd's products)
          ep.row_bias = rb.data();
          ep.col_bias = cb.data();
        }
        if (variant == 1 || variant == 2) {
          ep.residual = res.data();
          ep.ldr = NW;
          ep.clamp = true;
          ep.lo = -2.f;
          ep.hi = 2.f;
        }
        ep.hardswish = variant == 2;
        std::vector<float> narrow(size_t(M * NW), 7.f), wide(size_t(M * NW), 7.f);
        if (variant == 1) {  // B read in place
          gemm_packed_a(M, N, K, pa.data(), bn.data(), N, narrow.data(), NW, ep, nullptr);
          gemm_packed_a(M, NW, K, pa.data(), b.data(), NW, wide.data(), NW, ep, nullptr);
        } else {
          gemm_packed_serial(M, N, K, pa.data(), pbn.data(), narrow.data(), NW, ep);
          gemm_packed_serial(M, NW, K, pa.data(), pbw.data(), wide.data(), NW, ep);
        }
        INFO("M=" << M << " cols=" << cols << " variant=" << variant);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < NW; ++j) {
            const float got = narrow[size_t(m * NW + j)];
            if (j < N) CHECK(got == wide[size_t(m * NW + j)]);
            else CHECK(got == 7.f);  // past N: untouched
          }
      }
    }
}

static void check_tile_against_generic(GemmTileFn fast) {
  const int64_t K = 37, N = 48;
  auto a = random_floats(size_t(8 * K), 5), b = random_floats(size_t(K * N), 6);
  AlignedFloats pa(packed_a_floats(8, K)), pb(packed_b_floats(K, N));
  pack_a(a.data(), K, false, 8, K, 1.f, pa.data());
  pack_b(b.data(), N, false, K, N, pb.data());
  for (int64_t mr : {1, 5, 8})
    for (int64_t cols : {1, 7, 8, 16, 20, 24, 25, 32, 33, 41, 48}) {
      const int64_t w = (cols + 15) / 16 * 16;
      // repack B with this width
      AlignedFloats pw(size_t(K * w));
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < w; ++j) pw.data()[k * w + j] = j < cols ? b[size_t(k * N + j)] : 0.f;
      auto res = random_floats(8 * 48, 8), rb = random_floats(8, 9), cb = random_floats(48, 10);
      for (int variant = 0; variant < 3; ++variant) {
        GemmTileStore st;
        st.accumulate = true;
        if (variant > 0) {  // every store option at once
          st.row_bias = rb.data();
          st.col_bias = cb.data();
          st.residual = res.data();
          st.ldr = 48;
          st.clamp = true;
          st.lo = -0.5f;
          st.hi = 1.5f;
        }
        // variant 2: B unpacked, read from the plain K x N matrix (rows end at `cols`)
        const bool unpacked = variant == 2;
        const float* bp = unpacked ? b.data() : pw.data();
        const int64_t ldb = unpacked ? N : w;
        std::vector<float> c1(8 * 48, 3.f), c2(8 * 48, 3.f);
        fast(K, pa.data(), bp, w, ldb, unpacked, c1.data(), 48, mr, cols, st);
        gemm_tile_generic()(K, pa.data(), bp, w, ldb, unpacked, c2.data(), 48, mr, cols, st);
        INFO("mr=" << mr << " cols=" << cols << " variant=" << variant);
        CHECK(worst(c1, c2) <= 1.0);
        for (int64_t m = 0; m < 8; ++m)  // untouched outside the tile
          for (int64_t j = 0; j < 48; ++j)
            if (m >= mr || j >= cols) CHECK(c1[size_t(m * 48 + j)] == 3.f);
      }
    }
}

TEST_CASE("the AVX-512 and AVX2 micro-kernels agree with the generic one") {
  // Each where this CPU can run it; the generic one always runs.
  if (cpu_info().avx512f && gemm_tile_avx512()) {
    INFO("avx512f");
    check_tile_against_generic(gemm_tile_avx512());
  }
  if (cpu_info().avx2 && gemm_tile_avx2()) {
    INFO("avx2");
    check_tile_against_generic(gemm_tile_avx2());
  }
  CHECK(std::string(gemm_kernel_name_for(int(Isa::avx2))) == (gemm_tile_avx2() ? "avx2-4x24" : "generic"));
}

// gemm_packed_a reads B in place (row stride ldb >= N, any alignment) and
// applies the fused store: + row bias + residual, then clamp.
static void check_unpacked_b(int64_t M, int64_t N, int64_t K, int64_t ldb, bool residual, bool clamp, ThreadPool* pool) {
  auto a = random_floats(size_t(M * K), uint32_t(M + 7 * K));
  // +1 float of offset so rows are not 64-byte aligned; B ends exactly at its last element.
  auto braw = random_floats(size_t(1 + (K - 1) * ldb + N), uint32_t(N + 3 * K));
  std::vector<float> b(size_t(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) b[size_t(k * N + n)] = braw[size_t(1 + k * ldb + n)];
  auto rb = random_floats(size_t(M), 3), res = random_floats(size_t(M * N), 4);
  AlignedFloats pa(packed_a_floats(M, K));
  pack_a(a.data(), K, false, M, K, 1.f, pa.data());
  GemmEpilogue ep;
  ep.row_bias = rb.data();
  if (residual) {
    ep.residual = res.data();
    ep.ldr = N;
  }
  ep.clamp = clamp;
  ep.lo = -0.25f;
  ep.hi = 0.5f;
  std::vector<float> got(size_t(M * N), 99.f);
  gemm_packed_a(M, N, K, pa.data(), braw.data() + 1, ldb, got.data(), N, ep, pool);
  auto want = naive(false, false, M, N, K, 1.f, a, b, 0.f, got);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float& v = want[size_t(m * N + n)];
      v += rb[size_t(m)];
      if (residual) v += res[size_t(m * N + n)];
      if (clamp) v = std::min(std::max(v, ep.lo), ep.hi);
    }
  INFO("M=" << M << " N=" << N << " K=" << K << " ldb=" << ldb << " residual=" << residual << " clamp=" << clamp);
  CHECK(worst(got, want) <= 1.0);
}

TEST_CASE("gemm with unpacked B and fused residual / clamp matches the naive product") {
  ThreadPool pool(2);
  for (int64_t M : {1, 7, 8, 24})
    for (int64_t N : {1, 15, 16, 17, 47, 48, 49, 100})
      for (int64_t K : {1, 9, 300}) check_unpacked_b(M, N, K, N, true, true, nullptr);
  check_unpacked_b(9, 20, 33, 37, false, false, nullptr);  // ldb > N
  check_unpacked_b(9, 20, 33, 37, false, true, nullptr);
  check_unpacked_b(9, 20, 33, 37, true, false, nullptr);
  check_unpacked_b(64, 3136, 64, 3136, true, true, &pool);  // threaded
  check_unpacked_b(320, 49, 960, 49, false, true, &pool);
}

TEST_CASE("fused clamp keeps NaN and clamps infinities") {
  const int64_t M = 3, N = 20, K = 2;
  std::vector<float> a(size_t(M * K), 1.f), b(size_t(K * N), 1.f);
  b[0] = std::numeric_limits<float>::quiet_NaN();
  b[1] = std::numeric_limits<float>::infinity();
  b[2] = -std::numeric_limits<float>::infinity();
  AlignedFloats pa(packed_a_floats(M, K));
  pack_a(a.data(), K, false, M, K, 1.f, pa.data());
  GemmEpilogue ep;
  ep.clamp = true;
  ep.lo = 0.f;
  ep.hi = 6.f;
  std::vector<float> c(size_t(M * N));
  gemm_packed_a(M, N, K, pa.data(), b.data(), N, c.data(), N, ep, nullptr);
  for (int64_t m = 0; m < M; ++m) {
    CHECK(std::isnan(c[size_t(m * N)]));
    CHECK(c[size_t(m * N + 1)] == 6.f);
    CHECK(c[size_t(m * N + 2)] == 0.f);
    CHECK(c[size_t(m * N + 3)] == 2.f);
  }
}

TEST_CASE("gemm over row pointers (B read in place) matches the naive product") {
  if (!gemm_rows_tile_active()) return;  // AVX2 and AVX-512 only
  ThreadPool pool(1);
  for (auto [M, N, K] : {std::array<int64_t, 3>{8, 48, 16}, {13, 101, 147}, {64, 230, 300}, {3, 7, 5}, {17, 49, 128}}) {
    auto a = random_floats(size_t(M * K), uint32_t(M * 7 + K));
    // B's rows lie at scattered places of one buffer, each readable only up to col0 + N.
    const int64_t col0 = 3, pitch = col0 + N + 5;
    std::vector<float> store(size_t(K * pitch + 64), std::numeric_limits<float>::quiet_NaN());
    std::vector<const float*> rows(static_cast<size_t>(K));
    std::vector<float> b(size_t(K * N));
    auto vals = random_floats(size_t(K * N), uint32_t(N * 3 + K));
    for (int64_t k = 0; k < K; ++k) {
      const int64_t slot = k % 2 ? K - 1 - k / 2 : k / 2;  // rows out of order
      rows[size_t(k)] = store.data() + slot * pitch;
      for (int64_t n = 0; n < N; ++n) store[size_t(slot * pitch + col0 + n)] = b[size_t(k * N + n)] = vals[size_t(k * N + n)];
    }
    auto bias = random_floats(size_t(M), 5);
    AlignedFloats pa(packed_a_floats(M, K));
    pack_a(a.data(), K, false, M, K, 1.f, pa.data());
    GemmEpilogue ep;
    ep.row_bias = bias.data();
    ep.clamp = true;
    ep.lo = -0.5f;
    ep.hi = 0.5f;
    const int64_t ldc = N + 2;
    std::vector<float> got(size_t(M * ldc), 9.f);
    gemm_rows_serial(M, N, K, pa.data(), rows.data(), col0, got.data(), ldc, ep);
    auto prod = naive(false, false, M, N, K, 1.f, a, b, 0.f, std::vector<float>(size_t(M * N)));
    std::vector<float> want(size_t(M * N)), gotc(size_t(M * N));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        want[size_t(m * N + n)] = std::min(0.5f, std::max(-0.5f, prod[size_t(m * N + n)] + bias[size_t(m)]));
        gotc[size_t(m * N + n)] = got[size_t(m * ldc + n)];
      }
    INFO("M=" << M << " N=" << N << " K=" << K);
    CHECK(worst(gotc, want) <= 1.0);
    for (int64_t m = 0; m < M; ++m)  // the columns past N are not written
      for (int64_t n = N; n < ldc; ++n) CHECK(got[size_t(m * ldc + n)] == 9.f);
  }
}
