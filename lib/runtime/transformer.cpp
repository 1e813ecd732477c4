#include "runtime/transformer.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "runtime/kernels.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace optkit::runtime {

namespace {

// The cache's options: no prefix caching for LongRoPE, whose keys depend on the sequence's length.
KvCacheOptions
cache_options(const model::ModelConfig& config, KvCacheOptions options) {
  if (options.prefix_caching && config.long_rope_threshold() > 0) {
    log::warn("prefix caching is off for {}: with LongRoPE a prefix's keys depend on the whole sequence's length",
              config.architecture_name);
    options.prefix_caching = false;
  }
  return options;
}

} // namespace

CpuTransformer::CpuTransformer(const std::filesystem::path& model_dir, RuntimeOptions options)
    : m_dir(model_dir)
    , m_weights(model_dir, options.delta, options.activations, options.weight_loading)
    , m_pool(options.threads)
    , m_pass(m_weights, m_pool)
    , m_device_index(options.device)
    , m_precision(options.device_precision)
    , m_int8_delta_activations(options.int8_delta_activations)
    , m_activations(options.activations)
    , m_weight_loading(options.weight_loading)
    , m_kv_options(options.kv_cache)
    , m_device(open_device(std::nullopt))
    , m_cache(m_weights.config().num_layers, m_weights.config().kv_dim(), m_weights.config().max_position_embeddings,
              m_device ? m_device->cache_options() : cache_options(m_weights.config(), options.kv_cache)) {}

void
CpuTransformer::remove_sequence(SequenceId sequence) {
  m_cache.remove(sequence);
  m_short_tokens.erase(sequence);
}

std::span<const SequenceInput>
CpuTransformer::recompute_crossing(std::span<const SequenceInput> inputs) {
  const auto threshold = config().long_rope_threshold();
  m_prefix_rows.assign(inputs.size(), 0);
  if (threshold == 0)
    return inputs;
  m_recomputed_inputs.assign(inputs.begin(), inputs.end());
  m_recomputed_tokens.resize(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& in = inputs[i];
    const auto length = m_cache.length(in.sequence);
    if (length == 0 || length > threshold || length + static_cast<std::int64_t>(in.tokens.size()) <= threshold)
      continue;
    auto& tokens = m_recomputed_tokens[i];
    tokens = m_short_tokens.at(in.sequence);
    tokens.insert(tokens.end(), in.tokens.begin(), in.tokens.end());
    m_recomputed_inputs[i].tokens = tokens;
    m_prefix_rows[i] = length;
    m_cache.clear(in.sequence);
  }
  return m_recomputed_inputs;
}

void
CpuTransformer::remember_short_tokens(std::span<const SequenceInput> inputs) {
  const auto threshold = config().long_rope_threshold();
  if (threshold == 0)
    return;
  for (const auto& in : inputs) {
    if (m_cache.length(in.sequence) > threshold) {
      m_short_tokens.erase(in.sequence);
      continue;
    }
    auto& tokens = m_short_tokens[in.sequence];
    tokens.insert(tokens.end(), in.tokens.begin(), in.tokens.end());
  }
}

std::unique_ptr<DeviceEngine>
CpuTransformer::open_device(std::optional<std::int64_t> kv_blocks) const {
  if (m_device_index < 0)
    return nullptr;
  if (const auto why = DeviceEngine::unsupported(config()); !why.empty())
    throw InputError(fmt::format("{}: the CUDA engine does not run {}'s {} yet; run it with --device cpu",
                                 m_dir.string(), config().architecture_name, why));
  return std::make_unique<DeviceEngine>(m_device_index, m_weights, m_precision, m_kv_options, kv_blocks);
}

std::int32_t
CpuTransformer::add_variant(const std::filesystem::path& delta_dir) {
  const auto id = static_cast<std::int32_t>(m_variants.size());
  set_variant(id, load_variant(delta_dir));
  return id;
}

std::unique_ptr<DeltaVariant>
CpuTransformer::load_variant(const std::filesystem::path& delta_dir, const std::function<void()>& checkpoint) const {
  auto variant = std::make_unique<DeltaVariant>(m_weights, m_dir, delta_dir, checkpoint);
  variant->set_int8_activations(m_int8_delta_activations && !m_device); // the device's SBMM reads fp32 activations
  if (m_device)
    if (const auto why = DeviceEngine::unsupported(*variant, config().num_layers); !why.empty())
      throw InputError(fmt::format("{}: {}; serve it with --device cpu", delta_dir.string(), why));
  return variant;
}

