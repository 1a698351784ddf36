// Case generation and the float64 reference of the diff suite.
#include "diff_cases.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace conf::diff {
namespace {

using Dims = std::vector<int64_t>;

// Broadcast shape of two shapes (numpy rules); false when they do not broadcast.
bool broadcast(const Dims& a, const Dims& b, Dims* out) {
  const size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*out)[i] = da == 1 ? db : da;  // a size-0 dim broadcasts against 1 to 0
  }
  return true;
}

// Flat index into `in` (right-aligned, size-1 dims broadcast) of the output coordinate `coord`.
int64_t source_index(const Dims& in, const Dims& coord) {
  int64_t idx = 0;
  const size_t off = coord.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) idx = idx * in[i] + (in[i] == 1 ? 0 : coord[off + i]);
  return idx;
}

Dims coord_of(int64_t flat, const Dims& dims) {
  Dims c(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    c[i] = flat % dims[i];
    flat /= dims[i];
  }
  return c;
}

int64_t prod(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

nxrt_attribute int_attr(const char* name, int64_t v) {
  nxrt_attribute a;
  a.name = name;
  a.type = NXRT_ATTR_INT;
  a.i = v;
  return a;
}
nxrt_attribute float_attr(const char* name, float v) {
  nxrt_attribute a;
  a.name = name;
  a.type = NXRT_ATTR_FLOAT;
  a.f = v;
  return a;
}
const nxrt_attribute* find_attr(const Case& c, const char* name) {
  for (auto& a : c.attrs)
    if (a.name == name) return &a;
  return nullptr;
}

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t case_seed(uint64_t seed, const std::string& op, int id, uint64_t salt) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : op) h = (h ^ uint8_t(ch)) * 1099511628211ull;
  return mix(mix(seed) ^ mix(h) ^ mix(uint64_t(id) * 7919 + salt * 104729));
}

bool is_binary(const std::string& op) { return op == "Add" || op == "Sub" || op == "Mul" || op == "Div"; }
bool is_softmax(const std::string& op) { return op == "Softmax" || op == "LogSoftmax"; }

// Fixed binary shapes: scalar either side, lower rank either side, size-1 dims
// on either side and on both at once (ranks 0-4).
const std::vector<std::pair<Dims, Dims>>& binary_fixed() {
  static const std::vector<std::pair<Dims, Dims>> v = {
      {{2, 3}, {2, 3}},       {{}, {3}},           {{3}, {}},           {{2, 3}, {3}},
      {{3}, {2, 3}},          {{2, 3}, {2, 1}},    {{2, 1}, {2, 3}},    {{1, 3}, {2, 1}},
      {{2, 1, 4}, {3, 1}},    {{3, 1}, {2, 1, 4}}, {{1}, {2, 3, 4}},    {{2, 3, 4, 5}, {1, 3, 1, 5}},
      {{1, 3, 1, 5}, {2, 3, 4, 5}}, {{4, 1, 1, 5}, {1, 3, 2, 1}}, {{2, 1, 3, 1}, {4, 1, 1}}, {{}, {}},
      // larger than a GPU workgroup and not a multiple of one
      {{3, 1, 257}, {5, 1}}, {{7, 1}, {1, 1000}},
      // ranks 5 and 6, size-1 dims on both sides
      {{2, 1, 3, 1, 2}, {1, 2, 1, 3, 1}}, {{1, 2, 1, 2, 1, 3}, {2, 1, 2, 1, 3, 1}}};
  return v;
}

