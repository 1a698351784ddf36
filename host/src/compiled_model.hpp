// The compiled-model stage (docs/abi.md, "Compiled-model cache"): which container a
// session may import kernels from, the verdicts on it (the host's own checks, then each
// plugin's), importing a claim's kernel instead of compiling it, and writing a session's
// model and kernels back as a container (`nxrt compile`, or a cache folder's entry).
#pragma once
#include "artifact.hpp"
#include "ir.hpp"
#include "plugin_library.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nxrt {

class Session;
struct EpInstance;

// What besides the model changes compiled kernels: the EP list, fallback, optimization
// level, device index and the EP options. As text (stored, so a mismatch can say what
// differs) and its digest (cache-folder file names).
std::string config_text(const std::string& eps, bool fallback, int opt_level, uint32_t device, const KeyValues& options);

// What the optimizer's result depends on besides the graph: the level, the plugin that
// folds constants and the host's version. A container stores the graph as optimized with
// this key (info "optimized"), so a session with the same key starts without optimizing.
std::string optimizer_key(int level, const PluginLibrary* folder);

// A cache folder's entry for a model digest and a config text.
std::string cache_entry_path(const std::string& dir, uint64_t model_digest, const std::string& config);

// Loads a model file: an ONNX model, or a compiled container (its graph and weights; the
// container stays on the IR for sessions to import kernels from). With `cache_dir`, a valid
// entry there for this model's bytes gives the graph without parsing the ONNX file.
std::shared_ptr<nxrt_model_ir> load_model_any(const std::string& path, const std::string& cache_dir = {});

// A model a cache folder gave, optimized with other settings than `optimizer_key` (the
// folder holds one entry per settings): the graph of the entry for `config` when it holds
// one optimized with that key, else the ONNX model parsed again. NULL when `model` can be
// used as it is (not from a cache folder, or optimized with this key, or not at all).
std::shared_ptr<nxrt_model_ir> model_for_settings(const nxrt_model_ir& model, const std::string& cache_dir,
                                                  const std::string& config, const std::string& optimizer_key);

// One EP's account of a session's cache use.
struct EpCacheReport {
  std::string ep, plugin_version, fingerprint;
  Verdict verdict;            // the plugin section's (host checks, then cache_check)
  size_t imported = 0;        // kernels rebuilt by kernel_import
  size_t compiled = 0;        // kernels made by kernel_create
  size_t rejected = 0;        // blobs kernel_import or the host refused (then compiled)
  size_t usable = 0;          // imported with the verdict "usable but slower"
  std::vector<std::string> notes;  // the first few rejections and usable-but-slower reasons
};

struct CacheReport {
  std::string mode = "off";  // off | hit | miss | compiled-model
  std::string source;        // the container read, if any
  Verdict verdict;           // the container's (header, digests)
  std::vector<EpCacheReport> eps;
  std::string written;       // the container written, if any
  std::string write_error;   // why writing it failed (the session still works)
  double load_ms = 0;        // model load, when the session's model came from the CLI/API load
  std::string json() const;
  std::string text() const;
};

// The kernels one session may import, judged once per EP.
class KernelCache {
 public:
  // `artifact` may be NULL (nothing to import: `why` says so in the report).
  KernelCache(std::shared_ptr<const Artifact> artifact, Verdict verdict, uint64_t model_digest, const std::string& config,
              std::string mode);
  // bind_kernels, per claim: the kernel imported from the container, or NULL (then the
  // caller compiles it and calls compiled()). Verdicts go to the report.
  nxrt_kernel* import(EpInstance& ep, const nxrt_graph& view, const std::string& claim, const std::string& label);
  void compiled(const EpInstance& ep);
  // The container is worth writing again: none was usable, or a blob was refused.
  bool stale() const;
  const std::shared_ptr<const Artifact>& artifact() const { return artifact_; }
  CacheReport& report() { return report_; }
  const CacheReport& report() const { return report_; }

 private:
  EpCacheReport& ep_report(const EpInstance& ep);
  Verdict judge_ep(EpInstance& ep);
  std::shared_ptr<const Artifact> artifact_;
  bool usable_ = false;
  std::map<std::string, const ArtifactEntry*> kernels_;  // "<ep>\n<claim>" -> entry
  std::map<std::string, const ArtifactEntry*> plugins_;  // ep -> plugin entry
  std::map<std::string, Verdict> ep_verdicts_;
  CacheReport report_;
  std::mutex mu_;
};

// A claim's stable name: each node's name and first output, in node order. Node indices
// shift between a model and its compiled graph (folded constants leave no node behind);
// names and SSA value names do not.
std::string claim_key(const nxrt_model_ir& m, const std::vector<size_t>& group);

// The graph and weights a container stores, and the optimizer key the graph went through
// ("" = not optimized).
struct GraphSection {
  std::vector<uint8_t> graph, weights;
  std::string optimized;
};
// `from`'s section when it has one, else `model` serialized.
GraphSection graph_section(const nxrt_model_ir& model, const Artifact* from);

// Writes `session`'s container to `path`: info (host version, model digest, config),
// `section`, one entry per EP with its plugin's name, version and fingerprint, and one per
// kernel its plugin exports. Throws HostError.
void write_compiled_model(const Session& session, const GraphSection& section, uint64_t model_digest,
                          const std::string& config, const std::string& source, const std::string& path);

// `nxrt inspect --cache`: the container's header, entries and (with `session`) the verdicts.
std::string describe_artifact(const std::string& path);

}  // namespace nxrt
