#include "runtime/decoder_weights.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "model/layer_tensors.hpp"
#include "quant/quantizer.hpp"
#include "runtime/layer_vectors.hpp"
#include "runtime/weight_loader.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>

namespace optkit::runtime {

namespace {

// Logs a slow load's progress per layer with its remaining time: a load that reads or converts
// the weights (--no-mmap, quantized formats, a merged delta) takes minutes at 70B. Quiet for the
// first seconds, so a mapped load (milliseconds) says nothing.
class LoadProgress {
public:
  LoadProgress(const std::filesystem::path& model_dir, std::int64_t layers)
      : m_model(model_dir.filename().string())
      , m_layers(layers)
      , m_start(std::chrono::steady_clock::now())
      , m_last(m_start) {}
  void layer_done(std::int64_t done) {
    const auto now = std::chrono::steady_clock::now();
    if (now - m_last < kQuiet && done < m_layers)
      return;
    const double elapsed = std::chrono::duration<double>(now - m_start).count();
    if (elapsed < std::chrono::duration<double>(kQuiet).count())
      return;
    m_last = now;
    log::info("loading {}: layer {}/{}, {:.0f} s elapsed, about {:.0f} s left", m_model, done, m_layers, elapsed,
              elapsed / static_cast<double>(done) * static_cast<double>(m_layers - done));
  }

private:
  static constexpr std::chrono::seconds kQuiet{2};
  std::string m_model;
  std::int64_t m_layers;
  std::chrono::steady_clock::time_point m_start, m_last;
};

// A KV-cache scale tensor, [1] or [kv_heads, 1, 1], as one positive scale per KV head.
std::vector<float>
kv_head_scales(const model::WeightStore& store, const std::string& name, std::int64_t kv_heads) {
  const auto view = store.require(name);
  const auto count = static_cast<std::int64_t>(view.element_count());
  if (count != 1 && count != kv_heads)
    throw InputError(fmt::format("tensor '{}' holds {} values: a KV-cache scale is one per tensor or one per KV head "
                                 "({})",
                                 name, count, kv_heads));
  auto scales = view.to_floats();
  if (std::any_of(scales.begin(), scales.end(), [](float s) { return !(s > 0.0f) || !std::isfinite(s); }))
    throw InputError(fmt::format("tensor '{}' holds a KV-cache scale that is not a positive number", name));
  scales.resize(static_cast<std::size_t>(kv_heads), scales.front());
  return scales;
}

} // namespace

DecoderWeights::DecoderWeights(const std::filesystem::path& model_dir,
                               const std::optional<std::filesystem::path>& delta_dir, ActivationPrecision activations,
                               model::LoadMode weights, WeightLayout layout)
    : m_config(model::load_model_config(model_dir)), m_store(std::make_unique<model::WeightStore>(model_dir, weights)) {
  const auto& c = m_config;
  const auto quantization = load_quantization_config(model_dir);
  const auto* q = quantization ? &*quantization : nullptr;
  std::unique_ptr<quant::DeltaArtifact> delta;
  if (delta_dir) {
    delta = std::make_unique<quant::DeltaArtifact>(*delta_dir);
    check_delta_base(*delta, model_dir);
  }
  auto load_module = [&](const std::string& module, std::int64_t rows, std::int64_t cols,
                         const quant::QuantizationConfig* quantization_config) {
    auto w = load_linear(*m_store, module, rows, cols, quantization_config, activations, {}, layout);
    return delta ? merge_delta(std::move(w), *delta, module) : std::move(w);
  };
  // A dense layer's projection, by its own name even where it is stored fused (Phi-3).
  auto load_projection = [&](std::int64_t layer, const std::string& name, std::int64_t rows, std::int64_t cols) {
    const auto stored = model::stored_linear(c, name);
    const auto prefix = fmt::format("model.layers.{}.", layer);
    if (stored.stored_rows == 0)
      return load_module(prefix + name, rows, cols, q);
    return load_linear(*m_store, prefix + stored.module, rows, cols, q, activations,
                       {stored.first_row, stored.stored_rows}, layout);
  };
  auto read_vector = [&](const std::string& name, std::int64_t size) {
    return load_vector(*m_store, delta.get(), name, size);
  };
  m_embedding = load_module("model.embed_tokens", c.vocab_size, c.hidden_size, nullptr);
  if (c.tie_word_embeddings && !m_store->find("lm_head.weight").info) {
    m_lm_head = m_embedding.get();
  } else {
    m_lm_head_owned = load_module("lm_head", c.vocab_size, c.hidden_size, q);
    m_lm_head = m_lm_head_owned.get();
  }
  m_final_norm = held_gain(read_vector("model.norm.weight", c.hidden_size), c);
  const auto vectors = layer_vectors(c);
  LoadProgress progress(model_dir, c.num_layers);
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const auto p = fmt::format("model.layers.{}.", i);
    DecoderLayerWeights l;
    for (const auto& v : vectors) {
      auto values = read_vector(p + v.name, v.size);
      l.*v.base = v.gain ? held_gain(std::move(values), c) : std::move(values);
    }
    l.q = load_projection(i, "self_attn.q_proj", c.q_dim(), c.hidden_size);
    l.k = load_projection(i, "self_attn.k_proj", c.kv_dim(), c.hidden_size);
    l.v = load_projection(i, "self_attn.v_proj", c.kv_dim(), c.hidden_size);
    l.o = load_module(p + "self_attn.o_proj", c.hidden_size, c.q_dim(), q);
    if (q && q->kv_cache) {
      const auto [k_name, v_name] = quant::kv_scale_names(i);
      l.k_scale = kv_head_scales(*m_store, k_name, c.num_kv_heads);
      l.v_scale = kv_head_scales(*m_store, v_name, c.num_kv_heads);
    }
    l.f16_kv_cache = m_store->is_gguf();
    if (c.is_moe_layer(i)) {
      l.router = load_module(model::router_module(c, i), c.num_experts, c.hidden_size, nullptr);
      for (std::int64_t e = 0; e < c.num_experts; ++e) {
        const auto expert = [&](model::ExpertProjection which) {
          const auto [rows, cols] = model::expert_shape(c, which);
          return load_module(model::expert_module(c, i, e, which), rows, cols, q);
        };
        l.experts.push_back({expert(model::ExpertProjection::gate), expert(model::ExpertProjection::up),
                             expert(model::ExpertProjection::down)});
      }
      if (c.shared_expert_intermediate_size > 0) {
        const auto shared = [&](model::ExpertProjection which) {
          const auto [rows, cols] = model::shared_expert_shape(c, which);
          return load_module(model::shared_expert_module(i, which), rows, cols, q);
        };
        l.shared_expert = {shared(model::ExpertProjection::gate), shared(model::ExpertProjection::up),
                           shared(model::ExpertProjection::down)};
        l.shared_expert_gate = load_module(model::shared_expert_gate_module(i), 1, c.hidden_size, nullptr);
      }
    } else {
      l.gate = load_projection(i, "mlp.gate_proj", c.intermediate_size, c.hidden_size);
      l.up = load_projection(i, "mlp.up_proj", c.intermediate_size, c.hidden_size);
      l.down = load_module(p + "mlp.down_proj", c.hidden_size, c.intermediate_size, q);
    }
    m_layers.push_back(std::move(l));
    progress.layer_done(i + 1);
  }
  for (const double f : model::rope_inverse_frequencies(c))
    m_inv_freq.push_back(static_cast<float>(f));
  for (const double f : model::local_rope_inverse_frequencies(c))
    m_local_inv_freq.push_back(static_cast<float>(f));
  for (const double f : model::long_rope_inverse_frequencies(c))
    m_long_inv_freq.push_back(static_cast<float>(f));
  m_rope_attention_factor = static_cast<float>(model::rope_attention_factor(c));
  if (c.scaled_embeddings)
    m_embedding_multiplier = quant::round_to_dtype(std::sqrt(static_cast<float>(c.hidden_size)),
                                                   m_store->require("model.embed_tokens.weight").dtype());
}

