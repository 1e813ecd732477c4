// What `eval tasks` evaluates: a running OpenAI-compatible endpoint, or a local model folder (and
// delta) that serve-deltas serves as a child on a free loopback port for as long as the target
// lives — or, when every suite is a perplexity suite, the folder itself with no server.
#pragma once

#include "archive/run_context.hpp"
#include "engines/engine_process.hpp"
#include "eval/task_requests.hpp"
#include "model/tokenizer.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace optkit::eval {

struct TaskEvalOptions;

struct Target {
  std::unique_ptr<engines::EngineProcess> engine;
  EndpointTarget endpoint;
  std::string label;
  std::filesystem::path model, delta; // a local target's folders (perplexity suites run on them)
  std::optional<std::filesystem::path> kl_base;
  std::optional<model::Tokenizer> tokenizer; // multiple-choice suites' requests are tokenized with it
};

// The server's base URL from --endpoint as users write it for lm-eval (…/v1/completions,
// …/v1/chat/completions): the API path is the suite's. A chat-completions URL for a
// multiple-choice suite is refused with lm-eval's reason (no prompt logprobs).
std::string endpoint_base(const std::string& url_text, bool loglikelihood);

// Checks the endpoint answers /v1/models and serves `model` (empty: its first); InputError
// listing what it serves otherwise.
Target endpoint_target(const std::string& url_text, const std::string& model, const std::string& api_key);

// `serve`: whether any suite generates (a perplexity-only run needs no server). The child's log
// goes to the run's folder.
Target local_target(const std::string& model, const std::string& delta, const TaskEvalOptions& options,
                    const archive::RunContext& context, bool serve);

} // namespace optkit::eval
