// Unit tests of the Vulkan core on whatever device is present (lavapipe in
// CI), with the Khronos validation layer when NXRT_VULKAN_VALIDATION=1 (set
// by ctest): every test ends by asserting zero validation messages.
#include "doctest_skip.hpp"

#include "program.hpp"
#include "run_registry.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <thread>

using namespace nxrt::vk;

namespace {

bool have_device() { return !Instance::get().devices().empty(); }
std::string no_device() { return "no Vulkan device: " + Instance::get().reason(); }
const char* const kNoTimestamps = "the device has no timestamp queries on its compute queue: device profiling not tested";
const char* const kNoFp16 = "the device lacks storageBuffer16BitAccess: float16 kernels not tested";

Device& device() {
  static Device d(0);
  return d;
}

void no_validation_messages() { CHECK(Instance::message_count().load() == 0); }

std::vector<float> randv(size_t n, float lo = -1.f, float hi = 1.f, unsigned seed = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
int64_t numel(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<>()); }
std::vector<uint16_t> to_half(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_half(v[i]);
  return h;
}
// The values a float16 tensor holds: v rounded to half and widened back.
std::vector<float> rounded(std::vector<float> v) {
  for (auto& x : v) x = round_to_half(x);
  return v;
}

// A device tensor owning its allocation.
struct DT {
  Alloc* a = nullptr;
  Shape dims;
  nxrt_dtype dt = NXRT_DTYPE_FLOAT32;
  DT() = default;
  DT(const void* data, Shape d, nxrt_dtype t = NXRT_DTYPE_FLOAT32) : dims(std::move(d)), dt(t) {
    size_t bytes = size_t(numel(dims)) * nxrt::sdk::dtype_size(t);
    a = device().alloc(bytes, false);
    CopyOp op{{nullptr, (char*)data, 0}, {a, nullptr, 0}, bytes};
    copy(device(), std::span(&op, 1), nullptr);
  }
  Loc loc() const { return Loc{a, 0, uint64_t(numel(dims)) * nxrt::sdk::dtype_size(dt)}; }
};

// Builds a graph, runs it, returns the outputs.
struct G {
  IrGraph g;
  std::vector<DT> inputs;
  struct Out { Alloc* a; Shape dims; nxrt_dtype dt; };
  std::vector<Out> outs;
  // A float input; float16 uploads v rounded to half.
  int input(const std::vector<float>& v, Shape d, nxrt_dtype t = NXRT_DTYPE_FLOAT32) {
    IrValue iv;
    iv.name = "in" + std::to_string(g.inputs.size());
    iv.dtype = t;
    iv.rank = int64_t(d.size());
    iv.dims = d;
    int id = g.add_value(iv);
    g.inputs.push_back(id);
    if (t == NXRT_DTYPE_FLOAT16) {
      auto h = to_half(v);
      inputs.emplace_back(h.data(), d, t);
    } else {
      inputs.emplace_back(v.data(), d);
    }
    return id;
  }
  // A constant that is also bound as an input (Clip bounds, shapes, axes): count
  // elements of type t at data.
  int constant(const void* data, size_t count, nxrt_dtype t) {
    IrValue iv;
    iv.name = "c" + std::to_string(g.values.size());
    iv.dtype = t;
    iv.rank = 1;
    iv.dims = {int64_t(count)};
    iv.is_const = iv.has_data = true;
    iv.data.dtype = t;
    iv.data.dims = iv.dims;
    const size_t bytes = count * nxrt::sdk::dtype_size(t);
    iv.data.bytes.resize(bytes);
    std::memcpy(iv.data.bytes.data(), data, bytes);
    int id = g.add_value(iv);
    g.inputs.push_back(id);
    inputs.emplace_back(data, iv.dims, t);
    return id;
  }
  int const_f16(const std::vector<float>& v) {
    auto h = to_half(v);
    return constant(h.data(), h.size(), NXRT_DTYPE_FLOAT16);
  }
  int const_f32(const std::vector<float>& v) { return constant(v.data(), v.size(), NXRT_DTYPE_FLOAT32); }
  int const_i64(const std::vector<int64_t>& v) { return constant(v.data(), v.size(), NXRT_DTYPE_INT64); }
  int const_i32(const std::vector<int32_t>& v) {  // Gather indices
    IrValue iv;
    iv.name = "c" + std::to_string(g.values.size());
    iv.dtype = NXRT_DTYPE_INT32;
    iv.rank = 1;
    iv.dims = {int64_t(v.size())};
    int id = g.add_value(iv);
    g.inputs.push_back(id);
    inputs.emplace_back(v.data(), iv.dims, NXRT_DTYPE_INT32);
    return id;
  }
  int node(const std::string& op, std::vector<int> in, std::map<std::string, Attr> attrs = {}, int64_t opset = 17,
           nxrt_dtype out_dt = NXRT_DTYPE_FLOAT32) {
    IrValue ov;
    ov.name = op + std::to_string(g.values.size());
    ov.dtype = out_dt;
    int o = g.add_value(ov);
    IrNode n;
    n.op = op;
    n.opset = opset;
    n.in = std::move(in);
    n.out = {o};
    n.attrs = std::move(attrs);
    n.index = g.nodes.size();
    g.nodes.push_back(n);
    return o;
  }
  std::vector<std::vector<float>> run(std::vector<int> outputs, int times = 1, Program** keep = nullptr) {
    g.outputs = outputs;
    DeviceLimits lim;
    lim.storage16 = device().info().storage16;
    for (auto& n : g.nodes) {
      auto r = check_node(g, n, lim);
      if (r) FAIL("refused: " << r->message);
    }
    static std::vector<std::unique_ptr<Program>> programs;
    programs.push_back(std::make_unique<Program>(device(), g));
    Program& p = *programs.back();
    if (keep) *keep = &p;
    std::vector<Program::Input> in;
    for (auto& t : inputs) in.push_back({t.loc(), t.dims});
    Stream s(device());
    for (int t = 0; t < times; ++t) {
      for (auto& o : outs) device().free(o.a);
      outs.clear();
      p.run(in, [&](size_t, nxrt_dtype dt, const Shape& d) {
        uint64_t bytes = uint64_t(numel(d)) * nxrt::sdk::dtype_size(dt);
        Alloc* a = device().alloc(bytes, false);
        outs.push_back({a, d, dt});
        return Loc{a, 0, bytes};
      }, s);
      s.synchronize();
    }
    std::vector<std::vector<float>> res;
    for (auto& o : outs) {
      std::vector<float> h(size_t(numel(o.dims)));
      if (o.dt == NXRT_DTYPE_FLOAT16) {  // widened to float
        std::vector<uint16_t> hh(h.size());
        CopyOp op{{o.a, nullptr, 0}, {nullptr, (char*)hh.data(), 0}, hh.size() * 2};
        copy(device(), std::span(&op, 1), nullptr);
        for (size_t i = 0; i < h.size(); ++i) h[i] = half_to_float(hh[i]);
      } else {
        CopyOp op{{o.a, nullptr, 0}, {nullptr, (char*)h.data(), 0}, h.size() * 4};
        copy(device(), std::span(&op, 1), nullptr);
      }
      res.push_back(h);
    }
    return res;
  }
  ~G() {
    for (auto& t : inputs) device().free(t.a);
    for (auto& o : outs) device().free(o.a);
  }
};

Attr ai(int64_t v) { Attr a; a.type = NXRT_ATTR_INT; a.i = v; return a; }
Attr af(float v) { Attr a; a.type = NXRT_ATTR_FLOAT; a.f = v; return a; }
Attr ais(std::vector<int64_t> v) { Attr a; a.type = NXRT_ATTR_INTS; a.ints = std::move(v); return a; }

void close(const std::vector<float>& got, const std::vector<float>& want, float rtol = 1e-4f, float atol = 1e-5f) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      if (bad++ < 5) MESSAGE("mismatch at " << i << ": got " << got[i] << " want " << want[i]);
    }
  CHECK(bad == 0);
}

// CPU references.
std::vector<float> ref_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t batch, int64_t M, int64_t K,
                              int64_t N, bool b_shared) {
  std::vector<float> c(size_t(batch * M * N));
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += double(a[size_t(z * M * K + i * K + k)]) * b[size_t((b_shared ? 0 : z) * K * N + k * N + j)];
        c[size_t(z * M * N + i * N + j)] = float(s);
      }
  return c;
}
std::vector<float> ref_conv(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* bias, int64_t N,
                            int64_t C, int64_t H, int64_t W, int64_t Co, int64_t kh, int64_t kw, int64_t s, int64_t p, int64_t grp,
                            int64_t& OH, int64_t& OW) {
  OH = (H + 2 * p - kh) / s + 1;
  OW = (W + 2 * p - kw) / s + 1;
  int64_t cg = C / grp, og = Co / grp;
  std::vector<float> y(size_t(N * Co * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Co; ++co)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = bias ? (*bias)[size_t(co)] : 0.0;
          int64_t g = co / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t h = oh * s - p + i, ww = ow * s - p + j;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                acc += double(x[size_t(((n * C + g * cg + ci) * H + h) * W + ww)]) * w[size_t(((co * cg + ci) * kh + i) * kw + j)];
              }
          y[size_t(((n * Co + co) * OH + oh) * OW + ow)] = float(acc);
        }
  return y;
}

}  // namespace

TEST_CASE("instance and device properties") {
  auto& inst = Instance::get();
  if (!have_device()) {
    CHECK(!inst.reason().empty());  // the one thing checkable without a device: it says why
    NXRT_SKIP_CASE(no_device());
  }
  auto& d = inst.devices()[0];
  CHECK(d.subgroup_size > 0);
  CHECK(d.timeline);
  CHECK(!d.properties.empty());
  if (std::getenv("NXRT_VULKAN_VALIDATION")) CHECK(inst.validation());
  MESSAGE("device: " << d.props.deviceName << " (" << d.driver << "), subgroup " << d.subgroup_size);
  device();
  no_validation_messages();
}

TEST_CASE("arena sub-allocation and copy round trips") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  Device& d = device();
  uint64_t before = d.bytes_in_use();
  std::vector<Alloc*> v;
  for (int i = 0; i < 50; ++i) v.push_back(d.alloc(1000 + uint64_t(i) * 4096, false));
  Alloc* big = d.alloc(40ull << 20, false);  // dedicated block
  for (size_t i = 0; i < v.size(); i += 2) d.free(v[i]);
  for (size_t i = 0; i < v.size(); i += 2) v[i] = d.alloc(1000, false);
  // Round trip through device, device->device, pinned, with and without a stream.
  auto h = randv(100000);
  std::vector<float> back(h.size());
  Alloc* a = d.alloc(h.size() * 4, false);
  Alloc* b = d.alloc(h.size() * 4 + 512, false);
  Alloc* pin = d.alloc(h.size() * 4, true);
  Stream s(d);
  for (Stream* st : {(Stream*)nullptr, &s}) {
    std::fill(back.begin(), back.end(), 0.f);
    CopyOp ops1[] = {{{nullptr, (char*)h.data(), 0}, {a, nullptr, 0}, h.size() * 4}};
    copy(d, ops1, st);
    CopyOp ops2[] = {{{a, nullptr, 0}, {b, nullptr, 256}, h.size() * 4}};
    copy(d, ops2, st);
    CopyOp ops3[] = {{{b, nullptr, 256}, {nullptr, pin->mapped, 0}, h.size() * 4}};
    copy(d, ops3, st);
    if (st) st->synchronize();
    std::memcpy(back.data(), pin->mapped, h.size() * 4);
    CHECK(back == h);
    CopyOp ops4[] = {{{nullptr, pin->mapped, 0}, {a, nullptr, 0}, h.size() * 4}, {{a, nullptr, 0}, {nullptr, (char*)back.data(), 0}, 16}};
    copy(d, std::span(ops4, 1), st);
    copy(d, std::span(ops4 + 1, 1), st);
    CHECK(back[3] == h[3]);
  }
  CHECK(d.find_pinned(pin->mapped + 100) == pin);
  for (auto* x : v) d.free(x);
  d.free(big);
  d.free(a);
  d.free(b);
  d.free(pin);
  CHECK(d.bytes_in_use() == before);
  no_validation_messages();
}

TEST_CASE("streams and events order work across streams") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  Device& d = device();
  auto h = randv(4096);
  Alloc* a = d.alloc(h.size() * 4, false);
  Alloc* b = d.alloc(h.size() * 4, false);
  Stream s1(d), s2(d);
  Event e;
  CopyOp up[] = {{{nullptr, (char*)h.data(), 0}, {a, nullptr, 0}, h.size() * 4}};
  copy(d, up, &s1);
  e.record(s1);
  e.wait_on(s2);
  CopyOp dd[] = {{{a, nullptr, 0}, {b, nullptr, 0}, h.size() * 4}};
  // Force the GPU path: a device->device copy on a stream with a pending wait.
  copy(d, dd, &s2);
  s2.synchronize();
  e.synchronize();
  std::vector<float> back(h.size());
  CopyOp down[] = {{{b, nullptr, 0}, {nullptr, (char*)back.data(), 0}, h.size() * 4}};
  copy(d, down, nullptr);
  CHECK(back == h);
  d.free(a);
  d.free(b);
  no_validation_messages();
}

