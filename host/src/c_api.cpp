// The C embedding API (nxrt.h) over the C++ host.
#include <nxrt/nxrt.h>

#include "compiled_model.hpp"
#include "digest.hpp"
#include "env.hpp"
#include "error.hpp"
#include "host_tensor.hpp"
#include "io_binding.hpp"
#include "model_writer.hpp"
#include "ir.hpp"
#include "session.hpp"
#include "string_tensor.hpp"
#include "version.hpp"

#include <nxrt_ep.h>

#include <cstring>
#include <functional>

struct nxrt_error {
  nxrt_error_code code;
  std::string message;
};

struct nxrt_env {
  nxrt::Env env;
  struct Info {
    std::string path, name, version, error, no_device_reason;
    uint32_t abi_major = 0, abi_minor = 0, device_count = 0;
    uint64_t features = 0;
    bool loaded = false;
    std::vector<std::string> devices;
    std::vector<nxrt::KeyValues> descriptions;  // per device: the flattened description
    std::vector<std::pair<size_t, uint32_t>> same_as;  // per device: (plugin, device) or (SIZE_MAX, 0)
    std::vector<nxrt::OptionInfo> options;
  };
  std::vector<Info> info;  // stable strings for the getters

  void refresh() {
    info.clear();
    auto entries = env.entries();
    for (auto& e : entries) {
      Info i;
      i.path = e.path;
      i.name = e.name;
      i.error = e.error;
      if (e.lib) {
        i.loaded = true;
        i.version = e.lib->version();
        i.abi_major = e.lib->abi_major();
        i.abi_minor = e.lib->abi_minor();
        i.features = e.lib->features();
        i.device_count = uint32_t(e.lib->devices().size());
        i.no_device_reason = e.lib->no_device_reason();
        i.options = e.lib->options();
        const auto& devs = e.lib->devices();
        for (uint32_t d = 0; d < devs.size(); ++d) {
          std::string text = devs[d].describe();
          // One physical device offered by several plugins: equal non-zero uuids.
          std::pair<size_t, uint32_t> same{SIZE_MAX, 0};
          if (devs[d].has_uuid())
            for (size_t p = 0; p < info.size() && same.first == SIZE_MAX; ++p) {
              if (!entries[p].lib) continue;
              const auto& other = entries[p].lib->devices();
              for (uint32_t od = 0; od < other.size(); ++od)
                if (std::memcmp(other[od].uuid, devs[d].uuid, 16) == 0) {
                  same = {p, od};
                  break;
                }
            }
          if (same.first != SIZE_MAX) text += fmt::format("same device as {}:{}\n", info[same.first].name, same.second);
          i.devices.push_back(std::move(text));
          i.descriptions.push_back(devs[d].description());
          i.same_as.push_back(same);
        }
      }
      info.push_back(std::move(i));
    }
  }
};

struct nxrt_model {
  std::shared_ptr<const nxrt_model_ir> ir;
  std::string log;  // nxrt_model_optimization_log's text
  std::string cache_dir;  // nxrt_model_load_cached: sessions' default cache folder
};

struct nxrt_session {
  std::unique_ptr<nxrt::Session> impl;
  std::vector<std::string> ep_names;
  std::string log;  // nxrt_session_optimization_log's text
  std::string report, cache_text;  // nxrt_session_load_report, nxrt_session_cache_text
};

struct nxrt_outputs {
  nxrt_outputs() = default;
  explicit nxrt_outputs(std::shared_ptr<nxrt::OutputBuffers> r) : recycle(std::move(r)) {}
  nxrt_outputs(const nxrt_outputs&) = delete;
  nxrt_outputs& operator=(const nxrt_outputs&) = delete;
  ~nxrt_outputs() {
    if (recycle)
      for (auto& t : tensors) recycle->give(std::move(t.data));
  }
  std::shared_ptr<nxrt::OutputBuffers> recycle;  // the session's, where the tensors' buffers go back
  std::vector<nxrt::HostTensor> tensors;
  std::vector<nxrt::ValuePtr> values;  // per output: its sequence or optional (null: a tensor)
  std::vector<std::vector<nxrt_host_tensor>> views;  // per value output: its tensors, for nxrt_outputs_get_value
  uint64_t run_id = 0;
};

struct nxrt_device_tensor {
  std::shared_ptr<nxrt::DeviceTensor> t;
};

struct nxrt_device_stream {
  std::shared_ptr<nxrt::EpInstance> ep;
  nxrt::Session* session = nullptr;
  std::weak_ptr<const char> session_alive;
  nxrt_stream* stream = nullptr;
  ~nxrt_device_stream() {
    if (!stream) return;
    // Runs that returned without waiting for this stream are settled first, so no event
    // of the session refers to it (or to the caller's semaphore behind it) afterwards.
    if (session_alive.lock()) session->settle_stream(stream);
    ep->lib->api().stream_release(stream);
  }
};

struct nxrt_binding {
  nxrt_session* session = nullptr;
  std::vector<nxrt::BoundInput> inputs;   // per graph input; name empty: not bound
  std::vector<nxrt::BoundOutput> outputs; // per graph output
};

namespace {

template <typename F>
nxrt_error* wrap(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (const nxrt::HostError& e) {
    return new nxrt_error{e.code(), e.what()};
  } catch (const std::bad_alloc&) {
    return new nxrt_error{NXRT_ERR_RUNTIME, "out of memory"};
  } catch (const std::exception& e) {
    return new nxrt_error{NXRT_ERR_RUNTIME, e.what()};
  } catch (...) {
    return new nxrt_error{NXRT_ERR_RUNTIME, "unknown error"};
  }
}

nxrt_io_info io_info(const nxrt_value* v) {
  return nxrt_io_info{v->name.c_str(), int32_t(v->dtype), v->rank, v->dims.data()};
}

}  // namespace

