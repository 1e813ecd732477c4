#include "compress/layerwise.hpp"

#include "compress/awq_smoothing.hpp"
#include "core/available_cpus.hpp"
#include "core/blas_threads.hpp"
#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "model/layer_tensors.hpp"
#include "quant/awq_clip.hpp"
#include "quant/compressed_tensors.hpp"
#include "quant/hessian.hpp"
#include "quant/smoothquant.hpp"
#include "runtime/kernels.hpp"
#include "runtime/layer_vectors.hpp"
#include "runtime/layerwise_model.hpp"

#include <array>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <malloc.h>
#include <memory>
#include <numeric>
#include <thread>

namespace optkit::compress {

namespace {

using runtime::LinearInput;

int
hardware_threads(unsigned requested) {
  return static_cast<int>(requested > 0 ? requested : available_cpus());
}

// What the recipe learns from each linear input of one layer: its Hessian (GPTQ, SmoothQuant,
// AWQ; only when the recipe needs them), its largest |x| (NVFP4's input global scale) and its
// mean |x| per column (AWQ).
class CalibrationTap final : public runtime::ActivationTap {
public:
  CalibrationTap(int blas_threads, bool hessians) : m_blas_threads(blas_threads), m_hessians_needed(hessians) {}
  void observe(LinearInput input, const float* x, std::int64_t rows, std::int64_t cols,
               std::int64_t sequences) override {
    add_magnitudes(input, x, rows, cols);
    if (!m_hessians_needed)
      return;
    auto& h = m_hessians[input];
    if (!h)
      h = std::make_unique<quant::Hessian>(cols);
    ScopedBlasThreads threads(m_blas_threads);
    h->add(x, rows, sequences);
  }
  // Whether `input` was seen (a mixture's MLP input through its routing, without a Hessian).
  bool observed(LinearInput input) const { return m_rows.contains(input); }
  quant::Hessian* find(LinearInput input) {
    const auto it = m_hessians.find(input);
    return it == m_hessians.end() ? nullptr : it->second.get();
  }
  void observe_cache(const float* k, const float* v, std::int64_t rows, std::int64_t kv_heads,
                     std::int64_t head_dim) override {
    m_key_absmax.resize(static_cast<std::size_t>(kv_heads), 0.0f);
    m_value_absmax.resize(static_cast<std::size_t>(kv_heads), 0.0f);
    for (std::int64_t i = 0; i < rows * kv_heads * head_dim; ++i) {
      const auto head = static_cast<std::size_t>((i / head_dim) % kv_heads);
      m_key_absmax[head] = std::max(m_key_absmax[head], std::fabs(k[i]));
      m_value_absmax[head] = std::max(m_value_absmax[head], std::fabs(v[i]));
    }
  }
  // The largest |K| and |V| per KV head that went into the cache.
  const std::vector<float>& key_absmax() const { return m_key_absmax; }
  const std::vector<float>& value_absmax() const { return m_value_absmax; }
  // The largest |x| seen on `input` (0 when never seen).
  float input_absmax(LinearInput input) const {
    const auto it = m_input_absmax.find(input);
    return it == m_input_absmax.end() ? 0.0f : it->second;
  }
  // The mean |x| of each of the input's columns (AWQ's activation statistic).
  std::vector<float> input_mean_abs(LinearInput input) const {
    const auto& sum = m_abs_sum.at(input);
    const auto rows = static_cast<double>(std::max<std::int64_t>(m_rows.at(input), 1));
    std::vector<float> out(sum.size());
    for (std::size_t c = 0; c < out.size(); ++c)
      out[c] = static_cast<float>(sum[c] / rows);
    return out;
  }
  // A mixture-of-experts layer's MLP inputs and each row's chosen experts, kept whole: each
  // expert's Hessians are made from its own rows, one expert at a time.
  void observe_routing(const float* h, std::int64_t rows, std::int64_t cols, std::span<const std::int64_t> chosen,
                       std::int64_t k) override {
    add_magnitudes(LinearInput::mlp_in, h, rows, cols);
    m_routed_input.insert(m_routed_input.end(), h, h + rows * cols);
    m_chosen.insert(m_chosen.end(), chosen.begin(), chosen.end());
    m_top_k = k;
  }
  std::span<const float> routed_input() const { return m_routed_input; }
  // The rows that chose `expert`.
  std::vector<std::int64_t> rows_of(std::int64_t expert) const {
    std::vector<std::int64_t> rows;
    for (std::size_t i = 0; i < m_chosen.size(); ++i)
      if (m_chosen[i] == expert)
        rows.push_back(static_cast<std::int64_t>(i) / m_top_k);
    return rows;
  }
  // H of `input` for one of its linears; the last of them takes it (no copy, the accumulator freed).
  std::vector<float> matrix(LinearInput input, bool last_reader) {
    auto* h = find(input);
    if (!last_reader)
      return h->matrix();
    auto taken = std::move(*h).take_matrix();
    m_hessians.erase(input);
    return taken;
  }

private:
  // The largest |x| and the sums of |x| per column.
  void add_magnitudes(LinearInput input, const float* x, std::int64_t rows, std::int64_t cols) {
    auto& absmax = m_input_absmax[input];
    auto& abs_sum = m_abs_sum[input];
    abs_sum.resize(static_cast<std::size_t>(cols), 0.0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const float a = std::fabs(x[r * cols + c]);
        absmax = std::max(absmax, a);
        abs_sum[static_cast<std::size_t>(c)] += static_cast<double>(a);
      }
    m_rows[input] += rows;
  }

