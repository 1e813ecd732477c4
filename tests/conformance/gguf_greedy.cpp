// Test helper: what optkit's runtime makes of a model (a GGUF file here), for node-llama-cpp to
// check against (tests/conformance/gguf_llama_cpp.mjs). For each prompt (one JSON string per line
// of PROMPTS) it prints one JSON line: the prompt's token ids as optkit encodes them, each prompt
// token's log-probability given the ones before it, then N tokens chosen greedily with each one's
// log-probability and the margin between the two most likely (a near-tie may fall either way in
// another implementation).
//   gguf_greedy MODEL PROMPTS N
#include "model/tokenizer.hpp"
#include "runtime/transformer.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>

namespace {

struct Choice {
  std::int32_t token = 0;
  double logprob = 0, margin = 0;
};

// The most likely token of one position's logits.
Choice
greedy(std::span<const float> logits) {
  const auto best = std::max_element(logits.begin(), logits.end());
  double second = -INFINITY, sum = 0;
  for (auto it = logits.begin(); it != logits.end(); ++it) {
    if (it != best)
      second = std::max(second, double(*it));
    sum += std::exp(double(*it) - double(*best));
  }
  return {static_cast<std::int32_t>(best - logits.begin()), -std::log(sum), double(*best) - second};
}

double
log_probability(std::span<const float> logits, std::int32_t token) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float v : logits)
    sum += std::exp(double(v) - top);
  return double(logits[static_cast<std::size_t>(token)]) - top - std::log(sum);
}

} // namespace

int
main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: gguf_greedy MODEL PROMPTS N\n";
    return 2;
  }
  using namespace optkit;
  const auto tokenizer = model::Tokenizer::load_folder(argv[1]);
  runtime::CpuTransformer model(argv[1]);
  const int steps = std::stoi(argv[3]);
  std::ifstream prompts(argv[2]);
  for (std::string line; std::getline(prompts, line);) {
    if (line.empty())
      continue;
    const auto text = nlohmann::json::parse(line).get<std::string>();
    const auto ids = tokenizer.encode(text, true);
    nlohmann::json out = {{"prompt", text},
                          {"prompt_tokens", ids},
                          {"prompt_logprobs", nlohmann::json::array()},
                          {"tokens", nlohmann::json::array()},
                          {"logprobs", nlohmann::json::array()},
                          {"margins", nlohmann::json::array()}};
    const auto sequence = model.add_sequence();
    const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
    const std::vector<runtime::TokenId> prompt(ids.begin(), ids.end());
    const runtime::SequenceInput whole{sequence, prompt, true};
    const auto prompt_logits = model.forward({&whole, 1});
    for (std::size_t i = 0; i + 1 < prompt.size(); ++i)
      out["prompt_logprobs"].push_back(
          log_probability(std::span<const float>(prompt_logits).subspan(i * vocab, vocab), prompt[i + 1]));
    std::span<const float> last = std::span<const float>(prompt_logits).subspan((prompt.size() - 1) * vocab, vocab);
    std::vector<float> logits;
    std::vector<runtime::TokenId> next;
    for (int step = 0; step < steps; ++step) {
      if (step > 0) {
        const runtime::SequenceInput input{sequence, next};
        logits = model.forward({&input, 1});
        last = logits;
      }
      const auto choice = greedy(last);
      out["tokens"].push_back(choice.token);
      out["logprobs"].push_back(choice.logprob);
      out["margins"].push_back(choice.margin);
      next = {choice.token};
    }
    model.remove_sequence(sequence);
    std::cout << out.dump() << "\n";
  }
  return 0;
}
