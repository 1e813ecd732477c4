#include "compress/compress_run.hpp"

#include "compress/bit_plan.hpp"
#include "compress/calibration.hpp"
#include "compress/checkpoint_writer.hpp"
#include "compress/delta_writer.hpp"
#include "compress/gguf_metadata.hpp"
#include "compress/gguf_mixture.hpp"
#include "compress/gguf_trial.hpp"
#include "compress/importance_matrix.hpp"
#include "compress/layerwise.hpp"
#include "compress/recipe_fit.hpp"
#include "core/atomic_file.hpp"
#include "core/available_cpus.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_fields.hpp"
#include "core/log.hpp"
#include "core/sha256.hpp"
#include "core/statistics.hpp"
#include "core/text.hpp"
#include "model/calibration_documents.hpp"
#include "model/gguf_model.hpp"
#include "model/layer_tensors.hpp"
#include "model/memory_needs.hpp"
#include "model/model_config.hpp"
#include "model/model_folder.hpp"
#include "model/weight_store.hpp"
#include "proc/worker_pool.hpp"
#include "runtime/layerwise_model.hpp"

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <malloc.h>
#include <thread>

namespace optkit::compress {

namespace {

// The bundled GGUF recipes, as the flags that take only those name them: "q8_0, q6_k, ...".
std::string
gguf_recipe_names() {
  return ascii_case(fmt::format("{}", fmt::join(gguf_file_type_names(), ", ")), false);
}

void
check_same_architecture(const std::filesystem::path& base, const std::filesystem::path& finetuned) {
  const auto b = model::load_model_config(base), f = model::load_model_config(finetuned);
  auto differs = [&](const char* what, auto x, auto y) {
    if (x != y)
      throw InputError(fmt::format("--finetuned {} is not a fine-tune of --base {}: {} {} vs {}", finetuned.string(),
                                   base.string(), what, y, x));
  };
  differs("architecture", b.architecture_name, f.architecture_name);
  differs("hidden_size", b.hidden_size, f.hidden_size);
  differs("intermediate_size", b.intermediate_size, f.intermediate_size);
  differs("num_hidden_layers", b.num_layers, f.num_layers);
  differs("num_attention_heads", b.num_heads, f.num_heads);
  differs("num_key_value_heads", b.num_kv_heads, f.num_kv_heads);
  differs("vocab_size", b.vocab_size, f.vocab_size);
}

// The recipe with the command line's calibration overrides applied.
Recipe
resolved_recipe(const nlohmann::json& payload) {
  auto recipe = load_recipe_file(payload.at("recipe_file").get<std::string>());
  recipe.calibration.samples = payload.at("samples").get<std::int64_t>();
  recipe.calibration.sequence_length = payload.at("sequence_length").get<std::int64_t>();
  recipe.calibration.sampler = static_cast<Sampler>(payload.at("sampler").get<int>());
  if (payload.contains("plan"))
    recipe.layer_bits = payload.at("plan").at("layer_bits").get<std::vector<int>>();
  return recipe;
}

// What one trial of `recipe` on `model_dir` holds at its peak (model/memory_needs.hpp).
model::CompressMemoryNeeds
trial_memory_needs(const Recipe& recipe, const std::filesystem::path& model_dir, bool delta, bool calibrates,
                   std::int64_t samples, std::int64_t sequence_length) {
  const auto config = model::load_model_config(model_dir);
  model::CompressWork work;
  work.weight_bytes = model::dtype_size(model::WeightStore(model_dir).float_dtype());
  work.calibration_tokens = calibrates ? samples * sequence_length : 0;
  work.chunk_tokens = std::min(std::max<std::int64_t>(runtime::kLayerChunkTokens, sequence_length),
                               std::max<std::int64_t>(1, work.calibration_tokens));
  work.mlp_block_tokens = runtime::kMlpRowBlock;
  work.hessians = recipe.method == Method::gptq;
  work.delta = delta;
  return model::compress_memory_needs(config, work);
}

// Whether the trials' calibration states must spill to keep --max-memory, split evenly between
// the trials that run at once; InputError stating the needs when even spilled they do not fit.
bool
spill_to_keep_budget(const model::CompressMemoryNeeds& needs, std::uint64_t max_memory, std::int64_t jobs,
                     const std::string& recipe) {
  const std::uint64_t share = max_memory / static_cast<std::uint64_t>(jobs);
  if (needs.total(false) <= share)
    return false;
  if (needs.states > 0 && needs.total(true) <= share)
    return true;
  const bool spillable = needs.states > 0;
  throw InputError(fmt::format(
      "--max-memory {}{}: compress --recipe {} needs {}{}; {}raise --max-memory", model::gigabytes(max_memory),
      jobs > 1 ? fmt::format(" ({} per trial, {} at once)", model::gigabytes(share), jobs) : "", recipe,
      needs.describe(spillable),
      spillable ? fmt::format(" (its {} of calibration states spilled to disk)", model::gigabytes(needs.states)) : "",
      jobs > 1 ? "lower --jobs or " : ""));
}

// Records a trial's measured peak beside the estimate, and says so when it broke its share of
// --max-memory (the estimate fell short: the run still succeeded).
void
note_trial_peak(nlohmann::json& memory, const proc::WorkerOutcome& o, const std::optional<std::uint64_t>& max_memory,
                std::int64_t jobs) {
  if (!o.result.contains(proc::kPeakRssField))
    return;
  const auto peak = o.result.at(proc::kPeakRssField).get<std::uint64_t>();
  memory["trial_peak_bytes"].push_back(peak);
  if (max_memory && peak > *max_memory / static_cast<std::uint64_t>(jobs))
    log::warn("compress trial {} peaked at {}, over its {} share of --max-memory (estimated {}): the estimate "
              "fell short; please report it with the model's config.json",
              o.task_index, model::gigabytes(peak), model::gigabytes(*max_memory / static_cast<std::uint64_t>(jobs)),
              model::gigabytes(memory.at("estimated_peak_bytes").get<std::uint64_t>()));
}

void
summarize(CompressResult& result) {
  std::map<std::string, std::vector<double>> values;
  for (const auto& t : result.trials)
    if (t.succeeded)
      for (const auto& [key, value] : t.metrics.items())
        if (value.is_number())
          values[key].push_back(value.get<double>());
  result.summary = nlohmann::json::object();
  for (const auto& [key, v] : values) {
    const auto s = optkit::summarize(v);
    result.summary[key] = {{"mean", s.mean}, {"std", s.stddev}, {"n", s.count}};
  }
}

// The trials wrote into staged/trial-<i>: the kept one's files become the staged folder itself.
void
keep_only_trial(const std::filesystem::path& staged, std::int64_t kept, std::int64_t trials) {
  for (const auto& entry : std::filesystem::directory_iterator(staged / fmt::format("trial-{}", kept)))
    std::filesystem::rename(entry.path(), staged / entry.path().filename());
  for (std::int64_t i = 0; i < trials; ++i)
    std::filesystem::remove_all(staged / fmt::format("trial-{}", i));
}

// The folders compress reads: safetensors (not GGUF), and for a delta a fine-tune of the base's
// architecture that compress delta handles.
void
check_input_models(const CompressOptions& options, bool delta) {
  for (const auto& [flag, path] :
       {std::pair{delta ? "--finetuned" : "--model", options.model}, std::pair{"--base", options.base.value_or("")}})
    if (model::is_gguf_model(path))
      throw InputError(
          fmt::format("{} {}: compress reads Hugging Face safetensors folders, not GGUF files", flag, path.string()));
  model::check_model_folder(options.model, delta ? "--finetuned" : "--model");
  if (const auto config = model::load_model_config(options.model);
      (config.num_experts > 0 || config.fused_projections) && delta)
    throw InputError(fmt::format("{}: compress delta does not handle {} yet ({}); compress --model does",
                                 options.model.string(),
                                 config.num_experts > 0 ? "mixture-of-experts models" : "fused qkv_proj / gate_up_proj",
                                 config.architecture_name));
  if (delta) {
    model::check_model_folder(*options.base, "--base");
    check_same_architecture(*options.base, options.model);
  }
}

// Whether the matrix weighs the first routed layer's experts.
bool
has_expert_entries(const ImportanceMatrix& matrix, const model::ModelConfig& config) {
  for (std::int64_t layer = 0; layer < config.num_layers; ++layer)
    if (config.is_moe_layer(layer))
      return matrix.weights.contains(model::expert_module(config, layer, 0, model::ExpertProjection::gate));
  return false;
}

// --recipe, checked against the command (delta or not), its data (--calib, --imatrix) and the model.
Recipe
load_checked_recipe(const CompressOptions& options, bool delta) {
  auto recipe = load_recipe(options.recipe);
  if (recipe.delta && !delta)
    throw InputError(
        fmt::format("--recipe {} is a delta recipe: use optkit compress delta --base B --finetuned F", recipe.name));
  if (!recipe.delta && delta)
    throw InputError(fmt::format("--recipe {} compresses whole models: use a delta recipe (delta_2of4_int4, "
                                 "delta_2of4_int2) with compress delta",
                                 recipe.name));
  if (recipe.needs_calibration() && !options.calib)
    throw InputError(fmt::format("--recipe {} needs calibration data: pass --calib FILE (text or JSONL)", recipe.name));
  std::optional<model::ModelConfig> gguf_config; // a GGUF recipe's model, read once for the checks below
  if (recipe.gguf) {
    gguf_config = model::load_model_config(options.model);
    check_gguf_exportable(options.model, *gguf_config);
  } else {
    for (const auto& note : check_recipe_fits(recipe, options.model))
      log::warn("{}", note);
  }
  if (options.imatrix && (!recipe.gguf || options.calib))
    throw InputError(options.calib ? "--imatrix and --calib both give the importance matrix: pass one"
                                   : fmt::format("--imatrix applies to GGUF recipes ({}), not --recipe {}",
                                                 gguf_recipe_names(), recipe.name));
  if (options.imatrix) { // a bad file fails here, exit 2 (a GGUF recipe: checked above)
    const auto& config = *gguf_config;
    const auto matrix = read_importance_matrix(*options.imatrix, &config);
    check_importance_matrix_fits(matrix, options.model, *options.imatrix);
    if (config.num_experts > 0 && !has_expert_entries(matrix, config))
      throw InputError(fmt::format("--imatrix {}: no per-expert entries for this mixture of experts (a legacy "
                                   "imatrix.dat's are not read: write the GGUF format, or pass --calib)",
                                   options.imatrix->string()));
  }
  if (options.imatrix_out) {
    if (!recipe.gguf || !options.calib)
      throw InputError(fmt::format("--imatrix-out {}: the importance matrix comes from --calib with a GGUF recipe "
                                   "({}); pass both",
                                   options.imatrix_out->string(), gguf_recipe_names()));
    if (std::filesystem::absolute(*options.imatrix_out).lexically_normal() ==
        std::filesystem::absolute(options.output).lexically_normal())
      throw InputError(
          fmt::format("--imatrix-out {}: the model goes there (-o); name another file", options.imatrix_out->string()));
    if (std::filesystem::exists(*options.imatrix_out))
      throw InputError(fmt::format("--imatrix-out {}: already exists (name a new file; optkit never overwrites one)",
                                   options.imatrix_out->string()));
  }
  return recipe;
}

std::optional<BitPlan>
read_checked_plan(const CompressOptions& options, const Recipe& recipe, bool delta) {
  if (!options.plan)
    return std::nullopt;
  if (delta)
    throw InputError("--plan applies to compress --model, not to compress delta");
  auto plan = read_bit_plan(*options.plan);
  check_bit_plan(plan, recipe, model::load_model_config(options.model).num_layers, options.model);
  return plan;
}

// -o, absolute: a new folder (a .gguf file for a GGUF recipe).
std::filesystem::path
output_path(const CompressOptions& options, const Recipe& recipe) {
  if (options.output.empty())
    throw InputError("-o OUT is required (the folder to write)");
  auto output = std::filesystem::absolute(options.output).lexically_normal();
  if (output.filename().empty()) // "-o out/"
    output = output.parent_path();
  if (std::filesystem::exists(output))
    throw InputError(fmt::format("-o {}: already exists (choose a new folder; optkit never overwrites a model)",
                                 options.output.string()));
  if (recipe.gguf && output.extension() != ".gguf")
    throw InputError(fmt::format("-o {}: --recipe {} writes one GGUF file: name it <something>.gguf",
                                 options.output.string(), recipe.name));
  return output;
}

// What every trial runs with (its seed and output folder aside).
struct TrialPlan {
  const Recipe& recipe;
  const std::optional<BitPlan>& plan;
  std::int64_t samples, sequence_length;
  Sampler sampler;
  unsigned threads;
  bool spill;
};

std::vector<proc::WorkerTask>
trial_tasks(const CompressOptions& options, const TrialPlan& t, const std::filesystem::path& staged, double timeout_s) {
  std::vector<proc::WorkerTask> tasks;
  for (std::int64_t i = 0; i < options.trials; ++i) {
    proc::WorkerTask task;
    task.command = {"compress"};
    task.payload = {{"model", std::filesystem::absolute(options.model).string()},
                    {"recipe_file", std::filesystem::absolute(t.recipe.source).string()},
                    {"samples", t.samples},
                    {"sequence_length", t.sequence_length},
                    {"sampler", static_cast<int>(t.sampler)},
                    {"seed", options.seed + static_cast<std::uint64_t>(i)},
                    {"trial", i},
                    {"threads", t.threads},
                    {"activations", runtime::activation_precision_name(options.activations)},
                    {"max_shard_bytes", options.max_shard_bytes},
                    {"spill_calibration_states", t.spill},
                    {"all_experts", options.all_experts},
                    {"output", (staged / fmt::format("trial-{}", i)).string()}};
    // The files as the worker opens them, and as given (a GGUF records them so, as llama.cpp's tools do).
    if (options.calib) {
      task.payload["calib"] = std::filesystem::absolute(*options.calib).string();
      task.payload["calib_as_given"] = options.calib->string();
    }
    if (options.imatrix) {
      task.payload["imatrix"] = std::filesystem::absolute(*options.imatrix).string();
      task.payload["imatrix_as_given"] = options.imatrix->string();
    }
    if (options.imatrix_out)
      task.payload["imatrix_out"] = true;
    if (options.base)
      task.payload["base"] = std::filesystem::absolute(*options.base).string();
    task.params = {{"recipe", t.recipe.name},
                   {"seed", options.seed + static_cast<std::uint64_t>(i)},
                   {"samples", t.samples},
                   {"sampler", std::string(sampler_name(t.sampler))}};
    if (t.plan) {
      task.payload["plan"] = to_json(*t.plan);
      task.params["plan"] = t.plan->source.string();
      task.params["layer_bits"] = t.plan->layer_bits;
    }
    task.timeout_s = timeout_s;
    tasks.push_back(std::move(task));
  }
  return tasks;
}

// Each trial's metrics into `result` and the archive; the representative is the trial of lowest
// calibration loss. Throws the most telling failure when every trial failed.
void
collect_trials(const std::vector<proc::WorkerOutcome>& outcomes, const CompressOptions& options, std::int64_t jobs,
               const archive::RunContext& context, CompressResult& result) {
  double best = 0;
  const proc::WorkerOutcome* first_failure = nullptr; // a bad-input failure outranks the others
  for (const auto& o : outcomes) {
    TrialSummary t;
    t.trial = static_cast<std::int64_t>(o.task_index);
    t.succeeded = o.succeeded();
    t.error = o.succeeded() ? "" : o.failure_message();
    if (o.succeeded()) {
      t.metrics = o.result.at("metrics");
      note_trial_peak(result.memory, o, options.max_memory, jobs);
      const double loss = t.metrics.at("calibration_loss").get<double>();
      if (result.representative < 0 || loss < best) {
        best = loss;
        result.representative = t.trial;
      }
      context.archive->transaction([&] {
        for (const auto& [key, value] : t.metrics.items())
          if (value.is_number())
            context.archive->add_metric(context.run_id, o.trial_id, {key, value.get<double>(), "", {}});
        std::int64_t step = 0;
        for (const auto& layer : o.result.at("layers"))
          context.archive->add_metric(context.run_id, o.trial_id,
                                      {"layer_relative_error", layer.at("relative_error").get<double>(), "", step++});
      });
    } else if (!first_failure || (o.exit_code == static_cast<int>(ExitCode::bad_input) &&
                                  first_failure->exit_code != static_cast<int>(ExitCode::bad_input))) {
      first_failure = &o;
    }
    result.trials.push_back(std::move(t));
  }
  if (result.representative < 0)
    proc::throw_worker_failure(*first_failure, "every compression trial failed; first");
}

// The summary's means and deviations, the representative trial and the output's files.
void
archive_summary(const archive::RunContext& context, const CompressResult& result, const std::filesystem::path& output,
                bool gguf, bool delta) {
  context.archive->transaction([&] {
    for (const auto& [key, stats] : result.summary.items()) {
      context.archive->add_metric(context.run_id, std::nullopt,
                                  {key + "_mean", stats.at("mean").get<double>(), "", {}});
      context.archive->add_metric(context.run_id, std::nullopt, {key + "_std", stats.at("std").get<double>(), "", {}});
    }
    context.archive->add_metric(context.run_id, std::nullopt,
                                {"representative_trial", static_cast<double>(result.representative), "", {}});
    if (gguf)
      context.archive->add_artifact(context.run_id, std::nullopt, output, "model");
    else
      for (const auto& entry : std::filesystem::directory_iterator(output))
        if (entry.is_regular_file())
          context.archive->add_artifact(context.run_id, std::nullopt, entry.path(), delta ? "delta" : "model");
  });
}

} // namespace

CompressResult
run_compress(const CompressOptions& options, const archive::RunContext& context) {
  // The entry point checks its own ranges: a server or a flow calls it without the CLI's checks.
  if (options.trials < 1 || options.trials > 1000)
    throw InputError(fmt::format("--trials {}: run between 1 and 1000 trials", options.trials));
  if (options.jobs < 1)
    throw InputError(fmt::format("--jobs {}: run at least one trial at a time", options.jobs));
  const bool delta = options.base.has_value();
  check_input_models(options, delta);
  const auto recipe = load_checked_recipe(options, delta);
  // A GGUF recipe calibrates its importance matrix when given data; the others when they need it.
  const bool calibrates = recipe.needs_calibration() || (recipe.gguf && options.calib);
  const auto plan = read_checked_plan(options, recipe, delta);
  const auto samples = options.samples.value_or(recipe.calibration.samples);
  const auto sequence_length = options.sequence_length.value_or(recipe.calibration.sequence_length);
  const auto sampler = options.sampler.value_or(recipe.calibration.sampler);
  if (calibrates)
    model::read_calibration_documents(*options.calib, options.model, sequence_length); // bad data fails here, exit 2
  const auto needs = trial_memory_needs(recipe, options.model, delta, calibrates, samples, sequence_length);
  const bool spill = options.max_memory && spill_to_keep_budget(needs, *options.max_memory,
                                                                std::min(options.jobs, options.trials), recipe.name);
  const auto output = output_path(options, recipe);
  StagedDirectory staged(output);

  const auto jobs = std::max<std::int64_t>(1, std::min(options.jobs, options.trials));
  const unsigned threads =
      options.threads > 0 ? options.threads : std::max(1u, available_cpus() / static_cast<unsigned>(jobs));
  const TrialPlan trial{recipe, plan, samples, sequence_length, sampler, threads, spill};
  auto pool = archive::pool_options(context, "compress trials");
  pool.slots = static_cast<int>(jobs);
  const auto outcomes = proc::WorkerPool(pool).run(trial_tasks(options, trial, staged.path(), context.timeout_s));

  CompressResult result;
  result.recipe = recipe.name;
  result.memory = {{"estimated_peak_bytes", needs.total(spill)},
                   {"estimate_in_memory_bytes", needs.total(false)},
                   {"estimate_spilled_bytes", needs.total(true)},
                   {"calibration_states_spilled", spill},
                   {"max_memory_bytes", options.max_memory ? nlohmann::json(*options.max_memory) : nlohmann::json()},
                   {"trial_peak_bytes", nlohmann::json::array()}};
  result.output = options.output;
  if (plan)
    result.plan = to_json(*plan);
  collect_trials(outcomes, options, jobs, context, result);
  summarize(result);
  keep_only_trial(staged.path(), result.representative, options.trials);
  if (options.imatrix_out) // the kept trial's, written beside its destination and renamed into place
    write_file_atomic(*options.imatrix_out, read_input_file(staged.path() / kImatrixFileName, "importance matrix"));
  if (recipe.gguf) // one file, renamed into place; the staging folder goes with `staged`
    std::filesystem::rename(staged.path() / kGgufFileName, output);
  else
    staged.commit();
  archive_summary(context, result, output, recipe.gguf.has_value(), delta);
  return result;
}

void
compress_worker(const proc::WorkerSpec& spec) {
  // Buffers of 1 MiB and more are mapped on their own and unmapped when freed, so a layer's
  // Hessians, weights and activations go back to the kernel when the layer is done instead of
  // staying in the heap's free lists (glibc raises its threshold up to 32 MiB as it goes).
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  const auto& p = spec.payload;
  const auto recipe = resolved_recipe(p);
  if (recipe.gguf) {
    proc::write_worker_result(spec, run_gguf_trial(recipe, p));
    return;
  }
  const std::filesystem::path model_dir = p.at("model").get<std::string>();
  const std::filesystem::path output = p.at("output").get<std::string>();
  std::optional<std::filesystem::path> base;
  if (p.contains("base"))
    base = p.at("base").get<std::string>();
  const auto started = SystemClock::instance().monotonic_seconds();
  CalibrationSet calibration;
  nlohmann::json calibration_report = nullptr;
  if (recipe.needs_calibration()) {
    const std::filesystem::path calib = p.at("calib").get<std::string>();
    const auto docs = model::read_calibration_documents(calib, model_dir, recipe.calibration.sequence_length);
    calibration = sample_calibration(docs, recipe.calibration.samples, recipe.calibration.sampler,
                                     p.at("seed").get<std::uint64_t>());
    calibration.source_sha256 = digest_file(calib).sha256;
    calibration_report = compress::calibration_report(calibration, calib, recipe.calibration.sampler, p.at("seed"));
  }
  LayerwiseOptions lw;
  lw.model = model_dir;
  lw.base = base;
  lw.calibration = recipe.needs_calibration() ? &calibration : nullptr;
  lw.threads = p.at("threads").get<unsigned>();
  lw.activations = runtime::parse_activation_precision(p.value("activations", "fp32"), "activations");
  if (p.at("spill_calibration_states").get<bool>()) {
    lw.spill_dir = output;
    log::info("compress: the calibration states spill to a scratch file in {} (--max-memory)", output.string());
  }
  lw.all_experts = p.value("all_experts", false);
  lw.progress = [started, &spec](std::int64_t done, std::int64_t total) {
    if (done == 0)
      return;
    const double elapsed = SystemClock::instance().monotonic_seconds() - started;
    const double left = elapsed / static_cast<double>(done) * static_cast<double>(total - done);
    log::info("compress: layer {}/{} done, {:.0f} s elapsed, about {:.0f} s left", done, total, elapsed, left);
    proc::write_worker_progress(spec, fmt::format("layer {}/{}, about {} left", done, total, format_duration(left)));
  };
  std::filesystem::create_directories(output);
  // The output streams out layer by layer: a whole model's checkpoint, or a variant's delta.
  std::optional<CompressedCheckpointWriter> writer;
  std::optional<DeltaArtifactWriter> delta_writer;
  if (base) {
    delta_writer.emplace(output, model_dir, *base, recipe);
    lw.sink = &*delta_writer;
  } else {
    writer.emplace(output, model_dir, recipe, p.at("max_shard_bytes").get<std::uint64_t>());
    lw.sink = &*writer;
  }
  const auto layers = compress_layers(recipe, lw);
  nlohmann::json layer_rows = nlohmann::json::array();
  for (const auto& r : layers.reports) {
    layer_rows.push_back({{"module", r.module},
                          {"relative_error", r.relative_error},
                          {"gptq_loss", r.gptq_loss},
                          {"dampening", r.dampening},
                          {"damping_attempts", r.damping_attempts}});
    if (r.calibration_tokens >= 0)
      layer_rows.back()["calibration_tokens"] = r.calibration_tokens;
  }
  nlohmann::json report = {{"recipe", recipe.name},
                           {"trial", p.at("trial")},
                           {"calibration", calibration_report},
                           {"calibration_loss", layers.calibration_loss},
                           {"layers", layer_rows}};
  if (p.contains("plan"))
    report["plan"] = p.at("plan");
  nlohmann::json metrics;
  if (base) {
    const auto written = delta_writer->finish(report);
    metrics = {{"output_bytes", written.artifact_bytes}, {"compression_ratio", written.compression_ratio}};
  } else {
    const std::uint64_t source_fp16 = model::WeightStore(model_dir).element_count() * 2;
    report["elapsed_s"] = SystemClock::instance().monotonic_seconds() - started;
    const auto bytes = writer->finish(report);
    metrics = {{"output_bytes", bytes},
               {"compression_ratio",
                static_cast<double>(source_fp16) / static_cast<double>(std::max<std::uint64_t>(1, bytes))}};
  }
  metrics["calibration_loss"] = layers.calibration_loss;
  metrics["seconds"] = SystemClock::instance().monotonic_seconds() - started;
  metrics["calibration_tokens"] = calibration.tokens;
  proc::write_worker_result(spec, {{"metrics", metrics}, {"layers", layer_rows}, {"calibration", calibration_report}});
}

nlohmann::json
to_json(const CompressResult& r) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : r.trials)
    trials.push_back({{"trial", t.trial}, {"succeeded", t.succeeded}, {"error", t.error}, {"metrics", t.metrics}});
  return {{"recipe", r.recipe}, {"output", r.output.string()}, {"representative_trial", r.representative},
          {"trials", trials},   {"summary", r.summary},        {"plan", r.plan},
          {"memory", r.memory}};
}

