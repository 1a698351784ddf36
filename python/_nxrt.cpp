// nxrt._nxrt: the Python binding, on the C++ wrapper nxrt.hpp (the host's public API) only.
// The Python-facing, ONNX Runtime-shaped API (InferenceSession, get_available_providers...) is
// in nxrt/__init__.py over these classes.
//
// Ownership: each Python Session holds its nxrt::Env (shared) and session; output arrays keep
// the nxrt::Outputs they view alive (zero-copy), inputs are read in place from the caller's
// C-contiguous arrays of the model's element type (others are converted once, by numpy).
// Thread class: run() releases the GIL; a session may run from several Python threads at once
// (the host's sessions are thread-safe for run).
#include <nxrt/nxrt.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <dlfcn.h>

#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

// ONNX element type <-> numpy dtype; nullopt for types numpy lacks (bfloat16, float8, strings).
std::optional<py::dtype> numpy_dtype(int32_t t) {
  switch (t) {
    case 1: return py::dtype::of<float>();
    case 2: return py::dtype::of<uint8_t>();
    case 3: return py::dtype::of<int8_t>();
    case 4: return py::dtype::of<uint16_t>();
    case 5: return py::dtype::of<int16_t>();
    case 6: return py::dtype::of<int32_t>();
    case 7: return py::dtype::of<int64_t>();
    case 9: return py::dtype::of<bool>();
    case 10: return py::dtype("float16");
    case 11: return py::dtype::of<double>();
    case 12: return py::dtype::of<uint32_t>();
    case 13: return py::dtype::of<uint64_t>();
    default: return std::nullopt;
  }
}

std::string type_name(int32_t t) { return nxrt_element_type_name(t); }

py::object shape_of(const nxrt_io_info& i) {
  if (i.rank < 0) return py::none();
  py::list dims;
  for (int64_t d = 0; d < i.rank; ++d) dims.append(i.dims[d] >= 0 ? py::object(py::int_(i.dims[d])) : py::object(py::none()));
  return dims;
}

// The process's environment: plugins found once, shared by every session made after. Held by
// a never-destroyed holder and dropped from Python's atexit: at C++ exit-handler time the
// plugins' own libraries (libvulkan's loader state) may already be torn down.
std::shared_ptr<nxrt::Env>& env_holder() {
  static auto* env = new std::shared_ptr<nxrt::Env>();
  return *env;
}
std::shared_ptr<nxrt::Env> default_env() {
  auto& env = env_holder();
  if (!env) env = std::make_shared<nxrt::Env>();
  return env;
}

// What an output array keeps alive: the outputs it views and the plugins that made them.
struct OutputsOwner {
  std::shared_ptr<nxrt::Env> env;
  std::shared_ptr<nxrt::Outputs> outputs;
};

py::list plugins() {
  auto env = default_env();
  py::list out;
  auto list = env->plugins();
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& p = list[i];
    py::dict d;
    d["name"] = p.name;
    d["path"] = p.path;
    d["version"] = p.version;
    d["abi"] = std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor);
    d["loaded"] = bool(p.loaded);
    d["error"] = p.error;
    d["no_device_reason"] = p.no_device_reason;
    py::list devices;
    for (uint32_t k = 0; p.loaded && k < p.device_count; ++k) devices.append(env->device_description(i, k));
    d["devices"] = devices;
    out.append(d);
  }
  return out;
}

class PySession {
 public:
  PySession(const std::string& path, const std::string& eps, bool fallback, const std::map<std::string, std::string>& options,
            int threads)
      : env_(default_env()) {
    nxrt::SessionOptions o;
    o.eps = eps;
    o.fallback = fallback;
    o.threads = threads;
    for (auto& [k, v] : options) o.ep_options.emplace_back(k, v);
    // The host's cache folder: the graph and kernels of a warm start come from it.
    auto cache = options.find("cache_dir");
    nxrt::Model model(path, cache == options.end() ? std::string() : cache->second);
    session_ = std::make_unique<nxrt::Session>(*env_, model, o);
  }

  py::list io(bool inputs) const {
    py::list out;
    for (const auto& i : inputs ? session_->inputs() : session_->outputs())
      out.append(py::make_tuple(std::string(i.name), shape_of(i), type_name(i.dtype), i.dtype));
    return out;
  }
  std::string load_report() const { return session_->load_report(); }
  py::list providers() const {
    py::list out;
    for (size_t i = 0; i < nxrt_session_ep_count(session_->get()); ++i) out.append(std::string(nxrt_session_ep_name(session_->get(), i)));
    return out;
  }
  py::list placement() const {
    py::list out;
    for (const auto& n : session_->nodes())
      out.append(py::make_tuple(std::string(n.node_name), std::string(n.op_type), std::string(n.ep), bool(n.fell_back), std::string(n.reason)));
    return out;
  }

  py::list kernels() const {
    py::list out;
    auto nodes = session_->nodes();
    for (size_t i = 0; i < nodes.size(); ++i) out.append(py::make_tuple(std::string(nodes[i].node_name), session_->node_kernel(i)));
    return out;
  }

