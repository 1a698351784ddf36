// If, Loop and Scan as host steps; see control_flow.hpp for the design.
#include "control_flow.hpp"

#include "error.hpp"
#include "io_binding.hpp"
#include "sequence_ops.hpp"
#include "session.hpp"
#include "string_tensor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <unordered_map>

namespace nxrt {

bool is_host_op(const nxrt_node& n) {
  if (!n.domain.empty()) return false;
  return n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan" || n.op_type == "SequenceMap" || is_sequence_op(n);
}

namespace {

void collect_free(const GraphBody& b, std::vector<std::string>& out, std::set<std::string>& seen) {
  std::set<std::string> local;
  for (auto& v : b.values)
    if (std::find(b.outer.begin(), b.outer.end(), v.get()) == b.outer.end()) local.insert(v->name);
  auto add = [&](const std::string& name) {
    if (!local.count(name) && seen.insert(name).second) out.push_back(name);
  };
  for (auto* v : b.outer) add(v->name);
  for (auto& n : b.nodes)
    for (auto& a : n->attributes)
      if (a.graph) {
        std::vector<std::string> inner;
        std::set<std::string> inner_seen;
        collect_free(*a.graph, inner, inner_seen);
        for (auto& name : inner) add(name);
      }
}


std::vector<int64_t> attr_ints(const nxrt_node& n, const char* name, size_t count, int64_t dflt) {
  const nxrt_attribute* a = find_attribute(n, name);
  if (!a || a->ints.empty()) return std::vector<int64_t>(count, dflt);
  if (a->ints.size() != count)
    raise(NXRT_ERR_MODEL, "node '{}' ({}): attribute '{}' has {} entries, expected {}", n.name, n.op_type, name, a->ints.size(), count);
  return a->ints;
}

std::string describe(const nxrt_node& n) { return fmt::format("node '{}' ({})", n.name, n.op_type); }

// One body's program and where its extra inputs come from among the step's inputs.
struct Body {
  std::string attribute;                 // "then_branch"
  std::string what;                      // "body 'then' of node 'if_0' (If)"
  std::shared_ptr<const nxrt_model_ir> model;
  std::unique_ptr<Session> session;
  size_t formal = 0;                     // formal inputs
  std::vector<size_t> capture_input;     // per extra input: the step input it reads
  size_t outputs = 0;