TEST_CASE("elementwise: unary and broadcasting binary") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  G g;
  auto x = randv(2 * 3 * 4 * 5, -3, 3, 2), y = randv(3 * 1 * 5, 0.5f, 2, 3);
  int a = g.input(x, {2, 3, 4, 5}), b = g.input(y, {3, 1, 5});
  int add = g.node("Add", {a, b}), mul = g.node("Mul", {a, b}), dv = g.node("Div", {a, b}), sub = g.node("Sub", {b, a});
  int relu = g.node("Relu", {a}), erf = g.node("Erf", {a}), sig = g.node("Sigmoid", {a}), th = g.node("Tanh", {a});
  int pw = g.node("Pow", {b, a}), mx = g.node("Max", {a, b});
  auto r = g.run({add, mul, dv, sub, relu, erf, sig, th, pw, mx});
  std::vector<std::vector<float>> want(10, std::vector<float>(x.size()));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 5; ++l) {
          size_t o = size_t(((i * 3 + j) * 4 + k) * 5 + l);
          float u = x[o], v = y[size_t(j * 5 + l)];
          float vals[] = {u + v, u * v, u / v, v - u, std::max(u, 0.f), std::erf(u), 1 / (1 + std::exp(-u)), std::tanh(u),
                          std::pow(v, u), std::max(u, v)};
          for (int t = 0; t < 10; ++t) want[size_t(t)][o] = vals[t];
        }
  for (int t = 0; t < 10; ++t) {
    CAPTURE(t);
    close(r[size_t(t)], want[size_t(t)], 1e-4f, 1e-6f);
  }
  no_validation_messages();
}

TEST_CASE("matmul: batched, broadcast B, gemm with bias and transB") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  for (auto [M, K, N] : {std::tuple{5, 7, 3}, {64, 96, 80}, {130, 33, 70}, {1, 512, 100}}) {
    G g;
    auto a = randv(size_t(2 * 3 * M * K), -1, 1, 4), b = randv(size_t(K * N), -1, 1, 5);
    int ia = g.input(a, {2, 3, M, K}), ib = g.input(b, {K, N});
    int mm = g.node("MatMul", {ia, ib});
    auto r = g.run({mm});
    close(r[0], ref_matmul(a, b, 6, M, K, N, true), 1e-4f, 1e-4f);
  }
  {
    G g;  // batched both sides (attention-like)
    auto a = randv(2 * 4 * 16 * 8, -1, 1, 6), b = randv(2 * 4 * 8 * 16, -1, 1, 7);
    int ia = g.input(a, {2, 4, 16, 8}), ib = g.input(b, {2, 4, 8, 16});
    auto r = g.run({g.node("MatMul", {ia, ib})});
    close(r[0], ref_matmul(a, b, 8, 16, 8, 16, false), 1e-4f, 1e-5f);
  }
  {
    G g;  // Gemm transB with a row bias, alpha/beta
    int64_t M = 9, K = 20, N = 70;
    auto a = randv(size_t(M * K), -1, 1, 8), bt = randv(size_t(N * K), -1, 1, 9), c = randv(size_t(N), -1, 1, 10);
    int ia = g.input(a, {M, K}), ib = g.input(bt, {N, K}), ic = g.input(c, {N});
    auto r = g.run({g.node("Gemm", {ia, ib, ic}, {{"transB", ai(1)}, {"alpha", af(0.5f)}, {"beta", af(2.f)}})});
    std::vector<float> b(size_t(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) b[size_t(k * N + n)] = bt[size_t(n * K + k)];
    auto w = ref_matmul(a, b, 1, M, K, N, true);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) w[size_t(m * N + n)] = 0.5f * w[size_t(m * N + n)] + 2.f * c[size_t(n)];
    close(r[0], w, 1e-4f, 1e-5f);
  }
  no_validation_messages();
}

TEST_CASE("conv: dense (implicit GEMM), grouped, depthwise") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  struct Case { int64_t N, C, H, W, Co, k, s, p, grp; };
  for (auto cs : {Case{1, 3, 17, 15, 32, 3, 2, 1, 1}, Case{2, 16, 9, 9, 32, 3, 1, 1, 1}, Case{1, 8, 10, 10, 8, 3, 1, 1, 8},
                  Case{1, 8, 7, 7, 16, 1, 1, 0, 2}, Case{1, 32, 8, 8, 64, 3, 1, 1, 2}}) {
    CAPTURE(cs.C);
    CAPTURE(cs.grp);
    G g;
    auto x = randv(size_t(cs.N * cs.C * cs.H * cs.W), -1, 1, 11);
    auto w = randv(size_t(cs.Co * cs.C / cs.grp * cs.k * cs.k), -1, 1, 12);
    auto b = randv(size_t(cs.Co), -1, 1, 13);
    int ix = g.input(x, {cs.N, cs.C, cs.H, cs.W}), iw = g.input(w, {cs.Co, cs.C / cs.grp, cs.k, cs.k}), ib = g.input(b, {cs.Co});
    int y = g.node("Conv", {ix, iw, ib}, {{"kernel_shape", ais({cs.k, cs.k})}, {"strides", ais({cs.s, cs.s})},
                                          {"pads", ais({cs.p, cs.p, cs.p, cs.p})}, {"group", ai(cs.grp)}});
    auto r = g.run({y});
    int64_t OH, OW;
    close(r[0], ref_conv(x, w, &b, cs.N, cs.C, cs.H, cs.W, cs.Co, cs.k, cs.k, cs.s, cs.p, cs.grp, OH, OW), 1e-4f, 1e-4f);
  }
  no_validation_messages();
}

TEST_CASE("pooling, batchnorm, softmax, layernorm, reduce") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  G g;
  auto x = randv(2 * 3 * 6 * 6, -2, 2, 14);
  auto sc = randv(3, 0.5f, 1.5f, 15), bi = randv(3, -1, 1, 16), mean = randv(3, -1, 1, 17), var = randv(3, 0.1f, 2, 18);
  int ix = g.input(x, {2, 3, 6, 6});
  int is = g.input(sc, {3}), ib = g.input(bi, {3}), im = g.input(mean, {3}), iv = g.input(var, {3});
  int mp = g.node("MaxPool", {ix}, {{"kernel_shape", ais({3, 3})}, {"strides", ais({2, 2})}, {"pads", ais({1, 1, 1, 1})}});
  int ap = g.node("AveragePool", {ix}, {{"kernel_shape", ais({2, 2})}, {"strides", ais({2, 2})}});
  int gap = g.node("GlobalAveragePool", {ix});
  int bn = g.node("BatchNormalization", {ix, is, ib, im, iv}, {{"epsilon", af(1e-3f)}});
  int sm = g.node("Softmax", {ix}, {{"axis", ai(1)}});
  int ln_s = g.input(randv(36, 0.5f, 1.5f, 19), {6, 6}), ln_b = g.input(randv(36, -1, 1, 20), {6, 6});
  int ln = g.node("LayerNormalization", {ix, ln_s, ln_b}, {{"axis", ai(2)}});
  int rm = g.node("ReduceMean", {ix}, {{"axes", ais({2, 3})}, {"keepdims", ai(0)}}, 13);
  auto r = g.run({mp, ap, gap, bn, sm, ln, rm});
  auto X = [&](int n, int c, int h, int w) { return x[size_t(((n * 3 + c) * 6 + h) * 6 + w)]; };
  std::vector<float> wmp, wap, wgap, wbn(x.size()), wsm(x.size()), wln(x.size()), wrm;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c) {
      for (int oh = 0; oh < 3; ++oh)
        for (int ow = 0; ow < 3; ++ow) {
          float m = -1e30f;
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              int h = oh * 2 - 1 + i, w = ow * 2 - 1 + j;
              if (h >= 0 && h < 6 && w >= 0 && w < 6) m = std::max(m, X(n, c, h, w));
            }
          wmp.push_back(m);
          wap.push_back((X(n, c, oh * 2, ow * 2) + X(n, c, oh * 2 + 1, ow * 2) + X(n, c, oh * 2, ow * 2 + 1) + X(n, c, oh * 2 + 1, ow * 2 + 1)) / 4);
        }
      double s = 0;
      for (int h = 0; h < 6; ++h)
        for (int w = 0; w < 6; ++w) {
          s += X(n, c, h, w);
          wbn[size_t(((n * 3 + c) * 6 + h) * 6 + w)] = (X(n, c, h, w) - mean[size_t(c)]) / std::sqrt(var[size_t(c)] + 1e-3f) * sc[size_t(c)] + bi[size_t(c)];
        }
      wgap.push_back(float(s / 36));
      wrm.push_back(float(s / 36));
      double mu = s / 36, v2 = 0;
      for (int h = 0; h < 6; ++h)
        for (int w = 0; w < 6; ++w) v2 += (X(n, c, h, w) - mu) * (X(n, c, h, w) - mu);
      auto& lsc = g.inputs[5];
      (void)lsc;
    }
  // Softmax over channels and LayerNorm over (H, W).
  std::vector<float> lsv(36), lbv(36);
  CopyOp c1[] = {{{g.inputs[5].a, nullptr, 0}, {nullptr, (char*)lsv.data(), 0}, 144}, {{g.inputs[6].a, nullptr, 0}, {nullptr, (char*)lbv.data(), 0}, 144}};
  copy(device(), c1, nullptr);
  for (int n = 0; n < 2; ++n) {
    for (int hw = 0; hw < 36; ++hw) {
      double mx = -1e30, s = 0;
      for (int c = 0; c < 3; ++c) mx = std::max<double>(mx, x[size_t((n * 3 + c) * 36 + hw)]);
      for (int c = 0; c < 3; ++c) s += std::exp(x[size_t((n * 3 + c) * 36 + hw)] - mx);
      for (int c = 0; c < 3; ++c) wsm[size_t((n * 3 + c) * 36 + hw)] = float(std::exp(x[size_t((n * 3 + c) * 36 + hw)] - mx) / s);
    }
    for (int c = 0; c < 3; ++c) {
      const float* row = &x[size_t((n * 3 + c) * 36)];
      double mu = 0, v = 0;
      for (int i = 0; i < 36; ++i) mu += row[i];
      mu /= 36;
      for (int i = 0; i < 36; ++i) v += (row[i] - mu) * (row[i] - mu);
      v /= 36;
      for (int i = 0; i < 36; ++i) wln[size_t((n * 3 + c) * 36 + i)] = float((row[i] - mu) / std::sqrt(v + 1e-5) * lsv[size_t(i)] + lbv[size_t(i)]);
    }
  }
  close(r[0], wmp);
  close(r[1], wap);
  close(r[2], wgap);
  close(r[3], wbn);
  close(r[4], wsm);
  close(r[5], wln, 1e-4f, 1e-5f);
  close(r[6], wrm);
  no_validation_messages();
}

TEST_CASE("data movement: transpose, concat, gather, slice, views") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  G g;
  auto x = randv(2 * 3 * 4, -1, 1, 21), y = randv(2 * 2 * 4, -1, 1, 22);
  int ix = g.input(x, {2, 3, 4}), iy = g.input(y, {2, 2, 4});
  int tr = g.node("Transpose", {ix}, {{"perm", ais({2, 0, 1})}});
  int cc = g.node("Concat", {ix, iy}, {{"axis", ai(1)}});
  int idx = g.const_i64({2, 0, -1});
  int ga = g.node("Gather", {ix, idx}, {{"axis", ai(1)}});
  int st = g.const_i64({1}), en = g.const_i64({100}), ax = g.const_i64({2});
  int sl = g.node("Slice", {ix, st, en, ax});
  int shp = g.const_i64({6, -1});
  int rs = g.node("Reshape", {ix, shp});              // view, internal
  int rl = g.node("Relu", {rs});                      // reads through the view
  int fl = g.node("Flatten", {ix}, {{"axis", ai(2)}});  // view as graph output: copied
  auto r = g.run({tr, cc, ga, sl, rl, fl}, 3);
  auto X = [&](int a, int b, int c) { return x[size_t((a * 3 + b) * 4 + c)]; };
  std::vector<float> wtr, wcc, wga, wsl, wrl, wfl = x;
  for (int c = 0; c < 4; ++c)
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b) wtr.push_back(X(a, b, c));
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c = 0; c < 4; ++c) wcc.push_back(b < 3 ? X(a, b, c) : y[size_t((a * 2 + b - 3) * 4 + c)]);
  for (int a = 0; a < 2; ++a)
    for (int b : {2, 0, 2})
      for (int c = 0; c < 4; ++c) wga.push_back(X(a, b, c));
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 1; c < 4; ++c) wsl.push_back(X(a, b, c));
  for (float v : x) wrl.push_back(std::max(v, 0.f));
  close(r[0], wtr);
  close(r[1], wcc);
  close(r[2], wga);
  close(r[3], wsl);
  close(r[4], wrl);
  close(r[5], wfl);
  no_validation_messages();
}

