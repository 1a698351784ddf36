// The order of a group's work and the lifetime of its temporaries, without a device:
// each unfused node in turn gets its inputs' addresses, an output address (the bound group
// output, a new temporary, or for a view inside the group its input's buffer), is launched,
// and every temporary is released right after the launch of its last reader (views extend
// the life of the buffer they alias). The executor passes hooks that allocate and free
// stream-ordered memory and launch kernels; the unit tests pass hooks that check liveness.
#pragma once
#include "ir.hpp"

#include <functional>
#include <string>
#include <vector>

namespace nxrt::cuda {

struct NodeIo {
  std::vector<Shape> in_shapes;
  std::vector<const void*> in;  // device addresses; nullptr for an absent input
  std::vector<Shape> out_shapes;
  std::vector<void*> out;
};

// True when launch_node reads input `i` of `op` on the device (false: shape, axes,
// bounds... read from the IR's constants).
bool reads_on_device(const std::string& op, size_t i);
// Ops that only reinterpret their input's bytes (aliased inside a group).
bool is_view(const std::string& op);
// Per value: how many device reads the group's unfused nodes make of it.
std::vector<int> device_uses(const IrGraph& g);

struct ScheduleHooks {
  std::function<void*(uint64_t bytes)> alloc;
  std::function<void(void*)> release;
  std::function<void(const IrNode&, const NodeIo&)> launch;
};

// `addr` holds the group inputs' and bound outputs' addresses on entry (indexed by value
// id); `shapes` every value's runtime shape.
void schedule_group(const IrGraph& g, const std::vector<int>& uses, const std::vector<Shape>& shapes,
                    std::vector<const void*>& addr, const ScheduleHooks& hooks);

}  // namespace nxrt::cuda
