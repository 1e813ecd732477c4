// `optkit eval perplexity` as a recorded run: the evaluation itself runs in an isolated worker
// child; the parent archives its figures as metrics and renders them for people or programs.
#pragma once

#include "archive/run_context.hpp"
#include "core/table.hpp"
#include "eval/perplexity.hpp"
#include "proc/worker_spec.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace optkit::eval {

// Parent side: validates the inputs, runs the worker, archives the metrics. Exit-2 failures of
// the child come back as InputError with the child's message.
PerplexityResult run_perplexity(const PerplexityOptions& options, const archive::RunContext& context);

// The measurement alone, in a worker child recorded as trial `trial_index` of the context's run
// (`eval tasks` runs several in one run and archives its own metrics).
PerplexityResult measure_perplexity_in_worker(const PerplexityOptions& options, const archive::RunContext& context,
                                              std::int64_t trial_index);

// Child side: reads the options from the spec's payload, measures, writes the result.
void perplexity_worker(const proc::WorkerSpec& spec);

nlohmann::json to_json(const PerplexityOptions& options);
PerplexityOptions perplexity_options_from_json(const nlohmann::json& json);

// metric | value | unit rows.
Table perplexity_table(const PerplexityResult& result);

} // namespace optkit::eval
