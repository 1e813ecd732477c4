// `optkit eval tasks`: task suites against an endpoint, or against local model folders that
// serve-deltas serves as a child on a free loopback port; several folders (compress --trials
// outputs) give mean/STD/RSD across trials; --repeat measures run-to-run determinism; a baseline
// (an archived run, or a folder evaluated now) gives recovery with a confidence interval and a
// paired p-value per metric; a gate file turns those into pass/fail.
#pragma once

#include "archive/run_context.hpp"
#include "eval/paired_statistics.hpp"
#include "eval/quality_gate.hpp"
#include "eval/task_scoring.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace optkit::eval {

struct TaskEvalOptions {
  std::string endpoint;            // URL of a running server, or
  std::vector<std::string> models; // local model folders (several: trials); with --endpoint: the served name
  std::string delta;               // a delta of the (single) local model
  std::string api_key;
  std::string tokenizer;           // multiple-choice suites on an endpoint: its model's tokenizer (folder or file)
  std::vector<std::string> suites; // names or files
  std::string data;                // documents, overriding the suite's (one suite)
  std::string fewshot;             // exemplars, overriding the suite's
  std::optional<int> num_fewshot;
  std::optional<int> max_gen_toks;  // overriding the suite's token budget
  bool apply_chat_template = false; // completions and multiple-choice suites: the model's chat template renders prompts
  bool fewshot_as_multiturn = false;             // exemplars as user/assistant turns (chat suites or the template)
  std::optional<std::string> system_instruction; // lm-eval's --system_instruction
  std::string reasoning_end; // end-of-thinking marker stripped from answers; empty: the chat template's; "none": off
  std::size_t limit = 0;     // first N documents (0: all)
  int concurrency = 8;
  int max_retries = 3;
  double request_timeout_s = 300;
  bool cache = true;
  std::string cache_dir; // empty: ResponseCache::default_folder()
  int repeat = 1;
  std::string baseline; // an archived eval tasks run (id) or a model folder
  std::string gate;     // gate YAML
  std::string judge;    // Do-Not-Answer judge endpoint URL
  std::string judge_model;
  std::string items_out;         // per-item JSONL export
  std::string engine_executable; // serve-deltas for local models (default: this binary)
  unsigned threads = 0;          // serve-deltas' CPU threads (0: its default)
  std::string activations;       // serve-deltas' --activations (empty: its default)
  bool no_mmap = false;          // serve-deltas' --no-mmap
  BootstrapOptions bootstrap;
};

struct SuiteOutcome {
  std::string suite;
  std::size_t documents = 0;
  SuiteScores scores;
  std::map<std::string, PairedComparison> versus_baseline; // metric → comparison
  std::optional<double> identical_fraction;                // --repeat: items answered identically every time
  std::map<std::string, TrialSpread> across_repeats;       // metric → spread of the repeats' means
  std::size_t cached = 0;                                  // responses served from the cache
  std::string reasoning_end;                               // the marker stripped from answers (empty: none)
  std::size_t reasoning_unclosed = 0;                      // answers that never wrote it
};

struct CandidateResult {
  std::string label;      // the folder or endpoint evaluated
  std::string model_name; // as requests named it
  std::vector<SuiteOutcome> suites;
  std::vector<RuleOutcome> gate;
  bool gate_passed = true;
  double seconds = 0;
};

struct MetricSpread {
  std::string suite, metric;
  TrialSpread spread;
};

struct TaskEvalResult {
  std::vector<CandidateResult> candidates;
  std::optional<CandidateResult> baseline;
  std::string baseline_source;             // "run 12" or the folder
  std::vector<MetricSpread> across_trials; // with more than one candidate
  bool gate_given = false;
  bool gate_passed = true;
};

// InputError for bad flags, files or suites; RuntimeFailure when the target fails. The run's
// trials (one per candidate × suite), metrics and the items file are archived.
TaskEvalResult run_task_eval(const TaskEvalOptions& options, const archive::RunContext& context);

// The items of candidate 0 of an archived `eval tasks` run, by suite.
std::map<std::string, std::vector<ItemOutcome>> load_archived_items(const archive::RunContext& context,
                                                                    const std::string& run_reference);

} // namespace optkit::eval
