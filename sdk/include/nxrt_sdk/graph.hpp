// Typed, read-only access to the host's graph view. Valid only during the ABI
// call that received the graph (get_capability, kernel_create).
//
// Ownership: Graph, Node, Value and Attribute are non-owning views of host memory; copy what you
// need (constant() data included) before the call returns. Thread class: the call's thread only.
#pragma once
#include "dtype.hpp"
#include "status.hpp"
#include "tensor.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nxrt::sdk {

class Value {
 public:
  // g: the graph view the value was reached through (needed by capture()).
  explicit Value(const nxrt_value* v = nullptr, const nxrt_graph* g = nullptr) : v_(v), g_(g) {}
  bool present() const { return v_ != nullptr; }
  const nxrt_value* raw() const { return v_; }
  std::string_view name() const { return host().value_name(v_); }
  nxrt_dtype dtype() const { return host().value_dtype(v_); }
  int64_t rank() const { return host().value_rank(v_); }  // -1: unknown
  std::span<const int64_t> dims() const {
    auto r = rank();
    return r <= 0 ? std::span<const int64_t>{} : std::span<const int64_t>(host().value_dims(v_), size_t(r));
  }
  // True when the rank and every dimension are known before run time.
  bool static_shape() const {
    if (rank() < 0) return false;
    for (auto d : dims()) if (d < 0) return false;
    return true;
  }
  bool is_constant() const { return v_ && host().value_is_constant(v_) != 0; }
  // Host data of an initializer or Constant output.
  ConstTensorView constant() const {
    nxrt_const_tensor t{};
    t.struct_size = sizeof t;
    if (!v_) fail(NXRT_INVALID_ARGUMENT, "constant(): absent value");
    check(host().value_constant(v_, &t));
    return ConstTensorView(t);
  }
  // The node of the view that makes this value (nullopt: an input, a constant,
  // or a value made outside the view), and the nodes of the view that read it.
  std::optional<class Node> producer() const;
  std::vector<class Node> consumers() const;
  // True when the whole graph returns this value (something outside any view reads it).
  bool is_graph_output() const { return v_ && host().value_is_graph_output(v_) != 0; }
  // kernel_create only: the kernel has copied (prepacked) this constant input and
  // will not read it again; at run time ctx.input() then has its shape and a null
  // data pointer, and the host may free its copy after kernel_create returns.
  bool capture() const {
    if (!g_) fail(NXRT_INVALID_ARGUMENT, "capture(): value '{}' was not reached through the kernel's graph", name());
    check(host().graph_capture_constant(g_, v_));
    return true;
  }

 private:
  const nxrt_value* v_;
  const nxrt_graph* g_;
};

class Attribute {
 public:
  explicit Attribute(const nxrt_attribute* a) : a_(a) {}
  std::string_view name() const { return host().attribute_name(a_); }
  nxrt_attribute_type type() const { return host().attribute_type(a_); }
  int64_t i() const { return host().attribute_int(a_); }
  float f() const { return host().attribute_float(a_); }
  std::string s() const {
    size_t n = 0;
    const char* p = host().attribute_string(a_, &n);
    return p ? std::string(p, n) : std::string();
  }
  std::vector<int64_t> ints() const {
    size_t n = 0;
    const int64_t* p = host().attribute_ints(a_, &n);
    return p ? std::vector<int64_t>(p, p + n) : std::vector<int64_t>{};
  }
  std::vector<float> floats() const {
    size_t n = 0;
    const float* p = host().attribute_floats(a_, &n);
    return p ? std::vector<float>(p, p + n) : std::vector<float>{};
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> out(host().attribute_string_count(a_));
    for (size_t i = 0; i < out.size(); ++i) {
      size_t n = 0;
      const char* p = host().attribute_string_at(a_, i, &n);
      if (p) out[i].assign(p, n);
    }
    return out;
  }
  ConstTensorView tensor() const {
    nxrt_const_tensor t{};
    t.struct_size = sizeof t;
    check(host().attribute_tensor(a_, &t));
    return ConstTensorView(t);
  }
  // A GRAPH attribute (If branch, Loop/Scan body) as a graph view.
  class Graph graph() const;

