// Claims, output shapes and epilogue fusion of the CUDA plugin (ops.cpp), on IR graphs
// built by hand: no host, no device.
#include <doctest/doctest.h>

#include "ops.hpp"

#include <cstring>

using namespace nxrt::cuda;

namespace {

struct G {
  IrGraph g;
  int value(nxrt_dtype t, Shape dims) {
    IrValue v;
    v.dtype = t;
    v.rank = int64_t(dims.size());
    v.dims = dims;
    return g.add_value(v);
  }
  int ints(std::vector<int64_t> data) {
    IrValue v;
    v.dtype = NXRT_DTYPE_INT64;
    v.rank = 1;
    v.dims = {int64_t(data.size())};
    v.is_const = v.has_data = true;
    v.data.resize(data.size() * 8);
    std::memcpy(v.data.data(), data.data(), v.data.size());
    return g.add_value(v);
  }
  int scalar(float f) {
    IrValue v;
    v.dtype = NXRT_DTYPE_FLOAT32;
    v.rank = 0;
    v.is_const = v.has_data = true;
    v.data.resize(4);
    std::memcpy(v.data.data(), &f, 4);
    return g.add_value(v);
  }
  IrNode& node(std::string op, std::vector<int> in, std::vector<int> out, int64_t opset = 17) {
    IrNode n;
    n.op = std::move(op);
    n.opset = opset;
    n.index = g.nodes.size();
    n.in = std::move(in);
    n.out = std::move(out);
    g.nodes.push_back(n);
    return g.nodes.back();
  }
};

Attr ints_attr(std::vector<int64_t> v) {
  Attr a;
  a.type = NXRT_ATTR_INTS;
  a.ints = std::move(v);
  return a;
}
Attr int_attr(int64_t v) {
  Attr a;
  a.type = NXRT_ATTR_INT;
  a.i = v;
  return a;
}

constexpr auto F32 = NXRT_DTYPE_FLOAT32;
constexpr auto F16 = NXRT_DTYPE_FLOAT16;

}  // namespace

TEST_CASE("claims are exact: dtypes, attributes, ranks and constant inputs") {
  G t;
  int x = t.value(F32, {2, 3}), y = t.value(F32, {2, 3}), xi = t.value(NXRT_DTYPE_INT32, {2, 3}), yh = t.value(F16, {2, 3});
  CHECK_FALSE(check_node(t.g, t.node("Relu", {x}, {y})));
  auto r = check_node(t.g, t.node("Relu", {xi}, {xi}));
  REQUIRE(r);
  CHECK(r->reason == NXRT_REFUSE_DTYPE);
  r = check_node(t.g, t.node("Add", {x, yh}, {y}));
  REQUIRE(r);
  CHECK(r->reason == NXRT_REFUSE_DTYPE);  // mixed float32/float16
  CHECK_FALSE(check_node(t.g, t.node("Add", {yh, yh}, {yh})));

  int x4 = t.value(F32, {1, 3, 8, 8}), w = t.value(F32, {4, 3, 3, 3}), o4 = t.value(F32, {1, 4, 8, 8});
  CHECK_FALSE(check_node(t.g, t.node("Conv", {x4, w}, {o4})));
  int x5 = t.value(F32, {1, 3, 4, 8, 8}), w5 = t.value(F32, {4, 3, 3, 3, 3});
  r = check_node(t.g, t.node("Conv", {x5, w5}, {o4}));
  REQUIRE(r);
  CHECK(r->reason == NXRT_REFUSE_SHAPE);
  IrNode& c = t.node("Conv", {x4, w}, {o4});
  c.attrs["auto_pad"].s = "SAME_UPPER";
  c.attrs["auto_pad"].type = NXRT_ATTR_STRING;
  r = check_node(t.g, c);
  REQUIRE(r);
  CHECK(r->reason == NXRT_REFUSE_ATTRIBUTE);

  IrNode& mp = t.node("MaxPool", {x4}, {o4});
  mp.attrs["kernel_shape"] = ints_attr({2, 2});
  CHECK_FALSE(check_node(t.g, mp));
  mp.attrs["ceil_mode"] = int_attr(1);
  CHECK(check_node(t.g, mp)->reason == NXRT_REFUSE_ATTRIBUTE);

  IrNode& sm = t.node("Softmax", {x}, {y}, 13);
  sm.attrs["axis"] = int_attr(0);
  CHECK(check_node(t.g, sm)->reason == NXRT_REFUSE_ATTRIBUTE);
  sm.attrs["axis"] = int_attr(1);
  CHECK_FALSE(check_node(t.g, sm));

  int dyn_shape = t.value(NXRT_DTYPE_INT64, {2});
  CHECK(check_node(t.g, t.node("Reshape", {x, dyn_shape}, {y})));
  CHECK_FALSE(check_node(t.g, t.node("Reshape", {x, t.ints({3, 2})}, {y})));
  CHECK(check_node(t.g, t.node("NonZero", {x}, {y}))->reason == NXRT_REFUSE_OP);
  CHECK(check_node(t.g, t.node("Clip", {x, t.value(F32, {})}, {y}))->reason == NXRT_REFUSE_OTHER);  // runtime bound
  CHECK_FALSE(check_node(t.g, t.node("Clip", {x, t.scalar(0.f), t.scalar(6.f)}, {y})));
}