// Fixed MatMul shapes: batch broadcasting both ways, 1-D operands.
const std::vector<std::pair<Dims, Dims>>& matmul_fixed() {
  static const std::vector<std::pair<Dims, Dims>> v = {
      {{3, 4}, {4, 5}},          {{2, 3, 4}, {4, 5}},       {{3, 4}, {2, 4, 5}},    {{2, 1, 3, 4}, {3, 4, 5}},
      {{3, 3, 4}, {2, 1, 4, 5}}, {{2, 1, 3, 4}, {1, 3, 4, 2}}, {{1, 2, 3, 4}, {2, 1, 4, 5}}, {{4}, {4, 5}},
      {{3, 4}, {4}},             {{4}, {4}},                {{4}, {2, 4, 3}},       {{2, 3, 4}, {4}},
      {{2, 3, 4}, {2, 4, 5}},    {{1, 3, 4}, {2, 4, 5}},
      {{2, 1, 65, 33}, {3, 33, 17}}, {{130}, {130, 70}},  // larger than a GPU workgroup
      {{2, 1, 2, 1, 3, 4}, {1, 2, 1, 2, 4, 2}}};          // rank 6: four batch dims broadcast
  return v;
}

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t s) : g(s) {}
  int64_t in(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); }
  double unit() { return std::uniform_real_distribution<double>(0, 1)(g); }
};

// A random operand pair for a binary op: output rank 0-4, dims 1-5, each operand
// a right-aligned suffix with size-1 dims on either side.
std::pair<Dims, Dims> random_binary(Rng& r) {
  const int64_t rank = r.in(0, 4);
  Dims out(static_cast<size_t>(rank));
  for (auto& d : out) d = r.in(1, 5);
  auto operand = [&] {
    const int64_t rk = r.unit() < 0.3 ? r.in(0, rank) : rank;
    Dims d(out.end() - rk, out.end());
    for (auto& x : d)
      if (r.unit() < 0.35) x = 1;
    return d;
  };
  return {operand(), operand()};
}

std::pair<Dims, Dims> random_matmul(Rng& r) {
  const int64_t M = r.in(1, 5), K = r.in(1, 6), N = r.in(1, 5);
  const int64_t batch_rank = r.in(0, 2);
  Dims batch(static_cast<size_t>(batch_rank));
  for (auto& d : batch) d = r.in(2, 3);
  auto side = [&](int64_t rows, int64_t cols, bool vector_ok) -> Dims {
    if (vector_ok && r.unit() < 0.15) return {rows == K ? rows : cols};
    const int64_t rk = r.in(0, batch_rank);
    Dims d(batch.end() - rk, batch.end());
    for (auto& x : d)
      if (r.unit() < 0.4) x = 1;
    d.push_back(rows);
    d.push_back(cols);
    return d;
  };
  Dims a = side(M, K, true), b = side(K, N, true);
  if (a.size() == 1) a = {K};
  if (b.size() == 1) b = {K};
  return {a, b};
}

}  // namespace

const std::vector<OpSpec>& op_specs() {
  static const std::vector<OpSpec> v = {
      {"Add", "Add", 14, 40, 1e-6, 1e-6},
      {"Sub", "Sub", 14, 40, 1e-6, 1e-6},
      {"Mul", "Mul", 14, 40, 1e-6, 1e-6},
      {"Div", "Div", 14, 40, 1e-5, 1e-6},
      {"Relu", "Relu", 14, 8, 0, 0},
      {"MatMul", "MatMul", 13, 40, 1e-4, 1e-6},
      {"Gemm", "Gemm", 13, 24, 1e-4, 1e-6},
      {"Softmax_11", "Softmax", 11, 16, 1e-4, 1e-6},
      {"Softmax_13", "Softmax", 13, 16, 1e-4, 1e-6},
      {"LogSoftmax_11", "LogSoftmax", 11, 16, 1e-4, 1e-5},
      {"LogSoftmax_13", "LogSoftmax", 13, 16, 1e-4, 1e-5},
  };
  return v;
}

const OpSpec* find_spec(const std::string& id) {
  for (auto& s : op_specs())
    if (s.id == id) return &s;
  return nullptr;
}

std::string Case::describe() const {
  static const char* names[] = {"A", "B", "C"};
  std::string s = fmt::format("{} opset {}{}:", spec->op, spec->opset,
                              dtype == NXRT_DTYPE_FLOAT32 ? "" : std::string(" ") + dtype_name(dtype));
  for (size_t i = 0; i < in_dims.size(); ++i)
    s += fmt::format(" {}{}", is_softmax(spec->op) || spec->op == "Relu" ? "X" : names[i], dims_str(in_dims[i]));
  for (auto& a : attrs)
    s += a.type == NXRT_ATTR_FLOAT ? fmt::format(" {}={}", a.name, a.f) : fmt::format(" {}={}", a.name, a.i);
  return s + " -> " + dims_str(out_dims);
}