  int m_blas_threads;
  bool m_hessians_needed;
  std::map<LinearInput, std::unique_ptr<quant::Hessian>> m_hessians;
  std::map<LinearInput, float> m_input_absmax;
  std::map<LinearInput, std::vector<double>> m_abs_sum;
  std::map<LinearInput, std::int64_t> m_rows;
  std::vector<float> m_key_absmax, m_value_absmax;
  std::vector<float> m_routed_input;
  std::vector<std::int64_t> m_chosen;
  std::int64_t m_top_k = 1;
};

// The linears a compressed module holds: Phi-3's fused self_attn.qkv_proj is q, k and v (one
// input, so one Hessian), compressed as the one matrix its checkpoint stores; any other is itself.
std::vector<std::string>
module_parts(const model::ModelConfig& config, const std::string& name) {
  for (const auto& fused : model::fused_linears(config))
    if (fused.name == name)
      return fused.parts;
  return {name};
}

// The module's weights widened to fp32, its parts' rows one after another, and its [rows, cols].
struct ModuleWeights {
  std::vector<float> values;
  std::int64_t rows = 0, cols = 0;
};

ModuleWeights
module_weights(const runtime::LayerwiseModel& model, std::int64_t layer, const std::vector<std::string>& parts) {
  ModuleWeights out;
  for (const auto& part : parts) {
    const auto& w = model.linear(layer, part);
    auto values = runtime::dense_floats(w);
    out.values.insert(out.values.end(), values.begin(), values.end());
    out.rows += w.rows();
    out.cols = w.cols();
  }
  return out;
}

// `values` (the module's rows) back into its parts' places in the model, each part its own rows.
void
replace_module(runtime::LayerwiseModel& model, std::int64_t layer, const std::vector<std::string>& parts,
               std::vector<float> values) {
  if (parts.size() == 1) {
    const auto& w = model.linear(layer, parts.front());
    const auto rows = w.rows(), cols = w.cols();
    model.replace_linear(layer, parts.front(), runtime::make_owned_dense_weight(std::move(values), rows, cols));
    return;
  }
  std::size_t offset = 0;
  for (const auto& part : parts) {
    const auto& w = model.linear(layer, part);
    const auto rows = w.rows(), cols = w.cols();
    const auto size = static_cast<std::size_t>(rows * cols);
    std::vector<float> own(values.begin() + static_cast<std::ptrdiff_t>(offset),
                           values.begin() + static_cast<std::ptrdiff_t>(offset + size));
    model.replace_linear(layer, part, runtime::make_owned_dense_weight(std::move(own), rows, cols));
    offset += size;
  }
}

// Whether linears[index] is the last of a layer's shared-input linears to read its input (it may
// take the Hessian).
bool
last_reader(const std::vector<runtime::LayerLinear>& linears, std::size_t index) {
  return std::none_of(linears.begin() + static_cast<std::ptrdiff_t>(index) + 1, linears.end(), [&](const auto& l) {
    return l.expert == runtime::kNotAnExpert && l.input == linears[index].input;
  });
}

// An expert's calibration rows as its linears now see them: the MLP inputs routed to it (every
// row with all-experts calibration and for a shared expert), divided by the factors AWQ folded
// into its gate and up (`input_factors`; empty: none), and its SwiGLU hidden activations on them
// (its down projection's inputs). `names`: its gate, up and down under "model.layers.<i>.".
struct ExpertActivations {
  std::vector<float> input, hidden;
  std::int64_t rows = 0, width = 0;
};

ExpertActivations
expert_activations(const runtime::LayerwiseModel& model, std::int64_t layer, std::int64_t expert,
                   const std::array<std::string, 3>& names, const CalibrationTap& tap, bool all_experts,
                   std::span<const float> input_factors, ThreadPool& pool) {
  const auto hidden = model.config().hidden_size;
  const auto all = tap.routed_input();
  std::vector<std::int64_t> rows;
  if (all_experts || expert == runtime::kSharedExpert) {
    rows.resize(all.size() / static_cast<std::size_t>(hidden));
    std::iota(rows.begin(), rows.end(), 0);
  } else {
    rows = tap.rows_of(expert);
  }
  const auto& gate_weight = model.linear(layer, names[0]);
  ExpertActivations out;
  out.rows = static_cast<std::int64_t>(rows.size());
  out.width = gate_weight.rows();
  if (rows.empty())
    return out;
  out.input.resize(static_cast<std::size_t>(out.rows * hidden));
  for (std::int64_t i = 0; i < out.rows; ++i) {
    auto* row = out.input.data() + i * hidden;
    std::copy_n(all.data() + rows[static_cast<std::size_t>(i)] * hidden, hidden, row);
    for (std::size_t c = 0; c < input_factors.size(); ++c)
      row[c] /= input_factors[c];
  }
  out.hidden.resize(static_cast<std::size_t>(out.rows * out.width));
  std::vector<float> up(out.hidden.size());
  gate_weight.multiply(out.input.data(), out.rows, out.hidden.data(), pool);
  model.linear(layer, names[1]).multiply(out.input.data(), out.rows, up.data(), pool);
  runtime::gated_activation(model.config().activation, out.hidden.data(), up.data(), out.rows * out.width);
  return out;
}

// An expert's two input Hessians, of its gate and up projections' inputs and of its down
// projection's (expert_activations). An expert without rows gets identity Hessians: GPTQ then
// rounds to nearest, as it has nothing to weigh the errors by.
struct ExpertHessians {
  std::vector<float> input, hidden;
  std::int64_t tokens = 0;
};

std::vector<float>
identity_matrix(std::int64_t n) {
  std::vector<float> m(static_cast<std::size_t>(n * n), 0.0f);
  for (std::int64_t i = 0; i < n; ++i)
    m[static_cast<std::size_t>(i * n + i)] = 1.0f;
  return m;
}

ExpertHessians
expert_hessians(const ExpertActivations& a, std::int64_t hidden, int threads) {
  if (a.rows == 0)
    return {identity_matrix(hidden), identity_matrix(a.width), 0};
  ScopedBlasThreads blas(threads);
  quant::Hessian h_input(hidden), h_hidden(a.width);
  h_input.add(a.input.data(), a.rows, a.rows);
  h_hidden.add(a.hidden.data(), a.rows, a.rows);
  return {std::move(h_input).take_matrix(), std::move(h_hidden).take_matrix(), a.rows};
}

// An expert's largest |x| into its gate and up and into its down (NVFP4's input global scales).
struct ExpertInputAbsmax {
  float input = 0.0f, hidden = 0.0f;
};

ExpertInputAbsmax
expert_input_absmax(const ExpertActivations& a) {
  const auto largest = [](const std::vector<float>& v) {
    float m = 0.0f;
    for (const float x : v)
      m = std::max(m, std::fabs(x));
    return m;
  };
  return {largest(a.input), largest(a.hidden)};
}

// AWQ's view of an expert's down projection input: mean |h| per column and its Hessian.
AwqExpertInputs
awq_expert_inputs(const ExpertActivations& a, int threads) {
  AwqExpertInputs out;
  out.tokens = a.rows;
  if (a.rows == 0)
    return out;
  std::vector<double> sum(static_cast<std::size_t>(a.width), 0.0);
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t c = 0; c < a.width; ++c)
      sum[static_cast<std::size_t>(c)] +=
          static_cast<double>(std::fabs(a.hidden[static_cast<std::size_t>(r * a.width + c)]));
  out.mean_abs.resize(sum.size());
  for (std::size_t c = 0; c < sum.size(); ++c)
    out.mean_abs[c] = static_cast<float>(sum[c] / static_cast<double>(a.rows));
  ScopedBlasThreads blas(threads);
  quant::Hessian h(a.width);
  h.add(a.hidden.data(), a.rows, a.rows);
  out.hessian = std::move(h).take_matrix();
  return out;
}

double
relative_frobenius_error(std::span<const float> w, std::span<const float> recon) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double e = static_cast<double>(w[i]) - static_cast<double>(recon[i]);
    num += e * e;
    den += static_cast<double>(w[i]) * static_cast<double>(w[i]);
  }
  return den > 0 ? num / den : 0;
}

