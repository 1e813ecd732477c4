// optkit compress — recipe-driven post-training quantization in parallel trials, writing
// compressed-tensors models; `compress delta` — DeltaZip compression of a fine-tuned variant.
#include "app_context.hpp"
#include "number_checks.hpp"

#include "compress/compress_run.hpp"
#include "compress/recipe.hpp"
#include "core/byte_size.hpp"
#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "proc/worker_spec.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace optkit::cmd {

namespace {

struct CompressFlags {
  compress::CompressOptions options;
  std::string sampler, output, format, worker, activations, max_shard_size, max_memory;
  double timeout_s = 0;
  bool list_recipes = false;
};

void
add_common_options(CLI::App& app, CompressFlags& f) {
  auto& o = f.options;
  app.add_option("--recipe", o.recipe, "recipe name (see --list-recipes) or a recipe YAML file");
  app.add_option("--calib", o.calib, "calibration text (paragraphs) or JSONL ({\"text\"} or {\"messages\"} rows)");
  app.add_option("--samples", o.samples, "calibration samples per trial (default: the recipe's)")
      ->check(number_range(1, 1000000));
  app.add_option("--seq-len", o.sequence_length, "tokens per calibration sample (default: the recipe's)")
      ->check(number_range(8, 1 << 20));
  app.add_option("--sampler", f.sampler, "uniform, length or stratified (default: the recipe's)")
      ->check(CLI::IsMember({"uniform", "length", "stratified"}));
  app.add_option("--trials", o.trials, "independent compressions with distinct calibration subsets")
      ->check(number_range(1, 1000))
      ->capture_default_str();
  app.add_option("--jobs", o.jobs, "trials run at once (child processes)")
      ->check(number_range(1, 256))
      ->capture_default_str();
  add_seed_option(app, o.seed, "seed of trial 0's calibration draw (trial i uses seed + i)");
  add_threads_option(app, o.threads);
  add_activations_option(app, f.activations);
  add_timeout_option(app, f.timeout_s);
  add_output_option(app, f.output, "output folder (must not exist; written to a temporary folder, renamed at the end)");
  add_format_option(app, f.format);
  add_max_memory_option(app, f.max_memory,
                        "the trials running at once together; calibration states spill to a scratch file when only "
                        "that fits");
}

void
run(AppContext& ctx, const CompressFlags& f, bool delta) {
  auto o = f.options;
  if (o.recipe.empty())
    throw InputError("--recipe NAME|FILE is required (optkit compress --list-recipes shows the bundled ones)");
  if (delta && (!o.base || o.model.empty()))
    throw InputError(!o.base ? "--base DIR is required" : "--finetuned DIR is required");
  if (!delta && o.model.empty())
    throw InputError("--model DIR is required");
  if (!f.sampler.empty())
    o.sampler = f.sampler == "length"       ? compress::Sampler::length
                : f.sampler == "stratified" ? compress::Sampler::stratified
                                            : compress::Sampler::uniform;
  o.activations = resolve_activations(f.activations, ctx.settings);
  o.output = f.output;
  o.max_memory = parse_max_memory(f.max_memory);
  if (!f.max_shard_size.empty())
    o.max_shard_bytes = parse_byte_size(f.max_shard_size, "--max-shard-size");
  const auto result = compress::run_compress(o, ctx.run_context(f.timeout_s));
  ctx.emit_result(
      f.format,
      {.json = compress::to_json(result),
       .table = compress::compress_table(result),
       .before = fmt::format("{}{} → {} (representative trial {} of {}, lowest calibration loss)\n", result.recipe,
                             result.plan.is_null()
                                 ? std::string()
                                 : fmt::format(" at the plan's layer bits [{}]",
                                               fmt::join(result.plan.at("layer_bits").get<std::vector<int>>(), ",")),
                             result.output.string(), result.representative, result.trials.size())});
}

std::string
recipe_listing() {
  std::string out;
  for (const auto& name : compress::bundled_recipe_names()) {
    const auto r = compress::load_recipe(name);
    out += fmt::format("{:<16} {}{}\n", name, r.delta ? "[delta] " : "", r.description);
  }
  out += "\nRecipe fields (YAML):\n" + compress::recipe_schema_help();
  return out;
}

} // namespace

void
register_compress(CLI::App& app, CommandRegistry& commands) {
  auto flags = std::make_shared<CompressFlags>();
  CLI::App* compress = app.add_subcommand(
      "compress", "Quantize a model with a recipe (GPTQ, SmoothQuant, RTN, FP8, 2:4) into compressed-tensors");
  compress->require_subcommand(0, 1);
  compress->add_option("--model", flags->options.model, "Hugging Face model folder to compress");
  compress->add_option("--imatrix", flags->options.imatrix,
                       "GGUF recipes: the importance matrix of a llama-imatrix GGUF file instead of one from --calib");
  compress->add_option("--imatrix-out", flags->options.imatrix_out,
                       "GGUF recipes with --calib: also write the importance matrix collected there, as llama-imatrix "
                       "writes it (llama-quantize --imatrix takes it)");
  compress->add_option("--plan", flags->options.plan,
                       "mixed precision: bits per decoder layer from optkit plan hetero --format json (16 = left as "
                       "is); the recipe gives the algorithm and group size");
  compress->add_option("--max-shard-size", flags->max_shard_size,
                       "largest safetensors shard of the output, e.g. 2GiB (default 5000000000 bytes, transformers' "
                       "5GB); several shards come with model.safetensors.index.json");
  compress->add_flag("--all-experts", flags->options.all_experts,
                     "mixture of experts: every calibration token through every expert for its Hessians (rarely "
                     "routed experts get data), while each layer's output keeps the real top-k routing");
  compress->add_flag("--list-recipes", flags->list_recipes, "describe the bundled recipes and the recipe schema");
  add_common_options(*compress, *flags);
  compress->add_option("--worker", flags->worker, "internal: run as a worker child")->group("");
  commands.add({"compress", compress,
                [flags](AppContext& ctx) {
                  if (!flags->worker.empty()) {
                    compress::compress_worker(proc::read_worker_spec(flags->worker));
                    return;
                  }
                  if (flags->list_recipes) {
                    ctx.emit(recipe_listing());
                    return;
                  }
                  run(ctx, *flags, false);
                },
                true, &flags->worker});

  auto delta_flags = std::make_shared<CompressFlags>();
  CLI::App* delta = compress->add_subcommand(
      "delta", "Compress a fine-tuned variant as a 2:4 sparse low-bit delta against its base (DeltaZip)");
  delta->add_option("--base", delta_flags->options.base, "the base model folder");
  delta->add_option("--finetuned", delta_flags->options.model, "the fine-tuned variant's folder (same architecture)");
  add_common_options(*delta, *delta_flags);
  commands.add({"compress delta", delta, [delta_flags](AppContext& ctx) { run(ctx, *delta_flags, true); }});
}

} // namespace optkit::cmd
