#include "eval/task_targets.hpp"

#include "archive/run_archive.hpp"
#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "eval/task_run.hpp"
#include "http/openai_endpoint.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace optkit::eval {

namespace {

http::Headers
auth_headers(const std::string& api_key) {
  http::Headers headers;
  if (!api_key.empty())
    headers.emplace_back("Authorization", "Bearer " + api_key);
  return headers;
}

// What the cache keys an endpoint's answers by: its URL, the model's name and what the server says
// lies behind that name (its /v1/models entry's root and max_model_len, the /version body), so a
// different checkpoint served under the same name misses. Weights changed in place under the same
// path still hit: --no-cache then.
std::string
endpoint_identity(http::Client& control, const nlohmann::json& entry) {
  const auto& url = control.url(); // as parsed, so ".../v1" and "..." are one endpoint
  std::string identity =
      fmt::format("endpoint:{}:{}{} model:{}", url.host, url.port, url.prefix, entry["id"].get<std::string>());
  if (entry.contains("root"))
    identity += " root:" + entry["root"].dump();
  if (entry.contains("max_model_len"))
    identity += " max_model_len:" + entry["max_model_len"].dump();
  try {
    const auto version = control.request("GET", "/version");
    if (version.status == 200)
      identity += " version:" + version.body;
  } catch (const RuntimeFailure&) {
    // The listing answered a moment ago; a server without /version is keyed without it.
  }
  return identity;
}

} // namespace

std::string
endpoint_base(const std::string& url_text, bool loglikelihood) {
  std::string url = url_text;
  while (!url.empty() && url.back() == '/')
    url.pop_back();
  if (url.ends_with("/chat/completions")) {
    if (loglikelihood)
      throw InputError("--endpoint " + url_text +
                       ": multiple-choice suites score loglikelihoods, which the chat-completions API cannot return "
                       "(no prompt logprobs; lm-eval refuses them on local-chat-completions too); give the server's "
                       "base URL, whose /v1/completions is used");
    return url.substr(0, url.size() - std::string("/chat/completions").size());
  }
  if (url.ends_with("/completions"))
    return url.substr(0, url.size() - std::string("/completions").size());
  return url_text;
}

Target
endpoint_target(const std::string& url_text, const std::string& model, const std::string& api_key) {
  Target t;
  t.label = url_text;
  t.endpoint.url = http::openai_base_url(url_text);
  t.endpoint.headers = auth_headers(api_key);
  http::ClientOptions control_options;
  control_options.connect_timeout = std::chrono::milliseconds(5000);
  control_options.request_timeout = std::chrono::milliseconds(30000);
  control_options.headers = t.endpoint.headers;
  http::Client control(t.endpoint.url, control_options);
  const auto entries = http::listed_model_entries(control);
  t.endpoint.model = model.empty() ? entries.front()["id"].get<std::string>() : model;
  const auto entry = std::find_if(entries.begin(), entries.end(),
                                  [&](const nlohmann::json& e) { return e["id"] == t.endpoint.model; });
  if (entry == entries.end()) {
    std::string names;
    for (const auto& e : entries)
      names += (names.empty() ? "" : ", ") + e["id"].get<std::string>();
    throw InputError(
        fmt::format("--model {}: {} does not serve it (it serves: {})", t.endpoint.model, url_text, names));
  }
  t.endpoint.identity = endpoint_identity(control, *entry);
  return t;
}

Target
local_target(const std::string& model, const std::string& delta, const TaskEvalOptions& options,
             const archive::RunContext& context, bool serve) {
  if (!std::filesystem::is_regular_file(std::filesystem::path(model) / "config.json"))
    throw InputError("--model " + model + ": not a model folder (no config.json)");
  if (!delta.empty() && !std::filesystem::is_directory(delta))
    throw InputError("--delta " + delta + ": no such folder");
  if (!serve) {
    Target t;
    t.label = delta.empty() ? model : model + " + " + delta;
    t.model = model;
    t.delta = delta;
    return t;
  }
  engines::LaunchOptions launch;
  launch.kind = engines::EngineKind::optkit;
  launch.settings.model = model;
  launch.settings.port = 0;
  std::string delta_name;
  if (!delta.empty()) {
    delta_name = std::filesystem::path(delta).lexically_normal().filename().string();
    if (delta_name.empty())
      delta_name = "delta";
    launch.settings.extra_args = {"--delta", delta_name + "=" + delta};
  }
  if (options.threads > 0) {
    launch.settings.extra_args.push_back("--threads");
    launch.settings.extra_args.push_back(std::to_string(options.threads));
  }
  if (options.no_mmap)
    launch.settings.extra_args.push_back("--no-mmap");
  if (!options.activations.empty()) {
    launch.settings.extra_args.push_back("--activations");
    launch.settings.extra_args.push_back(options.activations);
  }
  launch.executable = options.engine_executable.empty() ? executable_path().string() : options.engine_executable;
  launch.directory =
      context.recording() ? context.archive->run_directory(context.run_id) : std::filesystem::temp_directory_path();
  launch.ready_timeout_s = 300;
  Target t;
  t.engine = std::make_unique<engines::EngineProcess>(std::move(launch));
  t.label = delta.empty() ? model : model + " + " + delta;
  auto served = endpoint_target(t.engine->url(), delta_name, options.api_key);
  t.endpoint = served.endpoint;
  t.endpoint.identity = local_model_identity(model, delta, options.activations);
  t.model = model;
  t.delta = delta;
  return t;
}

} // namespace optkit::eval