// One matrix to compress: W (or Δ) [rows, cols] onto `args`, the Hessian of its inputs (empty:
// uncalibrated).
struct MatrixJob {
  std::string module;
  quant::QuantArgs args;
  std::span<const float> w;
  std::int64_t rows, cols;
  std::span<float> hessian; // GPTQ borrows it as its workspace and gives it back
  bool sparse_2_4;
  model::DType scale_dtype;
  std::optional<float> shared_absmax; // NVFP4: the global scale's max|w|, shared with the fused linears
};

quant::GptqOptions
gptq_options(const Recipe& recipe, const std::string& module, bool sparse_2_4) {
  quant::GptqOptions o;
  o.block_size = recipe.block_size;
  o.dampening = recipe.dampening;
  o.act_order = recipe.act_order;
  o.sparse_2_4 = sparse_2_4;
  o.layer = module;
  return o;
}

// Compresses by the recipe's method (GPTQ / SparseGPT, or RTN) and appends the layer's report.
CompressedLinear
compress_matrix(const Recipe& recipe, const MatrixJob& job, int threads, ThreadPool& pool,
                std::vector<LayerReport>& reports) {
  ScopedBlasThreads blas(threads);
  CompressedLinear out{job.module, {}, job.sparse_2_4};
  if (recipe.method == Method::gptq) {
    out.matrix = quant::gptq(job.w, job.rows, job.cols, job.hessian, job.args, job.scale_dtype,
                             gptq_options(recipe, job.module, job.sparse_2_4), pool);
  } else {
    out.matrix = quant::rtn(job.w, job.rows, job.cols, job.args, job.scale_dtype, job.shared_absmax);
  }
  const auto& cm = out.matrix;
  LayerReport report;
  report.module = job.module;
  report.relative_error = job.hessian.empty()
                              ? relative_frobenius_error(job.w, cm.weight)
                              : quant::relative_output_error(job.w, cm.weight, job.rows, job.cols, job.hessian);
  report.gptq_loss = cm.loss;
  report.dampening = cm.dampening;
  report.damping_attempts = cm.damping_attempts;
  reports.push_back(report);
  return out;
}

