// Thin C++ wrapper over nxrt.h: RAII handles and exceptions.
#pragma once
#include <nxrt/nxrt.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace nxrt {

class Error : public std::runtime_error {
 public:
  Error(nxrt_error_code code, const std::string& m) : std::runtime_error(m), code_(code) {}
  nxrt_error_code code() const { return code_; }

 private:
  nxrt_error_code code_;
};

using KeyValues = std::vector<std::pair<std::string, std::string>>;

inline std::string version() { return nxrt_version(); }

inline void check(nxrt_error* e) {
  if (!e) return;
  Error err(nxrt_error_code_of(e), nxrt_error_message(e));
  nxrt_error_release(e);
  throw err;
}

inline std::string dtype_name(int32_t dtype) { return nxrt_element_type_name(dtype); }
inline size_t dtype_size(int32_t dtype) { return nxrt_element_type_size(dtype); }
inline std::string shape_str(const int64_t* dims, size_t rank) { return nxrt_shape_string(dims, rank); }
inline std::string shape_str(const std::vector<int64_t>& dims) { return shape_str(dims.data(), dims.size()); }

// 64-byte aligned bytes: kernels may use aligned vector loads on host tensors.
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U> AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U> bool operator==(const AlignedAllocator<U>&) const { return true; }
};

// A dense host tensor that owns its data.
struct Tensor {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> dims;
  std::vector<uint8_t, AlignedAllocator<uint8_t>> data;  // STRING (8): nxrt_string elements
  // STRING: the text the elements point at, shared by copies of this Tensor.
  std::shared_ptr<const std::vector<std::string>> strings;

  int64_t numel() const {
    int64_t n = 1;
    for (auto d : dims) n *= d;
    return n;
  }
  nxrt_host_tensor view() const { return {name.c_str(), dtype, uint32_t(dims.size()), dims.data(), data.data()}; }
  // Element i of a STRING tensor.
  std::string_view string(size_t i) const {
    const nxrt_string& e = reinterpret_cast<const nxrt_string*>(data.data())[i];
    return e.size ? std::string_view(e.data, size_t(e.size)) : std::string_view();
  }
  // A STRING tensor holding `values` (row-major).
  static Tensor of_strings(std::string name, std::vector<int64_t> dims, std::vector<std::string> values) {
    Tensor out;
    out.name = std::move(name);
    out.dtype = 8;
    out.dims = std::move(dims);
    auto store = std::make_shared<const std::vector<std::string>>(std::move(values));
    out.data.resize(store->size() * sizeof(nxrt_string));
    auto* e = reinterpret_cast<nxrt_string*>(out.data.data());
    for (size_t i = 0; i < store->size(); ++i) e[i] = nxrt_string{(*store)[i].data(), (*store)[i].size()};
    out.strings = std::move(store);
    return out;
  }
  // A copy owning its data (and, for STRING, its text).
  static Tensor copy_of(const nxrt_host_tensor& t) {
    Tensor out;
    out.name = t.name ? t.name : "";
    out.dtype = t.dtype;
    out.dims.assign(t.dims, t.dims + t.rank);
    if (t.dtype == 8) {
      std::vector<std::string> values(size_t(out.numel()));
      const auto* e = static_cast<const nxrt_string*>(t.data);
      for (size_t i = 0; i < values.size(); ++i) values[i].assign(e[i].data ? e[i].data : "", size_t(e[i].size));
      return of_strings(out.name, out.dims, std::move(values));
    }
    const size_t bytes = size_t(out.numel()) * dtype_size(t.dtype);
    out.data.resize(bytes);
    if (bytes) std::memcpy(out.data.data(), t.data, bytes);
    return out;
  }
};

// Tensor files: one ONNX TensorProto (.pb).
inline Tensor read_tensor_file(const std::string& path);
inline void write_tensor_file(const std::string& path, const nxrt_host_tensor& t) { check(nxrt_tensor_file_write(path.c_str(), &t)); }

