#include "bench/prompt_synthesis.hpp"

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/interrupt.hpp"
#include "core/random_source.hpp"
#include "core/resource_paths.hpp"
#include "http/client.hpp"
#include "model/tokenizer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>

namespace optkit::bench {

namespace {

class LocalCodec final : public TokenCodec {
public:
  explicit LocalCodec(const std::string& dir) : m_dir(dir), m_tokenizer(model::Tokenizer::load_folder(dir)) {}
  std::vector<std::int32_t> encode(const std::string& text) const override { return m_tokenizer.encode(text, false); }
  std::string decode(const std::vector<std::int32_t>& ids) const override { return m_tokenizer.decode(ids, false); }
  std::string source() const override { return "tokenizer " + m_dir; }
  std::int64_t added_special_tokens() const override {
    return static_cast<std::int64_t>(m_tokenizer.encode("", true).size());
  }

private:
  std::string m_dir;
  model::Tokenizer m_tokenizer;
};

// A server's /tokenize and /detokenize: vLLM's and SGLang's dialect (and serve-deltas'), or
// llama-server's, which names the text `content` and its special-token switch `add_special`.
enum class TokenizeDialect { vllm, llamacpp };

class ServerCodec final : public TokenCodec {
public:
  ServerCodec(http::Client& client, std::string model, TokenizeDialect dialect)
      : m_client(client), m_model(std::move(model)), m_dialect(dialect) {}

  std::vector<std::int32_t> encode(const std::string& text) const override {
    const auto body = call("/tokenize", tokenize_request(text, false));
    if (!body.contains("tokens") || !body["tokens"].is_array())
      throw RuntimeFailure(m_client.url().text + "/tokenize answered without a 'tokens' list");
    return body["tokens"].get<std::vector<std::int32_t>>();
  }
  std::string decode(const std::vector<std::int32_t>& ids) const override {
    const auto body = call("/detokenize", {{"model", m_model}, {"tokens", ids}});
    const char* key = m_dialect == TokenizeDialect::llamacpp ? "content" : "prompt";
    if (!body.contains(key) || !body[key].is_string())
      throw RuntimeFailure(fmt::format("{}/detokenize answered without a '{}' string", m_client.url().text, key));
    return body[key].get<std::string>();
  }
  std::string source() const override {
    return m_dialect == TokenizeDialect::llamacpp ? "server /tokenize (llama-server)" : "server /tokenize";
  }
  std::int64_t added_special_tokens() const override {
    const auto body = call("/tokenize", tokenize_request("", true));
    return body.contains("tokens") && body["tokens"].is_array() ? static_cast<std::int64_t>(body["tokens"].size()) : 0;
  }

private:
  nlohmann::json tokenize_request(const std::string& text, bool special) const {
    if (m_dialect == TokenizeDialect::llamacpp)
      return {{"content", text}, {"add_special", special}};
    return {{"model", m_model}, {"prompt", text}, {"add_special_tokens", special}};
  }

  nlohmann::json call(const std::string& path, const nlohmann::json& request) const {
    const auto response = m_client.request("POST", path, request.dump());
    if (response.status != 200)
      throw RuntimeFailure(fmt::format("{}{}: HTTP {} — the server cannot count tokens; give --tokenizer DIR (the "
                                       "model folder's tokenizer.json) instead",
                                       m_client.url().text, path, response.status));
    auto body = nlohmann::json::parse(response.body, nullptr, false);
    if (body.is_discarded())
      throw RuntimeFailure(m_client.url().text + path + " answered with a body that is not JSON");
    return body;
  }

