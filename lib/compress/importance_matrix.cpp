#include "compress/importance_matrix.hpp"

#include "core/error.hpp"
#include "model/gguf_file.hpp"
#include "model/gguf_names.hpp"
#include "runtime/hidden_states.hpp"
#include "runtime/layerwise_model.hpp"

#include <fmt/format.h>

#include <cstring>

namespace optkit::compress {

namespace {

using runtime::LinearInput;

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

  std::vector<float> mean_squares(LinearInput input) const {
    const auto& s = m_inputs.at(input);
    std::vector<float> out(s.sums.size());
    for (std::size_t c = 0; c < out.size(); ++c)
      out[c] = static_cast<float>(s.sums[c] / static_cast<double>(std::max<std::int64_t>(1, s.rows)));
    return out;
  }

private:
  struct Squares {
    std::vector<double> sums;
    std::int64_t rows = 0;
  };
  std::map<LinearInput, Squares> m_inputs;
};

// One weight's importance: in_sum2 / counts per column, or 1 where nothing was counted.
std::vector<float>
mean_squares(const model::GgufFile& file, const model::GgufTensorInfo& sums, const model::GgufTensorInfo& counts) {
  if (sums.type != model::GgmlType::f32 || counts.type != model::GgmlType::f32 || sums.rows() != 1 ||
      counts.element_count() != 1)
    throw InputError(fmt::format("{}: {} and {} must be F32 [columns] and [1] (a dense model's importance matrix)",
                                 file.path().string(), sums.name, counts.name));
  float count = 0;
  std::memcpy(&count, file.tensor_bytes(counts).data(), sizeof count);
  std::vector<float> out(static_cast<std::size_t>(sums.row_values()));
  std::memcpy(out.data(), file.tensor_bytes(sums).data(), out.size() * sizeof(float));
  for (auto& v : out)
    v = count > 0 ? v / count : 1.0f;
  return out;
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
  out.tokens = out.samples * file.require_u32("imatrix.chunk_size");
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
    out.columns[hf->substr(0, hf->size() - std::string_view(".weight").size())] = mean_squares(file, t, *counts);
  }
  if (out.columns.empty())
    throw InputError(fmt::format("--imatrix {}: no entry names a decoder layer's weight", path.string()));
  return out;
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
      out.columns[fmt::format("model.layers.{}.{}", layer, linear.name)] = tap.mean_squares(linear.input);
    model.release_layer(layer);
  }
  return out;
}

} // namespace optkit::compress
