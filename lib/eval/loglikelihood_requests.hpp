// Loglikelihood requests as lm-eval's local-completions sends them: context and continuation
// tokenized as TemplateLM._encode_pair does (trailing context whitespace moved to the
// continuation; context + continuation encoded whole, the context alone, the continuation the
// remainder — or encoded alone when a token spanning the join leaves no remainder), no special
// tokens added, left-truncated to max_length − 1, sent as token ids with
// echo, logprobs 1, max_tokens 1, temperature 0 and seed 1234; the score is the sum of the echoed
// prompt logprobs of the continuation's tokens.
#pragma once

#include "eval/choice_items.hpp"
#include "eval/task_requests.hpp"
#include "model/tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace optkit::eval {

struct EncodedPair {
  std::vector<std::int32_t> context, continuation;
};

// An empty context is the tokenizer's prefix token (its BOS, as lm-eval's prefix_token_id).
EncodedPair encode_pair(const model::Tokenizer& tokenizer, std::string context, std::string continuation);

struct LoglikelihoodRequest {
  nlohmann::json body;            // without "model"
  std::size_t context_tokens = 0; // of the prompt sent (after truncation)
  std::size_t prompt_tokens = 0;  // context + continuation sent
};

LoglikelihoodRequest loglikelihood_request(const EncodedPair& pair, int max_length);

// The continuation's loglikelihood in a completion's choices[0].logprobs (OpenAI's legacy shape:
// token_logprobs with the prompt's first, then the one generated). RuntimeFailure when the prompt's
// logprobs are not there (a server that does not echo them).
double continuation_loglikelihood(const nlohmann::json& logprobs, const LoglikelihoodRequest& request);

struct Loglikelihoods {
  std::vector<double> values; // one per pair
  std::size_t cached = 0;     // answered from the response cache
};

// One loglikelihood per (context, continuation) pair, through generate_all's concurrency, retries
// and cache. InputError with the fix when the server refuses echo (llama.cpp's llama-server does).
Loglikelihoods request_loglikelihoods(const EndpointTarget& target, const model::Tokenizer& tokenizer,
                                      const std::vector<ChoiceRequest>& pairs, int max_length,
                                      const RequestOptions& options);

} // namespace optkit::eval
