#include "runtime/transformer.hpp"

#include "core/error.hpp"
#include "runtime/kernels.hpp"
#include "runtime/weight_loader.hpp"

#include <cmath>
#include <fmt/format.h>

namespace optkit::runtime {

namespace {

void
add_bias(std::vector<float>& y, const std::vector<float>& bias, std::int64_t rows) {
  const auto n = static_cast<std::int64_t>(bias.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < n; ++i)
      y[static_cast<std::size_t>(r * n + i)] += bias[static_cast<std::size_t>(i)];
}

} // namespace

CpuTransformer::CpuTransformer(const std::filesystem::path& model_dir, RuntimeOptions options)
    : m_config(model::load_model_config(model_dir))
    , m_store(std::make_unique<model::WeightStore>(model_dir))
    , m_pool(options.threads)
    , m_cache(m_config.num_layers, m_config.kv_dim(), m_config.max_position_embeddings) {
  const auto& c = m_config;
  const auto quantization = load_quantization_config(model_dir);
  const auto* q = quantization ? &*quantization : nullptr;
  std::unique_ptr<quant::DeltaArtifact> delta;
  if (options.delta) {
    delta = std::make_unique<quant::DeltaArtifact>(*options.delta);
    const auto expected = delta->config().at("base").value("weights_sha256", "");
    if (expected != quant::weights_sha256(model_dir))
      throw InputError(fmt::format("delta {} was compressed against a different base than {} (weights SHA-256 "
                                   "differs); pass the base it names in delta_config.json",
                                   options.delta->string(), model_dir.string()));
  }
  auto load_module = [&](const std::string& module, std::int64_t rows, std::int64_t cols,
                         const quant::QuantizationConfig* quantization_config) {
    auto w = load_linear(*m_store, module, rows, cols, quantization_config);
    return delta ? merge_delta(std::move(w), *delta, module) : std::move(w);
  };
  auto load_norm = [&](const std::string& name, std::int64_t size) {
    return load_vector(*m_store, delta.get(), name, size);
  };
  m_embedding = load_module("model.embed_tokens", c.vocab_size, c.hidden_size, nullptr);
  if (c.tie_word_embeddings && !m_store->find("lm_head.weight").info) {
    m_lm_head = m_embedding.get();
  } else {
    m_lm_head_owned = load_module("lm_head", c.vocab_size, c.hidden_size, q);
    m_lm_head = m_lm_head_owned.get();
  }
  m_final_norm = load_norm("model.norm.weight", c.hidden_size);
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const auto p = fmt::format("model.layers.{}.", i);
    Layer l;
    l.input_norm = load_norm(p + "input_layernorm.weight", c.hidden_size);
    l.post_norm = load_norm(p + "post_attention_layernorm.weight", c.hidden_size);
    l.q = load_module(p + "self_attn.q_proj", c.q_dim(), c.hidden_size, q);
    l.k = load_module(p + "self_attn.k_proj", c.kv_dim(), c.hidden_size, q);
    l.v = load_module(p + "self_attn.v_proj", c.kv_dim(), c.hidden_size, q);
    l.o = load_module(p + "self_attn.o_proj", c.hidden_size, c.q_dim(), q);
    if (c.qkv_bias) {
      l.q_bias = load_norm(p + "self_attn.q_proj.bias", c.q_dim());
      l.k_bias = load_norm(p + "self_attn.k_proj.bias", c.kv_dim());
      l.v_bias = load_norm(p + "self_attn.v_proj.bias", c.kv_dim());
    }
    if (c.qk_norm) {
      l.q_norm = load_norm(p + "self_attn.q_norm.weight", c.head_dim);
      l.k_norm = load_norm(p + "self_attn.k_norm.weight", c.head_dim);
    }
    l.gate = load_module(p + "mlp.gate_proj", c.intermediate_size, c.hidden_size, q);
    l.up = load_module(p + "mlp.up_proj", c.intermediate_size, c.hidden_size, q);
    l.down = load_module(p + "mlp.down_proj", c.hidden_size, c.intermediate_size, q);
    m_layers.push_back(std::move(l));
  }
  for (const double f : model::rope_inverse_frequencies(c))
    m_inv_freq.push_back(static_cast<float>(f));
}