  // Runs the body on its formal inputs; extra inputs are taken from the step's inputs.
  std::vector<Result> run(const std::vector<const TensorView*>& formal_in, const std::vector<const TensorView*>& step_in,
                              const std::atomic<bool>* cancel) const {
    const auto& ins = model->inputs;
    std::vector<BoundInput> args;
    args.reserve(ins.size());
    auto add = [&](size_t i, const TensorView* v) {
      if (!v) raise(NXRT_ERR_RUNTIME, "{}: input '{}' has no value", what, ins[i]->name);
      BoundInput b;
      b.name = ins[i]->name;
      b.dtype = v->dtype;
      b.dims = v->dims;
      b.host = v->data;
      b.value = v->value;
      args.push_back(std::move(b));
    };
    for (size_t i = 0; i < formal; ++i) add(i, formal_in[i]);
    for (size_t k = 0; k < capture_input.size(); ++k) add(formal + k, step_in[capture_input[k]]);
    std::vector<HostTensor> tensors;
    std::vector<ValuePtr> values;
    try {
      session->run_bound(args, nullptr, tensors, cancel, nullptr, nullptr, nullptr, &values);
    } catch (const HostError& e) {
      throw HostError(e.code(), fmt::format("{}: {}", what, e.what()));
    }
    std::vector<Result> out(tensors.size());
    for (size_t k = 0; k < out.size(); ++k) {
      out[k].tensor = std::move(tensors[k]);
      if (k < values.size()) out[k].value = std::move(values[k]);
    }
    return out;
  }
};

Body make_body(const nxrt_model_ir& m, const nxrt_node& n, const char* attr_name, const Session& parent, size_t formal,
               size_t outputs) {
  const nxrt_attribute* a = find_attribute(n, attr_name);
  if (!a || a->type != NXRT_ATTR_GRAPH)
    raise(NXRT_ERR_MODEL, "{} has no graph attribute '{}'", describe(n), attr_name);
  if (!a->graph) raise(NXRT_ERR_UNSUPPORTED, "{}: its body '{}' could not be read (an unsupported initializer?)", describe(n), attr_name);
  Body b;
  b.attribute = attr_name;
  b.what = fmt::format("body '{}' of {}", attr_name, describe(n));
  if (a->graph->inputs.size() != formal)
    raise(NXRT_ERR_MODEL, "{} has {} inputs, {} expects {}", b.what, a->graph->inputs.size(), n.op_type, formal);
  if (outputs != size_t(-1) && a->graph->outputs.size() != outputs)
    raise(NXRT_ERR_MODEL, "{} has {} outputs, {} expects {}", b.what, a->graph->outputs.size(), n.op_type, outputs);
  b.formal = formal;
  b.outputs = a->graph->outputs.size();
  b.model = body_model(*a->graph, m);
  const auto step_inputs = implicit_inputs(m, n);
  for (size_t k = formal; k < b.model->inputs.size(); ++k) {
    size_t j = 0;
    while (j < step_inputs.size() && step_inputs[j]->name != b.model->inputs[k]->name) ++j;
    if (j == step_inputs.size()) raise(NXRT_ERR_MODEL, "{} reads '{}', which no enclosing graph defines", b.what, b.model->inputs[k]->name);
    b.capture_input.push_back(n.inputs.size() + j);
  }
  try {
    b.session = std::make_unique<Session>(b.model, parent);
  } catch (const HostError& e) {
    throw HostError(e.code(), fmt::format("{}: {}", b.what, e.what()));
  }
  return b;
}


Result copy_of(const TensorView& v) {
  if (v.value) return Result{{}, v.value};
  return Result{copy_tensor(v.dtype, v.dims, v.data), nullptr};
}

TensorView view_of(const HostTensor& t) { return TensorView{t.dtype, t.dims, t.data.data(), nullptr}; }
TensorView view_of(const Result& r) {
  if (r.value) return TensorView{NXRT_DTYPE_UNDEFINED, {}, nullptr, r.value};
  return view_of(r.tensor);
}

// The tensors a scan output's iterations made (a sequence cannot be stacked).
std::vector<HostTensor> tensors_of(std::vector<Result>& parts, const std::string& what) {
  std::vector<HostTensor> out;
  for (auto& p : parts) {
    if (p.value) raise(NXRT_ERR_MODEL, "{} is a sequence or optional; only tensors can be stacked", what);
    out.push_back(std::move(p.tensor));
  }
  return out;
}

bool read_bool(const TensorView& v, const std::string& what) {
  if (v.value) raise(NXRT_ERR_INVALID_ARGUMENT, "{} must be a tensor, it is a sequence or optional", what);
  if (element_count(v.dims) != 1) raise(NXRT_ERR_INVALID_ARGUMENT, "{} must have one element, it has shape {}", what, shape_str(v.dims));
  if (v.dtype != NXRT_DTYPE_BOOL) raise(NXRT_ERR_INVALID_ARGUMENT, "{} must be bool, it is {}", what, dtype_name(v.dtype));
  return *static_cast<const uint8_t*>(v.data) != 0;
}

int64_t read_int(const TensorView& v, const std::string& what) {
  if (v.value) raise(NXRT_ERR_INVALID_ARGUMENT, "{} must be a tensor, it is a sequence or optional", what);
  if (element_count(v.dims) != 1) raise(NXRT_ERR_INVALID_ARGUMENT, "{} must have one element, it has shape {}", what, shape_str(v.dims));
  if (v.dtype == NXRT_DTYPE_INT64) return *static_cast<const int64_t*>(v.data);
  if (v.dtype == NXRT_DTYPE_INT32) return *static_cast<const int32_t*>(v.data);
  raise(NXRT_ERR_INVALID_ARGUMENT, "{} must be int64, it is {}", what, dtype_name(v.dtype));
}

void check_element_type(nxrt_dtype t, const std::string& what) {
  if (dtype_size(t) == 0) raise(NXRT_ERR_UNSUPPORTED, "{} is {}, which the host cannot slice or stack", what, dtype_name(t));
}

// Slice `i` of `v` along `axis` (that axis removed). Along axis 0 it is a view into v's
// data; elsewhere the slice is gathered into `store`.
TensorView slice(const TensorView& v, size_t axis, int64_t i, HostTensor& store) {
  TensorView s;
  s.dtype = v.dtype;
  s.dims = v.dims;
  s.dims.erase(s.dims.begin() + std::ptrdiff_t(axis));
  const size_t outer = size_t(element_count({v.dims.begin(), v.dims.begin() + std::ptrdiff_t(axis)}));
  const size_t inner = bytes_of(v.dtype, {v.dims.begin() + std::ptrdiff_t(axis) + 1, v.dims.end()});
  const auto* src = static_cast<const uint8_t*>(v.data);
  const size_t n = size_t(v.dims[axis]);
  if (axis == 0) {
    s.data = src + size_t(i) * inner;
    return s;
  }
  store.dtype = s.dtype;
  store.dims = s.dims;
  store.data.resize(outer * inner);
  for (size_t o = 0; o < outer; ++o) std::memcpy(store.data.data() + o * inner, src + (o * n + size_t(i)) * inner, inner);
  s.data = store.data.data();
  return s;
}

// Stacks `parts` (all one shape) along a new `axis` of length `total` (>= parts.size(),
// the rest zero); part t goes to position t, or total-1-t when `reverse`.
HostTensor stack(const std::vector<HostTensor>& parts, int64_t axis_attr, bool reverse, size_t total, nxrt_dtype dtype,
                 std::vector<int64_t> slice_dims, const std::string& what) {
  if (!parts.empty()) {
    dtype = parts[0].dtype;
    slice_dims = parts[0].dims;
  }
  check_element_type(dtype, what);
  for (auto& p : parts)
    if (p.dims != slice_dims || p.dtype != dtype)
      raise(NXRT_ERR_RUNTIME, "{} changes from {} {} to {} {} between iterations; it cannot be stacked", what, dtype_name(dtype),
            shape_str(slice_dims), dtype_name(p.dtype), shape_str(p.dims));
  const int64_t rank = int64_t(slice_dims.size()) + 1;
  const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  if (axis < 0 || axis >= rank) raise(NXRT_ERR_MODEL, "{}: axis {} is out of range for rank {}", what, axis_attr, rank);
  HostTensor out;
  out.dtype = dtype;
  out.dims = slice_dims;
  out.dims.insert(out.dims.begin() + axis, int64_t(total));
  out.data.assign(bytes_of(dtype, out.dims), 0);
  const size_t outer = size_t(element_count({slice_dims.begin(), slice_dims.begin() + axis}));
  const size_t inner = outer ? bytes_of(dtype, slice_dims) / outer : 0;
  for (size_t t = 0; t < parts.size(); ++t) {
    const size_t pos = reverse ? total - 1 - t : t;
    for (size_t o = 0; o < outer; ++o)
      std::memcpy(out.data.data() + (o * total + pos) * inner, parts[t].data.data() + o * inner, inner);
  }
  own_strings(out);  // the parts' strings go with them
  return out;
}

// The shape of a scan output's slice when no iteration ran: the body's static shape, unknown dims 0.
std::vector<int64_t> empty_slice_dims(const nxrt_value* v) {
  std::vector<int64_t> d;
  if (v && v->rank >= 0)
    for (auto x : v->dims) d.push_back(std::max<int64_t>(x, 0));
  return d;
}

class IfOp final : public HostOp {
 public:
  IfOp(const nxrt_model_ir& m, const nxrt_node& n, const Session& parent) : node_(describe(n)) {
    then_ = make_body(m, n, "then_branch", parent, 0, n.outputs.size());
    else_ = make_body(m, n, "else_branch", parent, 0, n.outputs.size());
  }
  std::vector<BodyProgram> bodies() const override {
    return {{then_.attribute, then_.session.get()}, {else_.attribute, else_.session.get()}};
  }
  void run(const std::vector<const TensorView*>& in, std::vector<Result>& out, const std::atomic<bool>* cancel) const override {
    if (!in[0]) raise(NXRT_ERR_RUNTIME, "{}: the condition has no value", node_);
    const Body& b = read_bool(*in[0], node_ + ": the condition") ? then_ : else_;
    out = b.run({}, in, cancel);
  }