void
CpuTransformer::set_variant(std::int32_t id, std::unique_ptr<DeltaVariant> variant) {
  if (id < 0 || id > 1'000'000)
    throw InputError(fmt::format("variant id {} is out of range", id));
  if (static_cast<std::size_t>(id) >= m_variants.size())
    m_variants.resize(static_cast<std::size_t>(id) + 1);
  if (m_device) // before the old variant goes: the device forgets it first
    m_device->set_variant(id, variant.get());
  m_variants[static_cast<std::size_t>(id)] = std::move(variant);
  m_cache.forget_variant(id); // keys and values the old weights under this id computed
}

void
CpuTransformer::reload(const std::filesystem::path& model_dir, const std::optional<std::filesystem::path>& delta) {
  if (m_cache.used_blocks() > 0) // sequences may exist, empty: the step about to run just added them
    throw InputError(fmt::format("cannot swap weights while {} KV blocks hold keys and values computed with them",
                                 m_cache.used_blocks()));
  if (std::any_of(m_variants.begin(), m_variants.end(), [](const auto& v) { return v != nullptr; }))
    throw InputError("cannot swap weights while deltas are served beside them");
  DecoderWeights next(model_dir, delta, m_activations, m_weight_loading); // in full before the old weights go
  if (const auto why = model::shape_difference(config(), next.config()); !why.empty())
    throw InputError(fmt::format("{}: cannot swap in weights of another shape than {}'s ({})", model_dir.string(),
                                 m_dir.string(), why));
  m_device.reset(); // the old weights' copy goes before the new one is made
  m_weights = std::move(next);
  m_dir = model_dir;
  m_cache.forget_all();
  m_device = open_device(m_cache.capacity_blocks()); // the same block ids and capacity
}

std::vector<float>
CpuTransformer::forward(std::span<const SequenceInput> requested) {
  const auto& c = config();
  auto inputs = requested;
  // Everything checked before anything changes: a refused batch leaves every sequence as it was.
  std::int64_t new_blocks = 0;
  for (std::size_t s = 0; s < inputs.size(); ++s) {
    const auto& in = inputs[s];
    if (in.tokens.empty())
      throw InputError(fmt::format("forward input {} has no tokens", s));
    for (std::size_t t = 0; t < s; ++t)
      if (inputs[t].sequence == in.sequence)
        throw InputError(fmt::format("sequence {} appears twice in one forward pass", in.sequence));
    for (const auto token : in.tokens)
      if (token < 0 || token >= c.vocab_size)
        throw InputError(fmt::format("token id {} is outside the vocabulary of {}", token, c.vocab_size));
    if (in.variant < -1 || in.variant >= static_cast<std::int32_t>(m_variants.size()) ||
        (in.variant >= 0 && !m_variants[static_cast<std::size_t>(in.variant)]))
      throw InputError(fmt::format("forward input {} names variant {}, which is not loaded", s, in.variant));
    const auto length = m_cache.length(in.sequence) + static_cast<std::int64_t>(in.tokens.size());
    if (length > c.max_position_embeddings)
      throw InputError(fmt::format("sequence of {} tokens exceeds the model's max_position_embeddings {}", length,
                                   c.max_position_embeddings));
    new_blocks += m_cache.blocks_needed(in.sequence, static_cast<std::int64_t>(in.tokens.size()));
  }
  m_cache.check_free(new_blocks);
  inputs = recompute_crossing(requested);

  BatchRows& batch = m_rows;
  batch.clear();
  const auto variant_of = [&](const SequenceInput& in) {
    return in.variant < 0 ? nullptr : m_variants[static_cast<std::size_t>(in.variant)].get();
  };
  const bool any_variant = std::any_of(inputs.begin(), inputs.end(), [](const auto& in) { return in.variant >= 0; });
  for (const auto& in : inputs) {
    const auto start = m_cache.reserve(in.sequence, static_cast<std::int64_t>(in.tokens.size()));
    for (std::size_t t = 0; t < in.tokens.size(); ++t) {
      batch.sequence.push_back(in.sequence);
      batch.position.push_back(start + static_cast<std::int64_t>(t));
      if (any_variant)
        batch.variant.push_back(variant_of(in));
    }
  }
  batch.set_segments();
  const auto rows = static_cast<std::int64_t>(batch.position.size());
  if (!m_device)
    m_pass.fill_rope(batch);
  const auto hidden = c.hidden_size;
  std::vector<float> x(static_cast<std::size_t>(rows * hidden));
  {
    std::int64_t r = 0;
    for (const auto& in : inputs) {
      const DeltaVariant* v = variant_of(in);
      for (const auto token : in.tokens) {
        float* row = x.data() + (r++) * hidden;
        if (v && v->embedding().whole) {
          v->embedding().whole->row(token, row);
          continue;
        }
        m_weights.embedding().row(token, row);
        if (v && v->embedding().delta)
          v->embedding().delta->row_add(token, row);
      }
    }
  }
  scale_embeddings(x, m_weights.embedding_multiplier());
  auto logits = m_device ? run_on_device(inputs, x) : run_on_cpu(inputs, x);
  for (const auto& in : inputs)
    m_cache.advance(in.sequence, in.tokens, in.variant);
  remember_short_tokens(inputs);
  return logits;
}