CompressResult
compress_result_from_json(const nlohmann::json& j, const std::string& source) {
  return read_json_fields(source, [&] {
    CompressResult r;
    r.recipe = j.at("recipe").get<std::string>();
    r.output = j.at("output").get<std::string>();
    r.representative = json_integer<std::int64_t>(j.at("representative_trial"));
    for (const auto& t : j.at("trials"))
      r.trials.push_back({json_integer<std::int64_t>(t.at("trial")), t.at("succeeded").get<bool>(),
                          t.at("error").get<std::string>(), t.at("metrics")});
    r.summary = j.at("summary");
    r.plan = j.at("plan");
    r.memory = j.at("memory");
    return r;
  });
}

std::optional<double>
summary_mean(const CompressResult& r, const std::string& metric) {
  if (!r.summary.is_object() || !r.summary.contains(metric))
    return std::nullopt;
  return r.summary.at(metric).at("mean").get<double>();
}

Table
compress_table(const CompressResult& r) {
  Table table({"metric", "mean", "std", "trials"});
  for (const auto& [key, stats] : r.summary.items())
    table.add_row({key, fmt::format("{:.6g}", stats.at("mean").get<double>()),
                   fmt::format("{:.3g}", stats.at("std").get<double>()), fmt::format("{}", stats.at("n").get<int>())});
  return table;
}

} // namespace optkit::compress
