// The `logprobs` of an OpenAI response, as vLLM writes them: on completions the legacy arrays
// (`text_offset`, `token_logprobs`, `tokens`, `top_logprobs` — what lm-eval's local-completions
// reads for loglikelihood, with `echo` putting the prompt's tokens first and a null for the
// first), on chat `{"content": [{token, logprob, bytes, top_logprobs}]}`. Entries accumulate as
// tokens arrive and are taken per stream chunk; text offsets run on across takes.
#pragma once

#include "model/tokenizer.hpp"
#include "runtime/token_logprobs.hpp"
#include "serve/openai_protocol.hpp"

#include <nlohmann/json.hpp>

#include <vector>

namespace optkit::serve {

class LogprobsWriter {
public:
  LogprobsWriter(const model::Tokenizer& tokenizer, Endpoint endpoint);

  // A token with no logprob: the first token of an echoed prompt.
  void add_unscored(runtime::TokenId token);
  void add(const runtime::PositionLogprobs& entry);
  bool empty() const { return m_entries.empty(); }
  // The entries added since the last take, as a choice's "logprobs" value.
  nlohmann::ordered_json take();

private:
  struct Entry {
    runtime::TokenId token = 0;
    std::optional<runtime::PositionLogprobs> scored;
  };
  std::string text(runtime::TokenId token) const;

  const model::Tokenizer& m_tokenizer;
  Endpoint m_endpoint;
  std::vector<Entry> m_entries;
  std::int64_t m_offset = 0; // characters of the returned text before the next entry
};

} // namespace optkit::serve
