// optkit eval — the quality gate. `eval perplexity`: llama.cpp-style perplexity, bits per byte,
// and KL divergence / top-1 agreement / Δp against a base model.
#include "app_context.hpp"

#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "eval/perplexity_run.hpp"
#include "proc/worker_spec.hpp"

namespace optkit::cmd {

void
register_eval(CLI::App& app, CommandRegistry& commands) {
  CLI::App* eval = app.add_subcommand("eval", "Measure model quality: perplexity, KL divergence against a base");
  eval->require_subcommand(1);

  struct Flags {
    std::string model, data, kl_base, delta, format, worker;
    std::int64_t ctx = 512, stride = 0, max_windows = 0;
    unsigned threads = 0;
    double timeout_s = 0;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* ppl = eval->add_subcommand(
      "perplexity",
      "Perplexity and bits per byte of a model on a text file (llama.cpp method), optionally KL vs a base");
  ppl->add_option("--model", flags->model, "Hugging Face model folder (config.json, *.safetensors, tokenizer.json)");
  ppl->add_option("--data", flags->data, "UTF-8 text file to score");
  ppl->add_option("--ctx", flags->ctx, "tokens per window")->check(CLI::Range(8, 1 << 20))->capture_default_str();
  ppl->add_option("--stride", flags->stride, "tokens between window starts (default: --ctx)")
      ->check(CLI::Range(1, 1 << 20));
  ppl->add_option("--kl-base", flags->kl_base, "base model folder: adds KL(base || model), top-1 agreement and Δp");
  ppl->add_option("--delta", flags->delta,
                  "compressed delta (optkit compress delta) to apply to --model, which must be its base");
  ppl->add_option("--max-windows", flags->max_windows, "score at most this many windows (0: all)")
      ->check(CLI::NonNegativeNumber);
  add_threads_option(*ppl, flags->threads);
  add_timeout_option(*ppl, flags->timeout_s);
  add_format_option(*ppl, flags->format);
  ppl->add_option("--worker", flags->worker, "internal: run as a worker child")->group("");
  commands.add({"eval perplexity", ppl,
                [flags](AppContext& ctx) {
                  if (!flags->worker.empty()) {
                    eval::perplexity_worker(proc::read_worker_spec(flags->worker));
                    return;
                  }
                  if (flags->model.empty() || flags->data.empty())
                    throw InputError(flags->model.empty() ? "--model DIR is required" : "--data FILE is required");
                  eval::PerplexityOptions options;
                  options.model = flags->model;
                  options.data = flags->data;
                  options.ctx = flags->ctx;
                  options.stride = flags->stride;
                  options.threads = flags->threads;
                  options.max_windows = flags->max_windows;
                  if (!flags->kl_base.empty())
                    options.kl_base = flags->kl_base;
                  if (!flags->delta.empty())
                    options.delta = flags->delta;
                  const auto result = eval::run_perplexity(options, ctx.run_context(flags->timeout_s));
                  const OutputFormat format = parse_output_format(flags->format);
                  if (format == OutputFormat::json) {
                    auto out = eval::to_json(result);
                    out["run_id"] = ctx.run_id;
                    out["model"] = flags->model;
                    out["data"] = flags->data;
                    ctx.emit(out.dump(2) + "\n");
                  } else {
                    if (format == OutputFormat::table)
                      ctx.emit(result.method + "\n");
                    ctx.emit(eval::perplexity_table(result).render(format, ctx.color_stdout()));
                  }
                },
                true, &flags->worker});
}

} // namespace optkit::cmd
