#include "serve/logprobs_format.hpp"

#include <algorithm>

namespace optkit::serve {

namespace {

using json = nlohmann::ordered_json;

// JSON has no -inf: vLLM reports a token the model gives no chance as -9999.0.
double
finite(float logprob) {
  return std::max(static_cast<double>(logprob), -9999.0);
}

// Characters as Python counts them (code points), so offsets agree with a Python client's slicing.
std::int64_t
code_points(const std::string& s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

json
bytes_of(const std::string& s) {
  json out = json::array();
  for (const char c : s)
    out.push_back(static_cast<unsigned char>(c));
  return out;
}

} // namespace

LogprobsWriter::LogprobsWriter(const model::Tokenizer& tokenizer, Endpoint endpoint)
    : m_tokenizer(tokenizer), m_endpoint(endpoint) {}

void
LogprobsWriter::add_unscored(runtime::TokenId token) {
  m_entries.push_back({token, std::nullopt});
}

void
LogprobsWriter::add(const runtime::PositionLogprobs& entry) {
  m_entries.push_back({entry.chosen.token, entry});
}

std::string
LogprobsWriter::text(runtime::TokenId token) const {
  const runtime::TokenId ids[] = {token};
  return m_tokenizer.decode(ids, false);
}

json
LogprobsWriter::take() {
  json out;
  if (m_endpoint == Endpoint::chat) {
    json content = json::array();
    for (const Entry& e : m_entries) {
      const std::string token = text(e.token);
      json top = json::array();
      for (const auto& t : e.scored->top) {
        const std::string s = text(t.token);
        top.push_back({{"token", s}, {"logprob", finite(t.logprob)}, {"bytes", bytes_of(s)}});
      }
      content.push_back({{"token", token},
                         {"logprob", finite(e.scored->chosen.logprob)},
                         {"bytes", bytes_of(token)},
                         {"top_logprobs", top}});
    }
    out = {{"content", content}};
  } else {
    json offsets = json::array(), logprobs = json::array(), tokens = json::array(), tops = json::array();
    for (const Entry& e : m_entries) {
      const std::string token = text(e.token);
      offsets.push_back(m_offset);
      m_offset += code_points(token);
      tokens.push_back(token);
      if (!e.scored) {
        logprobs.push_back(nullptr);
        tops.push_back(nullptr);
        continue;
      }
      logprobs.push_back(finite(e.scored->chosen.logprob));
      // The n most likely and the chosen token, keyed by text as vLLM keys them.
      json top = json::object();
      for (const auto& t : e.scored->top)
        top[text(t.token)] = finite(t.logprob);
      top[token] = finite(e.scored->chosen.logprob);
      tops.push_back(top);
    }
    out = {{"text_offset", offsets}, {"token_logprobs", logprobs}, {"tokens", tokens}, {"top_logprobs", tops}};
  }
  m_entries.clear();
  return out;
}

} // namespace optkit::serve