TEST_CASE("output shapes") {
  G t;
  int any = t.value(F32, {});
  auto shape = [&](const char* op, std::vector<int> in, std::vector<Shape> shapes, int64_t opset = 17) {
    IrNode& n = t.node(op, in, {any}, opset);
    return std::pair<IrNode*, std::vector<Shape>>{&n, shapes};
  };
  {
    auto [n, s] = shape("Reshape", {any, t.ints({0, -1, 4})}, {{2, 3, 8}, {3}});
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{2, 6, 4});
  }
  {
    auto [n, s] = shape("Reshape", {any, t.ints({5, -1})}, {{2, 3, 8}, {2}});
    CHECK_THROWS(infer_shapes(t.g, *n, s));  // 48 elements do not split by 5
  }
  {
    auto [n, s] = shape("MatMul", {any, any}, {{2, 1, 4, 5}, {3, 5, 6}});
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{2, 3, 4, 6});
  }
  {
    auto [n, s] = shape("MatMul", {any, any}, {{4, 5}, {4, 6}});
    CHECK_THROWS(infer_shapes(t.g, *n, s));
  }
  {
    auto [n, s] = shape("Gemm", {any, any, any}, {{64, 1024}, {4096, 1024}, {4096}});
    n->attrs["transB"] = int_attr(1);
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{64, 4096});
  }
  {
    auto [n, s] = shape("Conv", {any, any}, {{1, 3, 224, 224}, {64, 3, 7, 7}});
    n->attrs["strides"] = ints_attr({2, 2});
    n->attrs["pads"] = ints_attr({3, 3, 3, 3});
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{1, 64, 112, 112});
  }
  {
    auto [n, s] = shape("Conv", {any, any}, {{1, 96, 56, 56}, {96, 1, 3, 3}});  // depthwise
    n->attrs["group"] = int_attr(96);
    n->attrs["pads"] = ints_attr({1, 1, 1, 1});
    n->attrs["strides"] = ints_attr({2, 2});
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{1, 96, 28, 28});
  }
  {
    auto [n, s] = shape("Concat", {any, any}, {{2, 3}, {2, 5}});
    n->attrs["axis"] = int_attr(-1);
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{2, 8});
  }
  {
    auto [n, s] = shape("Gather", {any, any}, {{5, 4, 3}, {2, 7}});
    n->attrs["axis"] = int_attr(1);
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{5, 2, 7, 3});
  }
  {
    auto [n, s] = shape("Slice", {any, t.ints({-1, 1}), t.ints({-100, 10}), t.ints({0, 1}), t.ints({-2, 3})}, {{7, 10}, {}, {}, {}, {}});
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{4, 3});  // rows 6,4,2,0; cols 1,4,7
    const SliceAxes p = slice_params(t.g, *n, {7, 10});
    CHECK(p.start == std::vector<int64_t>{6, 1});
    CHECK(p.step == std::vector<int64_t>{-2, 3});
  }
  {
    auto [n, s] = shape("Unsqueeze", {any, t.ints({0, -1})}, {{3, 4}, {2}}, 13);
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{1, 3, 4, 1});
  }
  {
    auto [n, s] = shape("Squeeze", {any}, {{1, 3, 1, 4}}, 13);
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{3, 4});
  }
  {
    auto [n, s] = shape("ReduceMean", {any}, {{2, 3, 4}}, 17);
    n->attrs["axes"] = ints_attr({-1, 0});
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{1, 3, 1});
    n->attrs["keepdims"] = int_attr(0);
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{3});
  }
  {
    auto [n, s] = shape("Transpose", {any}, {{1, 128, 12, 64}});
    n->attrs["perm"] = ints_attr({0, 2, 3, 1});
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{1, 12, 64, 128});
  }
  {
    auto [n, s] = shape("Add", {any, any}, {{2, 1, 4}, {3, 1}});
    CHECK(infer_shapes(t.g, *n, s)[0] == Shape{2, 3, 4});
  }
  CHECK_THROWS(broadcast_shapes({2, 3}, {4, 3}, "Add"));
}

