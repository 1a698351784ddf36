#include "compiled_model.hpp"

#include "digest.hpp"
#include "error.hpp"
#include "model_loader.hpp"
#include "model_writer.hpp"
#include "session.hpp"
#include "status.hpp"
#include "version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>

namespace nxrt {
namespace {

namespace fs = std::filesystem;

std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\u{:04x}", int(c));
    else out += char(c);
  }
  return out + "\"";
}

// The graph and weights of a container whose checksums match; false with the reason.
bool graph_of(const Artifact& a, std::span<const uint8_t>* graph, std::span<const uint8_t>* weights, std::string* why) {
  const ArtifactEntry* g = a.find(EntryKind::Graph);
  const ArtifactEntry* w = a.find(EntryKind::Weights);
  if (!g || !w) {
    *why = "it holds no graph";
    return false;
  }
  return a.data(*g, graph, why) && a.data(*w, weights, why);
}

// The model a container holds, its weights views of the mapping, `path` naming it, keyed
// by `digest`; NULL with the reason when its graph or weights fail their checksums.
std::shared_ptr<nxrt_model_ir> model_of(std::shared_ptr<const Artifact> a, const std::string& path, uint64_t digest,
                                        std::string* why) {
  std::span<const uint8_t> graph, weights;
  if (!graph_of(*a, &graph, &weights, why)) return nullptr;
  std::shared_ptr<nxrt_model_ir> ir = load_model_artifact(graph, weights, path, a);
  ir->digest = digest;
  ir->optimized = a->info("optimized");
  ir->compiled = std::move(a);
  return ir;
}

std::shared_ptr<nxrt_model_ir> from_artifact(std::shared_ptr<const Artifact> a, const std::string& path) {
  uint64_t digest = 0;
  parse_hex64(a->info("model_digest"), &digest);
  std::string why;
  auto ir = model_of(std::move(a), path, digest, &why);
  if (!ir) raise(NXRT_ERR_MODEL, "compiled model '{}' cannot be used ({}); compile it again with 'nxrt compile'", path, why);
  return ir;
}

}  // namespace

std::string config_text(const std::string& eps, bool fallback, int opt_level, uint32_t device, const KeyValues& options) {
  KeyValues sorted;
  for (auto& kv : options)
    if (kv.first != "threads" && kv.first != "cache_dir") sorted.push_back(kv);
  std::sort(sorted.begin(), sorted.end());
  std::string o;
  for (auto& [k, v] : sorted) o += fmt::format("{}{}={}", o.empty() ? "" : ",", k, v);
  return fmt::format("eps={};fallback={};opt={};device={};options={}", eps, fallback ? 1 : 0, opt_level, device, o);
}

std::string optimizer_key(int level, const PluginLibrary* folder) {
  return fmt::format("level={};folder={};host={}", level, folder ? folder->name() + " " + folder->version() : "none",
                     kHostVersion);
}

std::shared_ptr<nxrt_model_ir> model_for_settings(const nxrt_model_ir& model, const std::string& cache_dir,
                                                  const std::string& config, const std::string& key) {
  const bool from_folder = model.compiled && model.compiled->path() != model.path;
  if (!from_folder || model.optimized.empty() || model.optimized == key || cache_dir.empty()) return nullptr;
  const std::string entry = cache_entry_path(cache_dir, model.digest, config);
  std::error_code ec;
  if (fs::exists(entry, ec)) {
    try {
      Verdict v;
      auto a = Artifact::open(entry, &v);
      std::string why;
      if (a && a->info("optimized") == key && a->info("model_digest") == hex64(model.digest))
        if (auto ir = model_of(std::move(a), model.path, model.digest, &why)) return ir;
    } catch (const HostError&) {
      // unreadable: the ONNX model below, and the session writes the entry again
    }
  }
  auto ir = std::shared_ptr<nxrt_model_ir>(load_model_file(model.path));
  if (ir->digest != model.digest)
    raise(NXRT_ERR_MODEL, "model file '{}' changed while it was being loaded (digest {}, then {})", model.path,
          hex64(model.digest), hex64(ir->digest));
  return ir;
}

