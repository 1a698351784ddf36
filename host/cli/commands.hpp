// The nxrt CLI's commands. Each returns the process exit code.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace nxrt::cli {

struct Options {
  std::string command, model, eps = "cpu";
  bool fallback = false, json = false;
  int threads = 0;
  unsigned device = 0;
  int warmup = 5, iters = 20;
  std::vector<std::pair<std::string, std::string>> inputs;  // NAME=FILE
  // --shape NAME=1x3x640x640 (run, bench): the dims input NAME is generated (or checked) with.
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  std::string input_dir, output_dir;
  std::string profile;  // --profile FILE: Chrome trace of the (timed) runs
  std::vector<std::string> plugin_paths;  // --plugin PATH
  std::vector<std::pair<std::string, std::string>> ep_options;   // --ep-option EP.KEY=VALUE
  std::vector<std::pair<std::string, std::string>> run_options;  // --run-option EP.KEY=VALUE
  bool verbose = false;  // plugins --verbose: option schemas; run/inspect/optimize: the optimizer's account
  int opt = -1;          // --opt 0..3; -1: the default level
  std::string output;    // optimize -o OUT.onnx
  bool io_binding = false;     // bench --io-binding: inputs and outputs stay in the first EP's memory
  unsigned long long memory_limit = 0;  // --memory-limit BYTES (0: none)
  std::string cache;   // --cache DIR: compiled-model cache folder
  std::string target;  // compile --target DEVICE.json: compile for a described device
};

// Thrown for command-line mistakes: exit code 2.
struct UsageError {
  std::string message;
};

int cmd_plugins(const Options& o);
int cmd_run(const Options& o);
int cmd_inspect(const Options& o);
int cmd_bench(const Options& o);
int cmd_optimize(const Options& o);
int cmd_compile(const Options& o);

}  // namespace nxrt::cli
