// The stress suite: long concurrent runs, failure injection through the host
// services (allocation, inputs), cancellation, and memory exhaustion.
#include <chrono>
#include <thread>

#include "checks.hpp"

namespace conf {
namespace {

using Clock = std::chrono::steady_clock;

std::string ok_or(const Result& r, const std::string& what) {
  if (r.ok) return "";
  return what + " failed: " + r.str() + (r.problem.empty() ? "" : " [" + r.problem + "]");
}

Record concurrent_sessions(const Config& c) {
  Env env(c);
  if (auto r = env.device()) return *r;
  AddRelu g({32, 65});
  {
    Session s(*env.p, c.device);
    Result r = s.create();
    if (!r.ok) return skip("not run: session_create failed");
    size_t claimed = 0;
    std::string e = run_add_relu_once(s, g, &claimed);
    if (!e.empty()) return fail("single run: " + e);
    if (!claimed) return skip("the plugin claims neither Add nor Relu (float32)");
  }
  auto until = Clock::now() + std::chrono::milliseconds(long(c.stress_seconds * 1000));
  std::mutex mu;
  std::string first;
  std::atomic<long> runs{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back(guarded_thread(mu, first, t, [&, t] {
      Session s(*env.p, c.device);
      std::string err = ok_or(s.create(), "session_create");
      std::unique_ptr<Pipeline> p;
      int round = 0;
      while (err.empty() && Clock::now() < until) {
        if (!p || round % 50 == 0) {  // rebuild kernels now and then: create/release under load
          p = std::make_unique<Pipeline>(s, g.gb);
          err = p->build();
          if (!err.empty()) break;
        }
        std::vector<HostTensor> out;
        err = p->run({{g.x, g.in_x}, {g.y, g.in_y}}, out);
        if (err.empty()) err = compare(out[0], g.expected, 0, 0);
        ++round;
        runs++;
      }
      if (!err.empty()) {
        std::lock_guard lock(mu);
        if (first.empty()) first = "thread " + std::to_string(t) + " round " + std::to_string(round) + ": " + err;
      }
    }));
  for (auto& t : ts) t.join();
  if (!first.empty()) return fail(first);
  return pass(std::to_string(runs.load()) + " runs on 8 sessions in " + std::to_string(int(c.stress_seconds)) + " s, all identical");
}

// Failure injection: the host fails ctx_output / ctx_input once.
Record injected(const Config& c, bool output) {
  Env env(c);
  if (auto r = env.session()) return *r;
  AddRelu g;
  Pipeline p(*env.s, g.gb);
  std::string e = p.build();
  if (!e.empty()) return fail(e);
  if (!p.claimed_nodes()) return skip("the plugin claims neither Add nor Relu (float32)");
  for (int round = 0; round < 5; ++round) {
    ComputeOptions o;
    (output ? o.fail_output : o.fail_input) = 0;
    std::vector<HostTensor> out;
    Result ks;
    std::vector<std::string> viol;
    e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out, o, &viol, &ks);
    if (ks.ok)
      return fail(std::string("kernel_compute returned success although ctx_") + (output ? "output" : "input") +
                  " failed (injected " + (output ? "NXRT_OUT_OF_MEMORY" : "NXRT_INTERNAL") + ")");
    if (!ks.problem.empty()) return fail("the failed run's status: " + ks.problem);
    if (!viol.empty()) return fail("kernel context misuse after an injected failure: " + viol.front());
    std::vector<HostTensor> good;
    e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, good);
    if (e.empty()) e = compare(good[0], g.expected);
    if (!e.empty()) return fail("the run after an injected failure is wrong: " + e);
  }
  return pass();
}

// The host cannot allocate statuses: status_create returns its static
// out-of-memory status (never NULL) while ctx_output fails. The plugin must
// still fail the call with a status (that one is fine) and recover.
Record status_oom(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  AddRelu g;
  Pipeline p(*env.s, g.gb);
  std::string e = p.build();
  if (!e.empty()) return fail(e);
  if (!p.claimed_nodes()) return skip("the plugin claims neither Add nor Relu (float32)");
  for (int round = 0; round < 5; ++round) {
    ComputeOptions o;
    o.fail_output = 0;
    o.starve_statuses = true;
    std::vector<HostTensor> out;
    Result ks;
    std::vector<std::string> viol;
    p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out, o, &viol, &ks);
    if (ks.ok)
      return fail("kernel_compute returned success although ctx_output failed while status_create could only return "
                  "the static out-of-memory status");
    if (!ks.problem.empty()) return fail("the failed run's status: " + ks.problem);
    std::vector<HostTensor> good;
    e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, good);
    if (e.empty()) e = compare(good[0], g.expected);
    if (!e.empty()) return fail("the run after status starvation is wrong: " + e);
  }
  auto v = host_log().take();
  if (!v.empty()) return fail(v.front());
  return pass();
}

