#include "hetero/layer_statistics.hpp"

#include "core/available_cpus.hpp"
#include "core/blas_threads.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "model/safetensors.hpp"
#include "quant/hessian.hpp"
#include "quant/quantizer.hpp"
#include "runtime/layerwise_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

namespace optkit::hetero {
namespace {

using runtime::LinearInput;
using Clock = std::chrono::steady_clock;

// Summarises each linear input of one layer as the calibration rows pass: the moments of all its
// entries and, for the Hessian indicator, 2/N · Σ XᵀX.
class StatisticsTap final : public runtime::ActivationTap {
public:
  StatisticsTap(bool hessian, int blas_threads) : m_hessian(hessian), m_blas_threads(blas_threads) {}

  void observe(LinearInput input, const float* x, std::int64_t rows, std::int64_t cols,
               std::int64_t sequences) override {
    const auto started = Clock::now();
    double sum = 0, squares = 0;
    for (std::int64_t i = 0; i < rows * cols; ++i) {
      sum += double(x[i]);
      squares += double(x[i]) * double(x[i]);
    }
    auto& m = m_moments[input];
    m.sum += sum;
    m.squares += squares;
    m.count += rows * cols;
    variance_seconds += seconds_since(started);
    if (!m_hessian)
      return;
    const auto hessian_started = Clock::now();
    auto& h = m_hessians[input];
    if (!h)
      h = std::make_unique<quant::Hessian>(cols);
    ScopedBlasThreads threads(m_blas_threads);
    h->add(x, rows, sequences);
    hessian_seconds += seconds_since(hessian_started);
  }

  double variance(LinearInput input) const {
    const auto& m = m_moments.at(input);
    const double mean = m.sum / double(m.count);
    return std::max(0.0, m.squares / double(m.count) - mean * mean);
  }
  const quant::Hessian& hessian(LinearInput input) const { return *m_hessians.at(input); }

  double variance_seconds = 0;
  double hessian_seconds = 0;

private:
  struct Moments {
    double sum = 0, squares = 0;
    std::int64_t count = 0;
  };
  bool m_hessian;
  int m_blas_threads;
  std::map<LinearInput, Moments> m_moments;
  std::map<LinearInput, std::unique_ptr<quant::Hessian>> m_hessians;
};

// ‖Q_b(W) − W‖² with compress's round-to-nearest grid: symmetric integers, groups of 128 columns.
double
quantization_error(const std::vector<float>& w, std::int64_t rows, std::int64_t cols, int bits) {
  quant::QuantArgs args;
  args.bits = bits;
  args.strategy = quant::Strategy::group;
  args.group_size = std::min<std::int64_t>(128, cols);
  const auto grid = quant::compute_grid(w, rows, cols, args, model::DType::f32);
  double error = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = w[std::size_t(r * cols + c)];
      const double d = double(quant::fake_quantize(v, grid.scale_at(r, c), grid.zero_at(r, c), args)) - double(v);
      error += d * d;
    }
  return error;
}

// max|W| straight from the mapped safetensors bytes: for BF16, F16 and F32 the magnitude bits
// (the sign masked off) order finite values as unsigned integers, so no element is widened.
template <typename Bits>
double
max_abs_bits(const model::TensorView& view, Bits magnitude_mask) {
  const auto n = view.element_count();
  Bits largest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    Bits bits;
    std::memcpy(&bits, view.bytes.data() + i * sizeof(Bits), sizeof(Bits));
    largest = std::max<Bits>(largest, static_cast<Bits>(bits & magnitude_mask));
  }
  return n == 0 ? 0.0 : double(model::element_as_float(view.dtype(), reinterpret_cast<const std::byte*>(&largest), 0));
}

// max|W| of a runtime weight, a row at a time (for weights not stored densely in the folder).
double
max_abs_weight(const runtime::LinearWeight& weight) {
  std::vector<float> row(static_cast<std::size_t>(weight.cols()));
  float max_abs = 0;
  for (std::int64_t r = 0; r < weight.rows(); ++r) {
    weight.row(r, row.data());
    for (const float v : row)
      max_abs = std::max(max_abs, std::abs(v));
  }
  return double(max_abs);
}

} // namespace

double
top_eigenvalue(const std::vector<float>& a, std::int64_t n) {
  std::vector<double> v(std::size_t(n), 1.0 / std::sqrt(double(n)));
  std::vector<double> next(std::size_t(n), 0.0);
  double lambda = 0;
  for (int step = 0; step < 500; ++step) {
    for (std::int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (std::int64_t j = 0; j < n; ++j)
        s += double(a[std::size_t(i * n + j)]) * v[std::size_t(j)];
      next[std::size_t(i)] = s;
    }
    double norm = 0;
    for (const double x : next)
      norm += x * x;
    norm = std::sqrt(norm);
    if (norm == 0)
      return 0;
    for (std::int64_t i = 0; i < n; ++i)
      v[std::size_t(i)] = next[std::size_t(i)] / norm;
    const bool settled = std::abs(norm - lambda) <= 1e-6 * norm;
    lambda = norm;
    if (settled)
      break;
  }
  return lambda;
}