TEST_CASE("activations fold into their producer only when nothing else reads the raw value") {
  G t;
  int x = t.value(F32, {1, 3, 8, 8}), w = t.value(F32, {4, 3, 3, 3}), c = t.value(F32, {1, 4, 8, 8}), r = t.value(F32, {1, 4, 8, 8});
  int lo = t.scalar(0.f), hi = t.scalar(6.f), c2 = t.value(F32, {1, 4, 8, 8}), r2 = t.value(F32, {1, 4, 8, 8});
  t.node("Conv", {x, w}, {c});
  t.node("Relu", {c}, {r});
  t.node("Conv", {r, w}, {c2});  // (shapes do not matter here)
  t.node("Clip", {c2, lo, hi}, {r2});
  t.g.outputs = {r2};
  t.g.values[size_t(r2)].group_output = 0;
  CHECK(fuse_epilogues(t.g) == 2);
  CHECK(t.g.nodes[0].epilogue.op == nxrt::cuda::math::Unary::Relu);
  CHECK(t.g.nodes[0].out[0] == r);
  CHECK(t.g.nodes[1].fused_away);
  CHECK(t.g.nodes[2].epilogue.op == nxrt::cuda::math::Unary::Clip);
  CHECK(t.g.nodes[2].epilogue.beta == 6.f);
  CHECK(t.g.nodes[2].out[0] == r2);

  G u;  // the Conv's raw output is a group output too: no folding
  x = u.value(F32, {1, 3, 8, 8}), w = u.value(F32, {4, 3, 3, 3}), c = u.value(F32, {1, 4, 8, 8}), r = u.value(F32, {1, 4, 8, 8});
  u.node("Conv", {x, w}, {c});
  u.node("Relu", {c}, {r});
  u.g.values[size_t(c)].group_output = 0;
  CHECK(fuse_epilogues(u.g) == 0);

  G v;  // two readers of the raw value: no folding
  x = v.value(F32, {4}), c = v.value(F32, {4}), r = v.value(F32, {4});
  int s = v.value(F32, {4});
  v.node("Add", {x, x}, {c});
  v.node("Relu", {c}, {r});
  v.node("Sigmoid", {c}, {s});
  CHECK(fuse_epilogues(v.g) == 0);
}

namespace {
std::vector<int64_t> unravel_dims(int64_t i, const Shape& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    idx[k] = i % dims[k];
    i /= dims[k];
  }
  return idx;
}
int64_t ravel_dims(const std::vector<int64_t>& idx, const Shape& dims) {
  int64_t r = 0;
  for (size_t k = 0; k < dims.size(); ++k) r = r * dims[k] + idx[k];
  return r;
}
}  // namespace

TEST_CASE("slice views read x[start + j*step] on every axis, negative steps included") {
  G t;
  int any = t.value(F32, {});
  IrNode& n = t.node("Slice", {any, t.ints({5, 1, -1}), t.ints({-100, 100, 0}), t.ints({0, 2, 1}), t.ints({-2, 3, -1})}, {any});
  const Shape x = {7, 6, 10};
  const SliceAxes s = slice_params(t.g, n, x);
  // axis 0: 5,3,1 (end -100 clamps to before the start); axis 1: 5,4,3,2,1 (start -1, end 0 excluded);
  // axis 2: 1,4,7 (end 100 clamps to 10)
  CHECK(s.size == Shape{3, 5, 3});
  const CopyView v = slice_view(x, s);
  REQUIRE(v.count == 3 * 5 * 3);
  for (int64_t i = 0; i < v.count; ++i) {
    auto o = unravel_dims(i, s.size);
    std::vector<int64_t> src(3);
    for (size_t a = 0; a < 3; ++a) src[a] = s.start[a] + o[a] * s.step[a];
    REQUIRE(v.src_base + nxrt::cuda::math::offset_of(i, v.src) == ravel_dims(src, x));
    REQUIRE(v.dst_base + nxrt::cuda::math::offset_of(i, v.dst) == i);
  }
}

TEST_CASE("concat views place each input at its offset along the axis") {
  const std::vector<Shape> ins = {{2, 1, 3}, {}, {2, 4, 3}, {2, 2, 3}};
  const std::vector<bool> present = {true, false, true, true};
  const Shape y = {2, 7, 3};
  auto views = concat_views(ins, present, 1, y);
  REQUIRE(views.size() == 3);
  std::vector<int> written(42, 0);
  int64_t at = 0;
  size_t k = 0;
  for (size_t in = 0; in < ins.size(); ++in) {
    if (!present[in]) continue;
    const CopyView& v = views[k++];
    for (int64_t i = 0; i < v.count; ++i) {
      auto idx = unravel_dims(i, ins[in]);
      REQUIRE(v.src_base + nxrt::cuda::math::offset_of(i, v.src) == i);
      std::vector<int64_t> out = idx;
      out[1] += at;
      const int64_t d = v.dst_base + nxrt::cuda::math::offset_of(i, v.dst);
      REQUIRE(d == ravel_dims(out, y));
      ++written[size_t(d)];
    }
    at += ins[in][1];
  }
  for (int w : written) REQUIRE(w == 1);  // every output element written exactly once
}

