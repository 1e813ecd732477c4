// Streaming detokenization: the text pushed token by token, concatenated, is decode() of all the
// ids — through characters split across byte-level tokens, byte-fallback runs and a Metaspace
// decoder that strips the first space — and no push returns half a character.
#include "model/streaming_detokenizer.hpp"
#include "model/tokenizer.hpp"
#include "support/test_support.hpp"
#include "support/tokenizer_fixtures.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::model;

namespace {

// Pushes every id; returns the pieces (finish() last) after checking each is whole UTF-8.
std::vector<std::string>
stream(const Tokenizer& tokenizer, const std::vector<std::int32_t>& ids, bool skip_special = false) {
  StreamingDetokenizer detokenizer(tokenizer, skip_special);
  std::vector<std::string> pieces;
  for (const auto id : ids)
    pieces.push_back(detokenizer.push(id));
  pieces.push_back(detokenizer.finish());
  return pieces;
}

std::string
joined(const std::vector<std::string>& pieces) {
  std::string text;
  for (const auto& piece : pieces)
    text += piece;
  return text;
}

// No piece ends inside a multi-byte character (the next byte would be a continuation byte).
bool
whole_characters(const std::string& piece) {
  std::size_t i = 0;
  while (i < piece.size()) {
    const auto lead = static_cast<unsigned char>(piece[i]);
    const std::size_t length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (length == 0 || i + length > piece.size())
      return false;
    i += length;
  }
  return true;
}

} // namespace

TEST_CASE("byte-level tokens: the streamed text is the decoded text, in whole characters") {
  const auto tokenizer = Tokenizer::load_folder(test::testdata_dir() / "models" / "tiny-base");
  const std::string texts[] = {"Hello, world! It's 2026.\n\n\tDone.", "caf\u00e9 na\u00efve \u00fcber",
                               "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0", "emoji \U0001F600\U0001F680 and \U0001F9D1",
                               "<|begin_of_text|>special<|eot_id|> tokens"};
  for (const auto& text : texts) {
    CAPTURE(text);
    const auto ids = tokenizer.encode(text, false);
    const auto pieces = stream(tokenizer, ids);
    CHECK(joined(pieces) == tokenizer.decode(ids));
    CHECK(joined(pieces) == text);
    for (const auto& piece : pieces)
      CHECK(whole_characters(piece));
    // Skipping special tokens streams what decode() skipping them gives.
    CHECK(joined(stream(tokenizer, ids, true)) == tokenizer.decode(ids, true));
  }
  // An emoji is several byte-level tokens: the pushes before its last one return nothing.
  const auto emoji = tokenizer.encode("\U0001F600", false);
  REQUIRE(emoji.size() > 1);
  const auto pieces = stream(tokenizer, emoji);
  for (std::size_t i = 0; i + 2 < pieces.size(); ++i)
    CHECK(pieces[i].empty());
  CHECK(pieces[emoji.size() - 1] == "\U0001F600");
}

TEST_CASE("SentencePiece: byte-fallback runs and the stripped leading space stream as decode() gives them") {
  const auto tokenizer =
      Tokenizer::parse(test::with_byte_tokens(test::sentencepiece_json()).dump(), "sentencepiece.json");
  for (const std::string text : {"hi hi", "hi\u00e9 hi hi\u00e9\u00e9", "\u00e9hi"}) {
    CAPTURE(text);
    const auto ids = tokenizer.encode(text, true);
    const auto pieces = stream(tokenizer, ids);
    CHECK(joined(pieces) == tokenizer.decode(ids));
    for (const auto& piece : pieces)
      CHECK(whole_characters(piece));
  }
  // The first word carries no leading space; later ones do, streamed as they arrive.
  const auto pieces = stream(tokenizer, tokenizer.encode("hi hi hi", false));
  CHECK(pieces == std::vector<std::string>{"hi", " hi", " hi", ""});
}

TEST_CASE("an unfinished character at the end comes out of finish() as decode() shows it") {
  const auto tokenizer = Tokenizer::load_folder(test::testdata_dir() / "models" / "tiny-base");
  auto ids = tokenizer.encode("ok \U0001F600", false);
  REQUIRE(ids.size() >= 3);
  ids.pop_back(); // the emoji's last byte never arrives
  const auto pieces = stream(tokenizer, ids);
  CHECK(joined(pieces) == tokenizer.decode(ids));
  CHECK(pieces.back().find("\xEF\xBF\xBD") != std::string::npos); // U+FFFD, held back until finish()
}
