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

} // namespace

PerplexityResult
measure_perplexity(const PerplexityOptions& options, const std::function<void(std::int64_t, std::int64_t)>& on_window) {
  const std::int64_t ctx = options.ctx;
  if (ctx < 8)
    throw InputError(fmt::format("--ctx {} is too small; use at least 8 tokens", ctx));
  if (options.stride >= ctx)
    throw InputError(fmt::format("--stride {} is not below --ctx {}; leave --stride out for whole windows "
                                 "(llama-perplexity's default) or give a smaller one",
                                 options.stride, ctx));
  const auto started = std::chrono::steady_clock::now();
  runtime::CpuTransformer model(options.model, {.threads = options.threads,
                                                .delta = options.delta,
                                                .activations = options.activations,
                                                .weight_loading = options.weights});
  const std::int64_t length = window_length(ctx, options.stride);
  if (length > model.config().max_position_embeddings)
    throw InputError(fmt::format("--ctx {}{} exceeds the model's max_position_embeddings {}", ctx,
                                 options.stride > 0 ? fmt::format(" (+ --stride/2 = {})", length) : "",
                                 model.config().max_position_embeddings));
  std::unique_ptr<runtime::CpuTransformer> base;
  if (options.kl_base) {
    base = std::make_unique<runtime::CpuTransformer>(*options.kl_base,
                                                     runtime::RuntimeOptions{.threads = options.threads,
                                                                             .activations = options.activations,
                                                                             .weight_loading = options.weights});
    if (base->config().vocab_size != model.config().vocab_size)
      throw InputError(
          fmt::format("--kl-base {} has a vocabulary of {} but --model has {}; KL needs the same tokenizer",
                      options.kl_base->string(), base->config().vocab_size, model.config().vocab_size));
  }
  const auto tokenizer = model::Tokenizer::load_folder(options.model);
  const std::string text = read_input_file(options.data, "--data file");
  // As llama-perplexity: the text is tokenized with its special tokens (BOS first), then cut.
  const auto tokens = tokenizer.encode(text, true);
  // The BOS token is whatever the post-processor puts in front of a text (llama.cpp's add_bos).
  std::optional<std::int32_t> bos;
  const auto probe_plain = tokenizer.encode("a", false), probe_special = tokenizer.encode("a", true);
  if (probe_special.size() > probe_plain.size() && probe_special.front() != probe_plain.front())
    bos = probe_special.front();

  PerplexityResult result;
  result.text_bytes = static_cast<std::int64_t>(text.size());
  result.text_tokens = static_cast<std::int64_t>(tokens.size());
  const WindowPlan plan = plan_windows(result.text_tokens, ctx, options.stride, bos.has_value());
  if (plan.windows < 1)
    throw InputError(fmt::format("{}: has {} tokens, not enough for one window of {}; use a smaller --ctx or more text",
                                 options.data.string(), result.text_tokens, plan.length));
  const std::int64_t windows = options.max_windows > 0 ? std::min(plan.windows, options.max_windows) : plan.windows;
  const std::int64_t first_logit = plan.first_logit, stride = plan.stride;
  result.windows = windows;
  result.method = plan.describe(windows);
  const auto vocab = model.config().vocab_size;
  // Windows per forward pass: enough rows for BLAS, bounded logits memory (~256 MiB per model).
  const std::int64_t batch = std::clamp<std::int64_t>((std::int64_t{64} << 20) / (length * vocab), 1, 8);

  double nll_sum = 0, nll_sq = 0, kl_sum = 0, kl_sq = 0, kl_max = 0, base_nll = 0;
  const auto window_tokens = static_cast<double>(length - 1 - first_logit); // scored per window
  std::int64_t agree = 0;
  std::vector<double> delta_p;
  std::vector<double> logp, base_logp;
  for (std::int64_t w0 = 0; w0 < windows; w0 += batch) {
    const std::int64_t n = std::min(batch, windows - w0);
    std::vector<std::vector<runtime::TokenId>> inputs(static_cast<std::size_t>(n));
    std::vector<runtime::SequenceInput> model_inputs, base_inputs;
    for (std::int64_t k = 0; k < n; ++k) {
      const auto start = static_cast<std::size_t>((w0 + k) * stride);
      auto& ids = inputs[static_cast<std::size_t>(k)];
      ids.assign(tokens.begin() + static_cast<std::ptrdiff_t>(start),
                 tokens.begin() + static_cast<std::ptrdiff_t>(start + static_cast<std::size_t>(length)));
      if (plan.bos_first)
        ids[0] = *bos;
      model_inputs.push_back({model.add_sequence(), ids, true});
      if (base)
        base_inputs.push_back({base->add_sequence(), ids, true});
    }
    const auto logits = model.forward(model_inputs);
    const auto base_logits = base ? base->forward(base_inputs) : std::vector<float>{};
    for (std::int64_t k = 0; k < n; ++k) {
      const auto start = (w0 + k) * stride;
      const double window_nll_before = nll_sum, window_kl_before = kl_sum;
      for (std::int64_t j = first_logit; j < length - 1; ++j) {
        const auto target = static_cast<std::size_t>(tokens[static_cast<std::size_t>(start + j + 1)]);
        const auto row = static_cast<std::size_t>((k * length + j) * vocab);
        log_softmax(logits.data() + row, vocab, logp);
        const double nll = -logp[target];
        nll_sum += nll;
        nll_sq += nll * nll;
        result.scored_bytes +=
            static_cast<std::int64_t>(tokenizer.token_bytes(static_cast<std::int32_t>(target)).size());
        ++result.scored_tokens;
        if (!base)
          continue;
        log_softmax(base_logits.data() + row, vocab, base_logp);
        double kl = 0;
        std::size_t top = 0, base_top = 0;
        for (std::size_t v = 0; v < static_cast<std::size_t>(vocab); ++v) {
          kl += std::exp(base_logp[v]) * (base_logp[v] - logp[v]);
          if (logp[v] > logp[top])
            top = v;
          if (base_logp[v] > base_logp[base_top])
            base_top = v;
        }
        kl = std::max(0.0, kl);
        kl_sum += kl;
        kl_sq += kl * kl;
        kl_max = std::max(kl_max, kl);
        agree += top == base_top ? 1 : 0;
        base_nll += -base_logp[target];
        delta_p.push_back(std::exp(logp[target]) - std::exp(base_logp[target]));
      }
      result.window_nll.push_back((nll_sum - window_nll_before) / window_tokens);
      if (base)
        result.window_kl.push_back((kl_sum - window_kl_before) / window_tokens);
    }
    for (const auto& in : model_inputs)
      model.remove_sequence(in.sequence);
    for (const auto& in : base_inputs)
      base->remove_sequence(in.sequence);
    if (on_window)
      on_window(w0 + n, windows);
  }
  const auto scored = static_cast<double>(result.scored_tokens);
  result.nll_mean = nll_sum / scored;
  result.perplexity = std::exp(result.nll_mean);
  result.perplexity_stderr = result.perplexity * stderr_from_sums(nll_sum, nll_sq, scored);
  result.bits_per_byte = nll_sum / std::log(2.0) / static_cast<double>(std::max<std::int64_t>(1, result.scored_bytes));
  if (base) {
    KlStats kl;
    kl.kl_mean = kl_sum / scored;
    kl.kl_stderr = stderr_from_sums(kl_sum, kl_sq, scored);
    kl.kl_max = kl_max;
    kl.top1_agreement = static_cast<double>(agree) / scored;
    double dp_sum = 0;
    for (const double d : delta_p)
      dp_sum += d;
    kl.delta_p_mean = dp_sum / scored;
    std::sort(delta_p.begin(), delta_p.end());
    kl.delta_p_p01 = percentile_of_sorted(delta_p, 1);
    kl.delta_p_p05 = percentile_of_sorted(delta_p, 5);
    kl.delta_p_p50 = percentile_of_sorted(delta_p, 50);
    kl.delta_p_p95 = percentile_of_sorted(delta_p, 95);
    kl.delta_p_p99 = percentile_of_sorted(delta_p, 99);
    kl.base_perplexity = std::exp(base_nll / scored);
    result.kl = kl;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  result.tokens_per_second = static_cast<double>(windows * length * (base ? 2 : 1)) / std::max(1e-9, result.seconds);
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