std::string cache_entry_path(const std::string& dir, uint64_t model_digest, const std::string& config) {
  return (fs::path(dir) / fmt::format("{}-{}.nxrt", hex64(model_digest), hex64(xxh64(config.data(), config.size()))))
      .string();
}

std::shared_ptr<nxrt_model_ir> load_model_any(const std::string& path, const std::string& cache_dir) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return load_model_file(path);  // its errors name the problem
  auto file = MappedFile::open(path);
  if (looks_like_artifact(file->data(), file->size())) {
    Verdict v;
    auto a = Artifact::from(file, &v);
    if (!a)
      raise(NXRT_ERR_MODEL, "compiled model '{}' cannot be used ({}: {}); compile it again with 'nxrt compile'", path,
            verdict_name(v.verdict), v.reason);
    return from_artifact(std::move(a), path);
  }
  uint64_t digest = 0;
  if (!cache_dir.empty()) {
    // An entry made from these bytes (any session settings) holds the checked,
    // shape-inferred graph: no ONNX parse, no checker, no shape inference.
    digest = xxh64(file->data(), file->size());
    const std::string prefix = hex64(digest) + "-";
    std::vector<fs::path> entries;
    for (auto it = fs::directory_iterator(cache_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind(prefix, 0) == 0 && it->path().extension() == ".nxrt") entries.push_back(it->path());
    }
    std::sort(entries.begin(), entries.end());
    for (auto& e : entries) {
      try {
        Verdict v;
        auto a = Artifact::open(e.string(), &v);
        if (!a || a->info("model_digest") != hex64(digest)) continue;
        std::string why;
        if (auto ir = model_of(std::move(a), path, digest, &why)) return ir;
      } catch (const HostError&) {
        continue;  // an entry nxrt cannot read is a miss, never an error
      }
    }
  }
  return load_model_file(std::move(file), digest);  // hashed once
}

// ------------------------------------------------------------------ KernelCache

KernelCache::KernelCache(std::shared_ptr<const Artifact> artifact, Verdict verdict, uint64_t model_digest,
                         const std::string& config, std::string mode)
    : artifact_(std::move(artifact)) {
  report_.mode = std::move(mode);
  report_.verdict = std::move(verdict);
  if (!artifact_) return;
  report_.source = artifact_->path();
  const Meta& info = artifact_->info();
  auto get = [&](const char* k) { return info.count(k) ? info.at(k) : std::string(); };
  if (get("model_digest") != hex64(model_digest))
    report_.verdict = {NXRT_CACHE_RECOMPILE, fmt::format("made from another model (digest {}; this model's is {})",
                                                         get("model_digest").empty() ? "none" : get("model_digest"),
                                                         hex64(model_digest))};
  else if (get("config") != config)
    report_.verdict = {NXRT_CACHE_RECOMPILE,
                       fmt::format("compiled with other session settings ('{}'; this session: '{}')", get("config"), config)};
  else {
    // The graph and weights too: an entry whose model part is corrupt must be written
    // again, or every later start would parse the ONNX model (checked once per container).
    std::span<const uint8_t> graph, weights;
    std::string why;
    if (!graph_of(*artifact_, &graph, &weights, &why)) report_.verdict = {NXRT_CACHE_RECOMPILE, "corrupt or truncated: " + why};
  }
  usable_ = report_.verdict.usable();
  if (!usable_) return;
  for (auto& e : artifact_->entries()) {
    if (e.kind == EntryKind::Plugin) plugins_[e.get("name")] = &e;
    if (e.kind == EntryKind::Kernel) kernels_[e.get("ep") + "\n" + e.get("claim")] = &e;
  }
}

EpCacheReport& KernelCache::ep_report(const EpInstance& ep) {
  for (auto& r : report_.eps)
    if (r.ep == ep.lib->name()) return r;
  EpCacheReport r;
  r.ep = ep.lib->name();
  r.plugin_version = ep.lib->version();
  report_.eps.push_back(std::move(r));
  return report_.eps.back();
}

