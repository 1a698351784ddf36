#include "commands.hpp"

#include <nxrt/nxrt.hpp>

#include <fmt/format.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

namespace nxrt::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Element types in ONNX TensorProto numbering (nxrt.h's convention).
constexpr int32_t kFloat32 = 1, kString = 8, kBool = 9, kFloat64 = 11;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

Env make_env(const Options& o) {
  Env env(true);
  for (auto& p : o.plugin_paths) env.register_plugin(p);
  return env;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", int(c));
        else out += c;
    }
  }
  return out;
}

bool is_compiled_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[8] = {};
  return f.read(magic, 8) && std::memcmp(magic, "NXRTCMP\x1a", 8) == 0;
}

// A device description for --target: one flat JSON object of string (or number, or
// boolean) values, as `nxrt plugins --json` prints each device. Small and strict: nested
// values and anything else are refused with the byte where they start.
KeyValues read_target(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(NXRT_ERR_NOT_FOUND, fmt::format("--target: cannot read '{}'", path));
  std::string t((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t i = 0;
  auto fail = [&](const std::string& what) -> KeyValues {
    throw Error(NXRT_ERR_INVALID_ARGUMENT, fmt::format("--target '{}': {} at byte {} (want one flat JSON object, as "
                                                       "`nxrt plugins --json` prints a device)", path, what, i));
  };
  auto ws = [&] { while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i; };
  auto str = [&]() -> std::string {
    std::string out;
    if (i >= t.size() || t[i] != '"') fail("expected a string");
    for (++i; i < t.size() && t[i] != '"'; ++i) {
      if (t[i] != '\\') { out += t[i]; continue; }
      if (++i >= t.size()) break;
      switch (t[i]) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i + 4 >= t.size()) fail("a short \\u escape");
          const unsigned cp = unsigned(std::stoul(t.substr(i + 1, 4), nullptr, 16));
          if (cp < 0x80) out += char(cp);
          else if (cp < 0x800) { out += char(0xc0 | (cp >> 6)); out += char(0x80 | (cp & 0x3f)); }
          else { out += char(0xe0 | (cp >> 12)); out += char(0x80 | ((cp >> 6) & 0x3f)); out += char(0x80 | (cp & 0x3f)); }
          i += 4;
          break;
        }
        default: out += t[i];
      }
    }
    if (i >= t.size()) fail("an unterminated string");
    ++i;
    return out;
  };
  KeyValues kv;
  ws();
  if (i >= t.size() || t[i] != '{') return fail("expected '{'");
  ++i;
  ws();
  if (i < t.size() && t[i] == '}') return kv;
  for (;;) {
    ws();
    std::string k = str();
    ws();
    if (i >= t.size() || t[i] != ':') return fail("expected ':'");
    ++i;
    ws();
    std::string v;
    if (i < t.size() && t[i] == '"') {
      v = str();
    } else {
      const size_t start = i;
      while (i < t.size() && (std::isalnum(static_cast<unsigned char>(t[i])) || t[i] == '-' || t[i] == '+' || t[i] == '.')) ++i;
      v = t.substr(start, i - start);
      if (v.empty()) return fail("expected a string, number or boolean");
      if (v == "true") v = "1";
      if (v == "false") v = "0";
    }
    kv.emplace_back(std::move(k), std::move(v));
    ws();
    if (i < t.size() && t[i] == ',') { ++i; continue; }
    if (i < t.size() && t[i] == '}') break;
    return fail("expected ',' or '}'");
  }
  return kv;
}