// The LM head's input Hessian: the final-normed outputs of the compressed layers.
std::vector<float>
head_input_hessian(const runtime::LayerwiseModel& model, std::span<const std::int64_t> lengths,
                   runtime::HiddenStates& x, int threads) {
  quant::Hessian hessian(model.config().hidden_size);
  ScopedBlasThreads blas(threads);
  const auto normed = model.final_norm(x.all());
  x.release(0, x.rows());
  hessian.add(normed.data(), static_cast<std::int64_t>(normed.size()) / model.config().hidden_size,
              static_cast<std::int64_t>(lengths.size()));
  return hessian.matrix();
}

// Delta mode: the LM head's Δ by the recipe's method (GPTQ) on the head's input Hessian,
// kHeadRowBlock rows at a time (GPTQ treats rows independently given H; a head of a 128k
// vocabulary is 0.25-1 billion values), each block handed to the sink as it is done. One report
// for the whole head.
LayerReport
compress_head_delta(const Recipe& recipe, const model::WeightStore& variant, const model::WeightStore& base,
                    std::vector<float> h, int threads, ThreadPool& pool, model::DType scale_dtype,
                    CompressedLayerSink& sink) {
  constexpr std::int64_t kHeadRowBlock = 8192;
  const auto head = variant.require("lm_head.weight");
  const auto rows = head.shape().at(0), cols = head.shape().at(1);
  if (const auto b = base.find("lm_head.weight"); !b.info || b.shape() != head.shape())
    throw InputError("lm_head: the base has no LM head of the fine-tuned model's shape");
  LayerReport report{"lm_head"};
  quant::OutputErrorTerms terms;
  ScopedBlasThreads blas(threads);
  for (std::int64_t first = 0; first < rows; first += kHeadRowBlock) {
    const auto count = std::min(kHeadRowBlock, rows - first);
    auto delta = variant.rows_as_floats("lm_head.weight", first, count);
    const auto base_values = base.rows_as_floats("lm_head.weight", first, count);
    for (std::size_t i = 0; i < delta.size(); ++i)
      delta[i] -= base_values[i];
    CompressedLinear block{"lm_head",
                           recipe.method == Method::gptq
                               ? quant::gptq(delta, count, cols, h, recipe.weights, scale_dtype,
                                             gptq_options(recipe, "lm_head", false), pool)
                               : quant::rtn(delta, count, cols, recipe.weights, scale_dtype),
                           false};
    const auto block_terms = quant::output_error_terms(delta, block.matrix.weight, count, cols, h);
    terms.error += block_terms.error;
    terms.reference += block_terms.reference;
    report.gptq_loss += block.matrix.loss;
    report.dampening = block.matrix.dampening;
    report.damping_attempts = block.matrix.damping_attempts;
    block.matrix.weight = {};
    sink.add_linear(block);
  }
  report.relative_error = terms.reference > 0 ? terms.error / terms.reference : 0.0;
  return report;
}

