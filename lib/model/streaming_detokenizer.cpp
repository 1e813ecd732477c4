#include "model/streaming_detokenizer.hpp"

#include <span>

namespace optkit::model {

namespace {

// U+FFFD in UTF-8: what decode() shows for bytes that do not (yet) form a character.
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool
ends_incomplete(const std::string& text) {
  return text.size() >= kReplacement.size() &&
         text.compare(text.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}

} // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : m_tokenizer(&tokenizer), m_skip_special(skip_special_tokens) {}

std::string
StreamingDetokenizer::push(std::int32_t id) {
  m_ids.push_back(id);
  const std::span<const std::int32_t> all(m_ids);
  const std::string before =
      m_tokenizer->decode(all.subspan(m_prefix_offset, m_read_offset - m_prefix_offset), m_skip_special);
  const std::string after = m_tokenizer->decode(all.subspan(m_prefix_offset), m_skip_special);
  if (after.size() <= before.size() || ends_incomplete(after) || after.compare(0, before.size(), before) != 0)
    return {}; // wait: nothing new yet, an unfinished character, or the decoder rewrote the window
  std::string text = after.substr(before.size());
  m_prefix_offset = m_read_offset;
  m_read_offset = m_ids.size();
  m_emitted += text;
  return text;
}

std::string
StreamingDetokenizer::finish() {
  const std::string all = m_tokenizer->decode(m_ids, m_skip_special);
  std::string rest = all.size() > m_emitted.size() && all.compare(0, m_emitted.size(), m_emitted) == 0
                         ? all.substr(m_emitted.size())
                         : std::string();
  m_emitted = all;
  m_prefix_offset = m_read_offset = m_ids.size();
  return rest;
}

} // namespace optkit::model
