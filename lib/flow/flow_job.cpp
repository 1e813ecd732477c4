#include "flow/flow_job.hpp"

#include "bench/serving_profile.hpp"
#include "bench/slo.hpp"
#include "compress/recipe.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_fields.hpp"
#include "core/resource_paths.hpp"
#include "core/schema_fields.hpp"
#include "core/yaml_schema.hpp"
#include "eval/quality_gate.hpp"
#include "eval/task_suite.hpp"
#include "tune/search_space.hpp"

#include <fmt/format.h>

namespace optkit::flow {

namespace fs = std::filesystem;
using config::Field;
using config::Schema;
using config::Type;

namespace {

Field
string_list(std::string name, std::string help, bool required = false) {
  Field f{std::move(name), Type::list, required, std::move(help)};
  f.item = std::make_shared<const Field>(Field{"value", Type::string, true, "one value"});
  return f;
}

Schema
study_schema(const std::string& what) {
  Field optimizer{"optimizer", Type::string, false, "tpe, hillclimb, random or grid"};
  optimizer.choices = {"tpe", "hillclimb", "random", "grid"};
  Field objective{"objective", Type::string, false,
                  "goodput (SLO-Tuner Eq. 3) or certified (OptiKit Eq. 2, under bench.slo)"};
  objective.choices = {"goodput", "certified"};
  return Schema{what,
                {Field{"space", Type::string, true, "a bundled search space name or a space YAML"}, optimizer,
                 objective, config::number_field("trials", "configurations tried", 1, 10000),
                 string_list("engine_args", "serve-deltas flags added to every live launch")}};
}

const Schema&
job_schema() {
  static const Schema schema = [] {
    Field sampler{"sampler", Type::string, false, "calibration sampler (default: the recipe's)"};
    sampler.choices = {"uniform", "length", "stratified"};
    Schema compress{"compress",
                    {string_list("recipes", "bundled recipe names or recipe YAML files", true),
                     config::number_field("trials", "trials per recipe (seeds seed, seed+1, ...)", 1, 64),
                     Field{"calib", Type::string, false, "calibration text or JSONL file"}, sampler,
                     config::number_field("samples", "calibration samples per trial", 1, 1 << 20),
                     config::number_field("seq_len", "tokens per calibration sample", 8, 1 << 20),
                     config::number_field("seed", "seed of the first trial", 0, 1e15)}};
    Schema gate{"gate",
                {Field{"suite", Type::string, true, "a bundled task suite name or a suite YAML"},
                 Field{"rules", Type::string, true, "the quality gate YAML (eval tasks --gate)"},
                 config::number_field("limit", "documents evaluated (0: all)", 0, 1e9)}};
    Schema bench{"bench",
                 {Field{"profile", Type::string, true, "a bundled serving profile name or a profile YAML"},
                  string_list("slo", "SLO expressions, e.g. 'e2e:p95<=2s'", true),
                  string_list("engine_args", "serve-deltas flags for the certified server"),
                  config::number_field("min_trial_seconds", "shortest open-loop trial", 0.1, 3600),
                  config::number_field("max_trial_seconds", "longest open-loop trial (0: no limit)", 0, 86400),
                  config::number_field("max_trials", "open-loop trials at most", 1, 100),
                  config::number_field("beta_tolerance", "accepted |1 - beta| of the steady-state test", 0, 1),
                  Field{"baseline", Type::boolean, false, "also certify the uncompressed model, for comparison"},
                  config::number_field("max_dispatch_lag_ms",
                                       "the load generator's p99 lag bound, bench and live study (default: bench's)",
                                       0.001, 60000)}};
    Schema tune{
        "tune",
        {config::object_field("sim", "a study on the discrete-event simulator", study_schema("tune.sim")),
         config::object_field("live", "a study on serve-deltas serving the chosen model", study_schema("tune.live"))}};
    Field kind{"kind", Type::string, false, "local (children of the flow) or slurm (an sbatch job per task)"};
    kind.choices = {"local", "slurm"};
    Schema executor{"executor",
                    {kind, Field{"partition", Type::string, false, "slurm: the partition (default: the cluster's)"},
                     string_list("sbatch_args", "slurm: arguments added to every sbatch, e.g. --gres=gpu:1"),
                     config::number_field("slots", "tasks at once", 1, 1024),
                     config::number_field("threads", "CPU threads of each child", 1, 1024),
                     config::number_field("retries", "extra attempts of a task that crashed", 0, 10)}};
    return Schema{
        "flow job",
        {Field{"name", Type::string, false, "the job's name, for people"},
         Field{"model", Type::string, true, "the model folder (config.json, safetensors, tokenizer)"},
         Field{"output", Type::string, false, "the output folder, work/ and package/ inside (default: ./flow-<name>)"},
         config::object_field("compress", "compression trials", compress),
         config::object_field("gate", "the quality gate every trial must pass", gate),
         config::object_field("bench", "SLO certification of the chosen model", bench),
         config::object_field("tune", "engine-knob studies", tune),
         config::object_field("executor", "where the stages' children run", executor)}};
  }();
  return schema;
}

// A value that names a file (it holds a '/' or a file suffix) is made absolute against the job
// file's folder; anything else is a bundled name and stays as written.
std::string
job_reference(const std::string& value, const fs::path& job_dir) {
  const bool path_like = value.find('/') != std::string::npos || fs::path(value).has_extension();
  if (!path_like)
    return value;
  const fs::path p(value);
  return (p.is_absolute() ? p : job_dir / p).lexically_normal().string();
}

std::string
job_path(const std::string& value, const fs::path& job_dir) {
  const fs::path p(value);
  return (p.is_absolute() ? p : job_dir / p).lexically_normal().string();
}

std::vector<std::string>
strings(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  if (j.contains(key))
    for (const auto& v : j.at(key))
      out.push_back(v.get<std::string>());
  return out;
}

TuneStudy
study(const nlohmann::json& j, const fs::path& dir, std::vector<std::string>* engine_args) {
  TuneStudy s;
  s.enabled = true;
  s.space = job_reference(j.at("space").get<std::string>(), dir);
  s.optimizer = j.value("optimizer", s.optimizer);
  s.trials = j.value("trials", s.trials);
  s.objective = j.value("objective", s.objective);
  if (engine_args)
    *engine_args = strings(j, "engine_args");
  return s;
}

// Runs `check`, turning its InputError into one naming the job file and key.
template <class F>
void
checked(const FlowJob& job, const std::string& key, const std::string& value, F&& check) {
  try {
    check();
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {} '{}': {}", job.source.string(), key, value, e.what()));
  }
}

} // namespace

FlowJob
load_flow_job(const std::string& name_or_path) {
  const fs::path file =
      resolve_bundled_yaml(name_or_path, find_data_directory().path / "profiles" / "flows", "job", "flow job");
  return parse_flow_job(read_input_file(file), file);
}

FlowJob
parse_flow_job(const std::string& text, const fs::path& file) {
  const nlohmann::json j = config::parse_yaml(text, file.string(), job_schema());
  const fs::path dir = fs::absolute(file).parent_path();
  FlowJob job;
  job.source = fs::absolute(file).lexically_normal();
  job.name = j.value("name", file.stem().string());
  job.model = job_path(j.at("model").get<std::string>(), dir);
  job.output = j.contains("output") ? job_path(j.at("output").get<std::string>(), dir)
                                    : (fs::current_path() / ("flow-" + job.name)).string();
  if (!j.contains("compress") || !j.contains("gate") || !j.contains("bench"))
    throw InputError(fmt::format("{}: a flow job needs compress:, gate: and bench: sections", file.string()));
  const auto& c = j.at("compress");
  for (const auto& r : strings(c, "recipes"))
    job.compress.recipes.push_back(job_reference(r, dir));
  if (job.compress.recipes.empty())
    throw InputError(fmt::format("{}: compress.recipes is empty: name at least one recipe", file.string()));
  job.compress.trials = c.value("trials", job.compress.trials);
  if (c.contains("calib"))
    job.compress.calib = job_path(c.at("calib").get<std::string>(), dir);
  job.compress.sampler = c.value("sampler", "");
  job.compress.samples = c.value("samples", job.compress.samples);
  job.compress.seq_len = c.value("seq_len", job.compress.seq_len);
  job.compress.seed = c.value("seed", job.compress.seed);
  const auto& g = j.at("gate");
  job.gate.suite = job_reference(g.at("suite").get<std::string>(), dir);
  job.gate.gate = job_path(g.at("rules").get<std::string>(), dir);
  job.gate.limit = g.value("limit", 0);
  const auto& b = j.at("bench");
  job.bench.profile = job_reference(b.at("profile").get<std::string>(), dir);
  job.bench.slos = strings(b, "slo");
  job.bench.engine_args = strings(b, "engine_args");
  job.bench.min_trial_seconds = b.value("min_trial_seconds", job.bench.min_trial_seconds);
  job.bench.max_trial_seconds = b.value("max_trial_seconds", job.bench.max_trial_seconds);
  job.bench.max_trials = b.value("max_trials", job.bench.max_trials);
  job.bench.beta_tolerance = b.value("beta_tolerance", job.bench.beta_tolerance);
  job.bench.baseline = b.value("baseline", false);
  job.bench.max_dispatch_lag_ms = b.value("max_dispatch_lag_ms", 0.0);
  if (j.contains("tune")) {
    const auto& t = j.at("tune");
    if (t.contains("sim"))
      job.tune_sim = study(t.at("sim"), dir, nullptr);
    if (t.contains("live"))
      job.tune_live = study(t.at("live"), dir, &job.live_engine_args);
  }
  if (j.contains("executor")) {
    job.slots = j.at("executor").value("slots", job.slots);
    job.retries = j.at("executor").value("retries", job.retries);
    job.threads = j.at("executor").value("threads", job.threads);
    job.executor = j.at("executor").value("kind", job.executor);
    job.partition = j.at("executor").value("partition", "");
    job.sbatch_args = strings(j.at("executor"), "sbatch_args");
  }
  return job;
}

void
validate_flow_job(const FlowJob& job) {
  if (!fs::is_regular_file(fs::path(job.model) / "config.json"))
    throw InputError(fmt::format("{}: model '{}' is not a model folder (no config.json): give the folder that holds "
                                 "config.json, the safetensors and tokenizer.json",
                                 job.source.string(), job.model));
  bool needs_calibration = false;
  for (const auto& name : job.compress.recipes)
    checked(job, "compress.recipes", name, [&] {
      const auto recipe = compress::load_recipe(name);
      if (recipe.delta)
        throw InputError("a delta recipe; the flow compresses the model itself (use a model recipe)");
      needs_calibration = needs_calibration || recipe.needs_calibration();
    });
  if (needs_calibration && job.compress.calib.empty())
    throw InputError(fmt::format("{}: compress.calib is missing and a recipe needs calibration data: add "
                                 "'calib: FILE' (text or JSONL)",
                                 job.source.string()));
  if (!job.compress.calib.empty() && !fs::is_regular_file(job.compress.calib))
    throw InputError(fmt::format("{}: compress.calib '{}' does not exist", job.source.string(), job.compress.calib));
  checked(job, "gate.suite", job.gate.suite, [&] { eval::resolve_task_suite(job.gate.suite); });
  checked(job, "gate.rules", job.gate.gate, [&] { eval::load_quality_gate(job.gate.gate); });
  checked(job, "bench.profile", job.bench.profile, [&] { bench::resolve_serving_profile(job.bench.profile); });
  if (job.bench.slos.empty())
    throw InputError(
        fmt::format("{}: bench.slo is empty: state at least one SLO, e.g. 'e2e:p95<=2s'", job.source.string()));
  for (const auto& slo : job.bench.slos)
    checked(job, "bench.slo", slo, [&] { bench::parse_slo(slo); });
  for (const auto* s : {&job.tune_sim, &job.tune_live})
    if (s->enabled)
      checked(job, s == &job.tune_sim ? "tune.sim.space" : "tune.live.space", s->space,
              [&] { tune::resolve_search_space(s->space); });
  std::error_code ec;
  if (fs::exists(job.output, ec) && !fs::is_directory(job.output, ec))
    throw InputError(fmt::format("{}: output '{}' is a file, not a folder", job.source.string(), job.output));
}

nlohmann::json
to_json(const FlowJob& job) {
  auto study_json = [](const TuneStudy& s) {
    return nlohmann::json{{"enabled", s.enabled},
                          {"space", s.space},
                          {"optimizer", s.optimizer},
                          {"trials", s.trials},
                          {"objective", s.objective}};
  };
  return {{"source", job.source.string()},
          {"name", job.name},
          {"model", job.model},
          {"output", job.output},
          {"compress",
           {{"recipes", job.compress.recipes},
            {"trials", job.compress.trials},
            {"calib", job.compress.calib},
            {"sampler", job.compress.sampler},
            {"samples", job.compress.samples},
            {"seq_len", job.compress.seq_len},
            {"seed", job.compress.seed}}},
          {"gate", {{"suite", job.gate.suite}, {"rules", job.gate.gate}, {"limit", job.gate.limit}}},
          {"bench",
           {{"profile", job.bench.profile},
            {"slo", job.bench.slos},
            {"engine_args", job.bench.engine_args},
            {"min_trial_seconds", job.bench.min_trial_seconds},
            {"max_trial_seconds", job.bench.max_trial_seconds},
            {"max_trials", job.bench.max_trials},
            {"beta_tolerance", job.bench.beta_tolerance},
            {"baseline", job.bench.baseline},
            {"max_dispatch_lag_ms", job.bench.max_dispatch_lag_ms}}},
          {"tune", {{"sim", study_json(job.tune_sim)}, {"live", study_json(job.tune_live)}}},
          {"live_engine_args", job.live_engine_args},
          {"executor",
           {{"kind", job.executor},
            {"partition", job.partition},
            {"sbatch_args", job.sbatch_args},
            {"slots", job.slots},
            {"retries", job.retries},
            {"threads", job.threads}}}};
}

namespace {

FlowJob
job_from_json(const nlohmann::json& j) {
  auto study_of = [](const nlohmann::json& s) {
    TuneStudy t;
    t.enabled = s.at("enabled").get<bool>();
    t.space = s.at("space").get<std::string>();
    t.optimizer = s.at("optimizer").get<std::string>();
    t.trials = json_integer<int>(s.at("trials"));
    t.objective = s.at("objective").get<std::string>();
    return t;
  };
  FlowJob job;
  job.source = j.at("source").get<std::string>();
  job.name = j.at("name").get<std::string>();
  job.model = j.at("model").get<std::string>();
  job.output = j.at("output").get<std::string>();
  const auto& c = j.at("compress");
  job.compress = {c.at("recipes").get<std::vector<std::string>>(),
                  json_integer<int>(c.at("trials")),
                  c.at("calib").get<std::string>(),
                  c.at("sampler").get<std::string>(),
                  json_integer<int>(c.at("samples")),
                  json_integer<int>(c.at("seq_len")),
                  json_integer<std::uint64_t>(c.at("seed"))};
  const auto& g = j.at("gate");
  job.gate = {g.at("suite").get<std::string>(), g.at("rules").get<std::string>(), json_integer<int>(g.at("limit"))};
  const auto& b = j.at("bench");
  job.bench = {b.at("profile").get<std::string>(),
               b.at("slo").get<std::vector<std::string>>(),
               b.at("engine_args").get<std::vector<std::string>>(),
               b.at("min_trial_seconds").get<double>(),
               b.value("max_trial_seconds", BenchStage{}.max_trial_seconds),
               json_integer<int>(b.at("max_trials")),
               b.at("beta_tolerance").get<double>(),
               b.value("baseline", false),
               b.value("max_dispatch_lag_ms", 0.0)};
  job.tune_sim = study_of(j.at("tune").at("sim"));
  job.tune_live = study_of(j.at("tune").at("live"));
  job.live_engine_args = j.at("live_engine_args").get<std::vector<std::string>>();
  job.slots = json_integer<int>(j.at("executor").at("slots"));
  job.retries = json_integer<int>(j.at("executor").at("retries"));
  job.threads = json_integer<int>(j.at("executor").at("threads"));
  job.executor = j.at("executor").at("kind").get<std::string>();
  job.partition = j.at("executor").at("partition").get<std::string>();
  job.sbatch_args = j.at("executor").at("sbatch_args").get<std::vector<std::string>>();
  return job;
}

} // namespace

FlowJob
flow_job_from_json(const nlohmann::json& j) {
  try {
    FlowJob job = job_from_json(j);
    if (job.slots < 1 || job.threads < 1 || job.retries < 0 || job.compress.trials < 1 || job.compress.recipes.empty())
      throw InputError("not a flow job as optkit writes it (executor slots, threads and compress trials must be at "
                       "least 1, retries at least 0, and there must be a recipe)");
    return job;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(
        fmt::format("not a flow job as optkit writes it ({}): rerun `optkit flow run JOB.yaml`", e.what()));
  }
}

} // namespace optkit::flow
