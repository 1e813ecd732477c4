// Text as tokens arrive, for streaming responses: each push() returns only the text the new token
// completes, so the concatenation of every push() and finish() equals decode() of all the ids.
// The window method of Hugging Face's text-generation-inference and vLLM: decode the ids from a
// prefix offset twice, with and without the unread tail, and emit the difference once it no
// longer ends in an incomplete UTF-8 sequence (U+FFFD) — a token can carry part of a character,
// and a tokenizer's decoder can change text at a token boundary (Metaspace's leading space, a
// byte-fallback run), so tokens are never decoded one by one.
#pragma once

#include "model/tokenizer.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace optkit::model {

class StreamingDetokenizer {
public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Appends one id; returns the text that became final (possibly empty).
  std::string push(std::int32_t id);
  // The text still held back (an incomplete character at the end, shown as U+FFFD as decode()
  // would); call once, after the last push().
  std::string finish();

  const std::vector<std::int32_t>& ids() const { return m_ids; }

private:
  const Tokenizer* m_tokenizer;
  bool m_skip_special;
  std::vector<std::int32_t> m_ids;
  std::size_t m_prefix_offset = 0; // the window's first id
  std::size_t m_read_offset = 0;   // ids before this one have had their text emitted
  std::string m_emitted;           // decode of all ids whose text was emitted (for finish)
};

} // namespace optkit::model
