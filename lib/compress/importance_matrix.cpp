#include "compress/importance_matrix.hpp"

#include "core/error.hpp"
#include "model/gguf_file.hpp"
#include "model/gguf_names.hpp"
#include "runtime/hidden_states.hpp"
#include "runtime/layerwise_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace optkit::compress {

namespace {

using runtime::LinearInput;

// A weight's statistic from its in_sum2 and count, with the means the k-quants weigh by.
WeightImportance
weight_importance(std::vector<float> in_sum2, float count) {
  WeightImportance out{std::move(in_sum2), count, {}};
  out.mean.resize(out.in_sum2.size(), 1.0f);
  if (count > 0)
    for (std::size_t c = 0; c < out.mean.size(); ++c)
      out.mean[c] = out.in_sum2[c] / count;
  return out;
}

// Σx² per column of each linear input of one layer, and the rows seen.
class SquaresTap final : public runtime::ActivationTap {
public:
  void observe(LinearInput input, const float* x, std::int64_t rows, std::int64_t cols,
               std::int64_t /*sequences*/) override {
    auto& s = m_inputs[input];
    s.sums.resize(static_cast<std::size_t>(cols), 0.0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        s.sums[static_cast<std::size_t>(c)] += double(x[r * cols + c]) * double(x[r * cols + c]);
    s.rows += rows;
  }

  WeightImportance importance(LinearInput input) const {
    const auto& s = m_inputs.at(input);
    std::vector<float> in_sum2(s.sums.size());
    for (std::size_t c = 0; c < in_sum2.size(); ++c)
      in_sum2[c] = static_cast<float>(s.sums[c]);
    return weight_importance(std::move(in_sum2), static_cast<float>(s.rows));
  }

private:
  struct Squares {
    std::vector<double> sums;
    std::int64_t rows = 0;
  };
  std::map<LinearInput, Squares> m_inputs;
};

// One weight's in_sum2 and counts from a file.
WeightImportance
read_weight(const model::GgufFile& file, const model::GgufTensorInfo& sums, const model::GgufTensorInfo& counts) {
  if (sums.type != model::GgmlType::f32 || counts.type != model::GgmlType::f32 || sums.rows() != 1 ||
      counts.element_count() != 1)
    throw InputError(fmt::format("{}: {} and {} must be F32 [columns] and [1] (a dense model's importance matrix)",
                                 file.path().string(), sums.name, counts.name));
  float count = 0;
  std::memcpy(&count, file.tensor_bytes(counts).data(), sizeof count);
  std::vector<float> in_sum2(static_cast<std::size_t>(sums.row_values()));
  std::memcpy(in_sum2.data(), file.tensor_bytes(sums).data(), in_sum2.size() * sizeof(float));
  return weight_importance(std::move(in_sum2), count);
}

} // namespace

ImportanceMatrix
read_importance_matrix(const std::filesystem::path& path) {
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
    const auto hf = model::hf_tensor_name(weight);
    const auto* counts = file.find_tensor(weight + ".counts");
    if (!hf || !counts)
      continue; // a weight GGUF export does not quantize with it (the output's, an expert's)
    out.weights[hf->substr(0, hf->size() - std::string_view(".weight").size())] = read_weight(file, t, *counts);
  }
  if (out.weights.empty())
    throw InputError(fmt::format("--imatrix {}: no entry names a decoder layer's weight", path.string()));
  return out;
}

void
write_importance_matrix(const ImportanceMatrix& matrix, const std::filesystem::path& file) {
  model::GgufWriter writer(file);
  writer.set("general.type", model::GgufValue::string("imatrix"));
  writer.set("imatrix.datasets", model::GgufValue::strings({matrix.dataset}));
  writer.set("imatrix.chunk_count", model::GgufValue::u32(static_cast<std::uint32_t>(matrix.samples)));
  writer.set("imatrix.chunk_size", model::GgufValue::u32(static_cast<std::uint32_t>(matrix.sample_tokens)));
  for (const auto& [module, weight] : matrix.weights) {
    const auto name = model::gguf_tensor_name(module + ".weight");
    if (!name)
      throw RuntimeFailure(fmt::format("importance matrix {}: {} has no GGUF name", file.string(), module));
    writer.add_tensor(*name + ".in_sum2", {static_cast<std::int64_t>(weight.in_sum2.size()), 1}, model::GgmlType::f32);
    writer.add_tensor(*name + ".counts", {1, 1}, model::GgmlType::f32);
  }
  for (const auto& [module, weight] : matrix.weights) {
    writer.write(std::as_bytes(std::span(weight.in_sum2)));
    writer.write(std::as_bytes(std::span(&weight.count, 1)));
  }
  writer.finish();
}

ImportanceMatrix
collect_importance_matrix(const std::filesystem::path& model_dir, const CalibrationSet& calibration, unsigned threads,
                          runtime::ActivationPrecision activations) {
  runtime::LayerwiseModel model(model_dir, threads, activations);
  const auto& config = model.config();
  ImportanceMatrix out;
  std::vector<std::int64_t> lengths;
  for (const auto& sample : calibration.samples) {
    lengths.push_back(static_cast<std::int64_t>(sample.size()));
    out.tokens += static_cast<std::int64_t>(sample.size());
  }
  out.samples = static_cast<std::int64_t>(calibration.samples.size());
  out.sample_tokens = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  runtime::HiddenStates x(out.tokens, config.hidden_size);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < calibration.samples.size(); ++i) {
    const auto e = model.embed(calibration.samples[i]);
    std::copy(e.begin(), e.end(), x.rows(offset, lengths[i]).begin());
    offset += lengths[i];
  }
  model.weights().release("model.embed_tokens.weight");
  for (std::int64_t layer = 0; layer < config.num_layers; ++layer) {
    SquaresTap tap;
    model.run_layer_chunked(layer, lengths, x, &tap); // x becomes the next layer's input
    for (const auto& linear : runtime::kDecoderLinears)
      out.weights[fmt::format("model.layers.{}.{}", layer, linear.name)] = tap.importance(linear.input);
    model.release_layer(layer);
  }
  return out;
}

} // namespace optkit::compress
