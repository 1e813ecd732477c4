#include "eval/ifeval_checkers.hpp"

#include "core/error.hpp"
#include "core/text.hpp"
#include "eval/ifeval_text.hpp"
#include "model/onig_regex.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace optkit::eval {

namespace {

using model::OnigRegex;
using model::RegexSyntax;
using Kwargs = nlohmann::json;

constexpr const char* kWhitespace = " \t\n\r\f\v";

std::string
strip(std::string_view s, const char* chars = kWhitespace) {
  return std::string(strip_chars(s, chars));
}

std::string
lower(std::string s) {
  return ascii_case(std::move(s), false);
}

// IFEval's patterns in Python's syntax. Fixed ones are compiled once (function-local statics); those
// built from a document's kwargs, per call.
OnigRegex
compile(const std::string& pattern, bool ignore_case = false) {
  return OnigRegex(pattern, "IFEval pattern", RegexSyntax::python, ignore_case);
}

// re.split(pattern, text) without capture groups.
std::vector<std::string>
regex_split(const OnigRegex& regex, const std::string& text) {
  std::vector<std::string> parts;
  std::size_t last = 0;
  for (const auto& [start, end] : regex.find_all(text)) {
    parts.push_back(text.substr(last, start - last));
    last = end;
  }
  parts.push_back(text.substr(last));
  return parts;
}

// str.split(sep)
std::vector<std::string>
split_on(const std::string& text, const std::string& sep) {
  std::vector<std::string> parts;
  std::size_t last = 0, at;
  while ((at = text.find(sep, last)) != std::string::npos) {
    parts.push_back(text.substr(last, at - last));
    last = at + sep.size();
  }
  parts.push_back(text.substr(last));
  return parts;
}

const Kwargs&
arg(const Kwargs& kwargs, const std::string& id, const char* name) {
  if (!kwargs.is_object() || !kwargs.contains(name) || kwargs[name].is_null())
    throw InputError(fmt::format("IFEval instruction {}: kwarg '{}' is missing", id, name));
  return kwargs[name];
}

std::string
string_arg(const Kwargs& kwargs, const std::string& id, const char* name) {
  const auto& v = arg(kwargs, id, name);
  if (!v.is_string())
    throw InputError(fmt::format("IFEval instruction {}: kwarg '{}' must be a string", id, name));
  return v.get<std::string>();
}

long
int_arg(const Kwargs& kwargs, const std::string& id, const char* name) {
  const auto& v = arg(kwargs, id, name);
  if (!v.is_number())
    throw InputError(fmt::format("IFEval instruction {}: kwarg '{}' must be a number", id, name));
  return static_cast<long>(v.get<double>());
}

// "less than" → actual < n; "at least" → actual ≥ n.
bool
compare(const Kwargs& kwargs, const std::string& id, const char* relation_name, std::size_t actual, long n) {
  const std::string relation = string_arg(kwargs, id, relation_name);
  if (relation == "less than")
    return static_cast<long>(actual) < n;
  if (relation == "at least")
    return static_cast<long>(actual) >= n;
  throw InputError(
      fmt::format("IFEval instruction {}: {} '{}' is not \"less than\" or \"at least\"", id, relation_name, relation));
}

using Checker = bool (*)(const std::string& id, const Kwargs& kw, const std::string& value);

bool
keywords_existence(const std::string& id, const Kwargs& kw, const std::string& value) {
  const auto& words = arg(kw, id, "keywords");
  return std::all_of(words.begin(), words.end(),
                     [&](const auto& k) { return compile(k.template get<std::string>(), true).search(value); });
}

bool
keywords_frequency(const std::string& id, const Kwargs& kw, const std::string& value) {
  const auto n = compile(strip(string_arg(kw, id, "keyword")), true).find_all(value).size();
  return compare(kw, id, "relation", n, int_arg(kw, id, "frequency"));
}

bool
keywords_forbidden_words(const std::string& id, const Kwargs& kw, const std::string& value) {
  const auto& words = arg(kw, id, "forbidden_words");
  return std::none_of(words.begin(), words.end(), [&](const auto& w) {
    return compile(R"(\b)" + w.template get<std::string>() + R"(\b)", true).search(value);
  });
}

bool
keywords_letter_frequency(const std::string& id, const Kwargs& kw, const std::string& value) {
  const std::string letter = lower(strip(string_arg(kw, id, "letter")));
  const std::string text = lower(value);
  std::size_t n = 0;
  if (!letter.empty())
    for (std::size_t at = text.find(letter); at != std::string::npos; at = text.find(letter, at + letter.size()))
      ++n;
  return compare(kw, id, "let_relation", n, int_arg(kw, id, "let_frequency"));
}

bool
response_language(const std::string& id, const Kwargs& kw, const std::string& value) {
  const std::string detected = detect_language(value);
  return detected.empty() || detected == string_arg(kw, id, "language");
}

bool
number_sentences(const std::string& id, const Kwargs& kw, const std::string& value) {
  return compare(kw, id, "relation", count_sentences(value), int_arg(kw, id, "num_sentences"));
}

bool
number_paragraphs(const std::string& id, const Kwargs& kw, const std::string& value) {
  static const OnigRegex separator = compile(R"(\s?\*\*\*\s?)");
  const auto paragraphs = regex_split(separator, value);
  long n = static_cast<long>(paragraphs.size());
  for (std::size_t i = 0; i < paragraphs.size(); ++i) {
    if (!strip(paragraphs[i]).empty())
      continue;
    if (i == 0 || i + 1 == paragraphs.size())
      --n;
    else
      return false;
  }
  return n == int_arg(kw, id, "num_paragraphs");
}

bool
number_words(const std::string& id, const Kwargs& kw, const std::string& value) {
  return compare(kw, id, "relation", count_words(value), int_arg(kw, id, "num_words"));
}

bool
nth_paragraph_first_word(const std::string& id, const Kwargs& kw, const std::string& value) {
  const auto paragraphs = split_on(value, "\n\n");
  long n = static_cast<long>(paragraphs.size());
  for (const auto& p : paragraphs)
    if (strip(p).empty())
      --n;
  const long nth = int_arg(kw, id, "nth_paragraph");
  if (nth > n || nth < 1)
    return false;
  const std::string paragraph = strip(paragraphs[static_cast<std::size_t>(nth - 1)]);
  if (paragraph.empty())
    return false;
  std::string word = paragraph.substr(0, paragraph.find_first_of(kWhitespace));
  word.erase(0, word.find_first_not_of('\''));
  word.erase(0, word.find_first_not_of('"'));
  std::string first;
  for (const char c : word) {
    if (c == '.' || c == ',' || c == '?' || c == '!' || c == '\'' || c == '"')
      break;
    first.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return n == int_arg(kw, id, "num_paragraphs") && first == lower(string_arg(kw, id, "first_word"));
}

bool
number_placeholders(const std::string& id, const Kwargs& kw, const std::string& value) {
  static const OnigRegex placeholder = compile(R"(\[.*?\])");
  return static_cast<long>(placeholder.find_all(value).size()) >= int_arg(kw, id, "num_placeholders");
}

bool
postscript(const std::string& id, const Kwargs& kw, const std::string& value) {
  static const OnigRegex pps = compile(R"((?m)\s*p\.\s?p\.\s?s.*$)");
  static const OnigRegex ps = compile(R"((?m)\s*p\.\s?s\..*$)");
  const std::string marker = string_arg(kw, id, "postscript_marker");
  const std::string text = lower(value);
  // re.MULTILINE in each: $ at every line end.
  if (marker == "P.P.S")
    return pps.search(text);
  if (marker == "P.S.")
    return ps.search(text);
  return compile(R"((?m)\s*)" + lower(marker) + R"(.*$)").search(text);
}

bool
number_bullet_lists(const std::string& id, const Kwargs& kw, const std::string& value) {
  static const OnigRegex star = compile(R"((?m)^\s*\*[^\*].*$)");
  static const OnigRegex dash = compile(R"((?m)^\s*-.*$)");
  const auto n = star.find_all(value).size() + dash.find_all(value).size();
  return static_cast<long>(n) == int_arg(kw, id, "num_bullets");
}

bool
constrained_response(const std::string&, const Kwargs&, const std::string& value) {
  const std::string s = strip(value);
  for (const char* option : {"My answer is yes.", "My answer is no.", "My answer is maybe."})
    if (s.find(option) != std::string::npos)
      return true;
  return false;
}

bool
highlighted_sections(const std::string& id, const Kwargs& kw, const std::string& value) {
  static const OnigRegex single = compile(R"(\*[^\n\*]*\*)");
  static const OnigRegex double_ = compile(R"(\*\*[^\n\*]*\*\*)");
  long n = 0;
  for (const auto& m : single.find_all(value))
    n += strip(strip(value.substr(m.first, m.second - m.first), "*")).empty() ? 0 : 1;
  for (const auto& m : double_.find_all(value))
    n += strip(value.substr(m.first + 2, m.second - m.first - 4)).empty() ? 0 : 1;
  return n >= int_arg(kw, id, "num_highlights");
}

bool
multiple_sections(const std::string& id, const Kwargs& kw, const std::string& value) {
  const auto splitter = compile(R"(\s?)" + string_arg(kw, id, "section_spliter") + R"(\s?\d+\s?)");
  return static_cast<long>(splitter.find_all(value).size()) >= int_arg(kw, id, "num_sections");
}

bool
json_format(const std::string&, const Kwargs&, const std::string& value) {
  std::string v = strip(value);
  // str.removeprefix four times in a row, as IFEval chains them.
  for (const std::string prefix : {"```json", "```Json", "```JSON", "```"})
    if (v.rfind(prefix, 0) == 0)
      v.erase(0, prefix.size());
  if (v.size() >= 3 && v.compare(v.size() - 3, 3, "```") == 0)
    v.erase(v.size() - 3);
  return nlohmann::json::accept(strip(v));
}

bool
title(const std::string&, const Kwargs&, const std::string& value) {
  static const OnigRegex titled = compile(R"(<<[^\n]+>>)");
  for (const auto& m : titled.find_all(value)) {
    std::string t = value.substr(m.first, m.second - m.first);
    t.erase(0, t.find_first_not_of('<'));
    t.erase(t.find_last_not_of('>') + 1);
    if (!strip(t).empty())
      return true;
  }
  return false;
}

bool
two_responses(const std::string&, const Kwargs&, const std::string& value) {
  const auto responses = split_on(value, "******");
  std::vector<std::string> valid;
  for (std::size_t i = 0; i < responses.size(); ++i) {
    if (strip(responses[i]).empty()) {
      if (i != 0 && i + 1 != responses.size())
        return false;
    } else {
      valid.push_back(responses[i]);
    }
  }
  return valid.size() == 2 && strip(valid[0]) != strip(valid[1]);
}

bool
repeat_prompt(const std::string& id, const Kwargs& kw, const std::string& value) {
  return lower(strip(value)).rfind(lower(strip(string_arg(kw, id, "prompt_to_repeat"))), 0) == 0;
}

bool
end_checker(const std::string& id, const Kwargs& kw, const std::string& value) {
  const std::string text = lower(strip(strip(value), "\""));
  const std::string end = lower(strip(string_arg(kw, id, "end_phrase")));
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

bool
quotation(const std::string&, const Kwargs&, const std::string& value) {
  const std::string s = strip(value);
  return s.size() > 1 && s.front() == '"' && s.back() == '"';
}

bool
capital_word_frequency(const std::string& id, const Kwargs& kw, const std::string& value) {
  const auto tokens = word_tokens(value);
  const auto n = static_cast<std::size_t>(
      std::count_if(tokens.begin(), tokens.end(), [](const std::string& t) { return python_isupper(t); }));
  return compare(kw, id, "capital_relation", n, int_arg(kw, id, "capital_frequency"));
}

// langdetect raising (no letters) counts as English here, as IFEval's except-branch returns True.
bool
english(const std::string& value) {
  const std::string lang = detect_language(value);
  return lang.empty() || lang == "en";
}

bool
english_capital(const std::string&, const Kwargs&, const std::string& value) {
  return python_isupper(value) && english(value);
}

bool
english_lowercase(const std::string&, const Kwargs&, const std::string& value) {
  return python_islower(value) && english(value);
}

bool
no_comma(const std::string&, const Kwargs&, const std::string& value) {
  return value.find(',') == std::string::npos;
}

// IFEval's registry, in its order.
const std::vector<std::pair<std::string, Checker>>&
registry() {
  static const std::vector<std::pair<std::string, Checker>> checkers = {
      {"keywords:existence", keywords_existence},
      {"keywords:frequency", keywords_frequency},
      {"keywords:forbidden_words", keywords_forbidden_words},
      {"keywords:letter_frequency", keywords_letter_frequency},
      {"language:response_language", response_language},
      {"length_constraints:number_sentences", number_sentences},
      {"length_constraints:number_paragraphs", number_paragraphs},
      {"length_constraints:number_words", number_words},
      {"length_constraints:nth_paragraph_first_word", nth_paragraph_first_word},
      {"detectable_content:number_placeholders", number_placeholders},
      {"detectable_content:postscript", postscript},
      {"detectable_format:number_bullet_lists", number_bullet_lists},
      {"detectable_format:constrained_response", constrained_response},
      {"detectable_format:number_highlighted_sections", highlighted_sections},
      {"detectable_format:multiple_sections", multiple_sections},
      {"detectable_format:json_format", json_format},
      {"detectable_format:title", title},
      {"combination:two_responses", two_responses},
      {"combination:repeat_prompt", repeat_prompt},
      {"startend:end_checker", end_checker},
      {"startend:quotation", quotation},
      {"change_case:capital_word_frequency", capital_word_frequency},
      {"change_case:english_capital", english_capital},
      {"change_case:english_lowercase", english_lowercase},
      {"punctuation:no_comma", no_comma}};
  return checkers;
}

const Checker&
find_checker(const std::string& id) {
  for (const auto& [name, checker] : registry())
    if (name == id)
      return checker;
  throw InputError("IFEval: unknown instruction id '" + id + "' (this build knows the 25 of IFEval's registry)");
}

} // namespace

const std::vector<std::string>&
ifeval_instruction_ids() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> out;
    for (const auto& entry : registry())
      out.push_back(entry.first);
    return out;
  }();
  return ids;
}

