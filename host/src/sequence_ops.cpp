// Sequence and optional ops on host values; see sequence_ops.hpp. Elements are shared,
// not copied, by the ops that only rearrange a sequence.
#include "sequence_ops.hpp"

#include "error.hpp"
#include "string_tensor.hpp"

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <numeric>

namespace nxrt {
namespace {

std::string describe(const nxrt_node& n) { return fmt::format("node '{}' ({})", n.name, n.op_type); }



// A sequence may outlive the run whose memory v is: the copy owns its strings too.
HostTensor tensor_of(const TensorView& v) { return copy_tensor(v.dtype, v.dims, v.data); }

// A scalar of `t` from its bytes. Not inlined: GCC's -Wstringop-overflow misreads a
// constant-size resize through the aligned allocator.
[[gnu::noinline]] HostTensor scalar(nxrt_dtype t, const void* bytes) {
  HostTensor out;
  out.dtype = t;
  out.data.resize(dtype_size(t));
  std::memcpy(out.data.data(), bytes, out.data.size());
  return out;
}

HostTensor scalar_i64(int64_t x) { return scalar(NXRT_DTYPE_INT64, &x); }

HostTensor scalar_bool(bool b) {
  const uint8_t v = b ? 1 : 0;
  return scalar(NXRT_DTYPE_BOOL, &v);
}

// Element i (int32 or int64) of a tensor input.
int64_t index_at(const TensorView& v, int64_t i) {
  if (v.dtype == NXRT_DTYPE_INT64) return static_cast<const int64_t*>(v.data)[i];
  return static_cast<const int32_t*>(v.data)[i];
}

using Fn = std::function<void(const std::vector<const TensorView*>&, std::vector<Result>&)>;

class SequenceOp final : public HostOp {
 public:
  SequenceOp(std::string what, Fn fn) : what_(std::move(what)), fn_(std::move(fn)) {}
  void run(const std::vector<const TensorView*>& in, std::vector<Result>& out, const std::atomic<bool>*) const override {
    fn_(in, out);
  }

