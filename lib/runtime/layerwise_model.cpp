#include "runtime/layerwise_model.hpp"

#include "core/error.hpp"
#include "runtime/kernels.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace optkit::runtime {

LayerwiseModel::LayerwiseModel(const std::filesystem::path& model_dir, unsigned threads,
                               ActivationPrecision activations)
    : m_weights(model_dir, std::nullopt, activations, model::LoadMode::map, WeightLayout::in_place)
    , m_pool(threads)
    , m_pass(m_weights, m_pool) {}

std::vector<float>
LayerwiseModel::embed(std::span<const TokenId> tokens) const {
  const auto& c = config();
  std::vector<float> x(tokens.size() * static_cast<std::size_t>(c.hidden_size));
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.vocab_size)
      throw InputError(fmt::format("token id {} is outside the vocabulary of {}", tokens[t], c.vocab_size));
    m_weights.embedding().row(tokens[t], x.data() + static_cast<std::int64_t>(t) * c.hidden_size);
  }
  scale_embeddings(x, m_weights.embedding_multiplier());
  return x;
}

void
LayerwiseModel::run_layer(std::int64_t layer, std::span<const std::int64_t> lengths, std::vector<float>& x,
                          ActivationTap* tap) {
  if (!m_weights.layer(layer).q)
    throw RuntimeFailure(fmt::format("layer {} was released and cannot run again", layer));
  const auto& c = config();
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
  if (layer < 0 || layer >= c.num_layers)
    throw InputError(fmt::format("run_layer: no layer {} in a model of {}", layer, c.num_layers));
  m_pass.fill_rope(batch);
  m_pass.run_layer(layer, cache, 0, batch, x, tap);
}

namespace {

// Whole sequences of `lengths`, a chunk of at most kLayerChunkTokens (or one longer sequence) at a time:
// calls visit(first sequence, sequence count, first token, tokens) for each chunk in order.
template <typename Visit>
void
for_each_chunk(std::span<const std::int64_t> lengths, Visit&& visit) {
  std::size_t first = 0;
  std::int64_t offset = 0; // in tokens
  while (first < lengths.size()) {
    std::size_t last = first;
    std::int64_t tokens = 0;
    while (last < lengths.size() && (last == first || tokens + lengths[last] <= kLayerChunkTokens))
      tokens += lengths[last++];
    visit(first, last - first, offset, tokens);
    offset += tokens;
    first = last;
  }
}

} // namespace

void
LayerwiseModel::run_layer_chunked(std::int64_t layer, std::span<const std::int64_t> lengths, HiddenStates& x,
                                  ActivationTap* tap) {
  for_each_chunk(lengths, [&](std::size_t first, std::size_t count, std::int64_t offset, std::int64_t tokens) {
    const auto rows = x.rows(offset, tokens);
    std::vector<float> chunk(rows.begin(), rows.end());
    run_layer(layer, lengths.subspan(first, count), chunk, tap);
    std::copy(chunk.begin(), chunk.end(), rows.begin());
    x.release(offset, tokens);
  });
  m_pass.release_scratch(); // what follows (compressing a layer) needs the memory more
}

void
LayerwiseModel::observe_layer(std::int64_t layer, std::span<const std::int64_t> lengths, HiddenStates& x,
                              ActivationTap& tap) {
  for_each_chunk(lengths, [&](std::size_t first, std::size_t count, std::int64_t offset, std::int64_t tokens) {
    const auto rows = x.rows(offset, tokens);
    std::vector<float> chunk(rows.begin(), rows.end());
    x.release(offset, tokens);
    run_layer(layer, lengths.subspan(first, count), chunk, &tap);
  });
  m_pass.release_scratch();
}

const LinearWeight&
LayerwiseModel::linear(std::int64_t layer, std::string_view name) const {
  return m_weights.linear(layer, name);
}

void
LayerwiseModel::replace_linear(std::int64_t layer, std::string_view name, std::unique_ptr<LinearWeight> weight) {
  auto& slot = m_weights.linear(layer, name);
  if (weight->rows() != slot->rows() || weight->cols() != slot->cols())
    throw InputError(fmt::format("replacement for layer {} {} has the wrong shape", layer, name));
  slot = std::move(weight);
}

void
LayerwiseModel::release_layer(std::int64_t layer) {
  m_weights.layer(layer) = DecoderLayerWeights{};
  const auto prefix = fmt::format("model.layers.{}.", layer);
  for (const auto& name : m_weights.store().names())
    if (name.starts_with(prefix))
      m_weights.store().release(name);
}

std::vector<float>&
LayerwiseModel::norm_weight(std::int64_t layer, LinearInput input) {
  auto& l = m_weights.layer(layer);
  if (input == LinearInput::attention_in)
    return l.input_norm;
  if (input == LinearInput::mlp_in)
    return l.mlp_norm;
  throw InputError("only attention_in and mlp_in follow a norm");
}

std::vector<float>
LayerwiseModel::final_norm(std::span<const float> x) const {
  const auto& c = config();
  const auto hidden = c.hidden_size;
  std::vector<float> normed(x.size());
  for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(hidden); ++r)
    rms_norm(x.data() + static_cast<std::int64_t>(r) * hidden, m_weights.final_norm().data(), hidden, c.rms_norm_eps,
             normed.data() + static_cast<std::int64_t>(r) * hidden);
  return normed;
}

} // namespace optkit::runtime
