// The ops and models suites: whole ONNX models through libnxrt (nxrt.h),
// with the plugin under test as the only EP and fallback off.
#include <nxrt/nxrt.h>
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "checks.hpp"
#include "tensor_proto.hpp"

namespace fs = std::filesystem;

namespace conf {

bool host_suites_available() { return true; }

namespace {

std::string take_error(nxrt_error* e, nxrt_error_code* code = nullptr) {
  if (!e) return "";
  std::string m = nxrt_error_message(e);
  if (code) *code = nxrt_error_code_of(e);
  nxrt_error_release(e);
  return m.empty() ? "(no message)" : m;
}

const char* error_code_name(nxrt_error_code c) {
  switch (c) {
    case NXRT_ERR_INVALID_ARGUMENT: return "NXRT_ERR_INVALID_ARGUMENT";
    case NXRT_ERR_NOT_FOUND: return "NXRT_ERR_NOT_FOUND";
    case NXRT_ERR_UNSUPPORTED: return "NXRT_ERR_UNSUPPORTED";
    case NXRT_ERR_MODEL: return "NXRT_ERR_MODEL";
    case NXRT_ERR_PLUGIN: return "NXRT_ERR_PLUGIN";
    case NXRT_ERR_BUSY: return "NXRT_ERR_BUSY";
    case NXRT_ERR_RUNTIME: return "NXRT_ERR_RUNTIME";
    default: return "NXRT_ERR_?";
  }
}

struct ModelInfo {
  std::vector<std::string> inputs, outputs;  // graph inputs (no initializers), outputs
  std::vector<HostTensor> input_shapes;      // dtype + dims for generated inputs (-1 -> 1)
  std::string op, dtype;
  std::string non_tensor;  // why the model cannot go through the C API
  size_t nodes = 0;
};

std::string read_model(const std::string& path, ModelInfo& info) {
  std::ifstream f(path, std::ios::binary);
  onnx::ModelProto m;
  if (!f || !m.ParseFromIstream(&f)) return "cannot parse " + path;
  const auto& g = m.graph();
  std::set<std::string> inits;
  for (auto& t : g.initializer()) inits.insert(t.name());
  auto type_ok = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type()) {
      info.non_tensor = "'" + v.name() + "' is a sequence/optional/map; the nxrt C API passes tensors only";
      return false;
    }
    if (v.type().tensor_type().elem_type() == onnx::TensorProto::STRING) {
      info.non_tensor = "'" + v.name() + "' is a string tensor; the nxrt C API passes numeric tensors only";
      return false;
    }
    return true;
  };
  for (auto& v : g.input()) {
    if (inits.count(v.name())) continue;
    info.inputs.push_back(v.name());
    if (!type_ok(v)) continue;
    HostTensor t;
    t.dtype = nxrt_dtype(v.type().tensor_type().elem_type());
    for (auto& d : v.type().tensor_type().shape().dim()) t.dims.push_back(d.has_dim_value() ? d.dim_value() : 1);
    info.input_shapes.push_back(t);
    if (info.dtype.empty()) info.dtype = dtype_name(t.dtype);
  }
  for (auto& v : g.output()) {
    info.outputs.push_back(v.name());
    if (type_ok(v) && info.dtype.empty()) info.dtype = dtype_name(nxrt_dtype(v.type().tensor_type().elem_type()));
  }
  info.nodes = size_t(g.node_size());
  if (g.node_size() >= 1) {
    auto& n = g.node(0);
    info.op = (n.domain().empty() || n.domain() == "ai.onnx" ? "" : n.domain() + "::") + n.op_type();
  }
  return "";
}