 private:
  std::string node_;
  Body then_, else_;
};

class LoopOp final : public HostOp {
 public:
  LoopOp(const nxrt_model_ir& m, const nxrt_node& n, const Session& parent) : node_(describe(n)) {
    if (n.inputs.size() < 2) raise(NXRT_ERR_MODEL, "{} needs the trip count and condition inputs (empty when absent)", node_);
    carried_ = n.inputs.size() - 2;
    body_ = make_body(m, n, "body", parent, 2 + carried_, size_t(-1));
    if (body_.outputs < 1 + carried_ || n.outputs.size() != body_.outputs - 1)
      raise(NXRT_ERR_MODEL, "{}: its body has {} outputs and the node {}; expected 1 + {} loop-carried + scan outputs", node_,
            body_.outputs, n.outputs.size(), carried_);
    for (size_t k = 1 + carried_; k < body_.outputs; ++k) scan_values_.push_back(body_.model->outputs[k]);
    for (size_t k = carried_; k < n.outputs.size(); ++k) scan_types_.push_back(n.outputs[k] ? n.outputs[k]->dtype : nxrt_dtype(NXRT_DTYPE_UNDEFINED));
  }
  std::vector<BodyProgram> bodies() const override { return {{body_.attribute, body_.session.get()}}; }
  void run(const std::vector<const TensorView*>& in, std::vector<Result>& out, const std::atomic<bool>* cancel) const override {
    const int64_t max_trips = in[0] ? read_int(*in[0], node_ + ": the trip count M") : std::numeric_limits<int64_t>::max();
    bool cond = in[1] ? read_bool(*in[1], node_ + ": the condition") : true;
    std::vector<Result> carried;  // after the first iteration: the body's last outputs
    std::vector<std::vector<Result>> scans(scan_values_.size());
    HostTensor iter{"", NXRT_DTYPE_INT64, {}, {}, {}}, cond_in{"", NXRT_DTYPE_BOOL, {}, {}, {}};
    iter.data.resize(8);
    cond_in.data.resize(1);
    int64_t i = 0;
    for (; i < max_trips && cond; ++i) {
      if (cancel && cancel->load()) raise(NXRT_ERR_RUNTIME, "run cancelled in {} at iteration {}", node_, i);
      std::memcpy(iter.data.data(), &i, 8);
      cond_in.data[0] = cond ? 1 : 0;
      std::vector<TensorView> views;
      views.reserve(2 + carried_);
      views.push_back(view_of(iter));
      views.push_back(view_of(cond_in));
      for (size_t k = 0; k < carried_; ++k) {
        if (!carried.empty()) views.push_back(view_of(carried[k]));
        else if (in[2 + k]) views.push_back(*in[2 + k]);
        else raise(NXRT_ERR_RUNTIME, "{}: loop-carried input {} has no value", node_, k);
      }
      std::vector<const TensorView*> formal;
      for (auto& v : views) formal.push_back(&v);
      std::vector<Result> res = body_.run(formal, in, cancel);
      cond = read_bool(view_of(res[0]), node_ + ": the body's condition output");
      // The next iteration reads this one's results in place: moved, not copied.
      carried.assign(std::make_move_iterator(res.begin() + 1), std::make_move_iterator(res.begin() + 1 + std::ptrdiff_t(carried_)));
      for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(std::move(res[1 + carried_ + k]));
    }
    out.clear();
    out.resize(carried_ + scans.size());
    for (size_t k = 0; k < carried_; ++k) {
      if (!carried.empty()) out[k] = std::move(carried[k]);
      else if (in[2 + k]) out[k] = copy_of(*in[2 + k]);  // zero trips: the initial values
    }
    for (size_t k = 0; k < scans.size(); ++k) {
      nxrt_dtype t = scan_types_[k] != NXRT_DTYPE_UNDEFINED ? scan_types_[k] : scan_values_[k]->dtype;
      const std::string what = fmt::format("{}: scan output {}", node_, k);
      const size_t n = scans[k].size();
      out[carried_ + k].tensor = stack(tensors_of(scans[k], what), 0, false, n, t, empty_slice_dims(scan_values_[k]), what);
    }
  }