TEST_CASE("reduce views enumerate, for each output element, exactly its reduced inputs") {
  const Shape x = {2, 3, 4, 5};
  for (const auto& axes : {std::vector<int64_t>{1}, std::vector<int64_t>{0, 3}, std::vector<int64_t>{1, 2, 3}}) {
    const ReduceView r = reduce_view(x, axes);
    int64_t n_out = 1;
    for (int i = 0; i < r.outer.rank; ++i) n_out *= r.outer.dims[i];
    std::vector<int> seen(120, 0);
    for (int64_t o = 0; o < n_out; ++o) {
      const int64_t base = nxrt::cuda::math::offset_of(o, r.outer);
      auto kept = unravel_dims(base, x);
      for (int64_t j = 0; j < r.n_inner; ++j) {
        const int64_t e = base + nxrt::cuda::math::offset_of(j, r.inner);
        auto idx = unravel_dims(e, x);
        for (size_t a = 0; a < 4; ++a)
          if (std::find(axes.begin(), axes.end(), int64_t(a)) == axes.end()) REQUIRE(idx[a] == kept[a]);
        ++seen[size_t(e)];
      }
    }
    for (int s : seen) REQUIRE(s == 1);
  }
}

TEST_CASE("matmul plans: strided batches with broadcast sides, per-matrix offsets otherwise") {
  struct Case {
    Shape a, b;
    bool strided;
  };
  for (const Case& c : {Case{{1, 12, 128, 64}, {1, 12, 64, 128}, true}, Case{{1, 128, 768}, {768, 768}, true},
                        Case{{4, 5}, {3, 5, 6}, true}, Case{{3, 1, 4, 5}, {1, 2, 5, 6}, false}, Case{{2, 3, 4, 5}, {3, 5, 6}, false}}) {
    const MatmulPlan p = matmul_plan(c.a, c.b);
    CHECK(p.strided == c.strided);
    const Shape ab(c.a.begin(), c.a.end() - 2), bb(c.b.begin(), c.b.end() - 2), yb = broadcast_shapes(ab, bb, "MatMul");
    // Reference: output matrix i reads a's and b's matrices at its broadcast multi-index.
    for (int64_t i = 0; i < p.batch; ++i) {
      auto oi = unravel_dims(i, yb);
      auto pick = [&](const Shape& side) {
        std::vector<int64_t> idx(side.size());
        for (size_t k = 0; k < side.size(); ++k) idx[k] = side[k] == 1 ? 0 : oi[k + yb.size() - side.size()];
        return side.empty() ? int64_t(0) : ravel_dims(idx, side);
      };
      const int64_t a_off = p.strided ? i * p.stride_a : p.offsets[size_t(i)].first;
      const int64_t b_off = p.strided ? i * p.stride_b : p.offsets[size_t(i)].second;
      REQUIRE(a_off == pick(ab) * p.m * p.k);
      REQUIRE(b_off == pick(bb) * p.k * p.n);
    }
  }
}

TEST_CASE("conv geometry from attributes agrees with the output shape") {
  G t;
  int any = t.value(F32, {});
  IrNode& n = t.node("Conv", {any, any}, {any});
  n.attrs["strides"] = ints_attr({2, 1});
  n.attrs["pads"] = ints_attr({1, 0, 2, 1});
  n.attrs["dilations"] = ints_attr({1, 2});
  const Shape x = {1, 3, 9, 8}, w = {4, 3, 3, 2};
  const Shape y = infer_shapes(t.g, n, {x, w})[0];
  const nxrt::cuda::math::Conv2d c = conv_geometry(n, x, y, w[2], w[3]);
  CHECK(c.oh == nxrt::cuda::math::conv_out_size(c.h, c.kh, c.sh, c.ph, c.peh, c.dh));
  CHECK(c.ow == nxrt::cuda::math::conv_out_size(c.w, c.kw, c.sw, c.pw, c.pew, c.dw));
  CHECK(y == Shape{1, 4, 5, 7});  // (9+1+2-2-1)/2+1 = 5, (8+0+1-2-1)/1+1 = 7
  CHECK(c.peh == 2);
  CHECK(c.dw == 2);
}