// One plugin loaded into a fresh libnxrt environment, one model session.
class HostRun {
 public:
  ~HostRun() {
    if (s_) nxrt_session_release(s_);
    if (m_) nxrt_model_release(m_);
    if (env_) nxrt_env_release(env_);
  }
  // kind: "ok", "plugin" (registration failed), "model" (host cannot load it),
  // "unsupported" (the plugin does not claim every node), "fail".
  // `second` (mixed placement): a second plugin registered after it, the session's EPs
  // "<plugin>,<second>": the plugin takes what it claims, the second plugin the rest.
  std::string open(const std::string& plugin, const std::string& model, uint32_t device, std::string* kind,
                   const std::string& second = "") {
    std::string e = take_error(nxrt_env_create_empty(&env_));
    if (!e.empty()) return *kind = "fail", "nxrt_env_create_empty: " + e;
    const char* name = nullptr;
    nxrt_error_code code{};
    e = take_error(nxrt_env_register_plugin(env_, plugin.c_str(), &name), &code);
    if (!e.empty()) return *kind = "plugin", "libnxrt refused the plugin (" + std::string(error_code_name(code)) + "): " + e;
    name_ = name ? name : "";
    std::string eps = name_;
    if (!second.empty()) {
      name = nullptr;
      e = take_error(nxrt_env_register_plugin(env_, second.c_str(), &name), &code);
      if (!e.empty()) return *kind = "model", "libnxrt refused the reference plugin (" + std::string(error_code_name(code)) + "): " + e;
      second_ = name ? name : "";
      eps += "," + second_;
    }
    e = take_error(nxrt_model_load(model.c_str(), &m_), &code);
    if (!e.empty()) return *kind = "model", "libnxrt cannot load the model (" + std::string(error_code_name(code)) + "): " + e;
    nxrt_session_options o{};
    o.eps = eps.c_str();
    o.fallback = 0;
    o.threads = 0;
    o.device = device;
    {
      Phase ph("nxrt_session_create");
      e = take_error(nxrt_session_create(env_, m_, &o, &s_), &code);
    }
    if (!e.empty()) {
      if (code == NXRT_ERR_UNSUPPORTED && e.find("not supported by the requested EPs") != std::string::npos)
        return *kind = "unsupported", e;
      return *kind = "fail", std::string(second.empty() ? "session_create on the plugin alone failed (" : "session_create on the plugin and " + second_ + " failed (") +
                                 error_code_name(code) + "): " + e;
    }
    *kind = "ok";
    return "";
  }

  std::string run(const std::vector<std::string>& names, const std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
    std::vector<nxrt_host_tensor> ts(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      ts[i].name = names[i].c_str();
      ts[i].dtype = in[i].dtype;
      ts[i].rank = uint32_t(in[i].dims.size());
      ts[i].dims = in[i].dims.data();
      ts[i].data = in[i].bytes.data();
    }
    nxrt_outputs* o = nullptr;
    nxrt_error_code code{};
    std::string e;
    {
      Phase ph("nxrt_session_run");
      e = take_error(nxrt_session_run(s_, ts.data(), ts.size(), &o), &code);
    }
    if (!e.empty()) return std::string("nxrt_session_run failed (") + error_code_name(code) + "): " + e;
    out.clear();
    for (size_t i = 0; i < nxrt_outputs_count(o); ++i) {
      nxrt_host_tensor t = nxrt_outputs_get(o, i);
      HostTensor h;
      h.dtype = nxrt_dtype(t.dtype);
      h.dims.assign(t.dims, t.dims + t.rank);
      size_t bytes = size_t(numel(h.dims)) * dtype_size(h.dtype);
      const uint8_t* p = static_cast<const uint8_t*>(t.data);
      h.bytes.assign(p, p + (p ? bytes : 0));
      out.push_back(std::move(h));
    }
    nxrt_outputs_release(o);
    return "";
  }

  // Every node placed on the plugin under test, except the steps the host runs itself
  // (control flow, sequence and optional ops), whose bodies' nodes must be on the plugin too.
  // `on_plugin`: how many nodes (bodies included) the plugin runs.
  std::string placement(size_t* on_plugin) const {
    *on_plugin = 0;
    for (size_t i = 0; i < nxrt_session_node_count(s_); ++i) {
      nxrt_node_assignment a = nxrt_session_node(s_, i);
      const std::string node = a.node_name ? a.node_name : "?";
      if (a.ep && std::string(a.ep) == "host") {
        // Body lines: "  <node> (<op>): <ep>" ("*" after the EP: by fallback); "<attribute>:" heads.
        std::istringstream lines(nxrt_session_node_bodies(s_, i));
        for (std::string line; std::getline(lines, line);) {
          const size_t colon = line.rfind("): ");
          if (colon == std::string::npos) continue;
          const std::string ep = line.substr(colon + 3);
          if (ep == "host") continue;  // a nested control-flow node: its own body lines follow
          if (ep != name_)
            return "a node in a body of '" + node + "' ran on '" + ep + "', not on the plugin (" + line.substr(0, colon + 1) + ")";
          ++*on_plugin;
        }
        continue;
      }
      if (a.ep && *a.ep && name_ != a.ep) return "node '" + node + "' ran on '" + a.ep + "', not on the plugin";
      ++*on_plugin;
    }
    return "";
  }