 private:
  std::string node_;
  size_t carried_ = 0;
  Body body_;
  std::vector<const nxrt_value*> scan_values_;
  std::vector<nxrt_dtype> scan_types_;
};

class ScanOp final : public HostOp {
 public:
  ScanOp(const nxrt_model_ir& m, const nxrt_node& n, const Session& parent) : node_(describe(n)) {
    auto it = m.opsets.find("");
    opset8_ = it != m.opsets.end() && it->second < 9;
    const int64_t scans_in = attribute_int(n, "num_scan_inputs", -1);
    const size_t first = opset8_ ? 1 : 0;  // Scan-8: sequence_lens comes first
    if (scans_in < 1 || size_t(scans_in) + first > n.inputs.size())
      raise(NXRT_ERR_MODEL, "{}: num_scan_inputs {} does not fit its {} inputs", node_, scans_in, n.inputs.size());
    scan_in_ = size_t(scans_in);
    state_ = n.inputs.size() - first - scan_in_;
    body_ = make_body(m, n, "body", parent, state_ + scan_in_, size_t(-1));
    if (body_.outputs < state_ || n.outputs.size() != body_.outputs)
      raise(NXRT_ERR_MODEL, "{}: its body has {} outputs and the node {}; expected {} states + scan outputs", node_, body_.outputs,
            n.outputs.size(), state_);
    scan_out_ = body_.outputs - state_;
    if (opset8_) {
      in_dirs_ = attr_ints(n, "directions", scan_in_, 0);
      in_axes_.assign(scan_in_, 0);
      out_axes_.assign(scan_out_, 0);
      out_dirs_.assign(scan_out_, 0);
    } else {
      in_axes_ = attr_ints(n, "scan_input_axes", scan_in_, 0);
      in_dirs_ = attr_ints(n, "scan_input_directions", scan_in_, 0);
      out_axes_ = attr_ints(n, "scan_output_axes", scan_out_, 0);
      out_dirs_ = attr_ints(n, "scan_output_directions", scan_out_, 0);
    }
    for (size_t k = 0; k < scan_out_; ++k) scan_values_.push_back(body_.model->outputs[state_ + k]);
  }