TEST_CASE("fused group: one command buffer, barriers only on hazards, reuse") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  G g;
  auto x = randv(4 * 8, -1, 1, 23), w = randv(8 * 16, -1, 1, 24), b = randv(16, -1, 1, 25);
  int ix = g.input(x, {4, 8}), iw = g.input(w, {8, 16}), ib = g.input(b, {16});
  int mm = g.node("MatMul", {ix, iw});
  int ad = g.node("Add", {mm, ib});
  int r1 = g.node("Relu", {ad});
  int e1 = g.node("Erf", {ix});   // independent of the chain: no barrier needed before it
  int m2 = g.node("Mul", {r1, r1});
  Program* p = nullptr;
  auto r = g.run({m2, e1}, 3, &p);
  auto ref = ref_matmul(x, w, 1, 4, 8, 16, true);
  for (size_t i = 0; i < ref.size(); ++i) {
    float v = std::max(ref[i] + b[i % 16], 0.f);
    ref[i] = v * v;
  }
  close(r[0], ref, 1e-4f, 1e-5f);
  REQUIRE(p);
  CHECK(p->dispatch_count() == 5);
  CHECK(p->barrier_count() == 3);
  CHECK(p->last_run_reused() == false);  // outputs are fresh allocations every run here
  no_validation_messages();
}

// float16 kernels: 16-bit storage, float32 arithmetic in the shader. The
// references are computed in float/double on the same half-rounded inputs and
// then rounded to half; rtol 2e-3 allows the one-ulp (2^-10) rounding flips a
// different summation order can cause.
constexpr float kHalfRtol = 2e-3f;
bool have_fp16_device() { return have_device() && device().info().storage16; }

TEST_CASE("float16: unary and broadcasting binary") {
  if (!have_fp16_device()) NXRT_SKIP_CASE(have_device() ? std::string(kNoFp16) : no_device());
  const auto H = NXRT_DTYPE_FLOAT16;
  G g;
  // 105 elements: odd, so the last half-word of the output stands alone.
  auto x = rounded(randv(3 * 7 * 5, -3, 3, 21)), y = rounded(randv(7, 0.5f, 2, 22));
  int a = g.input(x, {3, 7, 5}, H), b = g.input(y, {7, 1}, H);
  struct U { const char* op; float (*f)(float); std::map<std::string, Attr> attrs; };
  const std::vector<U> unary = {
      {"Relu", [](float v) { return std::max(v, 0.f); }, {}},
      {"Sigmoid", [](float v) { return 1 / (1 + std::exp(-v)); }, {}},
      {"Tanh", [](float v) { return std::tanh(v); }, {}},
      {"Exp", [](float v) { return std::exp(v); }, {}},
      {"Erf", [](float v) { return std::erf(v); }, {}},
      {"Neg", [](float v) { return -v; }, {}},
      {"Abs", [](float v) { return std::fabs(v); }, {}},
      {"Sin", [](float v) { return std::sin(v); }, {}},
      {"Floor", [](float v) { return std::floor(v); }, {}},
      {"Sign", [](float v) { return float((v > 0) - (v < 0)); }, {}},
      {"HardSwish", [](float v) { return v * std::clamp(v / 6 + 0.5f, 0.f, 1.f); }, {}},
      {"Softplus", [](float v) { return std::log1p(std::exp(v)); }, {}},
      {"LeakyRelu", [](float v) { return v < 0 ? 0.1f * v : v; }, {{"alpha", af(0.1f)}}},
      {"Elu", [](float v) { return v < 0 ? 0.5f * (std::exp(v) - 1) : v; }, {{"alpha", af(0.5f)}}},
  };
  std::vector<int> outs;
  for (auto& u : unary) outs.push_back(g.node(u.op, {a}, u.attrs, 17, H));
  // Log / Sqrt / Reciprocal on the positive operand.
  int lg = g.node("Log", {b}, {}, 17, H), sq = g.node("Sqrt", {b}, {}, 17, H), rc = g.node("Reciprocal", {b}, {}, 17, H);
  int clip = g.node("Clip", {a, g.const_f16({-0.5f}), g.const_f16({1.25f})}, {}, 13, H);
  const char* bin[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"};
  for (auto op : bin) outs.push_back(std::string(op) == "Pow" ? g.node(op, {b, a}, {}, 15, H) : g.node(op, {a, b}, {}, 16, H));
  outs.insert(outs.end(), {lg, sq, rc, clip});
  auto r = g.run(outs);
  size_t k = 0;
  for (auto& u : unary) {
    CAPTURE(u.op);
    std::vector<float> w(x.size());
    for (size_t i = 0; i < x.size(); ++i) w[i] = u.f(x[i]);
    close(r[k++], rounded(w), kHalfRtol, 1e-4f);
  }
  for (auto op : bin) {
    CAPTURE(op);
    std::string o = op;
    std::vector<float> w(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      float u = x[i], v = y[(i / 5) % 7];
      w[i] = o == "Add" ? u + v : o == "Sub" ? u - v : o == "Mul" ? u * v : o == "Div" ? u / v : o == "Pow" ? std::pow(v, u)
           : o == "Max" ? std::max(u, v) : o == "Min" ? std::min(u, v) : (u < 0 ? u * v : u);
    }
    close(r[k++], rounded(w), kHalfRtol, 1e-4f);
  }
  std::vector<float> wl, ws, wr, wc;
  for (float v : y) {
    wl.push_back(std::log(v));
    ws.push_back(std::sqrt(v));
    wr.push_back(1 / v);
  }
  for (float v : x) wc.push_back(std::clamp(v, -0.5f, 1.25f));
  close(r[k++], rounded(wl), kHalfRtol, 1e-4f);
  close(r[k++], rounded(ws), kHalfRtol, 1e-4f);
  close(r[k++], rounded(wr), kHalfRtol, 1e-4f);
  close(r[k++], rounded(wc), 0.f, 0.f);  // exact: clamping half values to half bounds
  no_validation_messages();
}

TEST_CASE("float16: matmul (all tile classes, batch broadcast) and gemm") {
  if (!have_fp16_device()) NXRT_SKIP_CASE(have_device() ? std::string(kNoFp16) : no_device());
  const auto H = NXRT_DTYPE_FLOAT16;
  for (auto [M, K, N] : {std::tuple{5, 7, 3}, {64, 96, 80}, {130, 33, 70}, {1, 512, 101}}) {
    CAPTURE(M);
    G g;
    auto a = rounded(randv(size_t(2 * 3 * M * K), -1, 1, 23)), b = rounded(randv(size_t(K * N), -1, 1, 24));
    int ia = g.input(a, {2, 3, M, K}, H), ib = g.input(b, {K, N}, H);
    auto r = g.run({g.node("MatMul", {ia, ib}, {}, 13, H)});
    close(r[0], rounded(ref_matmul(a, b, 6, M, K, N, true)), kHalfRtol, 1e-4f);
  }
  {
    G g;  // transA and transB, a column bias C[M, 1], alpha/beta
    int64_t M = 9, K = 20, N = 70;
    auto at = rounded(randv(size_t(K * M), -1, 1, 25)), bt = rounded(randv(size_t(N * K), -1, 1, 26));
    auto c = rounded(randv(size_t(M), -1, 1, 27));
    int ia = g.input(at, {K, M}, H), ib = g.input(bt, {N, K}, H), ic = g.input(c, {M, 1}, H);
    auto r = g.run({g.node("Gemm", {ia, ib, ic}, {{"transA", ai(1)}, {"transB", ai(1)}, {"alpha", af(0.5f)}, {"beta", af(2.f)}},
                           13, H)});
    std::vector<float> a(size_t(M * K)), b(size_t(K * N));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) a[size_t(m * K + k)] = at[size_t(k * M + m)];
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) b[size_t(k * N + n)] = bt[size_t(n * K + k)];
    auto w = ref_matmul(a, b, 1, M, K, N, true);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) w[size_t(m * N + n)] = 0.5f * w[size_t(m * N + n)] + 2.f * c[size_t(m)];
    close(r[0], rounded(w), kHalfRtol, 1e-4f);
  }
  no_validation_messages();
}

TEST_CASE("float16: softmax, logsoftmax and a fused chain") {
  if (!have_fp16_device()) NXRT_SKIP_CASE(have_device() ? std::string(kNoFp16) : no_device());
  const auto H = NXRT_DTYPE_FLOAT16;
  auto softmax = [](const std::vector<float>& x, int64_t outer, int64_t len, int64_t inner, bool log) {
    std::vector<float> y(x.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        auto at = [&](int64_t k) { return size_t((o * len + k) * inner + in); };
        double m = -1e30, s = 0;
        for (int64_t k = 0; k < len; ++k) m = std::max<double>(m, x[at(k)]);
        for (int64_t k = 0; k < len; ++k) s += std::exp(x[at(k)] - m);
        for (int64_t k = 0; k < len; ++k) y[at(k)] = float(log ? x[at(k)] - m - std::log(s) : std::exp(x[at(k)] - m) / s);
      }
    return y;
  };
  {
    G g;
    auto x = rounded(randv(2 * 37 * 3, -4, 4, 28));
    int ix = g.input(x, {2, 37, 3}, H);
    int sm = g.node("Softmax", {ix}, {{"axis", ai(1)}}, 13, H), ls = g.node("LogSoftmax", {ix}, {}, 13, H);
    int sm_legacy = g.node("Softmax", {ix}, {{"axis", ai(1)}}, 11, H);  // coerced to 2-D: rows of 37 * 3
    auto r = g.run({sm, ls, sm_legacy});
    close(r[0], rounded(softmax(x, 2, 37, 3, false)), kHalfRtol, 1e-4f);
    close(r[1], rounded(softmax(x, 74, 3, 1, true)), kHalfRtol, 1e-4f);
    close(r[2], rounded(softmax(x, 2, 111, 1, false)), kHalfRtol, 1e-4f);
  }
  {
    G g;  // MatMul -> Add -> Relu -> Softmax in one program: 2-byte intermediates in the scratch arena
    int64_t M = 7, K = 13, N = 11;
    auto a = rounded(randv(size_t(M * K), -1, 1, 29)), b = rounded(randv(size_t(K * N), -1, 1, 30));
    auto c = rounded(randv(size_t(N), -1, 1, 31));
    int ia = g.input(a, {M, K}, H), ib = g.input(b, {K, N}, H), ic = g.input(c, {N}, H);
    int mm = g.node("MatMul", {ia, ib}, {}, 13, H);
    int rl = g.node("Relu", {g.node("Add", {mm, ic}, {}, 14, H)}, {}, 14, H);
    g.g.values[size_t(rl)].rank = 2;  // Softmax is claimed only with a known rank
    int sm = g.node("Softmax", {rl}, {}, 13, H);
    auto r = g.run({sm});
    auto w = rounded(ref_matmul(a, b, 1, M, K, N, true));
    for (size_t i = 0; i < w.size(); ++i) w[i] = round_to_half(std::max(round_to_half(w[i] + c[i % size_t(N)]), 0.f));
    close(r[0], rounded(softmax(w, M, N, 1, false)), kHalfRtol, 1e-4f);
  }
  no_validation_messages();
}

TEST_CASE("float16: conv (implicit GEMM dense and grouped, direct grouped and depthwise)") {
  if (!have_fp16_device()) NXRT_SKIP_CASE(have_device() ? std::string(kNoFp16) : no_device());
  const auto H = NXRT_DTYPE_FLOAT16;
  struct Case { int64_t N, C, H, W, Co, k, s, p, grp; bool bias; };
  // GEMM path when Cout/group >= 16 and Cin/group*k*k >= 16, direct otherwise.
  for (auto cs : {Case{1, 3, 17, 15, 32, 3, 2, 1, 1, true}, Case{2, 16, 9, 9, 32, 3, 1, 1, 2, true},
                  Case{1, 8, 10, 9, 8, 3, 1, 1, 8, true}, Case{2, 8, 7, 7, 12, 1, 1, 0, 4, false},
                  Case{1, 6, 11, 11, 6, 3, 2, 1, 6, false}}) {
    CAPTURE(cs.C);
    CAPTURE(cs.grp);
    G g;
    auto x = rounded(randv(size_t(cs.N * cs.C * cs.H * cs.W), -1, 1, 41));
    auto w = rounded(randv(size_t(cs.Co * cs.C / cs.grp * cs.k * cs.k), -1, 1, 42));
    auto b = rounded(randv(size_t(cs.Co), -1, 1, 43));
    std::vector<int> in = {g.input(x, {cs.N, cs.C, cs.H, cs.W}, H), g.input(w, {cs.Co, cs.C / cs.grp, cs.k, cs.k}, H)};
    if (cs.bias) in.push_back(g.input(b, {cs.Co}, H));
    int y = g.node("Conv", in, {{"kernel_shape", ais({cs.k, cs.k})}, {"strides", ais({cs.s, cs.s})},
                                {"pads", ais({cs.p, cs.p, cs.p, cs.p})}, {"group", ai(cs.grp)}}, 11, H);
    auto r = g.run({y});
    int64_t OH, OW;
    auto want = ref_conv(x, w, cs.bias ? &b : nullptr, cs.N, cs.C, cs.H, cs.W, cs.Co, cs.k, cs.k, cs.s, cs.p, cs.grp, OH, OW);
    close(r[0], rounded(want), kHalfRtol, 1e-4f);
  }
  no_validation_messages();
}

