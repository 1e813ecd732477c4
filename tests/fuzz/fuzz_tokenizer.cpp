// libFuzzer target for the tokenizer. First byte even: the rest is a tokenizer.json to load (and,
// when accepted, to encode and decode a fixed text with). First byte odd: the rest is text for the
// test models' byte-level BPE tokenizer, which must decode back to exactly that text.
#include "core/error.hpp"
#include "model/tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    try {
      const auto tokenizer = optkit::model::Tokenizer::parse(rest, "fuzz/tokenizer.json");
      const auto ids = tokenizer.encode("Hello, world! 123 caf\xc3\xa9", true);
      (void)tokenizer.decode(ids);
    } catch (const optkit::InputError&) {
    }
    return 0;
  }
  static const auto tiny = optkit::model::Tokenizer::load(OPTKIT_FUZZ_TOKENIZER);
  try {
    const auto ids = tiny.encode(rest, false);
    if (tiny.decode(ids) != rest)
      std::abort();                     // byte-level BPE must round-trip every valid UTF-8 text
  } catch (const optkit::InputError&) { // invalid UTF-8 is refused, not mangled
  }
  return 0;
}
