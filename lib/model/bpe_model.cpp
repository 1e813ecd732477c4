#include "model/bpe_model.hpp"

#include "core/error.hpp"
#include "model/unicode.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <queue>

namespace optkit::model {

BpeModel::BpeModel(const nlohmann::json& model, const std::string& source) {
  const auto fail = [&](const std::string& what) { throw InputError(source + ": " + what); };
  const auto string_or_null = [&](const char* key) -> std::string {
    if (!model.contains(key) || model[key].is_null())
      return {};
    if (!model[key].is_string())
      fail(fmt::format("model.{} must be a string or null", key));
    return model[key].get<std::string>();
  };
  m_prefix = string_or_null("continuing_subword_prefix");
  m_suffix = string_or_null("end_of_word_suffix");
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
    fail("BPE dropout is not supported (it makes encoding random)");
  m_fuse_unk = model.value("fuse_unk", false);
  m_byte_fallback = model.value("byte_fallback", false);
  m_ignore_merges = model.value("ignore_merges", false);
  if (!model.contains("vocab") || !model["vocab"].is_object())
    fail("model.vocab must be an object of token -> id");
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer())
      fail(fmt::format("model.vocab id of '{}' must be an integer", token));
    m_vocabulary.add(token, id.get<std::int64_t>(), source);
  }
  const auto unk = string_or_null("unk_token");
  if (!unk.empty()) {
    if (const auto id = m_vocabulary.find(unk))
      m_unk = *id;
    else
      fail("model.unk_token '" + unk + "' is not in the vocabulary");
  }
  if (!model.contains("merges") || !model["merges"].is_array())
    fail("model.merges must be an array");
  std::int32_t rank = 0;
  for (const auto& merge : model["merges"]) {
    std::string left, right;
    if (merge.is_string()) {
      const auto text = merge.get<std::string>();
      const auto space = text.find(' ', 1);
      if (space == std::string::npos)
        fail(fmt::format("merge {} '{}' is not two tokens separated by a space", rank, text));
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      fail(fmt::format("merge {} is neither \"a b\" nor [\"a\", \"b\"]", rank));
    }
    // The merged token drops the right side's continuing-subword prefix ("a" + "##b" -> "ab").
    const auto joined =
        left + (!m_prefix.empty() && right.starts_with(m_prefix) ? right.substr(m_prefix.size()) : right);
    const auto a = m_vocabulary.find(left), b = m_vocabulary.find(right), merged = m_vocabulary.find(joined);
    if (!a || !b || !merged)
      fail(fmt::format("merge {} ('{}' + '{}') uses a token missing from the vocabulary", rank, left, right));
    m_merges.emplace(pair_key(*a, *b), Merge{rank, *merged});
    ++rank;
  }
  for (int b = 0; b < 256; ++b) {
    const auto id = m_vocabulary.find(byte_fallback_token(static_cast<std::uint8_t>(b)));
    m_byte_tokens[b] = id.value_or(-1);
  }
}

std::string
BpeModel::describe() const {
  std::string text = "BPE";
  if (m_byte_fallback)
    text += " with byte fallback";
  if (m_ignore_merges)
    text += ", ignore_merges";
  if (!m_prefix.empty())
    text += ", continuing_subword_prefix '" + m_prefix + "'";
  if (!m_suffix.empty())
    text += ", end_of_word_suffix '" + m_suffix + "'";
  return text;
}

void
BpeModel::initial_symbols(std::string_view word, std::vector<std::int32_t>& ids) const {
  // Hugging Face merge_word: one symbol per character (with the prefix on all but the first and
  // the suffix on the last); a character outside the vocabulary becomes its byte tokens (byte
  // fallback, when every byte has one) or the unknown token, consecutive ones fused if fuse_unk.
  bool pending_unk = false;
  const bool affixes = !m_prefix.empty() || !m_suffix.empty();
  std::string symbol;
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t n = std::min(utf8_sequence_length(static_cast<unsigned char>(word[i])), word.size() - i);
    std::string_view piece = word.substr(i, n);
    if (affixes) {
      symbol.assign(i > 0 ? m_prefix : std::string());
      symbol.append(piece);
      if (i + n == word.size())
        symbol.append(m_suffix);
      piece = symbol;
    }
    i += n;
    if (const auto id = m_vocabulary.find(piece)) {
      if (pending_unk)
        ids.push_back(*m_unk);
      pending_unk = false;
      ids.push_back(*id);
      continue;
    }
    if (m_byte_fallback && std::all_of(piece.begin(), piece.end(),
                                       [&](char c) { return m_byte_tokens[static_cast<unsigned char>(c)] >= 0; })) {
      if (pending_unk)
        ids.push_back(*m_unk);
      pending_unk = false;
      for (const char c : piece)
        ids.push_back(m_byte_tokens[static_cast<unsigned char>(c)]);
      continue;
    }
    if (!m_unk)
      throw InputError("text contains '" + std::string(piece) +
                       "', which this tokenizer cannot encode (no such token, no byte fallback, no unk_token)");
    if (pending_unk && !m_fuse_unk)
      ids.push_back(*m_unk);
    pending_unk = true;
  }
  if (pending_unk)
    ids.push_back(*m_unk);
}

void
BpeModel::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  if (m_ignore_merges)
    if (const auto id = m_vocabulary.find(word)) {
      out.push_back(*id);
      return;
    }
  std::vector<std::int32_t> ids;
  initial_symbols(word, ids);
  const auto n = static_cast<std::int32_t>(ids.size());
  if (n < 2) {
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  std::vector<std::int32_t> prev(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n));
  std::vector<bool> alive(static_cast<std::size_t>(n), true);
  for (std::int32_t i = 0; i < n; ++i) {
    prev[static_cast<std::size_t>(i)] = i - 1;
    next[static_cast<std::size_t>(i)] = i + 1 < n ? i + 1 : -1;
  }
  using Candidate = std::pair<std::int32_t, std::int32_t>; // (rank, position of the left symbol)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto consider = [&](std::int32_t left) {
    if (left < 0)
      return;
    const auto right = next[static_cast<std::size_t>(left)];
    if (right < 0)
      return;
    const auto it = m_merges.find(pair_key(ids[static_cast<std::size_t>(left)], ids[static_cast<std::size_t>(right)]));
    if (it != m_merges.end())
      heap.emplace(it->second.rank, left);
  };
  for (std::int32_t i = 0; i + 1 < n; ++i)
    consider(i);
  while (!heap.empty()) {
    const auto [rank, left] = heap.top();
    heap.pop();
    const auto l = static_cast<std::size_t>(left);
    if (!alive[l] || next[l] < 0)
      continue;
    const auto r = static_cast<std::size_t>(next[l]);
    const auto it = m_merges.find(pair_key(ids[l], ids[r]));
    if (it == m_merges.end() || it->second.rank != rank)
      continue; // stale: one side was merged since
    ids[l] = it->second.merged;
    alive[r] = false;
    next[l] = next[r];
    if (next[r] >= 0)
      prev[static_cast<std::size_t>(next[r])] = left;
    consider(prev[l]);
    consider(left);
  }
  for (std::int32_t i = 0; i >= 0; i = next[static_cast<std::size_t>(i)])
    out.push_back(ids[static_cast<std::size_t>(i)]);
}

} // namespace optkit::model
