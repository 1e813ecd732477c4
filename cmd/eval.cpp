// optkit eval — the quality gate. `eval perplexity`: llama-perplexity's perplexity, bits per byte,
// and KL divergence / top-1 agreement / Δp against a base model. `eval tasks`: task suites scored
// as lm-eval scores them, with recovery, paired significance and a gate.
#include "app_context.hpp"
#include "number_checks.hpp"

#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "eval/perplexity_run.hpp"
#include "eval/task_report.hpp"
#include "eval/task_run.hpp"
#include "proc/worker_spec.hpp"

namespace optkit::cmd {

namespace {

void
register_eval_tasks(CLI::App& eval, CommandRegistry& commands) {
  struct Flags {
    eval::TaskEvalOptions options;
    std::string format, output;
    bool no_cache = false;
  };
  auto flags = std::make_shared<Flags>();
  auto& o = flags->options;
  CLI::App* tasks = eval.add_subcommand(
      "tasks", "Task suites (GSM8K, IFEval, Do-Not-Answer, your own) scored as lm-eval scores them, with recovery, "
               "paired significance and a quality gate");
  tasks->add_option("--model", o.models,
                    "model folder served here by serve-deltas (repeatable: compress trials); with --endpoint, the "
                    "served model's name");
  tasks->add_option("--delta", o.delta, "a compressed delta of --model (optkit compress delta) to evaluate");
  tasks->add_option("--endpoint", o.endpoint, "URL of a running OpenAI-compatible server");
  tasks->add_flag(
      "--apply-chat-template", o.apply_chat_template,
      "render prompts with the model's chat template (its folder: --model, or --tokenizer for an endpoint)");
  tasks->add_flag("--fewshot-as-multiturn", o.fewshot_as_multiturn,
                  "few-shot exemplars as user/assistant turns (chat suites, or with --apply-chat-template)");
  tasks->add_option("--system-instruction", o.system_instruction,
                    "a system prompt before the suite's description (a system message in chat)");
  tasks->add_option("--reasoning-end", o.reasoning_end,
                    "end-of-thinking marker: answers are scored after it (default: the chat template's, e.g. "
                    "</think>; none: off)");
  tasks->add_option("--tokenizer", o.tokenizer,
                    "the endpoint model's tokenizer (folder or tokenizer.json): multiple-choice suites tokenize here");
  tasks->add_option("--api-key", o.api_key, "bearer key for the endpoint and the judge (default: $OPENAI_API_KEY)");
  tasks->add_option("--suite", o.suites, "bundled suite name or suite YAML (repeatable)");
  tasks->add_option("--data", o.data, "the suite's documents: the official JSONL/JSON/CSV file (one --suite)");
  tasks->add_option("--fewshot", o.fewshot, "few-shot exemplars file, overriding the suite's");
  tasks->add_option("--num-fewshot", o.num_fewshot, "exemplars per prompt, overriding the suite's")
      ->check(number_range(0, 64));
  tasks->add_option("--max-gen-toks", o.max_gen_toks, "generated-token budget, overriding the suite's")
      ->check(number_range(1, 1 << 20));
  tasks->add_option("--limit", o.limit, "evaluate the first N documents only (0: all)")->check(non_negative_number());
  tasks->add_option("--concurrency", o.concurrency, "requests in flight")
      ->check(number_range(1, 4096))
      ->capture_default_str();
  tasks->add_option("--max-retries", o.max_retries, "retries of a request on 429, 5xx or a dropped connection")
      ->check(number_range(0, 100))
      ->capture_default_str();
  tasks->add_option("--request-timeout", o.request_timeout_s, "seconds one request may take")
      ->check(positive_number())
      ->capture_default_str();
  tasks->add_flag("--no-cache", flags->no_cache, "neither read nor write the response cache");
  tasks->add_option("--cache-dir", o.cache_dir, "response cache folder (default: ~/.cache/optkit/eval)");
  tasks->add_option("--repeat", o.repeat, "evaluate K times (cache bypassed after the first) to measure determinism")
      ->check(number_range(1, 1000))
      ->capture_default_str();
  tasks->add_option("--baseline", o.baseline,
                    "an earlier eval tasks run (id) or a model folder evaluated now: recovery, CI and p-values");
  tasks->add_option("--gate", o.gate, "quality gate YAML: exit 1 naming each failed rule");
  tasks->add_option("--judge", o.judge, "Do-Not-Answer: an OpenAI-compatible judge endpoint (default: offline)");
  tasks->add_option("--judge-model", o.judge_model, "the judge endpoint's model (default: the first it lists)");
  tasks->add_option("--items-out", o.items_out, "write every item's response, answers and scores as JSON lines");
  tasks->add_option("--engine-executable", o.engine_executable, "serve-deltas binary for --model (default: this one)")
      ->group("");
  tasks->add_option("--bootstrap", o.bootstrap.resamples, "bootstrap resamples for recovery intervals")
      ->check(number_range(100, 10'000'000))
      ->capture_default_str();
  add_threads_option(*tasks, o.threads);
  add_no_mmap_flag(*tasks, o.no_mmap)->description("serve-deltas' --no-mmap for a local --model");
  add_activations_option(*tasks, o.activations)
      ->description("how serve-deltas' BF16 weights multiply activations for a local --model: fp32 (the default: "
                    "exact to fp32 rounding) or bf16 (rounded to BF16 first, as llama.cpp does); default: the config "
                    "file's `activations`");
  add_format_option(*tasks, flags->format);
  add_output_option(*tasks, flags->output, "write the result to FILE instead of stdout");
  commands.add({"eval tasks", tasks, [flags](AppContext& ctx) {
                  auto options = flags->options;
                  options.cache = !flags->no_cache;
                  options.api_key = api_key_or_environment(options.api_key);
                  options.activations =
                      runtime::activation_precision_name(resolve_activations(options.activations, ctx.settings));
                  const auto result = eval::run_task_eval(options, ctx.run_context(0));
                  ctx.emit_result(flags->format,
                                  {.json = eval::to_json(result),
                                   .table = eval::task_score_table(result),
                                   .after = eval::task_report_notes(result, ctx.color_stdout())},
                                  flags->output);
                  if (!result.gate_passed)
                    throw GoalNotMet("quality gate failed:\n" + eval::failed_rules_text(result));
                }});
}

} // namespace

void
register_eval(CLI::App& app, CommandRegistry& commands) {
  CLI::App* eval = app.add_subcommand(
      "eval", "Measure model quality: perplexity, KL divergence against a base, task suites with a quality gate");
  eval->require_subcommand(1);

  struct Flags {
    eval::PerplexityOptions options;
    std::string format, worker, activations, max_memory;
    double timeout_s = 0;
    bool no_mmap = false;
  };
  auto flags = std::make_shared<Flags>();
  auto& o = flags->options;
  CLI::App* ppl = eval->add_subcommand(
      "perplexity",
      "Perplexity and bits per byte of a model on a text file (llama-perplexity's protocol), optionally KL vs a base");
  ppl->add_option("--model", o.model,
                  "Hugging Face model folder (config.json, *.safetensors, tokenizer.json) or GGUF file");
  ppl->add_option("--data", o.data, "UTF-8 text file to score");
  ppl->add_option("--ctx", o.ctx, "tokens per window")->check(number_range(8, 1 << 20))->capture_default_str();
  ppl->add_option("--stride", o.stride,
                  "llama-perplexity --ppl-stride: windows every N tokens, the last N scored (default: whole windows)")
      ->check(number_range(1, 1 << 20));
  ppl->add_option("--kl-base", o.kl_base, "base model folder: adds KL(base || model), top-1 agreement and Δp");
  ppl->add_option("--delta", o.delta,
                  "compressed delta (optkit compress delta) to apply to --model, which must be its base");
  ppl->add_option("--max-windows", o.max_windows, "score at most this many windows (0: all)")
      ->check(non_negative_number());
  add_threads_option(*ppl, o.threads);
  add_activations_option(*ppl, flags->activations);
  add_no_mmap_flag(*ppl, flags->no_mmap);
  add_max_memory_option(*ppl, flags->max_memory, "the models' mapped weights, a window's activations and KV cache");
  add_timeout_option(*ppl, flags->timeout_s);
  add_format_option(*ppl, flags->format);
  ppl->add_option("--worker", flags->worker, "internal: run as a worker child")->group("");
  commands.add({"eval perplexity", ppl,
                [flags](AppContext& ctx) {
                  if (!flags->worker.empty()) {
                    eval::perplexity_worker(proc::read_worker_spec(flags->worker));
                    return;
                  }
                  auto options = flags->options;
                  if (options.model.empty() || options.data.empty())
                    throw InputError(options.model.empty() ? "--model DIR is required" : "--data FILE is required");
                  options.activations = resolve_activations(flags->activations, ctx.settings);
                  options.weights = flags->no_mmap ? model::LoadMode::read : model::LoadMode::map;
                  options.max_memory = parse_max_memory(flags->max_memory);
                  const auto result = eval::run_perplexity(options, ctx.run_context(flags->timeout_s));
                  auto json = eval::to_json(result);
                  json["model"] = options.model.string();
                  json["data"] = options.data.string();
                  ctx.emit_result(flags->format, {.json = std::move(json),
                                                  .table = eval::perplexity_table(result),
                                                  .before = result.method + "\n"});
                },
                true, &flags->worker});
  register_eval_tasks(*eval, commands);
}

} // namespace optkit::cmd