// Epilogue fusion: a Conv/MatMul/Gemm whose output only feeds an activation
// runs as one dispatch whose store applies the activation; the intermediate
// gets no buffer. float32 and float16 against CPU references.
namespace {
float ref_act(const std::string& op, float v, float a, float b) {
  if (op == "Relu") return std::max(v, 0.f);
  if (op == "Clip") return std::min(std::max(v, a), b);
  if (op == "LeakyRelu") return v < 0 ? v * a : v;
  if (op == "Sigmoid") return float(1.0 / (1.0 + std::exp(-double(v))));
  if (op == "HardSwish") return v * std::min(std::max(v / 6.f + 0.5f, 0.f), 1.f);
  return v;
}
struct Producer {
  std::vector<int> in;
  std::map<std::string, Attr> attrs;
  std::vector<float> ref;  // producer output before the activation
  std::string op;
};
// Inputs and reference of one producer (Conv GEMM path, Conv direct path, MatMul, Gemm).
Producer make_producer(G& g, const std::string& kind, nxrt_dtype dt) {
  const bool h = dt == NXRT_DTYPE_FLOAT16;
  auto rv = [&](size_t n, unsigned seed) { auto v = randv(n, -1, 1, seed); return h ? rounded(v) : v; };
  Producer p;
  if (kind == "conv_gemm" || kind == "conv_direct") {
    bool dw = kind == "conv_direct";
    int64_t N = 1, C = 8, Hh = 9, W = 10, Co = dw ? 8 : 32, grp = dw ? 8 : 1;
    auto x = rv(size_t(N * C * Hh * W), 61), w = rv(size_t(Co * C / grp * 9), 62), b = rv(size_t(Co), 63);
    p.in = {g.input(x, {N, C, Hh, W}, dt), g.input(w, {Co, C / grp, 3, 3}, dt), g.input(b, {Co}, dt)};
    p.attrs = {{"kernel_shape", ais({3, 3})}, {"pads", ais({1, 1, 1, 1})}, {"group", ai(grp)}};
    int64_t OH, OW;
    p.ref = ref_conv(x, w, &b, N, C, Hh, W, Co, 3, 3, 1, 1, grp, OH, OW);
    p.op = "Conv";
  } else if (kind == "matmul") {
    auto a = rv(2 * 7 * 13, 64), b = rv(13 * 19, 65);
    p.in = {g.input(a, {2, 7, 13}, dt), g.input(b, {13, 19}, dt)};
    p.ref = ref_matmul(a, b, 2, 7, 13, 19, true);
    p.op = "MatMul";
  } else {  // gemm: transB, alpha, C broadcast over rows
    int64_t M = 9, K = 12, N = 11;
    auto a = rv(size_t(M * K), 66), b = rv(size_t(N * K), 67), c = rv(size_t(N), 68);
    p.in = {g.input(a, {M, K}, dt), g.input(b, {N, K}, dt), g.input(c, {N}, dt)};
    p.attrs = {{"transB", ai(1)}, {"alpha", af(1.5f)}};
    std::vector<float> bt(size_t(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) bt[size_t(k * N + j)] = b[size_t(j * K + k)];
    p.ref = ref_matmul(a, bt, 1, M, K, N, true);
    for (size_t i = 0; i < p.ref.size(); ++i) p.ref[i] = 1.5f * p.ref[i] + c[i % size_t(N)];
    p.op = "Gemm";
  }
  return p;
}
}  // namespace

TEST_CASE("epilogue fusion: Conv/MatMul/Gemm + activation in one dispatch (float32, float16)") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  struct Case { const char* producer; const char* act; float a, b; int64_t clip_opset; };
  const Case cases[] = {
      {"conv_gemm", "Relu", 0, 0, 0},          {"conv_gemm", "Clip", -0.5f, 0.75f, 13},
      {"conv_direct", "Relu", 0, 0, 0},        {"conv_direct", "Clip", 0.f, 0.6f, 13},
      {"matmul", "Relu", 0, 0, 0},             {"matmul", "Clip", -0.25f, 0.5f, 13},
      {"gemm", "Relu", 0, 0, 0},               {"gemm", "Clip", -0.5f, 1.0f, 13},
      {"conv_gemm", "Clip", -0.5f, 0.75f, 6},  {"conv_direct", "HardSwish", 0, 0, 0},
      {"matmul", "Sigmoid", 0, 0, 0},          {"gemm", "LeakyRelu", 0.1f, 0, 0}};
  for (nxrt_dtype dt : {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT16}) {
    const bool h = dt == NXRT_DTYPE_FLOAT16;
    if (h && !have_fp16_device()) {
      nxrt_test::record_skip(std::string("float16 part: ") + kNoFp16);
      continue;
    }
    for (auto& cs : cases) {
      CAPTURE(cs.producer);
      CAPTURE(cs.act);
      CAPTURE(h);
      G g;
      Producer p = make_producer(g, cs.producer, dt);
      int y = g.node(p.op, p.in, p.attrs, 13, dt);
      std::string act = cs.act;
      int r;
      if (act == "Clip" && cs.clip_opset >= 11) {
        int lo = h ? g.const_f16({cs.a}) : g.const_f32({cs.a});
        int hi = h ? g.const_f16({cs.b}) : g.const_f32({cs.b});
        r = g.node("Clip", {y, lo, hi}, {}, cs.clip_opset, dt);
      } else if (act == "Clip") {
        r = g.node("Clip", {y}, {{"min", af(cs.a)}, {"max", af(cs.b)}}, cs.clip_opset, dt);
      } else if (act == "LeakyRelu") {
        r = g.node(act, {y}, {{"alpha", af(cs.a)}}, 16, dt);
      } else {
        r = g.node(act, {y}, {}, 14, dt);
      }
      Program* prog = nullptr;
      auto out = g.run({r}, 2, &prog);
      std::vector<float> want(p.ref.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = ref_act(act, p.ref[i], cs.a, cs.b);
      if (h) close(out[0], rounded(want), kHalfRtol, 1e-3f);
      else close(out[0], want, 1e-4f, 1e-4f);
      REQUIRE(prog);
      CHECK(prog->fused_count() == 1);
      CHECK(prog->dispatch_count() == 1);
      CHECK(prog->graph().nodes.size() == 1);
      CHECK(prog->scratch_bytes() == 0);  // the intermediate has no buffer
    }
  }
  no_validation_messages();
}

TEST_CASE("epilogue fusion: not when the intermediate has another use or is a group output") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  for (nxrt_dtype dt : {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT16}) {
    const bool h = dt == NXRT_DTYPE_FLOAT16;
    if (h && !have_fp16_device()) {
      nxrt_test::record_skip(std::string("float16 part: ") + kNoFp16);
      continue;
    }
    CAPTURE(h);
    auto fin = [&](std::vector<float> v) { return h ? rounded(v) : v; };
    const float rtol = h ? kHalfRtol : 1e-4f, atol = h ? 1e-3f : 1e-4f;
    {  // Conv output also feeds Add: Conv, Relu, Add stay three dispatches
      G g;
      Producer p = make_producer(g, "conv_gemm", dt);
      int y = g.node("Conv", p.in, p.attrs, 13, dt);
      int r = g.node("Relu", {y}, {}, 14, dt);
      int s = g.node("Add", {y, r}, {}, 14, dt);
      Program* prog = nullptr;
      auto out = g.run({s}, 1, &prog);
      std::vector<float> want(p.ref.size());
      for (size_t i = 0; i < want.size(); ++i) {
        float yv = h ? round_to_half(p.ref[i]) : p.ref[i];
        want[i] = yv + std::max(yv, 0.f);
      }
      close(out[0], fin(want), rtol, atol);
      REQUIRE(prog);
      CHECK(prog->fused_count() == 0);
      CHECK(prog->dispatch_count() == 3);
    }
    {  // Conv output is a group output as well as Relu's input
      G g;
      Producer p = make_producer(g, "conv_direct", dt);
      int y = g.node("Conv", p.in, p.attrs, 13, dt);
      int r = g.node("Relu", {y}, {}, 14, dt);
      Program* prog = nullptr;
      auto out = g.run({r, y}, 1, &prog);
      std::vector<float> want(p.ref.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(p.ref[i], 0.f);
      close(out[0], fin(want), rtol, atol);
      close(out[1], fin(p.ref), rtol, atol);
      REQUIRE(prog);
      CHECK(prog->fused_count() == 0);
      CHECK(prog->dispatch_count() == 2);
    }
    {  // MatMul -> Relu -> Clip: one epilogue (Relu) only; an unrelated node between them
      G g;
      Producer p = make_producer(g, "matmul", dt);
      int y = g.node("MatMul", p.in, {}, 13, dt);
      int e = g.node("Neg", {p.in[0]}, {}, 13, dt);
      int r = g.node("Relu", {y}, {}, 14, dt);
      int c = g.node("Clip", {r}, {{"min", af(-1.f)}, {"max", af(0.3f)}}, 6, dt);
      Program* prog = nullptr;
      auto out = g.run({c, e}, 2, &prog);
      std::vector<float> want(p.ref.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = std::min(std::max(p.ref[i], 0.f), 0.3f);
      close(out[0], fin(want), rtol, atol);
      REQUIRE(prog);
      CHECK(prog->fused_count() == 1);
      CHECK(prog->dispatch_count() == 3);
      CHECK(prog->graph().nodes.size() == 3);
    }
  }
  no_validation_messages();
}

TEST_CASE("float16: pooling, batchnorm, layernorm, reductions") {
  if (!have_fp16_device()) NXRT_SKIP_CASE(have_device() ? std::string(kNoFp16) : no_device());
  const auto H = NXRT_DTYPE_FLOAT16;
  G g;
  const int N = 2, C = 3, S = 7;  // odd spatial size: odd element counts everywhere
  auto x = rounded(randv(N * C * S * S, -2, 2, 44));
  auto sc = rounded(randv(C, 0.5f, 1.5f, 45)), bi = rounded(randv(C, -1, 1, 46)), mean = rounded(randv(C, -1, 1, 47)),
       var = rounded(randv(C, 0.1f, 2, 48)), lsc = rounded(randv(S, 0.5f, 1.5f, 49)), lbi = rounded(randv(S, -1, 1, 50));
  int ix = g.input(x, {N, C, S, S}, H);
  int is = g.input(sc, {C}, H), ib = g.input(bi, {C}, H), im = g.input(mean, {C}, H), iv = g.input(var, {C}, H);
  int ils = g.input(lsc, {S}, H), ilb = g.input(lbi, {S}, H);
  int mp = g.node("MaxPool", {ix}, {{"kernel_shape", ais({3, 3})}, {"strides", ais({2, 2})}, {"pads", ais({1, 1, 1, 1})}}, 12, H);
  int ap = g.node("AveragePool", {ix}, {{"kernel_shape", ais({3, 3})}, {"strides", ais({2, 2})}, {"pads", ais({1, 1, 1, 1})}}, 11, H);
  int gap = g.node("GlobalAveragePool", {ix}, {}, 1, H), gmp = g.node("GlobalMaxPool", {ix}, {}, 1, H);
  int bn = g.node("BatchNormalization", {ix, is, ib, im, iv}, {{"epsilon", af(1e-3f)}}, 15, H);
  int ln = g.node("LayerNormalization", {ix, ils, ilb}, {{"axis", ai(-1)}}, 17, H);
  int rm = g.node("ReduceMean", {ix}, {{"axes", ais({2, 3})}, {"keepdims", ai(0)}}, 13, H);
  int rs = g.node("ReduceSum", {ix, g.const_i64({1})}, {}, 13, H);
  int rx = g.node("ReduceMax", {ix}, {{"axes", ais({1, 2})}}, 13, H);
  int r2 = g.node("ReduceL2", {ix}, {{"axes", ais({3})}, {"keepdims", ai(0)}}, 13, H);
  auto r = g.run({mp, ap, gap, gmp, bn, ln, rm, rs, rx, r2});
  auto X = [&](int n, int c, int h, int w) { return double(x[size_t(((n * C + c) * S + h) * S + w)]); };
  std::vector<float> wmp, wap, wgap, wgmp, wbn(x.size()), wln(x.size()), wrm, wrs(size_t(N * S * S)), wrx, wr2;
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) {
      for (int oh = 0; oh < 4; ++oh)
        for (int ow = 0; ow < 4; ++ow) {
          double m = -1e30, s = 0;
          int cnt = 0;
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              int h = oh * 2 - 1 + i, w = ow * 2 - 1 + j;
              if (h < 0 || h >= S || w < 0 || w >= S) continue;
              m = std::max(m, X(n, c, h, w));
              s += X(n, c, h, w);
              cnt++;
            }
          wmp.push_back(float(m));
          wap.push_back(float(s / cnt));  // count_include_pad = 0
        }
      double s = 0, mx = -1e30;
      for (int h = 0; h < S; ++h)
        for (int w = 0; w < S; ++w) {
          s += X(n, c, h, w);
          mx = std::max(mx, X(n, c, h, w));
          wbn[size_t(((n * C + c) * S + h) * S + w)] =
              float((X(n, c, h, w) - mean[size_t(c)]) / std::sqrt(double(var[size_t(c)]) + double(1e-3f)) * sc[size_t(c)] + bi[size_t(c)]);
        }
      wgap.push_back(float(s / (S * S)));
      wgmp.push_back(float(mx));
      wrm.push_back(float(s / (S * S)));
      for (int h = 0; h < S; ++h) {
        double mu = 0, v = 0, l2 = 0;
        for (int w = 0; w < S; ++w) mu += X(n, c, h, w);
        mu /= S;
        for (int w = 0; w < S; ++w) v += (X(n, c, h, w) - mu) * (X(n, c, h, w) - mu);
        v /= S;
        for (int w = 0; w < S; ++w) {
          wln[size_t(((n * C + c) * S + h) * S + w)] = float((X(n, c, h, w) - mu) / std::sqrt(v + 1e-5) * lsc[size_t(w)] + lbi[size_t(w)]);
          l2 += X(n, c, h, w) * X(n, c, h, w);
        }
        wr2.push_back(float(std::sqrt(l2)));
      }
    }
  for (int n = 0; n < N; ++n)
    for (int hw = 0; hw < S * S; ++hw) {
      double s = 0;
      for (int c = 0; c < C; ++c) s += x[size_t((n * C + c) * S * S + hw)];
      wrs[size_t(n * S * S + hw)] = float(s);
    }
  for (int n = 0; n < N; ++n)
    for (int w = 0; w < S; ++w) {
      double m = -1e30;
      for (int c = 0; c < C; ++c)
        for (int h = 0; h < S; ++h) m = std::max(m, X(n, c, h, w));
      wrx.push_back(float(m));
    }
  close(r[0], wmp, 0.f, 0.f);  // max of half values: exact
  close(r[1], rounded(wap), kHalfRtol, 1e-4f);
  close(r[2], rounded(wgap), kHalfRtol, 1e-4f);
  close(r[3], wgmp, 0.f, 0.f);
  close(r[4], rounded(wbn), kHalfRtol, 1e-4f);
  close(r[5], rounded(wln), kHalfRtol, 1e-4f);
  close(r[6], rounded(wrm), kHalfRtol, 1e-4f);
  close(r[7], rounded(wrs), kHalfRtol, 1e-4f);
  close(r[8], wrx, 0.f, 0.f);
  close(r[9], rounded(wr2), kHalfRtol, 1e-4f);
  no_validation_messages();
}

