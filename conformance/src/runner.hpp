// Check records and isolated execution: every item runs in a child process
// with a pipe for its results and a timeout, so a plugin that crashes, hangs
// or throws is a reported failure naming the check it was in.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace conf {

// status: "pass", "fail", "skip" or "unsupported".
struct Record {
  std::string suite, check, status, message;
  std::string op;     // ops suite: operator (matrix row)
  std::string dtype;  // ops suite: element type (coverage column)
  double seconds = 0;
};

inline Record make_record(std::string status, std::string msg) {
  Record r;
  r.status = std::move(status);
  r.message = std::move(msg);
  return r;
}
inline Record pass(std::string msg = "") { return make_record("pass", std::move(msg)); }
inline Record fail(std::string msg) { return make_record("fail", std::move(msg)); }
inline Record skip(std::string msg) { return make_record("skip", std::move(msg)); }

struct Item {
  std::string name;
  // Runs in the child. Returned records without a check name get `name`.
  std::function<std::vector<Record>()> fn;
  std::string op, dtype;  // copied onto a crash/timeout record
};

struct PoolOptions {
  int jobs = 1;
  double timeout_s = 60;  // per item
  size_t chunk = 1;       // items per child process
  std::function<void(size_t done, size_t total, const std::string& current)> progress;
};

// The plugin call the child is in, shared with the parent so a crash or a
// timeout names it ("last plugin call: session_release"). No-op in the parent.
void set_phase(const char* call);
std::string current_phase();  // "" when in none (or in the parent)
// Scoped: a call made inside another (a copy inside kernel_compute) names itself, then
// the outer call again.
struct Phase {
  explicit Phase(const char* call) : outer_(current_phase()) { set_phase(call); }
  ~Phase() { set_phase(outer_.c_str()); }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  std::string outer_;
};

// Runs the items of one suite; returns their records in item order.
std::vector<Record> run_isolated(const std::string& suite, const std::vector<Item>& items, const PoolOptions& o);

}  // namespace conf
