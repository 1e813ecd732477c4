// libFuzzer target: the bytes `eval tasks` reads from outside. The first byte picks what the rest
// is: documents as JSONL (0), CSV (1) or a JSON list (2) — the official data files users point at;
// a model's response (3), scored by every IFEval checker, the GSM8K filters and exact_match, and
// the offline Do-Not-Answer classifier; a judge's reply (4). Each yields a value or an optkit
// error, never a crash.
#include "core/error.hpp"
#include "eval/answer_filters.hpp"
#include "eval/ifeval_checkers.hpp"
#include "eval/refusal_classifier.hpp"
#include "eval/task_documents.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

const nlohmann::ordered_json&
every_instruction() {
  static const nlohmann::ordered_json doc = [] {
    nlohmann::ordered_json d = {{"key", 1}, {"prompt", "Repeat this. Then answer."}};
    d["instruction_id_list"] = optkit::eval::ifeval_instruction_ids();
    const nlohmann::json kwargs_for[] = {{{"keywords", {"alpha", "beta"}}},
                                         {{"keyword", "the"}, {"frequency", 2}, {"relation", "at least"}},
                                         {{"forbidden_words", {"no", "never"}}},
                                         {{"letter", "e"}, {"let_frequency", 3}, {"let_relation", "less than"}},
                                         {{"language", "en"}},
                                         {{"num_sentences", 2}, {"relation", "at least"}},
                                         {{"num_paragraphs", 2}},
                                         {{"num_words", 10}, {"relation", "less than"}},
                                         {{"num_paragraphs", 2}, {"nth_paragraph", 1}, {"first_word", "hello"}},
                                         {{"num_placeholders", 1}},
                                         {{"postscript_marker", "P.S."}},
                                         {{"num_bullets", 2}},
                                         nlohmann::json::object(),
                                         {{"num_highlights", 1}},
                                         {{"section_spliter", "Section"}, {"num_sections", 2}},
                                         nlohmann::json::object(),
                                         nlohmann::json::object(),
                                         nlohmann::json::object(),
                                         {{"prompt_to_repeat", "Repeat this."}},
                                         {{"end_phrase", "Bye."}},
                                         nlohmann::json::object(),
                                         {{"capital_frequency", 2}, {"capital_relation", "at least"}},
                                         nlohmann::json::object(),
                                         nlohmann::json::object(),
                                         nlohmann::json::object()};
    d["kwargs"] = nlohmann::json::array();
    for (const auto& k : kwargs_for)
      d["kwargs"].push_back(nlohmann::ordered_json(k));
    return d;
  }();
  return doc;
}

} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1)
    return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 5) {
    case 0:
      optkit::eval::parse_json_lines(text, "fuzz.jsonl");
      break;
    case 1:
      optkit::eval::parse_csv(text, "fuzz.csv");
      break;
    case 2:
      optkit::eval::parse_json_list(text, "fuzz.json");
      break;
    case 3: {
      const auto score = optkit::eval::score_ifeval(every_instruction(), text);
      if (score.strict.size() != 25 || score.loose.size() != 25)
        __builtin_trap();
      for (std::size_t i = 0; i < 25; ++i)
        if (score.strict[i] && !score.loose[i]) // the response itself is the first loose variant
          __builtin_trap();
      static const optkit::eval::AnswerFilter strict(
          {"strict-match", {{"regex", R"(#### (\-?[0-9\.\,]+))", 0, "[invalid]"}}});
      static const optkit::eval::AnswerFilter flexible(
          {"flexible-extract", {{"regex", R"((-?[$0-9.,]{2,})|(-?[0-9]+))", -1, "[invalid]"}}});
      static const optkit::eval::ExactMatch metric(
          optkit::eval::ExactMatchOptions{true, false, false, {",", R"(\$)", "(?s).*#### ", R"(\.$)"}});
      metric.matches(strict.apply(text), flexible.apply(text));
      optkit::eval::classify_response_offline(text);
      break;
    }
    default:
      optkit::eval::parse_judge_reply(text);
      break;
    }
  } catch (const optkit::Error&) {
  }
  return 0;
}