// Deterministic data, the same generator as the ONNX Runtime bench tool (lcgFloat32), of
// the given dims (input_dims).
Tensor generated_input(const nxrt_io_info& info, std::vector<int64_t> dims, size_t index) {
  Tensor t;
  t.name = info.name;
  t.dtype = info.dtype;
  t.dims = std::move(dims);
  if (t.dtype == kString) {  // text of the same numbers: "0.25", "-0.5"...
    std::vector<std::string> values(size_t(t.numel()));
    uint32_t s = uint32_t(1234 + index);
    for (auto& v : values) {
      s = s * 1664525u + 1013904223u;
      v = fmt::format("{}", float(s >> 8) / 16777216.0f * 2.0f - 1.0f);
    }
    return Tensor::of_strings(t.name, t.dims, std::move(values));
  }
  size_t es = dtype_size(t.dtype);
  if (es == 0) throw Error(NXRT_ERR_UNSUPPORTED, fmt::format("cannot generate data for input '{}' of type {}", t.name, dtype_name(t.dtype)));
  size_t n = size_t(t.numel());
  try {
    t.data.resize(n * es);
  } catch (const std::bad_alloc&) {  // a declared input of terabytes: say which, not "std::bad_alloc"
    throw Error(NXRT_ERR_RESOURCE_EXHAUSTED, fmt::format("out of host memory generating input '{}' ({:.3g} GiB); give it with --input",
                                                         t.name, double(n) * double(es) / double(1ull << 30)));
  }
  uint32_t s = uint32_t(1234 + index);
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    float f = float(s >> 8) / 16777216.0f * 2.0f - 1.0f;
    uint8_t* p = t.data.data() + i * es;
    switch (t.dtype) {
      case kFloat32: std::memcpy(p, &f, 4); break;
      case kFloat64: { double d = f; std::memcpy(p, &d, 8); break; }
      case kBool: *p = (s >> 8) & 1; break;
      default: {  // integers: small non-negative values, valid as indices of small axes
        uint64_t v = (s >> 8) % 4;
        std::memcpy(p, &v, es);
      }
    }
  }
  return t;
}

// "a, b, c": the model's input names, for errors about a name it lacks.
std::string input_names(const std::vector<nxrt_io_info>& infos) {
  std::string names;
  for (auto& i : infos) names += (names.empty() ? "" : ", ") + std::string(i.name);
  return names;
}

// The .pb file given for input k (--input NAME=FILE, or input_<k>.pb in --input-dir), "" if none.
fs::path input_file(const Options& o, const nxrt_io_info& info, size_t k) {
  for (auto& [name, file] : o.inputs)
    if (name == info.name) return file;
  if (!o.input_dir.empty() && fs::exists(fs::path(o.input_dir) / fmt::format("input_{}.pb", k)))
    return fs::path(o.input_dir) / fmt::format("input_{}.pb", k);
  return {};
}

// 1x3x640x640: dims as --shape takes them.
std::string shape_arg(const std::vector<int64_t>& dims) {
  std::string s;
  for (auto d : dims) s += fmt::format("{}{}", s.empty() ? "" : "x", d);
  return s;
}

// --shape of an input, or null.
const std::vector<int64_t>* shape_option(const Options& o, const std::string& name) {
  for (auto& [n, dims] : o.shapes)
    if (n == name) return &dims;
  return nullptr;
}

// The dims an input is generated with: its --shape, checked against the declared rank and
// every fixed declared dim, else the declared dims with each dynamic one 1.
std::vector<int64_t> input_dims(const Options& o, const nxrt_io_info& info) {
  const auto* shape = shape_option(o, info.name);
  if (!shape) {
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < std::max<int64_t>(info.rank, 0); ++d) dims.push_back(info.dims[d] < 0 ? 1 : info.dims[d]);
    return dims;
  }
  if (info.rank < 0) return *shape;  // rank unknown: any shape is the caller's to give
  const std::vector<int64_t> declared(info.dims, info.dims + info.rank);
  if (int64_t(shape->size()) != info.rank)
    throw Error(NXRT_ERR_INVALID_ARGUMENT, fmt::format("--shape {}={}: input '{}' has rank {} (declared {}), not {}", info.name,
                                                       shape_arg(*shape), info.name, info.rank, shape_str(declared), shape->size()));
  for (size_t d = 0; d < shape->size(); ++d)
    if (declared[d] >= 0 && declared[d] != (*shape)[d])
      throw Error(NXRT_ERR_INVALID_ARGUMENT,
                  fmt::format("--shape {}={}: dim {} of input '{}' is fixed at {} (declared {}), not {}", info.name, shape_arg(*shape), d,
                              info.name, declared[d], shape_str(declared), (*shape)[d]));
  return *shape;
}

