#include "schedule.hpp"

#include <nxrt_sdk/dtype.hpp>
#include <nxrt_sdk/status.hpp>

namespace nxrt::cuda {

bool reads_on_device(const std::string& op, size_t i) {
  if (i == 0) return true;
  if (op == "Reshape" || op == "Expand" || op == "Squeeze" || op == "Unsqueeze" || op == "Clip" || op == "Dropout" ||
      op == "Slice" || op.rfind("Reduce", 0) == 0)
    return false;
  return true;
}

bool is_view(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" || op == "Dropout";
}

std::vector<int> device_uses(const IrGraph& g) {
  std::vector<int> uses(g.values.size(), 0);
  for (const auto& n : g.nodes) {
    if (n.fused_away) continue;
    for (size_t i = 0; i < n.in.size(); ++i)
      if (n.in[i] >= 0 && reads_on_device(n.op, i)) ++uses[size_t(n.in[i])];
  }
  return uses;
}

void schedule_group(const IrGraph& g, const std::vector<int>& uses, const std::vector<Shape>& shapes,
                    std::vector<const void*>& addr, const ScheduleHooks& hooks) {
  std::vector<int> owner(g.values.size(), -1);  // temporary buffer per value (views share their input's)
  std::vector<void*> temps;
  std::vector<int> refs;  // reads still to be queued per temporary
  auto release_read = [&](int v) {
    const int b = owner[size_t(v)];
    if (b >= 0 && --refs[size_t(b)] == 0) hooks.release(temps[size_t(b)]);
  };
  for (const auto& n : g.nodes) {
    if (n.fused_away) continue;
    NodeIo io;
    for (size_t i = 0; i < n.in.size(); ++i) {
      const int v = n.in[i];
      io.in_shapes.push_back(v >= 0 ? shapes[size_t(v)] : Shape{});
      io.in.push_back(v >= 0 ? addr[size_t(v)] : nullptr);
      if (v >= 0 && reads_on_device(n.op, i) && !addr[size_t(v)])
        sdk::fail(NXRT_INTERNAL, "node {} ({}): input {} '{}' has no device data", n.index, n.op, i, g.value(v).name);
    }
    const int out = n.out[0];
    const IrValue& ov = g.value(out);
    io.out_shapes.push_back(shapes[size_t(out)]);
    const bool alias = is_view(n.op) && ov.group_output < 0;
    if (alias) {  // the input's buffer lives on through the output's reads
      addr[size_t(out)] = addr[size_t(n.in[0])];
      owner[size_t(out)] = owner[size_t(n.in[0])];
      if (owner[size_t(out)] >= 0) refs[size_t(owner[size_t(out)])] += uses[size_t(out)];
    } else if (ov.group_output < 0) {
      int64_t count = 1;
      for (auto d : shapes[size_t(out)]) count *= d;
      void* p = hooks.alloc(uint64_t(count) * sdk::dtype_size(ov.dtype));
      temps.push_back(p);
      refs.push_back(uses[size_t(out)]);
      owner[size_t(out)] = int(temps.size()) - 1;
      addr[size_t(out)] = p;
    }
    if (!addr[size_t(out)]) sdk::fail(NXRT_INTERNAL, "node {} ({}): output '{}' has no memory", n.index, n.op, ov.name);
    io.out.push_back(const_cast<void*>(addr[size_t(out)]));
    if (!alias) hooks.launch(n, io);
    for (size_t i = 0; i < n.in.size(); ++i)
      if (n.in[i] >= 0 && reads_on_device(n.op, i)) release_read(n.in[i]);
    if (!alias && owner[size_t(out)] >= 0 && uses[size_t(out)] == 0) hooks.release(temps[size_t(owner[size_t(out)])]);
  }
}

}  // namespace nxrt::cuda
