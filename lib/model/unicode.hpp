// The Unicode the tokenizers need: strict UTF-8 decoding, character classes (letters, numbers,
// punctuation, marks, whitespace, "other"), the four normalization forms and lowercasing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace optkit::model {

// Throws InputError naming the byte offset of the first invalid sequence.
std::u32string decode_utf8(std::string_view text);
void append_utf8(std::string& out, char32_t code);
// Bytes of the UTF-8 sequence a lead byte starts (1 for a stray continuation or invalid byte).
inline std::size_t
utf8_sequence_length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead & 0xe0) == 0xc0 ? 2 : (lead & 0xf0) == 0xe0 ? 3 : (lead & 0xf8) == 0xf0 ? 4 : 1;
}
// Bytes `code` takes in UTF-8.
inline std::size_t
utf8_length(char32_t code) {
  return code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
}
std::string encode_utf8(std::u32string_view text);
// Decodes what it can and replaces each invalid byte with U+FFFD (for decoding token bytes).
std::string repair_utf8(std::string_view bytes);

bool is_letter(char32_t code);
bool is_number(char32_t code);
// The Unicode White_Space property (what \s means to the tokenizers' regex engine).
bool is_whitespace(char32_t code);

bool is_punctuation(char32_t code);     // general category P*
bool is_mark(char32_t code);            // general category M* (Mn, Mc, Me)
bool is_nonspacing_mark(char32_t code); // general category Mn
bool is_other(char32_t code);           // general category C* (controls, format, unassigned, private use)

// Unicode Normalization Forms C, D, KC and KD.
std::u32string to_nfc(std::u32string_view text);
std::u32string to_nfd(std::u32string_view text);
std::u32string to_nfkc(std::u32string_view text);
std::u32string to_nfkd(std::u32string_view text);

// Appends the lowercase of one character (Unicode full case mapping, no context: what Rust's
// char::to_lowercase gives, e.g. U+0130 -> "i\u0307").
void append_lowercase(char32_t code, std::u32string& out);

} // namespace optkit::model
