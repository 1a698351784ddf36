// nxrt-conformance: certifies an EP plugin binary.
//
//   nxrt-conformance --plugin PATH|NAME [--device N] [--suite abi,interop,diff,cache,ops,models,stress]
//                    [--tests DIR] [--models DIR] [--reference PATH|NAME]
//                    [--report-json F] [--report-md F] [--report-html F]
//                    [--jobs N] [--timeout S] [--stress-seconds S] [--ops-filter REGEX]
//                    [--diff-seed N] [--diff-cases N] [--diff-case OP[:ID]]
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "checks.hpp"
#include "report.hpp"

namespace fs = std::filesystem;
using namespace conf;

namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: nxrt-conformance --plugin PATH|NAME [options]\n"
               "  --plugin PATH|NAME    plugin library, or EP name resolved to libnxrt_ep_NAME.so\n"
               "                        (NXRT_PLUGIN_PATH, then <bin>/../lib and the installed <libdir>/nxrt)\n"
               "  --device N            device index (default 0)\n"
               "  --suite LIST          comma-separated: abi,interop,diff,cache,ops,models,stress (default: all)\n"
               "  --tests DIR           ONNX backend node tests (DIR/node/*, DIR/simple/*); default: generated\n"
               "                        with tools/gen_onnx_node_tests.py into the cache folder\n"
               "  --models DIR          bench models (*.onnx); default: generated with tools/gen_bench_models.py\n"
               "  --reference PATH|NAME reference plugin for models without expected outputs (default: cpu)\n"
               "  --report-json F, --report-md F, --report-html F\n"
               "  --jobs N              parallel child processes (default: CPUs)\n"
               "  --timeout S           seconds per check before it is killed (default 120)\n"
               "  --stress-seconds S    duration of the long stress checks (default 10)\n"
               "  --ops-filter REGEX    only node tests whose name matches\n"
               "  --diff-seed N         seed of the diff suite's generated cases (default 1)\n"
               "  --diff-cases N        at most N cases per op in the diff suite (default: each op's own count)\n"
               "  --diff-case OP[:ID]   diff suite: only op OP (e.g. MatMul, Softmax_11), or only its case ID\n"
               "                        (or byte_offset, zero_size, special_values: that input check alone)\n"
               "Exit status 0 only when every check that applies passes.\n");
}

// A non-negative integer option value; exits 2 with a message on anything else.
uint64_t number(const std::string& v, const std::string& option) {
  size_t used = 0;
  uint64_t n = 0;
  try {
    if (!v.empty() && v[0] != '-') n = std::stoull(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) {
    std::fprintf(stderr, "nxrt-conformance: %s needs a non-negative integer, got '%s'\n", option.c_str(), v.c_str());
    std::exit(2);
  }
  return n;
}

std::string exe_dir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, sep))
    if (!x.empty()) out.push_back(x);
  return out;
}

// PATH, or NAME resolved to libnxrt_ep_NAME.so in the plugin search path.
std::string resolve_plugin(const std::string& arg, const std::string& near = "") {
  if (arg.find('/') != std::string::npos || (arg.size() > 3 && arg.substr(arg.size() - 3) == ".so")) {
    std::error_code ec;
    auto abs = fs::absolute(arg, ec);
    return ec ? arg : abs.string();
  }
  std::string file = "libnxrt_ep_" + arg + ".so";
  std::vector<std::string> dirs;
  if (!near.empty()) dirs.push_back(near);
  if (const char* p = std::getenv("NXRT_PLUGIN_PATH"))
    for (auto& d : split(p, ':')) dirs.push_back(d);
  dirs.push_back(exe_dir() + "/../lib");
#ifdef NXRT_CONF_INSTALLED_PLUGIN_DIR
  dirs.push_back(exe_dir() + "/" NXRT_CONF_INSTALLED_PLUGIN_DIR);  // an installed prefix: <libdir>/nxrt
#endif
  dirs.push_back(exe_dir());
  for (auto& d : dirs)
    if (fs::exists(fs::path(d) / file)) return fs::weakly_canonical(fs::path(d) / file).string();
  return "";
}

std::string source_dir() {
  if (const char* s = std::getenv("NXRT_SOURCE_DIR")) return s;
#ifdef NXRT_CONF_INSTALLED_DATA_DIR
  // An installed prefix carries the data generators in <datadir>/nxrt/tools.
  std::error_code ec;
  if (std::string d = exe_dir() + "/" NXRT_CONF_INSTALLED_DATA_DIR; fs::exists(d + "/tools/gen_onnx_node_tests.py", ec)) return d;
#endif
#ifdef NXRT_CONF_SOURCE_DIR
  return NXRT_CONF_SOURCE_DIR;
#else
  return "";
#endif
}

