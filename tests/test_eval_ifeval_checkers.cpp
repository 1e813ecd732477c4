// IFEval's 25 checkers: for each, at least one response that follows the instruction and one that
// does not, with the edge cases the reference rules name (trailing punctuation, empty responses,
// "less than" vs "at least", the loose variants). Cases derived by hand from instructions.py's rules
// as ../shared/reference/compress-eval-anchors.md §4.2 lists them.
#include "core/error.hpp"
#include "eval/ifeval_checkers.hpp"

#include <doctest/doctest.h>

using namespace optkit::eval;
using nlohmann::json;

namespace {

bool
follows(const std::string& id, const json& kwargs, const std::string& response) {
  return check_instruction(id, kwargs, response);
}

} // namespace

TEST_CASE("the registry has IFEval's 25 instruction ids") {
  CHECK(ifeval_instruction_ids().size() == 25);
  CHECK_THROWS_AS(follows("keywords:nonexistent", json::object(), "x"), optkit::InputError);
}

TEST_CASE("keywords") {
  CHECK(follows("keywords:existence", {{"keywords", {"apple", "Pie"}}}, "An APPLE pie."));
  CHECK_FALSE(follows("keywords:existence", {{"keywords", {"apple", "cake"}}}, "An apple pie."));
  const json freq_at_least = {{"keyword", "the"}, {"frequency", 2}, {"relation", "at least"}};
  CHECK(follows("keywords:frequency", freq_at_least, "The cat and the dog."));
  CHECK_FALSE(follows("keywords:frequency", freq_at_least, "The cat."));
  const json freq_less = {{"keyword", "cat"}, {"frequency", 2}, {"relation", "less than"}};
  CHECK(follows("keywords:frequency", freq_less, "one cat"));
  CHECK_FALSE(follows("keywords:frequency", freq_less, "cat Cat"));
  CHECK(follows("keywords:forbidden_words", {{"forbidden_words", {"bad"}}}, "It is badly done.")); // \b...\b
  CHECK_FALSE(follows("keywords:forbidden_words", {{"forbidden_words", {"bad"}}}, "It is BAD."));
  const json letters = {{"letter", "z"}, {"let_frequency", 2}, {"let_relation", "at least"}};
  CHECK(follows("keywords:letter_frequency", letters, "Zebra zone"));
  CHECK_FALSE(follows("keywords:letter_frequency", letters, "Zebra"));
  CHECK_THROWS_AS(
      follows("keywords:letter_frequency", {{"letter", "z"}, {"let_frequency", 2}, {"let_relation", "most"}}, "z"),
      optkit::InputError);
}

TEST_CASE("language:response_language") {
  CHECK(follows("language:response_language", {{"language", "en"}}, "This is a sentence written in English for you."));
  CHECK_FALSE(
      follows("language:response_language", {{"language", "en"}}, "Dies ist ein Satz, und er ist nicht englisch."));
  CHECK(follows("language:response_language", {{"language", "ko"}}, "안녕하세요. 만나서 반갑습니다."));
  CHECK(follows("language:response_language", {{"language", "hi"}}, "यह एक वाक्य है और यह हिंदी में है।"));
  CHECK(follows("language:response_language", {{"language", "ru"}}, "Это предложение на русском языке."));
  CHECK(follows("language:response_language", {{"language", "fa"}},
                "این یک جمله به زبان فارسی است که می‌گویم."));
  CHECK(follows("language:response_language", {{"language", "sw"}},
                "Hii ni sentensi kwa lugha ya Kiswahili na ni nzuri sana."));
  CHECK(follows("language:response_language", {{"language", "en"}}, "12345 !!!")); // undetectable counts as followed
}