std::uint64_t
CpuTransformer::weight_bytes() const {
  std::uint64_t total = m_lm_head->storage_bytes();
  for (const auto& l : m_layers)
    for (const auto* w : {l.q.get(), l.k.get(), l.v.get(), l.o.get(), l.gate.get(), l.up.get(), l.down.get()})
      total += w->storage_bytes();
  return total;
}

std::vector<float>
CpuTransformer::forward(std::span<const SequenceInput> inputs) {
  const auto& c = m_config;
  BatchRows batch;
  for (std::size_t s = 0; s < inputs.size(); ++s) {
    const auto& in = inputs[s];
    if (in.tokens.empty())
      throw InputError(fmt::format("forward input {} has no tokens", s));
    for (std::size_t t = 0; t < s; ++t)
      if (inputs[t].sequence == in.sequence)
        throw InputError(fmt::format("sequence {} appears twice in one forward pass", in.sequence));
    const auto start = m_cache.reserve(in.sequence, static_cast<std::int64_t>(in.tokens.size()));
    for (std::size_t t = 0; t < in.tokens.size(); ++t) {
      if (in.tokens[t] < 0 || in.tokens[t] >= c.vocab_size)
        throw InputError(fmt::format("token id {} is outside the vocabulary of {}", in.tokens[t], c.vocab_size));
      batch.sequence.push_back(in.sequence);
      batch.position.push_back(start + static_cast<std::int64_t>(t));
    }
  }
  const auto rows = static_cast<std::int64_t>(batch.position.size());
  fill_rope(batch);
  const auto hidden = c.hidden_size;
  std::vector<float> x(static_cast<std::size_t>(rows * hidden));
  {
    std::int64_t r = 0;
    for (const auto& in : inputs)
      for (const auto token : in.tokens)
        m_embedding->row(token, x.data() + (r++) * hidden);
  }
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const auto& layer = m_layers[static_cast<std::size_t>(l)];
    attention_block(layer, m_cache, l, batch, x, nullptr);
    mlp_block(layer, x, nullptr, 0);
  }
  for (std::size_t s = 0; s < inputs.size(); ++s)
    m_cache.advance(inputs[s].sequence, static_cast<std::int64_t>(inputs[s].tokens.size()));

  std::vector<std::int64_t> out_rows;
  for (std::int64_t r = 0, s = 0; s < static_cast<std::int64_t>(inputs.size()); ++s) {
    const auto n = static_cast<std::int64_t>(inputs[static_cast<std::size_t>(s)].tokens.size());
    for (std::int64_t t = inputs[static_cast<std::size_t>(s)].all_logits ? 0 : n - 1; t < n; ++t)
      out_rows.push_back(r + t);
    r += n;
  }
  const auto out_count = static_cast<std::int64_t>(out_rows.size());
  std::vector<float> normed(static_cast<std::size_t>(out_count * hidden));
  for (std::int64_t i = 0; i < out_count; ++i)
    rms_norm(x.data() + out_rows[static_cast<std::size_t>(i)] * hidden, m_final_norm.data(), hidden, c.rms_norm_eps,
             normed.data() + i * hidden);
  std::vector<float> logits(static_cast<std::size_t>(out_count * c.vocab_size));
  m_lm_head->multiply(normed.data(), out_count, logits.data(), m_pool);
  return logits;
}

std::vector<float>
CpuTransformer::final_norm(std::span<const float> x) const {
  const auto hidden = m_config.hidden_size;
  std::vector<float> normed(x.size());
  for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(hidden); ++r)
    rms_norm(x.data() + static_cast<std::int64_t>(r) * hidden, m_final_norm.data(), hidden, m_config.rms_norm_eps,
             normed.data() + static_cast<std::int64_t>(r) * hidden);
  return normed;
}

void
CpuTransformer::fill_rope(BatchRows& batch) const {
  const auto rows = batch.position.size();
  const auto half = static_cast<std::size_t>(m_config.head_dim / 2);
  batch.cos.resize(rows * half);
  batch.sin.resize(batch.cos.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(batch.position[r]) * m_inv_freq[i];
      batch.cos[r * half + i] = std::cos(angle);
      batch.sin[r * half + i] = std::sin(angle);
    }
}

