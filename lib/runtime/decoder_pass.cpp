#include "runtime/decoder_pass.hpp"

#include "model/dtype.hpp"
#include "model/layer_tensors.hpp"
#include "quant/quantizer.hpp"
#include "runtime/kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace optkit::runtime {

namespace {

// One row's keys or values into the cache: as they are, rounded to fp16 (a GGUF's cache, as
// llama.cpp keeps it), or as an FP8 KV cache holds them, FP8(x / scale) · scale with each KV
// head's scale.
void
store_cached(const float* row, const std::vector<float>& scales, bool f16, std::int64_t head_dim, std::int64_t width,
             float* cached) {
  if (scales.empty() && f16) {
    for (std::int64_t i = 0; i < width; ++i)
      cached[i] = model::f16_to_float(model::float_to_f16(row[i]));
    return;
  }
  if (scales.empty()) {
    std::copy_n(row, width, cached);
    return;
  }
  for (std::int64_t i = 0; i < width; ++i) {
    const float scale = scales[static_cast<std::size_t>(i / head_dim)];
    cached[i] = model::f8_e4m3_to_float(quant::float_to_f8_e4m3(std::clamp(row[i] / scale, -448.0f, 448.0f))) * scale;
  }
}

// The norm or bias vector a row uses: its variant's, else the base layer's.
using BaseVectorMember = std::vector<float> DecoderLayerWeights::*;
using VariantVectorMember = std::vector<float> VariantLayer::*;

const float*
row_vector(const BatchRows& batch, std::int64_t r, std::int64_t index, const DecoderLayerWeights& layer,
           BaseVectorMember base, VariantVectorMember own) {
  const DeltaVariant* v = batch.variant_of(r);
  return v ? (v->layer(index).*own).data() : (layer.*base).data();
}

void
add_bias(float* y, const BatchRows& batch, std::int64_t index, const DecoderLayerWeights& layer, BaseVectorMember base,
         VariantVectorMember own, std::int64_t rows) {
  const auto n = static_cast<std::int64_t>((layer.*base).size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* bias = row_vector(batch, r, index, layer, base, own);
    for (std::int64_t i = 0; i < n; ++i)
      y[r * n + i] += bias[i];
  }
}

} // namespace

std::vector<LayerLinear>
layer_linears(const model::ModelConfig& c, std::int64_t layer) {
  std::vector<LayerLinear> out;
  for (const auto& l : kDecoderLinears)
    if (!c.is_moe_layer(layer) || l.input == LinearInput::attention_in || l.input == LinearInput::attention_out)
      out.push_back({l.name, l.input});
  for (const auto& fused : model::fused_linears(c)) { // Phi-3: the parts give way to the module storing them
    const auto first = std::find_if(out.begin(), out.end(), [&](const auto& l) { return l.name == fused.parts[0]; });
    if (first == out.end())
      continue;
    first->name = fused.name;
    std::erase_if(out, [&](const auto& l) { return std::ranges::find(fused.parts, l.name) != fused.parts.end(); });
  }
  if (!c.is_moe_layer(layer))
    return out;
  const auto add_expert = [&](std::int64_t expert) {
    const auto names = expert_linear_names(c, layer, expert);
    out.push_back({names[0], LinearInput::mlp_in, expert});
    out.push_back({names[1], LinearInput::mlp_in, expert});
    out.push_back({names[2], LinearInput::mlp_hidden, expert});
  };
  for (std::int64_t e = 0; e < c.num_experts; ++e)
    add_expert(e);
  if (c.shared_expert_intermediate_size > 0)
    add_expert(kSharedExpert);
  return out;
}