std::string cache_dir() {
  if (const char* c = std::getenv("NXRT_CONFORMANCE_CACHE")) return c;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/nxrt";
  if (const char* h = std::getenv("HOME")) return std::string(h) + "/.cache/nxrt";
  return "/tmp/nxrt-cache";
}

// "no device: <reason>" when the plugin has no device to run the host suites on, else "".
std::string no_device(const Config& cfg) {
  Env env(cfg);
  auto r = env.device();
  return r && r->message.rfind("no device", 0) == 0 ? r->message : "";
}

// Runs a generator script into `dir` when it holds no data yet. "" or an error.
// Several conformance processes (ctest -j) may want the same data at once: the first takes a lock
// beside `dir`, generates into a private folder and renames it into place, so the others wait and
// no process ever lists a half-written `dir` (or one a second generator is rewriting).
std::string generate(const std::string& script, const std::string& dir, const std::string& probe) {
  if (fs::exists(fs::path(dir) / probe)) return "";
  std::error_code ec0;
  if (fs::is_directory(dir, ec0) && !fs::is_empty(dir, ec0)) return "";  // the user's own data
  std::string src = source_dir();
  std::string tool = src + "/tools/" + script;
  if (src.empty() || !fs::exists(tool)) return "no data in " + dir + " and tools/" + script + " not found (set NXRT_SOURCE_DIR)";
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  std::string lock_path = target.string() + ".lock";
  int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) return "cannot create " + lock_path + ": " + std::strerror(errno);
  struct Unlock {
    int fd;
    ~Unlock() { close(fd); }  // closing drops the flock
  } unlock{lock_fd};
  while (flock(lock_fd, LOCK_EX) != 0)
    if (errno != EINTR) return "cannot lock " + lock_path + ": " + std::strerror(errno);
  if (fs::exists(target / probe)) return "";  // another process generated it while we waited
  fs::path partial = target.string() + ".partial-" + std::to_string(getpid());
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  std::fprintf(stderr, "generating %s with %s (once)...\n", target.c_str(), script.c_str());
  std::string cmd = "/usr/bin/python3 '" + tool + "' '" + partial.string() + "' >&2";
  int rc = std::system(cmd.c_str());
  if (rc != 0 || !fs::exists(partial / probe)) {
    fs::remove_all(partial, ec);
    return tool + " failed (exit " + std::to_string(rc) + ")";
  }
  fs::remove(target, ec);  // an empty folder left by an earlier, interrupted run
  fs::rename(partial, target, ec);
  if (ec) {
    fs::remove_all(partial, ec);
    return "cannot move the generated data into " + target.string() + ": " + ec.message();
  }
  return "";
}

std::vector<std::pair<std::string, std::string>> probe_plugin(const Config& cfg) {
  Item it{"probe", [cfg] {
            std::vector<Record> out;
            auto kv = [&](const std::string& k, const std::string& v) {
              Record r = make_record("info", v);
              r.check = k;
              out.push_back(r);
            };
            std::string err, stage;
            auto p = Plugin::open(cfg.plugin, &err, &stage);
            if (!p) {
              kv("load error", err);
              return out;
            }
            // As the newest host, so the identity shows the plugin's minor (up to 2.2) and its interop features.
            std::string e = p->negotiate(kInteropMinor);
            if (!e.empty()) e = p->negotiate();
            if (!e.empty()) {
              kv("load error", e);
              return out;
            }
            auto& a = p->api();
            kv("name", a.name ? a.name : "");
            kv("version", a.version ? a.version : "");
            kv("abi", std::to_string(p->reply().abi_major) + "." + std::to_string(p->reply().abi_minor));
            std::string f;
            if (p->features() & NXRT_FEATURE_FUSED_GROUPS) f += "fused_groups ";
            if (p->features() & NXRT_FEATURE_STREAMS) f += "streams ";
            if (p->features() & NXRT_FEATURE_CONCURRENT_RUN) f += "concurrent_run ";
            if (p->features() & NXRT_FEATURE_RUN_HOOKS) f += "run_hooks ";
            if (p->features() & NXRT_FEATURE_DEVICE_PROFILING) f += "device_profiling ";
            if (p->features() & NXRT_FEATURE_NATIVE_HANDLES) f += "native_handles ";
            if (p->features() & NXRT_FEATURE_STREAM_IMPORT) f += "stream_import ";
            if (p->features() & NXRT_FEATURE_EXTERNAL_ALLOCATOR) f += "external_allocator ";
            if (p->features() & NXRT_FEATURE_MEMORY_STATS) f += "memory_stats ";
            kv("features", f.empty() ? "none" : f.substr(0, f.size() - 1));
            uint32_t n = 0;
            if (a.device_count && take(a.device_count(p->instance(), &n)).ok) {
              kv("devices", std::to_string(n));
              if (n == 0 && a.no_device_reason) kv("no_device_reason", a.no_device_reason(p->instance()) ? a.no_device_reason(p->instance()) : "");
              for (uint32_t d = 0; d < n && a.device_info; ++d) {
                nxrt_device_info i{};
                i.struct_size = sizeof i;
                if (take(a.device_info(p->instance(), d, &i)).ok)
                  kv("device " + std::to_string(d), std::string(i.name ? i.name : "?") + " (" + (i.vendor ? i.vendor : "") +
                                                        ", " + std::to_string(i.memory_bytes >> 20) + " MiB" +
                                                        (i.host_addressable ? ", host-addressable" : "") + ")");
              }
            }
            p->shutdown();
            return out;
          },
          "", ""};
  PoolOptions o;
  o.timeout_s = 60;
  std::vector<std::pair<std::string, std::string>> info;
  for (auto& r : run_isolated("probe", {it}, o)) {
    if (r.status == "info") info.emplace_back(r.check, r.message);
    else info.emplace_back("load error", r.message);
  }
  return info;
}

}  // namespace