TEST_CASE("length constraints") {
  const json two_sentences_min = {{"num_sentences", 2}, {"relation", "at least"}};
  CHECK(follows("length_constraints:number_sentences", two_sentences_min, "One here. Two there."));
  CHECK_FALSE(follows("length_constraints:number_sentences", two_sentences_min, "Mr. Smith went to Washington."));
  CHECK(follows("length_constraints:number_sentences", {{"num_sentences", 3}, {"relation", "less than"}}, "One. Two!"));
  CHECK(follows("length_constraints:number_paragraphs", {{"num_paragraphs", 2}}, "First part\n***\nSecond part"));
  CHECK(follows("length_constraints:number_paragraphs", {{"num_paragraphs", 2}}, "***\nFirst\n***\nSecond\n***"));
  CHECK_FALSE(follows("length_constraints:number_paragraphs", {{"num_paragraphs", 2}}, "First\n***\n\n***\nSecond"));
  CHECK_FALSE(follows("length_constraints:number_paragraphs", {{"num_paragraphs", 3}}, "First\n***\nSecond"));
  const json words_less = {{"num_words", 5}, {"relation", "less than"}};
  CHECK(follows("length_constraints:number_words", words_less, "one two, three-four")); // 4 \w+ runs
  CHECK_FALSE(follows("length_constraints:number_words", words_less, "it's a b c"));    // it, s, a, b, c
  const json nth = {{"num_paragraphs", 2}, {"nth_paragraph", 2}, {"first_word", "Second"}};
  CHECK(follows("length_constraints:nth_paragraph_first_word", nth, "First one.\n\n\"Second, here.\""));
  CHECK_FALSE(follows("length_constraints:nth_paragraph_first_word", nth, "First one.\n\nThird here."));
  CHECK_FALSE(follows("length_constraints:nth_paragraph_first_word", nth, "Only one paragraph."));
}

TEST_CASE("detectable content") {
  CHECK(follows("detectable_content:number_placeholders", {{"num_placeholders", 2}}, "Dear [name], at [address]."));
  CHECK_FALSE(follows("detectable_content:number_placeholders", {{"num_placeholders", 2}}, "Dear [name]"));
  CHECK(follows("detectable_content:postscript", {{"postscript_marker", "P.S."}}, "Body.\n\nP.S. Remember."));
  CHECK_FALSE(follows("detectable_content:postscript", {{"postscript_marker", "P.S."}}, "Body, PS remember."));
  CHECK(follows("detectable_content:postscript", {{"postscript_marker", "P.P.S"}}, "Body.\np.p.s more"));
}

TEST_CASE("detectable format") {
  CHECK(follows("detectable_format:number_bullet_lists", {{"num_bullets", 2}}, "* one\n* two"));
  CHECK(follows("detectable_format:number_bullet_lists", {{"num_bullets", 2}}, "- one\n* two\n**bold** line"));
  CHECK_FALSE(follows("detectable_format:number_bullet_lists", {{"num_bullets", 2}}, "* one\n* two\n* three"));
  CHECK(follows("detectable_format:constrained_response", json::object(), "Well... My answer is maybe."));
  CHECK_FALSE(follows("detectable_format:constrained_response", json::object(), "My answer is yes"));
  CHECK(follows("detectable_format:number_highlighted_sections", {{"num_highlights", 2}}, "*one* and **two**"));
  CHECK_FALSE(follows("detectable_format:number_highlighted_sections", {{"num_highlights", 2}}, "*one* and ** **"));
  const json sections = {{"section_spliter", "Section"}, {"num_sections", 2}};
  CHECK(follows("detectable_format:multiple_sections", sections, "Section 1\nfoo\nSection 2\nbar"));
  CHECK_FALSE(follows("detectable_format:multiple_sections", sections, "Section 1\nfoo"));
  CHECK(follows("detectable_format:json_format", json::object(), "```json\n{\"a\": 1}\n```"));
  CHECK_FALSE(follows("detectable_format:json_format", json::object(), "{a: 1}"));
  CHECK(follows("detectable_format:json_format", json::object(), "```json```[1, 2]```")); // prefixes chained
  CHECK(follows("detectable_format:title", json::object(), "<<My Title>>\nText"));
  CHECK_FALSE(follows("detectable_format:title", json::object(), "<< >>\nText"));
}