// FP8 KV-cache scales from the largest |K| or |V| per KV head: max / 448 per head, or the largest
// of them for one scale per tensor.
std::vector<float>
kv_cache_scales(const std::vector<float>& absmax, quant::KvScaleStrategy strategy) {
  std::vector<float> scales = absmax;
  if (strategy == quant::KvScaleStrategy::tensor)
    scales = {*std::max_element(absmax.begin(), absmax.end())};
  for (auto& s : scales)
    s = std::max(s / 448.0f, std::numeric_limits<float>::epsilon());
  return scales;
}

// Where vLLM fuses linears (q/k/v, gate/up; an expert's gate/up), one per input and expert.
using FusedSet = std::pair<LinearInput, std::int64_t>;

// NVFP4: the largest |w| of each fused set of the layer's compressed linears, whose global scale
// they share (llm-compressor's fused global scales; vLLM would otherwise take the largest and warn).
std::map<FusedSet, float>
fused_absmax(const runtime::LayerwiseModel& model, const Recipe& recipe, std::int64_t layer) {
  std::map<FusedSet, float> out;
  for (const auto& linear : runtime::layer_linears(model.config(), layer)) {
    if (!compressed_weight_args(recipe, layer, fmt::format("model.layers.{}.{}", layer, linear.name)))
      continue;
    float absmax = 0.0f;
    for (const auto& part : module_parts(model.config(), linear.name))
      for (const float v : runtime::dense_floats(model.linear(layer, part)))
        absmax = std::max(absmax, std::fabs(v));
    auto& shared = out[{linear.input, linear.expert}];
    shared = std::max(shared, absmax);
  }
  return out;
}

} // namespace

bool
recipe_targets(const Recipe& recipe, const std::string& module) {
  bool targeted = false;
  for (const auto& t : recipe.targets)
    if (t == "Linear" || quant::module_matches(t, module))
      targeted = true;
  if (!targeted)
    return false;
  for (const auto& i : recipe.ignore)
    if (quant::module_matches(i, module))
      return false;
  return true;
}

bool
calibrates_head_delta(const Recipe& recipe, const model::ModelConfig& config) {
  return recipe.needs_calibration() && !config.tie_word_embeddings && recipe_targets(recipe, "lm_head");
}

std::optional<quant::QuantArgs>
compressed_weight_args(const Recipe& recipe, std::int64_t layer, const std::string& module) {
  const auto args = recipe.layer_weights(layer);
  if (!args || !recipe_targets(recipe, module))
    return std::nullopt;
  return args;
}

namespace {

// compress_layers, one decoder layer at a time: the calibration set's hidden states go through
// the layer (its inputs observed by a CalibrationTap), its inputs are smoothed (SmoothQuant, AWQ),
// each linear is compressed against the Hessian of its inputs and replaced by its reconstruction,
// and the compressed layer's outputs become the next layer's inputs.
class LayerCompressor {
public:
  LayerCompressor(const Recipe& recipe, const LayerwiseOptions& options)
      : m_recipe(recipe)
      , m_options(options)
      , m_threads(hardware_threads(options.threads))
      , m_model(options.model, options.threads, options.activations)
      , m_base(options.base
                   ? std::make_unique<runtime::LayerwiseModel>(*options.base, options.threads, options.activations)
                   : nullptr)
      , m_config(m_model.config())
      , m_scale_dtype(m_model.weights().float_dtype())
      , m_pool(static_cast<unsigned>(m_threads))
      , m_calibrated(recipe.needs_calibration())
      , m_hessians(m_calibrated && recipe.needs_hessians())
      , m_input_global_scales(recipe.input_activations && recipe.input_activations->has_global_scale())
      , m_lengths(sample_lengths(m_calibrated ? options.calibration : nullptr))
      , m_x(std::accumulate(m_lengths.begin(), m_lengths.end(), std::int64_t{0}), m_config.hidden_size,
            options.spill_dir) {
    check();
  }