int64_t Case::elements() const {
  int64_t n = numel(out_dims);
  for (auto& d : in_dims) n += numel(d);
  return n;
}

Case make_case(const OpSpec& spec, uint64_t seed, int id) {
  Case c;
  c.spec = &spec;
  c.id = id;
  Rng r(case_seed(seed, spec.id, id, 0));
  const std::string& op = spec.op;
  if (is_binary(op)) {
    const auto& fixed = binary_fixed();
    auto ab = size_t(id) < fixed.size() ? fixed[size_t(id)] : random_binary(r);
    c.in_dims = {ab.first, ab.second};
    broadcast(ab.first, ab.second, &c.out_dims);
  } else if (op == "Relu") {
    Dims d(static_cast<size_t>(r.in(0, 4)));
    for (auto& x : d) x = r.in(1, 6);
    if (id == 6) d = {2, 1, 3, 1, 2, 3};  // ranks 6 and 5
    if (id == 7) d = {3, 1, 2, 2, 1};
    c.in_dims = {d};
    c.out_dims = d;
  } else if (op == "MatMul") {
    const auto& fixed = matmul_fixed();
    auto ab = size_t(id) < fixed.size() ? fixed[size_t(id)] : random_matmul(r);
    Dims a = ab.first, b = ab.second;
    c.in_dims = {a, b};
    const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
    if (a_vec) a.insert(a.begin(), 1);
    if (b_vec) b.push_back(1);
    Dims batch;
    broadcast(Dims(a.begin(), a.end() - 2), Dims(b.begin(), b.end() - 2), &batch);
    c.out_dims = batch;
    if (!a_vec) c.out_dims.push_back(a[a.size() - 2]);
    if (!b_vec) c.out_dims.push_back(b.back());
    c.atol_scale = double(a.back());
  } else if (op == "Gemm") {
    const bool large = id == 4 || id == 5;  // larger than a GPU workgroup
    const int64_t M = large ? 65 : r.in(1, 6), K = large ? 129 : r.in(1, 7), N = large ? 33 + id : r.in(1, 6);
    const bool ta = id % 2, tb = (id / 2) % 2;  // every transA/transB pair in the first 4 ids
    c.in_dims = {ta ? Dims{K, M} : Dims{M, K}, tb ? Dims{N, K} : Dims{K, N}};
    const int c_kind = id < 4 ? 4 : int(r.in(0, 6));  // C: none, [N], [1,N], [M,1], [M,N], [1], []
    static const int kinds = 7;
    switch (c_kind % kinds) {
      case 1: c.in_dims.push_back({N}); break;
      case 2: c.in_dims.push_back({1, N}); break;
      case 3: c.in_dims.push_back({M, 1}); break;
      case 4: c.in_dims.push_back({M, N}); break;
      case 5: c.in_dims.push_back({1}); break;
      case 6: c.in_dims.push_back({}); break;
      default: break;
    }
    if (ta) c.attrs.push_back(int_attr("transA", 1));
    if (tb) c.attrs.push_back(int_attr("transB", 1));
    if (id >= 4 && r.unit() < 0.5) c.attrs.push_back(float_attr("alpha", 0.5f));
    if (id >= 4 && c.in_dims.size() == 3 && r.unit() < 0.5) c.attrs.push_back(float_attr("beta", 2.0f));
    c.out_dims = {M, N};
    c.atol_scale = double(K);
  } else {  // Softmax, LogSoftmax: mostly an axis that is not the last one
    static const std::vector<std::pair<Dims, int>> fixed = {
        {{2, 3, 4}, 1}, {{3, 4, 5}, 0}, {{2, 3, 4, 5}, -3}, {{2, 3, 4}, 99}, {{4, 5}, 0}, {{2, 3, 4}, -1},
        {{3, 300, 5}, 1}, {{2, 1030}, 0}};  // the last two: rows longer than a GPU workgroup
    Dims d;
    int axis;
    if (size_t(id) < fixed.size()) {
      std::tie(d, axis) = fixed[size_t(id)];
    } else {
      d.resize(size_t(r.in(2, 4)));
      for (auto& x : d) x = r.in(1, 5);
      const int rank = int(d.size());
      axis = r.unit() < 0.15 ? 99 : int(r.in(-rank, rank - 2));  // 99: attribute absent (default)
    }
    c.in_dims = {d};
    if (axis != 99) c.attrs.push_back(int_attr("axis", axis));
    c.out_dims = d;
  }
  return c;
}

