// Loglikelihood requests as lm-eval's local-completions builds and reads them. The _encode_pair
// cases are lm-eval's own (tests/models/test_encode_pair.py), on a toy BPE vocabulary where ": C"
// spans the join of "Answer:" and " C".
#include "eval/loglikelihood_requests.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>

using namespace optkit::eval;
using optkit::model::Tokenizer;
using json = nlohmann::json;

namespace {

Tokenizer
toy_tokenizer() {
  json vocab = json::object();
  std::int32_t next = 0;
  for (const char c : std::string("AnswerQuestionth:Ca "))
    if (!vocab.contains(std::string(1, c)))
      vocab[std::string(1, c)] = next++;
  vocab[": "] = next++;
  vocab[": C"] = next++;
  const json j = {{"model",
                   {{"type", "BPE"},
                    {"vocab", vocab},
                    {"merges", json::array({json::array({":", " "}), json::array({": ", "C"})})}}}};
  return Tokenizer::parse(j.dump(), "toy.json");
}

} // namespace

TEST_CASE("the toy vocabulary really merges across the join") {
  const auto tok = toy_tokenizer();
  CHECK(tok.encode("Answer: C", false).size() == tok.encode("Answer:", false).size());
}

TEST_CASE("a token spanning the join leaves the continuation to be encoded alone") {
  const auto tok = toy_tokenizer();
  for (const auto& [context, continuation] :
       std::vector<std::pair<std::string, std::string>>{{"Answer:", " C"}, {"Answer: ", "C"}}) {
    const auto pair = encode_pair(tok, context, continuation);
    CHECK_FALSE(pair.continuation.empty());
    CHECK(pair.continuation == tok.encode(" C", false));
    CHECK(pair.context == tok.encode("Answer:", false));
  }
}

TEST_CASE("an exact split is untouched, and a partial merge is left as it is") {
  const auto tok = toy_tokenizer();
  const auto exact = encode_pair(tok, "Question", " the");
  CHECK(exact.context == tok.encode("Question", false));
  CHECK(exact.continuation == tok.encode(" the", false));
  const auto whole = tok.encode("Answer: Cat", false);
  const auto partial = encode_pair(tok, "Answer:", " Cat");
  CHECK(partial.continuation == std::vector<std::int32_t>(whole.begin() + 7, whole.end()));
  CHECK(partial.continuation == tok.encode("at", false));
}

TEST_CASE("the request: token ids, echo, one logprob, one token, greedy, seeded; left-truncated") {
  const EncodedPair pair{{1, 2, 3, 4, 5}, {6, 7}};
  const auto r = loglikelihood_request(pair, 2048);
  CHECK(r.body == json{{"prompt", {1, 2, 3, 4, 5, 6, 7}},
                       {"max_tokens", 1},
                       {"temperature", 0},
                       {"logprobs", 1},
                       {"seed", 1234},
                       {"echo", true}});
  CHECK(r.context_tokens == 5);
  CHECK(r.prompt_tokens == 7);
  const auto cut = loglikelihood_request(pair, 5); // four tokens kept: one place is the generated token
  CHECK(cut.body["prompt"] == json{4, 5, 6, 7});
  CHECK(cut.context_tokens == 2);
}

TEST_CASE("the score sums the continuation's echoed logprobs; the generated token is not counted") {
  LoglikelihoodRequest r;
  r.context_tokens = 2;
  r.prompt_tokens = 4;
  const json logprobs = {{"token_logprobs", {nullptr, -1.0, -0.5, -0.25, -9.0}}};
  CHECK(continuation_loglikelihood(logprobs, r) == doctest::Approx(-0.75));
  // A server that does not echo returns the generated token's logprob only.
  CHECK_THROWS_AS(continuation_loglikelihood({{"token_logprobs", {-9.0}}}, r), optkit::RuntimeFailure);
  CHECK_THROWS_AS(continuation_loglikelihood(json(nullptr), r), optkit::RuntimeFailure);
  CHECK_THROWS_AS(continuation_loglikelihood({{"token_logprobs", {nullptr, -1.0, nullptr, -0.25, -9.0}}}, r),
                  optkit::RuntimeFailure);
}