class Env {
 public:
  // discover = true: plugins next to the program and in NXRT_PLUGIN_PATH.
  explicit Env(bool discover = true) {
    nxrt_env* e = nullptr;
    check(discover ? nxrt_env_create(&e) : nxrt_env_create_empty(&e));
    env_.reset(e);
  }
  std::string register_plugin(const std::string& path) {
    const char* name = nullptr;
    check(nxrt_env_register_plugin(env_.get(), path.c_str(), &name));
    return name;
  }
  void unregister_plugin(const std::string& name) { check(nxrt_env_unregister_plugin(env_.get(), name.c_str())); }
  std::vector<nxrt_plugin_info> plugins() const {
    std::vector<nxrt_plugin_info> out(nxrt_env_plugin_count(env_.get()));
    for (size_t i = 0; i < out.size(); ++i) check(nxrt_env_plugin_info(env_.get(), i, &out[i]));
    return out;
  }
  std::string device_description(size_t plugin, uint32_t device) const {
    const char* text = nullptr;
    check(nxrt_env_device_description(env_.get(), plugin, device, &text));
    return text;
  }
  // A device's description as key/value text (nxrt_env_device_property): what
  // `nxrt plugins --json` prints and what compile() takes as a target.
  KeyValues device_properties(size_t plugin, uint32_t device) const {
    KeyValues out;
    for (size_t i = 0; i < nxrt_env_device_property_count(env_.get(), plugin, device); ++i) {
      nxrt_key_value kv{};
      check(nxrt_env_device_property(env_.get(), plugin, device, i, &kv));
      out.emplace_back(kv.key, kv.value);
    }
    return out;
  }
  // A plugin's option schema (name, type, default, help).
  std::vector<nxrt_option_schema_entry> plugin_options(size_t plugin) const {
    std::vector<nxrt_option_schema_entry> out(nxrt_env_plugin_option_count(env_.get(), plugin));
    for (size_t i = 0; i < out.size(); ++i) check(nxrt_env_plugin_option(env_.get(), plugin, i, &out[i]));
    return out;
  }
  nxrt_env* get() const { return env_.get(); }

 private:
  struct Del { void operator()(nxrt_env* e) const { nxrt_env_release(e); } };
  std::unique_ptr<nxrt_env, Del> env_;
};

class Model {
 public:
  explicit Model(const std::string& path) {
    nxrt_model* m = nullptr;
    check(nxrt_model_load(path.c_str(), &m));
    model_.reset(m);
  }
  // With a compiled-model cache folder (nxrt_model_load_cached).
  Model(const std::string& path, const std::string& cache_dir) {
    nxrt_model* m = nullptr;
    check(cache_dir.empty() ? nxrt_model_load(path.c_str(), &m) : nxrt_model_load_cached(path.c_str(), cache_dir.c_str(), &m));
    model_.reset(m);
  }
  const nxrt_model* get() const { return model_.get(); }
  nxrt_model* release() { return model_.release(); }
  // In place, at an nxrt_opt_level (NXRT_OPT_LEVEL_0 + N for level N).
  void optimize(Env& env, int level) { check(nxrt_model_optimize(env.get(), model_.get(), level)); }
  void save(const std::string& path) const { check(nxrt_model_save(model_.get(), path.c_str())); }
  std::string optimization_log() const { return nxrt_model_optimization_log(model_.get()); }

 private:
  struct Del { void operator()(nxrt_model* m) const { nxrt_model_release(m); } };
  std::unique_ptr<nxrt_model, Del> model_;
};

class Outputs {
 public:
  explicit Outputs(nxrt_outputs* o) : o_(o) {}
  size_t size() const { return nxrt_outputs_count(o_.get()); }
  nxrt_host_tensor operator[](size_t i) const { return nxrt_outputs_get(o_.get(), i); }
  // Output i of any kind (a sequence or optional too); valid while this object lives.
  nxrt_host_value value(size_t i) const { return nxrt_outputs_get_value(o_.get(), i); }
  uint64_t run_id() const { return nxrt_outputs_run_id(o_.get()); }

 private:
  struct Del { void operator()(nxrt_outputs* o) const { nxrt_outputs_release(o); } };
  std::unique_ptr<nxrt_outputs, Del> o_;
};

// nxrt_session_options with owned strings.
struct SessionOptions {
  std::string eps = "cpu";
  bool fallback = false;
  int threads = 0;
  uint32_t device = 0;
  KeyValues ep_options;  // "<ep>.<key>" = value, checked against the plugins' schemas
  uint64_t device_memory_limit = 0;                         // bytes; 0: no cap
  const nxrt_device_allocator* device_allocator = nullptr;  // must outlive the session
  int optimization_level = NXRT_OPT_DEFAULT;                // nxrt_opt_level
};

class Session;

