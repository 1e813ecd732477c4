// One pass of activation rows through decoder layers: RMSNorm, q/k/v projections (+ bias, q/k
// norm), RoPE, grouped-query attention over the KV cache (a window, a soft-cap), the output
// projection, SwiGLU or GeGLU, and Gemma's norms on each sub-block's output. The
// step's intermediate buffers live here and are reused from layer to layer and step to step, so
// a decode step allocates nothing once the largest batch has been seen.
#pragma once

#include "core/thread_pool.hpp"
#include "runtime/decoder_weights.hpp"
#include "runtime/delta_variant.hpp"
#include "runtime/kv_cache.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace optkit::runtime {

// Where a decoder layer's linear layers read their input: q/k/v share the normed hidden state,
// o reads the attention output, gate/up share the post-attention normed state, down reads
// silu(gate)·up.
enum class LinearInput { attention_in, attention_out, mlp_in, mlp_hidden };

// Sees every linear input of a layer (compress calibration).
class ActivationTap {
public:
  virtual ~ActivationTap() = default;
  // x is [rows, cols] for `sequences` whole sequences.
  virtual void observe(LinearInput input, const float* x, std::int64_t rows, std::int64_t cols,
                       std::int64_t sequences) = 0;
  // A mixture-of-experts layer's MLP input h [rows, cols] and each row's chosen experts, `k` per
  // row ([rows · k]), as routed (the experts' calibration).
  virtual void observe_routing(const float* /*h*/, std::int64_t /*rows*/, std::int64_t /*cols*/,
                               std::span<const std::int64_t> /*chosen*/, std::int64_t /*k*/) {}
  // One expert's own rows of one of its inputs, [rows, cols]: mlp_in (its gate and up's, the rows
  // routed to it) or mlp_hidden (its down's); `expert` is kSharedExpert for Qwen2-MoE's shared one.
  virtual void observe_expert(std::int64_t /*expert*/, LinearInput /*input*/, const float* /*x*/, std::int64_t /*rows*/,
                              std::int64_t /*cols*/) {}
  // The keys and values going into the KV cache, [rows, kv_heads · head_dim] each, after RoPE
  // (the KV-cache scales' calibration).
  virtual void observe_cache(const float* /*k*/, const float* /*v*/, std::int64_t /*rows*/, std::int64_t /*kv_heads*/,
                             std::int64_t /*head_dim*/) {}
};

// A decoder layer's projections, in kDecoderLinears' order, and where each sits in the base's
// layer and in a variant's.
enum class Projection { q, k, v, o, gate, up, down };
inline constexpr std::unique_ptr<LinearWeight> DecoderLayerWeights::*kProjectionWeight[] = {
    &DecoderLayerWeights::q,    &DecoderLayerWeights::k,  &DecoderLayerWeights::v,   &DecoderLayerWeights::o,
    &DecoderLayerWeights::gate, &DecoderLayerWeights::up, &DecoderLayerWeights::down};
inline constexpr VariantMatrix VariantLayer::*kProjectionVariant[] = {
    &VariantLayer::q,    &VariantLayer::k,  &VariantLayer::v,   &VariantLayer::o,
    &VariantLayer::gate, &VariantLayer::up, &VariantLayer::down};

// The linear layers of a decoder layer by their HF names, and which input each reads.
struct LinearName {
  const char* name; // "self_attn.q_proj", ...
  LinearInput input;
};
inline constexpr LinearName kDecoderLinears[] = {
    {"self_attn.q_proj", LinearInput::attention_in}, {"self_attn.k_proj", LinearInput::attention_in},
    {"self_attn.v_proj", LinearInput::attention_in}, {"self_attn.o_proj", LinearInput::attention_out},
    {"mlp.gate_proj", LinearInput::mlp_in},          {"mlp.up_proj", LinearInput::mlp_in},
    {"mlp.down_proj", LinearInput::mlp_hidden}};

// What each activation row of a pass is: its sequence, its position, and the RoPE cos/sin of that
// position (rotary_dim / 2 each), computed once for all layers (local_*: Gemma 3's sliding layers').
// A sequence's rows are consecutive.
struct BatchRows {
  std::vector<SequenceId> sequence;
  std::vector<std::int64_t> position;
  std::vector<float> cos, sin, local_cos, local_sin;
  // Served variants: each row's (nullptr or empty: the base), and the runs of consecutive rows
  // that share one, which set_segments() finds. A batch sorted by variant has one run each.
  std::vector<const DeltaVariant*> variant;
  struct Segment {
    const DeltaVariant* variant;
    std::int64_t begin, end;
  };
  std::vector<Segment> segments;

  void clear() {
    sequence.clear();
    position.clear();
    variant.clear();
    segments.clear();
  }
  void set_segments();
  const DeltaVariant* variant_of(std::int64_t row) const {
    return variant.empty() ? nullptr : variant[static_cast<std::size_t>(row)];
  }
};

// y[rows, out] = x[rows, in] · Wᵀ for the base weight `base`, then, on each of the batch's variant
// segments, that variant's own matrix (`of`): a Δ added, a whole matrix in place of the base's.
void multiply_served(const LinearWeight& base, const BatchRows& batch,
                     const std::function<const VariantMatrix&(const DeltaVariant&)>& of, const float* x,
                     std::int64_t rows, std::int64_t in_width, float* y, std::int64_t out_width, ThreadPool& pool);