std::array<std::string, 3>
expert_linear_names(const model::ModelConfig& config, std::int64_t layer, std::int64_t expert) {
  const auto prefix = fmt::format("model.layers.{}.", layer).size();
  std::array<std::string, 3> names;
  std::size_t i = 0;
  for (const auto which : {model::ExpertProjection::gate, model::ExpertProjection::up, model::ExpertProjection::down})
    names[i++] = (expert == kSharedExpert ? model::shared_expert_module(layer, which)
                                          : model::expert_module(config, layer, expert, which))
                     .substr(prefix);
  return names;
}

void
BatchRows::set_segments() {
  segments.clear();
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(variant.size()); ++r) {
    const DeltaVariant* v = variant[static_cast<std::size_t>(r)];
    if (!v)
      continue;
    if (!segments.empty() && segments.back().variant == v && segments.back().end == r)
      ++segments.back().end;
    else
      segments.push_back({v, r, r + 1});
  }
}

float*
DecoderPass::Buffer::get(std::size_t size) {
  if (size > capacity) {
    data = std::make_unique_for_overwrite<float[]>(size);
    capacity = size;
  }
  return data.get();
}

void
multiply_served(const LinearWeight& base, const BatchRows& batch,
                const std::function<const VariantMatrix&(const DeltaVariant&)>& of, const float* x, std::int64_t rows,
                std::int64_t in_width, float* y, std::int64_t out_width, ThreadPool& pool) {
  multiply_served_rows(base, batch, of, x, {0, rows}, in_width, y, out_width, pool);
}

void
multiply_served_rows(const LinearWeight& base, const BatchRows& batch,
                     const std::function<const VariantMatrix&(const DeltaVariant&)>& of, const float* x, RowRange range,
                     std::int64_t in_width, float* y, std::int64_t out_width, ThreadPool& pool) {
  base.multiply(x, range.count, y, pool);
  const std::int64_t end = range.first + range.count;
  for (const auto& segment : batch.segments) {
    const std::int64_t first = std::max(segment.begin, range.first), last = std::min(segment.end, end);
    if (first < last)
      apply_variant(of(*segment.variant), x + (first - range.first) * in_width, last - first,
                    y + (first - range.first) * out_width, pool);
  }
}

void
DecoderPass::project(std::int64_t index, Projection p, const BatchRows& batch, const float* x, std::int64_t in_width,
                     float* y, std::int64_t out_width) {
  project_rows(index, p, batch, {0, static_cast<std::int64_t>(batch.position.size())}, x, in_width, y, out_width);
}

void
DecoderPass::project_rows(std::int64_t index, Projection p, const BatchRows& batch, RowRange rows, const float* x,
                          std::int64_t in_width, float* y, std::int64_t out_width) {
  const auto slot = static_cast<std::size_t>(p);
  multiply_served_rows(
      *(m_weights->layer(index).*kProjectionWeight[slot]), batch,
      [&](const DeltaVariant& v) -> const VariantMatrix& { return v.layer(index).*kProjectionVariant[slot]; }, x, rows,
      in_width, y, out_width, *m_pool);
}

void
DecoderPass::release_scratch() {
  for (Buffer* b : {&m_normed, &m_q, &m_k, &m_v, &m_attended, &m_projected, &m_gate, &m_up, &m_router_logits,
                    &m_expert_in, &m_expert_out})
    *b = Buffer{};
  m_row_cache = {};
  m_routes = {};
  m_chosen = {};
  m_chosen_weight = {};
}