  std::vector<BodyProgram> bodies() const override { return {{body_.attribute, body_.session.get()}}; }
  void run(const std::vector<const TensorView*>& in, std::vector<Result>& out, const std::atomic<bool>* cancel) const override {
    const size_t first = opset8_ ? 1 : 0;
    for (size_t j = first; j < first + state_ + scan_in_; ++j)
      if (!in[j]) raise(NXRT_ERR_RUNTIME, "{}: input {} has no value", node_, j);
    if (!opset8_) {
      std::vector<const TensorView*> states(in.begin(), in.begin() + std::ptrdiff_t(state_));
      std::vector<const TensorView*> xs(in.begin() + std::ptrdiff_t(state_), in.begin() + std::ptrdiff_t(state_ + scan_in_));
      out = scan(states, xs, in, -1, cancel);
      return;
    }
    // Scan-8: axis 0 of every input is the batch; each batch entry is one scan over axis 1.
    const int64_t batch = in[1]->dims.empty() ? 0 : in[1]->dims[0];
    std::vector<std::vector<Result>> per_batch;
    for (size_t j = 1; j < in.size() && j < 1 + state_ + scan_in_; ++j)
      if (in[j]->dims.empty() || in[j]->dims[0] != batch)
        raise(NXRT_ERR_INVALID_ARGUMENT, "{}: input {} has shape {}, its first (batch) dimension must be {}", node_, j,
              shape_str(in[j]->dims), batch);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<HostTensor> store(state_ + scan_in_);
      std::vector<TensorView> views;
      for (size_t j = 0; j < state_ + scan_in_; ++j) views.push_back(slice(*in[1 + j], 0, b, store[j]));
      std::vector<const TensorView*> states, xs;
      for (size_t j = 0; j < state_; ++j) states.push_back(&views[j]);
      for (size_t j = state_; j < state_ + scan_in_; ++j) xs.push_back(&views[j]);
      int64_t len = -1;
      if (in[0]) {
        if (in[0]->dtype != NXRT_DTYPE_INT32 || element_count(in[0]->dims) != batch)
          raise(NXRT_ERR_INVALID_ARGUMENT, "{}: sequence_lens must be int32 with one entry per batch entry ({}), it is {} {}", node_,
                batch, dtype_name(in[0]->dtype), shape_str(in[0]->dims));
        len = static_cast<const int32_t*>(in[0]->data)[b];
      }
      per_batch.push_back(scan(states, xs, in, len, cancel));
    }
    out.clear();
    for (size_t k = 0; k < state_ + scan_out_; ++k) {
      std::vector<Result> parts;
      for (auto& r : per_batch) parts.push_back(std::move(r[k]));
      const nxrt_value* v = k < state_ ? body_.model->outputs[k] : scan_values_[k - state_];
      const std::string what = fmt::format("{}: output {}", node_, k);
      out.push_back(Result{stack(tensors_of(parts, what), 0, false, size_t(batch), v->dtype, empty_slice_dims(v), what), nullptr});
    }
  }