std::vector<HostTensor> make_inputs(const Case& c, uint64_t seed, uint64_t salt) {
  Rng r(case_seed(seed, c.spec->id, c.id, salt + 1));
  std::vector<HostTensor> ins;
  for (size_t k = 0; k < c.in_dims.size(); ++k) {
    HostTensor t;
    t.dims = c.in_dims[k];
    const size_t n = size_t(numel(t.dims));
    t.bytes.resize(n * 4);
    for (size_t i = 0; i < n; ++i) {
      double v = r.unit() * 2 - 1;
      if (is_softmax(c.spec->op)) v *= 3;
      if (c.spec->op == "Div" && k == 1) v = (v < 0 ? -1 : 1) * (0.5 + std::fabs(v) * 1.5);
      const float f = float(v);
      std::memcpy(&t.bytes[i * 4], &f, 4);
    }
    ins.push_back(std::move(t));
  }
  return ins;
}

std::vector<Case> zero_size_cases(const OpSpec& spec) {
  std::vector<Case> v;
  auto add = [&](std::vector<Dims> in, Dims out, std::vector<nxrt_attribute> attrs = {}) {
    Case c;
    c.spec = &spec;
    c.id = 3000 + int(v.size());
    c.in_dims = std::move(in);
    c.out_dims = std::move(out);
    c.attrs = std::move(attrs);
    v.push_back(std::move(c));
  };
  const std::string& op = spec.op;
  if (is_binary(op)) {
    add({{0, 3}, {0, 3}}, {0, 3});
    add({{2, 0}, {2, 1}}, {2, 0});
    add({{2, 0, 3}, {1, 3}}, {2, 0, 3});
    add({{3, 1}, {1, 0}}, {3, 0});
    add({{0}, {}}, {0});
  } else if (op == "Relu") {
    add({{0}}, {0});
    add({{2, 0, 4}}, {2, 0, 4});
  } else if (op == "MatMul") {
    add({{0, 4}, {4, 5}}, {0, 5});
    add({{3, 0}, {0, 5}}, {3, 5});  // an empty reduction: zeros
    add({{3, 4}, {4, 0}}, {3, 0});
    add({{0, 3, 4}, {4, 5}}, {0, 3, 5});
    add({{2, 3, 0}, {2, 0, 4}}, {2, 3, 4});
  } else if (op == "Gemm") {
    add({{3, 0}, {0, 5}, {5}}, {3, 5});  // an empty reduction: beta * C
    add({{0, 4}, {4, 5}, {5}}, {0, 5});
  } else {  // Softmax / LogSoftmax along the last axis
    add({{0, 5}}, {0, 5}, {int_attr("axis", 1)});
    add({{3, 0}}, {3, 0}, {int_attr("axis", 1)});
  }
  return v;
}

