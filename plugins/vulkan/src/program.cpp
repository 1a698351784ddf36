#include "program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace nxrt::vk {

using sdk::fail;

QueryPool::QueryPool(Device& d) : dev(d) {
  VkQueryPoolCreateInfo ci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  ci.queryCount = 2;
  check_vk(vkCreateQueryPool(d.handle(), &ci, nullptr, &pool), "vkCreateQueryPool");
}

QueryPool::~QueryPool() { vkDestroyQueryPool(dev.handle(), pool, nullptr); }

std::pair<uint64_t, uint64_t> ticks_to_ns(uint64_t start, uint64_t end, uint32_t valid_bits, double period) {
  if (valid_bits > 0 && valid_bits < 64) {
    const uint64_t mask = (uint64_t(1) << valid_bits) - 1;
    start &= mask;
    end &= mask;
    if (end < start) end += mask + 1;  // the counter wrapped between the two writes
  }
  if (end < start) end = start;
  // The duration is scaled on its own so it keeps full precision on a large clock.
  const uint64_t s = uint64_t(double(start) * period);
  return {s, s + uint64_t(double(end - start) * period + 0.5)};
}

std::pair<uint64_t, uint64_t> Timing::read() {
  std::lock_guard lock(mu_);
  if (done_) return ns_;
  if (!pool_) fail(NXRT_INTERNAL, "timing of {} has no query pool", name);
  uint64_t t[2] = {0, 0};
  check_vk(vkGetQueryPoolResults(pool_->dev.handle(), pool_->pool, 0, 2, sizeof t, t, sizeof(uint64_t),
                                 VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
           "vkGetQueryPoolResults");
  ns_ = ticks_to_ns(t[0], t[1], bits_, period_);
  done_ = true;
  pool_.reset();
  return ns_;
}

size_t prepare_group(IrGraph& g) {
  // NXRT_VULKAN_NO_FUSION=1: one dispatch per node (A/B measurements, debugging).
  static const bool no_fusion = [] {
    const char* e = std::getenv("NXRT_VULKAN_NO_FUSION");
    return e && *e && *e != '0';
  }();
  return no_fusion ? 0 : fuse_epilogues(g);
}

Program::Program(Device& dev, IrGraph g) : dev_(dev), g_(std::move(g)) {
  nodes_in_ = g_.nodes.size();
  if (!g_.nodes.empty()) first_node_ = g_.nodes.front().index;
  // The profiling name: the op types in order, shortened for long groups
  // ("Conv+Clip+Conv+...(143 nodes)") so trace viewers stay readable.
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (i > 0 && op_types_.size() + g_.nodes[i].op.size() > 64) {
      op_types_ += fmt::format("+...({} nodes)", g_.nodes.size());
      break;
    }
    op_types_ += (i ? "+" : "") + g_.nodes[i].op;
  }
  fused_ = prepare_group(g_);
  VkCommandPoolCreateInfo ci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  ci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  ci.queueFamilyIndex = dev.info().queue_family;
  check_vk(vkCreateCommandPool(dev.handle(), &ci, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check_vk(vkAllocateCommandBuffers(dev.handle(), &ai, &cmd_), "vkAllocateCommandBuffers");
  // Compile every pipeline now, so the first run only records.
  // (Pipelines are created lazily by emit on the first run otherwise.)
}

Program::~Program() {
  try {
    wait_idle();
  } catch (...) {
  }
  dev_.queue_wait_idle();
  if (dpool_) vkDestroyDescriptorPool(dev_.handle(), dpool_, nullptr);
  vkDestroyCommandPool(dev_.handle(), pool_, nullptr);
  if (scratch_) dev_.free(scratch_);
}

void Program::wait_idle() {
  if (last_tl_) last_tl_->wait(last_val_);
}

static bool overlap(const Loc& a, const Loc& b) {
  return a.a == b.a && a.off < b.off + b.bytes && b.off < a.off + a.bytes;
}

std::shared_ptr<Timing> Program::run(const std::vector<Input>& inputs, const BindOutput& bind, Stream& s, bool profile) {
  profile = profile && dev_.timestamps();
  const size_t nv = g_.values.size();
  if (inputs.size() != g_.inputs.size()) fail(NXRT_INVALID_ARGUMENT, "kernel expects {} inputs, got {}", g_.inputs.size(), inputs.size());
  std::vector<Shape> shape(nv);
  std::vector<bool> known(nv, false);
  std::vector<Loc> loc(nv);
  for (size_t i = 0; i < inputs.size(); ++i) {
    int v = g_.inputs[i];
    if (v < 0) continue;
    shape[size_t(v)] = inputs[i].dims;
    known[size_t(v)] = inputs[i].loc.a != nullptr;
    loc[size_t(v)] = inputs[i].loc;
  }
  // Shapes.
  std::vector<std::vector<const Shape*>> in_shapes(g_.nodes.size());
  std::vector<std::vector<Shape>> out_shapes(g_.nodes.size());
  for (size_t k = 0; k < g_.nodes.size(); ++k) {
    auto& n = g_.nodes[k];
    for (int v : n.in) {
      if (v >= 0 && !known[size_t(v)]) fail(NXRT_INTERNAL, "{}: input '{}' has no value", n.op, g_.values[size_t(v)].name);
      in_shapes[k].push_back(v >= 0 ? &shape[size_t(v)] : nullptr);
    }
    infer_shapes(g_, n, in_shapes[k], out_shapes[k]);
    for (size_t o = 0; o < n.out.size(); ++o) {
      int v = n.out[o];
      if (v < 0) continue;
      shape[size_t(v)] = out_shapes[k][o];
      known[size_t(v)] = true;
    }
  }
  // Outputs.
  std::vector<bool> is_out(nv, false);
  for (size_t i = 0; i < g_.outputs.size(); ++i) {
    int v = g_.outputs[i];
    if (v < 0) continue;
    auto& val = g_.values[size_t(v)];
    loc[size_t(v)] = bind(i, val.dtype, shape[size_t(v)]);
    is_out[size_t(v)] = true;
  }
  // Signature: input/output placement and shapes.
  std::vector<uint64_t> sig;
  for (size_t i = 0; i < inputs.size(); ++i) {
    sig.push_back(inputs[i].loc.a ? inputs[i].loc.a->id : 0);
    sig.push_back(inputs[i].loc.off);
    sig.push_back(inputs[i].dims.size());
    for (auto d : inputs[i].dims) sig.push_back(uint64_t(d));
  }
  for (int v : g_.outputs) {
    if (v < 0) continue;
    sig.push_back(loc[size_t(v)].a ? loc[size_t(v)].a->id : 0);
    sig.push_back(loc[size_t(v)].off);
  }
  wait_idle();  // the command buffer and scratch of the previous run must be free
  // The queries are about to be reset by the next submission: keep the results of
  // the previous one (complete after wait_idle) in its Timing. Runs collect their
  // Timings in on_run_end, usually before this, so this is the rare case of a
  // kernel resubmitted before its run ended (overlapping runs, a kernel run twice).
  if (pending_) {
    pending_->read();
    pending_.reset();
  }
  reused_ = recorded_ && sig == sig_ && recorded_profiled_ == profile;
  if (!reused_) {
    // Buffer plan for internal values: root (alias target) of each value,
    // last use, then first-fit placement in one scratch buffer.
    std::vector<int> root(nv);
    for (size_t v = 0; v < nv; ++v) root[v] = int(v);
    for (auto& n : g_.nodes)
      if (is_view(n) && n.out[0] >= 0 && !is_out[size_t(n.out[0])]) root[size_t(n.out[0])] = root[size_t(n.in[0])];
    std::vector<size_t> last(nv, 0);
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      for (int v : g_.nodes[k].in)
        if (v >= 0) last[size_t(root[size_t(v)])] = std::max(last[size_t(root[size_t(v)])], k);
    struct Live { uint64_t off, size; size_t until; };
    std::vector<Live> live;
    std::vector<uint64_t> offs(nv, UINT64_MAX);
    uint64_t scratch_size = 0;
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      auto& n = g_.nodes[k];
      live.erase(std::remove_if(live.begin(), live.end(), [&](const Live& l) { return l.until < k; }), live.end());
      for (int v : n.out) {
        if (v < 0 || is_out[size_t(v)] || root[size_t(v)] != v) continue;
        uint64_t bytes = uint64_t(std::max<int64_t>(1, [&] {
                           int64_t e = 1;
                           for (auto d : shape[size_t(v)]) e *= d;
                           return e;
                         }())) * sdk::dtype_size(g_.values[size_t(v)].dtype);
        bytes = (bytes + 255) / 256 * 256;
        std::sort(live.begin(), live.end(), [](auto& a, auto& b) { return a.off < b.off; });
        uint64_t off = 0;
        for (auto& l : live) {
          if (off + bytes <= l.off) break;
          off = std::max(off, l.off + l.size);
        }
        live.push_back({off, bytes, std::max(last[size_t(v)], k)});
        offs[size_t(v)] = off;
        scratch_size = std::max(scratch_size, off + bytes);
      }
    }
    scratch_bytes_ = scratch_size;
    if (scratch_size && (!scratch_ || scratch_->size < scratch_size)) {
      if (scratch_) dev_.free(scratch_);
      scratch_ = nullptr;
      scratch_ = dev_.alloc(scratch_size, false);
    }
    // Locations, then commands.
    std::vector<Cmd> cmds;
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      auto& n = g_.nodes[k];
      for (size_t o = 0; o < n.out.size(); ++o) {
        int v = n.out[o];
        if (v < 0 || is_out[size_t(v)]) continue;
        int64_t e = 1;
        for (auto d : shape[size_t(v)]) e *= d;
        uint64_t bytes = uint64_t(e) * sdk::dtype_size(g_.values[size_t(v)].dtype);
        if (root[size_t(v)] != v) loc[size_t(v)] = Loc{loc[size_t(root[size_t(v)])].a, loc[size_t(root[size_t(v)])].off, bytes};
        else loc[size_t(v)] = Loc{scratch_, offs[size_t(v)], bytes};
      }
      for (size_t o = 0; o < n.out.size(); ++o) {
        int v = n.out[o];
        if (v >= 0 && is_out[size_t(v)]) {
          int64_t e = 1;
          for (auto d : shape[size_t(v)]) e *= d;
          loc[size_t(v)].bytes = uint64_t(e) * sdk::dtype_size(g_.values[size_t(v)].dtype);
        }
      }
      if (is_view(n) && n.out[0] >= 0 && !is_out[size_t(n.out[0])]) continue;  // pure alias
      std::vector<Loc> il, ol;
      for (int v : n.in) il.push_back(v >= 0 ? loc[size_t(v)] : Loc{});
      for (int v : n.out) ol.push_back(v >= 0 ? loc[size_t(v)] : Loc{});
      emit_node(dev_, g_, n, il, in_shapes[k], ol, out_shapes[k], cmds);
    }
    // Descriptor sets.
    uint32_t sets = 0, descs = 0;
    for (auto& c : cmds)
      if (c.kind == Cmd::dispatch) {
        sets++;
        descs += uint32_t(c.binds.size());
      }
    if (sets > dpool_sets_ || descs > dpool_descs_) {
      if (dpool_) vkDestroyDescriptorPool(dev_.handle(), dpool_, nullptr);
      dpool_ = VK_NULL_HANDLE;
      dpool_sets_ = std::max(sets, 16u);
      dpool_descs_ = std::max(descs, 64u);
      VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, dpool_descs_};
      VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      pci.maxSets = dpool_sets_;
      pci.poolSizeCount = 1;
      pci.pPoolSizes = &ps;
      check_vk(vkCreateDescriptorPool(dev_.handle(), &pci, nullptr, &dpool_), "vkCreateDescriptorPool");
    } else if (dpool_) {
      vkResetDescriptorPool(dev_.handle(), dpool_, 0);
    }
    std::vector<VkDescriptorSet> dsets(sets);
    {
      std::vector<VkDescriptorSetLayout> layouts;
      for (auto& c : cmds)
        if (c.kind == Cmd::dispatch) layouts.push_back(c.pipeline->set_layout);
      if (sets) {
        VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
        ai.descriptorPool = dpool_;
        ai.descriptorSetCount = sets;
        ai.pSetLayouts = layouts.data();
        check_vk(vkAllocateDescriptorSets(dev_.handle(), &ai, dsets.data()), "vkAllocateDescriptorSets");
      }
      std::vector<VkDescriptorBufferInfo> infos;
      infos.reserve(descs);
      std::vector<VkWriteDescriptorSet> writes;
      uint32_t si = 0;
      const uint64_t max_range = dev_.limits().maxStorageBufferRange;
      for (auto& c : cmds) {
        if (c.kind != Cmd::dispatch) continue;
        for (uint32_t b = 0; b < c.binds.size(); ++b) {
          Loc l = c.binds[b];
          if (!l.a) fail(NXRT_INTERNAL, "unbound buffer in a dispatch");
          uint64_t range = std::max<uint64_t>(4, (l.bytes + 3) / 4 * 4);
          range = std::min<uint64_t>(range, l.a->size - l.off);
          if (range > max_range) fail(NXRT_UNSUPPORTED, "a {}-byte tensor exceeds maxStorageBufferRange ({})", range, max_range);
          infos.push_back({l.a->buffer, l.off, range});
          VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
          w.dstSet = dsets[si];
          w.dstBinding = b;
          w.descriptorCount = 1;
          w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
          w.pBufferInfo = &infos.back();
          writes.push_back(w);
        }
        si++;
      }
      if (!writes.empty()) vkUpdateDescriptorSets(dev_.handle(), uint32_t(writes.size()), writes.data(), 0, nullptr);
    }
    // Record, with a barrier only where a command touches memory that an
    // earlier command since the last barrier wrote (RAW, WAW) or read (WAR).
    recorded_ = false;  // until the recording completes
    check_vk(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    check_vk(vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
    if (profile) {
      // The reset is part of the reused command buffer, ahead of the writes, so every
      // submission writes fresh queries (reading unreset queries is invalid).
      if (!queries_) queries_ = std::make_shared<QueryPool>(dev_);
      vkCmdResetQueryPool(cmd_, queries_->pool, 0, 2);
      vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_->pool, 0);
    }
    std::vector<Loc> pend_w, pend_r;
    const Pipeline* bound = nullptr;
    uint32_t si = 0;
    dispatches_ = barriers_ = 0;
    for (auto& c : cmds) {
      std::vector<Loc> r, w;
      if (c.kind == Cmd::dispatch) {
        for (size_t b = 0; b < c.binds.size(); ++b) (c.writes[b] ? w : r).push_back(c.binds[b]);
      } else if (c.kind == Cmd::copy) {
        r.push_back(c.src);
        w.push_back(c.dst);
        w.back().bytes = std::min(c.src.bytes, c.dst.bytes);
      } else {
        w.push_back(c.dst);
      }
      bool hazard = false;
      for (auto& x : r)
        for (auto& p : pend_w) hazard = hazard || overlap(x, p);
      for (auto& x : w) {
        for (auto& p : pend_w) hazard = hazard || overlap(x, p);
        for (auto& p : pend_r) hazard = hazard || overlap(x, p);
      }
      if (hazard) {
        full_barrier(cmd_);
        barriers_++;
        pend_w.clear();
        pend_r.clear();
      }
      pend_w.insert(pend_w.end(), w.begin(), w.end());
      pend_r.insert(pend_r.end(), r.begin(), r.end());
      if (c.kind == Cmd::dispatch) {
        if (bound != c.pipeline) {
          vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipeline->pipeline);
          bound = c.pipeline;
        }
        vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipeline->layout, 0, 1, &dsets[si++], 0, nullptr);
        vkCmdPushConstants(cmd_, c.pipeline->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, uint32_t(c.push.size() * 4), c.push.data());
        vkCmdDispatch(cmd_, c.gx, c.gy, c.gz);
        dispatches_++;
      } else if (c.kind == Cmd::copy) {
        uint64_t bytes = std::min(c.src.bytes, c.dst.bytes);
        if (bytes) {
          VkBufferCopy region{c.src.off, c.dst.off, bytes};
          vkCmdCopyBuffer(cmd_, c.src.a->buffer, c.dst.a->buffer, 1, &region);
        }
      } else {
        if (!c.data.empty()) vkCmdUpdateBuffer(cmd_, c.dst.a->buffer, c.dst.off, c.data.size() * 4, c.data.data());
      }
    }
    host_barrier(cmd_);
    if (profile) vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_->pool, 1);
    check_vk(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
    // NXRT_VULKAN_STATS=1: one line per recording (debugging and benchmarks).
    static const bool stats = [] {
      const char* e = std::getenv("NXRT_VULKAN_STATS");
      return e && *e && *e != '0';
    }();
    if (stats)
      std::fprintf(stderr, "nxrt-vulkan stats: group of %zu nodes, %zu fused epilogues, %zu dispatches, %zu barriers\n",
                   nodes_in_, fused_, dispatches_, barriers_);
    recorded_ = true;
    recorded_profiled_ = profile;
    sig_ = std::move(sig);
  }
  last_val_ = s.submit(cmd_);
  last_tl_ = s.timeline();
  if (!profile) return nullptr;
  pending_ = std::make_shared<Timing>(first_node_, op_types_, queries_, dev_.info().timestamp_bits, dev_.info().timestamp_period);
  return pending_;
}

}  // namespace nxrt::vk
