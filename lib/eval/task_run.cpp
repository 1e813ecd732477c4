#include "eval/task_run.hpp"

#include "archive/run_archive.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/text.hpp"
#include "eval/choice_items.hpp"
#include "eval/choice_scoring.hpp"
#include "eval/loglikelihood_requests.hpp"
#include "eval/perplexity_run.hpp"
#include "eval/reasoning_output.hpp"
#include "eval/task_documents.hpp"
#include "eval/task_prompts.hpp"
#include "eval/task_requests.hpp"
#include "eval/task_suite.hpp"
#include "eval/task_targets.hpp"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <sstream>

namespace optkit::eval {

namespace {

struct PreparedSuite {
  TaskSuite suite;
  std::vector<TaskItem> items;        // generation suites
  std::vector<nlohmann::json> bodies; // their requests
  std::vector<ChoiceItem> choices;    // multiple-choice suites
  std::vector<ChoiceRequest> pairs;   // their loglikelihood requests, items' in order

  std::size_t documents() const { return suite.scorer == Scorer::multiple_choice ? choices.size() : items.size(); }
  std::size_t requests() const { return suite.scorer == Scorer::multiple_choice ? pairs.size() : items.size(); }
};

// Every document has the suite's columns: a file of another dataset, or another export of it, is
// named before any model time is spent.
void
check_columns(const TaskSuite& s, const std::filesystem::path& file, const std::vector<Document>& docs) {
  for (std::size_t i = 0; i < docs.size(); ++i) {
    std::vector<std::string> missing, present;
    for (const auto& c : s.columns)
      if (!docs[i].contains(c))
        missing.push_back(c);
    if (missing.empty())
      continue;
    for (const auto& [key, value] : docs[i].items())
      present.push_back(key);
    throw InputError(fmt::format("--suite {}: {}: document {} has no {} (the suite reads {}; the document has {}): "
                                 "give the dataset's own export, as {} says",
                                 s.name, file.string(), i, join(missing, ", "), join(s.columns, ", "),
                                 present.empty() ? "nothing" : join(present, ", "), s.file.string()));
  }
}

// What --apply-chat-template, --system-instruction and reasoning models need, settled once: the
// model's chat template (from --tokenizer's folder, else the local --model's) and its
// end-of-thinking marker.
struct PromptSetup {
  std::optional<model::ChatTemplate> chat_template;
  std::optional<std::string> system_instruction;
  std::string reasoning_end;