TEST_CASE("combination, start/end, case, punctuation") {
  CHECK(follows("combination:two_responses", json::object(), "First answer.\n******\nSecond answer."));
  CHECK_FALSE(follows("combination:two_responses", json::object(), "Same.\n******\nSame."));
  CHECK_FALSE(follows("combination:two_responses", json::object(), "A\n******\n\n******\nB"));
  CHECK(follows("combination:repeat_prompt", {{"prompt_to_repeat", "Write a poem."}}, "write a poem. Roses..."));
  CHECK_FALSE(follows("combination:repeat_prompt", {{"prompt_to_repeat", "Write a poem."}}, "Roses are red."));
  CHECK(follows("startend:end_checker", {{"end_phrase", "Any other questions?"}}, "Done. \"Any other questions?\""));
  CHECK_FALSE(follows("startend:end_checker", {{"end_phrase", "Any other questions?"}}, "Any other questions? Bye."));
  CHECK(follows("startend:quotation", json::object(), " \"quoted\" "));
  CHECK_FALSE(follows("startend:quotation", json::object(), "\""));
  const json caps = {{"capital_frequency", 2}, {"capital_relation", "at least"}};
  CHECK(follows("change_case:capital_word_frequency", caps, "THIS is VERY nice"));
  CHECK_FALSE(follows("change_case:capital_word_frequency", caps, "THIS is nice"));
  CHECK(follows("change_case:english_capital", json::object(), "THIS IS ALL IN CAPITALS AND IN ENGLISH."));
  CHECK_FALSE(follows("change_case:english_capital", json::object(), "THIS IS Not all capitals."));
  CHECK(follows("change_case:english_lowercase", json::object(), "this is all lower case and english."));
  CHECK_FALSE(follows("change_case:english_lowercase", json::object(), "This is not."));
  CHECK(follows("punctuation:no_comma", json::object(), "No commas here."));
  CHECK_FALSE(follows("punctuation:no_comma", json::object(), "One, two."));
}

TEST_CASE("strict vs loose, prompt level vs instruction level, kwargs with None dropped") {
  const nlohmann::ordered_json doc = {{"key", 1},
                                      {"prompt", "Say hi in a title."},
                                      {"instruction_id_list", {"detectable_format:title", "punctuation:no_comma"}},
                                      {"kwargs", {json::object(), {{"unused", nullptr}}}}};
  // The first line is chatter with a comma: strict fails no_comma, loose (first line dropped) passes.
  const auto s = score_ifeval(doc, "Sure, here it is:\n<<Hi>>");
  CHECK(s.strict == std::vector<bool>{true, false});
  CHECK(s.loose == std::vector<bool>{true, true});
  CHECK_FALSE(s.prompt_strict);
  CHECK(s.prompt_loose);
  const auto empty = score_ifeval(doc, "   ");
  CHECK(empty.strict == std::vector<bool>{false, false}); // an empty response follows nothing
  CHECK_FALSE(empty.prompt_loose);
}

TEST_CASE("loose variants in IFEval's order") {
  const auto v = loose_variants("*a*\nb\nc*");
  REQUIRE(v.size() == 8);
  CHECK(v[0] == "*a*\nb\nc*");
  CHECK(v[1] == "a\nb\nc");
  CHECK(v[2] == "b\nc*");
  CHECK(v[3] == "*a*\nb");
  CHECK(v[4] == "b");
  CHECK(v[5] == "b\nc");
  CHECK(v[6] == "a\nb");
  CHECK(v[7] == "b");
}

TEST_CASE("combination:repeat_prompt takes the prompt from the document when its kwarg is absent") {
  const nlohmann::ordered_json doc = {{"key", 2},
                                      {"prompt", "First repeat the request word for word without change."},
                                      {"instruction_id_list", {"combination:repeat_prompt"}},
                                      {"kwargs", {{{"prompt_to_repeat", nullptr}}}}};
  CHECK(score_ifeval(doc, "First repeat the request word for word without change. Then: ok").prompt_strict);
  CHECK_FALSE(score_ifeval(doc, "Ok.").prompt_loose);
}
