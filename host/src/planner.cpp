// The memory planner: each planned value gets an offset in its location's arena,
// chosen by lifetime (first and last step that touch it), so values whose lifetimes
// do not overlap share bytes.
#include "planner.hpp"

#include "run_state.hpp"
#include "session.hpp"

#include <algorithm>

namespace nxrt {

uint64_t place_by_lifetime(const std::vector<Lifetime>& items, std::vector<uint64_t>& offsets) {
  // Largest first (stable: equal sizes keep their order), each at the lowest offset
  // free during its whole lifetime.
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return items[a].bytes > items[b].bytes; });
  offsets.assign(items.size(), 0);
  struct Placed { int first, last; uint64_t begin, end; };
  std::vector<Placed> placed;
  uint64_t arena = 0;
  for (size_t k : order) {
    const Lifetime& it = items[k];
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (auto& p : placed)
      if (p.first <= it.last && it.first <= p.last) busy.emplace_back(p.begin, p.end);
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (auto& [b, e] : busy) {
      if (offset + it.bytes <= b) break;
      offset = std::max(offset, e);
    }
    placed.push_back({it.first, it.last, offset, offset + it.bytes});
    offsets[k] = offset;
    arena = std::max(arena, offset + it.bytes);
  }
  return arena;
}

namespace {
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

void Session::plan_memory() {
  const int end = int(steps_.size());
  std::vector<int> def(slots_.size(), -1), last(slots_.size(), -1);
  for (int i = 0; i < end; ++i) {
    const Step& s = steps_[size_t(i)];
    for (int o : s.outputs) if (o >= 0) { def[size_t(o)] = i; last[size_t(o)] = std::max(last[size_t(o)], i); }
    for (int in : s.inputs) {
      if (in < 0) continue;
      last[size_t(in)] = std::max(last[size_t(in)], i);
      // A host buffer feeding an asynchronous upload stays alive to the end of the run.
      if (s.kind == Step::Copy && slots_[size_t(in)].location == 0 && eps_[size_t(s.ep)]->streams) last[size_t(in)] = end;
    }
  }
  struct Item { int slot; uint64_t bytes; };
  std::vector<std::vector<Item>> per_loc(arena_bytes_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.fixed || s.graph_input >= 0 || s.graph_output >= 0 || def[i] < 0) continue;
    if (!s.value->static_shape() || dtype_size(s.dtype) == 0) continue;
    uint64_t bytes = uint64_t(element_count(s.dims)) * dtype_size(s.dtype);
    if (bytes == 0) continue;
    s.bytes = bytes;
    per_loc[size_t(s.location)].push_back({int(i), align_up(bytes, NXRT_TENSOR_ALIGNMENT)});
  }
  for (size_t loc = 0; loc < per_loc.size(); ++loc) {
    std::vector<Lifetime> items;
    for (auto& it : per_loc[loc]) items.push_back({def[size_t(it.slot)], last[size_t(it.slot)], it.bytes});
    std::vector<uint64_t> offsets;
    arena_bytes_[loc] = place_by_lifetime(items, offsets);
    for (size_t k = 0; k < items.size(); ++k) {
      Slot& slot = slots_[size_t(per_loc[loc][k].slot)];
      slot.planned = true;
      slot.offset = offsets[k];
    }
  }
}

}  // namespace nxrt