  PromptOptions prompts() const { return {system_instruction, chat_template ? &*chat_template : nullptr}; }
};

std::filesystem::path
template_folder(const TaskEvalOptions& options) {
  if (!options.tokenizer.empty()) {
    const std::filesystem::path t(options.tokenizer);
    return std::filesystem::is_regular_file(t) ? t.parent_path() : t;
  }
  return options.endpoint.empty() && !options.models.empty() ? std::filesystem::path(options.models.front())
                                                             : std::filesystem::path();
}

PromptSetup
prompt_setup(const TaskEvalOptions& options) {
  PromptSetup setup;
  setup.system_instruction = options.system_instruction;
  const auto folder = template_folder(options);
  if (options.apply_chat_template) {
    if (folder.empty())
      throw InputError("--apply-chat-template renders the model's chat template here: give --tokenizer DIR (the "
                       "model folder with its tokenizer_config.json)");
    setup.chat_template = model::load_chat_template(folder);
  }
  if (options.reasoning_end == "none")
    return setup;
  if (!options.reasoning_end.empty()) {
    setup.reasoning_end = options.reasoning_end;
  } else if (setup.chat_template) {
    setup.reasoning_end = reasoning_end_marker(setup.chat_template->text).value_or("");
  } else if (!folder.empty() && std::filesystem::is_directory(folder)) {
    try { // a folder without a chat template names no marker
      setup.reasoning_end = reasoning_end_marker(model::load_chat_template(folder).text).value_or("");
    } catch (const InputError&) {
    }
  }
  return setup;
}

PreparedSuite
prepare_suite(const std::string& name, const TaskEvalOptions& options, const PromptSetup& setup) {
  PreparedSuite p;
  p.suite = resolve_task_suite(name);
  auto& s = p.suite;
  if (options.fewshot_as_multiturn) {
    if (s.api == SuiteApi::completions && !options.apply_chat_template)
      throw InputError("--fewshot-as-multiturn: suite " + name +
                       " sends plain prompts; add --apply-chat-template (lm-eval requires it too)");
    s.fewshot_as_multiturn = true;
  }
  if (!options.data.empty())
    s.data = options.data;
  if (!options.fewshot.empty())
    s.fewshot = options.fewshot;
  if (options.num_fewshot)
    s.num_fewshot = *options.num_fewshot;
  if (options.max_gen_toks)
    s.max_gen_toks = *options.max_gen_toks;
  if (s.data.empty())
    throw InputError(
        fmt::format("--suite {}: the suite bundles no documents; give the official file with --data", name));
  if (!std::filesystem::exists(s.data))
    throw InputError(fmt::format("--suite {}: documents {}: no such file", name, s.data.string()));
  if (s.scorer == Scorer::perplexity)
    return p; // the text is scored whole, by eval perplexity's windows
  auto docs = load_documents(s.data);
  if (options.limit > 0 && docs.size() > options.limit)
    docs.resize(options.limit);
  if (docs.empty())
    throw InputError(fmt::format("--suite {}: {} holds no documents", name, s.data.string()));
  check_columns(s, s.data, docs);
  std::vector<Document> fewshot;
  if (s.num_fewshot > 0) {
    if (s.fewshot.empty())
      throw InputError(
          fmt::format("--suite {}: {}-shot needs exemplars; give them with --fewshot FILE", name, s.num_fewshot));
    fewshot = load_documents(s.fewshot);
  }
  if (s.scorer == Scorer::multiple_choice) {
    p.choices = build_choice_items(s, docs, fewshot, setup.prompts());
    for (const auto& item : p.choices)
      p.pairs.insert(p.pairs.end(), item.requests.begin(), item.requests.end());
    return p;
  }
  p.items = build_task_items(s, docs, fewshot, setup.prompts());
  for (const auto& item : p.items)
    p.bodies.push_back(request_body(s, item));
  return p;
}

std::string
path_for(const TaskSuite& suite) {
  return suite.api == SuiteApi::chat ? "/v1/chat/completions" : "/v1/completions";
}

// What the whole run shares: its archive, the next free trial index in it (worker children take
// trials too), and the Do-Not-Answer judge, checked once before any model time is spent.
struct RunState {
  const archive::RunContext& context;
  std::int64_t next_trial = 0;
  std::optional<EndpointTarget> judge;
  std::string reasoning_end; // stripped from generated answers before scoring (empty: none)
};

RuntimeFailure
judge_failure(const TaskEvalOptions& options, const Error& e) {
  return RuntimeFailure(std::string("--judge ") + options.judge + ": " + e.what() +
                        " (no score is reported without its judge)");
}

std::vector<SafetyLabel>
judge_responses(const TaskEvalOptions& options, const EndpointTarget& judge, const PreparedSuite& p,
                const std::vector<std::string>& responses, const ResponseCache& cache) {
  std::vector<nlohmann::json> bodies;
  for (std::size_t i = 0; i < p.items.size(); ++i) {
    const auto& doc = p.items[i].doc;
    const std::string question = doc.contains(p.suite.question_field) && doc[p.suite.question_field].is_string()
                                     ? doc[p.suite.question_field].get<std::string>()
                                     : std::string();
    bodies.push_back({{"messages", {{{"role", "user"}, {"content", judge_prompt(question, responses[i])}}}},
                      {"temperature", 0},
                      {"max_tokens", 32},
                      {"seed", 1234}});
  }
  RequestOptions request;
  request.concurrency = options.concurrency;
  request.max_retries = options.max_retries;
  request.timeout_s = options.request_timeout_s;
  request.cache = &cache;
  std::vector<SafetyLabel> labels;
  try {
    for (const auto& g : generate_all(judge, "/v1/chat/completions", bodies, request))
      labels.push_back(parse_judge_reply(g.text));
  } catch (const Error& e) {
    throw judge_failure(options, e);
  }
  return labels;
}

SuiteOutcome
evaluate_perplexity(const PreparedSuite& p, const Target& target, const TaskEvalOptions& options, RunState& run) {
  if (target.model.empty())
    throw InputError("--suite " + p.suite.name +
                     ": a perplexity suite runs on a local --model DIR (an endpoint's API has no full-distribution "
                     "logits)");
  PerplexityOptions ppl;
  ppl.model = target.model;
  if (!target.delta.empty())
    ppl.delta = target.delta;
  ppl.data = p.suite.data;
  ppl.ctx = p.suite.ppl_ctx;
  ppl.stride = p.suite.ppl_stride;
  ppl.max_windows = p.suite.ppl_max_windows;
  const auto limit = static_cast<std::int64_t>(options.limit);
  if (limit > 0) // --limit counts windows here
    ppl.max_windows = ppl.max_windows > 0 ? std::min(ppl.max_windows, limit) : limit;
  ppl.threads = options.threads;
  ppl.kl_base = target.kl_base;
  SuiteOutcome out;
  out.suite = p.suite.name;
  out.scores = score_perplexity(p.suite.name, measure_perplexity_in_worker(ppl, run.context, run.next_trial++));
  out.documents = out.scores.items.size();
  return out;
}

// Loglikelihood requests are tokenized here, as lm-eval tokenizes them: the model folder's
// tokenizer, or --tokenizer's.
model::Tokenizer
loglikelihood_tokenizer(const std::string& source) {
  if (source.empty())
    throw InputError("multiple-choice suites tokenize context and continuation here, as lm-eval does: give the "
                     "endpoint's tokenizer with --tokenizer DIR (a model folder with tokenizer.json) or FILE");
  const std::filesystem::path path(source);
  if (!std::filesystem::exists(path))
    throw InputError("--tokenizer " + source + ": no such file or folder");
  return std::filesystem::is_directory(path) ? model::Tokenizer::load_folder(path) : model::Tokenizer::load(path);
}

// One pass over a suite's requests: its scores, and per item what must match across --repeat
// passes (the response; a multiple-choice item's loglikelihoods).
struct SuitePass {
  SuiteScores scores;
  std::vector<std::string> answers;
  std::size_t cached = 0;
  std::size_t reasoning_unclosed = 0;
};

SuitePass
generation_pass(const PreparedSuite& p, const Target& target, const TaskEvalOptions& options,
                const RequestOptions& request, const ResponseCache& cache, RunState& run) {
  SuitePass pass;
  for (const auto& g : generate_all(target.endpoint, path_for(p.suite), p.bodies, request)) {
    pass.answers.push_back(g.text);
    pass.cached += g.cached ? 1u : 0u;
  }
  if (!run.reasoning_end.empty()) {
    auto split = strip_reasoning(pass.answers, run.reasoning_end);
    pass.answers = std::move(split.answers);
    pass.reasoning_unclosed = split.unclosed;
  }
  const auto judged = p.suite.scorer == Scorer::do_not_answer && run.judge
                          ? judge_responses(options, *run.judge, p, pass.answers, cache)
                          : std::vector<SafetyLabel>{};
  pass.scores = score_suite(p.suite, p.items, pass.answers, judged);
  return pass;
}

SuitePass
loglikelihood_pass(const PreparedSuite& p, const Target& target, const RequestOptions& request) {
  const auto lls =
      request_loglikelihoods(target.endpoint, *target.tokenizer, p.pairs, p.suite.choice.max_length, request);
  SuitePass pass;
  pass.cached = lls.cached;
  pass.scores = score_multiple_choice(p.suite, p.choices, lls.values);
  for (const auto& item : pass.scores.items)
    pass.answers.push_back(item.answers["loglikelihoods"].dump());
  return pass;
}

SuiteOutcome
evaluate_suite(const PreparedSuite& p, const Target& target, const TaskEvalOptions& options, const ResponseCache& cache,
               Progress& progress, RunState& run) {
  if (p.suite.scorer == Scorer::perplexity)
    return evaluate_perplexity(p, target, options, run);
  SuiteOutcome out;
  out.suite = p.suite.name;
  out.documents = p.documents();
  RequestOptions request;
  request.concurrency = options.concurrency;
  request.max_retries = options.max_retries;
  request.timeout_s = options.request_timeout_s;
  request.cache = &cache;
  request.on_done = [&progress] { progress.advance(); };
  std::vector<std::string> first;
  std::vector<std::size_t> identical(p.documents(), 1);
  std::map<std::string, std::vector<double>> repeat_means;
  for (int r = 0; r < options.repeat; ++r) {
    request.read_cache = r == 0; // later passes ask the server again: that is what they measure
    auto pass = p.suite.scorer == Scorer::multiple_choice ? loglikelihood_pass(p, target, request)
                                                          : generation_pass(p, target, options, request, cache, run);
    out.cached += r == 0 ? pass.cached : 0;
    if (r == 0 && p.suite.scorer != Scorer::multiple_choice) {
      out.reasoning_end = run.reasoning_end;
      out.reasoning_unclosed = pass.reasoning_unclosed;
    }
    for (const auto& m : pass.scores.metrics)
      repeat_means[m.name].push_back(m.mean());
    if (r == 0) {
      out.scores = std::move(pass.scores);
      first = std::move(pass.answers);
    } else {
      for (std::size_t i = 0; i < pass.answers.size(); ++i)
        identical[i] = identical[i] != 0 && pass.answers[i] == first[i] ? 1u : 0u;
    }
  }
  if (options.repeat > 1) {
    std::size_t same = 0;
    for (const auto v : identical)
      same += v;
    out.identical_fraction = static_cast<double>(same) / static_cast<double>(identical.size());
    for (const auto& [metric, means] : repeat_means)
      out.across_repeats[metric] = trial_spread(means);
  }
  return out;
}

bool
any_scorer(const std::vector<PreparedSuite>& suites, Scorer scorer) {
  return std::any_of(suites.begin(), suites.end(),
                     [scorer](const PreparedSuite& p) { return p.suite.scorer == scorer; });
}

CandidateResult
evaluate_candidate(Target target, const std::vector<PreparedSuite>& suites, const TaskEvalOptions& options,
                   const ResponseCache& cache, RunState& run) {
  const auto start = std::chrono::steady_clock::now();
  CandidateResult c;
  c.label = target.label;
  c.model_name = target.endpoint.model;
  std::uint64_t total = 0;
  for (const auto& p : suites)
    total += p.requests() * static_cast<std::uint64_t>(options.repeat);
  if (any_scorer(suites, Scorer::multiple_choice) && !target.tokenizer)
    target.tokenizer = loglikelihood_tokenizer(options.tokenizer.empty() ? target.model.string() : options.tokenizer);
  Progress progress("eval tasks " + c.label, total, "requests");
  for (const auto& p : suites)
    c.suites.push_back(evaluate_suite(p, target, options, cache, progress, run));
  progress.finish();
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return c;
}

void
compare_with_baseline(CandidateResult& c, const std::map<std::string, std::vector<MetricScores>>& baseline,
                      const BootstrapOptions& bootstrap) {
  for (auto& s : c.suites) {
    const auto it = baseline.find(s.suite);
    if (it == baseline.end())
      throw InputError("--baseline has no results for suite " + s.suite + " (evaluate it on the baseline too)");
    for (const auto& m : s.scores.metrics)
      for (const auto& b : it->second)
        if (b.name == m.name) {
          if (m.items.size() < 2)
            continue; // a corpus figure (perplexity): compared through its per-window metric
          if (b.items.size() != m.items.size())
            throw InputError(fmt::format("--baseline: suite {} metric {} has {} items there and {} here (same "
                                         "documents and --limit are needed for a paired comparison)",
                                         s.suite, m.name, b.items.size(), m.items.size()));
          s.versus_baseline[m.name] = compare_paired(b.items, m.items, bootstrap);
        }
  }
}

std::vector<GateObservation>
observations(const CandidateResult& c) {
  std::vector<GateObservation> out;
  for (const auto& s : c.suites)
    for (const auto& m : s.scores.metrics) {
      GateObservation o{s.suite, m.name, m.mean(), std::nullopt};
      if (const auto it = s.versus_baseline.find(m.name); it != s.versus_baseline.end())
        o.versus_baseline = it->second;
      out.push_back(std::move(o));
    }
  return out;
}

// Written whole and renamed into place: a failed run leaves no half file.
void
write_items(const TaskEvalResult& result, const std::filesystem::path& file) {
  std::ostringstream out;
  for (std::size_t ci = 0; ci < result.candidates.size(); ++ci)
    for (const auto& s : result.candidates[ci].suites)
      for (const auto& item : s.scores.items) {
        auto row = to_json(item);
        row["candidate"] = ci;
        row["model"] = result.candidates[ci].label;
        row["suite"] = s.suite;
        out << row.dump() << '\n';
      }
  write_file_atomic(file, out.str());
}

void
archive_result(const archive::RunContext& context, const TaskEvalResult& result, std::int64_t first_trial) {
  if (!context.recording())
    return;
  auto& a = *context.archive;
  std::int64_t index = first_trial;
  for (const auto& c : result.candidates)
    for (const auto& s : c.suites) {
      const auto id = a.begin_trial(context.run_id, index++, 1, {{"model", c.label}, {"suite", s.suite}});
      archive::TrialEnd end;
      end.status = archive::TrialStatus::succeeded;
      end.result = {{"documents", s.documents}, {"cached", s.cached}};
      a.finish_trial(id, end);
      for (const auto& m : s.scores.metrics) {
        a.add_metric(context.run_id, id, {s.suite + "/" + m.name, m.mean(), ""});
        if (const auto it = s.versus_baseline.find(m.name); it != s.versus_baseline.end()) {
          a.add_metric(context.run_id, id, {s.suite + "/" + m.name + "/recovery", it->second.recovery, ""});
          a.add_metric(context.run_id, id, {s.suite + "/" + m.name + "/p_value", it->second.p_value, ""});
        }
      }
    }
  const auto items = a.run_directory(context.run_id) / "items.jsonl";
  std::filesystem::create_directories(items.parent_path());
  write_items(result, items);
  a.add_artifact(context.run_id, std::nullopt, items, "items");
}

} // namespace

std::map<std::string, std::vector<ItemOutcome>>
load_archived_items(const archive::RunContext& context, const std::string& run_reference) {
  if (context.archive == nullptr)
    throw InputError("--baseline " + run_reference + ": no run archive to read it from (--archive)");
  const auto run_id = context.archive->resolve_run(run_reference);
  if (run_id == context.run_id)
    throw InputError("--baseline " + run_reference + ": that is this run; name an earlier eval tasks run by its id");
  const auto detail = context.archive->load_run(run_id);
  if (detail.run.command != "eval tasks")
    throw InputError(
        fmt::format("--baseline {}: run {} is '{}', not an eval tasks run", run_reference, run_id, detail.run.command));
  for (const auto& artifact : detail.artifacts) {
    if (artifact.kind != "items")
      continue;
    std::ifstream in(artifact.path);
    if (!in)
      throw InputError(fmt::format("--baseline {}: its items file {} is gone", run_reference, artifact.path));
    std::map<std::string, std::vector<ItemOutcome>> by_suite;
    std::string line;
    while (std::getline(in, line)) {
      const auto row = nlohmann::json::parse(line, nullptr, false);
      if (row.is_discarded() || !row.is_object() || row.value("candidate", 0) != 0 || !row.contains("suite"))
        continue;
      by_suite[row["suite"].get<std::string>()].push_back(item_from_json(row));
    }
    return by_suite;
  }
  throw InputError(fmt::format("--baseline {}: run {} archived no items (it failed, or predates per-item results)",
                               run_reference, run_id));
}

namespace {

void
check_task_options(const TaskEvalOptions& options) {
  if (options.suites.empty())
    throw InputError("--suite NAME|FILE is required (bundled: " + [] {
      std::string names;
      for (const auto& n : list_task_suites())
        names += (names.empty() ? "" : ", ") + n;
      return names;
    }() + ")");
  if (options.endpoint.empty() && options.models.empty())
    throw InputError("give --model DIR (served here by serve-deltas) or --endpoint URL");
  if (!options.endpoint.empty() && options.models.size() > 1)
    throw InputError("--endpoint takes at most one --model (the name it serves)");
  if (!options.delta.empty() && (options.models.size() != 1 || !options.endpoint.empty()))
    throw InputError("--delta applies to exactly one local --model (its base)");
  if (!options.data.empty() && options.suites.size() != 1)
    throw InputError("--data replaces one suite's documents: give one --suite with it");
  if (options.repeat < 1)
    throw InputError("--repeat must be at least 1");
}

// A perplexity-only run scores the folders themselves; anything else asks a server.
bool
needs_server(const std::vector<PreparedSuite>& suites) {
  return !std::all_of(suites.begin(), suites.end(),
                      [](const PreparedSuite& p) { return p.suite.scorer == Scorer::perplexity; });
}

// The Do-Not-Answer judge, checked once before any model time is spent.
std::optional<EndpointTarget>
judge_target(const TaskEvalOptions& options, const std::vector<PreparedSuite>& suites) {
  if (options.judge.empty() || !any_scorer(suites, Scorer::do_not_answer))
    return std::nullopt;
  try {
    auto judge = endpoint_target(options.judge, options.judge_model, options.api_key).endpoint;
    judge.identity += std::string(" prompt:") + kJudgePromptVersion;
    return judge;
  } catch (const Error& e) {
    throw judge_failure(options, e);
  }
}

// The baseline's metrics by suite: a run id is read from the archive; a folder is evaluated now,
// the same way, and kept in the result.
std::map<std::string, std::vector<MetricScores>>
baseline_metrics(const TaskEvalOptions& options, const std::vector<PreparedSuite>& suites, const ResponseCache& cache,
                 RunState& run, TaskEvalResult& result) {
  std::map<std::string, std::vector<MetricScores>> baseline;
  if (options.baseline.empty())
    return baseline;
  if (std::filesystem::is_directory(options.baseline)) {
    auto base = evaluate_candidate(local_target(options.baseline, "", options, run.context, needs_server(suites)),
                                   suites, options, cache, run);
    for (const auto& s : base.suites)
      baseline[s.suite] = s.scores.metrics;
    result.baseline = std::move(base);
    result.baseline_source = options.baseline;
  } else {
    for (const auto& [suite, items] : load_archived_items(run.context, options.baseline))
      baseline[suite] = metrics_from_items(items);
    result.baseline_source = "run " + options.baseline;
  }
  return baseline;
}

std::vector<CandidateResult>
evaluate_candidates(const TaskEvalOptions& options, const std::string& endpoint_url,
                    const std::vector<PreparedSuite>& suites, const ResponseCache& cache, RunState& run) {
  std::vector<CandidateResult> candidates;
  if (!endpoint_url.empty()) {
    candidates.push_back(evaluate_candidate(
        endpoint_target(endpoint_url, options.models.empty() ? "" : options.models.front(), options.api_key), suites,
        options, cache, run));
    return candidates;
  }
  for (const auto& model : options.models) {
    auto target = local_target(model, options.delta, options, run.context, needs_server(suites));
    if (std::filesystem::is_directory(options.baseline))
      target.kl_base = options.baseline; // perplexity suites add KL(baseline || candidate)
    candidates.push_back(evaluate_candidate(std::move(target), suites, options, cache, run));
  }
  return candidates;
}

void
judge_candidates(TaskEvalResult& result, const std::map<std::string, std::vector<MetricScores>>& baseline,
                 const std::optional<QualityGate>& gate, const BootstrapOptions& bootstrap) {
  for (auto& c : result.candidates) {
    if (!baseline.empty())
      compare_with_baseline(c, baseline, bootstrap);
    if (gate) {
      c.gate = apply_quality_gate(*gate, observations(c));
      c.gate_passed = std::all_of(c.gate.begin(), c.gate.end(), [](const RuleOutcome& o) { return o.passed; });
    }
  }
  result.gate_given = gate.has_value();
  result.gate_passed = std::all_of(result.candidates.begin(), result.candidates.end(),
                                   [](const CandidateResult& c) { return c.gate_passed; });
}

// Mean, STD and RSD of each metric across the candidates (compress --trials outputs).
std::vector<MetricSpread>
spread_across_trials(const std::vector<CandidateResult>& candidates) {
  std::vector<MetricSpread> out;
  if (candidates.size() < 2)
    return out;
  const auto& first = candidates.front();
  for (std::size_t s = 0; s < first.suites.size(); ++s)
    for (std::size_t m = 0; m < first.suites[s].scores.metrics.size(); ++m) {
      std::vector<double> values;
      for (const auto& c : candidates)
        values.push_back(c.suites[s].scores.metrics[m].mean());
      out.push_back({first.suites[s].suite, first.suites[s].scores.metrics[m].name, trial_spread(values)});
    }
  return out;
}

} // namespace

TaskEvalResult
run_task_eval(const TaskEvalOptions& options, const archive::RunContext& context) {
  check_task_options(options);
  const auto setup = prompt_setup(options);
  std::vector<PreparedSuite> suites;
  for (const auto& name : options.suites)
    suites.push_back(prepare_suite(name, options, setup));
  // A chat-completions URL for a multiple-choice suite is refused before any work.
  const std::string endpoint_url =
      options.endpoint.empty() ? "" : endpoint_base(options.endpoint, any_scorer(suites, Scorer::multiple_choice));
  const std::optional<QualityGate> gate =
      options.gate.empty() ? std::nullopt : std::optional<QualityGate>(load_quality_gate(options.gate));
  const ResponseCache cache(options.cache ? (options.cache_dir.empty() ? ResponseCache::default_folder()
                                                                       : std::filesystem::path(options.cache_dir))
                                          : std::filesystem::path());
  RunState run{context, 0, judge_target(options, suites), setup.reasoning_end};

  TaskEvalResult result;
  const auto baseline = baseline_metrics(options, suites, cache, run, result);
  result.candidates = evaluate_candidates(options, endpoint_url, suites, cache, run);
  judge_candidates(result, baseline, gate, options.bootstrap);
  result.across_trials = spread_across_trials(result.candidates);
  if (!options.items_out.empty())
    write_items(result, options.items_out);
  archive_result(context, result, run.next_trial);
  return result;
}

} // namespace optkit::eval