namespace {

// Row r's cos and sin of its position times `inv_freq`, times `factor`.
void
fill_row_angles(std::size_t r, std::int64_t position, const std::vector<float>& inv_freq, float factor,
                std::vector<float>& cos, std::vector<float>& sin) {
  const auto half = inv_freq.size();
  for (std::size_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[i];
    cos[r * half + i] = std::cos(angle) * factor;
    sin[r * half + i] = std::sin(angle) * factor;
  }
}

// Every row's angles; with LongRoPE (`long_inv_freq` not empty) a sequence longer than
// `threshold` once this pass's rows are in (a run of rows of one sequence: its last position + 1)
// rotates all of them with the long factors, as transformers chooses by the sequence's length.
void
fill_angles(const BatchRows& batch, const std::vector<float>& inv_freq, const std::vector<float>& long_inv_freq,
            std::int64_t threshold, float factor, std::vector<float>& cos, std::vector<float>& sin) {
  const auto rows = batch.position.size();
  cos.resize(rows * inv_freq.size());
  sin.resize(cos.size());
  for (std::size_t first = 0, end = 0; first < rows; first = end) {
    std::int64_t last_position = 0;
    for (end = first; end < rows && batch.sequence[end] == batch.sequence[first]; ++end)
      last_position = std::max(last_position, batch.position[end]);
    const bool long_factors = !long_inv_freq.empty() && last_position + 1 > threshold;
    for (std::size_t r = first; r < end; ++r)
      fill_row_angles(r, batch.position[r], long_factors ? long_inv_freq : inv_freq, factor, cos, sin);
  }
}

} // namespace

void
DecoderPass::fill_rope(BatchRows& batch) const {
  const auto& w = *m_weights;
  fill_angles(batch, w.inverse_frequencies(), w.long_inverse_frequencies(), w.config().long_rope_threshold(),
              w.rope_attention_factor(), batch.cos, batch.sin);
  if (!w.local_inverse_frequencies().empty())
    fill_angles(batch, w.local_inverse_frequencies(), {}, 0, 1.0f, batch.local_cos, batch.local_sin);
}

void
DecoderPass::add_residual(std::int64_t index, const BatchRows& batch, std::vector<float>& x, float* y,
                          std::vector<float> DecoderLayerWeights::*norm, std::vector<float> VariantLayer::*own) {
  const auto& c = m_weights->config();
  const auto hidden = c.hidden_size;
  const auto rows = static_cast<std::int64_t>(x.size()) / hidden;
  if (c.sandwich_norms) {
    const auto& layer = m_weights->layer(index);
    m_pool->parallel_for(rows, [&](std::int64_t a, std::int64_t b) {
      for (std::int64_t r = a; r < b; ++r)
        rms_norm(y + r * hidden, row_vector(batch, r, index, layer, norm, own), hidden, c.rms_norm_eps, y + r * hidden);
    });
  }
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] += y[i];
}

void
DecoderPass::run_layer(std::int64_t layer, KvCache& cache, std::int64_t cache_layer, const BatchRows& rows,
                       std::vector<float>& x, ActivationTap* tap) {
  attention(layer, cache, cache_layer, rows, x, tap);
  mlp(layer, rows, x, tap, cache.size());
}

