// SplitQuant's cost models (seed 003 §IV-A) for one model over the GPU types of a cluster:
// memory per decoder layer at each bitwidth (weights with their group scales, the KV cache of
// the global batch at isl + osl), the embeddings and LM head the first stage holds, the peak
// activations of a prefill micro-batch; latency of one decoder layer per GPU type × bitwidth ×
// phase from that system's perf database (so `plan profile` data improves this planner as it
// does `plan`), with its source labels; the hand-off between consecutive stages from the links.
#pragma once

#include "hetero/cluster_spec.hpp"
#include "perf/estimate.hpp"
#include "perf/model_arch.hpp"
#include "perf/perf_database.hpp"

#include <map>
#include <memory>
#include <vector>

namespace optkit::hetero {

struct HeteroWorkload {
  int isl = 512;  // prompt tokens (padded batch, as SplitQuant assumes)
  int osl = 128;  // generated tokens, n
  int batch = 32; // global batch B
};

class LayerCosts {
public:
  // `databases` holds one perf database per group's system name (an empty one: roofline only).
  LayerCosts(const perf::ModelArch& model, const ClusterSpec& cluster,
             const std::map<std::string, const perf::PerfDatabase*>& databases, HeteroWorkload workload);
  ~LayerCosts();
  LayerCosts(const LayerCosts&) = delete;
  LayerCosts& operator=(const LayerCosts&) = delete;

  const perf::ModelArch& model() const { return m_model; }
  const HeteroWorkload& workload() const { return m_workload; }

  // Weights of one decoder layer at `bits` (3, 4, 8: one 16-bit scale per 128 weights; 16: none).
  double layer_weight_bytes(int bits) const;
  // KV cache of one decoder layer for the whole batch at isl + osl (16-bit entries).
  double layer_kv_bytes() const;
  // Token embedding and LM head (16-bit), held by the first stage (SplitQuant's master engine).
  double embedding_bytes() const;
  // Peak activations of one prefill micro-batch of `micro_batch` sequences.
  double activation_bytes(int micro_batch) const;
  // What a GPU of `group` offers the plan: its memory less the engine's runtime reserve.
  double capacity_bytes(const DeviceGroup& group) const;
  // The tensor-parallel degrees a stage on `group` may take: powers of two up to the group's GPUs
  // (one node), 8 and the model's KV heads (no replicated KV cache), dividing its heads and FFN.
  // A stage of TP k holds 1/k of each of its layers' weights and KV cache per GPU.
  std::vector<int> tensor_parallel_degrees(const DeviceGroup& group) const;

  // One decoder layer on `tp` of `group`'s GPUs at `bits` (its all-reduces included): a prefill
  // micro-batch of `micro_batch` prompts, or one decode step of `micro_batch` sequences at the
  // mean context isl + osl/2. 3-bit layers are priced with the 4-bit weight-only kernel (the perf
  // database has no 3-bit GEMM), so they are never faster than 4-bit; their memory is their own.
  perf::Estimate prefill_layer(const DeviceGroup& group, int bits, int micro_batch, int tp = 1) const;
  perf::Estimate decode_layer(const DeviceGroup& group, int bits, int micro_batch, int tp = 1) const;
  // The first stage's pre/post-processing (embedding lookup, LM head) for one micro-batch.
  perf::Estimate prefill_head(const DeviceGroup& group, int micro_batch, int tp = 1) const;
  perf::Estimate decode_head(const DeviceGroup& group, int micro_batch, int tp = 1) const;
  // Seconds to hand one micro-batch's hidden states from a stage on `from` to one on `to`.
  double prefill_transfer_s(const DeviceGroup& from, const DeviceGroup& to, int micro_batch) const;
  double decode_transfer_s(const DeviceGroup& from, const DeviceGroup& to, int micro_batch) const;

private:
  struct Models;
  const perf::ModelArch& m_model;
  const ClusterSpec& m_cluster;
  HeteroWorkload m_workload;
  std::unique_ptr<Models> m_models;
};

} // namespace optkit::hetero