  // Mixed placement: nodes (bodies included) on the plugin and on the second plugin; any other EP is an error.
  std::string mixed_placement(size_t* on_plugin, size_t* on_second) const {
    *on_plugin = *on_second = 0;
    auto count = [&](const std::string& ep, const std::string& what) -> std::string {
      if (ep == name_) ++*on_plugin;
      else if (ep == second_) ++*on_second;
      else return what + " ran on '" + ep + "', neither the plugin nor " + second_;
      return "";
    };
    for (size_t i = 0; i < nxrt_session_node_count(s_); ++i) {
      nxrt_node_assignment a = nxrt_session_node(s_, i);
      const std::string node = a.node_name ? a.node_name : "?";
      if (a.ep && std::string(a.ep) == "host") {
        std::istringstream lines(nxrt_session_node_bodies(s_, i));
        for (std::string line; std::getline(lines, line);) {
          const size_t colon = line.rfind("): ");
          if (colon == std::string::npos || line.substr(colon + 3) == "host") continue;
          std::string e = count(line.substr(colon + 3), "a node in a body of '" + node + "'");
          if (!e.empty()) return e;
        }
        continue;
      }
      std::string e = count(a.ep ? a.ep : "", "node '" + node + "'");
      if (!e.empty()) return e;
    }
    return "";
  }
  size_t copy_count() const { return nxrt_session_copy_count(s_); }
  const std::string& second_name() const { return second_; }

 private:
  std::string second_;
  nxrt_env* env_ = nullptr;
  nxrt_model* m_ = nullptr;
  nxrt_session* s_ = nullptr;
  std::string name_;
};

Record status_record(const std::string& kind, const std::string& msg) {
  if (kind == "unsupported") return make_record("unsupported", msg);
  if (kind == "model") return skip("not run: " + msg);
  return fail(msg);
}

// Random-op cases: numpy drew their expected outputs, so no plugin matches them bit for bit.
// They are checked by shape, dtype and distribution instead (the rule of tools/compare.py's
// RANDOM_CASES, which tools/node_tests.py applies); every other case is compared exactly.
enum class RandomRule { None, Bernoulli, Dropout };
RandomRule random_rule(const std::string& name) {
  static const std::set<std::string> bernoulli = {"test_bernoulli", "test_bernoulli_double", "test_bernoulli_seed",
                                                  "test_bernoulli_expanded", "test_bernoulli_double_expanded",
                                                  "test_bernoulli_seed_expanded"};
  static const std::set<std::string> dropout = {"test_training_dropout", "test_training_dropout_default",
                                                "test_training_dropout_default_mask", "test_training_dropout_mask"};
  if (bernoulli.count(name)) return RandomRule::Bernoulli;
  if (dropout.count(name)) return RandomRule::Dropout;
  return RandomRule::None;
}

// Element i of a float, integer or bool tensor as a double.
double element(const HostTensor& t, size_t i) {
  auto get = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, t.bytes.data() + i * sizeof v, sizeof v);
    return double(v);
  };
  switch (t.dtype) {
    case NXRT_DTYPE_FLOAT32: return get(float{});
    case NXRT_DTYPE_FLOAT64: return get(double{});
    case NXRT_DTYPE_INT8: return get(int8_t{});
    case NXRT_DTYPE_UINT8: case NXRT_DTYPE_BOOL: return get(uint8_t{});
    case NXRT_DTYPE_INT16: return get(int16_t{});
    case NXRT_DTYPE_UINT16: return get(uint16_t{});
    case NXRT_DTYPE_INT32: return get(int32_t{});
    case NXRT_DTYPE_UINT32: return get(uint32_t{});
    case NXRT_DTYPE_INT64: return get(int64_t{});
    case NXRT_DTYPE_UINT64: return get(uint64_t{});
    default: return NAN;
  }
}

