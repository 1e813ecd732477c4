// The Unicode the tokenizers need: strict UTF-8 decoding, the \p{L} / \p{N} / \s classes of the
// pre-tokenizer regexes, and NFC normalization.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace optkit::model {

// Throws InputError naming the byte offset of the first invalid sequence.
std::u32string decode_utf8(std::string_view text);
void append_utf8(std::string& out, char32_t code);
std::string encode_utf8(std::u32string_view text);
// Decodes what it can and replaces each invalid byte with U+FFFD (for decoding token bytes).
std::string repair_utf8(std::string_view bytes);

bool is_letter(char32_t code);
bool is_number(char32_t code);
// The Unicode White_Space property (what \s means to the tokenizers' regex engine).
bool is_whitespace(char32_t code);

// Canonical composition (Unicode Normalization Form C).
std::u32string to_nfc(std::u32string_view text);

} // namespace optkit::model