namespace {

nxrt_host_tensor view_of(const nxrt::HostTensor& t, const char* name) {
  return nxrt_host_tensor{name, int32_t(t.dtype), uint32_t(t.dims.size()), t.dims.data(), t.data.data()};
}

// Fills o->views (the tensors nxrt_outputs_get_value points at); every nxrt_outputs is made with them.
void make_views(nxrt_outputs& o) {
  o.values.resize(o.tensors.size());
  o.views.assign(o.tensors.size(), {});
  for (size_t i = 0; i < o.values.size(); ++i) {
    const nxrt::ValuePtr& v = o.values[i];
    const char* name = o.tensors[i].name.c_str();
    if (!v) {
      o.views[i].push_back(view_of(o.tensors[i], name));
      continue;
    }
    const nxrt::Value* seq = v->kind == nxrt::Value::Sequence ? v.get()
                             : !v->items.empty() && v->items[0]->kind == nxrt::Value::Sequence ? v->items[0].get() : nullptr;
    if (seq)
      for (auto& item : seq->items) o.views[i].push_back(view_of(item->tensor, name));
    else if (!v->items.empty())
      o.views[i].push_back(view_of(v->items[0]->tensor, name));
  }
}

nxrt::HostTensor tensor_from(const nxrt_host_tensor& t) {
  if (t.rank && !t.dims) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "tensor dims are NULL");
  nxrt::HostTensor h;
  h.name = t.name ? t.name : "";
  h.dtype = nxrt_dtype(t.dtype);
  h.dims.assign(t.dims, t.dims + t.rank);
  for (auto d : h.dims)
    if (d < 0) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "tensor '{}' has a negative dimension", h.name);
  const size_t bytes = size_t(h.numel()) * nxrt::dtype_size(h.dtype);
  if (bytes && !t.data) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "tensor '{}' has no data", h.name);
  if (bytes) h.data.assign(static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + bytes);
  nxrt::own_strings(h);  // STRING: the caller's nxrt_string elements, copied
  return h;
}

// A caller's sequence or optional as a host value (copied).
nxrt::ValuePtr value_from(const nxrt_host_value& v) {
  if (v.count && !v.tensors) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "value '{}' has {} tensors but tensors is NULL", v.name ? v.name : "", v.count);
  auto seq = [&] {
    auto s = std::make_shared<nxrt::Value>();
    s->kind = nxrt::Value::Sequence;
    s->elem = nxrt_dtype(v.elem_dtype);
    for (size_t k = 0; k < v.count; ++k) {
      s->items.push_back(nxrt::Value::of(tensor_from(v.tensors[k])));
      if (s->items.back()->tensor.dtype != s->elem)
        nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "sequence '{}': tensor {} is {}, the sequence holds {}", v.name ? v.name : "", k,
                    nxrt::dtype_name(s->items.back()->tensor.dtype), nxrt::dtype_name(s->elem));
    }
    return s;
  };
  if (v.kind == NXRT_VALUE_SEQUENCE) return seq();
  if (v.kind != NXRT_VALUE_OPTIONAL) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "value '{}' has an unknown kind {}", v.name ? v.name : "", v.kind);
  auto o = std::make_shared<nxrt::Value>();
  o->kind = nxrt::Value::Optional;
  if (v.has_value) {
    if (v.inner_kind == NXRT_VALUE_SEQUENCE) o->items.push_back(seq());
    else if (v.inner_kind == NXRT_VALUE_TENSOR && v.count == 1) o->items.push_back(nxrt::Value::of(tensor_from(v.tensors[0])));
    else nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "optional '{}' must hold one tensor or a sequence", v.name ? v.name : "");
  }
  return o;
}

int32_t kind_of(const nxrt_value* v) {
  return v->kind == nxrt::ValueKind::Sequence ? NXRT_VALUE_SEQUENCE : v->kind == nxrt::ValueKind::Optional ? NXRT_VALUE_OPTIONAL : NXRT_VALUE_TENSOR;
}

}  // namespace

extern "C" {

const char* nxrt_version(void) { return nxrt::kHostVersion; }
uint32_t nxrt_ep_abi_major(void) { return NXRT_EP_ABI_MAJOR; }
uint32_t nxrt_ep_abi_minor(void) { return NXRT_EP_ABI_MINOR; }

nxrt_error_code nxrt_error_code_of(const nxrt_error* e) { return e ? e->code : NXRT_ERR_RUNTIME; }
const char* nxrt_error_message(const nxrt_error* e) { return e ? e->message.c_str() : ""; }
void nxrt_error_release(nxrt_error* e) { delete e; }

nxrt_error* nxrt_env_create(nxrt_env** out) {
  return wrap([&] {
    if (!out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "out is NULL");
    auto env = std::make_unique<nxrt_env>();
    env->env.discover();
    env->refresh();
    *out = env.release();
  });
}

nxrt_error* nxrt_env_create_empty(nxrt_env** out) {
  return wrap([&] {
    if (!out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = new nxrt_env();
  });
}

void nxrt_env_release(nxrt_env* env) { delete env; }

nxrt_error* nxrt_env_register_plugin(nxrt_env* env, const char* path, const char** name_out) {
  return wrap([&] {
    if (!env || !path) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "env or path is NULL");
    try {
      env->env.add(path);
    } catch (...) {
      env->refresh();
      throw;
    }
    env->refresh();
    if (name_out) *name_out = env->info.back().name.c_str();
  });
}

nxrt_error* nxrt_env_unregister_plugin(nxrt_env* env, const char* name) {
  return wrap([&] {
    if (!env || !name) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "env or name is NULL");
    env->env.remove(name);
    env->refresh();
  });
}

const char* nxrt_feature_name(uint64_t bit) {
  switch (bit) {
    case NXRT_FEATURE_FUSED_GROUPS: return "fused-groups";
    case NXRT_FEATURE_STREAMS: return "streams";
    case NXRT_FEATURE_CONCURRENT_RUN: return "concurrent-run";
    case NXRT_FEATURE_RUN_HOOKS: return "run-hooks";
    case NXRT_FEATURE_DEVICE_PROFILING: return "device-profiling";
    case NXRT_FEATURE_NATIVE_HANDLES: return "native-handles";
    case NXRT_FEATURE_STREAM_IMPORT: return "stream-import";
    case NXRT_FEATURE_EXTERNAL_ALLOCATOR: return "external-allocator";
    case NXRT_FEATURE_MEMORY_STATS: return "memory-stats";
    case NXRT_FEATURE_PEER_COPY: return "peer-copy";
    case NXRT_FEATURE_MEMORY_IMPORT: return "memory-import";
    case NXRT_FEATURE_STRING_TENSORS: return "string-tensors";
    case NXRT_FEATURE_KERNEL_CACHE: return "kernel-cache";
    case NXRT_FEATURE_OFFLINE_COMPILE: return "offline-compile";
  }
  return "";
}

