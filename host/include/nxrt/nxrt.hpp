// Thin C++ wrapper over nxrt.h: RAII handles and exceptions.
#pragma once
#include <nxrt/nxrt.h>

#include <memory>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

namespace nxrt {

class Error : public std::runtime_error {
 public:
  Error(nxrt_error_code code, const std::string& m) : std::runtime_error(m), code_(code) {}
  nxrt_error_code code() const { return code_; }

 private:
  nxrt_error_code code_;
};

inline void check(nxrt_error* e) {
  if (!e) return;
  Error err(nxrt_error_code_of(e), nxrt_error_message(e));
  nxrt_error_release(e);
  throw err;
}

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
  const nxrt_model* get() const { return model_.get(); }
  nxrt_model* release() { return model_.release(); }

 private:
  struct Del { void operator()(nxrt_model* m) const { nxrt_model_release(m); } };
  std::unique_ptr<nxrt_model, Del> model_;
};

class Outputs {
 public:
  explicit Outputs(nxrt_outputs* o) : o_(o) {}
  size_t size() const { return nxrt_outputs_count(o_.get()); }
  nxrt_host_tensor operator[](size_t i) const { return nxrt_outputs_get(o_.get(), i); }

 private:
  struct Del { void operator()(nxrt_outputs* o) const { nxrt_outputs_release(o); } };
  std::unique_ptr<nxrt_outputs, Del> o_;
};

class Session {
 public:
  Session(Env& env, const Model& model, const std::string& eps, bool fallback = false, int threads = 0, uint32_t device = 0) {
    nxrt_session_options o{eps.c_str(), fallback ? 1 : 0, threads, device};
    nxrt_session* s = nullptr;
    check(nxrt_session_create(env.get(), model.get(), &o, &s));
    s_.reset(s);
  }
  // Takes the model (nxrt_session_create_take_model): weights are held about once.
  Session(Env& env, Model&& model, const std::string& eps, bool fallback = false, int threads = 0, uint32_t device = 0) {
    nxrt_session_options o{eps.c_str(), fallback ? 1 : 0, threads, device};
    nxrt_session* s = nullptr;
    check(nxrt_session_create_take_model(env.get(), model.release(), &o, &s));
    s_.reset(s);
  }
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

 private:
  struct Del { void operator()(nxrt_session* s) const { nxrt_session_release(s); } };
  std::unique_ptr<nxrt_session, Del> s_;
};

}  // namespace nxrt