Verdict KernelCache::judge_ep(EpInstance& ep) {
  const std::string& name = ep.lib->name();
  auto done = ep_verdicts_.find(name);
  if (done != ep_verdicts_.end()) return done->second;
  Verdict v;
  auto it = plugins_.find(name);
  if (it == plugins_.end()) {
    v = {NXRT_CACHE_RECOMPILE, fmt::format("it holds nothing compiled by EP '{}'", name)};
  } else if (!ep.lib->has(NXRT_FEATURE_KERNEL_CACHE)) {
    v = {NXRT_CACHE_RECOMPILE, fmt::format("plugin '{}' {} has no kernel cache (an ABI 2.4 feature)", name, ep.lib->version())};
  } else if (it->second->get("version") != ep.lib->version()) {
    v = {NXRT_CACHE_RECOMPILE, fmt::format("compiled by plugin '{}' {}, the loaded one is {}", name,
                                           it->second->get("version"), ep.lib->version())};
  } else if (it->second->get("kernel_cache") != "1") {
    v = {NXRT_CACHE_RECOMPILE, fmt::format("plugin '{}' kept no kernels when it was compiled", name)};
  } else {
    nxrt_cache_judgement j{};
    j.struct_size = sizeof j;
    const std::string fp = it->second->get("fingerprint");
    nxrt_status* st = guarded(name, "cache_check", [&] { return ep.lib->api().cache_check(ep.session, fp.c_str(), &j); });
    if (st) {
      v = {NXRT_CACHE_RECOMPILE, fmt::format("plugin '{}' cache_check failed: {}", name, st->message)};
      release_status(st);
    } else if (j.struct_size < offsetof(nxrt_cache_judgement, reason) + 1 || j.verdict > NXRT_CACHE_UNSUPPORTED) {
      v = {NXRT_CACHE_RECOMPILE, fmt::format("plugin '{}' gave no valid verdict", name)};
    } else {
      j.reason[sizeof j.reason - 1] = '\0';
      v = {j.verdict, one_line(j.reason)};
    }
  }
  EpCacheReport& r = ep_report(ep);
  r.verdict = v;
  if (it != plugins_.end()) r.fingerprint = it->second->get("fingerprint");
  ep_verdicts_[name] = v;
  return v;
}

nxrt_kernel* KernelCache::import(EpInstance& ep, const nxrt_graph& view, const std::string& claim, const std::string& label) {
  std::lock_guard lock(mu_);
  if (!usable_ || !ep.lib->has(NXRT_FEATURE_KERNEL_CACHE)) return nullptr;
  if (!judge_ep(ep).usable()) return nullptr;
  EpCacheReport& r = ep_report(ep);
  auto note = [&](std::string n) {
    if (r.notes.size() < 8) r.notes.push_back(one_line(std::move(n)));
  };
  auto it = kernels_.find(ep.lib->name() + "\n" + claim);
  if (it == kernels_.end()) return nullptr;  // nothing kept for it: compiled (and counted) by the caller
  std::span<const uint8_t> blob;
  std::string why;
  if (!artifact_->data(*it->second, &blob, &why)) {
    ++r.rejected;
    note(fmt::format("{}: {}", label, why));
    return nullptr;
  }
  nxrt_cache_judgement j{};
  j.struct_size = sizeof j;
  nxrt_kernel* k = nullptr;
  nxrt_status* st = guarded(ep.lib->name(), "kernel_import", [&] {
    return ep.lib->api().kernel_import(ep.session, &view, blob.data(), blob.size(), &j, &k);
  });
  j.reason[sizeof j.reason - 1] = '\0';
  if (st) {
    ++r.rejected;
    note(fmt::format("{}: kernel_import failed: {}", label, st->message));
    release_status(st);
    if (k) ep.lib->api().kernel_release(k);
    return nullptr;
  }
  const bool accepted = j.verdict == NXRT_CACHE_OPTIMAL || j.verdict == NXRT_CACHE_USABLE;
  if (!k || !accepted) {
    if (k) ep.lib->api().kernel_release(k);  // a kernel with a refusing verdict is not trusted
    ++r.rejected;
    note(fmt::format("{}: {}: {}", label, verdict_name(j.verdict), j.reason[0] ? j.reason : "no reason given"));
    return nullptr;
  }
  ++r.imported;
  if (j.verdict == NXRT_CACHE_USABLE) {
    ++r.usable;
    note(fmt::format("{}: usable but slower: {}", label, j.reason));
  }
  return k;
}

void KernelCache::compiled(const EpInstance& ep) {
  std::lock_guard lock(mu_);
  ++ep_report(ep).compiled;
}