size_t nxrt_env_plugin_count(const nxrt_env* env) { return env ? env->info.size() : 0; }

nxrt_error* nxrt_env_plugin_info(const nxrt_env* env, size_t index, nxrt_plugin_info* out) {
  return wrap([&] {
    if (!env || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "env or out is NULL");
    if (index >= env->info.size()) nxrt::raise(NXRT_ERR_NOT_FOUND, "no plugin {} (there are {})", index, env->info.size());
    const auto& i = env->info[index];
    *out = nxrt_plugin_info{i.path.c_str(), i.name.c_str(), i.version.c_str(), i.abi_major, i.abi_minor, i.features,
                            i.loaded ? 1 : 0, i.error.c_str(), i.device_count, i.no_device_reason.c_str()};
  });
}

nxrt_error* nxrt_env_device_description(const nxrt_env* env, size_t plugin_index, uint32_t device, const char** text) {
  return wrap([&] {
    if (!env || !text) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "env or text is NULL");
    if (plugin_index >= env->info.size()) nxrt::raise(NXRT_ERR_NOT_FOUND, "no plugin {}", plugin_index);
    const auto& i = env->info[plugin_index];
    if (device >= i.devices.size()) nxrt::raise(NXRT_ERR_NOT_FOUND, "plugin '{}' has no device {}", i.name, device);
    *text = i.devices[device].c_str();
  });
}

size_t nxrt_env_device_property_count(const nxrt_env* env, size_t plugin_index, uint32_t device) {
  if (!env || plugin_index >= env->info.size() || device >= env->info[plugin_index].descriptions.size()) return 0;
  return env->info[plugin_index].descriptions[device].size();
}

nxrt_error* nxrt_env_device_property(const nxrt_env* env, size_t plugin_index, uint32_t device, size_t i, nxrt_key_value* out) {
  return wrap([&] {
    if (!env || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "env or out is NULL");
    if (plugin_index >= env->info.size()) nxrt::raise(NXRT_ERR_NOT_FOUND, "no plugin {}", plugin_index);
    const auto& p = env->info[plugin_index];
    if (device >= p.descriptions.size()) nxrt::raise(NXRT_ERR_NOT_FOUND, "plugin '{}' has no device {}", p.name, device);
    if (i >= p.descriptions[device].size()) nxrt::raise(NXRT_ERR_NOT_FOUND, "device {} of '{}' has no property {}", device, p.name, i);
    *out = nxrt_key_value{p.descriptions[device][i].first.c_str(), p.descriptions[device][i].second.c_str()};
  });
}

int nxrt_env_device_same_as(const nxrt_env* env, size_t plugin_index, uint32_t device, size_t* plugin_out,
                            uint32_t* device_out) {
  if (!env || plugin_index >= env->info.size()) return 0;
  const auto& i = env->info[plugin_index];
  if (device >= i.same_as.size() || i.same_as[device].first == SIZE_MAX) return 0;
  if (plugin_out) *plugin_out = i.same_as[device].first;
  if (device_out) *device_out = i.same_as[device].second;
  return 1;
}

size_t nxrt_env_plugin_option_count(const nxrt_env* env, size_t plugin_index) {
  return env && plugin_index < env->info.size() ? env->info[plugin_index].options.size() : 0;
}

nxrt_error* nxrt_env_plugin_option(const nxrt_env* env, size_t plugin_index, size_t option_index,
                                   nxrt_option_schema_entry* out) {
  return wrap([&] {
    if (!env || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "env or out is NULL");
    if (plugin_index >= env->info.size()) nxrt::raise(NXRT_ERR_NOT_FOUND, "no plugin {}", plugin_index);
    const auto& i = env->info[plugin_index];
    if (option_index >= i.options.size())
      nxrt::raise(NXRT_ERR_NOT_FOUND, "plugin '{}' has no option {} (it has {})", i.name, option_index, i.options.size());
    const auto& o = i.options[option_index];
    *out = nxrt_option_schema_entry{o.name.c_str(), nxrt::option_type_name(o.type), o.default_value.c_str(), o.help.c_str()};
  });
}

nxrt_error* nxrt_model_load(const char* path, nxrt_model** out) {
  return wrap([&] {
    if (!path || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "path or out is NULL");
    auto m = std::make_unique<nxrt_model>();
    m->ir = nxrt::load_model_any(path);
    *out = m.release();
  });
}

nxrt_error* nxrt_model_load_cached(const char* path, const char* cache_dir, nxrt_model** out) {
  return wrap([&] {
    if (!path || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "path or out is NULL");
    auto m = std::make_unique<nxrt_model>();
    m->cache_dir = cache_dir ? cache_dir : "";
    m->ir = nxrt::load_model_any(path, m->cache_dir);
    *out = m.release();
  });
}

nxrt_error* nxrt_model_load_bytes(const void* data, size_t size, nxrt_model** out) {
  return wrap([&] {
    if (!data || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "data or out is NULL");
    auto m = std::make_unique<nxrt_model>();
    m->ir = nxrt::load_model_bytes(data, size, "");
    *out = m.release();
  });
}

void nxrt_model_release(nxrt_model* model) { delete model; }

namespace {

// nxrt_opt_level -> 0..3 (NXRT_OPT_DEFAULT: the default level).
int opt_level(int level) {
  if (level == NXRT_OPT_DEFAULT) return nxrt::kDefaultOptLevel;
  if (level < NXRT_OPT_LEVEL_0 || level > NXRT_OPT_LEVEL_3)
    nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "optimization level {} is not an nxrt_opt_level (0 or {}..{})", level,
                int(NXRT_OPT_LEVEL_0), int(NXRT_OPT_LEVEL_3));
  return level - NXRT_OPT_LEVEL_0;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

nxrt_error* nxrt_model_optimize(nxrt_env* env, nxrt_model* model, int level) {
  return wrap([&] {
    if (!env || !model || !model->ir) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "env or model is NULL");
    // Sessions made from the model share its IR: they keep theirs, this gets a copy.
    const bool owns = model->ir.use_count() == 1;
    const int lvl = opt_level(level);
    // The optimized IR is this model's own (optimized in place, or a fresh copy).
    auto ir = std::const_pointer_cast<nxrt_model_ir>(env->env.optimized(std::move(model->ir), lvl, owns));
    // Another graph now: another cache key, and nothing compiled for the old one applies.
    if (ir->digest) {
      const uint64_t mix[2] = {ir->digest, uint64_t(lvl) + 0x6f707469ull};
      ir->digest = nxrt::xxh64(mix, sizeof mix);
    }
    ir->compiled.reset();
    model->ir = std::move(ir);
  });
}

