// Records a node's commands: compute dispatches (pipeline, bindings, push
// constants, grid) and buffer copies, appended to the group's command list.
#pragma once
#include "ops.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace nxrt::vk {

inline uint32_t u32(int64_t v) { return uint32_t(v); }

struct Emitter {
  PipelineSource& dev;
  std::vector<Cmd>& cmds;

  // The last n_writes_at_end bindings are written by the shader, the others read.
  template <typename P>
  void dispatch(Shader s, std::vector<uint32_t> spec, std::vector<Loc> binds, size_t n_writes_at_end, const P& push,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) {
    static_assert(sizeof(P) <= 128 && sizeof(P) % 4 == 0);
    Cmd c;
    c.kind = Cmd::dispatch;
    c.pipeline = &dev.pipeline(s, spec);
    c.writes.assign(binds.size(), false);
    for (size_t i = binds.size() - n_writes_at_end; i < binds.size(); ++i) c.writes[i] = true;
    c.binds = std::move(binds);
    c.push.resize(sizeof(P) / 4);
    std::memcpy(c.push.data(), &push, sizeof(P));
    c.gx = gx;
    c.gy = gy;
    c.gz = gz;
    if (gz > 65535) sdk::fail(NXRT_UNSUPPORTED, "dispatch of {} batches exceeds the device limit", gz);
    cmds.push_back(std::move(c));
  }
  // 1-D element grid of 256-thread groups, folded into 2-D past 65535 groups.
  static void grid(uint64_t items, uint32_t per_group, uint32_t& gx, uint32_t& gy) {
    uint64_t groups = std::max<uint64_t>(1, (items + per_group - 1) / per_group);
    gx = uint32_t(std::min<uint64_t>(groups, 65535));
    gy = uint32_t((groups + gx - 1) / gx);
  }
  void copy(Loc src, Loc dst) {
    Cmd c;
    c.kind = Cmd::copy;
    c.src = src;
    c.dst = dst;
    cmds.push_back(std::move(c));
  }
};

}  // namespace nxrt::vk
