// One engine step as a sum of operators (AIConfigurator's iteration-level model, its §4.3): per
// layer the QKV/attention/output projections, attention over the KV cache, the dense FFN or the
// routed experts (with their dispatch/combine), the tensor-parallel all-reduces and the
// memory-bound glue; then the LM head and, across pipeline stages, the activations' hand-off.
// Each operator's latency comes from the perf database, so every step carries its source labels.
#pragma once

#include "perf/estimate.hpp"
#include "perf/memory_model.hpp"
#include "perf/model_arch.hpp"
#include "perf/parallel_config.hpp"
#include "perf/perf_database.hpp"
#include "perf/precision.hpp"
#include "perf/system_spec.hpp"

#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace optkit::perf {

// The work of one step on one worker.
struct StepShape {
  double prefill_requests = 0; // sequences being prefilled this step
  double prefill_tokens = 0;   // new tokens per prefilled sequence
  double prefix = 0;           // cached tokens before them
  double decode_requests = 0;  // sequences decoding this step
  double kv_len = 0;           // cached tokens each decoding sequence attends to
  int tokens_per_decode = 1;   // > 1 when verifying speculative drafts
};

// One sequence's share of a step: `new_tokens` processed on top of `cached_tokens` already in its
// KV cache.
struct SequenceWork {
  double new_tokens = 0;
  double cached_tokens = 0;
};

// A step as a scheduler or simulator sees it: the sequences in it, each with its own length.
struct StepBatch {
  std::vector<SequenceWork> prefills; // prompt chunks
  std::vector<double> decode_kv_lens; // cached tokens each decoding sequence attends to
  int tokens_per_decode = 1;
};

// The uniform StepShape doing the same work as `batch`: the same tokens through every linear layer,
// the same causal-attention FLOPs over the prefills (Σ nᵢ·(cᵢ + (nᵢ + 1)/2), so one long prompt
// costs more than two halves), the same KV bytes read by the decodes (Σ kvᵢ). What is not
// conserved: the prefills' KV bytes, where the work-equivalent prefix stands for the real ones.
StepShape equivalent_shape(const StepBatch& batch);

// What a step's time goes to (plan estimate's breakdown): the dense GEMMs (projections, dense FFN,
// router, shared experts, LM head), attention over the KV cache, the collectives (tensor-parallel
// all-reduces, pipeline hand-offs), the routed experts with their dispatch and combine, and the
// memory-bound glue (norms, rotary, KV writes, activation functions, the embedding gather).
enum class StepPart { gemm, attention, communication, moe, memory };
constexpr std::size_t kStepParts = 5;
std::string step_part_name(StepPart part); // "gemm", "attention", "communication", "moe", "memory"

struct StepParts {
  std::array<Estimate, kStepParts> parts{};

  Estimate& operator[](StepPart part) { return parts[std::size_t(part)]; }
  const Estimate& operator[](StepPart part) const { return parts[std::size_t(part)]; }
  StepParts& operator+=(const StepParts& other);
  StepParts scaled(double factor) const;
  // The parts summed in the order of the enum: what StepModel::step returns.
  Estimate total() const;
};

// Whose attention kernels a step runs: nullopt, optkit's own, which the perf database's attention
// tables time (`plan profile`); an engine, that engine's own (TensorRT-LLM's FMHA and XQA,
// FlashInfer, FlashAttention), priced at the speed of light over the efficiencies fitted to its
// published points (efficiency.engine_attention; engines without points take
// efficiency.attention and decode_attention).
using AttentionKernels = std::optional<Engine>;

// Thread-safe: concurrent callers may price steps on one model.
class StepModel {
public:
  StepModel(const ModelArch& model, const SystemSpec& system, const PerfDatabase& db, ParallelConfig parallel,
            ServingPrecision precision, double moe_power_law_alpha, AttentionKernels attention_kernels = std::nullopt);

  // Latency of one step through every pipeline stage (µs), and the same split by what it is spent on.
  Estimate step(const StepShape& shape) const { return step_parts(shape).total(); }
  StepParts step_parts(const StepShape& shape) const;
  Estimate step(const StepBatch& batch) const { return step(equivalent_shape(batch)); }
  // The parts a step adds up, for planners that place layers on devices one by one: one dense
  // decoder layer (projections, attention, FFN, collectives, glue) and the LM head with the
  // token embedding's lookup, for the same step.
  Estimate decoder_layer(const StepShape& shape) const;
  Estimate lm_head(const StepShape& shape) const;
  // Interval between a decoding sequence's tokens with `batch` sequences in flight: with pipeline
  // stages the batch is split into pp micro-batches that keep every stage busy.
  Estimate decode_interval(double batch, double kv_len, int tokens_per_decode = 1) const {
    return step(decode_shape(batch, kv_len, tokens_per_decode));
  }
  // The step decode_interval prices: one micro-batch of the batch's sequences.
  StepShape decode_shape(double batch, double kv_len, int tokens_per_decode = 1) const;

  const ParallelConfig& parallel() const { return m_parallel; }

private:
  const ModelArch& m_model;
  const SystemSpec& m_system;
  const PerfDatabase& m_db;
  ParallelConfig m_parallel;
  ServingPrecision m_precision;
  std::string m_gemm_kind;
  std::string m_kv_dtype;
  double m_imbalance = 1.0;
  // The engine's attention efficiencies, resolved once (nullopt: optkit's profiled kernels).
  std::optional<AttentionEfficiency> m_engine_kernels;

  // Token-count-dependent part of a layer (projections, FFN/MoE, collectives, glue), memoised for
  // the last few token counts: decode steps of one batch differ only in their attention.
  struct LinearMemo {
    double tokens = -1;
    double logit_rows = -1;
    StepParts dense_layer, moe_layer, head;
  };
  mutable std::mutex m_memo_mutex;
  mutable std::array<LinearMemo, 4> m_memo;
  mutable std::size_t m_memo_next = 0;

  LinearMemo linear_part(double tokens_per_rank, double logit_rows) const;
  LinearMemo price_linear_part(double tokens_per_rank, double logit_rows) const;
  Estimate attention(const StepShape& shape, double dp_share) const;
  Estimate prefill_attention(int heads, int kv_heads, int head_dim, double requests, double tokens,
                             double prefix) const;
  Estimate decode_attention(int heads, int kv_heads, int head_dim, double requests, double kv_len,
                            int tokens_per_decode) const;
  Estimate engine_attention(OpClass op_class, const OpCost& cost) const;
};

// Hottest expert-parallel rank's routed load over the mean, for experts whose popularity follows
// AIConfigurator's power law (Eq. 3, sampled at evenly spaced quantiles) placed on `ep` ranks in a fixed
// shuffled order. α = 0: balanced (1.0).
double expert_parallel_imbalance(int experts, int ep, double alpha);

} // namespace optkit::perf