nxrt_error* nxrt_model_save(const nxrt_model* model, const char* path) {
  return wrap([&] {
    if (!model || !model->ir || !path) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "model or path is NULL");
    nxrt::save_model(*model->ir, path);
  });
}

const char* nxrt_model_optimization_log(const nxrt_model* model) {
  if (!model || !model->ir) return "";
  auto* m = const_cast<nxrt_model*>(model);
  m->log = joined(model->ir->optimizer_log);
  return m->log.c_str();
}

namespace {

// owns: the caller handed the model over; no other session shares it, so the
// session frees the constants it does not need (see nxrt_session_create_take_model).
// The EP-list policy lives in nxrt::Env::create_session; this only translates.
nxrt::SessionConfig session_config(const nxrt_session_options* options, const std::string& cache_dir) {
    nxrt::SessionConfig config;
    config.cache_dir = cache_dir;
    config.eps = options->eps ? options->eps : "";
    config.fallback = options->fallback != 0;
    config.threads = options->threads;
    config.device = options->device;
    config.device_memory_limit = options->device_memory_limit;
    config.device_allocator = options->device_allocator;
    config.opt_level = opt_level(options->optimization_level);
    if (options->ep_option_count && !options->ep_options)
      nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "ep_options is NULL but ep_option_count is {}", options->ep_option_count);
    for (size_t i = 0; i < options->ep_option_count; ++i) {
      const nxrt_key_value& kv = options->ep_options[i];
      if (!kv.key || !kv.value) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "EP option {} has a NULL key or value", i);
      config.ep_options.emplace_back(kv.key, kv.value);
    }
    return config;
}

nxrt_error* create_session(nxrt_env* env, std::shared_ptr<const nxrt_model_ir> ir, bool owns,
                           const nxrt_session_options* options, nxrt_session** out, const std::string& cache_dir) {
  return wrap([&] {
    if (!env || !ir || !options || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "NULL argument to nxrt_session_create");
    nxrt::SessionConfig config = session_config(options, cache_dir);
    auto s = std::make_unique<nxrt_session>();
    s->impl = env->env.create_session(std::move(ir), config, owns);
    *out = s.release();
  });
}

}  // namespace

nxrt_error* nxrt_session_create(nxrt_env* env, const nxrt_model* model, const nxrt_session_options* options, nxrt_session** out) {
  return create_session(env, model ? model->ir : nullptr, false, options, out, model ? model->cache_dir : "");
}

nxrt_error* nxrt_model_compile(nxrt_env* env, const nxrt_model* model, const nxrt_session_options* options,
                               const nxrt_key_value* target, size_t target_count, const char* path) {
  return wrap([&] {
    if (!env || !model || !model->ir || !options || !path || (target_count && !target))
      nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "NULL argument to nxrt_model_compile");
    nxrt::SessionConfig config = session_config(options, "");
    config.compile_to = path;
    for (size_t i = 0; i < target_count; ++i) {
      if (!target[i].key || !target[i].value) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "target entry {} has a NULL key or value", i);
      config.target.emplace_back(target[i].key, target[i].value);
    }
    env->env.create_session(model->ir, config, false);
  });
}

const char* nxrt_compiled_model_describe(const char* path) {
  thread_local std::string text;
  try {
    text = path ? nxrt::describe_artifact(path) : "no path given\n";
  } catch (const std::exception& e) {
    text = std::string(e.what()) + "\n";
  }
  return text.c_str();
}

const char* nxrt_session_load_report(const nxrt_session* s) {
  if (!s) return "";
  auto* m = const_cast<nxrt_session*>(s);
  std::string stages;
  for (auto& [name, ms] : s->impl->load_stages()) stages += fmt::format("{}\"{}\":{:.3f}", stages.empty() ? "" : ",", name, ms);
  const auto& cache = s->impl->kernel_cache();
  m->report = fmt::format("{{\"stages\":{{{}}},\"cache\":{}}}", stages, cache ? cache->report().json() : nxrt::CacheReport().json());
  return m->report.c_str();
}

const char* nxrt_session_cache_text(const nxrt_session* s) {
  if (!s) return "";
  auto* m = const_cast<nxrt_session*>(s);
  const auto& cache = s->impl->kernel_cache();
  m->cache_text = cache ? cache->report().text() : nxrt::CacheReport().text();
  return m->cache_text.c_str();
}

nxrt_error* nxrt_session_create_take_model(nxrt_env* env, nxrt_model* model, const nxrt_session_options* options,
                                           nxrt_session** out) {
  std::shared_ptr<const nxrt_model_ir> ir;
  if (model) ir = std::move(model->ir);
  const std::string cache_dir = model ? model->cache_dir : "";
  delete model;
  const bool owns = ir && ir.use_count() == 1;  // no earlier session from this model shares it
  return create_session(env, std::move(ir), owns, options, out, cache_dir);
}

void nxrt_session_release(nxrt_session* session) { delete session; }

nxrt_error* nxrt_session_start_profiling(nxrt_session* s) {
  return wrap([&] {
    if (!s) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "session is NULL");
    s->impl->start_profiling();
  });
}

nxrt_error* nxrt_session_end_profiling(nxrt_session* s, const char* trace_path, size_t* event_count) {
  return wrap([&] {
    if (!s || !trace_path) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "session or trace_path is NULL");
    size_t n = s->impl->end_profiling(trace_path);
    if (event_count) *event_count = n;
  });
}

size_t nxrt_session_input_count(const nxrt_session* s) { return s ? s->impl->model().inputs.size() : 0; }
nxrt_io_info nxrt_session_input(const nxrt_session* s, size_t i) { return io_info(s->impl->model().inputs.at(i)); }
size_t nxrt_session_output_count(const nxrt_session* s) { return s ? s->impl->model().outputs.size() : 0; }
nxrt_io_info nxrt_session_output(const nxrt_session* s, size_t i) { return io_info(s->impl->model().outputs.at(i)); }

size_t nxrt_session_node_count(const nxrt_session* s) { return s ? s->impl->model().live_nodes().size() : 0; }