 private:
  // One scan. len >= 0: only the first `len` steps run (Scan-8 sequence_lens), the scan
  // outputs are zero past them.
  std::vector<Result> scan(const std::vector<const TensorView*>& states_in, const std::vector<const TensorView*>& xs,
                               const std::vector<const TensorView*>& step_in, int64_t len, const std::atomic<bool>* cancel) const {
    std::vector<size_t> axes(scan_in_);
    int64_t steps = -1;
    for (size_t j = 0; j < scan_in_; ++j) {
      const int64_t rank = int64_t(xs[j]->dims.size());
      const int64_t a = in_axes_[j] < 0 ? in_axes_[j] + rank : in_axes_[j];
      if (a < 0 || a >= rank) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: scan axis {} is out of range for scan input {} of shape {}", node_, in_axes_[j], j, shape_str(xs[j]->dims));
      axes[j] = size_t(a);
      check_element_type(xs[j]->dtype, fmt::format("{}: scan input {}", node_, j));
      if (steps >= 0 && xs[j]->dims[axes[j]] != steps)
        raise(NXRT_ERR_INVALID_ARGUMENT, "{}: scan inputs disagree on the sequence length ({} and {})", node_, steps, xs[j]->dims[axes[j]]);
      steps = xs[j]->dims[axes[j]];
    }
    const int64_t run_steps = len >= 0 ? std::min(len, steps) : steps;
    std::vector<Result> states;
    std::vector<std::vector<Result>> scans(scan_out_);
    for (int64_t t = 0; t < run_steps; ++t) {
      if (cancel && cancel->load()) raise(NXRT_ERR_RUNTIME, "run cancelled in {} at step {}", node_, t);
      std::vector<TensorView> views;
      std::vector<HostTensor> store(scan_in_);
      for (size_t k = 0; k < state_; ++k) views.push_back(states.empty() ? *states_in[k] : view_of(states[k]));
      for (size_t j = 0; j < scan_in_; ++j) views.push_back(slice(*xs[j], axes[j], in_dirs_[j] ? run_steps - 1 - t : t, store[j]));
      std::vector<const TensorView*> formal;
      for (auto& v : views) formal.push_back(&v);
      std::vector<Result> res = body_.run(formal, step_in, cancel);
      states.assign(std::make_move_iterator(res.begin()), std::make_move_iterator(res.begin() + std::ptrdiff_t(state_)));
      for (size_t k = 0; k < scan_out_; ++k) scans[k].push_back(std::move(res[state_ + k]));
    }
    std::vector<Result> out(state_ + scan_out_);
    for (size_t k = 0; k < state_; ++k) out[k] = states.empty() ? copy_of(*states_in[k]) : std::move(states[k]);
    for (size_t k = 0; k < scan_out_; ++k) {
      // A reversed output with fewer steps than its length fills from position run_steps-1 down.
      const std::string what = fmt::format("{}: scan output {}", node_, k);
      std::vector<HostTensor> parts = tensors_of(scans[k], what);
      const size_t total = size_t(std::max<int64_t>(steps, 0));
      // Reversed: the last step's slice comes first.
      if (out_dirs_[k]) std::reverse(parts.begin(), parts.end());
      out[state_ + k].tensor = stack(parts, out_axes_[k], false, total, scan_values_[k]->dtype, empty_slice_dims(scan_values_[k]), what);
    }
    return out;
  }