std::vector<HostTensor> special_inputs(const Case& c, uint64_t seed) {
  std::vector<HostTensor> in = make_inputs(c, seed, 99);
  const std::string& op = c.spec->op;
  // Where IEEE arithmetic fixes the result: NaN and infinities into arithmetic, not into
  // Relu (NaN: max(0, NaN) is either) or Softmax (an infinite maximum); denormals only
  // into the first input (a denormal divisor with a denormal dividend is 0/0 under DAZ).
  const bool nan_ok = op != "Relu", inf_ok = !is_softmax(op);
  for (size_t k = 0; k < in.size() && k < 2; ++k) {
    float* f = reinterpret_cast<float*>(in[k].bytes.data());
    const size_t n = in[k].bytes.size() / 4;
    for (size_t i = 0; i < n; ++i) {
      switch ((i * 7 + k * 3) % 23) {
        case 0: if (nan_ok) f[i] = NAN; break;
        case 1: if (inf_ok) f[i] = INFINITY; break;
        case 2: if (inf_ok) f[i] = -INFINITY; break;
        case 3: f[i] = -0.0f; break;
        case 4: if (k == 0) f[i] = 1e-40f; break;
        case 5: if (k == 0) f[i] = -3e-42f; break;
        default: break;
      }
    }
  }
  return in;
}

std::vector<double> reference(const Case& c, const std::vector<HostTensor>& inputs) {
  std::vector<std::vector<double>> in;
  for (auto& t : inputs) {
    std::vector<double> v(t.bytes.size() / 4);
    for (size_t i = 0; i < v.size(); ++i) {
      float f;
      std::memcpy(&f, &t.bytes[i * 4], 4);
      v[i] = f;
    }
    in.push_back(std::move(v));
  }
  const std::string& op = c.spec->op;
  const int64_t n = numel(c.out_dims);
  std::vector<double> out(size_t(n), 0);
  if (is_binary(op)) {
    for (int64_t i = 0; i < n; ++i) {
      const Dims co = coord_of(i, c.out_dims);
      const double a = in[0][size_t(source_index(c.in_dims[0], co))], b = in[1][size_t(source_index(c.in_dims[1], co))];
      out[size_t(i)] = op == "Add" ? a + b : op == "Sub" ? a - b : op == "Mul" ? a * b : a / b;
    }
  } else if (op == "Relu") {
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = std::max(in[0][size_t(i)], 0.0);
  } else if (op == "MatMul") {
    Dims a = c.in_dims[0], b = c.in_dims[1];
    if (a.size() == 1) a.insert(a.begin(), 1);
    if (b.size() == 1) b.push_back(1);
    const int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
    const Dims ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    Dims batch;
    broadcast(ab, bb, &batch);
    const int64_t nb = numel(batch);
    for (int64_t bi = 0; bi < nb; ++bi) {
      const Dims co = coord_of(bi, batch);
      const double* pa = in[0].data() + source_index(ab, co) * M * K;
      const double* pb = in[1].data() + source_index(bb, co) * K * N;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += pa[m * K + k] * pb[k * N + j];
          out[size_t((bi * M + m) * N + j)] = s;
        }
    }
  } else if (op == "Gemm") {
    const auto* ta = find_attr(c, "transA");
    const auto* tb = find_attr(c, "transB");
    const auto* al = find_attr(c, "alpha");
    const auto* be = find_attr(c, "beta");
    const bool tA = ta && ta->i, tB = tb && tb->i;
    const double alpha = al ? al->f : 1.0, beta = be ? be->f : 1.0;
    const int64_t M = c.out_dims[0], N = c.out_dims[1], K = tA ? c.in_dims[0][0] : c.in_dims[0][1];
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += in[0][size_t(tA ? k * M + m : m * K + k)] * in[1][size_t(tB ? j * K + k : k * N + j)];
        double cv = 0;
        if (in.size() > 2) cv = in[2][size_t(source_index(c.in_dims[2], {m, j}))];
        out[size_t(m * N + j)] = alpha * s + beta * cv;
      }
  } else {  // Softmax / LogSoftmax
    const Dims& d = c.in_dims[0];
    const int64_t rank = int64_t(d.size());
    const auto* ax = find_attr(c, "axis");
    int64_t axis = ax ? ax->i : (c.spec->opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    // Opset < 13: the input is coerced to 2-D [prod(d[:axis]), prod(d[axis:])] and each
    // row is normalized; opset 13: normalized along `axis` alone.
    const int64_t outer = prod(d, 0, size_t(axis));
    const int64_t len = c.spec->opset >= 13 ? d[size_t(axis)] : prod(d, size_t(axis), d.size());
    const int64_t inner = c.spec->opset >= 13 ? prod(d, size_t(axis) + 1, d.size()) : 1;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t k) { return size_t((o * len + k) * inner + i); };
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < len; ++k) mx = std::max(mx, in[0][at(k)]);
        for (int64_t k = 0; k < len; ++k) sum += std::exp(in[0][at(k)] - mx);
        for (int64_t k = 0; k < len; ++k)
          out[at(k)] = op == "Softmax" ? std::exp(in[0][at(k)] - mx) / sum : in[0][at(k)] - mx - std::log(sum);
      }
  }
  for (auto& v : out) v = double(float(v));
  return out;
}