std::unique_ptr<LinearWeight>&
DecoderWeights::linear(std::int64_t layer, std::string_view name) {
  static constexpr std::pair<std::string_view, std::unique_ptr<LinearWeight> DecoderLayerWeights::*> kSlots[] = {
      {"self_attn.q_proj", &DecoderLayerWeights::q}, {"self_attn.k_proj", &DecoderLayerWeights::k},
      {"self_attn.v_proj", &DecoderLayerWeights::v}, {"self_attn.o_proj", &DecoderLayerWeights::o},
      {"mlp.gate_proj", &DecoderLayerWeights::gate}, {"mlp.up_proj", &DecoderLayerWeights::up},
      {"mlp.down_proj", &DecoderLayerWeights::down}};
  auto& l = this->layer(layer);
  for (const auto& [slot_name, member] : kSlots)
    if (slot_name == name)
      return l.*member;
  // An expert's: "mlp.experts.3.gate_proj", "block_sparse_moe.experts.3.w1", "mlp.shared_expert.up_proj", ...;
  // the router ("mlp.gate", "block_sparse_moe.gate") and the shared expert's gate.
  const auto full = fmt::format("model.layers.{}.{}", layer, name);
  if (l.router && full == model::router_module(m_config, layer))
    return l.router;
  if (l.shared_expert_gate && full == model::shared_expert_gate_module(layer))
    return l.shared_expert_gate;
  const auto slot = [](DecoderLayerWeights::Expert & expert, model::ExpertProjection which) -> auto& {
    return which == model::ExpertProjection::gate ? expert.gate
           : which == model::ExpertProjection::up ? expert.up
                                                  : expert.down;
  };
  for (const auto which : {model::ExpertProjection::gate, model::ExpertProjection::up, model::ExpertProjection::down}) {
    for (std::size_t e = 0; e < l.experts.size(); ++e)
      if (full == model::expert_module(m_config, layer, static_cast<std::int64_t>(e), which))
        return slot(l.experts[e], which);
    if (l.shared_expert.gate && full == model::shared_expert_module(layer, which))
      return slot(l.shared_expert, which);
  }
  throw InputError(fmt::format("no linear layer '{}' in a decoder layer", name));
}

std::uint64_t
DecoderWeights::streamed_bytes() const {
  std::uint64_t total = m_lm_head->storage_bytes();
  for (const auto& l : m_layers) {
    for (const auto* w : {l.q.get(), l.k.get(), l.v.get(), l.o.get(), l.gate.get(), l.up.get(), l.down.get()})
      total += w ? w->storage_bytes() : 0;
    if (l.experts.empty())
      continue;
    std::uint64_t experts = 0;
    for (const auto& e : l.experts)
      experts += e.gate->storage_bytes() + e.up->storage_bytes() + e.down->storage_bytes();
    total +=
        l.router->storage_bytes() + experts / l.experts.size() * static_cast<std::uint64_t>(m_config.experts_per_token);
    if (l.shared_expert.gate)
      total += l.shared_expert_gate->storage_bytes() + l.shared_expert.gate->storage_bytes() +
               l.shared_expert.up->storage_bytes() + l.shared_expert.down->storage_bytes();
  }
  return total;
}

} // namespace optkit::runtime
