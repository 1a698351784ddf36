// The diff suite: differential op checks (seeded cases against a float64
// reference, the idea of ggml's test-backend-ops) and a concurrency check that
// runs one kernel from many threads on different inputs. Runs on the mini host,
// so it needs no libnxrt and no test data.
#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <thread>

#include "checks.hpp"
#include "diff_cases.hpp"

namespace conf {
namespace {

using diff::Case;
using diff::OpSpec;

// A single-node graph for one case: inputs A,B(,C) or X, output Y.
struct CaseGraph {
  explicit CaseGraph(const Case& c) {
    gb.graph().opsets[""] = c.spec->opset;
    static const char* names[] = {"A", "B", "C"};
    const bool unary = c.in_dims.size() == 1;
    for (size_t i = 0; i < c.in_dims.size(); ++i)
      ins.push_back(gb.value(unary ? "X" : names[i], c.dtype, c.in_dims[i]));
    y = gb.value("Y", c.dtype, c.out_dims);
    gb.node(c.spec->op, "", ins, {y}, c.attrs);
    gb.graph().inputs = ins;
    gb.graph().outputs = {y};
  }
  std::map<const nxrt_value*, HostTensor> feed(const std::vector<HostTensor>& in) const {
    std::map<const nxrt_value*, HostTensor> m;
    for (size_t i = 0; i < ins.size(); ++i) m[ins[i]] = in[i];
    return m;
  }
  GraphBuilder gb;
  std::vector<const nxrt_value*> ins;
  const nxrt_value* y = nullptr;
};

std::string refusal_of(Pipeline& p) {
  auto& r = p.sink().refusals;
  return r.empty() ? "no reason given" : r.begin()->second.second;
}

std::string rerun_command(const Config& c, const std::string& case_id) {
  return fmt::format("nxrt-conformance --plugin {} --device {} --suite diff --diff-seed {} --diff-case {}", c.plugin, c.device,
                     c.diff_seed, case_id);
}

// Runs one case on the plugin. *claimed is false when the plugin refused it. "" or why it failed.
std::string run_case(Session& s, const Case& cs, uint64_t seed, bool* claimed, std::string* refusal, const ComputeOptions& o = {},
                     bool special = false) {
  CaseGraph g(cs);
  Pipeline p(s, g.gb);
  std::string e = p.build();
  *claimed = p.claimed_nodes() == 1;
  if (!e.empty()) return e;
  if (!*claimed) {
    *refusal = refusal_of(p);
    return "";
  }
  const auto in = special ? diff::special_inputs(cs, seed) : diff::make_inputs(cs, seed);
  std::vector<HostTensor> out;
  e = p.run(g.feed(in), out, o);
  if (!e.empty()) return e;
  e = diff::compare_ref(cs, out.at(0), diff::reference(cs, in));
  if (!e.empty() && (o.byte_offset || o.poison_outputs)) {
    // A kernel that ignores byte_offset reads the decoy bytes (3.4e38 as float32) or leaves them.
    const HostTensor& y = out.at(0);
    size_t decoys = 0;
    for (size_t i = 0; i + 4 <= y.bytes.size(); i += 4) {
      float v;
      std::memcpy(&v, &y.bytes[i], 4);
      decoys += std::isinf(v) || std::fabs(v) >= 1e38f;
    }
    if (decoys && o.byte_offset)
      e += fmt::format(" ({} output elements are inf or about 3.4e38, the value of the decoy bytes around the tensors: is "
                       "byte_offset ignored?)",
                       decoys);
    else if (decoys)
      e += fmt::format(" ({} output elements are inf or about 3.4e38, the decoy bytes the output started as: left unwritten?)", decoys);
  }
  return e;
}

// "Op:id" -> (spec, id); null spec when `which` does not name one.
std::pair<const OpSpec*, int> parse_case(const std::string& which) {
  const auto colon = which.find(':');
  if (colon == std::string::npos) return {diff::find_spec(which), -1};
  const std::string id = which.substr(colon + 1);
  if (id.empty() || id.size() > 6 || id.find_first_not_of("0123456789") != std::string::npos) return {nullptr, -1};
  return {diff::find_spec(which.substr(0, colon)), std::stoi(id)};
}

Record op_check(const Config& c, const OpSpec& spec) {
  Env env(c);
  if (auto r = env.session()) return *r;
  std::vector<int> ids;
  if (auto [sp, id] = parse_case(c.diff_case); sp == &spec && id >= 0) {
    ids = {id};
  } else {
    const int n = c.diff_cases > 0 ? std::min(c.diff_cases, spec.default_cases) : spec.default_cases;
    for (int i = 0; i < n; ++i) ids.push_back(i);
  }
  int claimed = 0, failed = 0;
  std::string first_refusal;
  std::optional<Case> worst;
  std::string worst_error;
  for (int id : ids) {
    const Case cs = diff::make_case(spec, c.diff_seed, id);
    bool was_claimed = false;
    std::string refusal;
    const std::string e = run_case(*env.s, cs, c.diff_seed, &was_claimed, &refusal);
    if (!was_claimed && e.empty()) {
      if (first_refusal.empty()) first_refusal = fmt::format("case {} ({}): {}", id, cs.describe(), refusal);
      continue;
    }
    ++claimed;
    if (e.empty()) continue;
    ++failed;
    if (!worst || cs.elements() < worst->elements()) worst = cs, worst_error = e;  // report the smallest failing case
  }
  if (failed) {
    const std::string id = fmt::format("{}:{}", spec.id, worst->id);
    return fail(fmt::format("{} of {} claimed cases fail (seed {}); smallest: case {}: {}: {}. Rerun: {}", failed, claimed,
                            c.diff_seed, id, worst->describe(), worst_error, rerun_command(c, id)));
  }
  if (!claimed) return make_record("unsupported", fmt::format("refused all {} cases; first: {}", ids.size(), first_refusal));
  std::string msg = fmt::format("{} of {} cases match the float64 reference (seed {}, rtol {:g})", claimed, ids.size(),
                                c.diff_seed, spec.rtol);
  if (claimed < int(ids.size())) msg += "; refused: " + first_refusal;
  return pass(msg);
}

// Each op's fixed cases again, with input i at byte_offset 256 * (i + 1) and the output at
// 256, inside larger allocations filled with decoy bytes: the offset is part of the tensor.
Record byte_offset_check(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  ComputeOptions o;
  o.byte_offset = NXRT_TENSOR_ALIGNMENT;
  int claimed = 0, ops = 0;
  for (const OpSpec& spec : diff::op_specs()) {
    bool any = false;
    for (int id = 0; id < 4; ++id) {
      const Case cs = diff::make_case(spec, c.diff_seed, id);
      bool was_claimed = false;
      std::string refusal;
      const std::string e = run_case(*env.s, cs, c.diff_seed, &was_claimed, &refusal, o);
      if (!was_claimed && e.empty()) continue;
      any = true;
      ++claimed;
      if (!e.empty())
        return fail(fmt::format("case {}:{} ({}) with inputs at byte_offset 256, 512, ... and the output at 256: {}. Rerun: {}",
                                spec.id, id, cs.describe(), e, rerun_command(c, "byte_offset")));
    }
    ops += any;
  }
  if (!claimed) return skip("not run: the plugin claims none of the diff suite's cases");
  return pass(fmt::format("{} cases of {} ops match the float64 reference with inputs and outputs at non-zero byte offsets", claimed, ops));
}

// Inputs the other checks never send (issue 14): size-0 dims in every position, with the
// output poisoned so an element left unwritten shows; and NaN, +-Inf, -0 and denormals.
Record zero_size_check(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  ComputeOptions o;
  o.poison_outputs = true;
  int claimed = 0, total = 0;
  std::string refused;
  for (const OpSpec& spec : diff::op_specs())
    for (const Case& cs : diff::zero_size_cases(spec)) {
      ++total;
      bool was_claimed = false;
      std::string refusal;
      const std::string e = run_case(*env.s, cs, c.diff_seed, &was_claimed, &refusal, o);
      if (!was_claimed && e.empty()) {
        if (refused.empty()) refused = cs.describe() + ": " + refusal;
        continue;
      }
      ++claimed;
      if (!e.empty())
        return fail(fmt::format("{} (a size-0 dim; outputs start as decoy bytes): {}. Rerun: {}", cs.describe(), e,
                                rerun_command(c, "zero_size")));
    }
  if (!claimed) return make_record("unsupported", fmt::format("refused all {} cases; first: {}", total, refused));
  return pass(fmt::format("{} of {} cases with size-0 dims match the reference{}", claimed, total,
                          claimed < total ? "; refused: " + refused : ""));
}

// Whether `out` holds NaN where the reference has none (the poison of finished calls).
bool has_new_nan(const HostTensor& out, const std::vector<double>& ref) {
  if (out.dtype != NXRT_DTYPE_FLOAT32) return false;
  for (size_t i = 0; i < ref.size() && (i + 1) * 4 <= out.bytes.size(); ++i) {
    float v;
    std::memcpy(&v, &out.bytes[i * 4], 4);
    if (std::isnan(v) && !std::isnan(ref[i])) return true;
  }
  return false;
}

constexpr const char* kPoisonHint =
    " (NaN where the reference has none: after each call the host overwrites that call's inputs and outputs with 0xFF "
    "bytes, NaN as float32, and frees them a call later. Does the kernel read a buffer of an earlier call, a pointer kept "
    "from a previous kernel_compute?)";

// `c` with every dim > 1 mapped through `f`: equal dims stay equal, so broadcasting and
// MatMul's K still agree; 0 and 1 are kept (they change what broadcasting means).
Case resized(const Case& c, const std::function<int64_t(int64_t)>& f) {
  Case r = c;
  auto map = [&](std::vector<int64_t>& dims) {
    for (auto& d : dims)
      if (d > 1) d = f(d);
  };
  for (auto& d : r.in_dims) map(d);
  map(r.out_dims);
  return r;
}

// Dynamic dims (issue 14): one kernel made from a graph whose every dim is unknown (rank
// known), then run on several shapes of one family (grown, shrunk, the first again). A
// kernel that keeps sizes from kernel_create or from its first run gets the next shape wrong.
Record dynamic_dims_check(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  int claimed = 0, total = 0;
  std::set<std::string> ops;
  std::string refused;
  for (const OpSpec& spec : diff::op_specs())
    for (int id = 0; id < 4; ++id) {
      const Case base = diff::make_case(spec, c.diff_seed, id);
      ++total;
      Case sym = base;
      for (auto& d : sym.in_dims) std::fill(d.begin(), d.end(), int64_t(-1));
      std::fill(sym.out_dims.begin(), sym.out_dims.end(), int64_t(-1));
      CaseGraph g(sym);
      Pipeline p(*env.s, g.gb);
      std::string e = p.build();
      if (!e.empty()) return fail(fmt::format("{} with every dim dynamic: {}", base.describe(), e));
      if (p.claimed_nodes() != 1) {
        if (refused.empty()) refused = base.describe() + ": " + refusal_of(p);
        continue;
      }
      ++claimed;
      ops.insert(spec.op);
      const std::vector<Case> runs = {base, resized(base, [](int64_t d) { return d + 3; }),
                                      resized(base, [](int64_t d) { return std::max<int64_t>(2, d - 1); }), base};
      for (size_t k = 0; k < runs.size(); ++k) {
        const auto in = diff::make_inputs(runs[k], c.diff_seed, 100 + k);
        const auto ref = diff::reference(runs[k], in);
        std::vector<HostTensor> out;
        e = p.run(g.feed(in), out);
        if (e.empty()) e = diff::compare_ref(runs[k], out.at(0), ref);
        if (!e.empty())
          return fail(fmt::format("{} with every dim dynamic, one kernel, run {} of {} ({}): {}{}. Rerun: {}", base.describe(),
                                  k + 1, runs.size(), runs[k].describe(), e,
                                  !out.empty() && has_new_nan(out.at(0), ref) ? kPoisonHint
                                  : k ? " (the earlier runs matched: are sizes kept from kernel_create or the first run?)"
                                      : "",
                                  rerun_command(c, "dynamic_dims")));
      }
    }
  if (!claimed) return make_record("unsupported", fmt::format("refused all {} cases with dynamic dims; first: {}", total, refused));
  std::string names;
  for (auto& o : ops) names += (names.empty() ? "" : ", ") + o;
  return pass(fmt::format("{} of {} cases with every dim dynamic ({}) match the reference on 4 shapes each from one kernel{}",
                          claimed, total, names, claimed < total ? "; refused: " + refused : ""));
}

Record special_values_check(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  int claimed = 0, ops = 0;
  for (const OpSpec& spec : diff::op_specs()) {
    bool any = false;
    for (int id = 0; id < 6; ++id) {
      Case cs = diff::make_case(spec, c.diff_seed, id);
      bool was_claimed = false;
      std::string refusal;
      const std::string e = run_case(*env.s, cs, c.diff_seed, &was_claimed, &refusal, {}, true);
      if (!was_claimed && e.empty()) continue;
      any = true;
      ++claimed;
      if (!e.empty())
        return fail(fmt::format("case {}:{} ({}) with NaN, +-Inf, -0 and denormal inputs: {}. Rerun: {}", spec.id, id,
                                cs.describe(), e, rerun_command(c, "special_values")));
    }
    ops += any;
  }
  if (!claimed) return skip("not run: the plugin claims none of the diff suite's cases");
  return pass(fmt::format("{} cases of {} ops with NaN, +-Inf, -0 and denormal inputs match the IEEE float64 reference", claimed, ops));
}

// Integer extremes (issue 14): every integer type ONNX allows for Add, Sub, Mul, Div, Relu and
// MatMul, on every pair of the type's extremes, compared exactly. A type the plugin claims no
// node of is unsupported for it, never a failure.
Record integer_extremes_check(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  int claimed = 0, total = 0;
  std::vector<std::string> pairs, refused;
  std::set<std::string> seen;
  for (const OpSpec& spec : diff::op_specs())
    for (nxrt_dtype t : diff::integer_types(spec)) {
      if (!seen.insert(spec.op + dtype_name(t)).second) continue;  // Softmax_11/13 and the like: one spec per op
      bool any = false;
      for (const Case& cs : diff::integer_cases(spec, t)) {
        ++total;
        CaseGraph g(cs);
        Pipeline p(*env.s, g.gb);
        std::string e = p.build();
        if (!e.empty()) return fail(fmt::format("{}: {}", cs.describe(), e));
        if (p.claimed_nodes() != 1) {
          if (refused.empty() || refused.back().rfind(spec.op + " " + dtype_name(t), 0) != 0)
            refused.push_back(fmt::format("{} {} ({})", spec.op, dtype_name(t), refusal_of(p)));
          continue;
        }
        ++claimed;
        any = true;
        const auto in = diff::integer_inputs(cs);
        std::vector<HostTensor> out;
        e = p.run(g.feed(in), out);
        if (e.empty()) e = diff::compare_integer(cs, in, out.at(0), diff::integer_reference(cs, in));
        if (!e.empty())
          return fail(fmt::format("{} (integer extremes): {}. Rerun: {}", cs.describe(), e, rerun_command(c, "integer_extremes")));
      }
      if (any) pairs.push_back(spec.op + " " + dtype_name(t));
    }
  if (!claimed)
    return make_record("unsupported", fmt::format("refused all {} integer cases ({} op/type pairs; first {})", total, refused.size(),
                                                  refused.empty() ? "none" : refused.front()));
  std::string refused_msg;
  if (!refused.empty())
    refused_msg = fmt::format("; refused: {} op/type pairs, first {}", refused.size(), refused.front());
  std::string list;
  for (auto& x : pairs) list += (list.empty() ? "" : ", ") + x;
  return pass(fmt::format("{} of {} cases with MIN, MAX, -1, 0 and wrap-around match exactly ({}){}", claimed, total, list, refused_msg));
}

// State over time (issue 14): one kernel per case, run kRuns times on different inputs (every
// other run from another thread than the kernel's creator), every output compared. The host poisons each call's buffers once it returns (kPoisonByte: NaN) and
// frees them a call later, so a kernel that reads an earlier call's input or output shows;
// so does one that changes after some runs (a cache, a tuned path, a counter).
Record repeated_runs_check(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  constexpr int kRuns = 20;
  int claimed = 0;
  std::set<std::string> ops;
  for (const OpSpec& spec : diff::op_specs())
    for (int id = 0; id < 2; ++id) {
      const Case cs = diff::make_case(spec, c.diff_seed, id);
      CaseGraph g(cs);
      Pipeline p(*env.s, g.gb);
      std::string e = p.build();
      if (!e.empty()) return fail(fmt::format("{}: {}", cs.describe(), e));
      if (p.claimed_nodes() != 1) continue;
      ++claimed;
      ops.insert(spec.id);
      for (int k = 0; k < kRuns; ++k) {
        const auto in = diff::make_inputs(cs, c.diff_seed, 200 + uint64_t(k));
        const auto ref = diff::reference(cs, in);
        std::vector<HostTensor> out;
        if (k % 2) {
          // Every other run from a thread other than the kernel's creator (a host calls from its pool).
          ComputeOptions o;
          o.phase = "kernel_compute from a thread other than the one that created the kernel";
          std::thread t([&] {
            try {
              e = p.run(g.feed(in), out, o);
            } catch (const std::exception& x) {
              e = std::string("a C++ exception crossed the C ABI: ") + x.what();
            }
          });
          t.join();
        } else {
          e = p.run(g.feed(in), out);
        }
        if (e.empty()) e = diff::compare_ref(cs, out.at(0), ref);
        if (e.empty()) continue;
        std::string hint;
        if (!out.empty() && has_new_nan(out.at(0), ref))
          hint = kPoisonHint;
        else if (k)
          hint = fmt::format(" (runs 1-{} of this kernel matched: does it change behaviour after {} runs?)", k, k);
        return fail(fmt::format("{}: one kernel, run {} of {} on new inputs{}: {}{}. Rerun: {}", cs.describe(), k + 1, kRuns,
                                k % 2 ? " (from a thread other than its creator)" : "", e, hint,
                                rerun_command(c, "repeated_runs")));
      }
    }
  if (!claimed) return skip("not run: the plugin claims none of the diff suite's cases");
  std::string names;
  for (auto& o : ops) names += (names.empty() ? "" : ", ") + o;
  return pass(fmt::format("{} kernels ({}) each ran {} times on new inputs, half of them from another thread than the "
                          "creator's, every output matched; each call's buffers were poisoned after it",
                          claimed, names, kRuns));
}

// Graph views are valid only during the call that received them: the host poisons the view
// kernel_create saw once it returns (Pipeline, OwnedView). A case that fails so and passes
// with the view left intact kept a pointer into it.
Record graph_view_check(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  int claimed = 0, elsewhere = 0;
  auto attempt = [&](const Case& cs, bool poison, bool* was_claimed) {
    CaseGraph g(cs);
    Pipeline p(*env.s, g.gb);
    p.set_poison_views(poison);
    std::string e = p.build();
    *was_claimed = p.claimed_nodes() == 1;
    if (!e.empty() || !*was_claimed) return e;
    for (uint64_t k = 0; k < 2 && e.empty(); ++k) {
      const auto in = diff::make_inputs(cs, c.diff_seed, 300 + k);
      std::vector<HostTensor> out;
      e = p.run(g.feed(in), out);
      if (e.empty()) e = diff::compare_ref(cs, out.at(0), diff::reference(cs, in));
    }
    return e;
  };
  for (const OpSpec& spec : diff::op_specs())
    for (int id = 0; id < 4; ++id) {
      const Case cs = diff::make_case(spec, c.diff_seed, id);
      bool was_claimed = false;
      const std::string e = attempt(cs, true, &was_claimed);
      if (!was_claimed) continue;
      ++claimed;
      if (e.empty()) continue;
      const std::string intact = attempt(cs, false, &was_claimed);
      if (!intact.empty()) {
        ++elsewhere;  // wrong either way: the op check names it
        continue;
      }
      return fail(fmt::format("case {}:{} ({}): after kernel_create returned, the host overwrote the graph view it had "
                              "handed over (names '#', dims and INT attributes {}, dtypes UNDEFINED) and kernel_compute "
                              "then failed: {}; with the view left intact it passes. Kept a pointer into the graph view "
                              "after kernel_create? (a view is valid only during the call: copy what the kernel needs). "
                              "Rerun: {}",
                              spec.id, id, cs.describe(), kPoisonInt, e, rerun_command(c, "graph_view")));
    }
  if (!claimed) return skip("not run: the plugin claims none of the diff suite's cases");
  return pass(fmt::format("{} kernels compute right after the host poisoned and kept the graph views they were created "
                          "from{}",
                          claimed, elsewhere ? fmt::format(" ({} fail with the view intact too: see op.*)", elsewhere) : ""));
}

// Mid-sized cases, big enough that concurrent calls overlap.
std::vector<Case> concurrency_cases() {
  std::vector<Case> v;
  auto add = [&](const char* spec_id, std::vector<std::vector<int64_t>> in, std::vector<int64_t> out,
                 std::vector<nxrt_attribute> attrs = {}) {
    Case c;
    c.spec = diff::find_spec(spec_id);
    c.id = 1000 + int(v.size());
    c.in_dims = std::move(in);
    c.out_dims = std::move(out);
    c.attrs = std::move(attrs);
    c.atol_scale = 64;
    v.push_back(std::move(c));
  };
  nxrt_attribute axis;
  axis.name = "axis";
  axis.type = NXRT_ATTR_INT;
  axis.i = 1;
  add("Add", {{16, 1, 64}, {1, 24, 64}}, {16, 24, 64});
  add("Relu", {{64, 256}}, {64, 256});
  add("MatMul", {{4, 32, 64}, {64, 48}}, {4, 32, 48});
  add("Gemm", {{48, 64}, {64, 40}, {40}}, {48, 40});
  add("Softmax_13", {{16, 64, 16}}, {16, 64, 16}, {axis});
  return v;
}

Record concurrent_distinct_inputs(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  if (!(env.p->features() & NXRT_FEATURE_CONCURRENT_RUN))
    return skip("not run: the plugin does not declare NXRT_FEATURE_CONCURRENT_RUN");
  constexpr int kThreads = 8, kRounds = 12;
  std::vector<std::string> tested;
  for (const Case& cs : concurrency_cases()) {
    CaseGraph g(cs);
    Pipeline p(*env.s, g.gb);
    std::string e = p.build();
    if (!e.empty()) return fail(cs.describe() + ": " + e);
    if (p.claimed_nodes() != 1) continue;
    // Each thread's own inputs, and the output one thread alone gets for them.
    std::vector<std::vector<HostTensor>> ins(kThreads);
    std::vector<HostTensor> alone(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      ins[size_t(t)] = diff::make_inputs(cs, c.diff_seed, uint64_t(t) + 1);
      std::vector<HostTensor> out;
      e = p.run(g.feed(ins[size_t(t)]), out);
      if (!e.empty()) return fail(fmt::format("{}: single-threaded run {}: {}", cs.describe(), t, e));
      alone[size_t(t)] = out.at(0);
    }
    if (compare(alone[0], alone[1], 0, 0).empty())
      return fail(cs.describe() + ": two different inputs gave the same output single-threaded");
    std::mutex mu;
    std::string first;
    std::atomic<int> ready{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back(guarded_thread(mu, first, t, [&, t] {
        ready++;
        while (ready.load() < kThreads) std::this_thread::yield();  // start together
        for (int k = 0; k < kRounds; ++k) {
          std::vector<HostTensor> out;
          std::string err = p.run(g.feed(ins[size_t(t)]), out);
          if (err.empty()) err = compare(out.at(0), alone[size_t(t)], 0, 0);
          if (!err.empty()) {
            std::lock_guard lock(mu);
            if (first.empty()) first = fmt::format("thread {} run {}: {}", t, k, err);
            return;
          }
        }
      }));
    for (auto& t : ts) t.join();
    if (!first.empty())
      return fail(fmt::format("{} threads sharing one {} kernel on different inputs ({}): {} differs from the single-threaded "
                              "result. NXRT_FEATURE_CONCURRENT_RUN is declared, so per-call state (scratch buffers) must "
                              "not be shared between calls",
                              kThreads, cs.spec->op, cs.describe(), first));
    tested.push_back(cs.spec->op);
  }
  if (tested.empty()) return skip("not run: the plugin claims none of Add, Relu, MatMul, Gemm, Softmax (float32) at these shapes");
  std::string ops;
  for (auto& o : tested) ops += (ops.empty() ? "" : ", ") + o;
  return pass(fmt::format("{} threads x {} runs of one kernel each for {}, different inputs per thread, all equal to the "
                          "single-threaded results",
                          kThreads, kRounds, ops));
}

}  // namespace

namespace {
// --diff-case values that rerun one input check alone.
const std::vector<std::string>& input_checks() {
  static const std::vector<std::string> v = {"byte_offset", "zero_size", "special_values", "dynamic_dims",
                                             "integer_extremes", "repeated_runs", "graph_view"};
  return v;
}
bool is_input_check(const std::string& which) {
  return std::find(input_checks().begin(), input_checks().end(), which) != input_checks().end();
}
}  // namespace

std::string diff_case_error(const std::string& which) {
  if (which.empty() || is_input_check(which)) return "";
  auto [spec, id] = parse_case(which);
  if (spec && (id >= 0 || which.find(':') == std::string::npos)) return "";
  std::string known, checks;
  for (auto& s : diff::op_specs()) known += (known.empty() ? "" : ", ") + s.id;
  for (auto& s : input_checks()) checks += (checks.empty() ? "" : ", ") + s;
  return "--diff-case '" + which + "': expected OP or OP:ID with OP one of " + known + " (or " + checks + ")";
}

std::vector<Item> diff_items(const Config& cfg) {
  std::vector<Item> items;
  auto [only, only_id] = parse_case(cfg.diff_case);
  // --diff-case names one op (or case), or one of the input checks.
  const std::string& dc = cfg.diff_case;
  const bool one_check = is_input_check(dc);
  for (const OpSpec& spec : diff::op_specs()) {
    if ((only && only != &spec) || one_check) continue;
    const OpSpec* sp = &spec;
    items.push_back(Item{"op." + spec.id, [cfg, sp] { return std::vector<Record>{op_check(cfg, *sp)}; }, spec.op, "float32"});
  }
  if (!only && (!one_check || dc == "byte_offset"))
    items.push_back(Item{"byte_offset.inputs_outputs", [cfg] { return std::vector<Record>{byte_offset_check(cfg)}; }, "", ""});
  if (!only && (!one_check || dc == "zero_size"))
    items.push_back(Item{"inputs.zero_size_dims", [cfg] { return std::vector<Record>{zero_size_check(cfg)}; }, "", ""});
  if (!only && (!one_check || dc == "special_values"))
    items.push_back(Item{"inputs.special_values", [cfg] { return std::vector<Record>{special_values_check(cfg)}; }, "", ""});
  if (!only && (!one_check || dc == "dynamic_dims"))
    items.push_back(Item{"inputs.dynamic_dims", [cfg] { return std::vector<Record>{dynamic_dims_check(cfg)}; }, "", ""});
  if (!only && (!one_check || dc == "integer_extremes"))
    items.push_back(Item{"inputs.integer_extremes", [cfg] { return std::vector<Record>{integer_extremes_check(cfg)}; }, "", ""});
  if (!only && (!one_check || dc == "repeated_runs"))
    items.push_back(Item{"state.repeated_runs", [cfg] { return std::vector<Record>{repeated_runs_check(cfg)}; }, "", ""});
  if (!only && (!one_check || dc == "graph_view"))
    items.push_back(Item{"graph_view.reuse", [cfg] { return std::vector<Record>{graph_view_check(cfg)}; }, "", ""});
  if (!only && !one_check)
    items.push_back(Item{"concurrent_run.distinct_inputs", [cfg] { return std::vector<Record>{concurrent_distinct_inputs(cfg)}; },
                         "", ""});
  return items;
}

}  // namespace conf
