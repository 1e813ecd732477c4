// Prompts of exact token counts, cut from a corpus with the target model's own tokenizer — the
// local tokenizer.json of a model folder, or the server's /tokenize and /detokenize — so "128
// input tokens" means 128 tokens to the server, not 128 words. A shared prefix is the same
// leading slice in every prompt.
#pragma once

#include "bench/serving_profile.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace optkit::http {
class Client;
}
namespace optkit::model {
class Tokenizer;
}

namespace optkit::bench {

// Text ↔ token ids without special tokens.
class TokenCodec {
public:
  virtual ~TokenCodec() = default;
  virtual std::vector<std::int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<std::int32_t>& ids) const = 0;
  virtual std::string source() const = 0; // for the report: "tokenizer DIR" or "server /tokenize"
  // Tokens the server adds to every completions prompt (a BOS, say): counted in the request's
  // length, so "128 input tokens" is 128 as the server counts them.
  virtual std::int64_t added_special_tokens() const = 0;
};

std::unique_ptr<TokenCodec> local_codec(const std::string& model_dir);
// `model` is sent with each call (vLLM requires it); the client must outlive the codec. A server
// that answers GET /props with a build_info is llama-server, spoken to in its dialect
// ({"content", "add_special"} in, {"content"} out of /detokenize).
std::unique_ptr<TokenCodec> server_codec(http::Client& client, const std::string& model);

struct SynthesizedPrompt {
  std::string text;
  std::int64_t tokens = 0; // as the codec counts the text (equal to the plan unless the corpus is too short)
};

// What one batch of prompts (from a reseed() to the next: a trial's) may spend on the codec. A
// server whose /detokenize text does not count back to the tokens asked for makes every prompt
// retry through the network; past the budget the batch fails instead of running on.
struct SynthesisBudget {
  std::int64_t max_round_trips = 8192; // decode + encode pairs (2,048 prompts at most per batch)
  double max_seconds = 120;
};

class PromptSynthesizer {
public:
  // Encodes `corpus_text` once; throws InputError when it encodes to no tokens. `prefix_groups`
  // shared prefixes of `shared_prefix_tokens` each, cut from evenly spaced places in the corpus.
  PromptSynthesizer(const TokenCodec& codec, const std::string& corpus_text, std::int64_t shared_prefix_tokens,
                    std::uint64_t seed, SynthesisBudget budget = {}, std::int64_t prefix_groups = 1);
  // One prompt of `tokens` tokens as the server counts them (its added special tokens included).
  // Cuts a window of ids at a seeded offset, decodes it, and re-encodes to check: when the round
  // trip merges or splits tokens at the edges, the window is adjusted until the count is exact
  // (a few tries; the closest is kept otherwise). Throws RuntimeFailure past the budget, naming
  // the codec's round trip, and Interrupted after Ctrl-C.
  // `prefix_group`: which shared prefix the prompt starts with.
  SynthesizedPrompt make(std::int64_t tokens, std::size_t prefix_group = 0);
  // As make(), without the shared prefix (a conversation's later question).
  SynthesizedPrompt make_unprefixed(std::int64_t tokens);
  // One prompt of `tokens` tokens built from a Mooncake trace's block ids: block id b is always
  // the same `block_tokens` of the corpus (the last block as many as are left), so requests whose
  // ids begin alike share that prefix, as the trace's did. The last block's length is adjusted
  // until the count is exact, as make() does.
  SynthesizedPrompt make_from_blocks(std::span<const std::int64_t> block_ids, std::int64_t tokens,
                                     std::int64_t block_tokens);
  // Starts the sequence of prompts over from `seed` (each trial its own), and the budget, without
  // encoding the corpus again.
  void reseed(std::uint64_t seed);

private:
  std::vector<std::int32_t> window(std::size_t start, std::int64_t length) const;
  std::int64_t counted_round_trip(const std::vector<std::int32_t>& ids, std::string& text);
  // `leading` ids, then a window of the corpus from `start` whose length is adjusted until the
  // whole counts `tokens` (the closest of a few tries otherwise); the special tokens added.
  SynthesizedPrompt fitted(const std::vector<std::int32_t>& leading, std::size_t start, std::int64_t tokens);

  const TokenCodec& m_codec;
  std::int64_t m_special = 0;
  std::vector<std::int32_t> m_corpus;
  std::vector<std::vector<std::int32_t>> m_prefixes; // one per group (none without a shared prefix)
  std::uint64_t m_state;
  SynthesisBudget m_budget;
  std::int64_t m_round_trips = 0;
  std::chrono::steady_clock::time_point m_batch_started = std::chrono::steady_clock::now();
};

// The corpus prompts are cut from when the user names none: profiles/serving/corpus.txt.
std::string default_corpus_text();

} // namespace optkit::bench
