// The host's definition of the ABI's claim sink: what one EP said about one view.
#pragma once
#include <nxrt_ep.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

struct nxrt_claim_sink {
  const nxrt_graph* view = nullptr;
  std::string plugin;
  bool fused_allowed = false;
  std::set<size_t> in_view;
  std::vector<std::vector<size_t>> groups;
  std::set<size_t> claimed;
  std::map<size_t, std::pair<nxrt_refusal, std::string>> refusals;
  std::string error;  // first protocol violation; the partitioner reports it
};