void
DecoderPass::attention(std::int64_t index, KvCache& cache, std::int64_t cache_layer, const BatchRows& batch,
                       std::vector<float>& x, ActivationTap* tap) {
  const auto& layer = m_weights->layer(index);
  const auto& c = m_weights->config();
  ThreadPool& pool = *m_pool;
  const auto rows = static_cast<std::int64_t>(batch.position.size());
  const auto hidden = c.hidden_size, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hd = c.head_dim;
  const auto n = [&](std::int64_t width) { return static_cast<std::size_t>(rows * width); };
  float* h = m_normed.get(x.size());
  pool.parallel_for(rows, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t r = a; r < b; ++r)
      rms_norm(x.data() + r * hidden,
               row_vector(batch, r, index, layer, &DecoderLayerWeights::input_norm, &VariantLayer::input_norm), hidden,
               c.rms_norm_eps, h + r * hidden);
  });
  const auto sequences = cache.size();
  if (tap)
    tap->observe(LinearInput::attention_in, h, rows, hidden, sequences);
  float* q = m_q.get(n(q_dim));
  float* k = m_k.get(n(kv_dim));
  float* v = m_v.get(n(kv_dim));
  project(index, Projection::q, batch, h, hidden, q, q_dim);
  project(index, Projection::k, batch, h, hidden, k, kv_dim);
  project(index, Projection::v, batch, h, hidden, v, kv_dim);
  if (c.qkv_bias) {
    add_bias(q, batch, index, layer, &DecoderLayerWeights::q_bias, &VariantLayer::q_bias, rows);
    add_bias(k, batch, index, layer, &DecoderLayerWeights::k_bias, &VariantLayer::k_bias, rows);
    add_bias(v, batch, index, layer, &DecoderLayerWeights::v_bias, &VariantLayer::v_bias, rows);
  }
  const std::int64_t rotated = c.rotated_dims(), half = rotated / 2;
  const bool local = c.uses_local_rope(index);
  const float* all_cos = local ? batch.local_cos.data() : batch.cos.data();
  const float* all_sin = local ? batch.local_sin.data() : batch.sin.data();
  pool.parallel_for(rows, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t r = a; r < b; ++r) {
      const float* cos = all_cos + r * half;
      const float* sin = all_sin + r * half;
      const float* q_norm =
          c.qk_norm ? row_vector(batch, r, index, layer, &DecoderLayerWeights::q_norm, &VariantLayer::q_norm) : nullptr;
      const float* k_norm =
          c.qk_norm ? row_vector(batch, r, index, layer, &DecoderLayerWeights::k_norm, &VariantLayer::k_norm) : nullptr;
      for (std::int64_t head = 0; head < c.num_heads; ++head) {
        float* qh = q + r * q_dim + head * hd;
        if (c.qk_norm)
          rms_norm(qh, q_norm, hd, c.rms_norm_eps, qh);
        apply_rope(qh, rotated, cos, sin);
      }
      for (std::int64_t head = 0; head < c.num_kv_heads; ++head) {
        float* kh = k + r * kv_dim + head * hd;
        if (c.qk_norm)
          rms_norm(kh, k_norm, hd, c.rms_norm_eps, kh);
        apply_rope(kh, rotated, cos, sin);
      }
    }
  });
  // Each row's block table looked up once, not once per head.
  m_row_cache.clear();
  for (std::int64_t r = 0; r < rows; ++r)
    m_row_cache.push_back(cache.rows(batch.sequence[static_cast<std::size_t>(r)], cache_layer));
  if (tap)
    tap->observe_cache(k, v, rows, c.num_kv_heads, hd);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto pos = batch.position[static_cast<std::size_t>(r)];
    const KvRows& cached = m_row_cache[static_cast<std::size_t>(r)];
    store_cached(k + r * kv_dim, layer.k_scale, layer.f16_kv_cache, hd, kv_dim, cached.key(pos));
    store_cached(v + r * kv_dim, layer.v_scale, layer.f16_kv_cache, hd, kv_dim, cached.value(pos));
  }
  float* attended = m_attended.get(n(q_dim));
  const std::int64_t group = c.num_heads / c.num_kv_heads;
  const AttentionScores scoring{.scale = c.attention_scale(), .softcap = c.attention_softcap};
  const std::int64_t window = c.window_of(index);
  // Causal attention costs grow with position, so equal contiguous shares would leave the thread
  // with the early rows idle: threads take chunks of (row, KV head) jobs as they go instead.
  const std::int64_t jobs = rows * c.num_kv_heads;
  const std::int64_t chunk = std::max<std::int64_t>(1, jobs / (8 * static_cast<std::int64_t>(pool.size())));
  pool.parallel_for(
      jobs,
      [&](std::int64_t a, std::int64_t b) {
        thread_local std::vector<float> scratch;
        for (std::int64_t job = a; job < b; ++job) {
          const std::int64_t r = job / c.num_kv_heads, kv_head = job % c.num_kv_heads;
          const auto pos = batch.position[static_cast<std::size_t>(r)];
          const std::int64_t first = window > 0 ? std::max<std::int64_t>(0, pos - window + 1) : 0;
          scratch.resize(std::max(scratch.size(), static_cast<std::size_t>(group * (pos + 3))));
          const std::int64_t head = kv_head * group; // the group's first query head
          attend(q + r * q_dim + head * hd, group, m_row_cache[static_cast<std::size_t>(r)], kv_head * hd, first, pos,
                 hd, scoring, scratch.data(), attended + r * q_dim + head * hd);
        }
      },
      chunk);
  if (tap)
    tap->observe(LinearInput::attention_out, attended, rows, q_dim, sequences);
  float* projected = m_projected.get(x.size());
  project(index, Projection::o, batch, attended, q_dim, projected, hidden);
  add_residual(index, batch, x, projected, &DecoderLayerWeights::attention_out_norm, &VariantLayer::attention_out_norm);
}