// A binomial count within 4 standard deviations of its mean (a constant generator fails).
std::string count_check(double count, double mean, double var, const char* what) {
  const double bound = 4 * std::sqrt(var) + 0.5;
  if (std::fabs(count - mean) > bound) return fmt::format("{}: {}, expected {:.1f} +- {:.1f} (4 sd)", what, count, mean, bound);
  return "";
}

// "" when the outputs of a random case fit its rule, else why (tools/compare.py random_mismatch).
std::string random_mismatch(RandomRule rule, const std::vector<HostTensor>& ins, const std::vector<HostTensor>& got,
                            const std::vector<HostTensor>& exp, double rtol, double atol) {
  for (size_t k = 0; k < exp.size(); ++k) {
    if (got[k].dtype != exp[k].dtype || got[k].dims != exp[k].dims)
      return fmt::format("output {}: dtype or shape differs from the expected one", k);
    if (got[k].bytes.size() < size_t(numel(exp[k].dims)) * dtype_size(exp[k].dtype)) return "buffer smaller than its shape";
  }
  if (ins.empty() || ins[0].dims != exp[0].dims) return "input 0 does not have the output's shape";
  const size_t n = size_t(numel(exp[0].dims));
  if (rule == RandomRule::Bernoulli) {
    double ones = 0, mean = 0, var = 0;
    for (size_t i = 0; i < n; ++i) {
      const double p = element(ins[0], i), y = element(got[0], i);
      if (y != 0 && y != 1) return fmt::format("element {} is {}, not 0 or 1", i, y);
      if ((p == 0 && y == 1) || (p == 1 && y == 0)) return fmt::format("element {} is {} where p = {}", i, y, p);
      ones += y, mean += p, var += p * (1 - p);
    }
    return count_check(ones, mean, var, "number of ones");
  }
  const double ratio = ins.size() > 1 ? element(ins[1], 0) : 0.5;
  const bool training = ins.size() > 2 && element(ins[2], 0) != 0;
  if (!training || ratio == 0) return compare(got[0], exp[0], rtol, atol);
  const bool has_mask = got.size() > 1;
  double kept_count = 0, informative = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = element(ins[0], i), y = element(got[0], i), scaled = x / (1 - ratio);
    const bool kept = std::fabs(y - scaled) <= atol + rtol * std::fabs(scaled), dropped = y == 0;
    if (!kept && !dropped) return fmt::format("element {} is {}: neither 0 nor x/(1-ratio) = {}", i, y, scaled);
    if (has_mask) {
      const bool m = element(got[1], i) != 0;
      if (m && !kept) return fmt::format("mask is true where element {} was dropped", i);
      if (!m && !dropped) return fmt::format("mask is false where element {} was kept", i);
      kept_count += m, informative += 1;
    } else if (x != 0) {  // x = 0 gives 0 either way
      kept_count += !dropped, informative += 1;
    }
  }
  return count_check(kept_count, informative * (1 - ratio), informative * ratio * (1 - ratio), "number kept");
}

// An ONNX backend test case: model.onnx + test_data_set_*/{input,output}_K.pb.
// Cases whose ONNX 1.12 data contradicts their own model (tools/node_tests.py BAD_DATA): no
// backend can pass them, so they are skipped with the reason.
std::string bad_data(const std::string& name) {
  static const std::set<std::string> like_shape = {"test_castlike_BFLOAT16_to_FLOAT", "test_castlike_BFLOAT16_to_FLOAT_expanded",
                                                   "test_castlike_FLOAT_to_BFLOAT16", "test_castlike_FLOAT_to_BFLOAT16_expanded"};
  return like_shape.count(name) ? "ONNX 1.12 data: input 'like' is [1] but the model declares [3,4]" : "";
}