  LayerwiseResult run() {
    embed_calibration();
    if (m_options.progress)
      m_options.progress(0, m_config.num_layers);
    for (std::int64_t layer = 0; layer < m_config.num_layers; ++layer) {
      compress_layer(layer);
      if (m_options.progress)
        m_options.progress(layer + 1, m_config.num_layers);
    }
    if (m_base && calibrates_head_delta(m_recipe, m_config)) {
      const auto h = head_input_hessian(m_model, m_lengths, m_x, m_threads);
      m_result.reports.push_back(compress_head_delta(m_recipe, m_model.weights(), m_base->weights(), h, m_threads,
                                                     m_pool, m_scale_dtype, *m_options.sink));
      m_error_sum += m_result.reports.back().relative_error;
    }
    m_result.calibration_loss =
        m_result.reports.empty() ? 0 : m_error_sum / static_cast<double>(m_result.reports.size());
    return std::move(m_result);
  }

private:
  void check() const {
    if (!m_options.sink)
      throw RuntimeFailure("compress_layers: no sink for the compressed layers");
    if (m_calibrated && (!m_options.calibration || m_options.calibration->samples.empty()))
      throw InputError(fmt::format("recipe {} needs calibration data: pass --calib FILE", m_recipe.name));
  }

  static std::vector<std::int64_t> sample_lengths(const CalibrationSet* calibration) {
    std::vector<std::int64_t> lengths;
    if (calibration)
      for (const auto& sample : calibration->samples)
        lengths.push_back(static_cast<std::int64_t>(sample.size()));
    return lengths;
  }

  // The calibration samples' embeddings: the first layer's inputs.
  void embed_calibration() {
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < m_lengths.size(); ++i) {
      const auto e = m_model.embed(m_options.calibration->samples[i]);
      std::copy(e.begin(), e.end(), m_x.rows(offset, m_lengths[i]).begin());
      m_x.release(offset, m_lengths[i]);
      offset += m_lengths[i];
    }
    // The rows read came in whole (huge) pages of the mapping: up to the whole embedding.
    m_model.weights().release("model.embed_tokens.weight");
    if (!m_recipe.layer_bits.empty() && static_cast<std::int64_t>(m_recipe.layer_bits.size()) != m_config.num_layers)
      throw InputError(fmt::format("the plan gives bits for {} layers but {} has {}", m_recipe.layer_bits.size(),
                                   m_options.model.string(), m_config.num_layers));
  }

  void compress_layer(std::int64_t layer) {
    std::map<std::string, std::vector<float>> layer_tensors; // computed: folded norms, KV-cache scales
    CalibrationTap tap(m_threads, m_hessians);
    if (m_calibrated)
      m_model.observe_layer(layer, m_lengths, m_x, tap);
    auto smoothing = smooth_inputs(layer, tap, layer_tensors);
    if (m_recipe.awq)
      apply_awq(m_model, m_recipe, layer, awq_statistics(layer, tap, smoothing), m_lengths, m_x, m_scale_dtype,
                smoothing, layer_tensors);
    if (m_recipe.kv_cache) {
      const auto [k_name, v_name] = quant::kv_scale_names(layer);
      layer_tensors[k_name] = kv_cache_scales(tap.key_absmax(), *m_recipe.kv_cache);
      layer_tensors[v_name] = kv_cache_scales(tap.value_absmax(), *m_recipe.kv_cache);
    }
    compress_linears(layer, tap, smoothing);
    if (m_calibrated)
      m_model.run_layer_chunked(layer, m_lengths, m_x, nullptr);
    m_model.release_layer(layer);
    ::malloc_trim(0); // what the layer freed inside the heap goes back to the kernel
    if (m_base)
      m_base->release_layer(layer);
    m_options.sink->end_layer(layer, layer_tensors);
  }