  std::string node_;
  bool opset8_ = false;
  size_t state_ = 0, scan_in_ = 0, scan_out_ = 0;
  std::vector<int64_t> in_axes_, in_dirs_, out_axes_, out_dirs_;
  Body body_;
  std::vector<const nxrt_value*> scan_values_;
};

// SequenceMap: the body runs once per element of the first input; sequence inputs give
// their element at that position, tensor inputs themselves; each output is a sequence.
class SequenceMapOp final : public HostOp {
 public:
  SequenceMapOp(const nxrt_model_ir& m, const nxrt_node& n, const Session& parent) : node_(describe(n)) {
    if (n.inputs.empty() || !n.inputs[0]) raise(NXRT_ERR_MODEL, "{} needs an input sequence", node_);
    body_ = make_body(m, n, "body", parent, n.inputs.size(), n.outputs.size());
    inputs_ = n.inputs.size();
  }
  std::vector<BodyProgram> bodies() const override { return {{body_.attribute, body_.session.get()}}; }
  void run(const std::vector<const TensorView*>& in, std::vector<Result>& out, const std::atomic<bool>* cancel) const override {
    auto seq_at = [&](size_t j) -> const Value* {
      if (!in[j]) raise(NXRT_ERR_RUNTIME, "{}: input {} has no value", node_, j);
      if (in[j]->value && in[j]->value->kind != Value::Sequence)
        raise(NXRT_ERR_INVALID_ARGUMENT, "{}: input {} must be a tensor or a sequence", node_, j);
      return in[j]->value.get();
    };
    const Value* first = seq_at(0);
    if (!first) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: input 0 must be a sequence", node_);
    const size_t count = first->items.size();
    for (size_t j = 1; j < inputs_; ++j)
      if (const Value* s = seq_at(j); s && s->items.size() != count)
        raise(NXRT_ERR_INVALID_ARGUMENT, "{}: input {} has {} elements, input 0 has {}", node_, j, s->items.size(), count);
    std::vector<std::shared_ptr<Value>> seqs(body_.outputs);
    for (size_t k = 0; k < seqs.size(); ++k) {
      seqs[k] = std::make_shared<Value>();
      seqs[k]->kind = Value::Sequence;
      seqs[k]->elem = body_.model->outputs[k]->dtype;
    }
    for (size_t i = 0; i < count; ++i) {
      if (cancel && cancel->load()) raise(NXRT_ERR_RUNTIME, "run cancelled in {} at element {}", node_, i);
      std::vector<TensorView> views;
      for (size_t j = 0; j < inputs_; ++j) {
        const Value* s = seq_at(j);
        views.push_back(s ? view_of(s->items[i]->tensor) : *in[j]);
      }
      std::vector<const TensorView*> formal;
      for (auto& v : views) formal.push_back(&v);
      std::vector<Result> res = body_.run(formal, in, cancel);
      for (size_t k = 0; k < res.size(); ++k) {
        if (res[k].value) raise(NXRT_ERR_RUNTIME, "{}: body output {} must be a tensor", node_, k);
        seqs[k]->elem = res[k].tensor.dtype;
        seqs[k]->items.push_back(Value::of(std::move(res[k].tensor)));
      }
    }
    out.clear();
    for (auto& s : seqs) out.push_back(Result{{}, s});
  }

 private:
  std::string node_;
  size_t inputs_ = 0;
  Body body_;
};

}  // namespace