void
DecoderPass::mlp(std::int64_t index, const BatchRows& batch, std::vector<float>& x, ActivationTap* tap,
                 std::int64_t sequences) {
  const auto& layer = m_weights->layer(index);
  const auto& c = m_weights->config();
  ThreadPool& pool = *m_pool;
  const auto hidden = c.hidden_size, inter = c.intermediate_size;
  const auto rows = static_cast<std::int64_t>(x.size()) / hidden;
  float* h = m_normed.get(x.size());
  pool.parallel_for(rows, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t r = a; r < b; ++r)
      rms_norm(x.data() + r * hidden,
               row_vector(batch, r, index, layer, &DecoderLayerWeights::mlp_norm, &VariantLayer::mlp_norm), hidden,
               c.rms_norm_eps, h + r * hidden);
  });
  float* down = m_projected.get(x.size());
  if (c.is_moe_layer(index)) { // a tap sees its input with the routing instead
    mixture_of_experts(index, h, rows, down, tap);
    add_residual(index, batch, x, down, &DecoderLayerWeights::mlp_out_norm, &VariantLayer::mlp_out_norm);
    return;
  }
  if (tap)
    tap->observe(LinearInput::mlp_in, h, rows, hidden, sequences);
  // kMlpRowBlock rows at a time, so that `up` and the packed inputs of the products are a block's
  // size, not the pass's (at 8B's shape 8,192 rows of 14,336 are 470 MB each). On optkit's own
  // kernels each row's result does not depend on the rows multiplied beside it (on OpenBLAS's
  // Haswell/Zen sgemm it may differ in the last bits). A tap sees the hidden activations whole, so
  // then `gate` holds every row.
  const std::int64_t block = std::min(rows, kMlpRowBlock);
  float* gate = m_gate.get(static_cast<std::size_t>((tap ? rows : block) * inter));
  float* up = m_up.get(static_cast<std::size_t>(block * inter));
  auto each_block = [&](auto&& visit) {
    for (std::int64_t first = 0; first < rows; first += block)
      visit(RowRange{first, std::min(block, rows - first)}, tap ? gate + first * inter : gate);
  };
  auto project_down = [&](RowRange range, const float* g) {
    project_rows(index, Projection::down, batch, range, g, inter, down + range.first * hidden, hidden);
  };
  each_block([&](RowRange range, float* g) {
    project_rows(index, Projection::gate, batch, range, h + range.first * hidden, hidden, g, inter);
    project_rows(index, Projection::up, batch, range, h + range.first * hidden, hidden, up, inter);
    pool.parallel_for(range.count, [&](std::int64_t a, std::int64_t b) {
      gated_activation(c.activation, g + a * inter, up + a * inter, (b - a) * inter);
    });
    if (!tap)
      project_down(range, g);
  });
  if (tap) {
    tap->observe(LinearInput::mlp_hidden, gate, rows, inter, sequences);
    each_block(project_down);
  }
  add_residual(index, batch, x, down, &DecoderLayerWeights::mlp_out_norm, &VariantLayer::mlp_out_norm);
}

} // namespace optkit::runtime
