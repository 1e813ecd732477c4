#include "compress/importance_matrix.hpp"

#include "core/error.hpp"
#include "model/weight_store.hpp"
#include "runtime/hidden_states.hpp"
#include "runtime/layerwise_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

namespace optkit::compress {

namespace {

using runtime::LinearInput;

// Σx² per column of each linear input of one layer, and the rows seen: the dense inputs, and in a
// mixture of experts each expert's own rows (as llama-imatrix counts a stacked experts tensor).
class SquaresTap final : public runtime::ActivationTap {
public:
  void observe(LinearInput input, const float* x, std::int64_t rows, std::int64_t cols,
               std::int64_t /*sequences*/) override {
    add({input, runtime::kNotAnExpert}, x, rows, cols);
  }
  void observe_expert(std::int64_t expert, LinearInput input, const float* x, std::int64_t rows,
                      std::int64_t cols) override {
    add({input, expert}, x, rows, cols);
  }
  // The statistic of `expert`'s input (kNotAnExpert: a dense one) of `cols` columns; an expert no
  // row chose has a count of 0.
  WeightImportance importance(LinearInput input, std::int64_t expert, std::int64_t cols) const {
    const auto it = m_inputs.find({input, expert});
    if (it == m_inputs.end())
      return weight_importance(std::vector<float>(static_cast<std::size_t>(cols), 0.0f), 0);
    const auto& s = it->second;
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
  void add(std::pair<LinearInput, std::int64_t> key, const float* x, std::int64_t rows, std::int64_t cols) {
    auto& s = m_inputs[key];
    s.sums.resize(static_cast<std::size_t>(cols), 0.0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        s.sums[static_cast<std::size_t>(c)] += double(x[r * cols + c]) * double(x[r * cols + c]);
    s.rows += rows;
  }
  std::map<std::pair<LinearInput, std::int64_t>, Squares> m_inputs;
};

} // namespace

WeightImportance
weight_importance(std::vector<float> in_sum2, float count) {
  WeightImportance out{std::move(in_sum2), count, {}};
  out.mean.resize(out.in_sum2.size(), 1.0f);
  if (count > 0)
    for (std::size_t c = 0; c < out.mean.size(); ++c)
      out.mean[c] = out.in_sum2[c] / count;
  return out;
}

void
check_importance_matrix_fits(const ImportanceMatrix& matrix, const std::filesystem::path& model_dir,
                             const std::filesystem::path& file) {
  const model::WeightStore store(model_dir);
  for (const auto& [module, weight] : matrix.weights) {
    const auto tensor = store.find(module + ".weight");
    if (!tensor.info || tensor.shape().size() != 2)
      continue; // never looked up, as llama-quantize ignores it (a tied lm_head's, say)
    if (static_cast<std::int64_t>(weight.in_sum2.size()) != tensor.shape()[1])
      throw InputError(fmt::format("--imatrix {}: {} has {} columns in it, {} in the model (an importance matrix of "
                                   "another model?)",
                                   file.string(), module, weight.in_sum2.size(), tensor.shape()[1]));
  }
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
    for (const auto& linear : runtime::layer_linears(config, layer))
      out.weights[fmt::format("model.layers.{}.{}", layer, linear.name)] =
          tap.importance(linear.input, linear.expert, model.linear(layer, linear.name).cols());
    model.release_layer(layer);
  }
  return out;
}

} // namespace optkit::compress
