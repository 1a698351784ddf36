// The C embedding API (nxrt.h) over the C++ host.
#include <nxrt/nxrt.h>

#include "env.hpp"
#include "error.hpp"
#include "ir.hpp"
#include "session.hpp"

#include <sstream>

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
  };
  std::vector<Info> info;  // stable strings for the getters

  void refresh() {
    info.clear();
    for (auto& e : env.entries()) {
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
        for (auto& d : e.lib->devices()) i.devices.push_back(d.describe());
      }
      info.push_back(std::move(i));
    }
  }
};

struct nxrt_model {
  std::shared_ptr<const nxrt_model_ir> ir;
};

struct nxrt_session {
  std::unique_ptr<nxrt::Session> impl;
  std::vector<std::string> ep_names;
};

struct nxrt_outputs {
  std::vector<nxrt::HostTensor> tensors;
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

extern "C" {

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

nxrt_error* nxrt_model_load(const char* path, nxrt_model** out) {
  return wrap([&] {
    if (!path || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "path or out is NULL");
    auto m = std::make_unique<nxrt_model>();
    m->ir = nxrt::load_model_file(path);
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

// owns: the caller handed the model over; no other session shares it, so the
// session frees the constants it does not need (see nxrt_session_create_take_model).
nxrt_error* create_session(nxrt_env* env, std::shared_ptr<const nxrt_model_ir> ir, bool owns,
                           const nxrt_session_options* options, nxrt_session** out) {
  return wrap([&] {
    if (!env || !ir || !options || !out) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "NULL argument to nxrt_session_create");
    if (options->threads < 0) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "threads must be >= 0, got {}", options->threads);
    std::vector<std::string> names;
    bool fallback = options->fallback != 0;
    auto entries = env->env.entries();
    std::string list = options->eps ? options->eps : "";
    if (list == "auto") {
      // Best available: plugins whose first device is an accelerator, then the embedded
      // default (cpu), with fallback so every node finds a home.
      for (auto& e : entries)
        if (e.lib && !e.lib->devices().empty() && e.lib->devices()[0].kind != NXRT_DEVICE_CPU) names.push_back(e.name);
      list = "cpu";
      fallback = true;
    }
    {
      std::stringstream ss(list);
      std::string item;
      while (std::getline(ss, item, ','))
        if (!item.empty()) names.push_back(item);
    }
    if (names.empty()) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "no EP requested (give an EP list such as 'cpu')");
    auto available = [&] {
      std::string s;
      for (auto& e : entries) if (e.lib) s += (s.empty() ? "" : ", ") + e.name;
      return s.empty() ? std::string("none found; set NXRT_PLUGIN_PATH") : s;
    };
    std::vector<std::unique_ptr<nxrt::EpInstance>> eps;
    for (auto& name : names) {
      const nxrt::PluginEntry* entry = nullptr;
      for (auto& e : entries) if (e.name == name) { entry = &e; if (e.lib) break; }
      if (!entry) nxrt::raise(NXRT_ERR_NOT_FOUND, "unknown EP '{}' (available: {})", name, available());
      for (auto& e : eps)
        if (e->lib->name() == name) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "EP '{}' is listed twice", name);
      if (!entry->lib) {
        if (fallback) continue;
        nxrt::raise(NXRT_ERR_PLUGIN, "EP '{}' is unavailable: {}", name, entry->error);
      }
      if (entry->lib->devices().empty() && fallback) continue;
      eps.push_back(nxrt::EpInstance::create(entry->lib, options->device, options->threads));
    }
    // Fallback order: the embedded default (cpu) first, then the rest as discovered.
    std::vector<std::shared_ptr<nxrt::PluginLibrary>> fallback_libs;
    if (fallback) {
      for (auto& e : entries) if (e.lib && e.name == "cpu") fallback_libs.push_back(e.lib);
      for (auto& e : entries) if (e.lib && e.name != "cpu") fallback_libs.push_back(e.lib);
    }
    if (eps.empty() && fallback_libs.empty()) nxrt::raise(NXRT_ERR_NOT_FOUND, "none of the requested EPs is available");
    auto s = std::make_unique<nxrt_session>();
    s->impl = std::make_unique<nxrt::Session>(std::move(ir), std::move(eps), fallback, fallback_libs, options->threads,
                                              options->device, owns);
    *out = s.release();
  });
}

}  // namespace

nxrt_error* nxrt_session_create(nxrt_env* env, const nxrt_model* model, const nxrt_session_options* options, nxrt_session** out) {
  return create_session(env, model ? model->ir : nullptr, false, options, out);
}

nxrt_error* nxrt_session_create_take_model(nxrt_env* env, nxrt_model* model, const nxrt_session_options* options,
                                           nxrt_session** out) {
  std::shared_ptr<const nxrt_model_ir> ir;
  if (model) ir = std::move(model->ir);
  delete model;
  const bool owns = ir && ir.use_count() == 1;  // no earlier session from this model shares it
  return create_session(env, std::move(ir), owns, options, out);
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
  const char* ep = a.ep >= 0 ? s->impl->eps()[size_t(a.ep)]->lib->name().c_str() : "";
  return nxrt_node_assignment{n->name.c_str(), n->op_type.c_str(), ep, a.fell_back ? 1 : 0, a.reasons.c_str()};
}

size_t nxrt_session_copy_count(const nxrt_session* s) { return s ? s->impl->copy_count() : 0; }

nxrt_error* nxrt_session_run(nxrt_session* s, const nxrt_host_tensor* inputs, size_t input_count, nxrt_outputs** outputs) {
  return wrap([&] {
    if (!s || !outputs) nxrt::raise(NXRT_ERR_INVALID_ARGUMENT, "session or outputs is NULL");
    auto o = std::make_unique<nxrt_outputs>();
    s->impl->run(inputs, input_count, o->tensors);
    *outputs = o.release();
  });
}

size_t nxrt_outputs_count(const nxrt_outputs* o) { return o ? o->tensors.size() : 0; }

nxrt_host_tensor nxrt_outputs_get(const nxrt_outputs* o, size_t i) {
  const auto& t = o->tensors.at(i);
  return nxrt_host_tensor{t.name.c_str(), int32_t(t.dtype), uint32_t(t.dims.size()), t.dims.data(), t.data.data()};
}

void nxrt_outputs_release(nxrt_outputs* o) { delete o; }

}  // extern "C"