  // SmoothQuant: folds s into the norm before q/k/v and the one before gate/up (a mixture of
  // experts' MLP input is not smoothed: its experts see different rows). Returns s of each input.
  std::map<LinearInput, std::vector<float>> smooth_inputs(std::int64_t layer, CalibrationTap& tap,
                                                          std::map<std::string, std::vector<float>>& layer_tensors) {
    std::map<LinearInput, std::vector<float>> smoothing;
    if (!m_recipe.smoothquant_alpha)
      return smoothing;
    for (const auto input : {LinearInput::attention_in, LinearInput::mlp_in}) {
      if (input == LinearInput::mlp_in && m_config.is_moe_layer(layer))
        continue;
      auto* h = tap.find(input);
      std::vector<std::vector<float>> weights;
      std::vector<std::span<const float>> views;
      std::vector<std::string> names;
      for (const auto& l : runtime::kDecoderLinears)
        if (l.input == input) {
          weights.push_back(runtime::dense_floats(m_model.linear(layer, l.name)));
          names.push_back(l.name);
        }
      for (const auto& w : weights)
        views.emplace_back(w);
      const auto s = quant::smoothing_factors(h->column_absmax(), views, h->cols(), *m_recipe.smoothquant_alpha);
      auto& norm = m_model.norm_weight(layer, input);
      for (std::size_t j = 0; j < norm.size(); ++j)
        norm[j] /= s[j];
      layer_tensors[runtime::norm_tensor_name(m_config, layer, input)] = runtime::stored_gain(norm, m_config);
      for (std::size_t i = 0; i < names.size(); ++i) {
        quant::scale_columns(weights[i], h->cols(), s);
        const auto& old = m_model.linear(layer, names[i]);
        m_model.replace_linear(layer, names[i],
                               runtime::make_owned_dense_weight(std::move(weights[i]), old.rows(), old.cols()));
      }
      smoothing.emplace(input, s);
    }
    return smoothing;
  }

  // Every linear of the layer in order; an expert's gate, up and down against its own Hessians.
  void compress_linears(std::int64_t layer, CalibrationTap& tap,
                        const std::map<LinearInput, std::vector<float>>& smoothing) {
    const auto shared_absmax =
        m_recipe.weights.has_global_scale() ? fused_absmax(m_model, m_recipe, layer) : std::map<FusedSet, float>{};
    const auto linears = runtime::layer_linears(m_config, layer);
    for (std::size_t i = 0; i < linears.size(); ++i) {
      const auto& linear = linears[i];
      if (linear.expert == runtime::kNotAnExpert) {
        std::vector<float> h;
        if (m_hessians) {
          h = tap.matrix(linear.input, last_reader(linears, i));
          if (const auto it = smoothing.find(linear.input); it != smoothing.end())
            quant::rescale_hessian(h, static_cast<std::int64_t>(it->second.size()), it->second);
        }
        compress_linear(layer, linear, std::move(h), -1, tap.input_absmax(linear.input), shared_absmax);
        continue;
      }
      ExpertHessians eh;
      ExpertInputAbsmax absmax;
      if (m_calibrated) {
        const auto rows = expert_rows(layer, linear.expert, tap, smoothing, m_options.all_experts);
        eh = expert_hessians(rows, m_config.hidden_size, m_threads);
        if (m_input_global_scales)
          absmax = rows.rows > 0
                       ? expert_input_absmax(rows)
                       : expert_input_absmax(expert_rows(layer, linear.expert, tap, smoothing, /*all_experts=*/true));
      }
      const std::int64_t tokens = m_calibrated ? eh.tokens : -1;
      compress_linear(layer, linears[i], eh.input, tokens, absmax.input, shared_absmax);
      compress_linear(layer, linears[i + 1], std::move(eh.input), tokens, absmax.input, shared_absmax);
      compress_linear(layer, linears[i + 2], std::move(eh.hidden), tokens, absmax.hidden, shared_absmax);
      i += 2;
    }
  }

  // An expert's calibration rows (expert_activations), its inputs divided by the factors folded into
  // the layer's MLP input (`smoothing`, AWQ's on a mixture); `all_experts`: every row.
  ExpertActivations expert_rows(std::int64_t layer, std::int64_t expert, const CalibrationTap& tap,
                                const std::map<LinearInput, std::vector<float>>& smoothing, bool all_experts) {
    const auto factors = smoothing.find(LinearInput::mlp_in);
    return expert_activations(m_model, layer, expert, runtime::expert_linear_names(m_config, layer, expert), tap,
                              all_experts, factors == smoothing.end() ? std::span<const float>{} : factors->second,
                              m_pool);
  }