std::string compare_ref(const Case& c, const HostTensor& got, const std::vector<double>& ref) {
  if (got.dtype != NXRT_DTYPE_FLOAT32) return fmt::format("output dtype {}, expected float32", dtype_name(got.dtype));
  if (got.dims != c.out_dims)
    return fmt::format("output shape {}, expected {}{}", dims_str(got.dims), dims_str(c.out_dims),
                       c.out_dims.empty() && got.dims == Dims{1} ? " (a scalar is rank 0, not [1])" : "");
  if (got.bytes.size() < ref.size() * 4) return "output buffer smaller than its shape";
  const double rtol = c.spec->rtol, atol = c.spec->atol * c.atol_scale;
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    float g;
    std::memcpy(&g, &got.bytes[i * 4], 4);
    const double d = std::fabs(double(g) - ref[i]);
    // NaN equals NaN and infinities equal exactly (IEEE results of NaN/Inf inputs).
    if (std::isnan(ref[i]) || std::isinf(ref[i]) || std::isnan(g) || std::isinf(g)) {
      if ((std::isnan(ref[i]) && std::isnan(g)) || double(g) == ref[i]) continue;
    } else if (d <= atol + rtol * std::fabs(ref[i])) {
      continue;
    }
    {
      if (bad++ == 0) first = i;
      worst = std::max(worst, std::isnan(d) ? INFINITY : d);
    }
  }
  if (!bad) return "";
  float g;
  std::memcpy(&g, &got.bytes[first * 4], 4);
  return fmt::format("{} of {} elements differ from the float64 reference; first at {} {}: got {:.9g}, expected {:.9g} "
                     "(max abs diff {:.3g}; rtol {:g}, atol {:.3g})",
                     bad, ref.size(), first, dims_str(coord_of(int64_t(first), c.out_dims)), g, ref[first], worst, rtol, atol);
}

// ------------------------------------------------------------------ integer extremes

namespace {
bool is_signed_int(nxrt_dtype t) { return t == NXRT_DTYPE_INT8 || t == NXRT_DTYPE_INT32 || t == NXRT_DTYPE_INT64; }
int bits_of(nxrt_dtype t) { return int(dtype_size(t)) * 8; }
// The element as a signed (sign-extended) or unsigned (zero-extended) 64-bit value.
int64_t load_int(const HostTensor& t, size_t i) {
  const size_t es = dtype_size(t.dtype);
  uint64_t u = 0;
  std::memcpy(&u, &t.bytes[i * es], es);  // little-endian
  const int bits = int(es) * 8;
  if (bits < 64 && is_signed_int(t.dtype) && (u >> (bits - 1)) & 1) u |= ~uint64_t(0) << bits;
  return int64_t(u);
}
void store_int(HostTensor& t, size_t i, uint64_t v) {
  const size_t es = dtype_size(t.dtype);
  std::memcpy(&t.bytes[i * es], &v, es);  // the low bytes: two's-complement wrap-around
}
// min and max of the type, as 64-bit values (uint64's max as its bit pattern).
std::pair<int64_t, int64_t> int_range(nxrt_dtype t) {
  const int bits = bits_of(t);
  if (is_signed_int(t)) return {bits == 64 ? INT64_MIN : -(int64_t(1) << (bits - 1)), bits == 64 ? INT64_MAX : (int64_t(1) << (bits - 1)) - 1};
  return {0, bits == 64 ? -1 : (int64_t(1) << bits) - 1};
}
std::vector<int64_t> extremes(nxrt_dtype t, bool divisor) {
  auto [lo, hi] = int_range(t);
  if (is_signed_int(t)) {
    if (divisor) return {lo, -100, -7, -2, 1, 2, 7, hi};
    return {lo, lo + 1, -100, -1, 0, 1, hi - 1, hi};
  }
  const int64_t half = int64_t(uint64_t(hi) / 2);
  if (divisor) return {1, 2, 3, 7, 100, half + 1, hi - 1, hi};
  return {0, 1, 2, 100, half, half + 1, hi - 1, hi};
}
std::string int_str(nxrt_dtype t, int64_t v) { return is_signed_int(t) ? std::to_string(v) : std::to_string(uint64_t(v)); }
}  // namespace

