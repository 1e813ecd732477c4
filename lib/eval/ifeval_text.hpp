// The text measurements IFEval's checkers rely on, without Python: word counts as nltk's
// RegexpTokenizer(r"\w+"), sentence counts by a Punkt-style splitter, word tokens for capital-word
// counts, Python's str.isupper/islower, and a language identifier standing in for langdetect.
// Where these can differ from the Python libraries is stated beside each.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace optkit::eval {

// len(RegexpTokenizer(r"\w+").tokenize(text)): runs of Unicode word characters.
std::size_t count_words(std::string_view text);

// nltk.sent_tokenize(text) (Punkt, English): a sentence ends at '.', '?' or '!' (with any closing
// quotes or brackets) followed by whitespace, unless the period ends a known abbreviation
// (Mr., Dr., e.g., U.S., ...), a single initial, or a number and the next word starts in lower
// case. Punkt learns abbreviations from data; this list is fixed, so a rare abbreviation can split
// where Punkt does not, and an ellipsis ending a sentence before a capital splits here.
std::vector<std::string> split_sentences(std::string_view text);
std::size_t count_sentences(std::string_view text);

// nltk.word_tokenize approximated: runs of word characters, and runs of other non-space
// characters. Contractions split at the apostrophe ("DON'T" → DON ' T) where Treebank gives
// DO N'T; both count two capitalised words.
std::vector<std::string> word_tokens(std::string_view text);

// Python's str.isupper / str.islower: at least one cased character and none of the other case.
// Cased characters here: Latin, Greek, Cyrillic and Armenian letters (Python also knows others).
bool python_isupper(std::string_view text);
bool python_islower(std::string_view text);

// An ISO 639-1 code for the text's language, or "" when it cannot tell (langdetect raises then,
// and IFEval counts the instruction as followed). Scripts used by one language decide at once
// (Hangul → ko, Thai → th, ...); shared scripts are told apart by letters and function words
// (Cyrillic ru/bg/uk, Arabic ar/fa/ur, Devanagari hi/mr/ne, Latin by function-word profiles of
// en de fr es it pt nl sv fi sw vi tr pl id). langdetect's character n-gram model covers 55
// languages and is itself randomised; on short or mixed texts the two can disagree.
std::string detect_language(std::string_view text);

} // namespace optkit::eval