Record run_backend_case(const Config& c, const std::string& dir, double rtol, double atol) {
  if (auto why = bad_data(fs::path(dir).filename().string()); !why.empty()) return skip("not run: " + why);
  ModelInfo info;
  std::string e = read_model(dir + "/model.onnx", info);
  if (!e.empty()) return skip("not run: " + e);
  if (!info.non_tensor.empty()) return skip("not run: " + info.non_tensor);
  HostRun run;
  std::string kind;
  e = run.open(c.plugin, dir + "/model.onnx", c.device, &kind);
  if (!e.empty()) return status_record(kind, e);
  size_t on_plugin = 0;
  e = run.placement(&on_plugin);
  if (!e.empty()) return fail(e);
  if (on_plugin == 0) return skip("not run: every node is a host step (control flow, sequence or optional ops)");
  std::vector<std::string> sets;
  for (auto& d : fs::directory_iterator(dir))
    if (d.is_directory() && d.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(d.path().string());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return skip("not run: no test_data_set_* folder");
  for (auto& set : sets) {
    std::vector<HostTensor> ins, exp;
    std::vector<std::string> names;
    for (size_t k = 0;; ++k) {
      std::string p = set + "/input_" + std::to_string(k) + ".pb";
      if (!fs::exists(p)) break;
      HostTensor t;
      e = read_tensor_pb(p, t);
      if (!e.empty()) return skip("not run: " + e);
      if (k >= info.inputs.size()) return skip("not run: more input files than graph inputs");
      // ONNX 1.12 stores bfloat16 test tensors as UINT16 files of the raw bits.
      if (t.dtype == NXRT_DTYPE_UINT16 && k < info.input_shapes.size() && info.input_shapes[k].dtype == NXRT_DTYPE_BFLOAT16)
        t.dtype = NXRT_DTYPE_BFLOAT16;
      names.push_back(info.inputs[k]);
      ins.push_back(std::move(t));
    }
    for (size_t k = 0;; ++k) {
      std::string p = set + "/output_" + std::to_string(k) + ".pb";
      if (!fs::exists(p)) break;
      HostTensor t;
      e = read_tensor_pb(p, t);
      if (!e.empty()) return skip("not run: " + e);
      exp.push_back(std::move(t));
    }
    std::vector<HostTensor> got;
    e = run.run(names, ins, got);
    std::string where = fs::path(set).filename().string();
    if (!e.empty()) return fail(where + ": " + e);
    if (got.size() != exp.size())
      return fail(where + ": " + std::to_string(got.size()) + " outputs, expected " + std::to_string(exp.size()));
    if (const RandomRule rule = random_rule(fs::path(dir).filename().string()); rule != RandomRule::None) {
      e = random_mismatch(rule, ins, got, exp, rtol, atol);
      if (!e.empty()) return fail(where + " (random op, checked by distribution): " + e);
      continue;
    }
    for (size_t k = 0; k < exp.size(); ++k) {
      if (got[k].dtype == NXRT_DTYPE_BFLOAT16 && exp[k].dtype == NXRT_DTYPE_UINT16) exp[k].dtype = NXRT_DTYPE_BFLOAT16;  // raw bits
      e = compare(got[k], exp[k], rtol, atol);
      if (!e.empty()) return fail(where + " output " + std::to_string(k) + " '" + info.outputs[k] + "': " + e);
    }
  }
  if (random_rule(fs::path(dir).filename().string()) != RandomRule::None)
    return pass(std::to_string(sets.size()) + " data set(s), passed by distribution (random op: shape, dtype, values, counts)");
  return pass(std::to_string(sets.size()) + " data set(s)");
}

std::vector<std::string> case_dirs(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& d : fs::directory_iterator(root, ec))
    if (d.is_directory() && fs::exists(d.path() / "model.onnx")) out.push_back(d.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

HostTensor random_input(const HostTensor& shape, uint32_t seed) {
  HostTensor t = shape;
  size_t n = size_t(numel(t.dims));
  t.bytes.assign(n * dtype_size(t.dtype), 0);
  uint32_t x = seed * 2246822519u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    double u = double(x >> 8) / double(1 << 24);  // [0, 1)
    switch (t.dtype) {
      case NXRT_DTYPE_FLOAT32: { float v = float(u * 2 - 1); std::memcpy(&t.bytes[i * 4], &v, 4); break; }
      case NXRT_DTYPE_FLOAT64: { double v = u * 2 - 1; std::memcpy(&t.bytes[i * 8], &v, 8); break; }
      case NXRT_DTYPE_INT64: { int64_t v = int64_t(u * 10); std::memcpy(&t.bytes[i * 8], &v, 8); break; }
      case NXRT_DTYPE_INT32: { int32_t v = int32_t(u * 10); std::memcpy(&t.bytes[i * 4], &v, 4); break; }
      default: t.bytes[i * dtype_size(t.dtype)] = uint8_t(u * 2); break;
    }
  }
  return t;
}

bool all_finite(const HostTensor& t) {
  if (t.dtype != NXRT_DTYPE_FLOAT32) return true;
  for (size_t i = 0; i < t.bytes.size() / 4; ++i) {
    float v;
    std::memcpy(&v, &t.bytes[i * 4], 4);
    if (!std::isfinite(v)) return false;
  }
  return true;
}

// Largest |value| of a float32 tensor (0 for other types).
double max_abs(const HostTensor& t) {
  if (t.dtype != NXRT_DTYPE_FLOAT32) return 0;
  double m = 0;
  for (size_t i = 0; i < t.bytes.size() / 4; ++i) {
    float v;
    std::memcpy(&v, &t.bytes[i * 4], 4);
    if (std::isfinite(v)) m = std::max(m, double(std::fabs(v)));
  }
  return m;
}

// A bench model: the plugin against the reference plugin on the same inputs.
Record run_bench(const Config& c, const std::string& model) {
  ModelInfo info;
  std::string e = read_model(model, info);
  if (!e.empty()) return skip("not run: " + e);
  if (!info.non_tensor.empty()) return skip("not run: " + info.non_tensor);
  std::vector<HostTensor> ins;
  for (size_t i = 0; i < info.input_shapes.size(); ++i) ins.push_back(random_input(info.input_shapes[i], uint32_t(i + 1)));
  HostRun run;
  std::string kind;
  e = run.open(c.plugin, model, c.device, &kind);
  if (!e.empty()) return status_record(kind, e);
  size_t on_plugin = 0;
  e = run.placement(&on_plugin);
  if (!e.empty()) return fail(e);
  if (on_plugin == 0) return skip("not run: every node is a host step (control flow, sequence or optional ops)");
  std::vector<HostTensor> got, again;
  e = run.run(info.inputs, ins, got);
  if (!e.empty()) return fail(e);
  e = run.run(info.inputs, ins, again);
  if (!e.empty()) return fail("second run: " + e);
  for (size_t k = 0; k < got.size(); ++k) {
    if (!all_finite(got[k])) return fail("output '" + info.outputs[k] + "' has NaN or Inf for finite inputs");
    std::string d = compare(again[k], got[k], 1e-5, 1e-6);
    if (!d.empty()) return fail("two runs on the same inputs disagree on '" + info.outputs[k] + "': " + d);
  }
  bool self = c.reference.empty() || fs::equivalent(c.reference, c.plugin);
  if (self)
    return pass("ran twice, outputs finite and reproducible; no independent reference (" +
                std::string(c.reference.empty() ? "no reference plugin found" : "the plugin is the reference") + ")");
  HostRun ref;
  e = ref.open(c.reference, model, 0, &kind);
  if (!e.empty()) return skip("not run: the reference plugin cannot run it: " + e);
  std::vector<HostTensor> want;
  e = ref.run(info.inputs, ins, want);
  if (!e.empty()) return skip("not run: the reference plugin failed: " + e);
  // Two float32 engines summing in different orders differ in proportion to the size of
  // the values a deep model carries (dwconv: ~5e-4 at outputs up to 15, for ONNX Runtime
  // and nxrt alike against float64), so the absolute tolerance scales with the output.
  std::string rule;
  for (size_t k = 0; k < got.size() && k < want.size(); ++k) {
    double atol = 1e-4 * std::max(1.0, max_abs(want[k]));
    rule = fmt::format("rtol 1e-3, atol 1e-4 x max(1, max|ref|) = {:.3g}", atol);
    e = compare(got[k], want[k], 1e-3, atol);
    if (!e.empty()) return fail("output '" + info.outputs[k] + "' vs the reference plugin (" + rule + "): " + e);
  }
  return pass("matches " + fs::path(c.reference).filename().string() + " (" + rule + ")");
}

// Mixed placement (issue 14): the plugin under test and the reference plugin in one session
// (EPs "<plugin>,<reference>", fallback off): the plugin runs what it claims, the reference the
// rest, with the host's cross-device copies between them. Outputs must match the reference alone.
Record run_mixed(const Config& c, const std::string& model) {
  if (c.reference.empty()) return skip("not run: no reference plugin found");
  if (fs::equivalent(c.reference, c.plugin)) return skip("not run: the plugin is the reference, there is nothing to mix");
  ModelInfo info;
  std::string e = read_model(model, info);
  if (!e.empty()) return skip("not run: " + e);
  if (!info.non_tensor.empty()) return skip("not run: " + info.non_tensor);
  std::vector<HostTensor> ins;
  for (size_t i = 0; i < info.input_shapes.size(); ++i) ins.push_back(random_input(info.input_shapes[i], uint32_t(i + 1)));
  HostRun run;
  std::string kind;
  e = run.open(c.plugin, model, c.device, &kind, c.reference);
  if (!e.empty()) return status_record(kind, e);
  size_t on_plugin = 0, on_ref = 0;
  e = run.mixed_placement(&on_plugin, &on_ref);
  if (!e.empty()) return fail(e);
  if (on_plugin == 0) return make_record("unsupported", "the plugin claims no node of this model beside " + run.second_name());
  std::vector<HostTensor> got, again;
  e = run.run(info.inputs, ins, got);
  if (!e.empty()) return fail(e);
  e = run.run(info.inputs, ins, again);
  if (!e.empty()) return fail("second run: " + e);
  for (size_t k = 0; k < got.size(); ++k) {
    if (!all_finite(got[k])) return fail("output '" + info.outputs[k] + "' has NaN or Inf for finite inputs");
    std::string d = compare(again[k], got[k], 1e-5, 1e-6);
    if (!d.empty()) return fail("two runs on the same inputs disagree on '" + info.outputs[k] + "': " + d);
  }
  HostRun ref;
  e = ref.open(c.reference, model, 0, &kind);
  if (!e.empty()) return skip("not run: the reference plugin cannot run it alone: " + e);
  std::vector<HostTensor> want;
  e = ref.run(info.inputs, ins, want);
  if (!e.empty()) return skip("not run: the reference plugin failed: " + e);
  const std::string where = fmt::format("{} node(s) on the plugin, {} on {}, {} cross-device copies", on_plugin, on_ref,
                                        run.second_name(), run.copy_count());
  std::string rule;
  for (size_t k = 0; k < got.size() && k < want.size(); ++k) {
    double atol = 1e-4 * std::max(1.0, max_abs(want[k]));
    rule = fmt::format("rtol 1e-3, atol 1e-4 x max(1, max|ref|) = {:.3g}", atol);
    e = compare(got[k], want[k], 1e-3, atol);
    if (!e.empty()) return fail("output '" + info.outputs[k] + "' (" + where + ") vs the reference plugin alone (" + rule + "): " + e);
  }
  return pass(where + "; matches " + fs::path(c.reference).filename().string() + " alone (" + rule + ")");
}

// A model that makes a GPU-style plugin share the work: float32 Relu and Mul, an int32 island
// (Cast, a broadcast Add of int32 constants, Cast back) that plugins taking only float types
// leave to the reference, then MatMul and Relu in float32 again, so values cross between the
// plugin and the reference both ways. X*8 and the casts are exact, so both placements agree.
std::string write_island_model(const std::string& path) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("nxrt-conformance");
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("float_int_float");
  auto value = [](onnx::ValueInfoProto* v, const char* name, int type, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g->add_input(), "X", onnx::TensorProto::FLOAT, {4, 16});
  value(g->add_output(), "Y", onnx::TensorProto::FLOAT, {4, 8});
  auto init = [&](const char* name, int type, std::vector<int64_t> dims, const void* data, size_t bytes) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(data, bytes);
  };
  const float eight = 8;
  init("eight", onnx::TensorProto::FLOAT, {}, &eight, 4);
  std::vector<int32_t> bias(16);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = int32_t(i % 5) - 2;
  init("bias", onnx::TensorProto::INT32, {16}, bias.data(), bias.size() * 4);
  std::vector<float> w(16 * 8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 7 % 11) - 5) / 8;
  init("W", onnx::TensorProto::FLOAT, {16, 8}, w.data(), w.size() * 4);
  auto node = [&](const char* op, std::vector<const char*> in, const char* out, int cast_to = -1) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(std::string(out) + "_" + op);
    for (auto* i : in) n->add_input(i);
    n->add_output(out);
    if (cast_to >= 0) {
      auto* a = n->add_attribute();
      a->set_name("to");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(cast_to);
    }
  };
  node("Relu", {"X"}, "r");
  node("Mul", {"r", "eight"}, "r8");
  node("Cast", {"r8"}, "q", onnx::TensorProto::INT32);
  node("Add", {"q", "bias"}, "qb");
  node("Cast", {"qb"}, "f", onnx::TensorProto::FLOAT);
  node("MatMul", {"f", "W"}, "mm");
  node("Relu", {"mm"}, "Y");
  std::ofstream os(path, std::ios::binary);
  if (!m.SerializeToOstream(&os)) return "cannot write " + path;
  return "";
}

