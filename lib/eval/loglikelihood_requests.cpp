#include "eval/loglikelihood_requests.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace optkit::eval {

namespace {

std::size_t
trailing_whitespace(const std::string& text) {
  std::size_t n = 0;
  while (n < text.size() && std::isspace(static_cast<unsigned char>(text[text.size() - 1 - n])))
    ++n;
  return n;
}

// The request the server says it cannot serve: llama-server answers echo with "Only no echo is
// supported" (ggml-org/llama.cpp#8942).
InputError
echo_refused(const EndpointTarget& target, const InputError& e) {
  const std::string what = e.what();
  if (what.find("echo") == std::string::npos)
    return e;
  return InputError(target.url.text +
                    " refuses echo on /v1/completions, so it cannot return prompt logprobs and loglikelihood "
                    "suites cannot run against it (llama.cpp's llama-server does this); evaluate the model through "
                    "serve-deltas (--model DIR) or vLLM (server said: " +
                    what + ")");
}

} // namespace

EncodedPair
encode_pair(const model::Tokenizer& tokenizer, std::string context, std::string continuation) {
  if (context.empty()) {
    EncodedPair pair{tokenizer.encode("", true), tokenizer.encode(continuation, false)};
    if (pair.context.empty())
      throw InputError("an empty context needs the tokenizer's BOS token, and this tokenizer adds none");
    return pair;
  }
  const auto spaces = trailing_whitespace(context);
  continuation = context.substr(context.size() - spaces) + continuation;
  context.resize(context.size() - spaces);
  auto whole = tokenizer.encode(context + continuation, false);
  EncodedPair pair;
  pair.context = tokenizer.encode(context, false);
  const auto n = std::min(pair.context.size(), whole.size());
  pair.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(n), whole.end());
  // A token spanning the join that swallows the whole continuation (": C" in some vocabularies)
  // would leave nothing to score: lm-eval then encodes the continuation on its own.
  if (pair.continuation.empty())
    pair.continuation = tokenizer.encode(continuation, false);
  return pair;
}

LoglikelihoodRequest
loglikelihood_request(const EncodedPair& pair, int max_length) {
  std::vector<std::int32_t> prompt = pair.context;
  prompt.insert(prompt.end(), pair.continuation.begin(), pair.continuation.end());
  // lm-eval keeps the last max_length − 1 tokens: one place is the token generated.
  const auto keep = static_cast<std::size_t>(std::max(1, max_length - 1));
  const std::size_t dropped = prompt.size() > keep ? prompt.size() - keep : 0;
  prompt.erase(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(dropped));
  LoglikelihoodRequest r;
  r.context_tokens = pair.context.size() > dropped ? pair.context.size() - dropped : 0;
  r.prompt_tokens = prompt.size();
  r.body = {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}, {"logprobs", 1}, {"seed", 1234}, {"echo", true}};
  return r;
}

double
continuation_loglikelihood(const nlohmann::json& logprobs, const LoglikelihoodRequest& request) {
  const auto* values =
      logprobs.is_object() && logprobs.contains("token_logprobs") && logprobs["token_logprobs"].is_array()
          ? &logprobs["token_logprobs"]
          : nullptr;
  if (values == nullptr || values->size() < request.prompt_tokens)
    throw RuntimeFailure(fmt::format(
        "the server returned logprobs for {} tokens of a {}-token prompt sent with echo: it does not echo prompt "
        "logprobs, which loglikelihood scoring needs",
        values == nullptr ? 0 : values->size(), request.prompt_tokens));
  double sum = 0;
  for (std::size_t i = std::max<std::size_t>(request.context_tokens, 1); i < request.prompt_tokens; ++i) {
    const auto& v = (*values)[i];
    if (!v.is_number())
      throw RuntimeFailure(fmt::format("the server's logprob of prompt token {} is {}, not a number", i, v.dump()));
    sum += v.get<double>();
  }
  return sum;
}

Loglikelihoods
request_loglikelihoods(const EndpointTarget& target, const model::Tokenizer& tokenizer,
                       const std::vector<ChoiceRequest>& pairs, int max_length, const RequestOptions& options) {
  std::vector<LoglikelihoodRequest> requests;
  std::vector<nlohmann::json> bodies;
  requests.reserve(pairs.size());
  bodies.reserve(pairs.size());
  for (const auto& p : pairs) {
    requests.push_back(loglikelihood_request(encode_pair(tokenizer, p.context, p.continuation), max_length));
    bodies.push_back(requests.back().body);
  }
  std::vector<Generation> generations;
  try {
    generations = generate_all(target, "/v1/completions", bodies, options);
  } catch (const InputError& e) {
    throw echo_refused(target, e);
  }
  Loglikelihoods out;
  out.values.reserve(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    out.cached += generations[i].cached ? 1u : 0u;
    try {
      out.values.push_back(continuation_loglikelihood(generations[i].logprobs, requests[i]));
    } catch (const RuntimeFailure& e) {
      throw RuntimeFailure(fmt::format("{}/v1/completions: request {}: {}", target.url.text, i, e.what()));
    }
  }
  return out;
}

} // namespace optkit::eval
