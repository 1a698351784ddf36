// The cache suite (ABI 2.4): a plugin declaring NXRT_FEATURE_KERNEL_CACHE keeps one
// fingerprint per device, judges fingerprints and blobs it did not make without crashing,
// and rebuilds every kernel it exports, in a fresh instance, bit-identically, from a blob
// held the way the host holds it (4096-aligned, read-only, unmapped after the release);
// with NXRT_FEATURE_OFFLINE_COMPILE, a session for the device's own description compiles
// kernels the opened device takes as OPTIMAL. Runs on the mini host (no libnxrt).
#include <fmt/format.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <deque>
#include <random>

#include "checks.hpp"
#include "diff_cases.hpp"
#include "utf8.hpp"

namespace conf {
namespace {

using diff::Case;
using diff::OpSpec;

constexpr int kCasesPerOp = 6;  // of the diff suite's cases per op (its fixed broadcasting shapes)

Record unsupported(std::string m) { return make_record("unsupported", std::move(m)); }

const char* verdict_name(uint32_t v) {
  switch (v) {
    case NXRT_CACHE_OPTIMAL: return "OPTIMAL";
    case NXRT_CACHE_USABLE: return "USABLE";
    case NXRT_CACHE_RECOMPILE: return "RECOMPILE";
    case NXRT_CACHE_UNSUPPORTED: return "UNSUPPORTED";
    default: return "an undefined verdict";
  }
}
bool accepts(uint32_t v) { return v == NXRT_CACHE_OPTIMAL || v == NXRT_CACHE_USABLE; }

// "" or what is wrong with a text the plugin returns (fingerprint, reason).
std::string text_problem(std::string_view s) {
  if (s.find_first_of("\r\n") != std::string_view::npos) return "is not one line";
  if (!valid_utf8(s)) return "is not valid UTF-8";
  return "";
}

// Loads the plugin as a 2.4 host. nullopt when the cache checks can run; else the record
// (unsupported without the feature, skip when it cannot be reached).
std::optional<Record> cache_env(Env& env, bool offline = false, bool session = true) {
  env.minor = kCacheMinor;
  if (auto r = env.load()) return r;
  if (env.p->agreed_minor() < kCacheMinor)
    return unsupported(fmt::format("the plugin agreed to ABI 2.{}; the compiled-kernel cache is 2.4", env.p->agreed_minor()));
  const auto& a = env.p->api();
  if (!(env.p->features() & NXRT_FEATURE_KERNEL_CACHE)) return unsupported("the plugin does not declare NXRT_FEATURE_KERNEL_CACHE");
  if (!a.session_fingerprint || !a.cache_check || !a.kernel_export || !a.kernel_import)
    return skip("not run: a cache function is NULL (see cache/api.feature_functions)");
  if (offline && !(env.p->features() & NXRT_FEATURE_OFFLINE_COMPILE))
    return unsupported("the plugin does not declare NXRT_FEATURE_OFFLINE_COMPILE");
  if (offline && !a.session_create_offline) return skip("not run: session_create_offline is NULL (see cache/api.feature_functions)");
  if (session) return env.session();
  return env.device();
}

std::string fingerprint_of(Session& s) {
  Phase ph("session_fingerprint");
  const char* f = s.plugin().api().session_fingerprint(s.raw());
  return f ? f : "";
}

// A blob as the host hands one over: its own mapping, starting 4096-aligned, read-only
// while kernels may use it, followed by an inaccessible guard page (a read past its end
// faults when its size is a multiple of 4096), and poisoned and made inaccessible once
// the kernel made from it is released (a kernel that kept pointers into it faults).
class BlobMap {
 public:
  explicit BlobMap(const std::vector<uint8_t>& bytes) : size_(bytes.size()) {
    pages_ = std::max<size_t>(4096, (size_ + 4095) / 4096 * 4096);
    void* m = mmap(nullptr, pages_ + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    base_ = static_cast<uint8_t*>(m);
    if (size_) std::memcpy(base_, bytes.data(), size_);
    mprotect(base_ + pages_, 4096, PROT_NONE);
    mprotect(base_, pages_, PROT_READ);
  }
  ~BlobMap() {
    if (base_) munmap(base_, pages_ + 4096);
  }
  BlobMap(const BlobMap&) = delete;
  BlobMap& operator=(const BlobMap&) = delete;
  bool ok() const { return base_ != nullptr; }
  const void* data() const { return base_; }
  uint64_t size() const { return size_; }
  void retire() {
    if (!base_) return;
    mprotect(base_, pages_, PROT_READ | PROT_WRITE);
    std::memset(base_, 0xA5, pages_);
    mprotect(base_, pages_, PROT_NONE);
  }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0, pages_ = 0;
};

// kernel_export into host memory.
Result export_kernel(const nxrt_plugin_api& api, nxrt_kernel* k, std::vector<uint8_t>* out) {
  out->clear();
  nxrt_blob_writer w{};
  w.struct_size = sizeof w;
  w.user = out;
  w.write = [](void* user, const void* bytes, uint64_t size) -> nxrt_status* {
    if (size && !bytes) return host_table_full()->status_create(NXRT_INVALID_ARGUMENT, 0, "blob writer: NULL bytes");
    if (size > (uint64_t(1) << 32)) return host_table_full()->status_create(NXRT_OUT_OF_MEMORY, 0, "blob writer: over 4 GiB");
    auto* v = static_cast<std::vector<uint8_t>*>(user);
    v->insert(v->end(), static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + size);
    return nullptr;
  };
  Phase ph("kernel_export");
  return take(api.kernel_export(k, &w));
}

// "" or what is wrong with a judgement the plugin filled (full-size struct).
std::string judgement_problem(const nxrt_cache_judgement& j) {
  if (j.struct_size != sizeof j)
    return fmt::format("wrote back struct_size {}, expected {} (the caller's size; the callee's is the same)", j.struct_size, sizeof j);
  if (j.verdict > NXRT_CACHE_UNSUPPORTED) return fmt::format("verdict {} is not defined", j.verdict);
  const void* nul = std::memchr(j.reason, 0, sizeof j.reason);
  if (!nul) return "the reason is not NUL-terminated within its 256 bytes";
  const std::string_view reason(j.reason);
  if (auto p = text_problem(reason); !p.empty()) return "the reason " + p;
  if (j.verdict == NXRT_CACHE_OPTIMAL && !reason.empty()) return "verdict OPTIMAL with a reason ('" + std::string(reason) + "'); OPTIMAL has \"\"";
  if (j.verdict != NXRT_CACHE_OPTIMAL && reason.empty()) return fmt::format("verdict {} without a reason", verdict_name(j.verdict));
  return "";
}

nxrt_cache_judgement fresh_judgement() {
  nxrt_cache_judgement j;
  std::memset(&j, 0xCC, sizeof j);
  j.struct_size = sizeof j;
  return j;
}

struct Judged {
  Result status;
  nxrt_cache_judgement j{};
  std::string problem;  // the call or its judgement broke a rule
};
Judged check_fingerprint(Session& s, const char* fp) {
  Judged r;
  r.j = fresh_judgement();
  {
    Phase ph("cache_check");
    r.status = take(s.plugin().api().cache_check(s.raw(), fp, &r.j));
  }
  if (!r.status.ok) r.problem = "failed with " + r.status.str() + " (an unusable fingerprint is a verdict, not an error)";
  else r.problem = judgement_problem(r.j);
  return r;
}

struct Imported {
  Result status;
  nxrt_cache_judgement j{};
  nxrt_kernel* k = nullptr;
  std::string problem;
};
// kernel_import of `blob` for the claim `view`; checks the verdict's rules.
Imported import_blob(Session& s, nxrt_graph* view, const void* blob, uint64_t size, const std::string& phase) {
  Imported r;
  r.j = fresh_judgement();
  view->creating = true;  // the kernel may capture constants, as in kernel_create
  {
    Phase ph(phase.substr(0, 120).c_str());
    r.status = take(s.plugin().api().kernel_import(s.raw(), view, blob, size, &r.j, &r.k));
  }
  view->creating = false;
  if (!r.status.ok) {
    r.problem = "kernel_import failed with " + r.status.str() +
                " (a blob it cannot use is a verdict, RECOMPILE or UNSUPPORTED, not an error)";
  } else if (std::string p = judgement_problem(r.j); !p.empty()) {
    r.problem = "kernel_import's judgement: " + p;
  } else if (accepts(r.j.verdict) && !r.k) {
    r.problem = fmt::format("kernel_import answered {} with a NULL kernel", verdict_name(r.j.verdict));
  } else if (!accepts(r.j.verdict) && r.k) {
    r.problem = fmt::format("kernel_import answered {} but returned a kernel (it must stay NULL)", verdict_name(r.j.verdict));
  }
  if (r.k && !r.problem.empty()) {
    Phase ph("kernel_release");
    s.plugin().api().kernel_release(r.k);
    r.k = nullptr;
  }
  return r;
}

void release(Session& s, nxrt_kernel*& k) {
  if (!k) return;
  Phase ph("kernel_release");
  s.plugin().api().kernel_release(k);
  k = nullptr;
}

// A single-node graph for one diff case; with `weights`, every input after the first is
// a constant (an initializer), as weights are: what a plugin prepacks and caches.
struct CacheGraph {
  CacheGraph(const Case& c, const std::vector<HostTensor>& in, bool weights) {
    gb.graph().opsets[""] = c.spec->opset;
    static const char* names[] = {"A", "B", "C"};
    const bool unary = c.in_dims.size() == 1;
    std::vector<const nxrt_value*> ins, dynamic;
    for (size_t i = 0; i < c.in_dims.size(); ++i) {
      const std::string name = unary ? "X" : names[i];
      if (weights && i > 0) {
        ins.push_back(gb.constant(name, NXRT_DTYPE_FLOAT32, c.in_dims[i], in[i].bytes));
      } else {
        ins.push_back(gb.value(name, NXRT_DTYPE_FLOAT32, c.in_dims[i]));
        dynamic.push_back(ins.back());
        feed[ins.back()] = in[i];
      }
    }
    const nxrt_value* y = gb.value("Y", NXRT_DTYPE_FLOAT32, c.out_dims);
    gb.node(c.spec->op, "", ins, {y}, c.attrs);
    gb.graph().inputs = dynamic;
    gb.graph().outputs = {y};
  }
  GraphBuilder gb;
  std::map<const nxrt_value*, HostTensor> feed;
};

// The plugin's one claim of the single node, or "" when it refused it; a string on error.
std::string claim_of(Session& s, const CacheGraph& g, std::unique_ptr<nxrt_graph>* view, std::string* refusal) {
  nxrt_claim_sink sink;
  Result r = s.capability(g.gb.graph(), sink);
  if (!r.ok) return "get_capability failed: " + r.str();
  if (!sink.violations.empty()) return "invalid claims: " + sink.violations.front();
  if (sink.claims.size() != 1 || sink.claims[0] != std::vector<size_t>{0}) {
    *refusal = sink.refusals.empty() ? "not claimed" : sink.refusals.begin()->second.second;
    view->reset();
    return "";
  }
  *view = g.gb.subgraph(sink.claims[0]);
  return "";
}

Result create_kernel(Session& s, nxrt_graph* view, nxrt_kernel** k) {
  view->creating = true;
  Result r;
  {
    Phase ph("kernel_create");
    r = take(s.plugin().api().kernel_create(s.raw(), view, k));
  }
  view->creating = false;
  if (r.ok && !*k) r = Result{false, NXRT_INTERNAL, "kernel_create returned success and a NULL kernel", ""};
  return r;
}

// Runs one kernel of a single-claim graph (run hooks around it, as a host calls them).
std::string run_kernel(Session& s, nxrt_kernel* k, const nxrt_graph* view, const CacheGraph& g, HostTensor* out,
                       const char* phase = nullptr) {
  const auto& api = s.plugin().api();
  std::vector<HostTensor> ins;
  for (auto* v : view->inputs) {
    if (v->constant) ins.push_back(HostTensor{v->dtype, v->dims, v->data});
    else ins.push_back(g.feed.at(v));
  }
  ComputeOptions o;
  o.view = view;
  o.phase = phase;
  static std::atomic<uint64_t> next_run{5000};
  o.run_id = next_run++;
  const bool hooks = (s.plugin().features() & NXRT_FEATURE_RUN_HOOKS) && api.on_run_start && api.on_run_end;
  if (hooks) {
    nxrt_run_options ro{};
    ro.struct_size = sizeof ro;
    ro.run_id = o.run_id;
    Phase ph("on_run_start");
    Result r = take(api.on_run_start(s.raw(), &ro));
    if (!r.ok) return "on_run_start failed: " + r.str();
  }
  ComputeResult cr = compute(s, k, ins, view->outputs.size(), o);
  if (hooks) {
    Phase ph("on_run_end");
    take(api.on_run_end(s.raw(), o.run_id, nullptr, nullptr));
  }
  if (!cr.status.ok) return "kernel_compute failed: " + cr.status.str();
  if (!cr.problem.empty()) return cr.problem;
  if (!cr.violations.empty()) return "kernel context misuse: " + cr.violations.front();
  if (cr.input_written >= 0) return "kernel_compute wrote to its input " + std::to_string(cr.input_written);
  *out = cr.outputs.at(0);
  return "";
}

// "" when two outputs are equal bit for bit.
std::string bit_identical(const HostTensor& got, const HostTensor& want) {
  if (got.dtype == want.dtype && got.dims == want.dims && got.bytes == want.bytes) return "";
  std::string e = compare(got, want, 0, 0);
  return e.empty() ? "the bytes differ (NaN payloads or -0)" : e;
}

std::vector<int> case_ids(const Config& c, const OpSpec& spec) {
  const int n = std::min(spec.default_cases, c.diff_cases > 0 ? c.diff_cases : kCasesPerOp);
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(i);
  return ids;
}

// One mid-sized case per op whose constants (when it has any) are over 8 KiB, so a blob
// truncated to 4096 or 8192 bytes ends at the guard page.
Case big_case(const OpSpec& spec) {
  Case c;
  c.spec = &spec;
  c.id = 2000;
  c.atol_scale = 64;
  if (spec.op == "MatMul") {
    c.in_dims = {{8, 64}, {64, 48}};
    c.out_dims = {8, 48};
  } else if (spec.op == "Gemm") {
    c.in_dims = {{8, 64}, {64, 40}, {40}};
    c.out_dims = {8, 40};
  } else if (spec.op == "Relu") {
    c.in_dims = {{64, 64}};
    c.out_dims = {64, 64};
  } else if (spec.op == "Softmax" || spec.op == "LogSoftmax") {
    c.in_dims = {{16, 64}};
    c.out_dims = {16, 64};
    nxrt_attribute axis;
    axis.name = "axis";
    axis.type = NXRT_ATTR_INT;
    axis.i = 1;
    c.attrs = {axis};
  } else {  // binary
    c.in_dims = {{32, 64}, {32, 64}};
    c.out_dims = {32, 64};
  }
  return c;
}

// ------------------------------------------------------------------- checks

Record feature_functions(const Config& c) {
  Env env(c);
  env.minor = kCacheMinor;
  if (auto r = env.load()) return *r;
  const auto& a = env.p->api();
  const uint64_t f = env.p->features();
  const bool cache = f & NXRT_FEATURE_KERNEL_CACHE, offline = f & NXRT_FEATURE_OFFLINE_COMPILE;
  const std::pair<const char*, const void*> fns[] = {
      {"session_fingerprint", reinterpret_cast<const void*>(a.session_fingerprint)},
      {"cache_check", reinterpret_cast<const void*>(a.cache_check)},
      {"kernel_export", reinterpret_cast<const void*>(a.kernel_export)},
      {"kernel_import", reinterpret_cast<const void*>(a.kernel_import)}};
  for (auto& [name, fn] : fns) {
    if (cache && !fn) return fail(fmt::format("NXRT_FEATURE_KERNEL_CACHE is declared but {} is NULL", name));
    if (!cache && fn) return fail(fmt::format("{} is set but NXRT_FEATURE_KERNEL_CACHE is not declared", name));
  }
  if (offline && !cache) return fail("NXRT_FEATURE_OFFLINE_COMPILE is declared without NXRT_FEATURE_KERNEL_CACHE");
  if (offline && !a.session_create_offline) return fail("NXRT_FEATURE_OFFLINE_COMPILE is declared but session_create_offline is NULL");
  if (!offline && a.session_create_offline)
    return fail("session_create_offline is set but NXRT_FEATURE_OFFLINE_COMPILE is not declared");
  if (env.p->agreed_minor() < kCacheMinor)
    return unsupported(fmt::format("the plugin agreed to ABI 2.{}; the compiled-kernel cache is 2.4", env.p->agreed_minor()));
  if (!cache) return unsupported("the plugin does not declare NXRT_FEATURE_KERNEL_CACHE (and its cache functions are NULL)");
  return pass(fmt::format("at 2.4: kernel_cache=yes (4 functions) offline_compile={}", offline ? "yes" : "no"));
}

Record fingerprint_stable(const Config& c) {
  Env env(c);
  if (auto r = cache_env(env)) return *r;
  Session s2(*env.p, c.device);
  s2.set_host_addressable(env.info.host_addressable != 0);
  if (Result r = s2.create(); !r.ok) return fail("a second session_create failed: " + r.str());
  std::string err, stage;
  auto p2 = Plugin::open(c.plugin, &err, &stage);
  if (!p2) return fail("a second load failed: " + err);
  if (std::string e = p2->negotiate(kCacheMinor); !e.empty()) return fail("a second instance: " + e);
  std::string f3;
  {
    Session s3(*p2, c.device);
    s3.set_host_addressable(env.info.host_addressable != 0);
    if (Result r = s3.create(); !r.ok) return fail("session_create in a second instance failed: " + r.str());
    f3 = fingerprint_of(s3);
  }
  p2->shutdown();
  const std::string f1 = fingerprint_of(*env.s), f2 = fingerprint_of(s2);
  if (f1.empty()) return fail("session_fingerprint is empty (or NULL)");
  if (auto p = text_problem(f1); !p.empty()) return fail("the fingerprint " + p + ": '" + f1 + "'");
  if (f1 != f2) return fail(fmt::format("two sessions of device {} give different fingerprints: '{}' and '{}'", c.device, f1, f2));
  if (f1 != f3)
    return fail(fmt::format("sessions of device {} in two plugin instances give different fingerprints: '{}' and '{}'", c.device, f1, f3));
  return pass(fmt::format("equal in two sessions and two instances: '{}'", f1));
}

Record fingerprint_check(const Config& c) {
  Env env(c);
  if (auto r = cache_env(env)) return *r;
  const std::string own = fingerprint_of(*env.s);
  Judged j = check_fingerprint(*env.s, own.c_str());
  if (!j.problem.empty()) return fail("cache_check of its own fingerprint: " + j.problem);
  if (j.j.verdict != NXRT_CACHE_OPTIMAL)
    return fail(fmt::format("cache_check of its own fingerprint: {} ('{}'), expected OPTIMAL", verdict_name(j.j.verdict), j.j.reason));
  std::string big;
  while (big.size() < 65536) big += own + " | ";
  big.resize(65536);
  const std::pair<std::string, std::string> others[] = {
      {"the empty fingerprint", ""},
      {"garbage", std::string("\x01garbage \xff\xfe\x80 not a fingerprint; subgroup=; ;;", 40)},
      {"64 KiB of text", big},
      {"another plugin's fingerprint",
       "vulkan 0.3.0; 10005:0:api1.3.230:drv23.2.1; cacheuuid=76e1f22b-d1a8-4c3e-b3a1-5b6e0c0c9a11; subgroup=8"}};
  std::string tally;
  for (auto& [what, fp] : others) {
    Judged o = check_fingerprint(*env.s, fp.c_str());
    if (!o.problem.empty()) return fail("cache_check of " + what + ": " + o.problem);
    if (accepts(o.j.verdict))
      return fail(fmt::format("cache_check of {} answered {}: a fingerprint it did not make must be RECOMPILE or UNSUPPORTED", what,
                              verdict_name(o.j.verdict)));
    tally += fmt::format("{}{}: {}", tally.empty() ? "" : "; ", what, verdict_name(o.j.verdict));
  }
  return pass("own: OPTIMAL; " + tally);
}

Record judgement_struct_size(const Config& c) {
  Env env(c);
  if (auto r = cache_env(env)) return *r;
  const std::string own = fingerprint_of(*env.s);
  constexpr uint32_t kSmall = offsetof(nxrt_cache_judgement, reason) + 16;
  struct Guarded {
    nxrt_cache_judgement j;
    uint8_t tail[64];
  };
  auto overrun = [&](const Guarded& g) -> std::string {
    const auto* b = reinterpret_cast<const uint8_t*>(&g);
    for (size_t i = kSmall; i < sizeof g; ++i)
      if (b[i] != 0xA5) return fmt::format("wrote byte {} past the caller's struct_size ({})", i, kSmall);
    if (g.j.struct_size != kSmall) return fmt::format("wrote back struct_size {}, expected min(caller's, own) = {}", g.j.struct_size, kSmall);
    if (g.j.verdict > NXRT_CACHE_UNSUPPORTED) return fmt::format("verdict {} is not defined", g.j.verdict);
    return "";
  };
  for (const char* fp : {own.c_str(), "not a fingerprint"}) {
    Guarded g;
    std::memset(&g, 0xA5, sizeof g);
    g.j.struct_size = kSmall;
    Result r;
    {
      Phase ph("cache_check (small judgement)");
      r = take(env.p->api().cache_check(env.s->raw(), fp, &g.j));
    }
    if (!r.ok) return fail(fmt::format("cache_check with struct_size {} failed: {}", kSmall, r.str()));
    if (auto e = overrun(g); !e.empty()) return fail(fmt::format("cache_check of '{}' with struct_size {}: {}", fp, kSmall, e));
  }
  // kernel_import with the same small judgement, on a blob no plugin made.
  for (const OpSpec& spec : diff::op_specs()) {
    const Case cs = big_case(spec);
    const auto in = diff::make_inputs(cs, c.diff_seed);
    CacheGraph g(cs, in, false);
    std::unique_ptr<nxrt_graph> view;
    std::string refusal;
    if (std::string e = claim_of(*env.s, g, &view, &refusal); !e.empty()) return fail(e);
    if (!view) continue;
    BlobMap m(std::vector<uint8_t>(64, 0x5a));
    Guarded j;
    std::memset(&j, 0xA5, sizeof j);
    j.j.struct_size = kSmall;
    nxrt_kernel* k = nullptr;
    Result r;
    {
      Phase ph("kernel_import (small judgement)");
      r = take(env.p->api().kernel_import(env.s->raw(), view.get(), m.data(), m.size(), &j.j, &k));
    }
    release(*env.s, k);
    if (!r.ok) return fail(fmt::format("kernel_import with struct_size {} failed: {}", kSmall, r.str()));
    if (auto e = overrun(j); !e.empty()) return fail(fmt::format("kernel_import with struct_size {}: {}", kSmall, e));
    return pass(fmt::format("cache_check and kernel_import with a {}-byte judgement write nothing past it", kSmall));
  }
  return pass(fmt::format("cache_check with a {}-byte judgement writes nothing past it (no op claimed for kernel_import)", kSmall));
}

// Exports each case's kernel in one instance, then imports it into a session of a fresh
// instance (the first one shut down) and compares outputs bit for bit.
Record roundtrip(const Config& c, const OpSpec& spec) {
  std::deque<BlobMap> maps;  // outlive every session
  struct Exported {
    Case cs;
    bool weights;
    std::vector<HostTensor> in;
    std::unique_ptr<CacheGraph> g;
    std::vector<uint8_t> blob;
    HostTensor out;
  };
  std::vector<Exported> done;
  int cases = 0, refused = 0, not_exported = 0;
  std::string fp, first_refusal;
  {
    Env a(c);
    if (auto r = cache_env(a)) return *r;
    fp = fingerprint_of(*a.s);
    for (int id : case_ids(c, spec)) {
      for (bool weights : {false, true}) {
        const Case cs = diff::make_case(spec, c.diff_seed, id);
        if (weights && cs.in_dims.size() < 2) continue;
        ++cases;
        Exported e{cs, weights, diff::make_inputs(cs, c.diff_seed), nullptr, {}, {}};
        e.g = std::make_unique<CacheGraph>(e.cs, e.in, weights);
        const std::string what = fmt::format("case {}:{}{} ({})", spec.id, id, weights ? " with constant weights" : "", cs.describe());
        std::unique_ptr<nxrt_graph> view;
        std::string refusal;
        if (std::string err = claim_of(*a.s, *e.g, &view, &refusal); !err.empty()) return fail(what + ": " + err);
        if (!view) {
          ++refused;
          if (first_refusal.empty()) first_refusal = what + ": " + refusal;
          continue;
        }
        nxrt_kernel* k = nullptr;
        if (Result r = create_kernel(*a.s, view.get(), &k); !r.ok) return fail(what + ": kernel_create failed: " + r.str());
        std::string err = run_kernel(*a.s, k, view.get(), *e.g, &e.out);
        Result x;
        if (err.empty()) x = export_kernel(a.p->api(), k, &e.blob);
        release(*a.s, k);
        if (!err.empty()) return fail(what + ": " + err);
        if (!x.ok && x.code == NXRT_UNSUPPORTED) {
          ++not_exported;
          continue;
        }
        if (!x.ok) return fail(what + ": kernel_export failed: " + x.str());
        done.push_back(std::move(e));
      }
    }
  }  // the exporting instance is shut down here
  if (cases == refused) return unsupported(fmt::format("refused all {} cases; first: {}", cases, first_refusal));
  if (done.empty())
    return pass(fmt::format("kernel_export answered NXRT_UNSUPPORTED for all {} claimed cases (nothing to cache)", cases - refused));
  Env b(c);
  if (auto r = cache_env(b)) return fail("the fresh instance: " + r->message);
  Judged j = check_fingerprint(*b.s, fp.c_str());
  if (!j.problem.empty()) return fail("cache_check in a fresh instance: " + j.problem);
  if (!accepts(j.j.verdict))
    return fail(fmt::format("a fresh instance judged the fingerprint of a session of the same device {}: {}", verdict_name(j.j.verdict),
                            j.j.reason));
  size_t optimal = 0;
  uint64_t bytes = 0;
  for (auto& e : done) {
    const std::string what =
        fmt::format("case {}:{}{} ({})", spec.id, e.cs.id, e.weights ? " with constant weights" : "", e.cs.describe());
    std::unique_ptr<nxrt_graph> view;
    std::string refusal;
    if (std::string err = claim_of(*b.s, *e.g, &view, &refusal); !err.empty()) return fail(what + ": fresh instance: " + err);
    if (!view) return fail(what + ": the fresh instance refused the node the first one claimed (get_capability must be deterministic)");
    maps.emplace_back(e.blob);
    BlobMap& m = maps.back();
    if (!m.ok()) return fail("internal: mmap failed");
    Imported im = import_blob(*b.s, view.get(), m.data(), m.size(), "kernel_import (the blob is mapped read-only)");
    if (!im.problem.empty()) return fail(what + ": " + im.problem);
    if (!accepts(im.j.verdict))
      return fail(fmt::format("{}: kernel_import of the blob it just exported ({} bytes) in a fresh instance answered {}: {}", what,
                              m.size(), verdict_name(im.j.verdict), im.j.reason));
    optimal += im.j.verdict == NXRT_CACHE_OPTIMAL;
    HostTensor out;
    std::string err = run_kernel(*b.s, im.k, view.get(), *e.g, &out);
    release(*b.s, im.k);
    m.retire();
    if (!err.empty()) return fail(what + ": the imported kernel: " + err);
    if (std::string d = bit_identical(out, e.out); !d.empty())
      return fail(fmt::format("{}: the imported kernel's output differs from the created kernel's: {}", what, d));
    bytes += e.blob.size();
  }
  std::string msg = fmt::format("{} kernels exported, imported in a fresh instance ({} OPTIMAL, {} USABLE) and bit-identical; {} bytes of blobs",
                                done.size(), optimal, done.size() - optimal, bytes);
  if (not_exported) msg += fmt::format("; kernel_export NXRT_UNSUPPORTED for {}", not_exported);
  if (refused) msg += fmt::format("; refused {} of {} cases", refused, cases);
  return pass(msg);
}

// A kernel made and exported for `cs`; its output. "" or an error; *blob empty when the
// plugin refused the case, *exported false when kernel_export answered NXRT_UNSUPPORTED.
struct Made {
  std::unique_ptr<CacheGraph> g;
  std::unique_ptr<nxrt_graph> view;
  HostTensor out;
  std::vector<uint8_t> blob;
  bool claimed = false, exported = false;
};
std::string make_and_export(Session& s, const Case& cs, const std::vector<HostTensor>& in, bool weights, Made* m) {
  m->g = std::make_unique<CacheGraph>(cs, in, weights);
  std::string refusal;
  if (std::string e = claim_of(s, *m->g, &m->view, &refusal); !e.empty()) return e;
  m->claimed = m->view != nullptr;
  if (!m->claimed) return "";
  nxrt_kernel* k = nullptr;
  if (Result r = create_kernel(s, m->view.get(), &k); !r.ok) return "kernel_create failed: " + r.str();
  std::string e = run_kernel(s, k, m->view.get(), *m->g, &m->out);
  Result x;
  if (e.empty()) x = export_kernel(s.plugin().api(), k, &m->blob);
  release(s, k);
  if (!e.empty()) return e;
  if (!x.ok && x.code != NXRT_UNSUPPORTED) return "kernel_export failed: " + x.str();
  m->exported = x.ok;
  return "";
}

// Corrupt, truncated, random and empty blobs: a verdict with a reason, or (accepted) the
// right outputs; never a crash.
Record hostile(const Config& c, const OpSpec& spec) {
  std::deque<BlobMap> maps;
  Env env(c);
  if (auto r = cache_env(env)) return *r;
  const Case cs = big_case(spec);
  const auto in = diff::make_inputs(cs, c.diff_seed);
  Made m;
  if (std::string e = make_and_export(*env.s, cs, in, cs.in_dims.size() > 1, &m); !e.empty()) return fail(cs.describe() + ": " + e);
  if (!m.claimed) return unsupported("refused " + cs.describe());
  std::vector<std::pair<std::string, std::vector<uint8_t>>> blobs;
  blobs.emplace_back("the empty blob", std::vector<uint8_t>{});
  const size_t n = m.blob.size();
  std::set<size_t> cuts = {1, 8, 16, 40, 64, 4096, 8192, n / 2, n ? n - 1 : 0};
  for (size_t cut : cuts)
    if (cut > 0 && cut < n)
      blobs.emplace_back(fmt::format("the blob truncated to {} of {} bytes", cut, n), std::vector<uint8_t>(m.blob.begin(), m.blob.begin() + long(cut)));
  std::mt19937_64 rng(c.diff_seed * 7919 + 17);
  for (int r = 0; r < 3; ++r) {
    std::vector<uint8_t> b(n ? n : 256);
    for (auto& x : b) x = uint8_t(rng());
    blobs.emplace_back(fmt::format("{} random bytes (draw {})", b.size(), r), std::move(b));
  }
  for (size_t i = 0; i < std::min<size_t>(64, n); ++i) {
    auto b = m.blob;
    b[i] ^= 0xFF;
    blobs.emplace_back(fmt::format("the blob with byte {} of {} flipped", i, n), std::move(b));
  }
  int rejected = 0, accepted = 0;
  for (auto& [what, bytes] : blobs) {
    maps.emplace_back(bytes);
    BlobMap& bm = maps.back();
    if (!bm.ok()) return fail("internal: mmap failed");
    Imported im = import_blob(*env.s, m.view.get(), bm.size() ? bm.data() : nullptr, bm.size(), "kernel_import of " + what);
    if (!im.problem.empty()) return fail(what + ": " + im.problem);
    if (!im.k) {
      ++rejected;
      continue;
    }
    ++accepted;
    HostTensor out;
    std::string e = run_kernel(*env.s, im.k, m.view.get(), *m.g, &out, "kernel_compute of a kernel imported from a corrupted blob");
    release(*env.s, im.k);
    bm.retire();
    if (e.empty()) e = bit_identical(out, m.out);
    if (!e.empty())
      return fail(fmt::format("{} ({}): kernel_import accepted it ({}) and the kernel is wrong: {}", what, cs.describe(),
                              verdict_name(im.j.verdict), e));
  }
  return pass(fmt::format("{} hostile blobs for {} ({}): {} judged RECOMPILE/UNSUPPORTED with a reason, {} accepted and correct{}",
                          blobs.size(), spec.id, cs.describe(), rejected, accepted,
                          m.exported ? "" : " (kernel_export NXRT_UNSUPPORTED: empty and random blobs only)"));
}

// A blob imported for a claim it was not exported from: another node's weights, another
// shape, another op. The plugin must notice (verdict), or compute this claim right.
Record foreign_claim(const Config& c) {
  std::deque<BlobMap> maps;
  Env env(c);
  if (auto r = cache_env(env)) return *r;
  struct Source {
    std::string what;
    Case cs;
    Made made;
  };
  std::vector<Source> made;
  for (const char* id : {"MatMul", "Gemm", "Add", "Mul", "Relu"}) {
    const OpSpec* spec = diff::find_spec(id);
    if (!spec) continue;
    const Case cs = big_case(*spec);
    Made m;
    if (std::string e = make_and_export(*env.s, cs, diff::make_inputs(cs, c.diff_seed), cs.in_dims.size() > 1, &m); !e.empty())
      return fail(cs.describe() + ": " + e);
    if (m.claimed && m.exported) made.push_back({cs.describe(), cs, std::move(m)});
  }
  if (made.empty()) return unsupported("no kernel of MatMul, Gemm, Add, Mul or Relu (float32) was claimed and exported");
  // The first source's node again, with other constant weights (same shapes and attributes).
  Made other;
  if (made[0].cs.in_dims.size() > 1)
    if (std::string e = make_and_export(*env.s, made[0].cs, diff::make_inputs(made[0].cs, c.diff_seed, 7), true, &other); !e.empty())
      return fail(made[0].what + " with other weights: " + e);
  std::string tally;
  int checked = 0;
  auto attempt = [&](const std::string& what, const std::vector<uint8_t>& blob, Made& target) -> std::string {
    maps.emplace_back(blob);
    BlobMap& bm = maps.back();
    Imported im = import_blob(*env.s, target.view.get(), bm.data(), bm.size(), "kernel_import of a blob of another claim");
    if (!im.problem.empty()) return what + ": " + im.problem;
    ++checked;
    if (!im.k) {
      tally += fmt::format("{}{}: {}", tally.empty() ? "" : "; ", what, verdict_name(im.j.verdict));
      return "";
    }
    HostTensor out;
    std::string e = run_kernel(*env.s, im.k, target.view.get(), *target.g, &out);
    release(*env.s, im.k);
    bm.retire();
    if (e.empty()) e = bit_identical(out, target.out);
    if (!e.empty())
      return fmt::format("{}: kernel_import accepted a blob exported from another claim ({}) and the kernel computes that "
                         "claim, not this one: {}. A blob must be judged against the claim it is imported for",
                         what, verdict_name(im.j.verdict), e);
    tally += fmt::format("{}{}: accepted, correct", tally.empty() ? "" : "; ", what);
    return "";
  };
  if (other.claimed)
    if (auto e = attempt(made[0].what + " with other constant weights", made[0].made.blob, other); !e.empty()) return fail(e);
  for (size_t i = 1; i < made.size(); ++i) {
    if (auto e = attempt(made[0].what + " -> " + made[i].what, made[0].made.blob, made[i].made); !e.empty()) return fail(e);
    if (auto e = attempt(made[i].what + " -> " + made[0].what, made[i].made.blob, made[0].made); !e.empty()) return fail(e);
  }
  if (!checked) return unsupported("only one claim could be made and exported: " + made[0].what);
  return pass(tally);
}

// A kernel keeps pointers into its blob only until its release: a second kernel of the
// same claim, imported from another copy or created, must not read the first blob.
Record after_release(const Config& c) {
  std::deque<BlobMap> maps;
  std::vector<uint8_t> blob;
  HostTensor want;
  const Case* chosen = nullptr;
  Case cs;
  {
    Env a(c);
    if (auto r = cache_env(a)) return *r;
    for (const char* id : {"MatMul", "Gemm", "Add", "Mul", "Relu"}) {
      const OpSpec* spec = diff::find_spec(id);
      if (!spec) continue;
      cs = big_case(*spec);
      Made m;
      if (std::string e = make_and_export(*a.s, cs, diff::make_inputs(cs, c.diff_seed), cs.in_dims.size() > 1, &m); !e.empty())
        return fail(cs.describe() + ": " + e);
      if (m.claimed && m.exported) {
        blob = m.blob;
        want = m.out;
        chosen = &cs;
        break;
      }
    }
  }
  if (!chosen) return unsupported("no kernel of MatMul, Gemm, Add, Mul or Relu (float32) was claimed and exported");
  const auto in = diff::make_inputs(cs, c.diff_seed);
  CacheGraph g(cs, in, cs.in_dims.size() > 1);
  Env b(c);
  if (auto r = cache_env(b)) return fail("the fresh instance: " + r->message);
  std::unique_ptr<nxrt_graph> view;
  std::string refusal;
  if (std::string e = claim_of(*b.s, g, &view, &refusal); !e.empty()) return fail(e);
  if (!view) return fail("the fresh instance refused " + cs.describe());
  for (int round = 0; round < 2; ++round) {
    maps.emplace_back(blob);
    BlobMap& m = maps.back();
    Imported im = import_blob(*b.s, view.get(), m.data(), m.size(),
                              round ? "kernel_import after the first imported kernel was released and its blob unmapped" : "kernel_import");
    if (!im.problem.empty()) return fail(im.problem);
    if (!im.k) return fail(fmt::format("kernel_import of a fresh blob answered {}: {}", verdict_name(im.j.verdict), im.j.reason));
    HostTensor out;
    std::string e = run_kernel(*b.s, im.k, view.get(), g, &out,
                               round ? "kernel_compute of a kernel imported after an earlier one's blob was unmapped" : nullptr);
    release(*b.s, im.k);
    m.retire();  // poisoned, then inaccessible
    if (e.empty()) e = bit_identical(out, want);
    if (!e.empty())
      return fail(round ? "a kernel imported after an earlier kernel of the same claim was released and its blob unmapped: " + e
                        : "the imported kernel: " + e);
  }
  nxrt_kernel* k = nullptr;
  if (Result r = create_kernel(*b.s, view.get(), &k); !r.ok) return fail("kernel_create after the imports: " + r.str());
  HostTensor out;
  std::string e = run_kernel(*b.s, k, view.get(), g, &out, "kernel_compute of a kernel created after the imported ones' blobs were unmapped");
  release(*b.s, k);
  if (e.empty()) e = bit_identical(out, want);
  if (!e.empty()) return fail("a kernel created after the imported kernels were released and their blobs unmapped: " + e);
  return pass(fmt::format("{}: two imports and a kernel_create, each after the previous blob was poisoned and unmapped", cs.describe()));
}

// ------------------------------------------------------------------ offline

// The device's description as `nxrt plugins --json` prints it, flattened to key/value text.
OptionList describe_device(const nxrt_device_info& i) {
  static const char* kinds[] = {"cpu", "gpu", "npu", "other"};
  OptionList d;
  d.emplace_back("kind", kinds[i.kind <= 3 ? i.kind : 3]);
  d.emplace_back("name", i.name ? i.name : "");
  d.emplace_back("vendor", i.vendor ? i.vendor : "");
  d.emplace_back("vendor_id", std::to_string(i.vendor_id));
  d.emplace_back("device_id", std::to_string(i.device_id));
  bool any = false;
  for (uint8_t b : i.uuid) any |= b != 0;
  std::string uuid;
  if (any) {
    for (int k = 0; k < 16; ++k) {
      if (k == 4 || k == 6 || k == 8 || k == 10) uuid += '-';
      uuid += fmt::format("{:02x}", i.uuid[k]);
    }
  }
  d.emplace_back("uuid", uuid);
  d.emplace_back("memory_bytes", std::to_string(i.memory_bytes));
  d.emplace_back("host_addressable", i.host_addressable ? "1" : "0");
  const bool has_bus = i.struct_size >= offsetof(nxrt_device_info, pci_bus_id) + sizeof i.pci_bus_id;
  d.emplace_back("pci_bus_id", has_bus && i.pci_bus_id ? i.pci_bus_id : "");
  std::string types;
  for (int t = 1; t < 64; ++t)
    if (i.dtypes & (1ull << t)) types += (types.empty() ? "" : ",") + std::string(dtype_name(nxrt_dtype(t)));
  d.emplace_back("dtypes", types);
  for (uint32_t k = 0; k < i.property_count && i.properties; ++k)
    if (const nxrt_property* p = i.properties[k]; p && p->key && p->value) d.emplace_back(p->key, p->value);
  return d;
}

// An offline session; released with the object.
struct OfflineSession {
  Plugin& p;
  nxrt_ep_session* s = nullptr;
  ~OfflineSession() {
    if (s) {
      Phase ph("session_release (offline)");
      p.api().session_release(s);
    }
  }
  Result create(const OptionList& desc) {
    std::vector<nxrt_property> props(desc.size());
    std::vector<const nxrt_property*> ptrs;
    for (size_t i = 0; i < desc.size(); ++i) {
      props[i].struct_size = sizeof(nxrt_property);
      props[i].key = desc[i].first.c_str();
      props[i].value = desc[i].second.c_str();
      ptrs.push_back(&props[i]);
    }
    Phase ph("session_create_offline");
    return take(p.api().session_create_offline(p.instance(), ptrs.data(), ptrs.size(), nullptr, 0, &s));
  }
};

Record offline_fingerprint(const Config& c) {
  Env env(c);
  if (auto r = cache_env(env, true)) return *r;
  OfflineSession off{*env.p};
  if (Result r = off.create(describe_device(env.info)); !r.ok)
    return fail("session_create_offline from the device's own description failed: " + r.str());
  if (!off.s) return fail("session_create_offline succeeded with a NULL session");
  const char* f = env.p->api().session_fingerprint(off.s);
  const std::string offline = f ? f : "", opened = fingerprint_of(*env.s);
  if (offline != opened)
    return fail(fmt::format("the offline session's fingerprint '{}' differs from the opened device's '{}'", offline, opened));
  Judged j = check_fingerprint(*env.s, offline.c_str());
  if (!j.problem.empty()) return fail("cache_check of the offline fingerprint: " + j.problem);
  if (j.j.verdict != NXRT_CACHE_OPTIMAL) return fail(fmt::format("the opened device judged it {}: {}", verdict_name(j.j.verdict), j.j.reason));
  return pass("equal to the opened session's: '" + opened + "'");
}

Record offline_roundtrip(const Config& c) {
  std::deque<BlobMap> maps;
  Env env(c);
  if (auto r = cache_env(env, true)) return *r;
  OfflineSession off{*env.p};
  if (Result r = off.create(describe_device(env.info)); !r.ok) return fail("session_create_offline failed: " + r.str());
  int claimed = 0, exported = 0;
  for (const OpSpec& spec : diff::op_specs()) {
    const Case cs = big_case(spec);
    const auto in = diff::make_inputs(cs, c.diff_seed);
    CacheGraph g(cs, in, cs.in_dims.size() > 1);
    nxrt_claim_sink sink;
    Result cap;
    {
      Phase ph("get_capability (offline)");
      sink.graph = &g.gb.graph();
      sink.features = env.p->features();
      cap = take(env.p->api().get_capability(off.s, &g.gb.graph(), &sink));
      std::lock_guard lock(sink.mu);
      sink.active = false;
    }
    if (!cap.ok) return fail(cs.describe() + ": get_capability in the offline session failed: " + cap.str());
    if (sink.claims.size() != 1) continue;
    ++claimed;
    auto view = g.gb.subgraph(sink.claims[0]);
    nxrt_kernel* k = nullptr;
    view->creating = true;
    Result kr;
    {
      Phase ph("kernel_create (offline)");
      kr = take(env.p->api().kernel_create(off.s, view.get(), &k));
    }
    view->creating = false;
    if (!kr.ok || !k) return fail(cs.describe() + ": kernel_create in the offline session failed: " + kr.str());
    std::vector<uint8_t> blob;
    Result x = export_kernel(env.p->api(), k, &blob);
    {
      Phase ph("kernel_release (offline)");
      env.p->api().kernel_release(k);
    }
    if (!x.ok && x.code == NXRT_UNSUPPORTED) continue;
    if (!x.ok) return fail(cs.describe() + ": kernel_export in the offline session failed: " + x.str());
    ++exported;
    // The opened device: its own kernel's output, then the offline blob's.
    Made here;
    if (std::string e = make_and_export(*env.s, cs, in, cs.in_dims.size() > 1, &here); !e.empty()) return fail(cs.describe() + ": " + e);
    if (!here.claimed) return fail(cs.describe() + ": the opened session refused what the offline session claimed");
    maps.emplace_back(blob);
    BlobMap& m = maps.back();
    Imported im = import_blob(*env.s, here.view.get(), m.data(), m.size(), "kernel_import of an offline-compiled blob");
    if (!im.problem.empty()) return fail(cs.describe() + ": " + im.problem);
    if (im.j.verdict != NXRT_CACHE_OPTIMAL) {
      release(*env.s, im.k);
      return fail(fmt::format("{}: a blob compiled offline for this device's own description was judged {}: {}", cs.describe(),
                              verdict_name(im.j.verdict), im.j.reason));
    }
    HostTensor out;
    std::string e = run_kernel(*env.s, im.k, here.view.get(), *here.g, &out);
    release(*env.s, im.k);
    m.retire();
    if (e.empty()) e = bit_identical(out, here.out);
    if (!e.empty()) return fail(cs.describe() + ": the kernel imported from the offline blob: " + e);
  }
  if (!claimed) return unsupported("the offline session claimed none of the cases");
  return pass(fmt::format("{} kernels compiled offline, {} exported and imported OPTIMAL and bit-identical on the device", claimed, exported));
}

Record offline_no_memory(const Config& c) {
  Env env(c);
  if (auto r = cache_env(env, true, false)) return *r;
  OfflineSession off{*env.p};
  if (Result r = off.create(describe_device(env.info)); !r.ok) return fail("session_create_offline failed: " + r.str());
  void* h = nullptr;
  Result r;
  {
    Phase ph("memory_alloc (offline)");
    r = take(env.p->api().memory_alloc(off.s, NXRT_MEMORY_DEVICE, 256, 64, &h));
  }
  if (r.ok) return fail("memory_alloc succeeded in an offline session (it must fail with NXRT_UNSUPPORTED)");
  if (r.code != NXRT_UNSUPPORTED) return fail("memory_alloc in an offline session failed with " + r.str() + ", expected NXRT_UNSUPPORTED");
  return pass("memory_alloc: " + r.str());
}

Record offline_missing_name(const Config& c) {
  Env env(c);
  if (auto r = cache_env(env, true, false)) return *r;
  OptionList d;
  for (auto& kv : describe_device(env.info))
    if (kv.first != "name") d.push_back(kv);
  OfflineSession off{*env.p};
  Result r = off.create(d);
  if (r.ok) return fail("session_create_offline accepted a description without \"name\" (expected NXRT_INVALID_ARGUMENT)");
  if (r.code != NXRT_INVALID_ARGUMENT) return fail("a description without \"name\": " + r.str() + ", expected NXRT_INVALID_ARGUMENT");
  if (r.message.find("name") == std::string::npos) return fail("a description without \"name\": the message does not name the key: " + r.str());
  return pass(r.str());
}

}  // namespace

std::vector<Item> cache_items(const Config& cfg) {
  std::vector<Item> items;
  auto add = [&](const char* name, Record (*fn)(const Config&)) {
    items.push_back(Item{name, [cfg, fn] { return std::vector<Record>{fn(cfg)}; }, "", ""});
  };
  add("api.feature_functions", feature_functions);
  add("fingerprint.stable", fingerprint_stable);
  add("fingerprint.check", fingerprint_check);
  add("judgement.struct_size", judgement_struct_size);
  for (const OpSpec& spec : diff::op_specs()) {
    const OpSpec* sp = &spec;
    items.push_back(Item{"roundtrip." + spec.id, [cfg, sp] { return std::vector<Record>{roundtrip(cfg, *sp)}; }, spec.op, "float32"});
  }
  for (const OpSpec& spec : diff::op_specs()) {
    const OpSpec* sp = &spec;
    items.push_back(Item{"hostile." + spec.id, [cfg, sp] { return std::vector<Record>{hostile(cfg, *sp)}; }, spec.op, "float32"});
  }
  add("hostile.foreign_claim", foreign_claim);
  add("blob.after_release", after_release);
  add("offline.fingerprint", offline_fingerprint);
  add("offline.roundtrip", offline_roundtrip);
  add("offline.no_memory", offline_no_memory);
  add("offline.missing_name", offline_missing_name);
  return items;
}

}  // namespace conf