Record cancellation(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  AddRelu g({128, 128});
  Pipeline p(*env.s, g.gb);
  std::string e = p.build();
  if (!e.empty()) return fail(e);
  if (!p.claimed_nodes()) return skip("the plugin claims neither Add nor Relu (float32)");
  int cancelled = 0, completed = 0;
  for (int round = 0; round < 10; ++round) {
    ComputeOptions o;
    o.cancelled = true;
    std::vector<HostTensor> out;
    Result ks;
    e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out, o, nullptr, &ks);
    if (!ks.ok) {
      if (ks.code != NXRT_CANCELLED)
        return fail(std::string("a cancelled run must return NXRT_CANCELLED or complete; got ") + ks.str());
      if (!ks.problem.empty()) return fail(ks.problem);
      ++cancelled;
    } else {
      if (!e.empty()) return fail("a cancelled run that completed is wrong: " + e);
      e = compare(out[0], g.expected);
      if (!e.empty()) return fail("a cancelled run that completed is wrong: " + e);
      ++completed;
    }
    std::vector<HostTensor> good;
    e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, good);
    if (e.empty()) e = compare(good[0], g.expected);
    if (!e.empty()) return fail("the run after a cancelled one is wrong: " + e);
  }
  return pass(std::to_string(cancelled) + " cancelled, " + std::to_string(completed) + " completed; next runs correct");
}

Record exhaustion(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  auto& api = env.p->api();
  const uint64_t chunk = 64ull << 20;
  uint64_t cap = 1ull << 30;
  std::vector<void*> hs;
  std::string err, note = "reached the 1 GiB cap";
  for (uint64_t total = 0; total < cap; total += chunk) {
    void* h = nullptr;
    Result r = take(api.memory_alloc(env.s->raw(), NXRT_MEMORY_DEVICE, chunk, 256, &h));
    if (!r.ok) {
      if (r.code != NXRT_OUT_OF_MEMORY || !r.problem.empty())
        err = "allocation failure must be NXRT_OUT_OF_MEMORY with a message; got " + r.str() + " " + r.problem;
      note = "out of memory after " + std::to_string(total >> 20) + " MiB";
      break;
    }
    hs.push_back(h);
  }
  for (auto* h : hs) api.memory_free(env.s->raw(), NXRT_MEMORY_DEVICE, h);
  if (!err.empty()) return fail(err);
  AddRelu g;
  size_t claimed = 0;
  std::string e = run_add_relu_once(*env.s, g, &claimed);
  if (!e.empty()) return fail("a run after freeing " + std::to_string(hs.size() * 64) + " MiB failed: " + e);
  return pass(note);
}

Record long_run_memory(const Config& c) {
  Env env(c);
  if (auto r = env.session()) return *r;
  AddRelu g({256, 256});
  Pipeline p(*env.s, g.gb);
  std::string e = p.build();
  if (!e.empty()) return fail(e);
  if (!p.claimed_nodes()) return skip("the plugin claims neither Add nor Relu (float32)");
  auto until = Clock::now() + std::chrono::milliseconds(long(c.stress_seconds * 1000));
  size_t m0 = 0, r0 = 0;
  long n = 0;
  while (Clock::now() < until || n < 50) {
    if (n == 20) {
      m0 = malloc_bytes();
      r0 = rss_bytes();
    }
    std::vector<HostTensor> out;
    e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out);
    if (!e.empty()) return fail("run " + std::to_string(n) + ": " + e);
    ++n;
  }
  long dm = long(malloc_bytes()) - long(m0), dr = long(rss_bytes()) - long(r0);
  if (dm > (16l << 20) || dr > (32l << 20))
    return fail("memory grew by " + std::to_string(dm >> 10) + " KiB malloc / " + std::to_string(dr >> 10) + " KiB RSS over " +
                std::to_string(n - 20) + " runs");
  return pass(std::to_string(n) + " runs, +" + std::to_string(dm >> 10) + " KiB malloc");
}

}  // namespace

std::vector<Item> stress_items(const Config& cfg) {
  std::vector<Item> items;
  auto add = [&](std::string name, std::function<Record(const Config&)> f) {
    items.push_back(Item{std::move(name), [f, cfg] { return std::vector<Record>{f(cfg)}; }, "", ""});
  };
  add("concurrent_sessions", concurrent_sessions);
  add("output_alloc_failure", [](const Config& c) { return injected(c, true); });
  add("input_failure", [](const Config& c) { return injected(c, false); });
  add("status_create_oom", status_oom);
  add("cancellation", cancellation);
  add("device_memory_exhaustion", exhaustion);
  add("long_run_memory", long_run_memory);
  for (auto& item : process_items(cfg)) items.push_back(std::move(item));
  return items;
}

}  // namespace conf