TEST_CASE("float16: data movement copies 16-bit elements (transpose, concat, gather, slice, expand)") {
  if (!have_fp16_device()) NXRT_SKIP_CASE(have_device() ? std::string(kNoFp16) : no_device());
  const auto H = NXRT_DTYPE_FLOAT16;
  G g;
  // Odd sizes and odd offsets: a copy of 32-bit words would shift, smear or drop halves.
  auto x = rounded(randv(3 * 5 * 7, -4, 4, 51)), y = rounded(randv(3 * 5 * 2, -4, 4, 52)), z = rounded(randv(5, -4, 4, 53));
  int ix = g.input(x, {3, 5, 7}, H), iy = g.input(y, {3, 5, 2}, H), iz = g.input(z, {5, 1}, H);
  int tr = g.node("Transpose", {ix}, {{"perm", ais({2, 0, 1})}}, 13, H);
  int cc = g.node("Concat", {ix, iy, ix}, {{"axis", ai(2)}}, 13, H);
  int ga = g.node("Gather", {ix, g.const_i64({4, 0, -1})}, {{"axis", ai(1)}}, 13, H);
  int gb = g.node("Gather", {ix, g.const_i32({1, 6, 3})}, {{"axis", ai(2)}}, 13, H);
  int sl = g.node("Slice", {ix, g.const_i64({1, 6}), g.const_i64({5, 0}), g.const_i64({1, 2}), g.const_i64({2, -2})}, {}, 13, H);
  int ex = g.node("Expand", {iz, g.const_i64({3, 5, 3})}, {}, 13, H);
  auto r = g.run({tr, cc, ga, gb, sl, ex}, 2);
  auto X = [&](int a, int b, int c) { return x[size_t((a * 5 + b) * 7 + c)]; };
  std::vector<float> wtr, wcc, wga, wgb, wsl, wex;
  for (int c = 0; c < 7; ++c)
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 5; ++b) wtr.push_back(X(a, b, c));
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c = 0; c < 16; ++c) wcc.push_back(c < 7 ? X(a, b, c) : c < 9 ? y[size_t((a * 5 + b) * 2 + c - 7)] : X(a, b, c - 9));
  for (int a = 0; a < 3; ++a)
    for (int b : {4, 0, 4})
      for (int c = 0; c < 7; ++c) wga.push_back(X(a, b, c));
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c : {1, 6, 3}) wgb.push_back(X(a, b, c));
  for (int a = 0; a < 3; ++a)
    for (int b : {1, 3})
      for (int c : {6, 4, 2}) wsl.push_back(X(a, b, c));
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c = 0; c < 3; ++c) wex.push_back(z[size_t(b)]);
  close(r[0], wtr, 0.f, 0.f);  // copies are bit-exact
  close(r[1], wcc, 0.f, 0.f);
  close(r[2], wga, 0.f, 0.f);
  close(r[3], wgb, 0.f, 0.f);
  close(r[4], wsl, 0.f, 0.f);
  close(r[5], wex, 0.f, 0.f);
  no_validation_messages();
}

TEST_CASE("float16 claims: only with 16-bit storage, only implemented ops, no mixed types") {
  IrGraph g;
  IrValue h;
  h.dtype = NXRT_DTYPE_FLOAT16;
  h.rank = 2;
  h.dims = {4, 4};
  IrValue f = h;
  f.dtype = NXRT_DTYPE_FLOAT32;
  int h0 = g.add_value(h), h1 = g.add_value(h), ho = g.add_value(h), f0 = g.add_value(f);
  DeviceLimits with16, without16;
  with16.storage16 = true;
  IrNode n;
  n.opset = 17;
  n.out = {ho};
  IrValue h4 = h;  // NCHW operands for Conv, pooling, BatchNormalization
  h4.rank = 4;
  h4.dims = {1, 4, 6, 6};
  IrValue hc = h;
  hc.rank = 1;
  hc.dims = {4};
  IrValue i64 = h;
  i64.dtype = NXRT_DTYPE_INT64;
  i64.rank = 1;
  i64.dims = {2};
  i64.is_const = i64.has_data = true;
  i64.data.dtype = NXRT_DTYPE_INT64;
  i64.data.dims = i64.dims;
  i64.data.bytes.assign(16, 0);  // {0, 0}
  int x4 = g.add_value(h4), w4 = g.add_value(h4), c0 = g.add_value(hc), c1 = g.add_value(hc), c2 = g.add_value(hc),
      c3 = g.add_value(hc), ix = g.add_value(i64);
  IrValue ci = i64;
  ci.dims = ci.data.dims = {1};
  ci.data.bytes.assign(8, 0);
  ci.data.bytes[0] = 1;  // {1}
  int one = g.add_value(ci);
  struct Case { const char* op; std::vector<int> in; std::map<std::string, Attr> attrs; };
  const std::vector<Case> cases = {
      {"Relu", {h0}, {}}, {"Add", {h0, h1}, {}}, {"MatMul", {h0, h1}, {}}, {"Gemm", {h0, h1}, {}}, {"Softmax", {h0}, {}},
      {"LogSoftmax", {h0}, {}}, {"Conv", {x4, w4, c0}, {}}, {"MaxPool", {x4}, {{"kernel_shape", ais({2, 2})}}},
      {"AveragePool", {x4}, {{"kernel_shape", ais({2, 2})}}}, {"GlobalAveragePool", {x4}, {}}, {"GlobalMaxPool", {x4}, {}},
      {"BatchNormalization", {x4, c0, c1, c2, c3}, {}}, {"LayerNormalization", {h0, c0, c1}, {}},
      {"ReduceMean", {h0}, {{"axes", ais({1})}}}, {"ReduceSum", {h0, one}, {}}, {"ReduceL2", {h0}, {}},
      {"Transpose", {h0}, {}}, {"Concat", {h0, h1}, {{"axis", ai(0)}}}, {"Gather", {h0, ix}, {}},
      {"Slice", {h0, one, one}, {}}, {"Expand", {h0, ix}, {}}};
  for (auto& [op, ins, attrs] : cases) {
    CAPTURE(op);
    n.op = op;
    n.in = ins;
    n.attrs = attrs;
    CHECK(!check_node(g, n, with16));
    auto r = check_node(g, n, without16);
    REQUIRE(r);
    CHECK(r->reason == NXRT_REFUSE_DTYPE);
    CHECK(r->message.find("storageBuffer16BitAccess") != std::string::npos);
  }
  n.op = "Add";
  n.in = {h0, f0};  // mixed inputs
  CHECK(check_node(g, n, with16)->reason == NXRT_REFUSE_DTYPE);
  n.op = "Pow";
  CHECK(check_node(g, n, with16)->reason == NXRT_REFUSE_DTYPE);
  n.op = "Relu";
  n.in = {h0};
  n.out = {f0};  // mixed input/output
  CHECK(check_node(g, n, with16)->reason == NXRT_REFUSE_DTYPE);
  n.out = {ho};
  n.attrs.clear();
  n.op = "Identity";  // a view runs no kernel: float16 needs no device feature
  CHECK(!check_node(g, n, without16));
  n.op = "Shape";  // reads only the shape
  n.out = {ix};
  CHECK(!check_node(g, n, without16));
  n.out = {ho};
  n.op = "Concat";  // float16 with float32 data
  n.in = {h0, f0};
  CHECK(check_node(g, n, with16)->reason == NXRT_REFUSE_DTYPE);
  n.op = "BatchNormalization";  // float16 X, float32 parameters
  IrValue fc = hc;
  fc.dtype = NXRT_DTYPE_FLOAT32;
  int f1 = g.add_value(fc);
  n.in = {x4, c0, c1, c2, f1};
  auto r = check_node(g, n, with16);
  REQUIRE(r);
  CHECK(r->reason == NXRT_REFUSE_DTYPE);
  CHECK(r->message.find("mixes float16") != std::string::npos);
  n.op = "Gather";  // int64 indices are meta: the data type decides
  n.in = {f0, ix};
  n.out = {ho};
  CHECK(check_node(g, n, with16)->reason == NXRT_REFUSE_DTYPE);
}

