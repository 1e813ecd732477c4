#include "serve/text_stream.hpp"

#include <algorithm>

namespace optkit::serve {

TextStream::TextStream(const model::Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : m_detokenizer(tokenizer, true), m_stops(std::move(stop_strings)) {
  std::erase_if(m_stops, [](const std::string& s) { return s.empty(); });
}

TextStream::Piece
TextStream::push(std::int32_t token) {
  if (m_stopped)
    return {{}, true};
  m_pending += m_detokenizer.push(token);
  return release(false);
}

std::string
TextStream::finish() {
  if (m_stopped)
    return {};
  m_pending += m_detokenizer.finish();
  return release(true).text;
}

TextStream::Piece
TextStream::release(bool at_end) {
  Piece piece;
  // A stop string may begin in text already sent only if it was held back: so searching the
  // pending text is enough.
  std::size_t first_stop = std::string::npos;
  for (const auto& stop : m_stops)
    first_stop = std::min(first_stop, m_pending.find(stop));
  if (first_stop != std::string::npos) {
    piece.text = m_pending.substr(0, first_stop);
    piece.stopped = m_stopped = true;
    m_pending.clear();
    m_sent += piece.text;
    return piece;
  }
  std::size_t hold = 0; // the longest tail of pending that is a proper prefix of a stop string
  if (!at_end)
    for (const auto& stop : m_stops)
      for (std::size_t n = std::min(stop.size() - 1, m_pending.size()); n > hold; --n)
        if (m_pending.compare(m_pending.size() - n, n, stop, 0, n) == 0) {
          hold = n;
          break;
        }
  piece.text = m_pending.substr(0, m_pending.size() - hold);
  m_pending.erase(0, m_pending.size() - hold);
  m_sent += piece.text;
  return piece;
}

} // namespace optkit::serve
