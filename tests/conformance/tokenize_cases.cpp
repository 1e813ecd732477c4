// Test helper for the tokenizer conformance test: encodes every string of a JSON array with one
// tokenizer folder (tokenizer.json + tokenizer_config.json) and prints {"plain": [[ids]], "special": [[ids]],
// "decoded": [text]} on stdout.
//   tokenize_cases TOKENIZER_DIR CASES_JSON
#include "core/error.hpp"
#include "model/tokenizer.hpp"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

int
main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: tokenize_cases TOKENIZER_DIR CASES_JSON\n";
    return 2;
  }
  try {
    const auto tokenizer = optkit::model::Tokenizer::load_folder(argv[1]);
    std::ifstream in(argv[2]);
    const auto cases = nlohmann::json::parse(in);
    nlohmann::json out = {
        {"plain", nlohmann::json::array()}, {"special", nlohmann::json::array()}, {"decoded", nlohmann::json::array()}};
    for (const auto& c : cases) {
      const auto text = c.get<std::string>();
      const auto ids = tokenizer.encode(text, false);
      out["plain"].push_back(ids);
      out["special"].push_back(tokenizer.encode(text, true));
      out["decoded"].push_back(tokenizer.decode(ids));
    }
    std::cout << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "tokenize_cases: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