namespace {
// A graph input from raw bytes of any type (bit patterns kept as they are).
int raw_input(G& g, const void* data, Shape d, nxrt_dtype t) {
  IrValue iv;
  iv.name = "raw" + std::to_string(g.g.values.size());
  iv.dtype = t;
  iv.rank = int64_t(d.size());
  iv.dims = d;
  int id = g.g.add_value(iv);
  g.g.inputs.push_back(id);
  g.inputs.emplace_back(data, d, t);
  return id;
}
// Output k of the last run as raw bytes.
template <typename T>
std::vector<T> raw_output(G& g, size_t k) {
  std::vector<T> h(size_t(numel(g.outs[k].dims)));
  CopyOp op{{g.outs[k].a, nullptr, 0}, {nullptr, (char*)h.data(), 0}, h.size() * sizeof(T)};
  copy(device(), std::span(&op, 1), nullptr);
  return h;
}
uint32_t bits_of(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float float_of(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
}  // namespace

TEST_CASE("cast: float32<->float16 (round to nearest even), float32<->int32, int64<->int32") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  const auto F32 = NXRT_DTYPE_FLOAT32, F16 = NXRT_DTYPE_FLOAT16, I32 = NXRT_DTYPE_INT32, I64 = NXRT_DTYPE_INT64;
  G g;
  // Edge cases of float32 -> float16: ties at normal and subnormal scale, overflow
  // (65520 ties up to inf), the smallest subnormal and half of it, signed zero, inf, NaN.
  std::vector<float> f = {0.f, -0.f, 1.f, -2.5f, 65504.f, 65519.f, 65520.f, 1e6f, -1e6f, 5.9604645e-8f, 2.9802322e-8f,
                          4.4703484e-8f, 1.f + 1.f / 2048, 1.f + 3.f / 2048, 6.1035156e-5f, 6.0975552e-5f,
                          float_of(0x7f800000u), float_of(0xff800000u), float_of(0x7fc00000u)};
  for (float v : randv(1000, -70000.f, 70000.f, 61)) f.push_back(v);
  for (float v : randv(1000, -1e-4f, 1e-4f, 62)) f.push_back(v);
  std::vector<uint16_t> all_halves(65536);
  for (uint32_t i = 0; i < 65536; ++i) all_halves[i] = uint16_t(i);
  std::vector<float> ti = {1.9f, -1.9f, 0.5f, -0.5f, 1e9f, -2147483520.f, 0.f};
  std::vector<int32_t> it = {16777217, 16777219, -7, 2147483647, -2147483647 - 1, 0};
  std::vector<int64_t> l = {5, -5, (int64_t(1) << 40) + 3, -(int64_t(1) << 33) - 1};
  std::vector<int32_t> s = {5, -5, 2147483647, -2147483647 - 1};
  const bool fp16 = device().info().storage16;
  if (!fp16) nxrt_test::record_skip(std::string("float16 casts: ") + kNoFp16);
  std::vector<int> outs;
  auto cast = [&](int x, nxrt_dtype to) { return g.node("Cast", {x}, {{"to", ai(to)}}, 13, to); };
  int if32 = raw_input(g, f.data(), {int64_t(f.size())}, F32);
  if (fp16) {
    outs.push_back(cast(if32, F16));
    outs.push_back(cast(raw_input(g, all_halves.data(), {65536}, F16), F32));
  }
  outs.push_back(cast(raw_input(g, ti.data(), {int64_t(ti.size())}, F32), I32));
  outs.push_back(cast(raw_input(g, it.data(), {int64_t(it.size())}, I32), F32));
  outs.push_back(cast(raw_input(g, l.data(), {int64_t(l.size())}, I64), I32));
  outs.push_back(cast(raw_input(g, s.data(), {int64_t(s.size())}, I32), I64));
  outs.push_back(cast(if32, F32));  // same type: a copy
  g.run(outs, 2);
  size_t k = 0;
  if (fp16) {
    // Independent references: the compiler's _Float16 conversions (round to nearest even).
    auto h = raw_output<uint16_t>(g, k++);
    size_t bad = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      _Float16 want = static_cast<_Float16>(f[i]);
      uint16_t wb;
      std::memcpy(&wb, &want, 2);
      const bool nan = std::isnan(f[i]);
      if (nan ? (h[i] & 0x7c00u) != 0x7c00u || (h[i] & 0x3ffu) == 0 : h[i] != wb) {
        if (bad++ < 5) FAIL_CHECK("float16(" << f[i] << ") has bits " << h[i] << ", want " << wb);
      }
    }
    CHECK(bad == 0);
    auto w = raw_output<float>(g, k++);
    bad = 0;
    for (uint32_t i = 0; i < 65536; ++i) {
      _Float16 hv;
      uint16_t hb = uint16_t(i);
      std::memcpy(&hv, &hb, 2);
      const float want = static_cast<float>(hv);
      if (std::isnan(want) ? !std::isnan(w[i]) : bits_of(w[i]) != bits_of(want)) ++bad;
    }
    CHECK(bad == 0);  // every float16 bit pattern widens exactly
  }
  CHECK(raw_output<int32_t>(g, k++) == std::vector<int32_t>{1, -1, 0, 0, 1000000000, -2147483520, 0});
  CHECK(raw_output<float>(g, k++) == std::vector<float>{16777216.f, 16777220.f, -7.f, 2147483648.f, -2147483648.f, 0.f});
  CHECK(raw_output<int32_t>(g, k++) == std::vector<int32_t>{5, -5, 3, int32_t(uint32_t(uint64_t(-(int64_t(1) << 33) - 1)))});
  CHECK(raw_output<int64_t>(g, k++) == std::vector<int64_t>{5, -5, 2147483647, -2147483648LL});
  auto same = raw_output<uint32_t>(g, k++);
  for (size_t i = 0; i < f.size(); ++i) CHECK(same[i] == bits_of(f[i]));
  no_validation_messages();
}

TEST_CASE("cast: refused with a reason for pairs without a kernel") {
  IrGraph g;
  auto val = [&](nxrt_dtype t) {
    IrValue v;
    v.name = "v" + std::to_string(g.values.size());
    v.dtype = t;
    v.rank = 1;
    v.dims = {4};
    return g.add_value(v);
  };
  auto cast_node = [&](nxrt_dtype from, nxrt_dtype to) {
    IrNode n;
    n.op = "Cast";
    n.opset = 13;
    n.in = {val(from)};
    n.out = {val(to)};
    n.attrs["to"] = ai(to);
    return n;
  };
  DeviceLimits with16, without16;
  with16.storage16 = true;
  without16.storage16 = false;
  CHECK(!check_node(g, cast_node(NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT16), with16));
  CHECK(!check_node(g, cast_node(NXRT_DTYPE_INT64, NXRT_DTYPE_INT32), without16));
  auto r = check_node(g, cast_node(NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT16), without16);
  REQUIRE(r);
  CHECK(r->message.find("needs storageBuffer16BitAccess") != std::string::npos);
  r = check_node(g, cast_node(NXRT_DTYPE_FLOAT64, NXRT_DTYPE_FLOAT32), with16);
  REQUIRE(r);
  CHECK(r->message == "Cast from float64 to float32 is not implemented (float32<->float16, float32<->int32, int64<->int32)");
}

TEST_CASE("claims are exact") {
  IrGraph g;
  IrValue f;
  f.dtype = NXRT_DTYPE_FLOAT32;
  f.rank = 4;
  f.dims = {1, 3, 8, 8};
  int a = g.add_value(f), o = g.add_value(f);
  IrValue h = f;
  h.dtype = NXRT_DTYPE_FLOAT16;
  int hv = g.add_value(h);
  IrNode n;
  n.op = "Relu";
  n.opset = 17;
  n.in = {hv};
  n.out = {o};
  CHECK(check_node(g, n, {})->reason == NXRT_REFUSE_DTYPE);
  n.op = "MaxPool";
  n.in = {a};
  n.attrs["kernel_shape"] = ais({2, 2});
  CHECK(!check_node(g, n, {}));
  n.attrs["bogus"] = ai(1);
  CHECK(check_node(g, n, {})->reason == NXRT_REFUSE_ATTRIBUTE);
  n.attrs.erase("bogus");
  n.attrs["auto_pad"].type = NXRT_ATTR_STRING;
  n.attrs["auto_pad"].s = "WEIRD";
  CHECK(check_node(g, n, {})->reason == NXRT_REFUSE_ATTRIBUTE);
  n.op = "NonZero";
  CHECK(check_node(g, n, {})->reason == NXRT_REFUSE_OP);
  DeviceLimits tiny;
  tiny.max_storage_range = 16;
  n.op = "Relu";
  n.attrs.clear();
  CHECK(check_node(g, n, tiny)->reason == NXRT_REFUSE_SHAPE);
}

TEST_CASE("pipeline cache saves and loads") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  std::string path = "/tmp/nxrt_vk_test_cache.bin";
  std::remove(path.c_str());
  {
    Device d(0, path);
    d.pipeline(Shader::matmul, std::vector<uint32_t>{256, 64, 64, 16, 4, 4});
  }
  FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f);
  std::fseek(f, 0, SEEK_END);
  CHECK(std::ftell(f) > 36);
  std::fclose(f);
  {
    Device d(0, path);  // loads it back (a corrupt or foreign file would be ignored)
    CHECK(d.pipeline_cache_loaded() > 0);
    d.pipeline(Shader::matmul, std::vector<uint32_t>{256, 64, 64, 16, 4, 4});
  }
  {
    FILE* g = std::fopen(path.c_str(), "wb");  // a foreign file: ignored, then overwritten
    std::fputs("not a pipeline cache, but long enough to have a header......", g);
    std::fclose(g);
    Device d(0, path);
    CHECK(d.pipeline_cache_loaded() == 0);
  }
  std::remove(path.c_str());
  no_validation_messages();
}

// ---------------------------------------------------------------- device profiling

TEST_CASE("device profiling: ticks to ns (mask, wrap, period)") {
  CHECK(ticks_to_ns(100, 250, 64, 1.0) == std::pair<uint64_t, uint64_t>{100, 250});
  CHECK(ticks_to_ns(100, 250, 64, 2.5) == std::pair<uint64_t, uint64_t>{250, 625});
  // Bits above timestampValidBits are undefined: masked off.
  CHECK(ticks_to_ns((7ull << 40) | 10, (3ull << 40) | 30, 32, 1.0) == std::pair<uint64_t, uint64_t>{10, 30});
  // A 32-bit counter that wrapped between the writes.
  CHECK(ticks_to_ns(0xFFFFFFF0ull, 0x10, 32, 1.0) == std::pair<uint64_t, uint64_t>{0xFFFFFFF0ull, 0x100000010ull});
  CHECK(ticks_to_ns(5, 5, 64, 1.0).second == 5);
}

namespace {
// A Conv -> Relu group (fused into one dispatch) on fixed allocations, so the
// command buffer is reused across runs with the same bindings.
struct ConvGroup {
  IrGraph g;
  DT x, w, b;
  Alloc* out = nullptr;
  uint64_t out_bytes = 0;
  std::unique_ptr<Program> p;
  ConvGroup() {
    auto xv = randv(1 * 16 * 24 * 24, -1, 1, 41), wv = randv(32 * 16 * 3 * 3, -1, 1, 42), bv = randv(32, -1, 1, 43);
    x = DT(xv.data(), {1, 16, 24, 24});
    w = DT(wv.data(), {32, 16, 3, 3});
    b = DT(bv.data(), {32});
    auto val = [&](const std::string& n, Shape d) {
      IrValue v;
      v.name = n;
      v.dtype = NXRT_DTYPE_FLOAT32;
      v.rank = d.empty() ? -1 : int64_t(d.size());  // outputs: shape unknown until run time
      v.dims = std::move(d);
      return g.add_value(v);
    };
    int ix = val("x", {1, 16, 24, 24}), iw = val("w", {32, 16, 3, 3}), ib = val("b", {32});
    int c = val("c", {}), y = val("y", {});
    g.inputs = {ix, iw, ib};
    IrNode conv;
    conv.op = "Conv";
    conv.opset = 17;
    conv.in = {ix, iw, ib};
    conv.out = {c};
    conv.attrs = {{"kernel_shape", ais({3, 3})}, {"pads", ais({1, 1, 1, 1})}};
    conv.index = 7;
    IrNode relu;
    relu.op = "Relu";
    relu.opset = 17;
    relu.in = {c};
    relu.out = {y};
    relu.index = 9;
    g.nodes = {conv, relu};
    g.outputs = {y};
    out_bytes = 32 * 24 * 24 * 4;
    out = device().alloc(out_bytes, false);
    p = std::make_unique<Program>(device(), g);
  }
  std::shared_ptr<Timing> run(Stream& s, bool profile) {
    std::vector<Program::Input> in{{x.loc(), x.dims}, {w.loc(), w.dims}, {b.loc(), b.dims}};
    return p->run(in, [&](size_t, nxrt_dtype, const Shape&) { return Loc{out, 0, out_bytes}; }, s, profile);
  }
  ~ConvGroup() {
    p.reset();
    device().free(out);
    for (DT* t : {&x, &w, &b}) device().free(t->a);
  }
};
}  // namespace

