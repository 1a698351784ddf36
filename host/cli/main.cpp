// nxrt: list plugins, run, inspect and benchmark ONNX models.
#include "commands.hpp"

#include <nxrt/nxrt.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const char* kUsage = R"(usage:
  nxrt plugins [--verbose] [--json] [--plugin PATH]...
  nxrt run MODEL [--ep LIST|auto] [--fallback] [--threads N] [--device N] [--input NAME=FILE.pb]...
               [--input-dir DIR] [--shape NAME=DIMS]... [--output-dir DIR] [--profile TRACE.json] [--ep-option EP.KEY=VALUE]...
               [--run-option EP.KEY=VALUE]... [--plugin PATH]...
  nxrt inspect MODEL [--ep LIST] [--fallback] [--threads N] [--json] [--verbose] [--ep-option EP.KEY=VALUE]...
               [--plugin PATH]...
  nxrt optimize MODEL -o OUT.onnx [--opt N] [--plugin PATH]...
  nxrt compile MODEL -o OUT.nxrt [--ep LIST] [--fallback] [--target DEVICE.json] [--opt N]
               [--ep-option EP.KEY=VALUE]... [--plugin PATH]...
  nxrt bench MODEL [--ep X] [--threads N] [--warmup W] [--iters I] [--json] [--profile TRACE.json]
             [--shape NAME=DIMS]... [--input NAME=FILE.pb]... [--input-dir DIR]
             [--io-binding] [--ep-option EP.KEY=VALUE]... [--run-option EP.KEY=VALUE]... [--plugin PATH]...
  (run, inspect and bench also take --cache DIR: a compiled-model cache folder, read when it
   holds this model and settings, written when not; inspect then prints the verdicts. MODEL
   may be a compiled model (OUT.nxrt of nxrt compile: the graph, weights and kernels; its
   kernels are used when the session settings match, else compiled again);
   compile --target compiles for a described device, the JSON `nxrt plugins --json` prints
   for it, without opening one;
   run, inspect and bench also take --memory-limit BYTES: the session's device memory cap,
   and --opt N: the graph optimization level, 0 none .. 3 all, default 2, the highest exact one;
   run --verbose prints what the optimizer did, inspect always does; inspect prints the
   placement and every refusal even when a run without --fallback would fail, says so, exits 1)
  nxrt --version
EP LIST is ordered and comma-separated (default: cpu); "auto" picks accelerators first,
then cpu, with fallback. --ep-option sets a session option of an EP (e.g.
vulkan.pipeline_cache=PATH; `nxrt plugins --verbose` lists them); --run-option is passed to
the EP's run hooks on every run. --threads N sets the session's threads (default: the
machine's); an EP may pick its kernels by it, so inspect takes it too. --profile writes each step's time as a Chrome trace
(bench: the timed iterations; summarise with tools/profile_summary.py). Inputs (run, bench):
--input NAME=FILE.pb and DIR/input_<k>.pb of --input-dir are TensorProto files; any other input
is generated (deterministic data, each dynamic dim 1). --shape NAME=1x3x640x640 gives input
NAME those dims: every dim, matching the declared rank and fixed dims. bench --io-binding keeps
inputs and outputs in the first EP's memory (uploaded once, no transfer per run). Plugins are found next to nxrt,
in ../lib, next to libnxrt and in its nxrt/ folder (where packages install them), in
NXRT_PLUGIN_PATH and at each --plugin PATH.
)";

// EP.KEY=VALUE (VALUE may be empty; KEY may not).
std::pair<std::string, std::string> key_value(const std::string& flag, const std::string& v) {
  auto eq = v.find('=');
  if (eq == std::string::npos || eq == 0) throw nxrt::cli::UsageError{fmt::format("{} needs EP.KEY=VALUE, got '{}'", flag, v)};
  return {v.substr(0, eq), v.substr(eq + 1)};
}

