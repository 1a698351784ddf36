// Test plugin for the run hooks, device profiling and retryable errors of ABI 2.0.
// float32 Relu on host memory; declares NXRT_FEATURE_RUN_HOOKS and
// NXRT_FEATURE_DEVICE_PROFILING. Only nxrt_ep_negotiate is exported, so it
// reports what happened by appending lines to the file named by the session
// option `hooks.log` (one line per event, written under a lock):
//   create attempt=N mode=M            every session_create call
//   start s=S run=R profiling=P opts=k=v,k=v
//   kernel s=S run=R node=I            every kernel_compute (R from ctx_run_id)
//   end s=S run=R status=ok|<code>:<message> sink=0|1
// S is the session's number within its plugin instance (1, 2...).
// Options:
//   hooks.log (path)                    the log file ("": no log)
//   hooks.fail_session_create (string)  "", retryable_once (every other call fails with a
//                                       retryable status), retryable_always, permanent
//   hooks.sleep_us (int)                each kernel sleeps this long (default 0)
// Run options (nxrt_session_run_with_options / --run-option):
//   hooks.fail=1       the run's kernels fail (on_run_end then gets a non-NULL status)
//   hooks.bad_shape=1  the run's kernels bind their output one element longer than
//                      shape inference says (the host must report a plugin failure)
//   hooks.<any>    logged in `opts`
// With profiling, on_run_end reports each kernel of the run as a device event
// named "relu@<node>" lasting 1000 ns on the plugin's own clock.
#include <nxrt_sdk/sdk.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace nxrt::sdk;

class HooksSession;

class Log {
 public:
  explicit Log(std::string path) : path_(std::move(path)) {}
  void line(const std::string& s) {
    if (path_.empty()) return;
    std::lock_guard lock(mu_);
    if (FILE* f = std::fopen(path_.c_str(), "a")) {
      std::fputs((s + "\n").c_str(), f);
      std::fclose(f);
    }
  }

 private:
  std::string path_;
  std::mutex mu_;
};

class HooksSession : public HostMemorySession {
 public:
  HooksSession(int id, std::string log, int64_t sleep_us) : sleep_us(sleep_us), id_(id), log_(std::move(log)) {}
  const int64_t sleep_us;

  void get_capability(const Graph& g, nxrt_claim_sink* sink) override {
    for (size_t i = 0; i < g.node_count(); ++i) {
      Node n = g.node(i);
      size_t idx = n.index();
      if (n.op_type() == "Relu" && n.domain().empty() && !require_dtypes(n, {NXRT_DTYPE_FLOAT32}))
        check(host().claim_nodes(sink, &idx, 1, 0));
      else
        check(host().refuse_node(sink, idx, NXRT_REFUSE_OP, "hooks runs float32 Relu only"));
    }
  }
  std::unique_ptr<Kernel> create_kernel(const Graph& g) override;

  void on_run_start(const RunOptions& ro) override {
    std::string opts;
    for (auto& [k, v] : ro.options) opts += (opts.empty() ? "" : ",") + k + "=" + v;
    {
      std::lock_guard lock(mu_);
      auto f = ro.options.find("hooks.fail");
      if (f != ro.options.end() && f->second == "1") failing_.insert(ro.run_id);
      auto b = ro.options.find("hooks.bad_shape");
      if (b != ro.options.end() && b->second == "1") bad_shape_.insert(ro.run_id);
      runs_[ro.run_id];
    }
    log_.line(fmt::format("start s={} run={} profiling={} opts={}", id_, ro.run_id, ro.profiling ? 1 : 0, opts));
  }
  void on_run_end(uint64_t run_id, const nxrt_status* st, nxrt_profile_sink* sink) override {
    std::vector<size_t> nodes;
    {
      std::lock_guard lock(mu_);
      nodes = std::move(runs_[run_id]);
      runs_.erase(run_id);
      failing_.erase(run_id);
      bad_shape_.erase(run_id);
    }
    std::string status = st ? fmt::format("{}:{}", host().status_code(st), host().status_message(st)) : "ok";
    log_.line(fmt::format("end s={} run={} status={} sink={}", id_, run_id, status, sink ? 1 : 0));
    if (sink) {
      uint64_t t = 5000;  // the "device clock": consecutive 1 us kernels
      for (size_t n : nodes) {
        report_device_time(sink, n, fmt::format("relu@{}", n), t, t + 1000);
        t += 1000;
      }
    }
  }