std::vector<float>
CpuTransformer::embed(std::span<const TokenId> tokens) const {
  const auto hidden = m_config.hidden_size;
  std::vector<float> x(tokens.size() * static_cast<std::size_t>(hidden));
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= m_config.vocab_size)
      throw InputError(fmt::format("token id {} is outside the vocabulary of {}", tokens[t], m_config.vocab_size));
    m_embedding->row(tokens[t], x.data() + static_cast<std::int64_t>(t) * hidden);
  }
  return x;
}

void
CpuTransformer::run_layer(std::int64_t layer, std::span<const std::int64_t> lengths, std::vector<float>& x,
                          ActivationTap* tap) {
  const auto& c = m_config;
  KvCache cache(1, c.kv_dim(), c.max_position_embeddings);
  BatchRows batch;
  for (const auto length : lengths) {
    const auto sequence = cache.add();
    cache.reserve(sequence, length);
    for (std::int64_t t = 0; t < length; ++t) {
      batch.sequence.push_back(sequence);
      batch.position.push_back(t);
    }
  }
  if (static_cast<std::int64_t>(x.size()) != static_cast<std::int64_t>(batch.position.size()) * c.hidden_size)
    throw InputError("run_layer: hidden states do not match the sequence lengths");
  fill_rope(batch);
  const auto& l = m_layers.at(static_cast<std::size_t>(layer));
  attention_block(l, cache, 0, batch, x, tap);
  mlp_block(l, x, tap, static_cast<std::int64_t>(lengths.size()));
}

std::unique_ptr<LinearWeight>&
CpuTransformer::linear_slot(std::int64_t layer, std::string_view name) {
  static constexpr std::pair<std::string_view, std::unique_ptr<LinearWeight> Layer::*> kSlots[] = {
      {"self_attn.q_proj", &Layer::q}, {"self_attn.k_proj", &Layer::k}, {"self_attn.v_proj", &Layer::v},
      {"self_attn.o_proj", &Layer::o}, {"mlp.gate_proj", &Layer::gate}, {"mlp.up_proj", &Layer::up},
      {"mlp.down_proj", &Layer::down}};
  auto& l = m_layers.at(static_cast<std::size_t>(layer));
  for (const auto& [slot_name, member] : kSlots)
    if (slot_name == name)
      return l.*member;
  throw InputError(fmt::format("no linear layer '{}' in a decoder layer", name));
}

const LinearWeight&
CpuTransformer::linear(std::int64_t layer, std::string_view name) const {
  return *const_cast<CpuTransformer*>(this)->linear_slot(layer, name);
}

void
CpuTransformer::replace_linear(std::int64_t layer, std::string_view name, std::unique_ptr<LinearWeight> weight) {
  auto& slot = linear_slot(layer, name);
  if (weight->rows() != slot->rows() || weight->cols() != slot->cols())
    throw InputError(fmt::format("replacement for layer {} {} has the wrong shape", layer, name));
  slot = std::move(weight);
}

std::vector<float>&
CpuTransformer::norm_weight(std::int64_t layer, LinearInput input) {
  auto& l = m_layers.at(static_cast<std::size_t>(layer));
  if (input == LinearInput::attention_in)
    return l.input_norm;
  if (input == LinearInput::mlp_in)
    return l.post_norm;
  throw InputError("only attention_in and mlp_in follow a norm");
}