TEST_CASE("device profiling: a profiled Program execution has timestamps; reuse and re-recording") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  if (!device().timestamps()) NXRT_SKIP_CASE(kNoTimestamps);
  ConvGroup cg;
  Stream s(device());
  CHECK(cg.p->first_node() == 7);
  CHECK(cg.p->op_types() == "Conv+Relu");  // before epilogue fusion
  // Not profiled: no Timing, then the command buffer is reused.
  CHECK(cg.run(s, false) == nullptr);
  CHECK(!cg.p->last_run_reused());
  CHECK(cg.run(s, false) == nullptr);
  CHECK(cg.p->last_run_reused());
  // Profiled: re-recorded once with the timestamps, then reused with them.
  auto t1 = cg.run(s, true);
  REQUIRE(t1);
  CHECK(!cg.p->last_run_reused());
  s.synchronize();
  auto [s1, e1] = t1->read();
  CHECK(t1->node == 7);
  CHECK(t1->name == "Conv+Relu");
  CHECK(e1 > s1);  // a 32x16x3x3 Conv over 24x24 takes measurable time, even on lavapipe
  MESSAGE("Conv+Relu device time: " << (e1 - s1) << " ns");
  CHECK(t1->read() == std::pair{s1, e1});  // kept
  // Resubmitted before the previous Timing was read: the Program keeps its values.
  auto t2 = cg.run(s, true);
  CHECK(cg.p->last_run_reused());
  auto t3 = cg.run(s, true);
  CHECK(cg.p->last_run_reused());
  s.synchronize();
  auto [s2, e2] = t2->read();
  auto [s3, e3] = t3->read();
  CHECK(e2 > s2);
  CHECK(e3 > s3);
  CHECK(s2 >= e1);  // the device clock moves forward between submissions
  CHECK(s3 >= e2);
  // A long group's name is shortened.
  {
    IrGraph lg;
    IrValue v;
    v.name = "x";
    v.dtype = NXRT_DTYPE_FLOAT32;
    v.rank = 1;
    v.dims = {4};
    int prev = lg.add_value(v);
    lg.inputs = {prev};
    for (int i = 0; i < 30; ++i) {
      IrValue o;
      o.name = "r" + std::to_string(i);
      o.dtype = NXRT_DTYPE_FLOAT32;
      int out = lg.add_value(o);
      IrNode n;
      n.op = "Relu";
      n.opset = 17;
      n.in = {prev};
      n.out = {out};
      n.index = size_t(i);
      lg.nodes.push_back(n);
      prev = out;
    }
    lg.outputs = {prev};
    Program lp(device(), lg);
    const std::string& name = lp.op_types();
    CHECK(name.rfind("Relu+Relu+", 0) == 0);
    CHECK(name.size() <= 64 + 16);
    CHECK(name.substr(name.size() - 14) == "+...(30 nodes)");
  }
  // Back to not profiled: re-recorded without the queries.
  CHECK(cg.run(s, false) == nullptr);
  CHECK(!cg.p->last_run_reused());
  s.synchronize();
  no_validation_messages();
}

TEST_CASE("device profiling: overlapping runs keep their own kernel events") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  RunRegistry runs;
  CHECK(!runs.profiled(1));  // never started (a host without run hooks)
  runs.start(1, true);
  runs.start(2, false);
  runs.start(3, true, {{"vulkan.x", "1"}});
  CHECK(runs.profiled(1));
  CHECK(!runs.profiled(2));
  CHECK(runs.profiled(3));
  if (!device().timestamps()) NXRT_SKIP_CASE(kNoTimestamps);
  ConvGroup a, b;
  Stream s(device());
  // Interleaved: run 1 and run 3 both use kernel a (a is resubmitted before run 1
  // ended), run 3 runs kernel b twice; run 2 is not profiled.
  runs.add(1, a.run(s, runs.profiled(1)));
  runs.add(3, a.run(s, runs.profiled(3)));
  runs.add(2, b.run(s, runs.profiled(2)));
  runs.add(3, b.run(s, runs.profiled(3)));
  runs.add(3, b.run(s, runs.profiled(3)));
  s.synchronize();
  CHECK(runs.finish(2, true).empty());
  auto e1 = runs.finish(1, true);
  auto e3 = runs.finish(3, true);
  REQUIRE(e1.size() == 1);
  REQUIRE(e3.size() == 3);
  for (auto* v : {&e1, &e3})
    for (auto& e : *v) {
      CHECK(e.end_ns > e.start_ns);
      CHECK(e.node == 7);
      CHECK(e.name == "Conv+Relu");
    }
  // In submission order on one stream: run 1's kernel before run 3's.
  CHECK(e3[0].start_ns >= e1[0].end_ns);
  CHECK(e3[1].start_ns >= e3[0].end_ns);
  CHECK(e3[2].start_ns >= e3[1].end_ns);
  CHECK(runs.open_runs() == 0);
  CHECK(runs.finish(1, true).empty());  // forgotten
  // A failed run (read = false) is forgotten without reading.
  runs.start(4, true);
  runs.add(4, a.run(s, true));
  s.synchronize();
  CHECK(runs.finish(4, false).empty());
  no_validation_messages();
}

// ---------------------------------------------------------------- ABI 2.1 interop

namespace {

VkSemaphore make_timeline(Device& d) {
  VkSemaphoreTypeCreateInfo tci{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  tci.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  sci.pNext = &tci;
  VkSemaphore s = VK_NULL_HANDLE;
  check_vk(vkCreateSemaphore(d.handle(), &sci, nullptr, &s), "vkCreateSemaphore");
  return s;
}
uint64_t counter(Device& d, VkSemaphore s) {
  uint64_t v = 0;
  check_vk(vkGetSemaphoreCounterValue(d.handle(), s, &v), "vkGetSemaphoreCounterValue");
  return v;
}
// The status code `f` fails with (NXRT_OK when it does not), its message in *msg.
template <typename F>
nxrt_status_code error_of(F&& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const nxrt::sdk::Error& e) {
    if (msg) *msg = e.what();
    return e.code();
  }
  return NXRT_OK;
}
std::vector<float> read_back(Device& d, Alloc* a, size_t n) {
  std::vector<float> v(n);
  CopyOp op{{a, nullptr, 0}, {nullptr, (char*)v.data(), 0}, n * 4};
  copy(d, std::span(&op, 1), nullptr);
  return v;
}

// A caller's allocator: real vkAllocateMemory on the device of the request, counting what
// is live, checking every request's fields.
struct TestAllocator {
  VkDevice device = VK_NULL_HANDLE;  // the device requests must name
  bool refuse = false;
  int calls = 0, frees = 0;
  uint64_t live = 0;
  std::map<uint64_t, std::pair<VkDevice, uint64_t>> blocks;  // memory -> (device, bytes)
  std::vector<std::string> problems;

  nxrt_device_allocator table() {
    nxrt_device_allocator a{};
    a.struct_size = sizeof a;
    a.user = this;
    a.alloc = &alloc_cb;
    a.free = &free_cb;
    return a;
  }
  static int32_t alloc_cb(void* user, const nxrt_allocation_request* rq, nxrt_native_handle* out) {
    auto* self = static_cast<TestAllocator*>(user);
    if (self->refuse) return 1;
    if (rq->struct_size < sizeof *rq || rq->type != NXRT_NATIVE_VULKAN_MEMORY || rq->reserved0 != 0)
      self->problems.push_back(fmt::format("request struct_size {} type {}", rq->struct_size, rq->type));
    if (rq->device != handle_u64(self->device)) self->problems.push_back("request names another device");
    if (rq->alignment == 0 || (rq->alignment & (rq->alignment - 1)))
      self->problems.push_back(fmt::format("alignment {}", rq->alignment));
    auto dev = handle_from_u64<VkDevice>(rq->device);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = rq->bytes;
    ai.memoryTypeIndex = rq->memory_type_index;
    VkDeviceMemory m = VK_NULL_HANDLE;
    if (vkAllocateMemory(dev, &ai, nullptr, &m) != VK_SUCCESS) return 1;
    out->type = NXRT_NATIVE_VULKAN_MEMORY;
    out->handle = handle_u64(m);
    out->value = rq->memory_type_index;
    out->size = rq->bytes;
    self->blocks[out->handle] = {dev, rq->bytes};
    self->live += rq->bytes;
    ++self->calls;
    return 0;
  }
  static void free_cb(void* user, const nxrt_native_handle* h) {
    auto* self = static_cast<TestAllocator*>(user);
    auto it = self->blocks.find(h->handle);
    if (it == self->blocks.end() || h->type != NXRT_NATIVE_VULKAN_MEMORY) {
      self->problems.push_back("free of a handle the allocator did not return");
      return;
    }
    vkFreeMemory(it->second.first, handle_from_u64<VkDeviceMemory>(h->handle), nullptr);
    self->live -= it->second.second;
    self->blocks.erase(it);
    ++self->frees;
  }
};

nxrt_copy_region region(nxrt_memory_kind sk, const void* src, uint64_t so, nxrt_memory_kind dk, void* dst, uint64_t doff,
                        uint64_t bytes) {
  nxrt_copy_region r{};
  r.struct_size = sizeof r;
  r.src_memory = sk;
  r.dst_memory = dk;
  r.src = src;
  r.dst = dst;
  r.src_offset = so;
  r.dst_offset = doff;
  r.bytes = bytes;
  return r;
}

}  // namespace

TEST_CASE("native handles: device, queue, buffer, stream timeline") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  Device& d = device();
  auto dh = native_handle(d, NXRT_NATIVE_OBJECT_DEVICE, nullptr, nullptr);
  CHECK(dh.struct_size == sizeof dh);
  CHECK(dh.type == NXRT_NATIVE_VULKAN_DEVICE);
  CHECK(dh.handle == handle_u64(d.handle()));
  CHECK(dh.aux0 == handle_u64(d.info().handle));
  CHECK(dh.aux1 == handle_u64(Instance::get().handle()));
  CHECK(dh.value == d.info().queue_family);
  auto qh = native_handle(d, NXRT_NATIVE_OBJECT_QUEUE, nullptr, nullptr);
  CHECK(qh.type == NXRT_NATIVE_VULKAN_QUEUE);
  CHECK(qh.handle == handle_u64(d.queue()));
  CHECK(qh.value == d.info().queue_family);

  Alloc* a = d.alloc(1000, false);
  auto bh = native_handle(d, NXRT_NATIVE_OBJECT_MEMORY, a, nullptr);
  CHECK(bh.type == NXRT_NATIVE_VULKAN_BUFFER);
  CHECK(bh.handle == handle_u64(a->buffer));
  CHECK(bh.value == 0);
  CHECK(bh.size == a->size);
  CHECK(bh.size >= 1000);
  // Only live DEVICE allocations: not NULL, not a pinned one, not one already freed.
  Alloc* pin = d.alloc(1000, true);
  std::string msg;
  CHECK(error_of([&] { native_handle(d, NXRT_NATIVE_OBJECT_MEMORY, nullptr, nullptr); }) == NXRT_INVALID_ARGUMENT);
  CHECK(error_of([&] { native_handle(d, NXRT_NATIVE_OBJECT_MEMORY, pin, nullptr); }, &msg) == NXRT_INVALID_ARGUMENT);
  CHECK(msg.find("not a DEVICE allocation") != std::string::npos);
  CHECK(error_of([&] { native_handle(d, NXRT_NATIVE_OBJECT_MEMORY, pin->mapped, nullptr); }) == NXRT_INVALID_ARGUMENT);
  d.free(pin);
  CHECK(error_of([&] { native_handle(d, nxrt_native_object(42), nullptr, nullptr); }) == NXRT_UNSUPPORTED);

  // A stream's handle is its timeline and the point everything queued so far reaches;
  // waits recorded on it are flushed first, so the point covers them.
  Stream s1(d), s2(d);
  auto sh = native_handle(d, NXRT_NATIVE_OBJECT_STREAM, nullptr, &s1);
  CHECK(sh.type == NXRT_NATIVE_VULKAN_TIMELINE);
  CHECK(sh.handle == handle_u64(s1.timeline()->sem));
  CHECK(sh.value == 0);
  Alloc* b = d.alloc(1000, false);
  CopyOp dd[] = {{{a, nullptr, 0}, {b, nullptr, 0}, 1000}};
  VkCommandBuffer cmd = s1.begin_transient();
  s1.submit_transient(cmd);
  CHECK(native_handle(d, NXRT_NATIVE_OBJECT_STREAM, nullptr, &s1).value == 1);
  Event e;
  e.record(s1);
  e.wait_on(s2);
  CHECK(!s2.idle());  // a pending wait is work: no host-side shortcut past it
  auto sh2 = native_handle(d, NXRT_NATIVE_OBJECT_STREAM, nullptr, &s2);
  CHECK(sh2.handle == handle_u64(s2.timeline()->sem));
  CHECK(sh2.value == 1);  // the flushed wait
  copy(d, dd, &s2);
  s2.synchronize();
  CHECK(counter(d, s2.timeline()->sem) >= sh2.value);
  CHECK(error_of([&] { native_handle(d, NXRT_NATIVE_OBJECT_STREAM, nullptr, nullptr); }) == NXRT_INVALID_ARGUMENT);
  s1.synchronize();
  d.free(a);
  CHECK(error_of([&] { native_handle(d, NXRT_NATIVE_OBJECT_MEMORY, a, nullptr); }) == NXRT_INVALID_ARGUMENT);
  d.free(b);
  no_validation_messages();
}

