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

using PerplexityRunContext = archive::RunContext;

// Parent side: validates the inputs, runs the worker, archives the metrics. Exit-2 failures of
// the child come back as InputError with the child's message.
PerplexityResult run_perplexity(const PerplexityOptions& options, const PerplexityRunContext& context);

// Child side: reads the options from the spec's payload, measures, writes the result.
void perplexity_worker(const proc::WorkerSpec& spec);

nlohmann::json to_json(const PerplexityOptions& options);
PerplexityOptions perplexity_options_from_json(const nlohmann::json& json);

// metric | value | unit rows.
Table perplexity_table(const PerplexityResult& result);

} // namespace optkit::eval