Record run_island(const Config& c) {
  const fs::path path = fs::temp_directory_path() / ("nxrt-conformance-mixed-" + std::to_string(getpid()) + ".onnx");
  std::string e = write_island_model(path.string());
  if (!e.empty()) return fail("internal: " + e);
  Record r = run_mixed(c, path.string());
  std::error_code ec;
  fs::remove(path, ec);
  return r;
}

}  // namespace

std::vector<Item> ops_items(const Config& cfg, std::string* error) {
  std::string root = cfg.tests_dir + "/node";
  auto dirs = case_dirs(root);
  if (dirs.empty()) {
    *error = "no ONNX node tests in " + root;
    return {};
  }
  // Operator per case: the single node's op; "X_expanded" takes the op of "X".
  std::map<std::string, std::string> op_of;
  std::map<std::string, std::string> dtype_of;
  for (auto& d : dirs) {
    ModelInfo info;
    read_model(d + "/model.onnx", info);
    std::string name = fs::path(d).filename().string();
    op_of[name] = info.nodes == 1 ? info.op : "";
    dtype_of[name] = info.dtype;
  }
  std::vector<Item> items;
  for (auto& d : dirs) {
    std::string name = fs::path(d).filename().string();
    std::string op = op_of[name];
    auto pos = name.find("_expanded");
    if (op.empty() && pos != std::string::npos && !op_of[name.substr(0, pos)].empty())
      op = op_of[name.substr(0, pos)] + " (expanded)";
    if (op.empty()) op = "(multi-node)";
    Config c = cfg;
    items.push_back(Item{name, [c, d] { return std::vector<Record>{run_backend_case(c, d, 1e-3, 1e-7)}; }, op, dtype_of[name]});
  }
  return items;
}