bool KernelCache::stale() const {
  if (!usable_) return true;
  for (auto& r : report_.eps)
    if (!r.verdict.usable() || r.rejected || r.usable) return true;
  return false;
}

std::string claim_key(const nxrt_model_ir& m, const std::vector<size_t>& group) {
  std::string k;
  for (size_t n : group) {
    const nxrt_node& node = *m.nodes[n];
    std::string out;
    for (const nxrt_value* v : node.outputs)
      if (v) {
        out = v->name;
        break;
      }
    k += fmt::format("{}{}/{}", k.empty() ? "" : ";", node.name, out);
  }
  return k;
}

// ------------------------------------------------------------------ reports

std::string CacheReport::json() const {
  std::string s = fmt::format("{{\"mode\":{},\"source\":{},\"verdict\":{},\"reason\":{},\"written\":{}", json_str(mode),
                              json_str(source), json_str(verdict_name(verdict.verdict)), json_str(verdict.reason),
                              json_str(written));
  if (!write_error.empty()) s += fmt::format(",\"write_error\":{}", json_str(write_error));
  s += ",\"eps\":[";
  for (size_t i = 0; i < eps.size(); ++i) {
    const auto& e = eps[i];
    s += fmt::format("{}{{\"ep\":{},\"verdict\":{},\"reason\":{},\"imported\":{},\"compiled\":{},\"rejected\":{},\"usable\":{},\"notes\":[",
                     i ? "," : "", json_str(e.ep), json_str(verdict_name(e.verdict.verdict)), json_str(e.verdict.reason),
                     e.imported, e.compiled, e.rejected, e.usable);
    for (size_t k = 0; k < e.notes.size(); ++k) s += (k ? "," : "") + json_str(e.notes[k]);
    s += "]}";
  }
  return s + "]}";
}

std::string CacheReport::text() const {
  if (mode == "off") return "cache: off\n";
  std::string s = fmt::format("cache: {}", mode);
  if (!source.empty()) s += fmt::format(", read '{}'", source);
  s += fmt::format(": {}{}\n", verdict_name(verdict.verdict), verdict.reason.empty() ? "" : " (" + verdict.reason + ")");
  for (auto& e : eps) {
    s += fmt::format("  {}: {}{}; {} kernel(s) imported, {} compiled, {} blob(s) refused\n", e.ep,
                     verdict_name(e.verdict.verdict), e.verdict.reason.empty() ? "" : " (" + e.verdict.reason + ")", e.imported,
                     e.compiled, e.rejected);
    for (auto& n : e.notes) s += "    " + n + "\n";
  }
  if (!written.empty()) s += fmt::format("  wrote '{}'\n", written);
  if (!write_error.empty()) s += fmt::format("  not written: {}\n", write_error);
  return s;
}

// ------------------------------------------------------------------ writing

GraphSection graph_section(const nxrt_model_ir& model, const Artifact* from) {
  GraphSection s;
  std::span<const uint8_t> graph, weights;
  std::string why;
  if (from && graph_of(*from, &graph, &weights, &why)) {
    s.graph.assign(graph.begin(), graph.end());
    s.weights.assign(weights.begin(), weights.end());
    s.optimized = from->info("optimized");
    return s;
  }
  s.graph = artifact_graph(model, &s.weights);
  s.optimized = model.optimized;
  return s;
}

namespace {

struct BlobSink {
  std::vector<uint8_t> bytes;
  static nxrt_status* write(void* user, const void* data, uint64_t size) {
    auto* self = static_cast<BlobSink*>(user);
    if (size && !data) return host_services().status_create(NXRT_INVALID_ARGUMENT, 0, "blob write of NULL bytes");
    try {
      const auto* p = static_cast<const uint8_t*>(data);
      self->bytes.insert(self->bytes.end(), p, p + size);
    } catch (const std::bad_alloc&) {
      return host_services().status_create(NXRT_OUT_OF_MEMORY, 0, "out of host memory writing a kernel blob");
    }
    return nullptr;
  }
};

}  // namespace