// --shape NAME=DIMS, DIMS like 1x3x640x640 (NAME may hold '=': the last one splits).
std::pair<std::string, std::vector<int64_t>> parse_shape(const std::string& v) {
  auto bad = [&](const std::string& why) {
    return nxrt::cli::UsageError{fmt::format("--shape needs NAME=DIMS like images=1x3x640x640, got '{}': {}", v, why)};
  };
  const auto eq = v.rfind('=');
  if (eq == std::string::npos || eq == 0) throw bad("no NAME=");
  const std::string text = v.substr(eq + 1);
  if (text.empty()) throw bad("no dims");
  std::vector<int64_t> dims;
  int64_t elements = 1;
  for (size_t start = 0;;) {
    const size_t end = std::min(text.find('x', start), text.size());
    const std::string d = text.substr(start, end - start);
    int64_t x = -1;
    auto [ptr, ec] = std::from_chars(d.data(), d.data() + d.size(), x);
    if (d.empty() || ec != std::errc() || ptr != d.data() + d.size() || x < 0)
      throw bad(fmt::format("dim {} ('{}') is not a non-negative integer", dims.size(), d));
    // Bounded so element count times element size never overflows later.
    if (x > 0 && (__builtin_mul_overflow(elements, x, &elements) || elements > (int64_t(1) << 50)))
      throw bad("more than 2^50 elements");
    dims.push_back(x);
    if (end == text.size()) break;
    start = end + 1;
  }
  return {v.substr(0, eq), std::move(dims)};
}

int parse_int(const std::string& flag, const char* v, int lo, int hi = 1 << 20) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (!*v || *end || x < lo || x > hi)
    throw nxrt::cli::UsageError{hi == 1 << 20 ? fmt::format("{} needs an integer >= {}, got '{}'", flag, lo, v)
                                              : fmt::format("{} needs an integer from {} to {}, got '{}'", flag, lo, hi, v)};
  return int(x);
}