nxrt_node_assignment nxrt_session_node(const nxrt_session* s, size_t i) {
  auto nodes = s->impl->model().live_nodes();
  const nxrt_node* n = nodes.at(i);
  const auto& a = s->impl->assignments().at(n->index);
  const char* ep = a.ep >= 0 ? s->impl->eps()[size_t(a.ep)]->lib->name().c_str() : a.host ? "host" : "";
  return nxrt_node_assignment{n->name.c_str(), n->op_type.c_str(), ep, a.fell_back ? 1 : 0, a.reasons.c_str()};
}

const char* nxrt_session_node_kernel(const nxrt_session* s, size_t i) {
  if (!s) return "";
  auto nodes = s->impl->model().live_nodes();
  if (i >= nodes.size()) return "";
  return s->impl->assignments().at(nodes[i]->index).kernel.c_str();
}

const char* nxrt_session_node_bodies(const nxrt_session* s, size_t i) {
  if (!s) return "";
  auto nodes = s->impl->model().live_nodes();
  if (i >= nodes.size()) return "";
  return s->impl->body_placement(nodes[i]->index).c_str();
}

size_t nxrt_session_copy_count(const nxrt_session* s) { return s ? s->impl->copy_count() : 0; }

const char* nxrt_session_optimization_log(const nxrt_session* s) {
  if (!s) return "";
  auto* m = const_cast<nxrt_session*>(s);
  m->log = joined(s->impl->model().optimizer_log);
  return m->log.c_str();
}

namespace {

nxrt::KeyValues read_run_options(const nxrt_session_run_options* run_options) {
  nxrt::KeyValues ro;
  if (!run_options) return ro;
  if (run_options->option_count && !run_options->options)
    nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "run options are NULL but option_count is {}", run_options->option_count);
  for (size_t i = 0; i < run_options->option_count; ++i) {
    const nxrt_key_value& kv = run_options->options[i];
    if (!kv.key || !kv.value) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "run option {} has a NULL key or value", i);
    ro.emplace_back(kv.key, kv.value);
  }
  return ro;
}

}  // namespace

nxrt_error* nxrt_session_run_with_options(nxrt_session* s, const nxrt_host_tensor* inputs, size_t input_count,
                                          const nxrt_session_run_options* run_options, nxrt_outputs** outputs) {
  return wrap([&] {
    if (!s || !outputs) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "session or outputs is NULL");
    nxrt::KeyValues ro = read_run_options(run_options);
    auto o = std::make_unique<nxrt_outputs>(s->impl->output_buffers());
    s->impl->run(inputs, input_count, o->tensors, nullptr, &ro, &o->run_id);
    make_views(*o);
    *outputs = o.release();
  });
}

nxrt_error* nxrt_session_run(nxrt_session* s, const nxrt_host_tensor* inputs, size_t input_count, nxrt_outputs** outputs) {
  return nxrt_session_run_with_options(s, inputs, input_count, nullptr, outputs);
}

// ------------------------------------------------------------ device interop

namespace {

// The EP named `ep` of the session (its index), or an error naming the session's EPs.
int find_ep(const nxrt_session* s, const char* ep) {
  if (!s || !ep) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "session or EP name is NULL");
  const auto& eps = s->impl->eps();
  std::string names;
  for (size_t e = 0; e < eps.size(); ++e) {
    if (eps[e]->lib->name() == ep) return int(e);
    names += (names.empty() ? "" : ", ") + eps[e]->lib->name();
  }
  nxrt::raise(NXRT_ERR_NOT_FOUND, "the session has no EP '{}' (its EPs: {})", ep, names);
}

void require_feature(const nxrt::EpInstance& ep, uint64_t bit, const char* feature) {
  if (!ep.lib->has(bit))
    nxrt::raise(NXRT_ERR_UNSUPPORTED, "EP '{}' does not offer {} (plugin {} lacks the {} feature)", ep.lib->name(),
                feature, ep.lib->path().string(), feature);
}

nxrt_native_handle native_of(const nxrt::EpInstance& ep, nxrt_native_object what, const void* object, const char* context) {
  require_feature(ep, NXRT_FEATURE_NATIVE_HANDLES, "native-handles");
  nxrt_native_handle h{};
  h.struct_size = sizeof h;
  nxrt::check_plugin(*ep.lib, nxrt::guarded(ep.lib->name(), "native_handle", [&] {
                       return ep.lib->api().native_handle(ep.session, what, object, &h);
                     }),
                     context);
  return h;
}

// Copies what fits of a native handle into the caller's struct (callee-filled rule).
void fill_native(nxrt_native_handle* out, const nxrt_native_handle& h) {
  if (!out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "out is NULL");
  if (out->struct_size < offsetof(nxrt_native_handle, handle) + sizeof(out->handle))
    nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "out->struct_size {} is too small (set it to sizeof(nxrt_native_handle))", out->struct_size);
  const uint32_t size = NXRT_FILLED_SIZE(out->struct_size, uint32_t(sizeof h));
  std::memcpy(static_cast<void*>(out), &h, size);
  out->struct_size = size;
}

// Index of the graph input or output `name` ("input" or "output": which list), or an
// error naming the model's.
size_t io_index(const std::vector<nxrt_value*>& values, const char* name, const char* what) {
  if (!name) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "{} name is NULL", what);
  std::string names;
  for (size_t k = 0; k < values.size(); ++k) {
    if (values[k]->name == name) return k;
    names += (names.empty() ? "" : ", ") + values[k]->name;
  }
  nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "the model has no {} named '{}' (its {}s: {})", what, name, what, names);
}
size_t input_index(const nxrt_session* s, const char* name) { return io_index(s->impl->model().inputs, name, "input"); }
size_t output_index(const nxrt_session* s, const char* name) { return io_index(s->impl->model().outputs, name, "output"); }

// A stream object for EP `ep` of the session, its plugin stream made by `make` once the
// EP is found to have `feature`.
nxrt_device_stream* new_stream(nxrt_session* s, const char* ep, uint64_t feature, const char* feature_name,
                               const std::function<void(const nxrt::EpInstance&, nxrt_stream**)>& make) {
  const int e = find_ep(s, ep);
  auto st = std::make_unique<nxrt_device_stream>();
  st->ep = s->impl->eps()[size_t(e)];
  st->session = s->impl.get();
  st->session_alive = s->impl->alive_token();
  require_feature(*st->ep, feature, feature_name);
  make(*st->ep, &st->stream);
  if (!st->stream) nxrt::raise(NXRT_ERR_PLUGIN, "plugin '{}' returned no stream", st->ep->lib->name());
  return st.release();
}

}  // namespace