// A tensor in one EP session's memory (nxrt_device_tensor).
class DeviceTensor {
 public:
  DeviceTensor() = default;
  explicit DeviceTensor(nxrt_device_tensor* t) : t_(t) {}
  DeviceTensor(Session& s, const std::string& ep, int32_t dtype, const std::vector<int64_t>& dims);
  // The caller's own memory, imported without a copy (nxrt_device_tensor_import).
  static DeviceTensor import(Session& s, const std::string& ep, const nxrt_native_handle& native, int32_t dtype,
                             const std::vector<int64_t>& dims);
  nxrt_device_tensor_info info() const { return nxrt_device_tensor_get_info(t_.get()); }
  std::vector<int64_t> dims() const {
    auto i = info();
    return std::vector<int64_t>(i.dims, i.dims + i.rank);
  }
  void upload(const void* data, size_t bytes) { check(nxrt_device_tensor_upload(t_.get(), data, bytes)); }
  void download(void* data, size_t bytes) const { check(nxrt_device_tensor_download(t_.get(), data, bytes)); }
  // From another device tensor of the same type and shape (nxrt_device_tensor_copy).
  void copy_from(const DeviceTensor& src) { check(nxrt_device_tensor_copy(t_.get(), src.get())); }
  template <typename T>
  std::vector<T> download() const {
    std::vector<T> v(info().bytes / sizeof(T));
    download(v.data(), v.size() * sizeof(T));
    return v;
  }
  nxrt_native_handle native() const {
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    check(nxrt_device_tensor_native(t_.get(), &h));
    return h;
  }
  nxrt_device_tensor* get() const { return t_.get(); }
  explicit operator bool() const { return bool(t_); }

 private:
  struct Del { void operator()(nxrt_device_tensor* t) const { nxrt_device_tensor_release(t); } };
  std::unique_ptr<nxrt_device_tensor, Del> t_;
};

// A stream of one EP session (nxrt_device_stream), created or imported from a native one.
class DeviceStream {
 public:
  explicit DeviceStream(nxrt_device_stream* s) : s_(s) {}
  nxrt_native_handle native() const {
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    check(nxrt_device_stream_native(s_.get(), &h));
    return h;
  }
  void synchronize() { check(nxrt_device_stream_synchronize(s_.get())); }
  nxrt_device_stream* get() const { return s_.get(); }

 private:
  struct Del { void operator()(nxrt_device_stream* s) const { nxrt_device_stream_release(s); } };
  std::unique_ptr<nxrt_device_stream, Del> s_;
};

// Where a run's inputs come from and its outputs go (nxrt_binding).
class Binding {
 public:
  explicit Binding(Session& s);
  // Host inputs are read at run time: keep `t` (and its data) alive.
  void bind_input(const nxrt_host_tensor& t) { check(nxrt_binding_bind_host_input(b_.get(), &t)); }
  void bind_input(const std::string& name, const DeviceTensor& t) { check(nxrt_binding_bind_input(b_.get(), name.c_str(), t.get())); }
  void bind_output(const std::string& name, DeviceTensor& t) { check(nxrt_binding_bind_output(b_.get(), name.c_str(), t.get())); }
  void bind_output_to_device(const std::string& name, const std::string& ep) {
    check(nxrt_binding_bind_output_to_device(b_.get(), name.c_str(), ep.c_str()));
  }
  void bind_output_to_host(const std::string& name) { check(nxrt_binding_bind_output_to_host(b_.get(), name.c_str())); }
  DeviceTensor output(const std::string& name) const {
    nxrt_device_tensor* t = nullptr;
    check(nxrt_binding_output(b_.get(), name.c_str(), &t));
    return DeviceTensor(t);
  }
  nxrt_binding* get() const { return b_.get(); }

 private:
  struct Del { void operator()(nxrt_binding* b) const { nxrt_binding_release(b); } };
  std::unique_ptr<nxrt_binding, Del> b_;
};