// The inputs of a run: read from --input / --input-dir files, the rest generated (with
// --shape dims where given). Sequence and optional inputs get an empty placeholder that
// run_with_values replaces with its file.
std::vector<Tensor> prepare_inputs(const Options& o, Session& s) {
  auto infos = s.inputs();
  std::vector<Tensor> out;
  auto check_known = [&](const char* flag, const std::string& name) {
    for (auto& i : infos)
      if (name == i.name) return;
    throw Error(NXRT_ERR_INVALID_ARGUMENT, fmt::format("{}: the model has no input named '{}' (its inputs: {})", flag, name, input_names(infos)));
  };
  for (auto& [name, file] : o.inputs) check_known("--input", name);
  for (auto& [name, dims] : o.shapes) check_known("--shape", name);
  if (!o.input_dir.empty() && !fs::is_directory(o.input_dir))
    throw Error(NXRT_ERR_NOT_FOUND, fmt::format("input folder '{}' does not exist", o.input_dir));
  for (size_t k = 0; k < infos.size(); ++k) {
    const fs::path file = input_file(o, infos[k], k);
    const auto* shape = shape_option(o, infos[k].name);
    if (s.input_kind(k) != NXRT_VALUE_TENSOR) {  // a sequence or optional: read by run_with_values
      if (shape) throw Error(NXRT_ERR_INVALID_ARGUMENT, fmt::format("--shape: input '{}' is not a tensor", infos[k].name));
      Tensor t;
      t.name = infos[k].name;
      out.push_back(std::move(t));
    } else if (file.empty()) {
      out.push_back(generated_input(infos[k], input_dims(o, infos[k]), k));
    } else {
      Tensor t = read_tensor_file(file.string());
      t.name = infos[k].name;  // the file's own name may differ; position or flag decides
      if (shape && *shape != t.dims)
        throw Error(NXRT_ERR_INVALID_ARGUMENT, fmt::format("input '{}': --shape says {} but '{}' holds {}", t.name, shape_arg(*shape),
                                                           file.string(), shape_arg(t.dims)));
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::vector<nxrt_host_tensor> views(const std::vector<Tensor>& ts) {
  std::vector<nxrt_host_tensor> v;
  for (auto& t : ts) v.push_back(t.view());
  return v;
}

int opt_level(const Options& o) { return o.opt < 0 ? NXRT_OPT_DEFAULT : NXRT_OPT_LEVEL_0 + o.opt; }

SessionOptions session_options(const Options& o) {
  SessionOptions s{o.eps, o.fallback, o.threads, o.device, o.ep_options};
  s.device_memory_limit = o.memory_limit;
  s.optimization_level = opt_level(o);
  return s;
}

// Per-EP memory of a session: what the host holds on it and the EP's own account.
std::string memory_json(const Session& s) {
  std::string out = "[";
  for (auto& u : s.memory_usage()) {
    out += fmt::format("{}{{\"ep\":\"{}\",\"bytes_in_use\":{},\"peak_bytes\":{},\"arena_bytes\":{},\"allocations\":{},\"limit_bytes\":{},\"plugin\":",
                       out.size() > 1 ? "," : "", json_escape(u.ep), u.bytes_in_use, u.peak_bytes, u.arena_bytes,
                       u.allocation_count, u.limit_bytes);
    if (!u.has_plugin_stats) {
      out += "null}";
      continue;
    }
    const nxrt_memory_stats& p = u.plugin;
    out += fmt::format("{{\"bytes_in_use\":{},\"peak_bytes\":{},\"reserved_bytes\":{},\"allocations\":{},"
                       "\"host_to_device_copies\":{},\"device_to_host_copies\":{},\"device_to_device_copies\":{},"
                       "\"host_to_device_bytes\":{},\"device_to_host_bytes\":{},\"device_to_device_bytes\":{}}}}}",
                       p.bytes_in_use, p.peak_bytes_in_use, p.reserved_bytes, p.allocation_count, p.host_to_device_copies,
                       p.device_to_host_copies, p.device_to_device_copies, p.host_to_device_bytes, p.device_to_host_bytes,
                       p.device_to_device_bytes);
  }
  return out + "]";
}

std::string mib(uint64_t b) { return fmt::format("{:.1f} MiB", double(b) / (1024.0 * 1024.0)); }

void print_memory(const Session& s) {
  for (auto& u : s.memory_usage()) {
    std::string line = fmt::format("memory {}: host-held {} (peak {}, arenas {}, {} allocations{})", u.ep, mib(u.bytes_in_use),
                                   mib(u.peak_bytes), mib(u.arena_bytes), u.allocation_count,
                                   u.limit_bytes ? ", limit " + mib(u.limit_bytes) : std::string());
    if (u.has_plugin_stats)
      line += fmt::format("; EP in use {} (peak {}), reserved {}; copies h2d {} d2h {} d2d {}", mib(u.plugin.bytes_in_use),
                          mib(u.plugin.peak_bytes_in_use), mib(u.plugin.reserved_bytes), u.plugin.host_to_device_copies,
                          u.plugin.device_to_host_copies, u.plugin.device_to_device_copies);
    fmt::print("{}\n", line);
  }
}

std::string stats(const nxrt_host_tensor& t) {
  if (t.dtype != kFloat32) return "";
  int64_t n = 1;
  for (uint32_t i = 0; i < t.rank; ++i) n *= t.dims[i];
  if (n == 0) return "";
  const float* p = static_cast<const float*>(t.data);
  double lo = p[0], hi = p[0], sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min<double>(lo, p[i]);
    hi = std::max<double>(hi, p[i]);
    sum += p[i];
  }
  return fmt::format(" min {:.6g} max {:.6g} mean {:.6g}", lo, hi, sum / double(n));
}

double rss_mb() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

// `nxrt plugins --json`: one object, {"plugins": [...]}, with everything the text listing shows.
std::string plugins_json(const Env& env) {
  auto plugins = env.plugins();
  std::string s = "{\"plugins\":[";
  for (size_t i = 0; i < plugins.size(); ++i) {
    const auto& p = plugins[i];
    std::string feats, devices, options;
    for (int b = 0; b < 64; ++b)
      if (p.features & (1ull << b)) {
        std::string name = nxrt_feature_name(1ull << b);
        feats += fmt::format("{}\"{}\"", feats.empty() ? "" : ",", json_escape(name.empty() ? fmt::format("bit{}", b) : name));
      }
    for (uint32_t d = 0; p.loaded && d < p.device_count; ++d) {
      // The flattened description (what `nxrt compile --target` takes), all values text.
      std::string obj;
      for (auto& [k, v] : env.device_properties(i, d))
        obj += fmt::format("{}\"{}\":\"{}\"", obj.empty() ? "" : ",", json_escape(k), json_escape(v));
      devices += fmt::format("{}{{{}}}", d ? "," : "", obj);
    }
    if (p.loaded)
      for (auto& opt : env.plugin_options(i))
        options += fmt::format("{}{{\"name\":\"{}\",\"type\":\"{}\",\"default\":\"{}\",\"help\":\"{}\"}}", options.empty() ? "" : ",",
                               json_escape(opt.name), json_escape(opt.type), json_escape(opt.default_value), json_escape(opt.help));
    s += fmt::format("{}{{\"name\":\"{}\",\"path\":\"{}\",\"loaded\":{},\"error\":\"{}\",\"version\":\"{}\",\"abi\":\"{}.{}\","
                     "\"features\":[{}],\"device_count\":{},\"no_device_reason\":\"{}\",\"devices\":[{}],\"options\":[{}]}}",
                     i ? "," : "", json_escape(p.name), json_escape(p.path), p.loaded ? "true" : "false", json_escape(p.error),
                     json_escape(p.version), p.abi_major, p.abi_minor, feats, p.loaded ? p.device_count : 0,
                     json_escape(p.no_device_reason ? p.no_device_reason : ""), devices, options);
  }
  return s + "]}";
}

}  // namespace

int cmd_plugins(const Options& o) {
  Env env(true);
  for (auto& p : o.plugin_paths) {
    try {
      env.register_plugin(p);
    } catch (const Error&) {
      // listed below with its error
    }
  }
  auto plugins = env.plugins();
  if (o.json) {
    fmt::print("{}\n", plugins_json(env));
    return 0;
  }
  if (plugins.empty()) {
    fmt::print("no plugins found (searched next to nxrt, ../lib, next to libnxrt and its nxrt/ folder, and NXRT_PLUGIN_PATH)\n");
    return 0;
  }
  for (size_t i = 0; i < plugins.size(); ++i) {
    const auto& p = plugins[i];
    fmt::print("{}\n  path: {}\n", p.name, p.path);
    if (!p.loaded) {
      fmt::print("  status: not loaded: {}\n", p.error);
      continue;
    }
    std::string feats;
    for (int b = 0; b < 64; ++b)
      if (p.features & (1ull << b)) {
        std::string name = nxrt_feature_name(1ull << b);
        feats += " " + (name.empty() ? fmt::format("bit{}", b) : name);
      }
    fmt::print("  version: {}\n  abi: {}.{}\n  features:{}\n  devices: {}\n", p.version, p.abi_major, p.abi_minor,
               feats.empty() ? " none" : feats, p.device_count);
    if (p.device_count == 0) fmt::print("  no device: {}\n", p.no_device_reason);
    if (o.verbose) {
      auto options = env.plugin_options(i);
      if (options.empty()) fmt::print("  options: none\n");
      else fmt::print("  options:\n");
      for (auto& opt : options)
        fmt::print("    {} ({}, default: \"{}\"): {}\n", opt.name, opt.type, opt.default_value, opt.help);
    }
    for (uint32_t d = 0; d < p.device_count; ++d) {
      fmt::print("  device {}:\n", d);
      std::string desc = env.device_description(i, d);
      size_t start = 0;
      while (start < desc.size()) {
        size_t end = desc.find('\n', start);
        if (end == std::string::npos) end = desc.size();
        fmt::print("    {}\n", desc.substr(start, end - start));
        start = end + 1;
      }
    }
  }
  return 0;
}

// A model with sequence or optional inputs or outputs: those inputs are read from their
// files as SequenceProto / OptionalProto, and every output is a value (written as such).
Outputs run_with_values(const Options& o, Session& session, const std::vector<Tensor>& tensors) {
  auto infos = session.inputs();
  std::vector<Outputs> files;  // keep the read values alive during the run
  std::vector<nxrt_host_tensor> views(tensors.size());
  std::vector<nxrt_host_value> in;
  for (size_t k = 0; k < infos.size(); ++k) {
    const nxrt_value_kind kind = session.input_kind(k);
    if (kind == NXRT_VALUE_TENSOR) {
      views[k] = tensors[k].view();
      in.push_back(nxrt_host_value{infos[k].name, NXRT_VALUE_TENSOR, 0, 0, 0, 1, &views[k]});
      continue;
    }
    const fs::path file = input_file(o, infos[k], k);
    if (file.empty())
      throw Error(NXRT_ERR_INVALID_ARGUMENT, fmt::format("input '{}' is a {}: give it as a .pb file (--input or --input-dir)", infos[k].name,
                                                         kind == NXRT_VALUE_SEQUENCE ? "sequence" : "optional"));
    files.push_back(read_value_file(file.string(), kind));
    nxrt_host_value v = files.back().value(0);
    v.name = infos[k].name;
    in.push_back(v);
  }
  return session.run_values(in);
}

int cmd_run(const Options& o) {
  Env env = make_env(o);
  auto t0 = Clock::now();
  Model model(o.model, o.cache);
  Session session(env, std::move(model), session_options(o));
  double load_ms = ms_since(t0);
  if (o.verbose) fmt::print(stderr, "{}", session.optimization_log());
  if (o.verbose && (!o.cache.empty() || is_compiled_model(o.model))) fmt::print(stderr, "{}", session.cache_text());
  auto inputs = prepare_inputs(o, session);
  if (!o.profile.empty()) session.start_profiling();
  auto t1 = Clock::now();
  bool values_io = false;
  for (size_t k = 0; k < session.inputs().size(); ++k) values_io |= session.input_kind(k) != NXRT_VALUE_TENSOR;
  for (size_t k = 0; k < session.outputs().size(); ++k) values_io |= session.output_kind(k) != NXRT_VALUE_TENSOR;
  if (values_io && !o.run_options.empty())
    throw Error(NXRT_ERR_INVALID_ARGUMENT, "--run-option is not supported for models with sequence or optional inputs or outputs");
  Outputs outs = values_io ? run_with_values(o, session, inputs) : session.run(views(inputs), o.run_options);
  double run_ms = ms_since(t1);
  if (!o.profile.empty()) fmt::print("profile: {} events in {}\n", session.end_profiling(o.profile), o.profile);

  std::map<std::string, int> per_ep;
  int fell_back = 0;
  for (auto& n : session.nodes()) {
    per_ep[n.ep]++;
    fell_back += n.fell_back;
  }
  std::string placement;
  for (auto& [ep, count] : per_ep) placement += fmt::format("{}{}: {} nodes", placement.empty() ? "" : ", ", ep, count);
  fmt::print("model: {}\nplacement: {}{}; {} cross-device copies\nload: {:.1f} ms, run: {:.2f} ms\n", o.model, placement,
             fell_back ? fmt::format(" ({} by fallback)", fell_back) : "", session.copies(), load_ms, run_ms);
  if (!o.output_dir.empty()) {
    std::error_code ec;
    fs::create_directories(o.output_dir, ec);
    if (ec) throw Error(NXRT_ERR_INVALID_ARGUMENT, fmt::format("cannot create output folder '{}': {}", o.output_dir, ec.message()));
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    const fs::path file = fs::path(o.output_dir) / fmt::format("output_{}.pb", k);
    if (values_io && session.output_kind(k) != NXRT_VALUE_TENSOR) {
      const nxrt_host_value v = outs.value(k);
      const bool seq = v.kind == NXRT_VALUE_SEQUENCE || (v.has_value && v.inner_kind == NXRT_VALUE_SEQUENCE);
      std::string what = v.kind == NXRT_VALUE_OPTIONAL ? (v.has_value ? "optional holding " : "optional, empty") : "";
      if (v.kind == NXRT_VALUE_SEQUENCE || v.has_value)
        what += seq ? fmt::format("sequence of {} {} tensors", v.count, dtype_name(v.elem_dtype))
                    : fmt::format("{} {}", dtype_name(v.tensors[0].dtype), shape_str(v.tensors[0].dims, v.tensors[0].rank));
      fmt::print("output {} '{}': {}\n", k, v.name, what);
      if (!o.output_dir.empty()) write_value_file(file.string(), v);
      continue;
    }
    auto t = outs[k];
    fmt::print("output {} '{}': {} {}{}\n", k, t.name, dtype_name(t.dtype), shape_str(t.dims, t.rank), stats(t));
    if (!o.output_dir.empty()) write_tensor_file(file.string(), t);
  }
  return 0;
}

int cmd_inspect(const Options& o) {
  Env env = make_env(o);
  // A strict request that leaves nodes without an EP still gets the whole table: placed again
  // with fallback (so every refusal is listed and '*' marks the nodes no requested EP takes),
  // then the strict error, and exit 1.
  std::optional<Session> placed;
  std::string strict_error;
  try {
    placed.emplace(env, Model(o.model, o.cache), session_options(o));
  } catch (const Error& e) {
    if (o.fallback || e.code() != NXRT_ERR_UNSUPPORTED) throw;
    strict_error = e.what();
    auto relaxed = session_options(o);
    relaxed.fallback = true;
    try {
      placed.emplace(env, Model(o.model, o.cache), relaxed);
    } catch (const Error&) {
      throw e;  // not even fallback can place it: the strict error is the one to report
    }
  }
  Session& session = *placed;
  const bool marks = o.fallback || !strict_error.empty();
  auto nodes = session.nodes();
  if (o.json) {
    std::string s = fmt::format("{{\"model\":\"{}\",\"eps\":\"{}\",\"strict_run_fails\":{},\"strict_error\":\"{}\","
                                "\"copies\":{},\"memory\":{},\"load\":{},\"nodes\":[", json_escape(o.model), json_escape(o.eps),
                                strict_error.empty() ? "false" : "true", json_escape(strict_error), session.copies(),
                                memory_json(session), session.load_report());
    for (size_t i = 0; i < nodes.size(); ++i)
      s += fmt::format("{}{{\"name\":\"{}\",\"op\":\"{}\",\"ep\":\"{}\",\"fell_back\":{},\"reason\":\"{}\",\"kernel\":\"{}\","
                       "\"bodies\":\"{}\"}}",
                       i ? "," : "", json_escape(nodes[i].node_name), json_escape(nodes[i].op_type), json_escape(nodes[i].ep),
                       nodes[i].fell_back ? "true" : "false", json_escape(nodes[i].reason), json_escape(session.node_kernel(i)),
                       json_escape(session.node_bodies(i)));
    s += "],\"optimization\":[";
    std::stringstream log(session.optimization_log());
    std::string line;
    for (bool first = true; std::getline(log, line); first = false) s += fmt::format("{}\"{}\"", first ? "" : ",", json_escape(line));
    fmt::print("{}]}}\n", s);
    return strict_error.empty() ? 0 : 1;
  }
  // Columns: the kernel's description (ABI 2.5) is shown when any plugin gave one, before the
  // refusals (which run long); every row keeps the same columns so scripts can split them.
  size_t w = 4, kw = 0;
  std::vector<std::string> kernels;
  for (size_t i = 0; i < nodes.size(); ++i) {
    w = std::max(w, std::string(nodes[i].node_name).size());
    kernels.push_back(session.node_kernel(i));
    kw = std::max(kw, kernels.back().size());
  }
  if (kw) kw = std::max<size_t>(kw, 6);
  auto row = [&](std::string_view name, std::string_view op, std::string_view ep, std::string_view kernel, std::string_view why) {
    std::string line = fmt::format("{:<{}}  {:<20}  {:<8}  ", name, w, op, ep);  // padded, as before 2.5
    if (kw) line += fmt::format("{:<{}}  ", kernel, kw);
    fmt::print("{}{}\n", line, why);
  };
  row("node", "op", "ep", "kernel", "why earlier EPs refused it");
  std::map<std::string, int> per_ep;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    per_ep[n.ep]++;
    row(n.node_name, n.op_type, std::string(n.ep) + (n.fell_back ? "*" : ""), kernels[i], n.reason);
  }
  for (size_t i = 0; i < nodes.size(); ++i)  // where control-flow bodies run
    if (auto bodies = session.node_bodies(i); !bodies.empty()) fmt::print("bodies of '{}':\n{}", nodes[i].node_name, bodies);
  std::string summary;
  for (auto& [ep, c] : per_ep) summary += fmt::format("{}{}: {}", summary.empty() ? "" : ", ", ep, c);
  fmt::print("{} nodes ({}); {} cross-device copies{}\n", nodes.size(), summary, session.copies(),
             !marks ? "" : o.fallback ? "; * = placed by --fallback" : "; * = no requested EP takes it (placed as --fallback would)");
  print_memory(session);
  fmt::print("{}", session.optimization_log());
  if (is_compiled_model(o.model)) fmt::print("{}", describe_compiled_model(o.model));
  if (!o.cache.empty() || is_compiled_model(o.model)) fmt::print("{}", session.cache_text());
  if (!strict_error.empty()) {
    fmt::print("a run without --fallback would fail: {}\n", strict_error);
    return 1;
  }
  return 0;
}