TEST_CASE("imported stream: waits for the caller's timeline work, continues its timeline, never owns it") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  Device& d = device();
  const size_t n = 4096;
  Alloc* src = d.alloc(n * 4, false);
  Alloc* dst = d.alloc(n * 4, false);
  Alloc* dst2 = d.alloc(n * 4, false);
  // Zeros first: a copy that ran before the caller's fill would read them.
  std::vector<float> zeros(n, 0.f);
  for (Alloc* a : {src, dst, dst2}) {
    CopyOp z{{nullptr, (char*)zeros.data(), 0}, {a, nullptr, 0}, n * 4};
    copy(d, std::span(&z, 1), nullptr);
  }

  // The caller's work on the device's queue: once the host opens `gate`, fill src with
  // 1.0f and signal `caller` = 1.
  VkSemaphore caller = make_timeline(d), gate = make_timeline(d);
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.queueFamilyIndex = d.info().queue_family;
  VkCommandPool pool = VK_NULL_HANDLE;
  check_vk(vkCreateCommandPool(d.handle(), &pci, nullptr, &pool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  check_vk(vkAllocateCommandBuffers(d.handle(), &ai, &cmd), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check_vk(vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
  vkCmdFillBuffer(cmd, src->buffer, 0, n * 4, 0x3f800000u);  // 1.0f
  check_vk(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  uint64_t wait_value = 1, signal_value = 1;
  VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  ti.waitSemaphoreValueCount = 1;
  ti.pWaitSemaphoreValues = &wait_value;
  ti.signalSemaphoreValueCount = 1;
  ti.pSignalSemaphoreValues = &signal_value;
  VkPipelineStageFlags stage = VK_PIPELINE_STAGE_TRANSFER_BIT;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &ti;
  si.waitSemaphoreCount = 1;
  si.pWaitSemaphores = &gate;
  si.pWaitDstStageMask = &stage;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &caller;
  d.submit(si);

  {
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    h.type = NXRT_NATIVE_VULKAN_TIMELINE;
    h.handle = handle_u64(caller);
    h.value = 1;
    std::unique_ptr<Stream> s = import_stream(d, h);
    CHECK(s->timeline()->sem == caller);
    CHECK(s->value() == 1);
    CHECK(!s->idle());  // the caller's point is not reached
    CopyOp dd{{src, nullptr, 0}, {dst, nullptr, 0}, n * 4};
    copy(d, std::span(&dd, 1), s.get());
    // An event recorded on the imported stream orders a plugin stream after it.
    Event e;
    e.record(*s);
    Stream s2(d);
    e.wait_on(s2);
    CopyOp dd2{{dst, nullptr, 0}, {dst2, nullptr, 0}, n * 4};
    copy(d, std::span(&dd2, 1), &s2);
    auto sh = native_handle(d, NXRT_NATIVE_OBJECT_STREAM, nullptr, s.get());
    CHECK(sh.handle == handle_u64(caller));
    CHECK(sh.value == 2);  // first submission: waits 1, signals 2
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(!s->idle());
    CHECK(counter(d, caller) == 0);

    VkSemaphoreSignalInfo sig{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
    sig.semaphore = gate;
    sig.value = 1;
    check_vk(vkSignalSemaphore(d.handle(), &sig), "vkSignalSemaphore");
    s->synchronize();
    CHECK(s->idle());
    CHECK(counter(d, caller) == 2);
    CHECK(read_back(d, dst, n) == std::vector<float>(n, 1.f));
    s2.synchronize();
    CHECK(read_back(d, dst2, n) == std::vector<float>(n, 1.f));
    // Later work continues the caller's timeline (transient command buffers retire).
    VkCommandBuffer c = s->begin_transient();
    CHECK(s->submit_transient(c) == 3);
    CHECK(native_handle(d, NXRT_NATIVE_OBJECT_STREAM, nullptr, s.get()).value == 3);
    s->synchronize();
  }
  // The stream is gone; the semaphore is still the caller's, alive, at the last point.
  CHECK(counter(d, caller) == 3);

  std::string msg;
  nxrt_native_handle bad{};
  bad.struct_size = sizeof bad;
  bad.type = NXRT_NATIVE_VULKAN_MEMORY;
  bad.handle = handle_u64(caller);
  CHECK(error_of([&] { import_stream(d, bad); }, &msg) == NXRT_INVALID_ARGUMENT);
  CHECK(msg.find("NXRT_NATIVE_VULKAN_TIMELINE") != std::string::npos);
  bad.type = NXRT_NATIVE_VULKAN_TIMELINE;
  bad.handle = 0;
  CHECK(error_of([&] { import_stream(d, bad); }, &msg) == NXRT_INVALID_ARGUMENT);
  CHECK(msg.find("handle is 0") != std::string::npos);

  d.queue_wait_idle();
  vkDestroyCommandPool(d.handle(), pool, nullptr);
  vkDestroySemaphore(d.handle(), caller, nullptr);
  vkDestroySemaphore(d.handle(), gate, nullptr);
  for (Alloc* a : {src, dst, dst2}) d.free(a);
  no_validation_messages();
}

TEST_CASE("external allocator: every block (device, pinned, staging) comes from it and goes back") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  TestAllocator ta;
  {
    Device d(0);
    ta.device = d.handle();
    auto table = ta.table();
    d.set_allocator(table);
    CHECK(d.counters().stats().reserved_bytes == 0);
    // A refusal is OUT_OF_MEMORY and leaks nothing (the device's teardown would report a buffer).
    ta.refuse = true;
    CHECK(error_of([&] { d.alloc(1024, false); }) == NXRT_OUT_OF_MEMORY);
    ta.refuse = false;
    CHECK(ta.calls == 0);

    std::vector<Alloc*> small = {d.alloc(1000, false), d.alloc(5000, false), d.alloc(4096, true), d.alloc(300, true)};
    Alloc* big = d.alloc(20ull << 20, false);     // dedicated block
    Alloc* big_pin = d.alloc(20ull << 20, true);  // dedicated, mapped
    CHECK(ta.calls >= 3);
    CHECK(ta.live > 40ull << 20);
    CHECK(d.counters().stats().reserved_bytes == ta.live);
    // Too late once memory was allocated.
    std::string msg;
    CHECK(error_of([&] { d.set_allocator(table); }, &msg) == NXRT_INVALID_ARGUMENT);
    CHECK(msg.find("already allocated") != std::string::npos);

    // Data through the caller's memory: host -> device (staged), device -> device,
    // device -> mapped pinned memory, host-visible mapping of an external block.
    auto h = randv(4096);
    Stream s0(d), s(d);
    s0.submit_transient(s0.begin_transient());
    Event e;
    e.record(s0);
    e.wait_on(s);  // s is not idle: host data goes through a pinned staging buffer
    const uint64_t count = d.counters().stats().allocation_count;
    CopyOp up{{nullptr, (char*)h.data(), 0}, {small[1], nullptr, 0}, 4096};
    copy(d, std::span(&up, 1), &s);
    s.synchronize();
    CHECK(d.counters().stats().allocation_count == count + 1);
    CopyOp dd{{small[1], nullptr, 0}, {big, nullptr, 1024}, 4096};
    copy(d, std::span(&dd, 1), nullptr);
    CopyOp down{{big, nullptr, 1024}, {nullptr, big_pin->mapped + 4096, 0}, 4096};
    copy(d, std::span(&down, 1), nullptr);
    CHECK(std::memcmp(big_pin->mapped + 4096, h.data(), 4096) == 0);
    CopyOp down2{{big, nullptr, 1024}, {nullptr, (char*)h.data(), 0}, 4096};  // staged read-back on a stream
    std::fill(h.begin(), h.end(), 0.f);
    copy(d, std::span(&down2, 1), &s);
    s.synchronize();
    CHECK(std::memcmp(big_pin->mapped + 4096, h.data(), 4096) == 0);
    CHECK(d.counters().stats().reserved_bytes == ta.live);

    // A dedicated block goes back as soon as its allocation is freed.
    const int frees = ta.frees;
    const uint64_t live = ta.live;
    d.free(big);
    CHECK(ta.frees == frees + 1);
    CHECK(ta.live == live - (20ull << 20));
    CHECK(d.counters().stats().reserved_bytes == ta.live);
    for (Alloc* a : small) d.free(a);
    d.free(big_pin);
    auto st = d.counters().stats();
    CHECK(st.bytes_in_use == 0);
    CHECK(st.reserved_bytes == ta.live);  // shared blocks stay until the device goes
    CHECK(st.allocation_count >= small.size() + 2);
  }
  CHECK(ta.live == 0);
  CHECK(ta.calls == ta.frees);
  CHECK(ta.blocks.empty());
  for (auto& p : ta.problems) MESSAGE(p);
  CHECK(ta.problems.empty());
  no_validation_messages();
}

TEST_CASE("memory stats: allocations, reserved blocks and copies by direction") {
  if (!have_device()) NXRT_SKIP_CASE(no_device());
  Device d(0);
  auto st = d.counters().stats();
  CHECK(st.struct_size == sizeof st);
  CHECK(st.bytes_in_use == 0);
  CHECK(st.reserved_bytes == 0);  // the device allocates nothing until asked
  Alloc* a = d.alloc(4096, false);
  Alloc* b = d.alloc(4096, false);
  Alloc* pin = d.alloc(4096, true);
  st = d.counters().stats();
  CHECK(st.bytes_in_use == 3 * 4096);
  CHECK(st.allocation_count == 3);
  CHECK(st.reserved_bytes >= 3 * 4096);

  auto h = randv(1024);
  std::vector<float> back(1024, 0.f), host2(1024, 0.f);
  auto one = [&](nxrt_copy_region r, Stream* s = nullptr) { copy_regions(d, std::span(&r, 1), s); };
  one(region(NXRT_MEMORY_HOST, h.data(), 0, NXRT_MEMORY_DEVICE, a, 0, 4096));                 // h2d
  one(region(NXRT_MEMORY_DEVICE, a, 0, NXRT_MEMORY_DEVICE, b, 0, 4096));                      // d2d
  one(region(NXRT_MEMORY_DEVICE, b, 0, NXRT_MEMORY_HOST_PINNED, pin->mapped, 0, 4096));      // d2h (pinned is host)
  one(region(NXRT_MEMORY_HOST_PINNED, pin->mapped, 1024, NXRT_MEMORY_DEVICE, b, 2048, 2048));  // h2d from pinned
  one(region(NXRT_MEMORY_DEVICE, b, 0, NXRT_MEMORY_HOST, back.data(), 0, 4096));              // d2h
  one(region(NXRT_MEMORY_HOST, h.data(), 0, NXRT_MEMORY_HOST, host2.data(), 0, 4096));        // host to host: none
  one(region(NXRT_MEMORY_HOST, h.data(), 0, NXRT_MEMORY_DEVICE, a, 0, 0));                    // empty: none
  CHECK(std::memcmp(back.data(), h.data(), 2048) == 0);
  CHECK(std::memcmp(back.data() + 512, h.data() + 256, 2048) == 0);
  CHECK(host2 == h);
  st = d.counters().stats();
  CHECK(st.host_to_device_copies == 2);
  CHECK(st.host_to_device_bytes == 4096 + 2048);
  CHECK(st.device_to_device_copies == 1);
  CHECK(st.device_to_device_bytes == 4096);
  CHECK(st.device_to_host_copies == 2);
  CHECK(st.device_to_host_bytes == 8192);

  // A batch on a stream counts each region.
  Stream s(d);
  // Independent regions (a batch does not order its regions against each other).
  nxrt_copy_region batch[] = {region(NXRT_MEMORY_HOST, h.data(), 0, NXRT_MEMORY_DEVICE, a, 0, 100),
                              region(NXRT_MEMORY_DEVICE, a, 1024, NXRT_MEMORY_DEVICE, b, 256, 200),
                              region(NXRT_MEMORY_DEVICE, b, 2048, NXRT_MEMORY_HOST, back.data(), 0, 300)};
  copy_regions(d, batch, &s);
  s.synchronize();
  st = d.counters().stats();
  CHECK(st.host_to_device_copies == 3);
  CHECK(st.host_to_device_bytes == 4096 + 2048 + 100);
  CHECK(st.device_to_device_copies == 2);
  CHECK(st.device_to_device_bytes == 4096 + 200);
  CHECK(st.device_to_host_copies == 3);
  CHECK(st.device_to_host_bytes == 8192 + 300);

  d.free(a);
  d.free(b);
  d.free(pin);
  st = d.counters().stats();
  CHECK(st.bytes_in_use == 0);
  CHECK(st.peak_bytes_in_use >= 3 * 4096);
  CHECK(st.allocation_count >= 3);  // + staging buffers on devices without mapped device memory
  no_validation_messages();
}