size_t nxrt_session_ep_count(const nxrt_session* s) { return s ? s->impl->eps().size() : 0; }
const char* nxrt_session_ep_name(const nxrt_session* s, size_t i) {
  return s && i < s->impl->eps().size() ? s->impl->eps()[i]->lib->name().c_str() : "";
}

nxrt_error* nxrt_session_memory_usage(const nxrt_session* s, size_t ep_index, nxrt_memory_usage* out) {
  return wrap([&] {
    if (!s || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "session or out is NULL");
    if (ep_index >= s->impl->eps().size())
      nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "EP index {} is out of range (the session has {})", ep_index, s->impl->eps().size());
    const nxrt::EpInstance& ep = *s->impl->eps()[ep_index];
    const nxrt::EpMemoryUsage u = ep.usage();
    nxrt_memory_usage m{};
    m.ep = ep.lib->name().c_str();
    m.bytes_in_use = u.bytes_in_use;
    m.peak_bytes = u.peak_bytes;
    m.arena_bytes = u.arena_bytes;
    m.allocation_count = u.allocation_count;
    m.limit_bytes = s->impl->memory_policy()->limit;
    m.has_plugin_stats = ep.plugin_stats(&m.plugin) ? 1 : 0;
    *out = m;
  });
}

nxrt_error* nxrt_session_native_handle(const nxrt_session* s, const char* ep, nxrt_native_object what, nxrt_native_handle* out) {
  return wrap([&] {
    const int e = find_ep(s, ep);
    if (what != NXRT_NATIVE_OBJECT_DEVICE && what != NXRT_NATIVE_OBJECT_QUEUE)
      nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "native handle kind {} is not a session object (use DEVICE or QUEUE)", what);
    fill_native(out, native_of(*s->impl->eps()[size_t(e)], what, nullptr, "reading a native handle"));
  });
}

nxrt_error* nxrt_device_tensor_alloc(nxrt_session* s, const char* ep, int32_t dtype, const int64_t* dims, size_t rank,
                                     nxrt_device_tensor** out) {
  return wrap([&] {
    if (!out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    if (rank && !dims) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "dims is NULL with rank {}", rank);
    const int e = find_ep(s, ep);
    auto t = std::make_unique<nxrt_device_tensor>();
    t->t = nxrt::DeviceTensor::allocate(s->impl->eps()[size_t(e)], nxrt_dtype(dtype), std::vector<int64_t>(dims, dims + rank));
    *out = t.release();
  });
}

nxrt_error* nxrt_device_tensor_upload(nxrt_device_tensor* t, const void* data, size_t bytes) {
  return wrap([&] {
    if (!t) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "tensor is NULL");
    t->t->upload(data, bytes);
  });
}

nxrt_error* nxrt_device_tensor_download(const nxrt_device_tensor* t, void* data, size_t bytes) {
  return wrap([&] {
    if (!t) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "tensor is NULL");
    t->t->download(data, bytes);
  });
}

void nxrt_device_tensor_release(nxrt_device_tensor* t) { delete t; }

nxrt_error* nxrt_device_tensor_copy(nxrt_device_tensor* dst, const nxrt_device_tensor* src) {
  return wrap([&] {
    if (!dst || !src) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "dst or src is NULL");
    nxrt::DeviceTensor::copy(*src->t, *dst->t);
  });
}

nxrt_device_tensor_info nxrt_device_tensor_get_info(const nxrt_device_tensor* t) {
  nxrt_device_tensor_info i{};
  if (!t) return i;
  const nxrt::DeviceTensor& d = *t->t;
  i.ep = d.ep->lib->name().c_str();
  i.dtype = int32_t(d.dtype);
  i.rank = uint32_t(d.dims.size());
  i.dims = d.dims.data();
  i.memory = NXRT_MEMORY_DEVICE;
  i.handle = d.handle;
  i.byte_offset = d.offset;
  i.bytes = d.bytes;
  return i;
}

nxrt_error* nxrt_device_tensor_native(const nxrt_device_tensor* t, nxrt_native_handle* out) {
  return wrap([&] {
    if (!t) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "tensor is NULL");
    nxrt_native_handle h = native_of(*t->t->ep, NXRT_NATIVE_OBJECT_MEMORY, t->t->handle, "reading a tensor's native handle");
    h.value += t->t->offset;  // the tensor's own place inside the allocation
    fill_native(out, h);
  });
}

nxrt_error* nxrt_device_tensor_import(nxrt_session* s, const char* ep, const nxrt_native_handle* native, int32_t dtype,
                                      const int64_t* dims, size_t rank, nxrt_device_tensor** out) {
  return wrap([&] {
    if (!out || !native) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "native or out is NULL");
    *out = nullptr;
    if (rank && !dims) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "dims is NULL with rank {}", rank);
    if (!NXRT_HAS_FIELD(native, nxrt_native_handle, size))
      nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "native->struct_size {} is too small (set it to sizeof(nxrt_native_handle))",
                  native->struct_size);
    const int e = find_ep(s, ep);
    nxrt_native_handle n{};
    std::memcpy(&n, native, sizeof n);
    auto t = std::make_unique<nxrt_device_tensor>();
    t->t = nxrt::DeviceTensor::import(s->impl->eps()[size_t(e)], n, nxrt_dtype(dtype), std::vector<int64_t>(dims, dims + rank));
    *out = t.release();
  });
}

nxrt_error* nxrt_session_stream_create(nxrt_session* s, const char* ep, nxrt_device_stream** out) {
  return wrap([&] {
    if (!out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    *out = new_stream(s, ep, NXRT_FEATURE_STREAMS, "streams", [](const nxrt::EpInstance& e, nxrt_stream** st) {
      nxrt::check_plugin(*e.lib, nxrt::guarded(e.lib->name(), "stream_create", [&] { return e.lib->api().stream_create(e.session, st); }),
                         "creating a stream");
    });
  });
}

nxrt_error* nxrt_session_stream_import(nxrt_session* s, const char* ep, const nxrt_native_handle* native, nxrt_device_stream** out) {
  return wrap([&] {
    if (!out || !native) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "native or out is NULL");
    *out = nullptr;
    *out = new_stream(s, ep, NXRT_FEATURE_STREAM_IMPORT, "stream-import", [&](const nxrt::EpInstance& e, nxrt_stream** st) {
      nxrt::check_plugin(*e.lib,
                         nxrt::guarded(e.lib->name(), "stream_import", [&] { return e.lib->api().stream_import(e.session, native, st); }),
                         "importing a stream", /*user_input=*/true);
    });
  });
}

