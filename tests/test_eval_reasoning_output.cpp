// Reasoning models' answers: scored after the end-of-thinking marker's last occurrence (as lm-eval
// splits them); answers that never wrote it are scored whole and counted; the marker is the one
// the chat template names.
#include "eval/reasoning_output.hpp"

#include <doctest/doctest.h>

using namespace optkit::eval;

TEST_CASE("the answer after the last marker; answers without it counted") {
  const auto split = strip_reasoning(
      {"<think>2+2 is 4</think>The answer is 4.", "still thinking about 2+2", "a</think>b</think> 5"}, "</think>");
  CHECK(split.answers == std::vector<std::string>{"The answer is 4.", "still thinking about 2+2", " 5"});
  CHECK(split.unclosed == 1);
}

TEST_CASE("the marker a chat template names") {
  CHECK(reasoning_end_marker("{% if enable_thinking %}<think>\n\n</think>\n\n{% endif %}") == "</think>");
  CHECK_FALSE(reasoning_end_marker("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"));
}