class Session {
 public:
  Session(Env& env, const Model& model, const SessionOptions& options) { create(env, model.get(), nullptr, options); }
  // Takes the model (nxrt_session_create_take_model): weights are held about once.
  Session(Env& env, Model&& model, const SessionOptions& options) { create(env, nullptr, model.release(), options); }
  Session(Env& env, const Model& model, const std::string& eps, bool fallback = false, int threads = 0, uint32_t device = 0)
      : Session(env, model, SessionOptions{eps, fallback, threads, device, {}}) {}
  Session(Env& env, Model&& model, const std::string& eps, bool fallback = false, int threads = 0, uint32_t device = 0)
      : Session(env, std::move(model), SessionOptions{eps, fallback, threads, device, {}}) {}
  std::vector<nxrt_io_info> inputs() const {
    std::vector<nxrt_io_info> v;
    for (size_t i = 0; i < nxrt_session_input_count(s_.get()); ++i) v.push_back(nxrt_session_input(s_.get(), i));
    return v;
  }
  std::vector<nxrt_io_info> outputs() const {
    std::vector<nxrt_io_info> v;
    for (size_t i = 0; i < nxrt_session_output_count(s_.get()); ++i) v.push_back(nxrt_session_output(s_.get(), i));
    return v;
  }
  std::vector<nxrt_node_assignment> nodes() const {
    std::vector<nxrt_node_assignment> v;
    for (size_t i = 0; i < nxrt_session_node_count(s_.get()); ++i) v.push_back(nxrt_session_node(s_.get(), i));
    return v;
  }
  size_t copies() const { return nxrt_session_copy_count(s_.get()); }
  // Where the bodies of node i run ("" unless the host runs it with bodies).
  std::string node_bodies(size_t i) const { return nxrt_session_node_bodies(s_.get(), i); }
  // How the kernel of node i computes, as its plugin says ("" when it says nothing).
  std::string node_kernel(size_t i) const { return nxrt_session_node_kernel(s_.get(), i); }
  nxrt_value_kind input_kind(size_t i) const { return nxrt_value_kind(nxrt_session_input_kind(s_.get(), i)); }
  nxrt_value_kind output_kind(size_t i) const { return nxrt_value_kind(nxrt_session_output_kind(s_.get(), i)); }
  // A run whose inputs may be sequences or optionals; read outputs with Outputs::value.
  Outputs run_values(const std::vector<nxrt_host_value>& inputs) {
    nxrt_outputs* o = nullptr;
    check(nxrt_session_run_values(s_.get(), inputs.data(), inputs.size(), &o));
    return Outputs(o);
  }
  std::string optimization_log() const { return nxrt_session_optimization_log(s_.get()); }
  // nxrt_session_load_report (JSON) and nxrt_session_cache_text (lines).
  std::string load_report() const { return nxrt_session_load_report(s_.get()); }
  std::string cache_text() const { return nxrt_session_cache_text(s_.get()); }
  void start_profiling() { check(nxrt_session_start_profiling(s_.get())); }
  size_t end_profiling(const std::string& trace_path) {
    size_t n = 0;
    check(nxrt_session_end_profiling(s_.get(), trace_path.c_str(), &n));
    return n;
  }
  Outputs run(const std::vector<nxrt_host_tensor>& inputs) {
    nxrt_outputs* o = nullptr;
    check(nxrt_session_run(s_.get(), inputs.data(), inputs.size(), &o));
    return Outputs(o);
  }
  // run_options: "<ep>.<key>" = value, forwarded to that EP's run hooks.
  Outputs run(const std::vector<nxrt_host_tensor>& inputs, const KeyValues& run_options) {
    std::vector<nxrt_key_value> kv;
    for (auto& [k, v] : run_options) kv.push_back(nxrt_key_value{k.c_str(), v.c_str()});
    nxrt_session_run_options ro{kv.data(), kv.size()};
    nxrt_outputs* o = nullptr;
    check(nxrt_session_run_with_options(s_.get(), inputs.data(), inputs.size(), &ro, &o));
    return Outputs(o);
  }
  // A run with I/O binding, on `stream` when given (see nxrt_session_run_binding).
  Outputs run(Binding& binding, DeviceStream* stream = nullptr, const KeyValues& run_options = {}) {
    std::vector<nxrt_key_value> kv;
    for (auto& [k, v] : run_options) kv.push_back(nxrt_key_value{k.c_str(), v.c_str()});
    nxrt_session_run_options ro{kv.data(), kv.size()};
    nxrt_outputs* o = nullptr;
    check(nxrt_session_run_binding(s_.get(), binding.get(), &ro, stream ? stream->get() : nullptr, &o));
    return Outputs(o);
  }
  std::vector<nxrt_memory_usage> memory_usage() const {
    std::vector<nxrt_memory_usage> v(nxrt_session_ep_count(s_.get()));
    for (size_t e = 0; e < v.size(); ++e) check(nxrt_session_memory_usage(s_.get(), e, &v[e]));
    return v;
  }
  nxrt_memory_usage memory_usage(const std::string& ep) const {
    for (auto& u : memory_usage())
      if (ep == u.ep) return u;
    throw Error(NXRT_ERR_NOT_FOUND, "the session has no EP '" + ep + "'");
  }
  nxrt_native_handle native_handle(const std::string& ep, nxrt_native_object what) const {
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    check(nxrt_session_native_handle(s_.get(), ep.c_str(), what, &h));
    return h;
  }
  DeviceStream create_stream(const std::string& ep) {
    nxrt_device_stream* st = nullptr;
    check(nxrt_session_stream_create(s_.get(), ep.c_str(), &st));
    return DeviceStream(st);
  }
  DeviceStream import_stream(const std::string& ep, const nxrt_native_handle& native) {
    nxrt_device_stream* st = nullptr;
    check(nxrt_session_stream_import(s_.get(), ep.c_str(), &native, &st));
    return DeviceStream(st);
  }
  nxrt_session* get() const { return s_.get(); }

