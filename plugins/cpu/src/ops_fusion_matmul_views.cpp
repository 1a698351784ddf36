// MatMul through Transpose views: a MatMul operand that is Transpose(x) or
// Transpose(Reshape(x)), and a MatMul output that goes on through Transpose [-> Reshape],
// claimed with the MatMul as one kernel. A Reshape of a contiguous tensor and a Transpose of
// it are both strided views of x's memory, so the GEMM packs its operands from x itself (A
// and B by their row strides, or transposed) and stores its result rows at the output's
// strides: no transposed copy is written and read back. This is the attention heads' layout
// in exported transformers (Reshape [S, H*D] -> [S, H, D], Transpose to [H, S, D] or
// [H, D, S], and back), where the copies cost 1-4% of a run and more on two threads, as each
// read rows the other core had written. A Mul of the untransposed result by a constant power
// of two (the scores' 1 / sqrt(head size) for 16, 64, 256) joins too: A is packed scaled,
// which gives the same floats.
//
// Claimed only when every value is float32 with a static shape, each intermediate value has
// one consumer (the next node of the group), a Reshape's shape is constant, the view's
// matrices have unit stride along one of their axes (the output's along its rows) and the
// group holds at least one Transpose; otherwise the nodes are claimed as before.
#include <cmath>

#include "fusion_view.hpp"
#include "gemm.hpp"
#include "ops.hpp"
#include "scratch.hpp"
#include "tensor_ops.hpp"

