#include "runtime/device_engine.hpp"

#include "core/build_config.hpp"
#include "core/error.hpp"
#include "runtime/decoder_pass.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#if OPTKIT_HAVE_CUDA
#include "cuda/device_decoder.cuh"

#include <algorithm>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <vector>
#endif

namespace optkit::runtime {

std::string
DeviceEngine::unsupported(const model::ModelConfig& c) {
  std::vector<std::string> missing;
  if (c.sandwich_norms)
    missing.push_back("norms after attention and the MLP");
  if (c.activation != model::Activation::silu)
    missing.push_back("GeGLU");
  if (c.scaled_embeddings)
    missing.push_back("scaled embeddings");
  if (c.attention_softcap > 0 || c.final_softcap > 0)
    missing.push_back("soft-capping");
  if (!c.sliding_layers.empty() || c.local_rope_theta > 0)
    missing.push_back("sliding layers interleaved with global ones");
  if (c.norm_gain_offset != 0 || c.query_pre_attn_scalar > 0)
    missing.push_back("(1 + w) norms and query_pre_attn_scalar");
  if (c.num_experts > 0)
    missing.push_back("mixture-of-experts MLPs");
  if (c.rotated_dims() < c.head_dim)
    missing.push_back("partial rotary");
  if (c.long_rope_threshold() > 0)
    missing.push_back("LongRoPE");
  return missing.empty() ? std::string{} : fmt::format("{}", fmt::join(missing, ", "));
}

#if OPTKIT_HAVE_CUDA

namespace {

int
narrow(std::int64_t n, const char* what) {
  if (n < 0 || n > std::numeric_limits<int>::max())
    throw RuntimeFailure(fmt::format("{} of {} is beyond what the device takes", what, n));
  return static_cast<int>(n);
}

int
narrow(std::size_t n, const char* what) {
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  return narrow(static_cast<std::int64_t>(std::min(n, kMax)), what);
}

// A layer's vectors in cuda::DecoderVector's order, in the base and in a variant.
constexpr std::vector<float> DecoderLayerWeights::*kBaseVectors[] = {
    &DecoderLayerWeights::input_norm, &DecoderLayerWeights::mlp_norm, &DecoderLayerWeights::q_bias,
    &DecoderLayerWeights::k_bias,     &DecoderLayerWeights::v_bias,   &DecoderLayerWeights::q_norm,
    &DecoderLayerWeights::k_norm};
constexpr std::vector<float> VariantLayer::*kVariantVectors[] = {
    &VariantLayer::input_norm, &VariantLayer::mlp_norm, &VariantLayer::q_bias, &VariantLayer::k_bias,
    &VariantLayer::v_bias,     &VariantLayer::q_norm,   &VariantLayer::k_norm};
static_assert(std::size(kBaseVectors) == cuda::kDecoderVectors);

cuda::DecoderDims
dims_of(const model::ModelConfig& c) {
  cuda::DecoderDims d;
  d.layers = narrow(c.num_layers, "layers");
  d.hidden = narrow(c.hidden_size, "hidden_size");
  d.intermediate = narrow(c.intermediate_size, "intermediate_size");
  d.heads = narrow(c.num_heads, "heads");
  d.kv_heads = narrow(c.num_kv_heads, "KV heads");
  d.head_dim = narrow(c.head_dim, "head_dim");
  d.vocab = narrow(c.vocab_size, "vocab_size");
  d.eps = static_cast<float>(c.rms_norm_eps);
  d.sliding_window = narrow(std::max<std::int64_t>(c.sliding_window, 0), "sliding_window");
  d.qkv_bias = c.qkv_bias;
  d.qk_norm = c.qk_norm;
  return d;
}

cuda::PackedDelta
packed(const CompressedDelta& delta) {
  const auto& p = delta.codes();
  return {p.bits, p.sparse, p.offset, p.words, p.group_size, p.groups, p.values, p.indices, p.scales};
}

// The matrices of a variant the device applies, as (layer, projection) with layer == layers for
// the LM head, and what the variant holds for each.
template <class Visit>
void
for_each_matrix(const DeltaVariant& variant, std::int64_t layers, Visit visit) {
  for (std::int64_t l = 0; l < layers; ++l)
    for (int p = 0; p < cuda::kDecoderProjections; ++p)
      visit(static_cast<int>(l), p, variant.layer(l).*kProjectionVariant[p]);
  visit(static_cast<int>(layers), 0, variant.lm_head());
}

} // namespace

struct DeviceEngine::State {
  std::unique_ptr<cuda::DeviceDecoder> decoder;
  // The step's metadata, reused from step to step.
  std::vector<int> slot, position, table_start, tables, output_row;
};

DeviceEngine::DeviceEngine(int device, const DecoderWeights& weights, DevicePrecision precision,
                           const KvCacheOptions& kv, std::optional<std::int64_t> kv_blocks)
    : m_state(std::make_unique<State>()), m_weights(&weights), m_cache_options(kv) {
  const auto& c = weights.config();
  if (c.num_layers > 0 && !weights.layer(0).k_scale.empty())
    throw InputError("the model's FP8 KV-cache scales (kv_cache_scheme) run on optkit's CPU runtime only: run it "
                     "there, or serve it with vLLM --kv-cache-dtype fp8");
  try {
    const cuda::DecoderDims dims = dims_of(c);
    m_state->decoder = std::make_unique<cuda::DeviceDecoder>(device, dims, precision == DevicePrecision::bf16,
                                                             narrow(kv.block_tokens, "KV block tokens"));
    cuda::DeviceDecoder& d = *m_state->decoder;
    const auto upload = [&](int layer, int projection, const LinearWeight& w) {
      const auto dense = dense_floats(w);
      d.set_matrix(layer, projection, dense.data(), narrow(w.rows(), "rows"), narrow(w.cols(), "columns"));
    };
    for (int l = 0; l < dims.layers; ++l) {
      for (int p = 0; p < cuda::kDecoderProjections; ++p)
        upload(l, p, *(weights.layer(l).*kProjectionWeight[p]));
      for (int v = 0; v < cuda::kDecoderVectors; ++v)
        if (const auto& vector = weights.layer(l).*kBaseVectors[v]; !vector.empty())
          d.set_vector(l, static_cast<cuda::DecoderVector>(v), -1, vector.data(), narrow(vector.size(), "vector"));
    }
    upload(dims.layers, 0, weights.lm_head());
    d.set_vector(dims.layers, cuda::DecoderVector::input_norm, -1, weights.final_norm().data(), dims.hidden);
    d.set_inverse_frequencies(weights.inverse_frequencies().data());

    const std::uint64_t block_bytes = d.kv_block_bytes();
    std::int64_t blocks = 0;
    if (kv_blocks)
      blocks = *kv_blocks;
    else if (kv.budget_bytes > 0)
      blocks = static_cast<std::int64_t>(kv.budget_bytes / block_bytes);
    else {
      const std::uint64_t free = d.free_bytes(), room = std::uint64_t(1) << 30;
      blocks = free > room ? static_cast<std::int64_t>((free - room) / 10 * 9 / block_bytes) : 0;
    }
    if (blocks < 1)
      throw std::runtime_error(fmt::format("no room for a KV cache block of {} bytes beside the weights", block_bytes));
    d.allocate_kv(blocks);
    m_cache_options.budget_bytes = static_cast<std::uint64_t>(blocks) * block_bytes;
    m_cache_options.device_element_bytes = precision == DevicePrecision::bf16 ? 2 : 4;
  } catch (const std::runtime_error& e) {
    throw RuntimeFailure(fmt::format("cannot serve on CUDA device {}: {} (optkit doctor shows what this machine has)",
                                     device, e.what()));
  }
}

DeviceEngine::~DeviceEngine() = default;

std::string
DeviceEngine::device_name() const {
  return m_state->decoder->device_name();
}

std::string
DeviceEngine::unsupported(const DeltaVariant& variant, std::int64_t layers) {
  std::string why;
  for_each_matrix(variant, layers, [&](int layer, int projection, const VariantMatrix& m) {
    if (!why.empty())
      return;
    const auto where = layer == layers ? std::string("the LM head")
                                       : fmt::format("layer {}'s {}", layer, kDecoderLinears[projection].name);
    if (m.low_rank)
      why = fmt::format("{} is a LoRA factor pair", where);
    else if (m.whole)
      why = fmt::format("{} is stored whole", where);
    else if (m.delta && !cuda::sbmm_takes(packed(*m.delta), narrow(m.delta->cols(), "columns")))
      why = fmt::format("{}'s Δ is not one SBMM takes (2, 4 or 8 bits, columns a multiple of 8)", where);
  });
  return why.empty() ? why : "the device serves compressed deltas only, and " + why;
}

void
DeviceEngine::set_variant(std::int32_t slot, const DeltaVariant* variant) {
  cuda::DeviceDecoder& d = *m_state->decoder;
  const auto layers = m_weights->config().num_layers;
  if (slot < 0)
    throw InputError(fmt::format("device slot {} is out of range", slot));
  if (variant != nullptr)
    if (const auto why = unsupported(*variant, layers); !why.empty())
      throw InputError(why);
  try {
    d.clear_slot(slot);
    if (variant == nullptr)
      return;
    for_each_matrix(*variant, layers, [&](int layer, int projection, const VariantMatrix& m) {
      if (m.delta)
        d.set_delta(layer, projection, slot, packed(*m.delta));
    });
    for (std::int64_t l = 0; l < layers; ++l)
      for (int v = 0; v < cuda::kDecoderVectors; ++v)
        if (const auto& vector = variant->layer(l).*kVariantVectors[v]; !vector.empty())
          d.set_vector(static_cast<int>(l), static_cast<cuda::DecoderVector>(v), slot, vector.data(),
                       narrow(vector.size(), "vector"));
    d.set_vector(static_cast<int>(layers), cuda::DecoderVector::input_norm, slot, variant->final_norm().data(),
                 narrow(variant->final_norm().size(), "vector"));
  } catch (const std::runtime_error& e) {
    d.clear_slot(slot);
    throw RuntimeFailure(fmt::format("cannot put a variant on the device: {}", e.what()));
  }
}

void
DeviceEngine::forward(const DeviceStep& step, const KvCache& cache, float* logits) {
  State& s = *m_state;
  const std::size_t rows = step.position.size();
  s.slot.assign(step.slot.begin(), step.slot.end());
  s.position.clear();
  s.table_start.clear();
  s.tables.clear();
  s.output_row.clear();
  for (std::size_t r = 0; r < rows; ++r) {
    s.position.push_back(narrow(step.position[r], "a position"));
    if (r > 0 && step.sequence[r] == step.sequence[r - 1]) { // a chunk's rows share their table
      s.table_start.push_back(s.table_start.back());
      continue;
    }
    s.table_start.push_back(narrow(static_cast<std::int64_t>(s.tables.size()), "a block table"));
    const auto table = cache.block_table(step.sequence[r]);
    s.tables.insert(s.tables.end(), table.begin(), table.end());
  }
  for (const auto r : step.output_rows)
    s.output_row.push_back(narrow(r, "an output row"));
  const cuda::DecoderStep device_step{narrow(static_cast<std::int64_t>(rows), "a step's rows"),
                                      step.embeddings,
                                      s.slot.data(),
                                      s.position.data(),
                                      s.table_start.data(),
                                      s.tables.data(),
                                      narrow(static_cast<std::int64_t>(s.tables.size()), "a block table"),
                                      narrow(static_cast<std::int64_t>(s.output_row.size()), "output rows"),
                                      s.output_row.data()};
  try {
    s.decoder->forward(device_step, logits);
  } catch (const std::runtime_error& e) {
    throw RuntimeFailure(fmt::format("the device step failed: {}", e.what()));
  }
}

std::uint64_t
DeviceEngine::weight_bytes() const {
  return m_state->decoder->weight_bytes();
}

std::uint64_t
DeviceEngine::delta_bytes() const {
  return m_state->decoder->delta_bytes();
}

#else

struct DeviceEngine::State {};

DeviceEngine::DeviceEngine(int device, const DecoderWeights& weights, DevicePrecision, const KvCacheOptions& kv,
                           std::optional<std::int64_t>)
    : m_weights(&weights), m_cache_options(kv) {
  throw RuntimeFailure(fmt::format("cannot serve on CUDA device {}: this optkit was built without CUDA (rebuild where "
                                   "nvcc is found; optkit --version lists the features)",
                                   device));
}
DeviceEngine::~DeviceEngine() = default;
std::string
DeviceEngine::device_name() const {
  return {};
}
std::string
DeviceEngine::unsupported(const DeltaVariant&, std::int64_t) {
  return "this optkit was built without CUDA";
}
void
DeviceEngine::set_variant(std::int32_t, const DeltaVariant*) {}
void
DeviceEngine::forward(const DeviceStep&, const KvCache&, float*) {}
std::uint64_t
DeviceEngine::weight_bytes() const {
  return 0;
}
std::uint64_t
DeviceEngine::delta_bytes() const {
  return 0;
}

#endif

} // namespace optkit::runtime