nxrt::cli::Options parse(int argc, char** argv) {
  nxrt::cli::Options o;
  if (argc < 2) throw nxrt::cli::UsageError{"no command given"};
  o.command = argv[1];
  if (o.command == "-h" || o.command == "--help" || o.command == "help") {
    fmt::print("{}", kUsage);
    std::exit(0);
  }
  if (o.command == "--version" || o.command == "version") {
    fmt::print("nxrt {} (EP ABI {}.{})\n", nxrt_version(), nxrt_ep_abi_major(), nxrt_ep_abi_minor());
    std::exit(0);
  }
  if (o.command != "plugins" && o.command != "run" && o.command != "inspect" && o.command != "bench" &&
      o.command != "optimize" && o.command != "compile")
    throw nxrt::cli::UsageError{fmt::format("unknown command '{}'", o.command)};
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw nxrt::cli::UsageError{fmt::format("{} needs a value", a)};
      return argv[++i];
    };
    if (a == "--ep") o.eps = value();
    else if (a == "--fallback") o.fallback = true;
    else if (a == "--json") o.json = true;
    else if (a == "--threads") o.threads = parse_int(a, value(), 0);
    else if (a == "--device") o.device = unsigned(parse_int(a, value(), 0));
    else if (a == "--warmup") o.warmup = parse_int(a, value(), 0);
    else if (a == "--iters") o.iters = parse_int(a, value(), 1);
    else if (a == "--input-dir") o.input_dir = value();
    else if (a == "--output-dir") o.output_dir = value();
    else if (a == "--profile") o.profile = value();
    else if (a == "--io-binding" && o.command == "bench") o.io_binding = true;
    else if (a == "--memory-limit" && o.command != "plugins") {
      const char* v = value();
      char* end = nullptr;
      errno = 0;
      const unsigned long long x = std::strtoull(v, &end, 10);
      if (!*v || *end || errno || *v == '-') throw nxrt::cli::UsageError{fmt::format("--memory-limit needs a byte count, got '{}'", v)};
      o.memory_limit = x;
    }
    else if (a == "--plugin") o.plugin_paths.push_back(value());
    else if (a == "--verbose" && o.command != "bench") o.verbose = true;
    else if (a == "--opt" && o.command != "plugins") o.opt = parse_int(a, value(), 0, 3);
    else if ((a == "-o" || a == "--output") && (o.command == "optimize" || o.command == "compile")) o.output = value();
    else if (a == "--cache" && (o.command == "run" || o.command == "inspect" || o.command == "bench")) o.cache = value();
    else if (a == "--target" && o.command == "compile") o.target = value();
    else if (a == "--ep-option" && o.command != "plugins") o.ep_options.push_back(key_value(a, value()));
    else if (a == "--run-option" && (o.command == "run" || o.command == "bench")) o.run_options.push_back(key_value(a, value()));
    else if (a == "--shape" && (o.command == "run" || o.command == "bench")) {
      auto shape = parse_shape(value());
      for (auto& [name, dims] : o.shapes)
        if (name == shape.first) throw nxrt::cli::UsageError{fmt::format("--shape given twice for '{}'", name)};
      o.shapes.push_back(std::move(shape));
    } else if (a == "--input") {
      std::string v = value();
      auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
        throw nxrt::cli::UsageError{fmt::format("--input needs NAME=FILE.pb, got '{}'", v)};
      o.inputs.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (!a.empty() && a[0] == '-') {
      throw nxrt::cli::UsageError{fmt::format("unknown option '{}'", a)};
    } else if (o.model.empty() && o.command != "plugins") {
      o.model = a;
    } else {
      throw nxrt::cli::UsageError{fmt::format("unexpected argument '{}'", a)};
    }
  }
  if (o.command != "plugins" && o.model.empty()) throw nxrt::cli::UsageError{fmt::format("'nxrt {}' needs a MODEL", o.command)};
  if (o.command == "optimize" && o.output.empty()) throw nxrt::cli::UsageError{"'nxrt optimize' needs -o OUT.onnx"};
  if (o.command == "compile" && o.output.empty()) throw nxrt::cli::UsageError{"'nxrt compile' needs -o OUT.nxrt"};
  if (o.command == "compile" && o.output == o.model)
    throw nxrt::cli::UsageError{"'nxrt compile' writes next to the model, never over it: give another -o"};
  return o;
}

// Error lines may quote names from a corrupt model: keep control characters (terminal
// escapes, newlines) out of them so each error stays one harmless line.
std::string printable(std::string s) {
  for (auto& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto o = parse(argc, argv);
    if (o.command == "plugins") return nxrt::cli::cmd_plugins(o);
    if (o.command == "run") return nxrt::cli::cmd_run(o);
    if (o.command == "inspect") return nxrt::cli::cmd_inspect(o);
    if (o.command == "optimize") return nxrt::cli::cmd_optimize(o);
    if (o.command == "compile") return nxrt::cli::cmd_compile(o);
    return nxrt::cli::cmd_bench(o);
  } catch (const nxrt::cli::UsageError& e) {
    fmt::print(stderr, "nxrt: error: {}\n{}", printable(e.message), kUsage);
    return 2;
  } catch (const nxrt::Error& e) {
    fmt::print(stderr, "nxrt: error: {}\n", printable(e.what()));
    // 2: the user's request was wrong (bad option, input, name, missing file or EP).
    // 1: everything else: a plugin failed (NXRT_ERR_PLUGIN, including a kernel whose output
    // disagrees with shape inference), the model is invalid, unsupported nodes, runtime.
    bool bad_request = e.code() == NXRT_ERR_INVALID_ARGUMENT || e.code() == NXRT_ERR_NOT_FOUND;
    return bad_request ? 2 : 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "nxrt: error: out of host memory (an allocation failed)\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "nxrt: error: {}\n", printable(e.what()));
    return 1;
  }
}
