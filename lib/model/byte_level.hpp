// The byte <-> printable-character table of byte-level BPE (GPT-2): every byte maps to one
// visible character so a token's text never holds control bytes or spaces.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace optkit::model {

char32_t byte_to_char(std::uint8_t byte);
std::optional<std::uint8_t> char_to_byte(char32_t code);

// The bytes a byte-level token's characters stand for; nullopt when a character is outside the
// table (the token is not byte-level text, e.g. an added token).
std::optional<std::string> byte_level_bytes(std::string_view token);

} // namespace optkit::model
