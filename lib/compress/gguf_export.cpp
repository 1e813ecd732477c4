#include "compress/gguf_export.hpp"

#include "compress/gguf_metadata.hpp"
#include "core/thread_pool.hpp"
#include "model/gguf_file.hpp"
#include "model/gguf_names.hpp"
#include "model/layer_tensors.hpp"
#include "model/weight_store.hpp"
#include "quant/ggml_blocks.hpp"

#include <fmt/format.h>

#include <cstring>
#include <numeric>

namespace optkit::compress {

using model::GgmlType;

namespace {

constexpr std::int64_t kBlockValues = std::int64_t{4} << 20; // values quantized per block of rows

// A tensor of the output: where its values come from and how it is stored.
struct PlannedTensor {
  std::vector<std::string> hf;     // source tensor; each expert's, stacked (ggml's third dimension); none: rope_freqs
  std::string gguf;                // its GGUF name
  std::int64_t rows = 1, cols = 0; // of one source
  bool vector = false;             // 1-D (norms, rope_freqs): stored as F32
  std::vector<float> computed;     // rope_freqs' values (no source tensor)
  GgmlType type = GgmlType::f32;
  bool rope_permuted = false;
  std::vector<const std::vector<float>*> importance; // per source: one weight per column, or none
};

using SourceTensor = model::GgufSources;

void
add_source(std::vector<SourceTensor>& out, std::string hf) {
  auto gguf = *model::gguf_tensor_name(hf);
  out.push_back({std::move(gguf), {std::move(hf)}});
}

// The GGUF's tensors, layer by layer (with q/k/v biases for qwen2, q/k norms for qwen3, a router
// and stacked experts in a mixture of experts' layers).
std::vector<SourceTensor>
source_tensors(const model::ModelConfig& config, const model::WeightStore& store) {
  std::vector<SourceTensor> out;
  add_source(out, "model.embed_tokens.weight");
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    auto add = [&](const char* module, const char* suffix) {
      add_source(out, fmt::format("model.layers.{}.{}.{}", l, module, suffix));
    };
    add("input_layernorm", "weight");
    for (const char* projection : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}) {
      add(projection, "weight");
      if (config.qkv_bias)
        add(projection, "bias");
    }
    if (config.qk_norm) {
      add("self_attn.q_norm", "weight");
      add("self_attn.k_norm", "weight");
    }
    add("self_attn.o_proj", "weight");
    add("post_attention_layernorm", "weight");
    if (config.is_moe_layer(l)) {
      const auto moe = model::gguf_moe_tensors(config, l);
      out.insert(out.end(), moe.begin(), moe.end());
      continue;
    }
    for (const char* module : {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      add(module, "weight");
  }
  add_source(out, "model.norm.weight");
  if (!config.tie_word_embeddings && store.find("lm_head.weight").info)
    add_source(out, "lm_head.weight");
  return out;
}

// The importance weights of an HF weight's module, or none.
const std::vector<float>*
module_importance(const GgufExportOptions& options, const std::string& hf) {
  if (!options.importance)
    return nullptr;
  const auto it = options.importance->weights.find(hf.substr(0, hf.size() - std::string(".weight").size()));
  return it == options.importance->weights.end() ? nullptr : &it->second.mean;
}

std::vector<PlannedTensor>
plan_tensors(const GgufExportOptions& options, const model::ModelConfig& config, const model::WeightStore& store) {
  const bool tied = config.tie_word_embeddings || !store.find("lm_head.weight").info;
  const auto arch = gguf_architecture(config);
  const GgufMixtureModel mixture{config.num_layers, tied,
                                 gguf_size_70b(arch, config.num_layers, config.num_heads, config.num_kv_heads),
                                 config.num_experts};
  std::vector<PlannedTensor> plan;
  for (auto& source : source_tensors(config, store)) {
    PlannedTensor t;
    t.hf = std::move(source.hf);
    t.gguf = std::move(source.gguf);
    const auto& shape = store.require(t.hf.front()).shape();
    t.cols = shape.back();
    t.rows = shape.size() == 2 ? shape[0] : 1;
    t.vector = shape.size() == 1;
    t.rope_permuted = model::gguf_rope_permuted(arch, t.hf.front());
    if (const auto place = gguf_tensor_place(t.gguf)) {
      t.type = gguf_tensor_type(options.file_type, *place, mixture, t.cols);
      for (const auto& hf : t.hf)
        t.importance.push_back(module_importance(options, hf));
    }
    plan.push_back(std::move(t));
  }
  if (auto divisors = rope_frequency_divisors(config); !divisors.empty()) {
    PlannedTensor t;
    t.gguf = "rope_freqs.weight";
    t.cols = static_cast<std::int64_t>(divisors.size());
    t.vector = true;
    t.computed = std::move(divisors);
    plan.insert(plan.begin() + 1, std::move(t)); // after token_embd, as the converter writes it
  }
  return plan;
}

std::vector<std::int64_t>
ggml_dims(const PlannedTensor& t) {
  if (t.vector)
    return {t.cols};
  if (t.hf.size() > 1)
    return {t.cols, t.rows, static_cast<std::int64_t>(t.hf.size())};
  return {t.cols, t.rows};
}

std::span<const std::byte>
as_bytes(const std::vector<float>& v) {
  return std::as_bytes(std::span<const float>(v));
}

// Rows [first, first + count) in the GGUF's order: a Q or K block (whole heads) reordered.
std::vector<float>
rows_in_gguf_order(const model::WeightStore& store, const PlannedTensor& t, const std::string& hf, std::int64_t first,
                   std::int64_t count, std::int64_t head_dim) {
  auto rows = store.rows_as_floats(hf, first, count);
  if (!t.rope_permuted)
    return rows;
  std::vector<float> out(rows.size());
  const auto cols = static_cast<std::size_t>(t.cols);
  for (std::int64_t r = 0; r < count; ++r)
    std::memcpy(out.data() + static_cast<std::size_t>(model::gguf_rope_row(r, head_dim)) * cols,
                rows.data() + static_cast<std::size_t>(r) * cols, cols * sizeof(float));
  return out;
}

struct ErrorSums {
  double error = 0, reference = 0;
};

// Quantizes `count` rows of `values` into `out`, adding each row's weighted error to `sums`.
void
quantize_rows(const PlannedTensor& t, const std::vector<float>* weights, const std::vector<float>& values,
              std::int64_t count, std::vector<std::byte>& out, std::vector<ErrorSums>& sums, ThreadPool& pool) {
  const std::int64_t row_bytes = model::ggml_row_bytes(t.type, t.cols);
  out.resize(static_cast<std::size_t>(count * row_bytes));
  sums.assign(static_cast<std::size_t>(count), {});
  const std::span<const float> importance = weights ? std::span<const float>(*weights) : std::span<const float>();
  pool.parallel_for(
      count,
      [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> decoded(static_cast<std::size_t>(t.cols));
        for (std::int64_t r = begin; r < end; ++r) {
          const std::span<const float> row(values.data() + r * t.cols, static_cast<std::size_t>(t.cols));
          std::byte* q = out.data() + r * row_bytes;
          quant::quantize_row(t.type, row, importance, q);
          quant::dequantize_row(t.type, q, t.cols, decoded.data());
          auto& s = sums[static_cast<std::size_t>(r)];
          for (std::size_t c = 0; c < row.size(); ++c) {
            const double w = importance.empty() ? 1.0 : double(importance[c]);
            const double x = row[c], diff = x - double(decoded[c]);
            s.error += w * diff * diff;
            s.reference += w * x * x;
          }
        }
      },
      8);
}

// One source matrix written a block of rows (whole heads) at a time, its errors added to `total`.
void
write_source(model::GgufWriter& writer, const model::WeightStore& store, const PlannedTensor& t, std::size_t source,
             std::int64_t head_dim, ThreadPool& pool, ErrorSums& total) {
  const auto& hf = t.hf[source];
  std::int64_t block = std::max<std::int64_t>(1, kBlockValues / t.cols);
  if (t.rope_permuted)
    block = std::max(head_dim, block / head_dim * head_dim);
  std::vector<std::byte> bytes;
  std::vector<ErrorSums> sums;
  for (std::int64_t first = 0; first < t.rows; first += block) {
    const std::int64_t count = std::min(block, t.rows - first);
    const auto values = rows_in_gguf_order(store, t, hf, first, count, head_dim);
    if (!model::ggml_is_quantized(t.type)) {
      std::vector<std::byte> encoded(static_cast<std::size_t>(model::ggml_row_bytes(t.type, t.cols) * count));
      for (std::int64_t r = 0; r < count; ++r)
        quant::quantize_row(t.type, {values.data() + r * t.cols, static_cast<std::size_t>(t.cols)}, {},
                            encoded.data() + r * model::ggml_row_bytes(t.type, t.cols));
      writer.write(encoded);
      continue;
    }
    quantize_rows(t, t.importance.empty() ? nullptr : t.importance[source], values, count, bytes, sums, pool);
    writer.write(bytes);
    for (const auto& s : sums) {
      total.error += s.error;
      total.reference += s.reference;
    }
  }
  store.release(hf);
}

// A matrix (each expert's in turn when stacked); its weighted relative error.
double
write_matrix(model::GgufWriter& writer, const model::WeightStore& store, const PlannedTensor& t, std::int64_t head_dim,
             ThreadPool& pool) {
  ErrorSums total;
  for (std::size_t source = 0; source < t.hf.size(); ++source)
    write_source(writer, store, t, source, head_dim, pool, total);
  return total.reference > 0 ? total.error / total.reference : 0.0;
}

void
add_importance_metadata(model::GgufWriter& writer, const GgufExportOptions& options) {
  if (!options.importance)
    return;
  const auto& source = options.importance->source;
  writer.set("quantize.imatrix.file", model::GgufValue::string(source.empty() ? "optkit compress --calib" : source));
  writer.set("quantize.imatrix.dataset", model::GgufValue::string(options.importance->dataset));
  writer.set("quantize.imatrix.entries_count", {model::GgufValueType::i32, model::GgufValueType::u32,
                                                static_cast<std::int32_t>(options.importance->weights.size())});
  writer.set("quantize.imatrix.chunks_count", {model::GgufValueType::i32, model::GgufValueType::u32,
                                               static_cast<std::int32_t>(options.importance->samples)});
}

} // namespace

GgufExportResult
export_gguf(const GgufExportOptions& options) {
  const auto config = model::load_model_config(options.model);
  check_gguf_exportable(options.model, config);
  const model::WeightStore store(options.model);
  const auto plan = plan_tensors(options, config, store);

  model::GgufWriter writer(options.output);
  add_model_metadata(writer, options.model, config, options.file_type);
  add_tokenizer_metadata(writer, options.model, config);
  add_importance_metadata(writer, options);
  for (const auto& t : plan)
    writer.add_tensor(t.gguf, ggml_dims(t), t.type);

  ThreadPool pool(options.threads);
  GgufExportResult result;
  double layer_error = 0;
  std::int64_t layer_tensors = 0;
  for (const auto& t : plan) {
    if (t.hf.empty()) {
      writer.write(as_bytes(t.computed));
      continue;
    }
    if (t.vector) {
      writer.write(as_bytes(store.require(t.hf.front()).to_floats()));
      continue;
    }
    const double error = write_matrix(writer, store, t, config.head_dim, pool);
    result.tensors.push_back({t.gguf, std::string(model::ggml_type_name(t.type)), error});
    ++result.type_counts[std::string(model::ggml_type_name(t.type))];
    if (t.gguf.starts_with("blk.")) {
      layer_error += error;
      ++layer_tensors;
    }
  }
  result.bytes = writer.finish();
  result.mean_relative_error = layer_tensors > 0 ? layer_error / static_cast<double>(layer_tensors) : 0.0;
  return result;
}

} // namespace optkit::compress
