// Gemm and MatMul: constant B operands are packed once at kernel creation.
#include <algorithm>
#include <cstring>
#include <optional>
#include <span>

#include "gemm.hpp"
#include "gemm_bf16.hpp"
#include "ops.hpp"
#include "scratch.hpp"
#include "tensor_ops.hpp"

namespace nxrt::cpu {
namespace {

Check rank_is(const Node& n, size_t i, int64_t want, const char* what) {
  auto v = n.input(i);
  if (v.present() && v.rank() >= 0 && v.rank() != want)
    return sdk::refuse(NXRT_REFUSE_SHAPE, "{}: input {} ({}) has rank {}, expected {}", n.op_type(), i, what, v.rank(), want);
  return std::nullopt;
}

// ------------------------------------------------------------------ Gemm

struct GemmState {
  float alpha = 1.f, beta = 1.f;
  bool trans_a = false, trans_b = false;
  bool b_packed = false;
  bool bf16 = false;                 // B packed in bf16 pairs (cpu.precision=bf16): A too, per run
  int64_t pk = 0, pn = 0;            // K, N of the packed B
  std::span<const float> packed_b;  // a prepacked buffer (made here, or in an imported blob)
};

// What a packed B depends on: its K and N, the GEMM panel layout and the precision.
void declare_packed_b(sdk::Prepacked& pp, int64_t K, int64_t N, bool bf16) {
  pp.param("K", K);
  pp.param("N", N);
  pp.param("gemm_nr", kGemmNR);
  pp.param("bf16", bf16);
}

// Slots of one packed B: floats, or bf16 pairs.
size_t packed_b_slots(int64_t K, int64_t N, bool bf16) {
  return bf16 ? packed_b_bf16_slots(K, N) : packed_b_floats(K, N);
}

void pack_b_as(bool bf16, const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst) {
  if (bf16) pack_b_bf16(b, ldb, trans, K, N, dst);
  else pack_b(b, ldb, trans, K, N, dst);
}

// A packed per run against a prepacked B (bf16: rounded into pairs), then the product.
void gemm_prepacked_b(bool bf16, const float* a, int64_t lda, bool trans_a, float alpha, int64_t M, int64_t N, int64_t K,
                      const float* pb, float* c, const GemmEpilogue& ep, ThreadPool* pool) {
  gemm_pack_a_and_multiply(M, N, K, GemmPackA{a, lda, trans_a, alpha, bf16}, pb, c, N, ep, pool);
}

std::string gemm_description(bool b_packed, bool bf16) {
  if (bf16) return fmt::format("gemm {} (bf16 fast math: cpu.precision=bf16), B prepacked", gemm_bf16_kernel_name());
  return fmt::format("gemm {}, B {}", gemm_kernel_name(), b_packed ? "prepacked" : "packed every run");
}

Check gemm_check(const Node& n) {
  return first_refusal([&] { return sdk::require_dtypes(n, kF32); },
                       [&] { return rank_is(n, 0, 2, "A"); },
                       [&] { return rank_is(n, 1, 2, "B"); },
                       [&] {
                         auto c = n.input(2);
                         if (c.present() && c.rank() > 2)
                           return Check(sdk::refuse(NXRT_REFUSE_SHAPE, "Gemm: C has rank {}, at most 2 broadcasts", c.rank()));
                         return Check();
                       });
}

}  // namespace

std::unique_ptr<Kernel> make_gemm_kernel(const Node& n, CpuSession& s, const GemmIo& io, sdk::Prepacked& pp) {
  GemmState st;
  st.alpha = n.attr_float("alpha", 1.f);
  st.beta = n.attr_float("beta", 1.f);
  st.trans_a = n.attr_int("transA", 0) != 0;
  st.trans_b = n.attr_int("transB", 0) != 0;
  auto b = n.input(1);
  if (b.is_constant()) {
    ConstTensorView t = b.constant();
    if (t.rank() != 2) sdk::fail(NXRT_INVALID_ARGUMENT, "Gemm: B has rank {}, expected 2", t.rank());
    st.pk = st.trans_b ? t.dim(1) : t.dim(0);
    st.pn = st.trans_b ? t.dim(0) : t.dim(1);
    st.bf16 = s.bf16();
    declare_packed_b(pp, st.pk, st.pn, st.bf16);
    pp.param("trans_b", st.trans_b);
    st.packed_b = pp.buffer<float>("packed_b", packed_b_slots(st.pk, st.pn, st.bf16), [&](std::span<float> dst) {
      pack_b_as(st.bf16, static_cast<const float*>(t.raw()), t.dim(1), st.trans_b, st.pk, st.pn, dst.data());
    });
    st.b_packed = true;
    pp.capture(b);  // only the packed copy is read from now on: the host may free B
  }
  ThreadPool* pool = s.pool();
  const std::string description = gemm_description(st.b_packed, st.bf16);
  return make_kernel([st, io, pool](Context& ctx) {
    ConstTensorView a = ctx.input(size_t(io.a)), b = ctx.input(size_t(io.b));
    auto c = io.c >= 0 ? ctx.optional_input(size_t(io.c)) : std::nullopt;
    if (a.rank() != 2 || b.rank() != 2)
      sdk::fail(NXRT_INVALID_ARGUMENT, "Gemm: A {} and B {} must be 2-D", dims_str(a.dims()), dims_str(b.dims()));
    const int64_t M = st.trans_a ? a.dim(1) : a.dim(0), K = st.trans_a ? a.dim(0) : a.dim(1);
    const int64_t KB = st.trans_b ? b.dim(1) : b.dim(0), N = st.trans_b ? b.dim(0) : b.dim(1);
    if (K != KB)
      sdk::fail(NXRT_INVALID_ARGUMENT, "Gemm: inner dimensions differ: A {} (transA={}) and B {} (transB={})",
                dims_str(a.dims()), int(st.trans_a), dims_str(b.dims()), int(st.trans_b));
    if (st.b_packed && (st.pk != K || st.pn != N)) sdk::fail(NXRT_INVALID_ARGUMENT, "Gemm: B shape changed");
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, {M, N});
    float* yp = y.data<float>();
    GemmEpilogue ep;
    ep.clamp = io.clamp;
    ep.lo = io.lo;
    ep.hi = io.hi;
    if (c && st.beta != 0.f) {
      const auto& cd = c->dims();
      const int64_t cm = cd.size() == 2 ? cd[0] : 1, cn = cd.empty() ? 1 : cd.back();
      if (cd.size() > 2 || (cm != 1 && cm != M) || (cn != 1 && cn != N))
        sdk::fail(NXRT_INVALID_ARGUMENT, "Gemm: C {} does not broadcast to [{},{}]", dims_str(cd), M, N);
      const float* cp = c->data<float>();
      if (st.beta == 1.f && cm == 1 && cn == N && N > 1) {
        ep.col_bias = cp;
      } else if (st.beta == 1.f && cn == 1 && cm == M && M > 1) {
        ep.row_bias = cp;
      } else {
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) yp[i * N + j] = st.beta * cp[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
        ep.accumulate = true;
      }
    }
    if (M == 0 || N == 0) return;
    const float* pb = st.b_packed ? st.packed_b.data() : nullptr;
    if (!pb) {
      float* buf = scratch_floats(kScratchB, packed_b_floats(K, N));
      pack_b_parallel(b.data<float>(), b.dim(1), st.trans_b, K, N, buf, pool);
      pb = buf;
    }
    gemm_prepacked_b(st.bf16 && st.b_packed, a.data<float>(), a.dim(1), st.trans_a, st.alpha, M, N, K, pb, yp, ep, pool);
  }, description);
}