  bool bad_shape(uint64_t run_id) {
    std::lock_guard lock(mu_);
    return bad_shape_.count(run_id) != 0;
  }
  // Called by kernels.
  void ran(uint64_t run_id, size_t node) {
    bool fail;
    {
      std::lock_guard lock(mu_);
      runs_[run_id].push_back(node);
      fail = failing_.count(run_id) != 0;
    }
    log_.line(fmt::format("kernel s={} run={} node={}", id_, run_id, node));
    if (fail) fail_now(run_id);
  }

 private:
  [[noreturn]] static void fail_now(uint64_t run_id) {
    fail(NXRT_INTERNAL, "hooks: run {} was asked to fail (hooks.fail=1)", run_id);
  }
  int id_;
  Log log_;
  std::mutex mu_;
  std::map<uint64_t, std::vector<size_t>> runs_;
  std::set<uint64_t> failing_, bad_shape_;
};

class Relu : public Kernel {
 public:
  Relu(HooksSession& s, size_t node) : s_(s), node_(node) {}
  void compute(Context& ctx) override {
    auto x = ctx.input(0);
    std::vector<int64_t> dims = x.dims();
    if (s_.bad_shape(ctx.run_id())) dims = {x.numel() + 1};  // disagrees with shape inference
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, dims);
    const float* in = x.data<float>();
    float* out = y.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = std::max(in[i], 0.0f);
    if (s_.sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(s_.sleep_us));
    s_.ran(ctx.run_id(), node_);
  }

 private:
  HooksSession& s_;
  size_t node_;
};

std::unique_ptr<Kernel> HooksSession::create_kernel(const Graph& g) {
  if (g.node_count() != 1) fail(NXRT_UNSUPPORTED, "hooks binds single nodes");
  return std::make_unique<Relu>(*this, g.node(0).index());
}

class HooksPlugin : public Plugin {
 public:
  const char* name() const override { return "hooks"; }
  const char* version() const override { return "0.0.1"; }
  uint64_t features() const override { return NXRT_FEATURE_RUN_HOOKS | NXRT_FEATURE_DEVICE_PROFILING; }
  uint32_t device_count() override { return 1; }
  DeviceDescription describe_device(uint32_t) override {
    DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = "hooks test device";
    d.vendor = "nxrt tests";
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
    d.host_addressable = true;
    return d;
  }
  std::vector<OptionSpec> options() const override {
    return {{"hooks.log", NXRT_OPTION_PATH, "", "file the plugin appends one line per hook call to"},
            {"hooks.fail_session_create", NXRT_OPTION_STRING, "",
             "retryable_once, retryable_always or permanent: make session_create fail"},
            {"hooks.sleep_us", NXRT_OPTION_INT, "0", "each kernel sleeps this many microseconds"}};
  }
  std::unique_ptr<Session> create_session(uint32_t, const Options& o) override {
    auto get = [&](const char* k) {
      auto it = o.find(k);
      return it == o.end() ? std::string() : it->second;
    };
    const std::string mode = get("hooks.fail_session_create");
    const int attempt = ++attempts_;
    Log(get("hooks.log")).line(fmt::format("create attempt={} mode={}", attempt, mode.empty() ? "none" : mode));
    if (mode == "retryable_always" || (mode == "retryable_once" && attempt % 2 == 1))
      fail_retryable(NXRT_OUT_OF_MEMORY, "hooks: session_create attempt {} failed (retryable, {})", attempt, mode);
    if (mode == "permanent") fail(NXRT_DEVICE_LOST, "hooks: session_create attempt {} failed (permanent)", attempt);
    if (!mode.empty() && mode != "retryable_once")
      fail(NXRT_INVALID_ARGUMENT, "hooks.fail_session_create: unknown mode '{}'", mode);
    const int64_t sleep_us = option_int(o, "hooks.sleep_us", 0);
    if (sleep_us < 0) fail(NXRT_INVALID_ARGUMENT, "hooks.sleep_us must be >= 0, got {}", sleep_us);
    return std::make_unique<HooksSession>(++sessions_, get("hooks.log"), sleep_us);
  }

 private:
  std::atomic<int> attempts_{0}, sessions_{0};
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(HooksPlugin)