  // feeds: name -> array. Returns every graph output, by name, as arrays viewing nxrt's memory.
  py::dict run(const py::dict& feeds, const std::map<std::string, std::string>& run_options) {
    std::map<std::string, int32_t> want;
    for (const auto& i : session_->inputs()) want[i.name] = i.dtype;
    std::vector<py::array> keep;  // the (maybe converted) arrays, alive through the run
    std::vector<std::string> names;
    std::vector<std::vector<int64_t>> dims;
    // String inputs: the text as UTF-8 and its nxrt_string elements, alive through the run.
    std::list<std::vector<std::string>> texts;
    std::list<std::vector<nxrt_string>> elements;
    std::vector<const void*> data;
    for (auto [k, v] : feeds) {
      auto name = py::cast<std::string>(k);
      auto it = want.find(name);
      if (it == want.end()) throw nxrt::Error(NXRT_ERR_INVALID_ARGUMENT, "the model has no input '" + name + "'");
      if (it->second == 8) {  // string: any array-like of str (or bytes, taken as UTF-8)
        py::array a = py::module_::import("numpy").attr("asarray")(v, "object");
        auto& t = texts.emplace_back();
        py::object flat = a.attr("ravel")();
        for (auto item : flat) t.push_back(py::isinstance<py::bytes>(item) ? py::cast<std::string>(item) : py::cast<std::string>(py::str(item)));
        auto& e = elements.emplace_back();
        for (auto& x : t) e.push_back(nxrt_string{x.data(), x.size()});
        keep.push_back(a);
        names.push_back(name);
        dims.emplace_back(a.shape(), a.shape() + a.ndim());
        data.push_back(e.data());
        continue;
      }
      auto dt = numpy_dtype(it->second);
      if (!dt) throw nxrt::Error(NXRT_ERR_UNSUPPORTED, "input '" + name + "' is " + type_name(it->second) + ", which numpy cannot hold");
      // Zero-copy: numpy returns the array itself when it already is C-contiguous of the type.
      keep.push_back(py::module_::import("numpy").attr("ascontiguousarray")(v, *dt));
      names.push_back(name);
      dims.emplace_back(keep.back().shape(), keep.back().shape() + keep.back().ndim());
      data.push_back(keep.back().data());
    }
    std::vector<nxrt_host_tensor> in;
    for (size_t i = 0; i < keep.size(); ++i)
      in.push_back({names[i].c_str(), want[names[i]], uint32_t(dims[i].size()), dims[i].data(), data[i]});
    std::shared_ptr<nxrt::Outputs> outs;
    {
      py::gil_scoped_release unlocked;
      const nxrt::KeyValues opts(run_options.begin(), run_options.end());
      outs = std::make_shared<nxrt::Outputs>(opts.empty() ? session_->run(in) : session_->run(in, opts));
    }
    py::dict result;
    auto owner = py::capsule(new OutputsOwner{env_, outs}, [](void* p) { delete static_cast<OutputsOwner*>(p); });
    for (size_t i = 0; i < outs->size(); ++i) {
      nxrt_host_tensor t = (*outs)[i];
      if (t.dtype == 8) {  // string: an object array of str, as ONNX Runtime returns (copied)
        py::tuple shape(t.rank);
        int64_t n = 1;
        for (uint32_t d = 0; d < t.rank; ++d) {
          shape[d] = py::int_(t.dims[d]);
          n *= t.dims[d];
        }
        py::list items;
        const auto* e = static_cast<const nxrt_string*>(t.data);
        for (int64_t k = 0; k < n; ++k) {
          PyObject* u = PyUnicode_DecodeUTF8(e[k].data ? e[k].data : "", py::ssize_t(e[k].size), "surrogateescape");
          if (!u) throw py::error_already_set();
          items.append(py::reinterpret_steal<py::object>(u));
        }
        auto np = py::module_::import("numpy");
        result[py::str(t.name)] = np.attr("array")(items, "object").attr("reshape")(shape);
        continue;
      }
      auto dt = numpy_dtype(t.dtype);
      if (!dt) throw nxrt::Error(NXRT_ERR_UNSUPPORTED, std::string("output '") + t.name + "' is " + type_name(t.dtype) + ", which numpy cannot hold");
      std::vector<py::ssize_t> shape(t.dims, t.dims + t.rank);
      py::array a(*dt, shape, t.data, owner);  // views nxrt's buffer; the capsule keeps it alive
      py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
      result[py::str(t.name)] = a;
    }
    return result;
  }

 private:
  std::shared_ptr<nxrt::Env> env_;
  std::unique_ptr<nxrt::Session> session_;
};

// The folder of libnxrt.so, so nxrt.conformance finds the nxrt-conformance installed beside it.
std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nxrt_version), &info) && info.dli_fname) return info.dli_fname;
  return "";
}

}  // namespace

PYBIND11_MODULE(_nxrt, m) {
  m.doc() = "nxrt: ONNX inference with plugin execution providers (low-level binding; use the nxrt package)";
  py::register_exception<nxrt::Error>(m, "Error", PyExc_RuntimeError);
  py::module_::import("atexit").attr("register")(py::cpp_function([] { env_holder().reset(); }));
  m.def("version", [] { return std::string(nxrt_version()); });
  m.def("plugins", &plugins, "Every plugin found or registered: name, path, version, abi, loaded, error, devices.");
  m.def("register_plugin", [](const std::string& path) { return default_env()->register_plugin(path); },
        "Loads a plugin library into the process's environment; returns its EP name.");
  m.def("library_path", &library_path);
  py::class_<PySession>(m, "Session")
      .def(py::init<const std::string&, const std::string&, bool, const std::map<std::string, std::string>&, int>(),
           py::arg("path"), py::arg("eps"), py::arg("fallback"), py::arg("options"), py::arg("threads") = 0)
      .def("inputs", [](const PySession& s) { return s.io(true); })
      .def("outputs", [](const PySession& s) { return s.io(false); })
      .def("providers", &PySession::providers)
      .def("placement", &PySession::placement)
      .def("kernels", &PySession::kernels)
      .def("run", &PySession::run, py::arg("feeds"), py::arg("run_options") = std::map<std::string, std::string>{})
      .def("load_report", [](const PySession& s) { return s.load_report(); });
}