void write_compiled_model(const Session& session, const GraphSection& section, uint64_t model_digest,
                          const std::string& config, const std::string& source, const std::string& path) {
  ArtifactWriter w;
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  Meta info{{"host", kHostName}, {"host_version", kHostVersion}, {"model_digest", hex64(model_digest)}, {"config", config},
            {"source", source}, {"created", when}};
  if (!section.optimized.empty()) info["optimized"] = section.optimized;
  w.add(EntryKind::Info, std::move(info), {});
  w.add(EntryKind::Graph, {}, section.graph);
  w.add(EntryKind::Weights, {}, section.weights);
  for (auto& ep : session.eps()) {
    const bool cache = ep->lib->has(NXRT_FEATURE_KERNEL_CACHE);
    Meta m{{"name", ep->lib->name()},
           {"version", ep->lib->version()},
           {"abi", fmt::format("{}.{}", ep->lib->abi_major(), ep->lib->abi_minor())},
           {"kernel_cache", cache ? "1" : "0"}};
    if (cache) {
      const char* fp = guarded(ep->lib->name(), "session_fingerprint", [&] { return ep->lib->api().session_fingerprint(ep->session); });
      m["fingerprint"] = one_line(fp ? fp : "");
    }
    w.add(EntryKind::Plugin, std::move(m), {});
  }
  const auto& model = session.model();
  for (const Step& s : session.steps()) {
    if (s.kind != Step::Kernel || !s.kernel) continue;
    const EpInstance& ep = *session.eps()[size_t(s.ep)];
    if (!ep.lib->has(NXRT_FEATURE_KERNEL_CACHE)) continue;
    BlobSink sink;
    nxrt_blob_writer bw{sizeof(nxrt_blob_writer), &sink, &BlobSink::write};
    nxrt_status* st = guarded(ep.lib->name(), "kernel_export", [&] { return ep.lib->api().kernel_export(s.kernel, &bw); });
    if (st) {  // nothing worth keeping (UNSUPPORTED) or a failure: compiled again next time
      release_status(st);
      continue;
    }
    w.add(EntryKind::Kernel, Meta{{"ep", ep.lib->name()}, {"claim", claim_key(model, s.nodes)}, {"ops", s.ops}},
          std::move(sink.bytes));
  }
  w.write(path);
}

std::string describe_artifact(const std::string& path) {
  Verdict v;
  auto a = Artifact::open(path, &v);
  if (!a) return fmt::format("'{}': {}: {}\n", path, verdict_name(v.verdict), v.reason);
  const Meta& info = a->info();
  auto get = [&](const char* k) { return info.count(k) ? info.at(k) : std::string("?"); };
  std::string s = fmt::format("compiled model '{}': {:.1f} MiB, container {}, EP ABI {}.{}, made by {} {} at {}\n", path,
                              double(a->size()) / (1 << 20), kContainerVersion, a->abi_major(), a->abi_minor(), get("host"),
                              get("host_version"), get("created"));
  s += fmt::format("  model digest {} (source '{}')\n  settings: {}\n  graph: {}\n", get("model_digest"), get("source"),
                   get("config"), info.count("optimized") ? "optimized (" + info.at("optimized") + ")" : "as loaded, not optimized");
  std::map<std::string, std::pair<size_t, uint64_t>> kernels;
  for (auto& e : a->entries()) {
    std::span<const uint8_t> d;
    std::string why;
    const bool ok = a->data(e, &d, &why);
    if (e.kind == EntryKind::Graph || e.kind == EntryKind::Weights)
      s += fmt::format("  {}: {} bytes{}\n", entry_kind_name(e.kind), e.size, ok ? "" : " — " + why);
    if (e.kind == EntryKind::Kernel) {
      auto& k = kernels[e.get("ep")];
      ++k.first;
      k.second += e.size;
      if (!ok) s += fmt::format("  kernel {} ({}): {}\n", e.get("claim"), e.get("ep"), why);
    }
  }
  for (auto& e : a->entries())
    if (e.kind == EntryKind::Plugin) {
      auto k = kernels[e.get("name")];
      s += fmt::format("  plugin {} {} (ABI {}): {} kernel blob(s), {} bytes; fingerprint: {}\n", e.get("name"), e.get("version"),
                       e.get("abi"), k.first, k.second, e.get("kernel_cache") == "1" ? e.get("fingerprint") : "(no kernel cache)");
    }
  return s;
}

}  // namespace nxrt
