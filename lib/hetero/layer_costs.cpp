#include "hetero/layer_costs.hpp"

#include "core/error.hpp"
#include "perf/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace optkit::hetero {

namespace {

perf::ServingPrecision
precision_for(int bits) {
  perf::ServingPrecision p;
  p.weights = bits >= 16 ? perf::Precision::bf16 : bits >= 8 ? perf::Precision::int8 : perf::Precision::int4;
  return p;
}

constexpr int kPricedBits[] = {4, 8, 16}; // the kernels the perf database prices

int
priced(int bits) {
  return bits >= 16 ? 16 : bits >= 8 ? 8 : 4;
}

} // namespace

// One StepModel per (system, priced bitwidth, tensor-parallel degree); StepModel keeps references,
// so they live here.
struct LayerCosts::Models {
  std::map<std::tuple<std::string, int, int>, std::unique_ptr<perf::StepModel>> steps;

  const perf::StepModel& at(const DeviceGroup& group, int bits, int tp) const {
    const auto found = steps.find({group.gpu, priced(bits), tp});
    if (found == steps.end())
      throw std::logic_error("LayerCosts: no step model for " + group.gpu + " at TP " + std::to_string(tp));
    return *found->second;
  }
};

LayerCosts::LayerCosts(const perf::ModelArch& model, const ClusterSpec& cluster,
                       const std::map<std::string, const perf::PerfDatabase*>& databases, HeteroWorkload workload)
    : m_model(model), m_cluster(cluster), m_workload(workload), m_models(std::make_unique<Models>()) {
  if (model.is_moe())
    throw InputError("--model " + model.name +
                     ": plan hetero partitions dense decoder models; this one is a mixture "
                     "of experts");
  for (const auto& group : cluster.groups) {
    const auto db = databases.find(group.gpu);
    if (db == databases.end() || db->second == nullptr)
      throw std::logic_error("LayerCosts: no perf database for " + group.gpu);
    for (const int tp : tensor_parallel_degrees(group))
      for (const int bits : kPricedBits) {
        auto& slot = m_models->steps[{group.gpu, bits, tp}];
        if (!slot)
          slot = std::make_unique<perf::StepModel>(m_model, group.system, *db->second, perf::ParallelConfig{tp},
                                                   precision_for(bits), 0.0);
      }
  }
}

LayerCosts::~LayerCosts() = default;

std::vector<int>
LayerCosts::tensor_parallel_degrees(const DeviceGroup& group) const {
  std::vector<int> degrees;
  for (int tp = 1; tp <= std::min({group.count, group.system.gpus_per_node, 8}); tp *= 2)
    if (m_model.heads % tp == 0 && m_model.kv_heads % tp == 0 && m_model.intermediate % tp == 0)
      degrees.push_back(tp);
  return degrees;
}

double
LayerCosts::layer_weight_bytes(int bits) const {
  const double parameters = m_model.attention_parameters() + m_model.dense_ffn_parameters();
  const double per_weight = bits >= 16 ? 2.0 : bits / 8.0 + 2.0 / 128.0;
  return parameters * per_weight + 2.0 * m_model.hidden * 2.0; // + the two RMSNorm vectors
}

double
LayerCosts::layer_kv_bytes() const {
  return double(m_workload.batch) * double(m_workload.isl + m_workload.osl) *
         m_model.kv_elements_per_token_per_layer() * 2.0;
}

double
LayerCosts::embedding_bytes() const {
  return double(m_model.vocab) * m_model.hidden * (m_model.tied_embeddings ? 1.0 : 2.0) * 2.0;
}

double
LayerCosts::activation_bytes(int micro_batch) const {
  // LLM-PQ's prefill peak: the layer's live tensors (norm, QKV, attention output, FFN) for the
  // micro-batch, 16-bit; attention scores are not materialised (fused attention).
  return double(micro_batch) * m_workload.isl * (10.0 * m_model.hidden + 2.0 * m_model.intermediate) * 2.0;
}

double
LayerCosts::capacity_bytes(const DeviceGroup& group) const {
  return group.system.memory_bytes() - group.system.runtime_reserve_gib * 1024.0 * 1024.0 * 1024.0;
}

perf::Estimate
LayerCosts::prefill_layer(const DeviceGroup& group, int bits, int micro_batch, int tp) const {
  perf::StepShape shape;
  shape.prefill_requests = micro_batch;
  shape.prefill_tokens = m_workload.isl;
  return m_models->at(group, bits, tp).decoder_layer(shape);
}

perf::Estimate
LayerCosts::decode_layer(const DeviceGroup& group, int bits, int micro_batch, int tp) const {
  perf::StepShape shape;
  shape.decode_requests = micro_batch;
  shape.kv_len = m_workload.isl + m_workload.osl / 2.0; // SplitQuant's n/2
  return m_models->at(group, bits, tp).decoder_layer(shape);
}

perf::Estimate
LayerCosts::prefill_head(const DeviceGroup& group, int micro_batch, int tp) const {
  perf::StepShape shape;
  shape.prefill_requests = micro_batch;
  shape.prefill_tokens = m_workload.isl;
  return m_models->at(group, 16, tp).lm_head(shape);
}

perf::Estimate
LayerCosts::decode_head(const DeviceGroup& group, int micro_batch, int tp) const {
  perf::StepShape shape;
  shape.decode_requests = micro_batch;
  shape.kv_len = m_workload.isl + m_workload.osl / 2.0;
  return m_models->at(group, 16, tp).lm_head(shape);
}

double
LayerCosts::prefill_transfer_s(const DeviceGroup& from, const DeviceGroup& to, int micro_batch) const {
  const Link link = m_cluster.link(from, to);
  const double bytes = double(micro_batch) * m_workload.isl * m_model.hidden * 2.0;
  return link.latency_us * 1e-6 + bytes / (link.bandwidth_gbs * 1e9);
}

double
LayerCosts::decode_transfer_s(const DeviceGroup& from, const DeviceGroup& to, int micro_batch) const {
  const Link link = m_cluster.link(from, to);
  const double bytes = double(micro_batch) * m_model.hidden * 2.0;
  return link.latency_us * 1e-6 + bytes / (link.bandwidth_gbs * 1e9);
}

} // namespace optkit::hetero