void
CpuTransformer::attention_block(const Layer& layer, KvCache& cache, std::int64_t index, const BatchRows& batch,
                                std::vector<float>& x, ActivationTap* tap) {
  const auto& c = m_config;
  const auto rows = static_cast<std::int64_t>(batch.position.size());
  const auto hidden = c.hidden_size, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hd = c.head_dim;
  std::vector<float> h(x.size());
  m_pool.parallel_for(rows, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t r = a; r < b; ++r)
      rms_norm(x.data() + r * hidden, layer.input_norm.data(), hidden, c.rms_norm_eps, h.data() + r * hidden);
  });
  const auto sequences = cache.size();
  if (tap)
    tap->observe(LinearInput::attention_in, h.data(), rows, hidden, sequences);
  std::vector<float> q(static_cast<std::size_t>(rows * q_dim)), k(static_cast<std::size_t>(rows * kv_dim)),
      v(static_cast<std::size_t>(rows * kv_dim));
  layer.q->multiply(h.data(), rows, q.data(), m_pool);
  layer.k->multiply(h.data(), rows, k.data(), m_pool);
  layer.v->multiply(h.data(), rows, v.data(), m_pool);
  if (c.qkv_bias) {
    add_bias(q, layer.q_bias, rows);
    add_bias(k, layer.k_bias, rows);
    add_bias(v, layer.v_bias, rows);
  }
  const std::int64_t half = hd / 2;
  m_pool.parallel_for(rows, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t r = a; r < b; ++r) {
      const float* cos = batch.cos.data() + r * half;
      const float* sin = batch.sin.data() + r * half;
      for (std::int64_t head = 0; head < c.num_heads; ++head) {
        float* qh = q.data() + r * q_dim + head * hd;
        if (c.qk_norm)
          rms_norm(qh, layer.q_norm.data(), hd, c.rms_norm_eps, qh);
        apply_rope(qh, hd, cos, sin);
      }
      for (std::int64_t head = 0; head < c.num_kv_heads; ++head) {
        float* kh = k.data() + r * kv_dim + head * hd;
        if (c.qk_norm)
          rms_norm(kh, layer.k_norm.data(), hd, c.rms_norm_eps, kh);
        apply_rope(kh, hd, cos, sin);
      }
    }
  });
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto sequence = batch.sequence[static_cast<std::size_t>(r)];
    const auto pos = batch.position[static_cast<std::size_t>(r)];
    std::copy_n(k.data() + r * kv_dim, kv_dim, cache.keys(sequence, index) + pos * kv_dim);
    std::copy_n(v.data() + r * kv_dim, kv_dim, cache.values(sequence, index) + pos * kv_dim);
  }
  std::vector<float> attended(static_cast<std::size_t>(rows * q_dim));
  const std::int64_t group = c.num_heads / c.num_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  m_pool.parallel_for(rows * c.num_heads, [&](std::int64_t a, std::int64_t b) {
    std::vector<float> scores;
    for (std::int64_t job = a; job < b; ++job) {
      const std::int64_t r = job / c.num_heads, head = job % c.num_heads;
      const auto sequence = batch.sequence[static_cast<std::size_t>(r)];
      const auto pos = batch.position[static_cast<std::size_t>(r)];
      const std::int64_t first = c.sliding_window > 0 ? std::max<std::int64_t>(0, pos - c.sliding_window + 1) : 0;
      scores.resize(static_cast<std::size_t>(pos + 1));
      attend(q.data() + r * q_dim + head * hd, cache.keys(sequence, index), cache.values(sequence, index), kv_dim,
             (head / group) * hd, first, pos, hd, scale, scores.data(), attended.data() + r * q_dim + head * hd);
    }
  });
  if (tap)
    tap->observe(LinearInput::attention_out, attended.data(), rows, q_dim, sequences);
  std::vector<float> projected(x.size());
  layer.o->multiply(attended.data(), rows, projected.data(), m_pool);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] += projected[i];
}

void
CpuTransformer::mlp_block(const Layer& layer, std::vector<float>& x, ActivationTap* tap, std::int64_t sequences) {
  const auto& c = m_config;
  const auto hidden = c.hidden_size, inter = c.intermediate_size;
  const auto rows = static_cast<std::int64_t>(x.size()) / hidden;
  std::vector<float> h(x.size());
  m_pool.parallel_for(rows, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t r = a; r < b; ++r)
      rms_norm(x.data() + r * hidden, layer.post_norm.data(), hidden, c.rms_norm_eps, h.data() + r * hidden);
  });
  if (tap)
    tap->observe(LinearInput::mlp_in, h.data(), rows, hidden, sequences);
  std::vector<float> gate(static_cast<std::size_t>(rows * inter)), up(gate.size());
  layer.gate->multiply(h.data(), rows, gate.data(), m_pool);
  layer.up->multiply(h.data(), rows, up.data(), m_pool);
  m_pool.parallel_for(rows, [&](std::int64_t a, std::int64_t b) {
    silu_multiply(gate.data() + a * inter, up.data() + a * inter, (b - a) * inter);
  });
  if (tap)
    tap->observe(LinearInput::mlp_hidden, gate.data(), rows, inter, sequences);
  std::vector<float> down(x.size());
  layer.down->multiply(gate.data(), rows, down.data(), m_pool);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] += down[i];
}

} // namespace optkit::runtime