 private:
  std::string what_;
  Fn fn_;
};

}  // namespace

bool is_sequence_op(const nxrt_node& n) {
  if (!n.domain.empty()) return false;
  static const char* ops[] = {"SequenceConstruct", "SequenceAt", "SequenceInsert", "SequenceErase", "SequenceLength",
                              "SequenceEmpty", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement",
                              "OptionalGetElement"};
  for (const char* op : ops)
    if (n.op_type == op) return true;
  // Identity of a sequence or optional (an EP sees no dtype there and refuses it).
  return n.op_type == "Identity" && !n.inputs.empty() && n.inputs[0] && n.inputs[0]->kind != ValueKind::Tensor;
}

std::unique_ptr<HostOp> make_sequence_op(const nxrt_node& n) {
  const std::string what = describe(n);
  // The sequence input `i`, checked.
  auto seq = [what](const std::vector<const TensorView*>& in, size_t i) -> const Value& {
    if (i >= in.size() || !in[i] || !in[i]->value || in[i]->value->kind != Value::Sequence)
      raise(NXRT_ERR_INVALID_ARGUMENT, "{}: input {} must be a sequence", what, i);
    return *in[i]->value;
  };
  auto tensor = [what](const std::vector<const TensorView*>& in, size_t i) -> const TensorView& {
    if (i >= in.size() || !in[i] || in[i]->value) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: input {} must be a tensor", what, i);
    if (dtype_size(in[i]->dtype) == 0)
      raise(NXRT_ERR_UNSUPPORTED, "{}: input {} is {}, which the host does not handle", what, i, dtype_name(in[i]->dtype));
    return *in[i];
  };
  // A position input (scalar int32/int64), in [-size, size - 1 + extra], made non-negative.
  auto position = [what](const TensorView& p, int64_t size, int64_t extra) {
    if (p.value || element_count(p.dims) != 1 || (p.dtype != NXRT_DTYPE_INT64 && p.dtype != NXRT_DTYPE_INT32))
      raise(NXRT_ERR_INVALID_ARGUMENT, "{}: the position must be an int32 or int64 scalar", what);
    int64_t pos = index_at(p, 0);
    if (pos < -size || pos > size - 1 + extra)
      raise(NXRT_ERR_INVALID_ARGUMENT, "{}: position {} is out of range for a sequence of {} tensors", what, pos, size);
    return pos < 0 ? pos + size : pos;
  };
  auto make_seq = [](nxrt_dtype elem, std::vector<ValuePtr> items) {
    auto v = std::make_shared<Value>();
    v->kind = Value::Sequence;
    v->elem = elem;
    v->items = std::move(items);
    return ValuePtr(v);
  };
  const std::string& op = n.op_type;

  if (op == "SequenceEmpty") {
    const nxrt_dtype elem = nxrt_dtype(attribute_int(n, "dtype", NXRT_DTYPE_FLOAT32));
    return std::make_unique<SequenceOp>(what, [=](auto&, auto& out) { out = {Result{{}, make_seq(elem, {})}}; });
  }
  if (op == "SequenceConstruct") {
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      std::vector<ValuePtr> items;
      for (size_t i = 0; i < in.size(); ++i) {
        const TensorView& t = tensor(in, i);
        if (t.dtype != tensor(in, 0).dtype)
          raise(NXRT_ERR_INVALID_ARGUMENT, "{}: input {} is {}, input 0 is {}; a sequence has one element type", what, i,
                dtype_name(t.dtype), dtype_name(tensor(in, 0).dtype));
        items.push_back(Value::of(tensor_of(t)));
      }
      out = {Result{{}, make_seq(tensor(in, 0).dtype, std::move(items))}};
    });
  }
  if (op == "SequenceInsert") {
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      const Value& s = seq(in, 0);
      const TensorView& t = tensor(in, 1);
      if (s.elem != NXRT_DTYPE_UNDEFINED && t.dtype != s.elem)
        raise(NXRT_ERR_INVALID_ARGUMENT, "{}: inserting a {} tensor into a sequence of {}", what, dtype_name(t.dtype), dtype_name(s.elem));
      const int64_t size = int64_t(s.items.size());
      const int64_t pos = in.size() > 2 && in[2] ? position(*in[2], size, 1) : size;
      std::vector<ValuePtr> items = s.items;
      items.insert(items.begin() + pos, Value::of(tensor_of(t)));
      out = {Result{{}, make_seq(t.dtype, std::move(items))}};
    });
  }
  if (op == "SequenceErase") {
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      const Value& s = seq(in, 0);
      const int64_t size = int64_t(s.items.size());
      if (size == 0) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: erasing from an empty sequence", what);
      const int64_t pos = in.size() > 1 && in[1] ? position(*in[1], size, 0) : size - 1;
      std::vector<ValuePtr> items = s.items;
      items.erase(items.begin() + pos);
      out = {Result{{}, make_seq(s.elem, std::move(items))}};
    });
  }
  if (op == "SequenceAt") {
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      const Value& s = seq(in, 0);
      out = {Result{{}, s.items[size_t(position(tensor(in, 1), int64_t(s.items.size()), 0))]}};
    });
  }
  if (op == "SequenceLength") {
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      out = {Result{scalar_i64(int64_t(seq(in, 0).items.size())), nullptr}};
    });
  }
  if (op == "SplitToSequence") {
    const int64_t axis_attr = attribute_int(n, "axis", 0), keepdims = attribute_int(n, "keepdims", 1);
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      const TensorView& x = tensor(in, 0);
      const int64_t rank = int64_t(x.dims.size());
      const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
      if (axis < 0 || axis >= rank) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: axis {} is out of range for shape {}", what, axis_attr, shape_str(x.dims));
      const int64_t n_axis = x.dims[size_t(axis)];
      std::vector<int64_t> sizes;
      bool squeeze = false;
      if (in.size() < 2 || !in[1]) {
        sizes.assign(size_t(n_axis), 1);
        squeeze = keepdims == 0;
      } else {
        const TensorView& sp = tensor(in, 1);
        if (sp.dtype != NXRT_DTYPE_INT64 && sp.dtype != NXRT_DTYPE_INT32)
          raise(NXRT_ERR_INVALID_ARGUMENT, "{}: split must be int32 or int64", what);
        if (sp.dims.empty()) {  // one chunk size; the last chunk may be smaller
          const int64_t c = index_at(sp, 0);
          if (c <= 0) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: split size {} must be positive", what, c);
          for (int64_t done = 0; done < n_axis; done += c) sizes.push_back(std::min(c, n_axis - done));
        } else {
          for (int64_t i = 0; i < element_count(sp.dims); ++i) sizes.push_back(index_at(sp, i));
          int64_t sum = 0;
          for (auto v : sizes) {
            if (v < 0) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: negative split size {}", what, v);
            // Checked before adding: sizes near INT64_MAX would overflow the sum (found by fuzz_model_session).
            if (v > n_axis - sum) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: split sizes sum past the axis' {}", what, n_axis);
            sum += v;
          }
          if (sum != n_axis) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: split sizes sum to {}, the axis has {}", what, sum, n_axis);
        }
      }
      const size_t outer = size_t(element_count({x.dims.begin(), x.dims.begin() + axis}));
      const size_t inner = bytes_of(x.dtype, {x.dims.begin() + axis + 1, x.dims.end()});
      std::vector<ValuePtr> items;
      int64_t start = 0;
      for (int64_t len : sizes) {
        HostTensor t;
        t.dtype = x.dtype;
        t.dims = x.dims;
        t.dims[size_t(axis)] = len;
        t.data.resize(bytes_of(t.dtype, t.dims));
        const auto* src = static_cast<const uint8_t*>(x.data);
        if (len > 0 && inner > 0)  // an empty piece has no data pointer to copy to or from
          for (size_t o = 0; o < outer; ++o)
            std::memcpy(t.data.data() + o * size_t(len) * inner, src + (o * size_t(n_axis) + size_t(start)) * inner, size_t(len) * inner);
        if (squeeze) t.dims.erase(t.dims.begin() + axis);
        own_strings(t);
        items.push_back(Value::of(std::move(t)));
        start += len;
      }
      out = {Result{{}, make_seq(x.dtype, std::move(items))}};
    });
  }
  if (op == "ConcatFromSequence") {
    const nxrt_attribute* a = find_attribute(n, "axis");
    if (!a) raise(NXRT_ERR_MODEL, "{} needs the 'axis' attribute", what);
    const int64_t axis_attr = a->i, new_axis = attribute_int(n, "new_axis", 0);
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      const Value& s = seq(in, 0);
      if (s.items.empty()) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: the sequence is empty", what);
      const HostTensor& first = s.items[0]->tensor;
      const int64_t rank = int64_t(first.dims.size()) + (new_axis ? 1 : 0);
      const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
      if (axis < 0 || axis >= rank) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: axis {} is out of range", what, axis_attr);
      if (dtype_size(first.dtype) == 0) raise(NXRT_ERR_UNSUPPORTED, "{}: elements of type {}", what, dtype_name(first.dtype));
      // Each part as [outer, len, inner]: len 1 for new_axis.
      std::vector<int64_t> base = first.dims;
      if (new_axis) base.insert(base.begin() + axis, 1);
      int64_t total = 0;
      for (auto& it : s.items) {
        // Ranks first: inserting the new axis into a shorter element would write past its dims (fuzz_model_session).
        if (it->tensor.dims.size() != first.dims.size())
          raise(NXRT_ERR_INVALID_ARGUMENT, "{}: elements {} and {} cannot be joined", what, shape_str(first.dims), shape_str(it->tensor.dims));
        std::vector<int64_t> d = it->tensor.dims;
        if (new_axis) d.insert(d.begin() + axis, 1);
        bool same = d.size() == base.size() && it->tensor.dtype == first.dtype;
        for (size_t k = 0; same && k < d.size(); ++k) same = int64_t(k) == axis || d[k] == base[k];
        if (!same) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: elements {} and {} cannot be joined", what, shape_str(first.dims), shape_str(it->tensor.dims));
        total += d[size_t(axis)];
      }
      HostTensor t;
      t.dtype = first.dtype;
      t.dims = base;
      t.dims[size_t(axis)] = total;
      t.data.resize(bytes_of(t.dtype, t.dims));
      const size_t outer = size_t(element_count({base.begin(), base.begin() + axis}));
      const size_t inner = bytes_of(t.dtype, {base.begin() + axis + 1, base.end()});
      size_t at = 0;
      for (auto& it : s.items) {
        const size_t len = new_axis ? 1 : size_t(it->tensor.dims[size_t(axis)]);
        if (len * inner == 0) continue;  // an empty element has no data pointer to copy from
        for (size_t o = 0; o < outer; ++o)
          std::memcpy(t.data.data() + (o * size_t(total) + at) * inner, it->tensor.data.data() + o * len * inner, len * inner);
        at += len;
      }
      own_strings(t);
      out = {Result{std::move(t), nullptr}};
    });
  }
  if (op == "Optional") {
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      auto v = std::make_shared<Value>();
      v->kind = Value::Optional;
      if (!in.empty() && in[0]) v->items.push_back(in[0]->value ? in[0]->value : Value::of(tensor_of(*in[0])));
      out = {Result{{}, ValuePtr(v)}};
    });
  }
  if (op == "OptionalHasElement") {
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      bool has = false;
      if (!in.empty() && in[0]) has = !in[0]->value || in[0]->value->kind != Value::Optional || !in[0]->value->items.empty();
      out = {Result{scalar_bool(has), nullptr}};
    });
  }
  if (op == "OptionalGetElement") {
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      if (in.empty() || !in[0]) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: no input", what);
      const TensorView& x = *in[0];
      if (!x.value) {  // a tensor (opset 18): itself
        out = {Result{tensor_of(x), nullptr}};
        return;
      }
      if (x.value->kind != Value::Optional) {
        out = {Result{{}, x.value}};
        return;
      }
      if (x.value->items.empty()) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: the optional is empty", what);
      out = {Result{{}, x.value->items[0]}};
    });
  }
  if (op == "Identity") {
    return std::make_unique<SequenceOp>(what, [=](auto& in, auto& out) {
      if (in.empty() || !in[0] || !in[0]->value) raise(NXRT_ERR_INVALID_ARGUMENT, "{}: input 0 must be a sequence or optional", what);
      out = {Result{{}, in[0]->value}};
    });
  }
  raise(NXRT_ERR_UNSUPPORTED, "the host has no implementation of {}", what);
}

}  // namespace nxrt