int cmd_optimize(const Options& o) {
  Env env = make_env(o);
  Model model(o.model);
  model.optimize(env, opt_level(o));
  model.save(o.output);
  fmt::print("{}wrote {}\n", model.optimization_log(), o.output);
  return 0;
}

int cmd_compile(const Options& o) {
  Env env = make_env(o);
  auto t0 = Clock::now();
  Model model(o.model);
  KeyValues target = o.target.empty() ? KeyValues{} : read_target(o.target);
  compile(env, model, session_options(o), target, o.output);
  fmt::print("compiled '{}' for {}{} in {:.1f} ms: wrote '{}'\n{}", o.model, o.eps,
             o.target.empty() ? "" : " (target: " + o.target + ")", ms_since(t0), o.output, describe_compiled_model(o.output));
  return 0;
}

int cmd_bench(const Options& o) {
  double base_rss = rss_mb();
  Env env = make_env(o);
  auto t0 = Clock::now();
  Model model(o.model, o.cache);
  Session session(env, std::move(model), session_options(o));
  double load_ms = ms_since(t0);
  auto infos = session.inputs();
  for (size_t k = 0; k < infos.size(); ++k)
    if (session.input_kind(k) != NXRT_VALUE_TENSOR)
      throw Error(NXRT_ERR_UNSUPPORTED, fmt::format("bench feeds tensors only; input '{}' is a {} (nxrt run takes it as a .pb file)",
                                                    infos[k].name, session.input_kind(k) == NXRT_VALUE_SEQUENCE ? "sequence" : "optional"));
  std::vector<Tensor> inputs = prepare_inputs(o, session);
  auto v = views(inputs);
  // --io-binding: inputs uploaded once into the first EP's memory, outputs written into
  // device tensors there (shapes from a first host run), so a timed run moves no data
  // through the host.
  std::optional<Binding> binding;
  std::vector<DeviceTensor> device_tensors;
  std::string bound_ep;
  if (o.io_binding) {
    bound_ep = session.memory_usage().at(0).ep;
    auto first = session.run(v, o.run_options);
    binding.emplace(session);
    for (auto& t : inputs) {
      device_tensors.emplace_back(session, bound_ep, t.dtype, t.dims);
      device_tensors.back().upload(t.data.data(), t.data.size());
      binding->bind_input(t.name, device_tensors.back());
    }
    for (size_t k = 0; k < first.size(); ++k) {
      const nxrt_host_tensor out = first[k];
      device_tensors.emplace_back(session, bound_ep, out.dtype, std::vector<int64_t>(out.dims, out.dims + out.rank));
      binding->bind_output(out.name, device_tensors.back());
    }
  }
  auto run_once = [&] {
    if (binding) session.run(*binding, nullptr, o.run_options);
    else session.run(v, o.run_options);
  };
  for (int i = 0; i < o.warmup; ++i) run_once();
  if (!o.profile.empty()) session.start_profiling();
  std::vector<double> times;
  for (int i = 0; i < o.iters; ++i) {
    auto t = Clock::now();
    run_once();
    times.push_back(ms_since(t));
  }
  size_t profile_events = o.profile.empty() ? 0 : session.end_profiling(o.profile);
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  double p90 = sorted[std::min(n - 1, size_t(std::ceil(0.9 * double(n))) - 1)];
  double mean = 0;
  for (double t : times) mean += t / double(n);
  auto r = [](double x) { return std::round(x * 1000) / 1000; };
  std::string name = fs::path(o.model).stem().string();
  // What was fed: each input's name, dims, type and where it came from (a file or generated).
  std::string inputs_json = "[", inputs_text;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const auto& t = inputs[k];
    const fs::path file = input_file(o, infos[k], k);
    std::string dims;
    for (auto d : t.dims) dims += fmt::format("{}{}", dims.empty() ? "" : ",", d);
    inputs_json += fmt::format("{}{{\"name\":\"{}\",\"shape\":[{}],\"dtype\":\"{}\",\"source\":\"{}\"}}", k ? "," : "",
                               json_escape(t.name), dims, dtype_name(t.dtype), json_escape(file.empty() ? "generated" : file.string()));
    inputs_text += fmt::format("{}{} {} {} ({})", k ? ", " : "", t.name, dtype_name(t.dtype), shape_str(t.dims),
                               file.empty() ? "generated" : file.string());
  }
  inputs_json += "]";
  if (o.json) {
    fmt::print("{{\"engine\":\"nxrt\",\"model\":\"{}\",\"ep\":\"{}\",\"threads\":{},\"iters\":{},\"warmup\":{},\"median_ms\":{},"
               "\"p90_ms\":{},\"min_ms\":{},\"mean_ms\":{},\"load_ms\":{},\"base_rss_mb\":{},\"peak_rss_mb\":{},"
               "\"io_binding\":{},\"inputs\":{},\"memory\":{},\"load\":{}}}\n",
               json_escape(name), json_escape(o.eps), o.threads, o.iters, o.warmup, r(median), r(p90), r(sorted[0]), r(mean),
               r(load_ms), r(base_rss), r(peak_rss_mb()), o.io_binding ? "\"" + json_escape(bound_ep) + "\"" : "false",
               inputs_json, memory_json(session), session.load_report());
  } else {
    // --threads 0 or absent: each EP's own default (the cpu EP: one per hardware thread).
    const std::string threads = o.threads > 0 ? fmt::format("{} thread{}", o.threads, o.threads == 1 ? "" : "s") : "default threads";
    fmt::print("{} on {} ({}{}): median {:.3f} ms, p90 {:.3f} ms, min {:.3f} ms over {} runs; load {:.1f} ms; peak RSS {:.1f} MiB\n",
               name, o.eps, threads, o.io_binding ? ", I/O bound to " + bound_ep : "", median, p90, sorted[0], n, load_ms,
               peak_rss_mb());
    fmt::print("inputs: {}\n", inputs.empty() ? "none" : inputs_text);
    print_memory(session);
    if (!o.cache.empty() || is_compiled_model(o.model)) fmt::print("{}", session.cache_text());
  }
  // stderr under --json, so stdout stays one JSON object.
  if (!o.profile.empty()) fmt::print(o.json ? stderr : stdout, "profile: {} events in {}\n", profile_events, o.profile);
  return 0;
}

}  // namespace nxrt::cli