 private:
  const nxrt_attribute* a_;
};

class Node {
 public:
  explicit Node(const nxrt_node* n, const nxrt_graph* g = nullptr) : n_(n), g_(g) {}
  const nxrt_node* raw() const { return n_; }
  size_t index() const { return host().node_index(n_); }
  std::string_view name() const { return host().node_name(n_); }
  std::string_view op_type() const { return host().node_op_type(n_); }
  std::string_view domain() const { return host().node_domain(n_); }
  size_t input_count() const { return host().node_input_count(n_); }
  Value input(size_t i) const { return Value(i < input_count() ? host().node_input(n_, i) : nullptr, g_); }
  bool has_input(size_t i) const { return input(i).present(); }
  size_t output_count() const { return host().node_output_count(n_); }
  Value output(size_t i) const { return Value(i < output_count() ? host().node_output(n_, i) : nullptr, g_); }
  bool has_output(size_t i) const { return output(i).present(); }

  std::optional<Attribute> attr(const char* name) const {
    const nxrt_attribute* a = host().node_attribute(n_, name);
    return a ? std::optional<Attribute>(Attribute(a)) : std::nullopt;
  }
  size_t attribute_count() const { return host().node_attribute_count(n_); }
  Attribute attribute_at(size_t i) const { return Attribute(host().node_attribute_at(n_, i)); }
  bool has_attr(const char* name) const { return host().node_attribute(n_, name) != nullptr; }
  int64_t attr_int(const char* name, int64_t fallback) const {
    auto a = attr(name);
    return a ? a->i() : fallback;
  }
  float attr_float(const char* name, float fallback) const {
    auto a = attr(name);
    return a ? a->f() : fallback;
  }
  std::string attr_string(const char* name, std::string fallback) const {
    auto a = attr(name);
    return a ? a->s() : fallback;
  }
  std::vector<int64_t> attr_ints(const char* name, std::vector<int64_t> fallback = {}) const {
    auto a = attr(name);
    return a ? a->ints() : fallback;
  }
  std::vector<float> attr_floats(const char* name, std::vector<float> fallback = {}) const {
    auto a = attr(name);
    return a ? a->floats() : fallback;
  }
  std::vector<std::string> attr_strings(const char* name, std::vector<std::string> fallback = {}) const {
    auto a = attr(name);
    return a ? a->strings() : fallback;
  }

 private:
  const nxrt_node* n_;
  const nxrt_graph* g_;
};

class Graph {
 public:
  explicit Graph(const nxrt_graph* g) : g_(g) {}
  const nxrt_graph* raw() const { return g_; }
  size_t node_count() const { return host().graph_node_count(g_); }
  Node node(size_t i) const { return Node(host().graph_node(g_, i), g_); }
  size_t input_count() const { return host().graph_input_count(g_); }
  Value input(size_t i) const { return Value(host().graph_input(g_, i), g_); }
  size_t output_count() const { return host().graph_output_count(g_); }
  Value output(size_t i) const { return Value(host().graph_output(g_, i), g_); }
  int64_t opset(const char* domain = "") const { return host().graph_opset(g_, domain); }

 private:
  const nxrt_graph* g_;
};

inline std::optional<Node> Value::producer() const {
  const nxrt_node* n = v_ && g_ ? host().value_producer(g_, v_) : nullptr;
  return n ? std::optional<Node>(Node(n, g_)) : std::nullopt;
}
inline std::vector<Node> Value::consumers() const {
  std::vector<Node> out;
  if (!v_ || !g_) return out;
  const size_t n = host().value_consumer_count(g_, v_);
  for (size_t i = 0; i < n; ++i) out.emplace_back(host().value_consumer(g_, v_, i), g_);
  return out;
}
inline Graph Attribute::graph() const {
  const nxrt_graph* g = nullptr;
  check(host().attribute_graph(a_, &g));
  return Graph(g);
}

}  // namespace nxrt::sdk