 private:
  friend void compile(Env& env, const Model& model, const SessionOptions& options, const KeyValues& target,
                      const std::string& path);
  void create(Env& env, const nxrt_model* model, nxrt_model* taken, const SessionOptions& options) {
    std::vector<nxrt_key_value> kv;
    for (auto& [k, v] : options.ep_options) kv.push_back(nxrt_key_value{k.c_str(), v.c_str()});
    nxrt_session_options o{options.eps.c_str(), options.fallback ? 1 : 0, options.threads, options.device, kv.data(), kv.size(),
                           options.device_memory_limit, options.device_allocator, options.optimization_level};
    nxrt_session* s = nullptr;
    check(taken ? nxrt_session_create_take_model(env.get(), taken, &o, &s) : nxrt_session_create(env.get(), model, &o, &s));
    s_.reset(s);
  }

  struct Del { void operator()(nxrt_session* s) const { nxrt_session_release(s); } };
  std::unique_ptr<nxrt_session, Del> s_;
};

// nxrt_model_compile: the model compiled for these options (and, with `target`, for a
// described device) written to `path`.
inline void compile(Env& env, const Model& model, const SessionOptions& options, const KeyValues& target,
                    const std::string& path) {
  std::vector<nxrt_key_value> kv, t;
  for (auto& [k, v] : options.ep_options) kv.push_back(nxrt_key_value{k.c_str(), v.c_str()});
  for (auto& [k, v] : target) t.push_back(nxrt_key_value{k.c_str(), v.c_str()});
  nxrt_session_options o{options.eps.c_str(), options.fallback ? 1 : 0, options.threads, options.device, kv.data(), kv.size(),
                         options.device_memory_limit, options.device_allocator, options.optimization_level};
  check(nxrt_model_compile(env.get(), model.get(), &o, t.data(), t.size(), path.c_str()));
}

inline std::string describe_compiled_model(const std::string& path) { return nxrt_compiled_model_describe(path.c_str()); }

inline DeviceTensor::DeviceTensor(Session& s, const std::string& ep, int32_t dtype, const std::vector<int64_t>& dims) {
  nxrt_device_tensor* t = nullptr;
  check(nxrt_device_tensor_alloc(s.get(), ep.c_str(), dtype, dims.data(), dims.size(), &t));
  t_.reset(t);
}

inline DeviceTensor DeviceTensor::import(Session& s, const std::string& ep, const nxrt_native_handle& native, int32_t dtype,
                                        const std::vector<int64_t>& dims) {
  nxrt_device_tensor* t = nullptr;
  check(nxrt_device_tensor_import(s.get(), ep.c_str(), &native, dtype, dims.data(), dims.size(), &t));
  return DeviceTensor(t);
}

inline Binding::Binding(Session& s) {
  nxrt_binding* b = nullptr;
  check(nxrt_binding_create(s.get(), &b));
  b_.reset(b);
}

// Value files (.pb): a TensorProto, SequenceProto or OptionalProto read as `kind`;
// the value is Outputs::value(0).
inline Outputs read_value_file(const std::string& path, nxrt_value_kind kind) {
  nxrt_outputs* o = nullptr;
  check(nxrt_value_file_read(path.c_str(), int32_t(kind), &o));
  return Outputs(o);
}
inline void write_value_file(const std::string& path, const nxrt_host_value& v) { check(nxrt_value_file_write(path.c_str(), &v)); }

inline Tensor read_tensor_file(const std::string& path) {
  nxrt_outputs* o = nullptr;
  check(nxrt_tensor_file_read(path.c_str(), &o));
  Outputs holder(o);
  return Tensor::copy_of(holder[0]);
}

}  // namespace nxrt
