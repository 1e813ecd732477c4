#include "eval/ifeval_text.hpp"

#include "model/unicode.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>

namespace optkit::eval {

namespace {

using model::decode_utf8;
using model::encode_utf8;

bool
is_word_char(char32_t c) {
  // Python's \w on str: letters, digits (any script), the underscore, and combining marks.
  return c == U'_' || model::is_letter(c) || model::is_number(c) || model::is_mark(c);
}

bool
is_cased_block(char32_t c) {
  return (c >= 0x41 && c <= 0x24F) || (c >= 0x370 && c <= 0x52F) || (c >= 0x531 && c <= 0x587) ||
         (c >= 0x1E00 && c <= 0x1FFF);
}

char32_t
lower_of(char32_t c) {
  std::u32string out;
  model::append_lowercase(c, out);
  return out.size() == 1 ? out[0] : c;
}

std::string
lowercase(std::string_view text) {
  std::u32string out;
  for (const char32_t c : decode_utf8(text))
    model::append_lowercase(c, out);
  return encode_utf8(out);
}

const std::set<std::string>&
abbreviations() {
  static const std::set<std::string> set = {
      "mr",  "mrs",  "ms",  "dr",  "prof", "sr",  "jr",     "st",   "vs",  "etc", "e.g",  "i.e", "inc", "ltd",
      "co",  "corp", "jan", "feb", "mar",  "apr", "jun",    "jul",  "aug", "sep", "sept", "oct", "nov", "dec",
      "no",  "fig",  "u.s", "u.k", "a.m",  "p.m", "approx", "dept", "est", "gen", "gov",  "lt",  "mt",  "rev",
      "col", "capt", "sgt", "ave", "blvd", "cf",  "al",     "ph.d", "vol", "pp",  "ed",   "eds", "univ"};
  return set;
}

bool
closing_char(char32_t c) {
  return c == U'"' || c == U'\'' || c == U')' || c == U']' || c == U'}' || c == U'\u201D' || c == U'\u2019';
}

bool
is_space(char32_t c) {
  return model::is_whitespace(c);
}

// The word that ends at `end` (exclusive), back to the previous whitespace, lower-cased, with
// leading quotes and brackets removed and the final period dropped.
std::string
word_before(const std::u32string& s, std::size_t end) {
  std::size_t start = end;
  while (start > 0 && !is_space(s[start - 1]))
    --start;
  while (start < end && (s[start] == U'"' || s[start] == U'(' || s[start] == U'[' || s[start] == U'\'' ||
                         s[start] == U'\u201C' || s[start] == U'\u2018'))
    ++start;
  std::u32string word = s.substr(start, end - start);
  std::u32string lower;
  for (const char32_t c : word)
    model::append_lowercase(c, lower);
  return encode_utf8(lower);
}

} // namespace

std::size_t
count_words(std::string_view text) {
  std::size_t words = 0;
  bool in_word = false;
  for (const char32_t c : decode_utf8(text)) {
    const bool w = is_word_char(c);
    if (w && !in_word)
      ++words;
    in_word = w;
  }
  return words;
}

std::vector<std::string>
split_sentences(std::string_view text) {
  const std::u32string s = decode_utf8(text);
  std::vector<std::string> sentences;
  std::size_t start = 0;
  auto emit = [&](std::size_t end) {
    std::size_t a = start, b = end;
    while (a < b && is_space(s[a]))
      ++a;
    while (b > a && is_space(s[b - 1]))
      --b;
    if (b > a)
      sentences.push_back(encode_utf8(s.substr(a, b - a)));
    start = end;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char32_t c = s[i];
    if (c != U'.' && c != U'?' && c != U'!')
      continue;
    std::size_t j = i + 1;
    while (j < s.size() && (s[j] == U'.' || s[j] == U'?' || s[j] == U'!'))
      ++j;
    while (j < s.size() && closing_char(s[j]))
      ++j;
    const std::size_t run_start = i;
    i = j - 1; // the whole run of terminators is decided once
    if (j < s.size() && !is_space(s[j]))
      continue; // "3.14", "e.g.x", "U.S.A": no whitespace after, no boundary
    std::size_t next = j;
    while (next < s.size() && is_space(s[next]))
      ++next;
    if (next >= s.size())
      break; // the last sentence ends with the text
    const char32_t following = s[next];
    const bool next_lower =
        lower_of(following) == following && model::is_letter(following) && is_cased_block(following);
    const bool single_period = c == U'.' && (j == run_start + 1 || !(s[run_start + 1] == U'.'));
    if (c == U'.' && single_period) {
      const std::string word = word_before(s, run_start);
      const auto letters = decode_utf8(word);
      const bool initial = letters.size() == 1 && model::is_letter(letters[0]);
      const bool number = !word.empty() && std::all_of(word.begin(), word.end(), [](char ch) {
        return (ch >= '0' && ch <= '9') || ch == ',' || ch == '.';
      });
      if (abbreviations().count(word) != 0 || initial || (number && next_lower))
        continue;
    } else if (c == U'.' && next_lower) {
      continue; // an ellipsis before a lower-case word continues the sentence
    }
    emit(j);
  }
  emit(s.size());
  return sentences;
}

std::size_t
count_sentences(std::string_view text) {
  return split_sentences(text).size();
}

std::vector<std::string>
word_tokens(std::string_view text) {
  std::vector<std::string> tokens;
  const std::u32string s = decode_utf8(text);
  std::size_t i = 0;
  while (i < s.size()) {
    if (is_space(s[i])) {
      ++i;
      continue;
    }
    const bool word = is_word_char(s[i]);
    std::size_t j = i + 1;
    while (j < s.size() && !is_space(s[j]) && is_word_char(s[j]) == word)
      ++j;
    tokens.push_back(encode_utf8(s.substr(i, j - i)));
    i = j;
  }
  return tokens;
}

bool
python_isupper(std::string_view text) {
  bool cased = false;
  for (const char32_t c : decode_utf8(text)) {
    if (!model::is_letter(c) || !is_cased_block(c))
      continue;
    if (lower_of(c) == c)
      return false; // a lower-case letter (or caseless in a cased block, rare)
    cased = true;
  }
  return cased;
}

bool
python_islower(std::string_view text) {
  bool cased = false;
  for (const char32_t c : decode_utf8(text)) {
    if (!model::is_letter(c) || !is_cased_block(c))
      continue;
    if (lower_of(c) != c)
      return false;
    cased = true;
  }
  return cased;
}

namespace {

// Latin-script languages' function words, and letters only one of them uses (tie-breakers).
const std::map<std::string, std::set<std::string>> kLatinProfiles = {
    {"en", {"the",  "and",  "of", "to", "is",  "in",   "that", "it", "you", "for",  "was",  "are",
            "with", "this", "be", "on", "not", "have", "as",   "i",  "my",  "your", "what", "a"}},
    {"de", {"der", "die", "und",  "das", "ist",  "nicht", "ich",  "zu",  "den", "mit", "sie",
            "ein", "es",  "auch", "auf", "sich", "dem",   "eine", "von", "für", "wir", "du"}},
    {"fr", {"le",   "la",   "les", "et",   "est", "des", "un",  "une", "du",   "que", "pas",
            "pour", "dans", "je",  "vous", "il",  "qui", "sur", "ce",  "nous", "au"}},
    {"es", {"el",  "la",  "de",   "que", "y",  "los", "las", "es", "en",  "un",  "una",
            "por", "con", "para", "no",  "se", "lo",  "del", "su", "muy", "como"}},
    {"it", {"il",   "di",  "che",   "e",   "la", "è",   "per", "un",     "una",   "non",
            "sono", "del", "della", "con", "mi", "gli", "ho",  "questo", "anche", "come"}},
    {"pt", {"o",  "a",  "de",   "que", "e", "do", "da", "em", "um",  "uma", "não",
            "os", "as", "para", "com", "é", "no", "na", "se", "por", "você"}},
    {"nl", {"de", "het", "een",  "en",  "van",  "is",  "dat", "niet", "ik",  "je",
            "op", "te",  "zijn", "met", "voor", "die", "er",  "maar", "ook", "wat"}},
    {"sv", {"och",  "att", "det", "är",   "en",  "som", "på",  "jag", "för", "med",
            "inte", "av",  "har", "till", "den", "om",  "ett", "vi",  "du",  "men"}},
    {"fi", {"ja",  "on",   "ei",   "se",   "että", "oli",  "mutta", "kun",  "hän",  "ovat",
            "tai", "myös", "minä", "sinä", "olen", "tämä", "joka",  "niin", "kuin", "mitä"}},
    {"sw", {"na",  "ya",  "wa",     "kwa", "ni",   "la",   "za",   "katika", "kuwa", "hii",
            "cha", "ili", "lakini", "pia", "sana", "yake", "hiyo", "wewe",   "mimi", "kama"}},
    {"vi", {"và",  "là",    "của",   "có",  "không", "một", "những", "được", "cho", "với",
            "các", "người", "trong", "này", "để",    "đã",  "khi",   "rất",  "tôi", "bạn"}},
    {"tr",
     {"ve", "bir", "bu", "da", "de", "için", "ile", "çok", "ne", "ama", "gibi", "daha", "olarak", "ben", "sen", "var",
      "değil", "mi", "her"}},
    {"pl", {"i",   "w",   "nie", "się", "na",  "z",  "jest", "to",  "że",  "do",
            "jak", "ale", "co",  "o",   "tak", "po", "od",   "dla", "być", "czy"}},
    {"id", {"dan",  "yang", "di",   "ini",  "itu",  "dengan", "untuk", "tidak", "dari",   "dalam",
            "akan", "ada",  "saya", "anda", "juga", "ke",     "pada",  "bisa",  "karena", "kami"}}};
const std::map<std::string, std::vector<std::string>> kLatinLetters = {
    {"vi", {"đ", "ư", "ơ", "ạ", "ả", "ấ", "ầ", "ẩ", "ậ", "ắ", "ặ", "ẹ", "ẻ", "ẽ", "ế", "ề", "ể", "ệ", "ỉ", "ị",
            "ọ", "ỏ", "ố", "ồ", "ổ", "ộ", "ớ", "ờ", "ở", "ợ", "ụ", "ủ", "ứ", "ừ", "ử", "ữ", "ự", "ỳ", "ỷ", "ỹ"}},
    {"tr", {"ş", "ğ", "ı"}},
    {"pl", {"ł", "ą", "ę", "ś", "ż", "ź", "ń", "ć"}},
    {"de", {"ß", "ä", "ü"}},
    {"es", {"ñ", "¿", "¡"}},
    {"pt", {"ã", "õ"}},
    {"sv", {"å"}},
    {"fr", {"ç", "è", "ê", "œ"}}};

enum Script { latin, cyrillic, arabic, devanagari, single, script_count };

// Letters (and marks) by script; the scripts that name their language (Korean, Japanese, Thai, ...)
// counted together as `single` and each on its own.
struct ScriptCounts {
  std::array<std::size_t, script_count> scripts{};
  std::map<std::string, std::size_t> single_script;
  std::size_t kana = 0, han = 0;
};

// The language a script of its own names (nullptr: none of them).
const char*
single_script_language(char32_t c) {
  struct Range {
    char32_t first, last;
    const char* language;
  };
  static const Range ranges[] = {
      {0xAC00, 0xD7AF, "ko"},    {0x1100, 0x11FF, "ko"}, {0x3130, 0x318F, "ko"}, {0x3040, 0x30FF, "ja"},
      {0x4E00, 0x9FFF, "zh-cn"}, {0xE00, 0xE7F, "th"},   {0x370, 0x3FF, "el"},   {0x590, 0x5FF, "he"},
      {0x980, 0x9FF, "bn"},      {0xA00, 0xA7F, "pa"},   {0xA80, 0xAFF, "gu"},   {0xB00, 0xB7F, "or"},
      {0xB80, 0xBFF, "ta"},      {0xC00, 0xC7F, "te"},   {0xC80, 0xCFF, "kn"},   {0xD00, 0xD7F, "ml"}};
  for (const auto& r : ranges)
    if (c >= r.first && c <= r.last)
      return r.language;
  return nullptr;
}

ScriptCounts
count_scripts(const std::u32string& s) {
  ScriptCounts counts;
  for (const char32_t c : s) {
    if (!model::is_letter(c) && !model::is_mark(c))
      continue;
    if (c < 0x250 || (c >= 0x1E00 && c <= 0x1EFF))
      ++counts.scripts[latin];
    else if (c >= 0x400 && c <= 0x52F)
      ++counts.scripts[cyrillic];
    else if ((c >= 0x600 && c <= 0x6FF) || (c >= 0x750 && c <= 0x77F) || (c >= 0xFB50 && c <= 0xFEFF))
      ++counts.scripts[arabic];
    else if (c >= 0x900 && c <= 0x97F)
      ++counts.scripts[devanagari];
    else if (const char* language = single_script_language(c)) {
      counts.kana += c >= 0x3040 && c <= 0x30FF ? 1 : 0;
      counts.han += c >= 0x4E00 && c <= 0x9FFF ? 1 : 0;
      ++counts.scripts[single];
      ++counts.single_script[language];
    }
  }
  return counts;
}

bool
contains_any(const std::string& lower, std::initializer_list<const char*> needles) {
  return std::any_of(needles.begin(), needles.end(), [&](const char* n) { return lower.find(n) != std::string::npos; });
}

// Languages sharing the Cyrillic, Arabic or Devanagari script, told apart by their letters and words.
std::string
shared_script_language(Script script, const std::string& lower) {
  switch (script) {
  case cyrillic:
    if (contains_any(lower, {"ѓ", "ќ", "ѕ", "љ", "њ", "џ"}))
      return "mk";
    if (contains_any(lower, {"і", "ї", "є", "ґ"}))
      return "uk";
    if (!contains_any(lower, {"ы", "э", "ё"}) && contains_any(lower, {"ъ"}))
      return "bg";
    return "ru";
  case arabic:
    if (contains_any(lower, {"ے", "ں", "ٹ", "ڈ", "ڑ", "ھ"}))
      return "ur";
    if (contains_any(lower, {"پ", "چ", "ژ", "گ", "ی", "ک"}))
      return "fa";
    return "ar";
  case devanagari:
    if (contains_any(lower, {"आहे", "आणि", "च्या", "नाही", "ळ"}))
      return "mr";
    if (contains_any(lower, {"छ ", "छ।", "हुन्छ", "पनि", "गर्न", "हो ।"}))
      return "ne";
    return "hi";
  default:
    return "";
  }
}

// Latin script: function-word profiles, with letters only one language uses as tie-breakers.
std::string
latin_language(const std::string& lower) {
  std::map<std::string, double> score;
  for (const auto& word : word_tokens(lower))
    for (const auto& [lang, words] : kLatinProfiles)
      if (words.count(word) != 0)
        score[lang] += 1;
  for (const auto& [lang, marks] : kLatinLetters)
    for (const auto& m : marks)
      if (lower.find(m) != std::string::npos)
        score[lang] += 2;
  if (score.empty())
    return "en"; // Latin letters with no function word: langdetect's prior favours English too
  return std::max_element(score.begin(), score.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

} // namespace

std::string
detect_language(std::string_view text) {
  const auto counts = count_scripts(decode_utf8(text));
  const auto dominant =
      static_cast<Script>(std::max_element(counts.scripts.begin(), counts.scripts.end()) - counts.scripts.begin());
  if (counts.scripts[dominant] == 0)
    return "";
  if (dominant == single) {
    if (counts.kana > 0 && counts.han > 0)
      return "ja"; // Japanese mixes kanji with kana; Chinese has no kana
    return std::max_element(counts.single_script.begin(), counts.single_script.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; })
        ->first;
  }
  const std::string lower = lowercase(text);
  if (dominant != latin)
    return shared_script_language(dominant, lower);
  return latin_language(lower);
}

} // namespace optkit::eval