std::vector<Item> models_items(const Config& cfg, std::string* error) {
  std::vector<Item> items;
  for (auto& d : case_dirs(cfg.tests_dir + "/simple")) {
    std::string name = "simple/" + fs::path(d).filename().string();
    Config c = cfg;
    items.push_back(Item{name, [c, d] { return std::vector<Record>{run_backend_case(c, d, 1e-3, 1e-7)}; }, "", ""});
  }
  std::vector<std::string> bench;
  std::error_code ec;
  for (auto& f : fs::directory_iterator(cfg.bench_dir, ec))
    if (f.path().extension() == ".onnx") bench.push_back(f.path().string());
  std::sort(bench.begin(), bench.end());
  for (auto& m : bench) {
    Config c = cfg;
    items.push_back(Item{"bench/" + fs::path(m).stem().string(), [c, m] { return std::vector<Record>{run_bench(c, m)}; }, "", ""});
    items.push_back(Item{"mixed/" + fs::path(m).stem().string(), [c, m] { return std::vector<Record>{run_mixed(c, m)}; }, "", ""});
  }
  if (!items.empty()) {
    Config c = cfg;
    items.push_back(Item{"mixed/float_int_float", [c] { return std::vector<Record>{run_island(c)}; }, "", ""});
  }
  if (items.empty()) *error = "no models in " + cfg.tests_dir + "/simple or " + cfg.bench_dir;
  return items;
}

}  // namespace conf