nxrt_error* nxrt_device_stream_native(const nxrt_device_stream* st, nxrt_native_handle* out) {
  return wrap([&] {
    if (!st) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "stream is NULL");
    fill_native(out, native_of(*st->ep, NXRT_NATIVE_OBJECT_STREAM, st->stream, "reading a stream's native handle"));
  });
}

nxrt_error* nxrt_device_stream_synchronize(nxrt_device_stream* st) {
  return wrap([&] {
    if (!st) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "stream is NULL");
    nxrt::check_plugin(*st->ep->lib, nxrt::guarded(st->ep->lib->name(), "stream_synchronize", [&] {
                         return st->ep->lib->api().stream_synchronize(st->stream);
                       }),
                       "synchronizing a stream");
  });
}

void nxrt_device_stream_release(nxrt_device_stream* st) { delete st; }

nxrt_error* nxrt_binding_create(nxrt_session* s, nxrt_binding** out) {
  return wrap([&] {
    if (!s || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "session or out is NULL");
    auto b = std::make_unique<nxrt_binding>();
    b->session = s;
    b->inputs.resize(s->impl->model().inputs.size());
    b->outputs.resize(s->impl->model().outputs.size());
    *out = b.release();
  });
}

void nxrt_binding_release(nxrt_binding* b) { delete b; }

nxrt_error* nxrt_binding_bind_host_input(nxrt_binding* b, const nxrt_host_tensor* t) {
  return wrap([&] {
    if (!b || !t) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "binding or tensor is NULL");
    if (t->rank && !t->dims) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' has rank {} but no dims", t->name ? t->name : "", t->rank);
    const size_t k = input_index(b->session, t->name);
    nxrt::BoundInput& in = b->inputs[k];
    in = nxrt::BoundInput{};
    in.name = t->name;
    in.dtype = nxrt_dtype(t->dtype);
    in.dims.assign(t->dims, t->dims + t->rank);
    in.host = t->data;
  });
}

nxrt_error* nxrt_binding_bind_input(nxrt_binding* b, const char* name, const nxrt_device_tensor* t) {
  return wrap([&] {
    if (!b || !t) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "binding or tensor is NULL");
    const size_t k = input_index(b->session, name);
    if (b->session->impl->ep_index(t->t->ep.get()) < 0)
      nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}': the device tensor belongs to another session", name);
    nxrt::BoundInput& in = b->inputs[k];
    in = nxrt::BoundInput{};
    in.name = name;
    in.dtype = t->t->dtype;
    in.dims = t->t->dims;
    in.device = t->t;
  });
}

nxrt_error* nxrt_binding_bind_output(nxrt_binding* b, const char* name, nxrt_device_tensor* t) {
  return wrap([&] {
    if (!b || !t) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "binding or tensor is NULL");
    const size_t k = output_index(b->session, name);
    if (b->session->impl->ep_index(t->t->ep.get()) < 0)
      nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "output '{}': the device tensor belongs to another session", name);
    const nxrt_value& v = *b->session->impl->model().outputs[k];
    if (v.dtype != NXRT_DTYPE_UNDEFINED && v.dtype != t->t->dtype)
      nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "output '{}' is {} but the device tensor is {}", name, nxrt::dtype_name(v.dtype),
                  nxrt::dtype_name(t->t->dtype));
    if (v.static_shape() && v.dims != t->t->dims)
      nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "output '{}' has shape {} but the device tensor is {}", name, nxrt::shape_str(v.dims),
                  nxrt::shape_str(t->t->dims));
    b->outputs[k] = nxrt::BoundOutput{nxrt::BoundOutput::Device, t->t, -1};
  });
}

nxrt_error* nxrt_binding_bind_output_to_device(nxrt_binding* b, const char* name, const char* ep) {
  return wrap([&] {
    if (!b) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "binding is NULL");
    const size_t k = output_index(b->session, name);
    b->outputs[k] = nxrt::BoundOutput{nxrt::BoundOutput::Leave, nullptr, find_ep(b->session, ep)};
  });
}

nxrt_error* nxrt_binding_bind_output_to_host(nxrt_binding* b, const char* name) {
  return wrap([&] {
    if (!b) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "binding is NULL");
    b->outputs[output_index(b->session, name)] = nxrt::BoundOutput{};
  });
}

nxrt_error* nxrt_session_run_binding(nxrt_session* s, nxrt_binding* b, const nxrt_session_run_options* run_options,
                                     nxrt_device_stream* stream, nxrt_outputs** outputs) {
  return wrap([&] {
    if (outputs) *outputs = nullptr;
    if (!s || !b) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "session or binding is NULL");
    if (b->session != s) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "the binding was made for another session");
    nxrt::KeyValues ro = read_run_options(run_options);
    std::vector<nxrt::BoundInput> inputs;
    const auto& model_inputs = s->impl->model().inputs;
    for (size_t k = 0; k < b->inputs.size(); ++k) {
      if (b->inputs[k].name.empty()) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' is not bound", model_inputs[k]->name);
      inputs.push_back(b->inputs[k]);
    }
    nxrt::CallerStream cs;
    if (stream) {
      cs.ep = s->impl->ep_index(stream->ep.get());
      if (cs.ep < 0) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "the stream belongs to another session");
      cs.stream = stream->stream;
    }
    auto o = std::make_unique<nxrt_outputs>(s->impl->output_buffers());
    s->impl->run_bound(inputs, &b->outputs, o->tensors, nullptr, &ro, &o->run_id, stream ? &cs : nullptr);
    make_views(*o);
    if (outputs) *outputs = o.release();
  });
}

nxrt_error* nxrt_binding_output(const nxrt_binding* b, const char* name, nxrt_device_tensor** out) {
  return wrap([&] {
    if (!b || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "binding or out is NULL");
    *out = nullptr;
    const size_t k = output_index(b->session, name);
    const nxrt::BoundOutput& o = b->outputs[k];
    if (o.kind == nxrt::BoundOutput::Host) nxrt::raise(NXRT_ERR_NOT_FOUND, "output '{}' is bound to host memory", name);
    if (!o.tensor) nxrt::raise(NXRT_ERR_NOT_FOUND, "output '{}' has no device tensor yet (no successful run)", name);
    *out = new nxrt_device_tensor{o.tensor};
  });
}