namespace {

std::unique_ptr<Kernel> gemm_create(const Node& n, CpuSession& s, sdk::Prepacked& pp) {
  return make_gemm_kernel(n, s, GemmIo{}, pp);
}

// ---------------------------------------------------------------- MatMul

struct MatMulState {
  bool b_packed = false;
  bool bf16 = false;  // B packed in bf16 pairs (cpu.precision=bf16)
  std::vector<int64_t> b_dims;  // as given
  int64_t pk = 0, pn = 0, b_batches = 1;
  std::span<const float> packed_b;  // b_batches packed matrices (a prepacked buffer)
  std::span<const float> bias;      // fused bias over the last axis (a prepacked buffer), or empty
  int a = 0, b = 1, residual = -1;
};

}  // namespace

std::unique_ptr<Kernel> make_matmul_kernel(const Node& n, CpuSession& s, const MatMulIo& io, sdk::Prepacked& pp) {
  MatMulState st;
  st.a = io.a;
  st.b = io.b;
  st.residual = io.residual;
  if (io.bias_add) {
    ConstTensorView t = io.bias_add->input(size_t(io.bias_slot)).constant();
    st.bias = pp.buffer<float>("bias", size_t(t.numel()), [&](std::span<float> dst) {
      if (!dst.empty()) std::memcpy(dst.data(), t.raw(), dst.size() * sizeof(float));
    });
    pp.capture(io.bias_add->input(size_t(io.bias_slot)));
  }
  auto b = n.input(1);
  if (b.is_constant()) {
    ConstTensorView t = b.constant();
    st.b_dims = t.dims();
    if (t.rank() >= 1) {
      const bool vec = t.rank() == 1;
      st.pk = vec ? t.dim(0) : t.dim(t.rank() - 2);
      st.pn = vec ? 1 : t.dim(t.rank() - 1);
      st.b_batches = vec ? 1 : t.numel() / std::max<int64_t>(1, st.pk * st.pn);
      if (st.pk * st.pn > 0) {
        st.bf16 = s.bf16();
        const size_t per = packed_b_slots(st.pk, st.pn, st.bf16);
        declare_packed_b(pp, st.pk, st.pn, st.bf16);
        pp.param("batches", st.b_batches);
        st.packed_b = pp.buffer<float>("packed_b", per * size_t(st.b_batches), [&](std::span<float> dst) {
          const float* src = static_cast<const float*>(t.raw());
          for (int64_t i = 0; i < st.b_batches; ++i)
            pack_b_as(st.bf16, src + i * st.pk * st.pn, st.pn, false, st.pk, st.pn, dst.data() + per * size_t(i));
        });
        st.b_packed = true;
        pp.capture(b);  // only the packed copy is read from now on: the host may free B
      }
    }
  }
  ThreadPool* pool = s.pool();
  const std::string description = gemm_description(st.b_packed, st.bf16);
  return make_kernel([st, pool](Context& ctx) {
    ConstTensorView a = ctx.input(size_t(st.a)), b = ctx.input(size_t(st.b));
    if (a.rank() == 0 || b.rank() == 0) sdk::fail(NXRT_INVALID_ARGUMENT, "MatMul: operands must have rank >= 1");
    std::vector<int64_t> ad = a.dims(), bd = b.dims();
    const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
    if (a_vec) ad.insert(ad.begin(), 1);
    if (b_vec) bd = {bd[0], 1};
    const int64_t M = ad[ad.size() - 2], K = ad.back(), KB = bd[bd.size() - 2], N = bd.back();
    if (K != KB)
      sdk::fail(NXRT_INVALID_ARGUMENT, "MatMul: inner dimensions differ: {} x {}", dims_str(a.dims()), dims_str(b.dims()));
    std::vector<int64_t> abat(ad.begin(), ad.end() - 2), bbat(bd.begin(), bd.end() - 2), obat;
    // broadcast batch dims
    const size_t r = std::max(abat.size(), bbat.size());
    obat.assign(r, 1);
    for (size_t i = 0; i < r; ++i) {
      const int64_t x = i < r - abat.size() ? 1 : abat[i - (r - abat.size())];
      const int64_t y = i < r - bbat.size() ? 1 : bbat[i - (r - bbat.size())];
      if (x != y && x != 1 && y != 1)
        sdk::fail(NXRT_INVALID_ARGUMENT, "MatMul: batch dims of {} and {} do not broadcast", dims_str(a.dims()), dims_str(b.dims()));
      obat[i] = x == 1 ? y : x;
    }
    std::vector<int64_t> od = obat;
    if (!a_vec) od.push_back(M);
    if (!b_vec) od.push_back(N);
    // Fused Add(s): the bias over the last axis and a residual of the output's shape go
    // into the GEMM's store.
    GemmEpilogue ep;
    if (!st.bias.empty()) {
      if (int64_t(st.bias.size()) != N)
        sdk::fail(NXRT_INVALID_ARGUMENT, "MatMul+Add: bias of {} values for {} columns", st.bias.size(), N);
      ep.col_bias = st.bias.data();
    }
    std::optional<ConstTensorView> res;
    if (st.residual >= 0) {
      res = ctx.input(size_t(st.residual));
      if (res->dims() != od)
        sdk::fail(NXRT_INVALID_ARGUMENT, "MatMul+Add: the added input {} does not have the MatMul's output shape {}",
                  dims_str(res->dims()), dims_str(od));
      ep.ldr = N;
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    float* yp = y.data<float>();
    const float* rp = res ? res->data<float>() : nullptr;
    const float* ap = a.data<float>();
    const float* bp = b.data<float>();
    int64_t nbatch = 1;
    for (auto d : obat) nbatch *= d;
    if (nbatch == 0 || M == 0 || N == 0) return;
    if (K == 0) {  // the empty product, plus what was fused
      for (int64_t i = 0; i < nbatch * M * N; ++i)
        yp[i] = (ep.col_bias ? ep.col_bias[i % N] : 0.f) + (rp ? rp[i] : 0.f);
      return;
    }
    if (st.b_packed && (st.pk != K || st.pn != N)) sdk::fail(NXRT_INVALID_ARGUMENT, "MatMul: B shape changed");
    const size_t per_b = st.b_packed ? packed_b_slots(K, N, st.bf16) : packed_b_floats(K, N);
    int64_t bbatches = 1;
    for (auto d : bbat) bbatches *= d;
    // B without batch dims: fold A's batches into M (A is contiguous).
    if (bbatches == 1 && bbat.size() <= abat.size()) {
      const int64_t MM = nbatch * M;
      const float* pb = st.b_packed ? st.packed_b.data() : nullptr;
      if (!pb) {
        float* buf = scratch_floats(kScratchB, per_b);
        pack_b_parallel(bp, N, false, K, N, buf, pool);
        pb = buf;
      }
      ep.residual = rp;
      gemm_prepacked_b(st.bf16, ap, K, false, 1.f, MM, N, K, pb, yp, ep, pool);
      return;
    }
    // General batched case: each output batch's A and B by their (contiguous) batch strides.
    const std::vector<int64_t> ast = contiguous_strides(ad), bst = contiguous_strides(bd);
    auto one = [&](int64_t o, ThreadPool* p) {
      const int64_t boff = gemm_batch_offset(bbat, std::span(bst).first(bbat.size()), obat, o);
      const float* pb;
      if (st.b_packed) {
        pb = st.packed_b.data() + per_b * size_t(boff / (K * N));
      } else {
        float* buf = scratch_floats(kScratchB, per_b);
        pack_b_parallel(bp + boff, N, false, K, N, buf, p);
        pb = buf;
      }
      GemmEpilogue e = ep;
      e.residual = rp ? rp + o * M * N : nullptr;
      gemm_prepacked_b(st.bf16, ap + gemm_batch_offset(abat, std::span(ast).first(abat.size()), obat, o), K, false, 1.f, M, N, K, pb,
                       yp + o * M * N, e, p);
    };
    for_each_gemm_batch(pool, nbatch, double(M) * double(N) * double(K), one);
  }, description);
}

namespace {

std::unique_ptr<Kernel> matmul_create(const Node& n, CpuSession& s, sdk::Prepacked& pp) {
  return make_matmul_kernel(n, s, MatMulIo{}, pp);
}

}  // namespace

void register_gemm_ops(Registry& r) {
  r.add(Def{"Gemm", "", 7, INT_MAX, gemm_check, nullptr}, gemm_create);
  r.add(Def{"MatMul", "", 1, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kF32); }, nullptr}, matmul_create);
}

}  // namespace nxrt::cpu
