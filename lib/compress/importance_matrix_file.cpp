// llama-imatrix's two file formats, read as llama-quantize reads them, and the GGUF one written.
#include "compress/importance_matrix.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/gguf_file.hpp"
#include "model/gguf_names.hpp"
#include "model/layer_tensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>

namespace optkit::compress {

namespace {

// The statistics of the `matrices` matrices a weight holds (1, or a stacked tensor's experts):
// in_sum2 F32 [columns, matrices] and counts F32 [1, matrices] from a file.
std::vector<WeightImportance>
read_weights(const model::GgufFile& file, const model::GgufTensorInfo& sums, const model::GgufTensorInfo& counts,
             std::int64_t matrices) {
  if (sums.type != model::GgmlType::f32 || counts.type != model::GgmlType::f32 || sums.rows() != matrices ||
      counts.element_count() != matrices)
    throw InputError(fmt::format("--imatrix {}: {} and {} must be F32 [columns, {}] and [1, {}] ({})",
                                 file.path().string(), sums.name, counts.name, matrices, matrices,
                                 matrices == 1 ? "one matrix" : "one per expert"));
  const auto columns = static_cast<std::size_t>(sums.row_values());
  std::vector<WeightImportance> out;
  for (std::size_t m = 0; m < static_cast<std::size_t>(matrices); ++m) {
    float count = 0;
    std::memcpy(&count, file.tensor_bytes(counts).data() + m * sizeof(float), sizeof count);
    std::vector<float> in_sum2(columns);
    std::memcpy(in_sum2.data(), file.tensor_bytes(sums).data() + m * columns * sizeof(float), columns * sizeof(float));
    out.push_back(weight_importance(std::move(in_sum2), count));
  }
  return out;
}

// InputError unless every value of a weight read from `file` is finite and not negative (a mean
// square; the k-quants would weigh by garbage).
void
check_values(const WeightImportance& weight, const std::filesystem::path& file, std::string_view name) {
  for (const float v : weight.in_sum2)
    if (!std::isfinite(v) || v < 0)
      throw InputError(fmt::format("--imatrix {}: {} has the value {}; an importance matrix holds mean squares "
                                   "(rewrite the file with llama-imatrix)",
                                   file.string(), name, v));
}

// The HF module (model.layers.0.self_attn.q_proj, lm_head) a GGUF weight name maps to; none for
// weights GGUF export does not write (an expert's).
std::optional<std::string>
module_of(std::string_view gguf_weight) {
  const auto hf = model::hf_tensor_name(std::string(gguf_weight));
  if (!hf)
    return std::nullopt;
  return hf->substr(0, hf->size() - std::string_view(".weight").size());
}

// Little-endian fields of a legacy file, each read whole or an InputError naming the file, its
// length and the field it ends inside.
class LegacyCursor {
public:
  LegacyCursor(const std::filesystem::path& file, std::string_view bytes) : m_file(file), m_bytes(bytes) {}
  bool done() const { return m_at == m_bytes.size(); }
  std::int32_t i32(std::string_view what) {
    std::int32_t v = 0;
    std::memcpy(&v, take(sizeof v, what).data(), sizeof v);
    return v;
  }
  std::string_view take(std::size_t size, std::string_view what) {
    if (size > m_bytes.size() - m_at)
      throw InputError(fmt::format("--imatrix {}: not a llama-imatrix file (GGUF or legacy imatrix.dat): it ends at "
                                   "byte {} inside {}",
                                   m_file.string(), m_bytes.size(), what));
    const auto out = m_bytes.substr(m_at, size);
    m_at += size;
    return out;
  }

private:
  const std::filesystem::path& m_file;
  std::string_view m_bytes;
  std::size_t m_at = 0;
};

// llama-imatrix's legacy binary file: int32 entries; per entry an int32 name length, the GGUF
// weight name, int32 ncall (the chunks it saw), int32 nval and nval float32 values (Σx²/count ·
// ncall); then, optionally, int32 chunks and an int32 length with the dataset's name. As
// llama-quantize reads it, a weight's mean is value / ncall (the value itself when ncall ≤ 0).
ImportanceMatrix
read_legacy_importance_matrix(const std::filesystem::path& path, std::string_view bytes) {
  LegacyCursor in(path, bytes);
  const auto entries = in.i32("the entry count");
  if (entries < 1)
    throw InputError(fmt::format("--imatrix {}: not a llama-imatrix file (GGUF or legacy imatrix.dat): {} entries",
                                 path.string(), entries));
  ImportanceMatrix out;
  for (std::int32_t e = 0; e < entries; ++e) {
    const auto length = in.i32("an entry's name length");
    const std::string name(in.take(static_cast<std::size_t>(std::max(length, 0)), "an entry's name"));
    const auto ncall = in.i32("an entry's call count");
    const auto values = in.i32("an entry's value count");
    if (length < 1 || values < 1)
      throw InputError(
          fmt::format("--imatrix {}: entry {} has a name of {} bytes and {} values", path.string(), e, length, values));
    const auto raw = in.take(static_cast<std::size_t>(values) * sizeof(float), "an entry's values");
    std::vector<float> sums(static_cast<std::size_t>(values));
    std::memcpy(sums.data(), raw.data(), raw.size());
    auto weight = weight_importance(std::move(sums), static_cast<float>(ncall));
    if (ncall <= 0)
      weight.mean = weight.in_sum2;
    check_values(weight, path, name);
    out.samples = std::max<std::int64_t>(out.samples, ncall);
    if (const auto module = module_of(name))
      out.weights[*module] = std::move(weight);
  }
  if (!in.done()) {
    out.samples = in.i32("the chunk count");
    if (!in.done())
      out.dataset = std::string(
          in.take(static_cast<std::size_t>(std::max(in.i32("the dataset's name length"), 0)), "the dataset's name"));
  }
  return out;
}

ImportanceMatrix
read_gguf_importance_matrix(const std::filesystem::path& path, const model::ModelConfig* config) {
  const model::GgufFile file(path);
  const auto* type = file.find("general.type");
  if (!type || type->value != "imatrix")
    throw InputError(fmt::format("--imatrix {}: not an importance matrix (general.type is not imatrix; write one "
                                 "with llama-imatrix, or pass --calib)",
                                 path.string()));
  ImportanceMatrix out;
  out.samples = file.require_u32("imatrix.chunk_count");
  out.sample_tokens = file.require_u32("imatrix.chunk_size");
  out.tokens = out.samples * out.sample_tokens;
  if (const auto* datasets = file.find("imatrix.datasets");
      datasets && datasets->value.is_array() && !datasets->value.empty() && datasets->value[0].is_string())
    out.dataset = datasets->value[0].get<std::string>();
  constexpr std::string_view kSums = ".in_sum2";
  for (const auto& t : file.header().tensors) {
    if (!t.name.ends_with(kSums))
      continue;
    const auto weight = t.name.substr(0, t.name.size() - kSums.size());
    const auto* counts = file.find_tensor(weight + ".counts");
    if (!counts)
      continue;
    if (const auto module = module_of(weight)) {
      out.weights[*module] = std::move(read_weights(file, t, *counts, 1).front());
      check_values(out.weights[*module], path, weight);
    } else if (const auto place = model::gguf_experts_place(weight); place && config && config->num_experts > 0) {
      auto experts = read_weights(file, t, *counts, config->num_experts);
      for (std::int64_t e = 0; e < config->num_experts; ++e) {
        check_values(experts[static_cast<std::size_t>(e)], path, weight);
        out.weights[model::expert_module(*config, place->layer, e, place->projection)] =
            std::move(experts[static_cast<std::size_t>(e)]);
      }
    }
  }
  return out;
}

} // namespace

ImportanceMatrix
read_importance_matrix(const std::filesystem::path& path, const model::ModelConfig* config) {
  auto out =
      model::is_gguf_file(path) // GGUF's magic; anything else is read as a legacy imatrix.dat
          ? read_gguf_importance_matrix(path, config)
          : read_legacy_importance_matrix(path, read_input_file(path, "an importance matrix from llama-imatrix"));
  if (out.weights.empty())
    throw InputError(fmt::format("--imatrix {}: no entry names a decoder layer's weight", path.string()));
  out.source = path.string();
  return out;
}

namespace {

// A tensor of the written file: a weight's statistic, or a stacked experts tensor's, expert by
// expert (llama-imatrix's in_sum2 [columns, experts] and counts [1, experts]).
struct ImatrixEntry {
  std::string gguf;
  std::vector<const WeightImportance*> weights;
};

std::vector<ImatrixEntry>
imatrix_entries(const ImportanceMatrix& matrix, const std::filesystem::path& file) {
  std::vector<ImatrixEntry> out;
  std::map<std::string, std::size_t> stacked; // GGUF name → its entry in `out`
  for (const auto& [module, weight] : matrix.weights) {
    if (const auto slot = model::gguf_expert_slot(module + ".weight")) {
      const auto [it, added] = stacked.try_emplace(slot->gguf, out.size());
      if (added)
        out.push_back({slot->gguf, {}});
      auto& experts = out[it->second].weights;
      experts.resize(std::max(experts.size(), static_cast<std::size_t>(slot->expert + 1)), nullptr);
      experts[static_cast<std::size_t>(slot->expert)] = &weight;
      continue;
    }
    const auto name = model::gguf_tensor_name(module + ".weight");
    if (!name)
      throw RuntimeFailure(fmt::format("importance matrix {}: {} has no GGUF name", file.string(), module));
    out.push_back({*name, {&weight}});
  }
  for (const auto& entry : out)
    if (std::ranges::find(entry.weights, nullptr) != entry.weights.end())
      throw RuntimeFailure(fmt::format("importance matrix {}: {} lacks an expert", file.string(), entry.gguf));
  return out;
}

} // namespace

void
write_importance_matrix(const ImportanceMatrix& matrix, const std::filesystem::path& file) {
  model::GgufWriter writer(file);
  writer.set("general.type", model::GgufValue::string("imatrix"));
  writer.set("imatrix.datasets", model::GgufValue::strings({matrix.dataset}));
  writer.set("imatrix.chunk_count", model::GgufValue::u32(static_cast<std::uint32_t>(matrix.samples)));
  writer.set("imatrix.chunk_size", model::GgufValue::u32(static_cast<std::uint32_t>(matrix.sample_tokens)));
  const auto entries = imatrix_entries(matrix, file);
  for (const auto& entry : entries) {
    const auto experts = static_cast<std::int64_t>(entry.weights.size());
    writer.add_tensor(entry.gguf + ".in_sum2",
                      {static_cast<std::int64_t>(entry.weights.front()->in_sum2.size()), experts},
                      model::GgmlType::f32);
    writer.add_tensor(entry.gguf + ".counts", {1, experts}, model::GgmlType::f32);
  }
  for (const auto& entry : entries) {
    for (const auto* weight : entry.weights)
      writer.write(std::as_bytes(std::span(weight->in_sum2)));
    for (const auto* weight : entry.weights)
      writer.write(std::as_bytes(std::span(&weight->count, 1)));
  }
  writer.finish();
}

} // namespace optkit::compress