  // AWQ's view of the tap; an expert's down-projection inputs as AWQ has smoothed the layer so far.
  AwqStatistics awq_statistics(std::int64_t layer, CalibrationTap& tap,
                               const std::map<LinearInput, std::vector<float>>& smoothing) {
    return {[&](LinearInput input) { return tap.observed(input); },
            [&](LinearInput input) { return tap.input_mean_abs(input); },
            [&](LinearInput input) { return tap.find(input)->matrix(); },
            [this, layer, &tap, &smoothing](std::int64_t expert) {
              return awq_expert_inputs(expert_rows(layer, expert, tap, smoothing, m_options.all_experts), m_threads);
            }};
  }

  // AWQ's clip search runs on the linears whose output error its Hessian measures; like llm-awq,
  // not on q_proj and k_proj, whose outputs meet in the attention scores, not in a sum.
  bool clips_weights(const std::string& linear, const std::vector<float>& h) const {
    return m_recipe.awq && m_recipe.awq->clip && !h.empty() && !m_base && !linear.ends_with("q_proj") &&
           !linear.ends_with("k_proj");
  }

  // One linear against `h`, the Hessian of its inputs (empty: uncalibrated); `expert_tokens`: the
  // calibration tokens an expert saw (-1: not an expert); `input_absmax`: the largest |x| of its
  // inputs (NVFP4's input global scale). In delta mode W is fine-tuned − base.
  void compress_linear(std::int64_t layer, const runtime::LayerLinear& linear, std::vector<float> h,
                       std::int64_t expert_tokens, float input_absmax, const std::map<FusedSet, float>& shared_absmax) {
    const auto module = fmt::format("model.layers.{}.{}", layer, linear.name);
    const auto args = compressed_weight_args(m_recipe, layer, module);
    if (!args)
      return;
    const auto parts = module_parts(m_config, linear.name);
    auto [w, rows, cols] = module_weights(m_model, layer, parts);
    m_model.weights().release(module + ".weight"); // widened: its mapped pages are not needed again
    std::vector<float> base_w;
    if (m_base) {
      auto b = module_weights(*m_base, layer, parts);
      if (b.rows != rows || b.cols != cols)
        throw InputError(fmt::format("{}: fine-tuned [{}, {}] vs base [{}, {}]", module, rows, cols, b.rows, b.cols));
      base_w = std::move(b.values);
      m_base->weights().release(module + ".weight");
      for (std::size_t i = 0; i < w.size(); ++i)
        w[i] -= base_w[i];
    }
    if (clips_weights(linear.name, h))
      quant::awq_clip(w, rows, cols, h, *args, m_scale_dtype);
    std::optional<float> fused;
    if (const auto it = shared_absmax.find({linear.input, linear.expert}); it != shared_absmax.end())
      fused = it->second;
    auto compressed =
        compress_matrix(m_recipe, {module, *args, w, rows, cols, h, m_recipe.sparse_2_4, m_scale_dtype, fused},
                        m_threads, m_pool, m_result.reports);
    if (m_input_global_scales)
      compressed.input_global_scale = quant::nvfp4_global_scale(input_absmax);
    m_result.reports.back().calibration_tokens = expert_tokens;
    m_error_sum += m_result.reports.back().relative_error;
    auto& cm = compressed.matrix;
    std::vector<float> reconstruction = std::move(cm.weight); // the writer needs only q and the grid
    cm.weight = {};
    if (m_calibrated) { // the next layer's inputs come from the compressed layer
      if (m_base)
        for (std::size_t i = 0; i < reconstruction.size(); ++i)
          reconstruction[i] += base_w[i];
      replace_module(m_model, layer, parts, std::move(reconstruction));
    }
    m_options.sink->add_linear(compressed);
  }

  const Recipe& m_recipe;
  const LayerwiseOptions& m_options;
  const int m_threads;
  runtime::LayerwiseModel m_model;
  std::unique_ptr<runtime::LayerwiseModel> m_base;
  const model::ModelConfig& m_config;
  const model::DType m_scale_dtype;
  ThreadPool m_pool;
  const bool m_calibrated, m_hessians, m_input_global_scales;
  std::vector<std::int64_t> m_lengths; // calibration samples' tokens
  runtime::HiddenStates m_x;           // the current layer's inputs, all samples
  LayerwiseResult m_result;
  double m_error_sum = 0;
};

} // namespace

LayerwiseResult
compress_layers(const Recipe& recipe, const LayerwiseOptions& options) {
  return LayerCompressor(recipe, options).run();
}

} // namespace optkit::compress
