#include "hetero/uniform_baselines.hpp"

#include "hetero/bitwidth_transfer.hpp"
#include "hetero/stage_layouts.hpp"

#include <algorithm>

namespace optkit::hetero {

namespace {

Topology
topology_of(const StageLayout& layout) {
  if (std::all_of(layout.begin(), layout.end(), [](const StageSlot& s) { return s.tp == 1; }))
    return Topology::pp;
  return layout.size() == 1 ? Topology::tp : Topology::tp_pp;
}

// The layout's best latency with every layer at `bits`, over the prefill micro-batches; 0 when no
// placement fits.
double
uniform_latency(const LayerCosts& costs, const ClusterSpec& cluster, const StageLayout& layout, int group_size,
                int bits, int decode_micro_batch, const std::vector<int>& prefill_micro_batches) {
  const int layers = costs.model().layers;
  const std::vector<std::vector<double>> no_indicator(std::size_t(layers), std::vector<double>(1, 0.0));
  const MicroBatches m =
      micro_batches(decode_micro_batch, prefill_micro_batches, costs.workload().batch, int(layout.size()));
  double best = 0;
  for (const int eta : m.etas) {
    const PipelineProblem problem =
        build_problem(costs, cluster, no_indicator, {bits}, 0.0, layout, group_size, eta, m.xi);
    auto start = greedy_start(problem);
    if (!start)
      continue;
    const Evaluation e = evaluate(problem, bitwidth_transfer(problem, std::move(*start)));
    if (e.feasible && (best == 0 || e.latency_s < best))
      best = e.latency_s;
  }
  return best;
}

// Σ ω over the layers with every layer at `bits` (0 at a width the indicator does not list: 16).
double
uniform_indicator(const std::vector<int>& bits, const std::vector<std::vector<double>>& omega, int width) {
  const auto option = std::find(bits.begin(), bits.end(), width);
  if (option == bits.end())
    return 0;
  double sum = 0;
  for (const auto& layer : omega)
    sum += layer[std::size_t(option - bits.begin())];
  return sum;
}

} // namespace

std::string
topology_name(Topology topology) {
  switch (topology) {
  case Topology::pp:
    return "PP";
  case Topology::tp:
    return "TP";
  case Topology::tp_pp:
    return "TP+PP";
  }
  return "?";
}

std::vector<UniformBaseline>
uniform_baselines(const LayerCosts& costs, const ClusterSpec& cluster, int group_size, const std::vector<int>& bits,
                  const std::vector<std::vector<double>>& omega, int decode_micro_batch,
                  const std::vector<int>& prefill_micro_batches) {
  const int lowest_bits = *std::min_element(bits.begin(), bits.end());
  std::vector<int> bit_choices = {16};
  if (lowest_bits != 16)
    bit_choices.push_back(lowest_bits);
  std::vector<UniformBaseline> rows;
  for (const int width : bit_choices)
    for (const Topology topology : {Topology::pp, Topology::tp, Topology::tp_pp})
      rows.push_back({topology, width, false, "-", 0, 0, uniform_indicator(bits, omega, width)});
  const auto& w = costs.workload();
  for (const auto& layout : stage_layouts(costs, cluster, costs.model().layers / group_size))
    for (std::size_t b = 0; b < bit_choices.size(); ++b) {
      UniformBaseline& row = rows[b * 3 + std::size_t(topology_of(layout))];
      const double latency = uniform_latency(costs, cluster, layout, group_size, bit_choices[b], decode_micro_batch,
                                             prefill_micro_batches);
      if (latency > 0 && (!row.fits || latency < row.latency_s)) {
        row.fits = true;
        row.layout = layout_text(cluster, layout);
        row.latency_s = latency;
        row.throughput_tokens_per_s = double(w.batch) * w.osl / latency;
      }
    }
  return rows;
}

} // namespace optkit::hetero