MeasuredStatistics
measure_layer_statistics(const std::filesystem::path& model_dir, const std::vector<std::vector<std::int32_t>>& samples,
                         const StatisticsOptions& options) {
  if (samples.empty())
    throw InputError("--calibration: no calibration sequence to measure the indicator on");
  const auto started = Clock::now();
  runtime::LayerwiseModel model(model_dir, options.threads);
  const int threads = static_cast<int>(options.threads > 0 ? options.threads : available_cpus());
  const auto& config = model.config();
  if (config.num_experts > 0 || config.fused_projections)
    throw InputError(fmt::format("{}: plan hetero does not measure {} ({}) yet", model_dir.string(),
                                 config.num_experts > 0 ? "mixture-of-experts models" : "fused qkv_proj / gate_up_proj",
                                 config.architecture_name));

  MeasuredStatistics out;
  std::vector<std::int64_t> lengths;
  for (const auto& sample : samples) {
    lengths.push_back(static_cast<std::int64_t>(sample.size()));
    out.tokens += static_cast<std::int64_t>(sample.size());
  }
  runtime::HiddenStates x(out.tokens, config.hidden_size);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto e = model.embed(samples[i]);
    std::copy(e.begin(), e.end(), x.rows(offset, lengths[i]).begin());
    offset += lengths[i];
  }
  // The rows read came in whole (huge) pages of the mapping: up to the whole embedding.
  model.weights().release("model.embed_tokens.weight");
  if (options.hessian)
    out.hessian_omega.assign(std::size_t(config.num_layers), std::vector<double>(options.bits.size(), 0.0));

  double tapped = 0; // tap and weight time inside the loop, not the forward pass
  for (std::int64_t layer = 0; layer < config.num_layers; ++layer) {
    StatisticsTap tap(options.hessian, threads);
    model.run_layer_chunked(layer, lengths, x, &tap); // x becomes the next layer's input
    out.variance_seconds += tap.variance_seconds;
    out.hessian_seconds += tap.hessian_seconds;
    tapped += tap.variance_seconds + tap.hessian_seconds;

    std::vector<LinearStatistics> operators;
    std::map<LinearInput, double> eigenvalues; // q, k and v share theirs, as gate and up do
    for (const auto& linear : runtime::kDecoderLinears) {
      const auto weight_started = Clock::now();
      const auto& weight = model.linear(layer, linear.name);
      const auto stored = model.weights().find(fmt::format("model.layers.{}.{}.weight", layer, linear.name));
      const bool dense = stored.info && stored.element_count() == std::uint64_t(weight.rows() * weight.cols());
      const double max_abs = !dense                                 ? max_abs_weight(weight)
                             : stored.dtype() == model::DType::bf16 ? max_abs_bits<std::uint16_t>(stored, 0x7fff)
                             : stored.dtype() == model::DType::f16  ? max_abs_bits<std::uint16_t>(stored, 0x7fff)
                             : stored.dtype() == model::DType::f32  ? max_abs_bits<std::uint32_t>(stored, 0x7fffffff)
                                                                    : max_abs_weight(weight);
      const std::string name = linear.name;
      operators.push_back(
          {name.substr(name.find('.') + 1), double(weight.cols()), max_abs, tap.variance(linear.input)});
      const double weight_seconds = seconds_since(weight_started);
      out.variance_seconds += weight_seconds;
      tapped += weight_seconds;
      if (!options.hessian)
        continue;
      const auto hessian_started = Clock::now();
      const auto w = runtime::dense_floats(weight);
      if (!eigenvalues.contains(linear.input)) {
        const auto& h = tap.hessian(linear.input);
        eigenvalues[linear.input] = top_eigenvalue(h.matrix(), h.cols());
      }
      for (std::size_t b = 0; b < options.bits.size(); ++b)
        if (options.bits[b] < 16)
          out.hessian_omega[std::size_t(layer)][b] +=
              eigenvalues[linear.input] * quantization_error(w, weight.rows(), weight.cols(), options.bits[b]);
      const double hessian_seconds = seconds_since(hessian_started);
      out.hessian_seconds += hessian_seconds;
      tapped += hessian_seconds;
    }
    out.layers.push_back(std::move(operators));
    model.release_layer(layer); // one layer's weights resident at a time
  }
  out.forward_seconds = seconds_since(started) - tapped;
  if (options.hessian)
    out.hessian_omega = normalise_to_lowest_bitwidth(std::move(out.hessian_omega), options.bits);
  return out;
}

} // namespace optkit::hetero