uint64_t nxrt_outputs_run_id(const nxrt_outputs* o) { return o ? o->run_id : 0; }

size_t nxrt_outputs_count(const nxrt_outputs* o) { return o ? o->tensors.size() : 0; }


int32_t nxrt_session_input_kind(const nxrt_session* s, size_t i) { return s ? kind_of(s->impl->model().inputs.at(i)) : 0; }
int32_t nxrt_session_output_kind(const nxrt_session* s, size_t i) { return s ? kind_of(s->impl->model().outputs.at(i)) : 0; }

nxrt_error* nxrt_session_run_values(nxrt_session* s, const nxrt_host_value* inputs, size_t input_count, nxrt_outputs** outputs) {
  return wrap([&] {
    if (!s || !outputs) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "session or outputs is NULL");
    if (input_count && !inputs) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "inputs is NULL");
    std::vector<nxrt::BoundInput> given(input_count);
    for (size_t i = 0; i < input_count; ++i) {
      const nxrt_host_value& v = inputs[i];
      if (!v.name) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "input {} has no name", i);
      given[i].name = v.name;
      if (v.kind == NXRT_VALUE_TENSOR) {
        if (v.count != 1 || !v.tensors) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "tensor input '{}' needs exactly one tensor", v.name);
        const nxrt_host_tensor& t = v.tensors[0];
        if (t.rank && !t.dims) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' has rank {} but no dims", v.name, t.rank);
        given[i].dtype = nxrt_dtype(t.dtype);
        given[i].dims.assign(t.dims, t.dims + t.rank);
        given[i].host = t.data;
      } else {
        given[i].value = value_from(v);
      }
    }
    auto o = std::make_unique<nxrt_outputs>(s->impl->output_buffers());
    s->impl->run_bound(given, nullptr, o->tensors, nullptr, nullptr, &o->run_id, nullptr, &o->values);
    make_views(*o);
    *outputs = o.release();
  });
}

nxrt_host_value nxrt_outputs_get_value(const nxrt_outputs* o, size_t i) {
  const auto& t = o->tensors.at(i);
  nxrt_host_value v{};
  v.name = t.name.c_str();
  const nxrt::ValuePtr& val = i < o->values.size() ? o->values[i] : nullptr;
  if (!val) {
    v.kind = NXRT_VALUE_TENSOR;
    v.count = 1;
    v.tensors = &o->views.at(i).at(0);
    return v;
  }
  const auto& views = o->views.at(i);
  v.tensors = views.empty() ? nullptr : views.data();
  v.count = views.size();
  if (val->kind == nxrt::Value::Sequence) {
    v.kind = NXRT_VALUE_SEQUENCE;
    v.elem_dtype = int32_t(val->elem);
  } else {
    v.kind = NXRT_VALUE_OPTIONAL;
    v.has_value = val->items.empty() ? 0 : 1;
    if (v.has_value) {
      v.inner_kind = val->items[0]->kind == nxrt::Value::Sequence ? NXRT_VALUE_SEQUENCE : NXRT_VALUE_TENSOR;
      if (v.inner_kind == NXRT_VALUE_SEQUENCE) v.elem_dtype = int32_t(val->items[0]->elem);
    }
  }
  return v;
}

nxrt_error* nxrt_value_file_read(const char* path, int32_t kind, nxrt_outputs** out) {
  return wrap([&] {
    if (!path || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "path or out is NULL");
    if (kind < NXRT_VALUE_TENSOR || kind > NXRT_VALUE_OPTIONAL) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "unknown value kind {}", kind);
    auto o = std::make_unique<nxrt_outputs>();
    nxrt::Value v = nxrt::read_value_file(path, nxrt::Value::Kind(kind));
    o->tensors.emplace_back();
    if (kind == NXRT_VALUE_TENSOR) o->tensors[0] = std::move(v.tensor);
    else o->values.push_back(std::make_shared<nxrt::Value>(std::move(v)));
    make_views(*o);
    *out = o.release();
  });
}

nxrt_error* nxrt_value_file_write(const char* path, const nxrt_host_value* v) {
  return wrap([&] {
    if (!path || !v) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "path or value is NULL");
    const std::string name = v->name ? v->name : "";
    if (v->kind == NXRT_VALUE_TENSOR) {
      if (v->count != 1 || !v->tensors) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "a tensor value needs exactly one tensor");
      nxrt::Value t;
      t.tensor = tensor_from(v->tensors[0]);
      nxrt::write_value_file(path, t, name);
      return;
    }
    nxrt::write_value_file(path, *value_from(*v), name);
  });
}

nxrt_host_tensor nxrt_outputs_get(const nxrt_outputs* o, size_t i) {
  const auto& t = o->tensors.at(i);
  return nxrt_host_tensor{t.name.c_str(), int32_t(t.dtype), uint32_t(t.dims.size()), t.dims.data(), t.data.data()};
}

void nxrt_outputs_release(nxrt_outputs* o) { delete o; }

const char* nxrt_element_type_name(int32_t dtype) { return nxrt::dtype_name(nxrt_dtype(dtype)); }
size_t nxrt_element_type_size(int32_t dtype) { return nxrt::dtype_size(nxrt_dtype(dtype)); }

const char* nxrt_shape_string(const int64_t* dims, size_t rank) {
  static thread_local std::string s;
  try {
    s = nxrt::shape_str(dims, dims ? rank : 0);
  } catch (...) {
    s.clear();
  }
  return s.c_str();
}

nxrt_error* nxrt_tensor_file_read(const char* path, nxrt_outputs** out) {
  return wrap([&] {
    if (!path || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "path or out is NULL");
    auto o = std::make_unique<nxrt_outputs>();
    o->tensors.push_back(nxrt::read_tensor_file(path));
    make_views(*o);
    *out = o.release();
  });
}

nxrt_error* nxrt_tensor_file_write(const char* path, const nxrt_host_tensor* t) {
  return wrap([&] {
    if (!path || !t) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "path or tensor is NULL");
    nxrt::write_tensor_file(path, tensor_from(*t));
  });
}

}  // extern "C"
