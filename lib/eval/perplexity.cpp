#include "eval/perplexity.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/statistics.hpp"
#include "model/tokenizer.hpp"
#include "runtime/transformer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>

namespace optkit::eval {

namespace {

// `out` := log-softmax of one row of logits, in double precision.
void
log_softmax(const float* logits, std::int64_t n, std::vector<double>& out) {
  out.resize(static_cast<std::size_t>(n));
  const float top = *std::max_element(logits, logits + n);
  double total = 0.0;
  for (std::int64_t i = 0; i < n; ++i)
    total += std::exp(static_cast<double>(logits[i] - top));
  const double log_total = std::log(total) + static_cast<double>(top);
  for (std::int64_t i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<double>(logits[i]) - log_total;
}

double
stderr_from_sums(double sum, double sum_sq, double n) {
  if (n < 2)
    return 0.0;
  const double mean = sum / n;
  const double variance = std::max(0.0, sum_sq / n - mean * mean) * n / (n - 1);
  return std::sqrt(variance / n);
}

// Which windows are scored, exactly as llama-perplexity cuts them from the BOS-first token stream.
struct WindowPlan {
  std::int64_t windows = 0;
  std::int64_t length = 0;      // tokens per window
  std::int64_t stride = 0;      // tokens between window starts
  std::int64_t first_logit = 0; // logits first_logit .. length-2 are scored (each predicts the next token)
  bool strided = false;         // --ppl-stride windows rather than whole chunks
  bool bos_first = false;       // each window's first token replaced by BOS

  std::string describe(std::int64_t used) const {
    return fmt::format("llama-perplexity{}: BOS-first text, {} windows of {} tokens every {}{}, scoring the "
                       "tokens after positions {}..{} of each ({} per window)",
                       strided ? fmt::format(" --ppl-stride {}", stride) : "", used, length, stride,
                       bos_first ? ", BOS replacing each window's first token" : "", first_logit, length - 2,
                       length - 1 - first_logit);
  }
};

// Tokens per window: ctx, or with --ppl-stride the ctx + stride/2 llama-perplexity widens it to.
std::int64_t
window_length(std::int64_t ctx, std::int64_t stride) {
  return stride > 0 ? ctx + stride / 2 : ctx;
}

WindowPlan
plan_windows(std::int64_t tokens, std::int64_t ctx, std::int64_t stride, bool has_bos) {
  WindowPlan plan;
  if (stride <= 0) {
    // llama-perplexity's default: whole chunks of ctx tokens, the second half of each scored.
    plan.length = ctx;
    plan.windows = tokens / ctx;
    plan.stride = ctx;
    plan.first_logit = ctx / 2;
    plan.bos_first = has_bos;
  } else {
    // llama-perplexity --ppl-stride: it widens the context to ctx + stride/2, starts a window every
    // `stride` tokens and scores the last `stride` of each. Its BOS substitution happens after the
    // window is decoded, so none takes effect.
    plan.length = window_length(ctx, stride);
    plan.windows = std::max<std::int64_t>(0, (tokens - plan.length + stride - 1) / stride);
    plan.stride = stride;
    plan.first_logit = plan.length - stride - 1;
    plan.strided = true;
  }
  return plan;
}

void
check_window_options(const PerplexityOptions& options) {
  if (options.ctx < 8)
    throw InputError(fmt::format("--ctx {} is too small; use at least 8 tokens", options.ctx));
  if (options.stride >= options.ctx)
    throw InputError(fmt::format("--stride {} is not below --ctx {}; leave --stride out for whole windows "
                                 "(llama-perplexity's default) or give a smaller one",
                                 options.stride, options.ctx));
}

// The model to score, its windows checked against its context.
std::unique_ptr<runtime::CpuTransformer>
open_model(const PerplexityOptions& options) {
  auto model = std::make_unique<runtime::CpuTransformer>(options.model,
                                                         runtime::RuntimeOptions{.threads = options.threads,
                                                                                 .delta = options.delta,
                                                                                 .activations = options.activations,
                                                                                 .weight_loading = options.weights});
  const std::int64_t length = window_length(options.ctx, options.stride);
  if (length > model->config().max_position_embeddings)
    throw InputError(fmt::format("--ctx {}{} exceeds the model's max_position_embeddings {}", options.ctx,
                                 options.stride > 0 ? fmt::format(" (+ --stride/2 = {})", length) : "",
                                 model->config().max_position_embeddings));
  return model;
}

// --kl-base's model (none without it), of the same vocabulary.
std::unique_ptr<runtime::CpuTransformer>
open_kl_base(const PerplexityOptions& options, std::int64_t vocab_size) {
  if (!options.kl_base)
    return nullptr;
  auto base = std::make_unique<runtime::CpuTransformer>(*options.kl_base,
                                                        runtime::RuntimeOptions{.threads = options.threads,
                                                                                .activations = options.activations,
                                                                                .weight_loading = options.weights});
  if (base->config().vocab_size != vocab_size)
    throw InputError(fmt::format("--kl-base {} has a vocabulary of {} but --model has {}; KL needs the same tokenizer",
                                 options.kl_base->string(), base->config().vocab_size, vocab_size));
  return base;
}

// The BOS token: whatever the post-processor puts in front of a text (llama.cpp's add_bos).
std::optional<std::int32_t>
bos_token(const model::Tokenizer& tokenizer) {
  const auto probe_plain = tokenizer.encode("a", false), probe_special = tokenizer.encode("a", true);
  if (probe_special.size() > probe_plain.size() && probe_special.front() != probe_plain.front())
    return probe_special.front();
  return std::nullopt;
}

// Sums over the scored tokens: NLL, and against --kl-base KL(base ‖ model), top-1 agreement and
// Δp of the target.
struct ScoreSums {
  double nll = 0, nll_sq = 0, kl = 0, kl_sq = 0, kl_max = 0, base_nll = 0;
  std::int64_t agree = 0;
  std::vector<double> delta_p;

  void add_nll(double value) {
    nll += value;
    nll_sq += value * value;
  }

  void add_against_base(const std::vector<double>& logp, const std::vector<double>& base_logp, std::size_t target) {
    double divergence = 0;
    std::size_t top = 0, base_top = 0;
    for (std::size_t v = 0; v < logp.size(); ++v) {
      divergence += std::exp(base_logp[v]) * (base_logp[v] - logp[v]);
      if (logp[v] > logp[top])
        top = v;
      if (base_logp[v] > base_logp[base_top])
        base_top = v;
    }
    divergence = std::max(0.0, divergence);
    kl += divergence;
    kl_sq += divergence * divergence;
    kl_max = std::max(kl_max, divergence);
    agree += top == base_top ? 1 : 0;
    base_nll += -base_logp[target];
    delta_p.push_back(std::exp(logp[target]) - std::exp(base_logp[target]));
  }

  KlStats kl_stats(double scored) {
    KlStats stats;
    stats.kl_mean = kl / scored;
    stats.kl_stderr = stderr_from_sums(kl, kl_sq, scored);
    stats.kl_max = kl_max;
    stats.top1_agreement = static_cast<double>(agree) / scored;
    double dp_sum = 0;
    for (const double d : delta_p)
      dp_sum += d;
    stats.delta_p_mean = dp_sum / scored;
    std::sort(delta_p.begin(), delta_p.end());
    stats.delta_p_p01 = percentile_of_sorted(delta_p, 1);
    stats.delta_p_p05 = percentile_of_sorted(delta_p, 5);
    stats.delta_p_p50 = percentile_of_sorted(delta_p, 50);
    stats.delta_p_p95 = percentile_of_sorted(delta_p, 95);
    stats.delta_p_p99 = percentile_of_sorted(delta_p, 99);
    stats.base_perplexity = std::exp(base_nll / scored);
    return stats;
  }
};

// Scores windows [first, first + count) of `plan` in one forward pass of each model.
class WindowScorer {
public:
  WindowScorer(runtime::CpuTransformer& model, runtime::CpuTransformer* base, const model::Tokenizer& tokenizer,
               const std::vector<runtime::TokenId>& tokens, const WindowPlan& plan, std::optional<std::int32_t> bos)
      : m_model(model), m_base(base), m_tokenizer(tokenizer), m_tokens(tokens), m_plan(plan), m_bos(bos) {}

  void score(std::int64_t first, std::int64_t count, ScoreSums& sums, PerplexityResult& result) {
    std::vector<runtime::SequenceInput> model_inputs, base_inputs;
    std::vector<std::vector<runtime::TokenId>> inputs(static_cast<std::size_t>(count));
    for (std::int64_t k = 0; k < count; ++k) {
      auto& ids = inputs[static_cast<std::size_t>(k)];
      const auto start = m_tokens.begin() + static_cast<std::ptrdiff_t>((first + k) * m_plan.stride);
      ids.assign(start, start + static_cast<std::ptrdiff_t>(m_plan.length));
      if (m_plan.bos_first)
        ids[0] = *m_bos;
      model_inputs.push_back({m_model.add_sequence(), ids, true});
      if (m_base)
        base_inputs.push_back({m_base->add_sequence(), ids, true});
    }
    const auto logits = m_model.forward(model_inputs);
    const auto base_logits = m_base ? m_base->forward(base_inputs) : std::vector<float>{};
    for (std::int64_t k = 0; k < count; ++k)
      score_window(first + k, k, logits, base_logits, sums, result);
    for (const auto& in : model_inputs)
      m_model.remove_sequence(in.sequence);
    for (const auto& in : base_inputs)
      m_base->remove_sequence(in.sequence);
  }

private:
  // Window `window`, row block `k` of the batch's logits.
  void score_window(std::int64_t window, std::int64_t k, const std::vector<float>& logits,
                    const std::vector<float>& base_logits, ScoreSums& sums, PerplexityResult& result) {
    const auto vocab = m_model.config().vocab_size;
    const auto start = window * m_plan.stride;
    const double nll_before = sums.nll, kl_before = sums.kl;
    for (std::int64_t j = m_plan.first_logit; j < m_plan.length - 1; ++j) {
      const auto target = static_cast<std::size_t>(m_tokens[static_cast<std::size_t>(start + j + 1)]);
      const auto row = static_cast<std::size_t>((k * m_plan.length + j) * vocab);
      log_softmax(logits.data() + row, vocab, m_logp);
      sums.add_nll(-m_logp[target]);
      result.scored_bytes +=
          static_cast<std::int64_t>(m_tokenizer.token_bytes(static_cast<std::int32_t>(target)).size());
      ++result.scored_tokens;
      if (m_base) {
        log_softmax(base_logits.data() + row, vocab, m_base_logp);
        sums.add_against_base(m_logp, m_base_logp, target);
      }
    }
    const auto window_tokens = static_cast<double>(m_plan.length - 1 - m_plan.first_logit);
    result.window_nll.push_back((sums.nll - nll_before) / window_tokens);
    if (m_base)
      result.window_kl.push_back((sums.kl - kl_before) / window_tokens);
  }

  runtime::CpuTransformer& m_model;
  runtime::CpuTransformer* m_base;
  const model::Tokenizer& m_tokenizer;
  const std::vector<runtime::TokenId>& m_tokens;
  const WindowPlan& m_plan;
  std::optional<std::int32_t> m_bos;
  std::vector<double> m_logp, m_base_logp;
};

} // namespace

PerplexityResult
measure_perplexity(const PerplexityOptions& options, const std::function<void(std::int64_t, std::int64_t)>& on_window) {
  check_window_options(options);
  const auto started = std::chrono::steady_clock::now();
  const auto model = open_model(options);
  const auto base = open_kl_base(options, model->config().vocab_size);
  const auto tokenizer = model::Tokenizer::load_folder(options.model);
  const std::string text = read_input_file(options.data, "--data file");
  // As llama-perplexity: the text is tokenized with its special tokens (BOS first), then cut.
  const auto tokens = tokenizer.encode(text, true);
  const auto bos = bos_token(tokenizer);

  PerplexityResult result;
  result.text_bytes = static_cast<std::int64_t>(text.size());
  result.text_tokens = static_cast<std::int64_t>(tokens.size());
  const WindowPlan plan = plan_windows(result.text_tokens, options.ctx, options.stride, bos.has_value());
  if (plan.windows < 1)
    throw InputError(fmt::format("{}: has {} tokens, not enough for one window of {}; use a smaller --ctx or more text",
                                 options.data.string(), result.text_tokens, plan.length));
  const std::int64_t windows = options.max_windows > 0 ? std::min(plan.windows, options.max_windows) : plan.windows;
  result.windows = windows;
  result.method = plan.describe(windows);
  // Windows per forward pass: enough rows for BLAS, bounded logits memory (~256 MiB per model).
  const std::int64_t batch =
      std::clamp<std::int64_t>((std::int64_t{64} << 20) / (plan.length * model->config().vocab_size), 1, 8);
  ScoreSums sums;
  WindowScorer scorer(*model, base.get(), tokenizer, tokens, plan, bos);
  for (std::int64_t first = 0; first < windows; first += batch) {
    const std::int64_t count = std::min(batch, windows - first);
    scorer.score(first, count, sums, result);
    if (on_window)
      on_window(first + count, windows);
  }
  const auto scored = static_cast<double>(result.scored_tokens);
  result.nll_mean = sums.nll / scored;
  result.perplexity = std::exp(result.nll_mean);
  result.perplexity_stderr = result.perplexity * stderr_from_sums(sums.nll, sums.nll_sq, scored);
  result.bits_per_byte = sums.nll / std::log(2.0) / static_cast<double>(std::max<std::int64_t>(1, result.scored_bytes));
  if (base)
    result.kl = sums.kl_stats(scored);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  result.tokens_per_second =
      static_cast<double>(windows * plan.length * (base ? 2 : 1)) / std::max(1e-9, result.seconds);
  return result;
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KlStats, kl_mean, kl_stderr, kl_max, top1_agreement, delta_p_mean, delta_p_p01,
                                   delta_p_p05, delta_p_p50, delta_p_p95, delta_p_p99, base_perplexity)

nlohmann::json
to_json(const PerplexityResult& r) {
  nlohmann::json j = {{"method", r.method},
                      {"text_bytes", r.text_bytes},
                      {"text_tokens", r.text_tokens},
                      {"windows", r.windows},
                      {"scored_tokens", r.scored_tokens},
                      {"scored_bytes", r.scored_bytes},
                      {"nll_mean", r.nll_mean},
                      {"perplexity", r.perplexity},
                      {"perplexity_stderr", r.perplexity_stderr},
                      {"bits_per_byte", r.bits_per_byte},
                      {"seconds", r.seconds},
                      {"tokens_per_second", r.tokens_per_second}};
  if (r.kl)
    j["kl"] = *r.kl;
  j["window_nll"] = r.window_nll;
  if (!r.window_kl.empty())
    j["window_kl"] = r.window_kl;
  return j;
}

PerplexityResult
perplexity_result_from_json(const nlohmann::json& j) {
  PerplexityResult r;
  j.at("method").get_to(r.method);
  j.at("text_bytes").get_to(r.text_bytes);
  j.at("text_tokens").get_to(r.text_tokens);
  j.at("windows").get_to(r.windows);
  j.at("scored_tokens").get_to(r.scored_tokens);
  j.at("scored_bytes").get_to(r.scored_bytes);
  j.at("nll_mean").get_to(r.nll_mean);
  j.at("perplexity").get_to(r.perplexity);
  j.at("perplexity_stderr").get_to(r.perplexity_stderr);
  j.at("bits_per_byte").get_to(r.bits_per_byte);
  j.at("seconds").get_to(r.seconds);
  j.at("tokens_per_second").get_to(r.tokens_per_second);
  if (j.contains("kl"))
    r.kl = j["kl"].get<KlStats>();
  if (j.contains("window_nll"))
    j["window_nll"].get_to(r.window_nll);
  if (j.contains("window_kl"))
    j["window_kl"].get_to(r.window_kl);
  return r;
}

} // namespace optkit::eval