std::vector<nxrt_dtype> integer_types(const OpSpec& spec) {
  if (is_binary(spec.op)) return {NXRT_DTYPE_INT32, NXRT_DTYPE_INT64, NXRT_DTYPE_INT8, NXRT_DTYPE_UINT8};
  if (spec.op == "Relu" && spec.opset >= 14) return {NXRT_DTYPE_INT32, NXRT_DTYPE_INT64, NXRT_DTYPE_INT8};
  if (spec.op == "MatMul") return {NXRT_DTYPE_INT32, NXRT_DTYPE_INT64};
  return {};
}

std::vector<Case> integer_cases(const OpSpec& spec, nxrt_dtype t) {
  std::vector<Case> v;
  auto add = [&](std::vector<Dims> in, Dims out) {
    Case c;
    c.spec = &spec;
    c.id = 4000 + int(v.size());
    c.dtype = t;
    c.in_dims = std::move(in);
    c.out_dims = std::move(out);
    v.push_back(std::move(c));
  };
  if (is_binary(spec.op)) {
    add({{8, 8}, {8, 8}}, {8, 8});  // every pair of extremes
    add({{8, 1}, {8}}, {8, 8});     // the same pairs by broadcasting
    add({{}, {8}}, {8});            // a scalar against each
  } else if (spec.op == "Relu") {
    add({{2, 8}}, {2, 8});
  } else if (spec.op == "MatMul") {
    add({{3, 8}, {8, 4}}, {3, 4});  // sums of extremes wrap around
    add({{2, 1, 8}, {8}}, {2, 1});
  }
  return v;
}

std::vector<HostTensor> integer_inputs(const Case& c) {
  const bool div = c.spec->op == "Div";
  std::vector<HostTensor> ins;
  for (size_t k = 0; k < c.in_dims.size(); ++k) {
    HostTensor t;
    t.dtype = c.dtype;
    t.dims = c.in_dims[k];
    const size_t n = size_t(numel(t.dims));
    t.bytes.resize(n * dtype_size(c.dtype));
    const std::vector<int64_t> ext = extremes(c.dtype, div && k == 1);
    for (size_t i = 0; i < n; ++i) {
      // A of the grid varies by row, B by column: each pair once. A scalar A is MAX (MIN for Div).
      size_t pick = i;
      if (is_binary(c.spec->op) && k == 0) pick = t.dims.empty() ? (div ? 0 : 7) : t.dims.size() == 2 && t.dims[1] == 8 ? i / 8 : i;
      if (c.spec->op == "MatMul") pick = i * 3 + k;
      store_int(t, i, uint64_t(ext[pick % ext.size()]));
    }
    ins.push_back(std::move(t));
  }
  return ins;
}

