#include "hetero/stage_layouts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace optkit::hetero {

namespace {

// Each group's GPUs split into stages of powers-of-two TP degrees (largest first), every way the
// group's degrees allow: for 4 GPUs, 4 | 2+2 | 2+1+1 | 1+1+1+1.
void
add_partitions(int left, int largest, const std::vector<int>& degrees, std::vector<int>& parts,
               std::vector<std::vector<int>>& out) {
  if (left == 0) {
    out.push_back(parts);
    return;
  }
  for (auto d = degrees.rbegin(); d != degrees.rend(); ++d)
    if (*d <= largest && *d <= left) {
      parts.push_back(*d);
      add_partitions(left - *d, *d, degrees, parts, out);
      parts.pop_back();
    }
}

std::vector<std::vector<int>>
group_partitions(const LayerCosts& costs, const DeviceGroup& group) {
  const std::vector<int> degrees = costs.tensor_parallel_degrees(group);
  std::vector<std::vector<int>> out;
  std::vector<int> parts;
  add_partitions(group.count, degrees.back(), degrees, parts, out);
  return out;
}

} // namespace

std::vector<StageLayout>
stage_layouts(const LayerCosts& costs, const ClusterSpec& cluster, int max_stages) {
  std::vector<std::vector<std::vector<int>>> partitions;
  for (const auto& g : cluster.groups)
    partitions.push_back(group_partitions(costs, g));
  std::vector<int> groups(cluster.groups.size());
  std::iota(groups.begin(), groups.end(), 0);
  std::vector<StageLayout> layouts;
  do {
    // Odometer over the groups' partitions.
    std::vector<std::size_t> pick(groups.size(), 0);
    for (;;) {
      StageLayout layout;
      for (std::size_t k = 0; k < groups.size(); ++k)
        for (const int tp : partitions[std::size_t(groups[k])][pick[k]])
          layout.push_back({groups[k], tp});
      if (int(layout.size()) <= max_stages)
        layouts.push_back(std::move(layout));
      std::size_t k = 0;
      while (k < pick.size() && ++pick[k] == partitions[std::size_t(groups[k])].size())
        pick[k++] = 0;
      if (k == pick.size())
        break;
    }
  } while (std::next_permutation(groups.begin(), groups.end()));
  return layouts;
}

int
fewest_stages(const LayerCosts& costs, const ClusterSpec& cluster) {
  int stages = 0;
  for (const auto& g : cluster.groups) {
    const int largest = costs.tensor_parallel_degrees(g).back();
    stages += g.count / largest + __builtin_popcount(unsigned(g.count % largest));
  }
  return stages;
}

MicroBatches
micro_batches(int decode_micro_batch, const std::vector<int>& prefill_micro_batches, int batch, int stages) {
  MicroBatches m;
  m.xi = decode_micro_batch > 0 ? decode_micro_batch : (batch + stages - 1) / stages;
  m.etas = prefill_micro_batches;
  if (m.etas.empty())
    for (int eta = 1; eta <= m.xi; eta *= 2)
      m.etas.push_back(eta);
  return m;
}

PipelineProblem
build_problem(const LayerCosts& costs, const ClusterSpec& cluster, const std::vector<std::vector<double>>& omega,
              const std::vector<int>& bits, double theta, const StageLayout& order, int group_size, int eta, int xi) {
  const auto& w = costs.workload();
  const int layers = costs.model().layers;
  PipelineProblem p;
  p.bits = bits;
  p.theta = theta;
  p.prefill_micro_batches = std::ceil(double(w.batch) / eta);
  p.decode_micro_batches = std::ceil(double(w.batch) / xi);
  p.decode_rounds = std::max(0, w.osl - 1);
  const int units = layers / group_size;
  p.unit_bytes.assign(std::size_t(units), {});
  p.omega.assign(std::size_t(units), std::vector<double>(bits.size(), 0.0));
  for (int u = 0; u < units; ++u)
    for (std::size_t b = 0; b < bits.size(); ++b) {
      p.unit_bytes[std::size_t(u)].push_back(group_size * (costs.layer_weight_bytes(bits[b]) + costs.layer_kv_bytes()));
      for (int l = u * group_size; l < (u + 1) * group_size; ++l)
        p.omega[std::size_t(u)][b] += omega[std::size_t(l)][b];
    }
  const int n = static_cast<int>(order.size());
  for (int j = 0; j < n; ++j) {
    const StageSlot slot = order[std::size_t(j)];
    const auto& group = cluster.groups[std::size_t(slot.group)];
    const auto& next = cluster.groups[std::size_t(order[std::size_t((j + 1) % n)].group)];
    StageCosts s;
    for (const int b : bits) {
      s.prefill_s.push_back(group_size * costs.prefill_layer(group, b, eta, slot.tp).us * 1e-6);
      s.decode_s.push_back(group_size * costs.decode_layer(group, b, xi, slot.tp).us * 1e-6);
    }
    if (j == 0) {
      s.fixed_prefill_s = costs.prefill_head(group, eta, slot.tp).us * 1e-6;
      s.fixed_decode_s = costs.decode_head(group, xi, slot.tp).us * 1e-6;
    }
    if (n > 1) {
      s.transfer_prefill_s = costs.prefill_transfer_s(group, next, eta);
      s.transfer_decode_s = costs.decode_transfer_s(group, next, xi);
    }
    // The stage's tp GPUs hold 1/tp of each of its layers (and of the embeddings) apiece, so its
    // units' whole bytes must fit tp times one GPU's room.
    s.capacity_bytes = slot.tp * (costs.capacity_bytes(group) - costs.activation_bytes(eta)) -
                       (j == 0 ? costs.embedding_bytes() : 0.0);
    p.stages.push_back(std::move(s));
  }
  return p;
}

std::string
topology_text(const std::vector<GpuStage>& stages) {
  const bool uniform = std::all_of(stages.begin(), stages.end(), [&](const GpuStage& s) {
    return s.gpu == stages.front().gpu && s.tp == stages.front().tp;
  });
  if (!uniform) {
    std::vector<std::string> texts;
    for (const GpuStage& s : stages)
      texts.push_back(fmt::format("{} TP{}", s.gpu, s.tp));
    return fmt::format("{}", fmt::join(texts, " | "));
  }
  const int tp = stages.front().tp, pp = int(stages.size());
  if (pp == 1)
    return tp == 1 ? "1 GPU" : fmt::format("TP{}", tp);
  return tp == 1 ? fmt::format("PP{}", pp) : fmt::format("TP{}+PP{}", tp, pp);
}

std::string
layout_text(const ClusterSpec& cluster, const StageLayout& layout) {
  std::vector<GpuStage> stages;
  for (const StageSlot& s : layout)
    stages.push_back({cluster.groups[std::size_t(s.group)].gpu, s.tp});
  return topology_text(stages);
}

} // namespace optkit::hetero
