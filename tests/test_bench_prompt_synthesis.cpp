// Prompts of exact token counts, checked against the model's own tokenizer (tiny-base's
// tokenizer.json through optkit's tokenizer, which the tokenizer tests pin to Hugging Face's).
#include "bench/prompt_synthesis.hpp"
#include "bench/serving_profile.hpp"
#include "model/tokenizer.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

using namespace optkit::bench;

TEST_CASE("synthesized prompts have exactly the token count the server will see, BOS included") {
  const auto dir = optkit::test::tiny_base().string();
  const auto codec = local_codec(dir);
  const auto tokenizer = optkit::model::Tokenizer::load_folder(dir);
  const std::int64_t special = static_cast<std::int64_t>(tokenizer.encode("", true).size());
  CHECK(codec->added_special_tokens() == special);
  PromptSynthesizer prompts(*codec, default_corpus_text(), 0, 7);
  int exact = 0;
  for (std::int64_t n : {2, 3, 8, 17, 64, 100, 255, 512, 1000}) {
    CAPTURE(n);
    const auto prompt = prompts.make(n);
    const auto counted = static_cast<std::int64_t>(tokenizer.encode(prompt.text, true).size());
    CHECK(counted == prompt.tokens);
    exact += counted == n ? 1 : 0;
  }
  CHECK(exact == 9);
  // A shared prefix is the same leading text in every prompt.
  PromptSynthesizer shared(*codec, default_corpus_text(), 32, 7);
  const auto a = shared.make(100), b = shared.make(120);
  const auto ids = tokenizer.encode(a.text, false);
  REQUIRE(ids.size() > 32);
  const auto prefix = tokenizer.decode(std::vector<std::int32_t>(ids.begin(), ids.begin() + 32));
  CHECK(b.text.rfind(prefix.substr(0, prefix.size() / 2), 0) == 0);
  CHECK(a.text != b.text);
}