int main(int argc, char** argv) {
  // The ops and models suites run through libnxrt: its read-only input guard hashes every
  // kernel input before and after the call, so a plugin writing to an input fails by name.
  setenv("NXRT_CHECK_READONLY_INPUTS", "1", 1);
  std::string plugin_arg, suites_arg = "abi,interop,diff,cache,ops,models,stress", json, mdf, htmlf, tests, models, reference = "cpu", filter;
  Config cfg;
  int jobs = int(std::max(1u, std::thread::hardware_concurrency()));
  double timeout = 120;
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "nxrt-conformance: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--plugin") plugin_arg = next();
    else if (a == "--device") cfg.device = uint32_t(std::stoul(next()));
    else if (a == "--suite" || a == "--suites") suites_arg = next();
    else if (a == "--tests") tests = next();
    else if (a == "--models") models = next();
    else if (a == "--reference") reference = next();
    else if (a == "--report-json") json = next();
    else if (a == "--report-md") mdf = next();
    else if (a == "--report-html") htmlf = next();
    else if (a == "--jobs" || a == "-j") jobs = std::max(1, std::stoi(next()));
    else if (a == "--timeout") timeout = std::stod(next());
    else if (a == "--stress-seconds") cfg.stress_seconds = std::stod(next());
    else if (a == "--ops-filter") filter = next();
    else if (a == "--diff-seed") cfg.diff_seed = number(next(), a);
    else if (a == "--diff-cases") cfg.diff_cases = int(std::clamp<uint64_t>(number(next(), a), 1, 1000000));
    else if (a == "--diff-case") cfg.diff_case = next();
    else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "nxrt-conformance: unknown argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (plugin_arg.empty()) {
    usage(stderr);
    return 2;
  }
  cfg.plugin = resolve_plugin(plugin_arg);
  if (cfg.plugin.empty()) {
    std::fprintf(stderr, "nxrt-conformance: no plugin '%s' (looked for libnxrt_ep_%s.so in NXRT_PLUGIN_PATH and %s/../lib)\n",
                 plugin_arg.c_str(), plugin_arg.c_str(), exe_dir().c_str());
    return 2;
  }
  std::set<std::string> known = {"abi", "interop", "diff", "cache", "ops", "models", "stress"};
  std::vector<std::string> suites = split(suites_arg, ',');
  for (auto& s : suites)
    if (!known.count(s)) {
      std::fprintf(stderr, "nxrt-conformance: unknown suite '%s' (abi, interop, diff, cache, ops, models, stress)\n", s.c_str());
      return 2;
    }
  if (std::string e = diff_case_error(cfg.diff_case); !e.empty()) {
    std::fprintf(stderr, "nxrt-conformance: %s\n", e.c_str());
    return 2;
  }
  cfg.source_dir = source_dir();
  cfg.cache_dir = cache_dir();
  cfg.reference = resolve_plugin(reference, fs::path(cfg.plugin).parent_path().string());
  signal(SIGPIPE, SIG_IGN);

  auto t0 = std::chrono::steady_clock::now();
  Report rep;
  rep.command = command;
  rep.plugin_path = cfg.plugin;
  rep.suites = suites;
  rep.plugin = probe_plugin(cfg);
  std::fprintf(stderr, "nxrt-conformance (a %u.%u host of the nxrt EP ABI; %u.%u for the interop suite): %s\n", NXRT_EP_ABI_MAJOR,
               kHostMinor, NXRT_EP_ABI_MAJOR, kInteropMinor, cfg.plugin.c_str());
  for (auto& [k, v] : rep.plugin) std::fprintf(stderr, "  %s: %s\n", k.c_str(), v.c_str());
  bool tty = isatty(2);

  for (auto& suite : suites) {
    std::vector<Item> items;
    std::string setup_error;
    PoolOptions o;
    o.jobs = jobs;
    o.timeout_s = timeout;
    if (suite == "abi") {
      items = abi_items(cfg);
    } else if (suite == "interop") {
      items = interop_items(cfg);
    } else if (suite == "diff") {
      items = diff_items(cfg);
    } else if (suite == "cache") {
      items = cache_items(cfg);
    } else if (suite == "stress") {
      items = stress_items(cfg);
      o.jobs = 1;  // the checks load the machine themselves
      o.timeout_s = std::max(timeout, cfg.stress_seconds * 3 + 30);
    } else if (!host_suites_available()) {
      setup_error = "not run: this build of nxrt-conformance has no libnxrt (host library)";
    } else if (std::string nd = no_device(cfg); !nd.empty()) {
      setup_error = nd;  // ops and models run sessions on the device: skipped, with the plugin's reason
    } else if (suite == "ops") {
      Config c = cfg;
      c.tests_dir = tests.empty() ? cfg.cache_dir + "/onnx-node-tests" : tests;
      setup_error = generate("gen_onnx_node_tests.py", c.tests_dir, "node");
      if (setup_error.empty()) {
        items = ops_items(c, &setup_error);
        if (!filter.empty()) {
          std::regex re(filter);
          std::vector<Item> keep;
          for (auto& it : items)
            if (std::regex_search(it.name, re)) keep.push_back(it);
          items = keep;
        }
      }
      o.chunk = 24;
    } else if (suite == "models") {
      Config c = cfg;
      c.tests_dir = tests.empty() ? cfg.cache_dir + "/onnx-node-tests" : tests;
      c.bench_dir = models.empty() ? cfg.cache_dir + "/bench" : models;
      setup_error = generate("gen_onnx_node_tests.py", c.tests_dir, "node");
      if (setup_error.empty()) setup_error = generate("gen_bench_models.py", c.bench_dir, "mlp.onnx");
      if (setup_error.empty()) items = models_items(c, &setup_error);
      o.jobs = std::min(jobs, 2);
      o.timeout_s = std::max(timeout, 300.0);
    }
    if (!setup_error.empty()) {
      Record r = skip(setup_error);
      r.suite = suite;
      r.check = "setup";
      if (setup_error.rfind("not run", 0) != 0 && setup_error.rfind("no device", 0) != 0) r.status = "fail";
      rep.records.push_back(r);
      std::fprintf(stderr, "[%s] %s\n", suite.c_str(), setup_error.c_str());
      continue;
    }
    size_t last_pct = 0;
    o.progress = [&](size_t done, size_t total, const std::string& cur) {
      if (tty) {
        std::fprintf(stderr, "\r\033[K[%s %zu/%zu] %s", suite.c_str(), done, total, cur.c_str());
        if (done == total) std::fprintf(stderr, "\n");
      } else {
        size_t pct = total ? done * 10 / total : 10;
        if (pct != last_pct || done == total) std::fprintf(stderr, "[%s %zu/%zu] %s\n", suite.c_str(), done, total, cur.c_str());
        last_pct = pct;
      }
    };
    auto recs = run_isolated(suite, items, o);
    for (auto& r : recs) {
      if (r.status == "fail") std::fprintf(stderr, "%sFAIL %s/%s: %s\n", tty ? "\r\033[K" : "", suite.c_str(), r.check.c_str(), r.message.c_str());
      rep.records.push_back(r);
    }
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  bool ok = true;
  if (!json.empty() && !write_json(rep, json)) ok = false, std::fprintf(stderr, "cannot write %s\n", json.c_str());
  if (!mdf.empty() && !write_markdown(rep, mdf)) ok = false, std::fprintf(stderr, "cannot write %s\n", mdf.c_str());
  if (!htmlf.empty() && !write_html(rep, htmlf)) ok = false, std::fprintf(stderr, "cannot write %s\n", htmlf.c_str());
  std::string text = summary_text(rep);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  for (auto& r : rep.records)
    if (r.status == "fail") return 1;
  return ok ? 0 : 1;
}
