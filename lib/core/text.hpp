// Small string helpers shared by every area.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optkit {

std::vector<std::string> split(std::string_view text, char separator);
std::string join(const std::vector<std::string>& parts, std::string_view separator);
std::string_view trim(std::string_view text);
// Python's str.strip(chars): `text` without leading and trailing characters from `chars`
// (default: Python's ASCII whitespace).
std::string_view strip_chars(std::string_view text, std::string_view chars = " \t\n\r\f\v");
// Whether `text` is 1 to 9 ASCII digits: a non-negative int as Python's str.isdigit() +
// int() would read it (lm-eval's rule for templates that render an index).
bool is_index_text(std::string_view text);
// ASCII letters upper- or lower-cased; every other byte kept.
std::string ascii_case(std::string text, bool upper);

// Edit distance counting insertions, deletions, substitutions and swaps of two adjacent
// characters as one edit each (optimal string alignment), the usual shape of a typo.
std::size_t edit_distance(std::string_view a, std::string_view b);

// A candidate that extends `word` at a separator ("h100" → "h100_sxm"); else the candidate closest
// to `word` by edit distance, when it is close enough to be a plausible typo (at most a third of
// the word's length, and at least 1 edit allowed); nullopt otherwise.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);

// "1.5 s", "2 min 03 s", "1 h 02 min": durations for people.
std::string format_duration(double seconds);
// "512 B", "1.5 KiB", "2.0 GiB".
std::string format_bytes(std::uint64_t bytes);

// "SIGSEGV" for 11; "signal 99" for numbers without a name.
std::string signal_name(int signal);

// Quotes a field for CSV (RFC 4180) when it holds a comma, quote or line break.
std::string csv_field(std::string_view value);

// A word as sh reads it back unchanged: as is when it has no character the shell treats
// specially, else single-quoted.
std::string shell_quote(const std::string& word);

} // namespace optkit
