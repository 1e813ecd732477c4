#include "model/byte_level.hpp"

#include "model/unicode.hpp"

namespace optkit::model {

namespace {

struct ByteTable {
  char32_t to_char[256];
  std::int16_t to_byte[256 + 68]; // indexed by character; -1 where it stands for no byte
  ByteTable() {
    std::fill(std::begin(to_byte), std::end(to_byte), std::int16_t{-1});
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      to_char[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      to_byte[to_char[b]] = static_cast<std::int16_t>(b);
    }
  }
};

const ByteTable&
byte_table() {
  static const ByteTable table;
  return table;
}

} // namespace

char32_t
byte_to_char(std::uint8_t byte) {
  return byte_table().to_char[byte];
}

std::optional<std::uint8_t>
char_to_byte(char32_t code) {
  if (code >= 256 + 68 || byte_table().to_byte[code] < 0)
    return std::nullopt;
  return static_cast<std::uint8_t>(byte_table().to_byte[code]);
}

std::optional<std::string>
byte_level_bytes(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (const char32_t c : decode_utf8(token)) {
    const auto b = char_to_byte(c);
    if (!b)
      return std::nullopt;
    bytes.push_back(static_cast<char>(*b));
  }
  return bytes;
}

} // namespace optkit::model