namespace {

// The rows of a step whose logits come back: every row of an input with all_logits, else its last;
// not the `prefix_rows` of each input that LongRoPE's recompute put back in front of its tokens.
std::vector<std::int64_t>
output_rows(std::span<const SequenceInput> inputs, const std::vector<std::int64_t>& prefix_rows) {
  std::vector<std::int64_t> rows;
  std::int64_t r = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto n = static_cast<std::int64_t>(inputs[i].tokens.size());
    for (std::int64_t t = inputs[i].all_logits ? prefix_rows[i] : n - 1; t < n; ++t)
      rows.push_back(r + t);
    r += n;
  }
  return rows;
}

} // namespace

std::vector<float>
CpuTransformer::run_on_device(std::span<const SequenceInput> inputs, const std::vector<float>& x) {
  std::vector<std::int32_t> slot;
  for (const auto& in : inputs)
    slot.insert(slot.end(), in.tokens.size(), in.variant);
  const auto out_rows = output_rows(inputs, m_prefix_rows);
  std::vector<float> logits(out_rows.size() * static_cast<std::size_t>(config().vocab_size));
  m_device->forward({m_rows.sequence, m_rows.position, slot, out_rows, x.data()}, m_cache, logits.data());
  return logits;
}

std::vector<float>
CpuTransformer::run_on_cpu(std::span<const SequenceInput> inputs, std::vector<float>& x) {
  const auto& c = config();
  const auto hidden = c.hidden_size;
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    m_pass.run_layer(l, m_cache, l, m_rows, x, nullptr);
  const auto out_rows = output_rows(inputs, m_prefix_rows);
  BatchRows heads; // the output rows' variants, for the final norm and the LM head
  if (!m_rows.variant.empty())
    for (const auto r : out_rows)
      heads.variant.push_back(m_rows.variant[static_cast<std::size_t>(r)]);
  heads.set_segments();
  const auto out_count = static_cast<std::int64_t>(out_rows.size());
  std::vector<float> normed(static_cast<std::size_t>(out_count * hidden));
  for (std::int64_t i = 0; i < out_count; ++i) {
    const DeltaVariant* v = heads.variant_of(i);
    rms_norm(x.data() + out_rows[static_cast<std::size_t>(i)] * hidden,
             v ? v->final_norm().data() : m_weights.final_norm().data(), hidden, c.rms_norm_eps,
             normed.data() + i * hidden);
  }
  std::vector<float> logits(static_cast<std::size_t>(out_count * c.vocab_size));
  multiply_served(
      m_weights.lm_head(), heads, [](const DeltaVariant& v) -> const VariantMatrix& { return v.lm_head(); },
      normed.data(), out_count, hidden, logits.data(), c.vocab_size, m_pool);
  if (c.final_softcap > 0)
    soft_cap(logits.data(), static_cast<std::int64_t>(logits.size()), c.final_softcap);
  return logits;
}

} // namespace optkit::runtime
