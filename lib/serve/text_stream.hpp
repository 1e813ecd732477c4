// A request's generated text as it streams: tokens become text through the streaming
// detokenizer, and stop strings are honoured without ever sending part of one — text that could
// still turn into a stop string is held back until it cannot (OpenAI semantics: the stop string
// itself is not part of the output).
#pragma once

#include "model/streaming_detokenizer.hpp"

#include <string>
#include <vector>

namespace optkit::serve {

class TextStream {
public:
  TextStream(const model::Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  struct Piece {
    std::string text;     // safe to send now
    bool stopped = false; // a stop string ended the text (nothing after it is sent)
  };
  Piece push(std::int32_t token);
  // What is held back, once the request finished for another reason.
  std::string finish();

  const std::string& text() const { return m_sent; } // everything sent so far

private:
  Piece release(bool at_end);

  model::StreamingDetokenizer m_detokenizer;
  std::vector<std::string> m_stops;
  std::string m_pending; // decoded, not yet sent
  std::string m_sent;
  bool m_stopped = false;
};

} // namespace optkit::serve