HostTensor integer_reference(const Case& c, const std::vector<HostTensor>& in) {
  HostTensor out;
  out.dtype = c.dtype;
  out.dims = c.out_dims;
  const int64_t n = numel(c.out_dims);
  out.bytes.resize(size_t(n) * dtype_size(c.dtype));
  const std::string& op = c.spec->op;
  const bool sgn = is_signed_int(c.dtype);
  if (is_binary(op)) {
    for (int64_t i = 0; i < n; ++i) {
      const Dims co = coord_of(i, c.out_dims);
      const int64_t a = load_int(in[0], size_t(source_index(c.in_dims[0], co)));
      const int64_t b = load_int(in[1], size_t(source_index(c.in_dims[1], co)));
      uint64_t r;
      if (op == "Add") r = uint64_t(a) + uint64_t(b);
      else if (op == "Sub") r = uint64_t(a) - uint64_t(b);
      else if (op == "Mul") r = uint64_t(a) * uint64_t(b);
      else r = sgn ? uint64_t(a / b) : uint64_t(a) / uint64_t(b);  // C++ division truncates toward zero
      store_int(out, size_t(i), r);
    }
  } else if (op == "Relu") {
    for (int64_t i = 0; i < n; ++i) store_int(out, size_t(i), uint64_t(std::max<int64_t>(load_int(in[0], size_t(i)), 0)));
  } else if (op == "MatMul") {
    Dims a = c.in_dims[0], b = c.in_dims[1];
    if (a.size() == 1) a.insert(a.begin(), 1);
    if (b.size() == 1) b.push_back(1);
    const int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
    const Dims ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    Dims batch;
    broadcast(ab, bb, &batch);
    for (int64_t bi = 0; bi < numel(batch); ++bi) {
      const Dims co = coord_of(bi, batch);
      const int64_t oa = source_index(ab, co) * M * K, ob = source_index(bb, co) * K * N;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < N; ++j) {
          uint64_t s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += uint64_t(load_int(in[0], size_t(oa + m * K + k))) * uint64_t(load_int(in[1], size_t(ob + k * N + j)));
          store_int(out, size_t((bi * M + m) * N + j), s);
        }
    }
  }
  return out;
}

std::string compare_integer(const Case& c, const std::vector<HostTensor>& in, const HostTensor& got, const HostTensor& ref) {
  if (got.dtype != c.dtype) return fmt::format("output dtype {}, expected {}", dtype_name(got.dtype), dtype_name(c.dtype));
  if (got.dims != c.out_dims) return fmt::format("output shape {}, expected {}", dims_str(got.dims), dims_str(c.out_dims));
  if (got.bytes.size() < ref.bytes.size()) return "output buffer smaller than its shape";
  const size_t n = size_t(numel(c.out_dims));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i)
    if (load_int(got, i) != load_int(ref, i) && bad++ == 0) first = i;
  if (!bad) return "";
  const int64_t g = load_int(got, first), e = load_int(ref, first);
  std::string msg = fmt::format("{} of {} elements differ (compared exactly); first at {} {}: got {}, expected {}", bad, n, first,
                                dims_str(coord_of(int64_t(first), c.out_dims)), int_str(c.dtype, g), int_str(c.dtype, e));
  const std::string& op = c.spec->op;
  if (is_binary(op)) {
    const Dims co = coord_of(int64_t(first), c.out_dims);
    const int64_t a = load_int(in[0], size_t(source_index(c.in_dims[0], co)));
    const int64_t b = load_int(in[1], size_t(source_index(c.in_dims[1], co)));
    msg += fmt::format(" for A = {}, B = {}", int_str(c.dtype, a), int_str(c.dtype, b));
    if (op == "Div" && is_signed_int(c.dtype)) {
      const int64_t q = a / b, fl = (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
      if (g == fl && fl != q) msg += " (rounded toward -inf: ONNX integer Div truncates toward zero)";
    } else if (op != "Div") {
      // The exact result, clamped to the type: a kernel that saturates gives that instead of wrapping.
      const __int128 x = op == "Add" ? __int128(a) + b : op == "Sub" ? __int128(a) - b : __int128(a) * b;
      auto [lo, hi] = int_range(c.dtype);
      __int128 clamped = x;
      if (is_signed_int(c.dtype)) clamped = std::clamp<__int128>(x, lo, hi);
      else if (bits_of(c.dtype) < 64) clamped = std::clamp<__int128>(x, 0, hi);
      if (clamped != x && int64_t(clamped) == g)
        msg += " (saturated: ONNX integer arithmetic wraps around, two's complement)";
    }
  }
  return msg;
}

}  // namespace conf::diff