std::string describe_bodies(const HostOp& op, const std::string& indent) {
  std::string out;
  for (const auto& b : op.bodies()) {
    out += fmt::format("{}{}:\n", indent, b.attribute);
    const Session& s = *b.session;
    for (const nxrt_node* n : s.model().live_nodes()) {
      const Assignment& a = s.assignments()[n->index];
      const std::string ep = a.host ? "host" : a.ep >= 0 ? s.eps()[size_t(a.ep)]->lib->name() : "";
      out += fmt::format("{}  {} ({}): {}{}\n", indent, n->name, n->op_type, ep, a.fell_back ? "*" : "");
      for (const Step& st : s.steps())
        if (st.kind == Step::Host && st.nodes[0] == n->index) out += describe_bodies(*st.host, indent + "    ");
    }
  }
  return out;
}

std::vector<std::string> free_names(const GraphBody& body) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  collect_free(body, out, seen);
  return out;
}

std::vector<const nxrt_value*> implicit_inputs(const nxrt_model_ir& m, const nxrt_node& n) {
  std::vector<const nxrt_value*> out;
  std::set<std::string> seen;
  for (auto& a : n.attributes) {
    if (!a.graph) continue;
    for (auto& name : free_names(*a.graph)) {
      if (!seen.insert(name).second) continue;
      const nxrt_value* v = m.find_value(name);
      if (!v) raise(NXRT_ERR_MODEL, "node '{}' ({}): its body reads '{}', which no enclosing graph defines", n.name, n.op_type, name);
      out.push_back(v);
    }
  }
  return out;
}

std::shared_ptr<nxrt_model_ir> body_model(const GraphBody& body, const nxrt_model_ir& parent) {
  auto m = std::make_shared<nxrt_model_ir>();
  m->opsets = parent.opsets;
  m->path = parent.path;
  for (auto& v : body.values) {
    auto c = std::make_unique<nxrt_value>(*v);
    c->body = nullptr;
    c->is_graph_input = false;
    m->values.push_back(std::move(c));
  }
  for (auto& n : body.nodes) {
    auto c = std::make_unique<nxrt_node>();
    c->index = n->index;
    c->name = n->name;
    c->op_type = n->op_type;
    c->domain = n->domain;
    c->attributes = n->attributes;
    c->removed = n->removed;
    for (auto* v : n->inputs) c->inputs.push_back(v ? m->values[v->id].get() : nullptr);
    for (auto* v : n->outputs) c->outputs.push_back(v ? m->values[v->id].get() : nullptr);
    m->nodes.push_back(std::move(c));
  }
  for (auto* v : body.inputs) {
    m->values[v->id]->is_graph_input = true;
    m->inputs.push_back(m->values[v->id].get());
  }
  for (auto& name : free_names(body)) {
    nxrt_value* v = nullptr;
    for (auto* o : body.outer)
      if (o->name == name) v = m->values[o->id].get();
    if (!v) {  // read only by a nested body: a new value here, typed like the outer one
      auto c = std::make_unique<nxrt_value>();
      c->id = m->values.size();
      c->name = name;
      if (const nxrt_value* o = parent.find_value(name)) {
        c->dtype = o->dtype;
        c->kind = o->kind;
        c->rank = o->rank;
        c->dims = o->dims;
      }
      v = c.get();
      m->values.push_back(std::move(c));
    }
    // An outer value is a constant of the parent when it is one there: kept as an input,
    // so a run always reads the parent's current value.
    v->constant.reset();
    v->is_graph_input = true;
    m->inputs.push_back(v);
  }
  for (auto* v : body.outputs) m->outputs.push_back(m->values[v->id].get());
  return m;
}

std::unique_ptr<HostOp> make_host_op(const nxrt_model_ir& m, const nxrt_node& n, const Session& parent) {
  if (n.op_type == "If") return std::make_unique<IfOp>(m, n, parent);
  if (n.op_type == "Loop") return std::make_unique<LoopOp>(m, n, parent);
  if (n.op_type == "Scan") return std::make_unique<ScanOp>(m, n, parent);
  if (n.op_type == "SequenceMap") return std::make_unique<SequenceMapOp>(m, n, parent);
  if (is_sequence_op(n)) return make_sequence_op(n);
  raise(NXRT_ERR_UNSUPPORTED, "the host has no implementation of {}", describe(n));
}

}  // namespace nxrt