bool
check_instruction(const std::string& id, const nlohmann::json& kwargs, const std::string& response) {
  return find_checker(id)(id, kwargs, response);
}

std::vector<std::string>
loose_variants(const std::string& response) {
  const auto lines = split_on(response, "\n");
  auto join = [&](std::size_t from, std::size_t to) {
    std::string out;
    for (std::size_t i = from; i < to; ++i)
      out += (i == from ? "" : "\n") + lines[i];
    return strip(out);
  };
  const std::size_t n = lines.size();
  const std::string remove_first = join(1, n);
  const std::string remove_last = join(0, n - 1);
  const std::string remove_both = n >= 2 ? join(1, n - 1) : std::string();
  auto no_stars = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), '*'), s.end());
    return s;
  };
  return {response,    no_stars(response),     remove_first,          remove_last,
          remove_both, no_stars(remove_first), no_stars(remove_last), no_stars(remove_both)};
}

IfevalScore
score_ifeval(const nlohmann::ordered_json& doc, const std::string& response) {
  if (!doc.contains("instruction_id_list") || !doc["instruction_id_list"].is_array())
    throw InputError("IFEval document has no instruction_id_list");
  const auto& ids = doc["instruction_id_list"];
  const nlohmann::ordered_json no_kwargs = nlohmann::ordered_json::array();
  const auto& all_kwargs = doc.contains("kwargs") ? doc["kwargs"] : no_kwargs;
  const auto variants = loose_variants(response);
  IfevalScore score;
  score.prompt_strict = score.prompt_loose = true;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string id = ids[i].get<std::string>();
    nlohmann::json kwargs = nlohmann::json::object();
    if (i < all_kwargs.size() && all_kwargs[i].is_object())
      for (const auto& [k, v] : all_kwargs[i].items())
        if (!v.is_null())
          kwargs[k] = v;
    if (id == "combination:repeat_prompt" && !kwargs.contains("prompt_to_repeat") && doc.contains("prompt"))
      kwargs["prompt_to_repeat"] = doc["prompt"];
    const bool strict = !strip(response).empty() && check_instruction(id, kwargs, response);
    bool loose = false;
    for (const auto& v : variants)
      if (!strip(v).empty() && check_instruction(id, kwargs, v)) {
        loose = true;
        break;
      }
    score.strict.push_back(strict);
    score.loose.push_back(loose);
    score.prompt_strict = score.prompt_strict && strict;
    score.prompt_loose = score.prompt_loose && loose;
  }
  return score;
}

} // namespace optkit::eval