namespace nxrt::cpu {
using namespace fusion;

namespace {

std::vector<int64_t> perm_of(const Node& t, size_t rank) {
  std::vector<int64_t> p = t.attr_ints("perm");
  if (!t.has_attr("perm")) {
    p.resize(rank);
    for (size_t i = 0; i < rank; ++i) p[i] = int64_t(rank - 1 - i);
  }
  return p;
}

bool is_permutation(const std::vector<int64_t>& p) {
  std::vector<char> seen(p.size(), 0);
  for (int64_t a : p) {
    if (a < 0 || a >= int64_t(p.size()) || seen[size_t(a)]) return false;
    seen[size_t(a)] = 1;
  }
  return true;
}

std::vector<int64_t> dims_of(const sdk::Value& v) {
  auto d = v.dims();
  return {d.begin(), d.end()};
}

bool static_f32(const sdk::Value& v) {
  return v.present() && v.dtype() == NXRT_DTYPE_FLOAT32 && v.static_shape();
}

// An operand (or the result) as dims and element strides over a group input (the output).
struct StridedView {
  ValueKey base = nullptr;  // the group input the operand reads (unused for the result)
  std::vector<int64_t> dims, strides;
};

struct ViewedMatMul {
  std::vector<size_t> nodes;  // view positions
  StridedView a, b, y;
  int transposes = 0;
  float alpha = 1.f;  // a Mul of the result by this power of two (attention's 1 / sqrt(64))
};

// +-2^e: scaling an operand by it scales the product exactly (short of under- or overflow).
bool power_of_two(float v) {
  int e = 0;
  return std::isnormal(v) && std::fabs(std::frexp(v, &e)) == 0.5f;
}

// The view position of the node producing v, if any.
std::optional<size_t> producer(const ViewIndex& ix, ValueKey v) {
  auto it = ix.producer.find(v);
  return it == ix.producer.end() ? std::nullopt : std::optional<size_t>(it->second);
}

// MatMul input `slot` as a view: through a Transpose whose only reader it is, and a Reshape
// whose only reader that Transpose is.
template <typename Ok>
bool operand_view(const sdk::Graph& g, const ViewIndex& ix, const Node& mm, size_t slot, Ok ok, ViewedMatMul& c,
                  StridedView& out) {
  sdk::Value v = mm.input(slot);
  if (!static_f32(v) || v.rank() < 2) return false;
  out.base = v.raw();
  out.dims = dims_of(v);
  out.strides = contiguous_strides(out.dims);
  auto tp = producer(ix, v.raw());
  if (!tp || !ok(*tp) || !sole_use(ix, v.raw())) return true;
  Node t = g.node(*tp);
  if (!is_op(t, "Transpose") || t.input_count() != 1 || !static_f32(t.input(0))) return true;
  sdk::Value x = t.input(0);
  const std::vector<int64_t> perm = perm_of(t, size_t(x.rank()));
  if (perm.size() != size_t(x.rank()) || !is_permutation(perm)) return true;
  std::vector<size_t> taken = {*tp};
  std::vector<int64_t> vd = dims_of(x);
  const nxrt_value* base = x.raw();
  auto rp = producer(ix, x.raw());
  if (rp && ok(*rp) && sole_use(ix, x.raw())) {
    Node r = g.node(*rp);
    if (is_op(r, "Reshape") && r.input_count() == 2 && static_f32(r.input(0)) && r.input(1).present() &&
        r.input(1).is_constant()) {
      taken.push_back(*rp);
      base = r.input(0).raw();
    }
  }
  const std::vector<int64_t> cs = contiguous_strides(vd);
  out.base = base;
  for (size_t j = 0; j < perm.size(); ++j) {
    out.dims[j] = vd[size_t(perm[j])];
    out.strides[j] = cs[size_t(perm[j])];
  }
  c.nodes.insert(c.nodes.end(), taken.begin(), taken.end());
  ++c.transposes;
  return true;
}

// A matrix view the GEMM reads: unit stride along its columns (plain) or rows (transposed).
bool gemm_readable(const StridedView& v) {
  const size_t r = v.dims.size();
  return v.strides[r - 1] == 1 || v.strides[r - 2] == 1;
}

template <typename Ok>
ViewedMatMul follow_viewed_matmul(const sdk::Graph& g, const ViewIndex& ix, size_t mm, Ok ok) {
  ViewedMatMul none, c;
  Node m = g.node(mm);
  if (!is_op(m, "MatMul") || m.input_count() != 2 || m.output_count() != 1 || !m.has_output(0)) return none;
  sdk::Value y = m.output(0);
  if (!static_f32(y) || y.rank() < 2) return none;
  if (!operand_view(g, ix, m, 0, ok, c, c.a) || !operand_view(g, ix, m, 1, ok, c, c.b)) return none;
  if (!gemm_readable(c.a) || !gemm_readable(c.b)) return none;
  c.nodes.push_back(mm);
  // The result: contiguous, or through Transpose [-> Reshape] into the last one's buffer.
  c.y.dims = dims_of(y);
  c.y.strides = contiguous_strides(c.y.dims);
  auto use = sole_use(ix, y.raw());
  if (use && ok(use->first)) {
    Node t = g.node(use->first);
    const std::vector<int64_t> perm = perm_of(t, size_t(y.rank()));
    if (is_op(t, "Transpose") && t.output_count() == 1 && t.has_output(0) && static_f32(t.output(0)) &&
        perm.size() == size_t(y.rank()) && is_permutation(perm)) {
      // y's axis perm[i] lands on the output's axis i.
      const std::vector<int64_t> os = contiguous_strides(dims_of(t.output(0)));
      std::vector<int64_t> ys(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) ys[size_t(perm[i])] = os[i];
      if (ys.back() == 1) {
        c.y.strides = ys;
        c.nodes.push_back(use->first);
        ++c.transposes;
        auto ru = sole_use(ix, t.output(0).raw());
        if (ru && ok(ru->first) && ru->second == 0) {
          Node r = g.node(ru->first);
          if (is_op(r, "Reshape") && r.input_count() == 2 && r.input(1).present() && r.input(1).is_constant() &&
              r.output_count() == 1 && r.has_output(0) && static_f32(r.output(0)))
            c.nodes.push_back(ru->first);
        }
      }
    }
  }
  if (c.transposes == 0) return none;
  // MatMul -> Mul(2^e) with the result left in place: the scale goes into A's packing.
  if (c.nodes.back() == mm && use && ok(use->first)) {
    Node mul = g.node(use->first);
    bool scalar_ok = true;
    const auto k = is_op(mul, "Mul") && mul.input_count() == 2 && mul.has_output(0) && static_f32(mul.output(0))
                       ? const_scalar(mul, 1 - use->second, scalar_ok)
                       : std::nullopt;
    if (k && scalar_ok && power_of_two(*k) && same_static_shape(mul.output(0), y)) {
      c.alpha = *k;
      c.nodes.push_back(use->first);
    }
  }
  // The batch dims must broadcast as MatMul's do into y's.
  const size_t rank = c.y.dims.size();
  for (const StridedView* v : {&c.a, &c.b}) {
    const size_t vr = v->dims.size();
    if (vr > rank) return none;
    for (size_t i = 0; i + 2 < vr; ++i) {
      const int64_t d = v->dims[i], yd = c.y.dims[rank - vr + i];
      if (d != yd && d != 1) return none;
    }
  }
  const int64_t M = c.a.dims[c.a.dims.size() - 2], K = c.a.dims.back(), N = c.b.dims.back();
  if (c.b.dims[c.b.dims.size() - 2] != K || c.y.dims[rank - 2] != M || c.y.dims[rank - 1] != N) return none;
  return c;
}

// Element offset of output batch `o` (over y's batch dims) in view v, broadcast dims at 0.
int64_t batch_offset(const StridedView& v, const std::vector<int64_t>& ybatch, int64_t o) {
  const size_t vb = v.dims.size() - 2;
  return gemm_batch_offset(std::span(v.dims).first(vb), std::span(v.strides).first(vb), ybatch, o);
}

}  // namespace

std::vector<size_t> follow_matmul_views(const sdk::Graph& g, const ViewIndex& ix, size_t mm,
                                        const std::function<bool(size_t)>& ok) {
  return follow_viewed_matmul(g, ix, mm, ok).nodes;
}

std::unique_ptr<Kernel> create_matmul_views_kernel(const sdk::Graph& sg, CpuSession& session) {
  std::optional<size_t> mm;
  bool viewed = false;
  for (size_t i = 0; i < sg.node_count(); ++i) {
    if (is_op(sg.node(i), "MatMul")) mm = i;
    if (is_op(sg.node(i), "Transpose")) viewed = true;
  }
  if (!mm || !viewed) return nullptr;
  const ViewIndex ix = index_view(sg);
  ViewedMatMul c = follow_viewed_matmul(sg, ix, *mm, [](size_t) { return true; });
  if (c.nodes.size() != sg.node_count())
    sdk::fail(NXRT_UNSUPPORTED, "group of {} nodes is not a MatMul with Transpose views this plugin fuses ({} on it)",
              sg.node_count(), c.nodes.size());
  if (sg.output_count() != 1)
    sdk::fail(NXRT_UNSUPPORTED, "fused MatMul view group must have exactly one output ({} outputs)", sg.output_count());
  const std::vector<int64_t> out_dims = dims_of(sg.output(0));
  const int a_in = group_input_index(sg, c.a.base), b_in = group_input_index(sg, c.b.base);
  ThreadPool* pool = session.pool();
  const std::string what = fmt::format("gemm {} through Transpose views (no transposed copies)", gemm_kernel_name());
  return make_kernel([c, a_in, b_in, out_dims, pool](Context& ctx) {
    ConstTensorView a = ctx.input(size_t(a_in)), b = ctx.input(size_t(b_in));
    // The views were computed from the static shapes: the tensors must have as many elements.
    if (a.numel() != sdk::element_count(c.a.dims) || b.numel() != sdk::element_count(c.b.dims))
      sdk::fail(NXRT_INVALID_ARGUMENT, "MatMul views: inputs of {} and {} elements, the model's shapes {} and {}",
                a.numel(), b.numel(), dims_str(c.a.dims), dims_str(c.b.dims));
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, out_dims);
    const size_t rank = c.y.dims.size();
    const std::vector<int64_t> ybatch(c.y.dims.begin(), c.y.dims.end() - 2);
    const int64_t M = c.y.dims[rank - 2], N = c.y.dims[rank - 1], K = c.a.dims.back();
    const int64_t nbatch = sdk::element_count(ybatch);
    if (nbatch == 0 || M == 0 || N == 0) return;
    float* yp = y.data<float>();
    if (K == 0) {
      std::fill(yp, yp + y.numel(), 0.f);
      return;
    }
    const size_t ar = c.a.dims.size(), br = c.b.dims.size();
    const bool a_trans = c.a.strides[ar - 1] != 1, b_trans = c.b.strides[br - 1] != 1;
    const int64_t lda = a_trans ? c.a.strides[ar - 1] : c.a.strides[ar - 2];
    const int64_t ldb = b_trans ? c.b.strides[br - 1] : c.b.strides[br - 2];
    const int64_t ldc = c.y.strides[rank - 2];
    const float* ap = a.data<float>();
    const float* bp = b.data<float>();
    auto one = [&](int64_t o, ThreadPool* p) {
      float* pb = scratch_floats(kScratchB, packed_b_floats(K, N));
      if (p) pack_b_parallel(bp + batch_offset(c.b, ybatch, o), ldb, b_trans, K, N, pb, p);
      else pack_b(bp + batch_offset(c.b, ybatch, o), ldb, b_trans, K, N, pb);
      gemm_pack_a_and_multiply(M, N, K, GemmPackA{ap + batch_offset(c.a, ybatch, o), lda, a_trans, c.alpha, false}, pb,
                               yp + batch_offset(c.y, ybatch, o), ldc, GemmEpilogue{}, p);
    };
    for_each_gemm_batch(pool, nbatch, double(M) * double(N) * double(K), one);
  }, what);
}

}  // namespace nxrt::cpu