  http::Client& m_client;
  std::string m_model;
  TokenizeDialect m_dialect;
};

// llama-server answers GET /props with its build_info; vLLM, SGLang and serve-deltas do not.
TokenizeDialect
tokenize_dialect(http::Client& client) {
  try {
    const auto props = client.request("GET", "/props");
    const auto body = nlohmann::json::parse(props.body, nullptr, false);
    if (props.status == 200 && body.is_object() && body.contains("build_info"))
      return TokenizeDialect::llamacpp;
  } catch (const RuntimeFailure&) {
  }
  return TokenizeDialect::vllm;
}

} // namespace

std::unique_ptr<TokenCodec>
local_codec(const std::string& model_dir) {
  return std::make_unique<LocalCodec>(model_dir);
}

std::unique_ptr<TokenCodec>
server_codec(http::Client& client, const std::string& model) {
  return std::make_unique<ServerCodec>(client, model, tokenize_dialect(client));
}

std::string
default_corpus_text() {
  return read_input_file(find_data_directory().path / "profiles" / "serving" / "corpus.txt");
}

PromptSynthesizer::PromptSynthesizer(const TokenCodec& codec, const std::string& corpus_text,
                                     std::int64_t shared_prefix_tokens, std::uint64_t seed, SynthesisBudget budget,
                                     std::int64_t prefix_groups)
    : m_codec(codec)
    , m_special(codec.added_special_tokens())
    , m_corpus(codec.encode(corpus_text))
    , m_state(seed)
    , m_budget(budget) {
  if (m_corpus.empty())
    throw InputError("the prompt corpus encodes to no tokens");
  const auto groups = static_cast<std::size_t>(std::max<std::int64_t>(1, prefix_groups));
  if (shared_prefix_tokens > 0)
    for (std::size_t g = 0; g < groups; ++g)
      m_prefixes.push_back(window(g * m_corpus.size() / groups, shared_prefix_tokens));
}

std::vector<std::int32_t>
PromptSynthesizer::window(std::size_t start, std::int64_t length) const {
  std::vector<std::int32_t> ids;
  ids.reserve(static_cast<std::size_t>(length));
  for (std::int64_t i = 0; i < length; ++i) // wraps around a short corpus
    ids.push_back(m_corpus[(start + static_cast<std::size_t>(i)) % m_corpus.size()]);
  return ids;
}

void
PromptSynthesizer::reseed(std::uint64_t seed) {
  m_state = seed;
  m_round_trips = 0;
  m_batch_started = std::chrono::steady_clock::now();
}

// Decodes `ids` into `text` and counts its tokens, within the batch's budget.
std::int64_t
PromptSynthesizer::counted_round_trip(const std::vector<std::int32_t>& ids, std::string& text) {
  throw_if_interrupted();
  const double seconds = seconds_since(m_batch_started);
  if (m_round_trips >= m_budget.max_round_trips || seconds > m_budget.max_seconds)
    throw RuntimeFailure(fmt::format(
        "prompt synthesis through {} ran past its budget ({} decode/encode round trips in {:.0f} s, limits {} and "
        "{:.0f} s): the text it decodes does not encode back to the tokens asked for; give --tokenizer DIR (the "
        "model folder's tokenizer.json)",
        m_codec.source(), m_round_trips, seconds, m_budget.max_round_trips, m_budget.max_seconds));
  ++m_round_trips;
  text = m_codec.decode(ids);
  return static_cast<std::int64_t>(m_codec.encode(text).size());
}

SynthesizedPrompt
PromptSynthesizer::make_from_blocks(std::span<const std::int64_t> block_ids, std::int64_t total_tokens,
                                    std::int64_t block_tokens) {
  if (block_ids.empty())
    return make(total_tokens);
  const std::int64_t tokens = std::max<std::int64_t>(1, total_tokens - m_special);
  const auto blocks = static_cast<std::int64_t>(block_ids.size());
  const auto block_start = [&](std::int64_t id) { // a block id's own place in the corpus
    return static_cast<std::size_t>(
        RandomSource(static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ULL + 1).below(m_corpus.size()));
  };
  std::vector<std::int32_t> leading; // every block but the last, whole
  for (std::int64_t b = 0; b + 1 < blocks; ++b) {
    const auto part = window(block_start(block_ids[static_cast<std::size_t>(b)]), block_tokens);
    leading.insert(leading.end(), part.begin(), part.end());
  }
  return fitted(leading, block_start(block_ids.back()), tokens);
}

SynthesizedPrompt
PromptSynthesizer::make(std::int64_t total_tokens, std::size_t prefix_group) {
  const std::int64_t tokens = std::max<std::int64_t>(1, total_tokens - m_special);
  RandomSource random(m_state++);
  static const std::vector<std::int32_t> no_prefix;
  return fitted(m_prefixes.empty() ? no_prefix : m_prefixes.at(prefix_group % m_prefixes.size()),
                random.below(m_corpus.size()), tokens);
}

SynthesizedPrompt
PromptSynthesizer::make_unprefixed(std::int64_t total_tokens) {
  const std::int64_t tokens = std::max<std::int64_t>(1, total_tokens - m_special);
  RandomSource random(m_state++);
  return fitted({}, random.below(m_corpus.size()), tokens);
}

SynthesizedPrompt
PromptSynthesizer::fitted(const std::vector<std::int32_t>& leading, std::size_t start, std::int64_t tokens) {
  SynthesizedPrompt best;
  std::int64_t length = std::max<std::int64_t>(1, tokens - static_cast<std::int64_t>(leading.size()));
  for (int attempt = 0; attempt < 6; ++attempt) {
    auto ids = leading;
    const auto body = window(start, length);
    ids.insert(ids.end(), body.begin(), body.end());
    SynthesizedPrompt candidate;
    candidate.tokens = counted_round_trip(ids, candidate.text);
    if (best.text.empty() || std::llabs(candidate.tokens - tokens) < std::llabs(best.tokens - tokens))
      best = candidate;
    if (candidate.tokens == tokens)
      break;
    length = std::max<std::int64_t>(1, length + (tokens - candidate.tokens));
  }
  best.tokens += m_special;
  return best;
}

} // namespace optkit::bench