// A layer's linear layers by their names under "model.layers.<i>.", in the order compress takes
// them: kDecoderLinears for a dense layer (Phi-3's fused modules in place of their parts:
// self_attn.qkv_proj, o_proj, mlp.gate_up_proj, down_proj); for a mixture-of-experts layer the attention's four,
// then each expert's gate, up and down (`expert` >= 0), then the shared expert's (kSharedExpert);
// the router and the shared expert's gate are not among them.
inline constexpr std::int64_t kNotAnExpert = -1, kSharedExpert = -2;
struct LayerLinear {
  std::string name;
  LinearInput input; // for an expert's: mlp_in (gate, up) or mlp_hidden (down), its own rows'
  std::int64_t expert = kNotAnExpert;
};
std::vector<LayerLinear> layer_linears(const model::ModelConfig& config, std::int64_t layer);
// An expert's gate, up and down as layer_linears names them (kSharedExpert: the shared expert's).
std::array<std::string, 3> expert_linear_names(const model::ModelConfig& config, std::int64_t layer,
                                               std::int64_t expert);

// Rows [first, first + count) of a batch.
struct RowRange {
  std::int64_t first, count;
};
// multiply_served for the batch's rows `range` only: x and y hold those rows.
void multiply_served_rows(const LinearWeight& base, const BatchRows& batch,
                          const std::function<const VariantMatrix&(const DeltaVariant&)>& of, const float* x,
                          RowRange range, std::int64_t in_width, float* y, std::int64_t out_width, ThreadPool& pool);

// How often each expert of each mixture-of-experts layer was used by the passes so far, indexed
// [layer · num_experts + expert]: the rows routed to it and the times its weights were multiplied
// (once per pass that routed any row to it).
struct ExpertCounts {
  std::vector<std::int64_t> rows, calls;
};

// Rows of a pass that the MLP multiplies at once.
inline constexpr std::int64_t kMlpRowBlock = 2048;

class DecoderPass {
public:
  DecoderPass(const DecoderWeights& weights, ThreadPool& pool) : m_weights(&weights), m_pool(&pool) {}

  // Fills rows.cos/sin from rows.position.
  void fill_rope(BatchRows& rows) const;
  // x (rows × hidden) through layer `layer`, whose keys and values go to `cache` layer `cache_layer`.
  void run_layer(std::int64_t layer, KvCache& cache, std::int64_t cache_layer, const BatchRows& rows,
                 std::vector<float>& x, ActivationTap* tap);
  // Frees the activation buffers a pass grew (they are kept for the next pass otherwise).
  void release_scratch();
  const ExpertCounts& expert_counts() const { return m_expert_counts; }

private:
  // Grown as needed, never shrunk, never zeroed: every use writes before it reads.
  struct Buffer {
    std::unique_ptr<float[]> data;
    std::size_t capacity = 0;
    float* get(std::size_t size);
  };

  void attention(std::int64_t index, KvCache& cache, std::int64_t cache_layer, const BatchRows& rows,
                 std::vector<float>& x, ActivationTap* tap);
  void mlp(std::int64_t index, const BatchRows& rows, std::vector<float>& x, ActivationTap* tap,
           std::int64_t sequences);
  // out[rows, hidden] = Σ over each row's top-k experts of weight · expert(h), the experts' rows
  // grouped so that each selected expert's weights are read once (runtime/mixture_of_experts.cpp).
  void mixture_of_experts(std::int64_t index, const float* h, std::int64_t rows, float* out, ActivationTap* tap);
  // Expert `index`'s SwiGLU over n rows of `in`: its down projection's output [n, hidden], in a
  // buffer reused by the next call; a tap sees its inputs.
  const float* run_expert(const DecoderLayerWeights::Expert& expert, std::int64_t index, const float* in,
                          std::int64_t n, std::int64_t width, ActivationTap* tap);
  // x += the sub-block's output `y`, normed first where the architecture norms it (Gemma).
  void add_residual(std::int64_t index, const BatchRows& batch, std::vector<float>& x, float* y,
                    std::vector<float> DecoderLayerWeights::*norm, std::vector<float> VariantLayer::*own);
  // y[rows, out] = x[rows, in] · Wᵀ for projection p of layer `index`, each row's variant applied.
  void project(std::int64_t index, Projection p, const BatchRows& rows, const float* x, std::int64_t in_width, float* y,
               std::int64_t out_width);
  // The same for the batch's rows `range` only (x and y hold those rows).
  void project_rows(std::int64_t index, Projection p, const BatchRows& batch, RowRange range, const float* x,
                    std::int64_t in_width, float* y, std::int64_t out_width);

  const DecoderWeights* m_weights;
  ThreadPool* m_pool;
  Buffer m_normed, m_q, m_k, m_v, m_attended, m_projected, m_gate, m_up;
  Buffer m_router_logits, m_expert_in, m_expert_out; // a mixture of experts' routing and grouped rows
  struct Route {
    std::int64_t row;
    float weight;
  };
  std::vector<Route> m_routes;              // a layer's (row, weight) pairs, grouped by expert
  std::vector<std::int64_t> m_expert_first; // where each expert's pairs start in m_routes (+ the end)
  std::vector<std::int64_t> m_expert_next;  // the next free place of each expert's pairs while grouping
  std::vector<std::int64_t> m_chosen;       // each row's top-k experts, [rows · k]
  std::vector<float> m_chosen_weight;       // and their weights
  std::vector<std::int64_t> m_expert_order; // one row's experts, sorted by probability
  ExpertCounts m_expert_counts;
  std::vector<KvRows> m_row_cache; // each row's cached keys/values in the layer being run
};

} // namespace optkit::runtime
