// Tokenizer speed: encode (and decode) a large text with each tokenizer folder named on the command
// line, and the Llama-3 pre-tokenizer split on its hand-written scanner against the same regex on
// Oniguruma, side by side in one run. Uses only the public Tokenizer API, so the same source
// builds against an older tree for a before/after comparison. Prints figures; asserts nothing.
//   perf_tokenizer TESTDATA_DIR [TOKENIZER_DIR...]
#include "model/tokenizer.hpp"
#if __has_include("model/onig_regex.hpp") // absent in trees before the general pipeline
#define OPTKIT_PERF_HAS_ONIG 1
#include "model/onig_regex.hpp"
#include "model/pre_tokenizer_split.hpp"
#endif
#include "model/unicode.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace optkit;

namespace {

double
now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string
large_text(const std::filesystem::path& testdata) {
  std::string text;
  for (const auto& entry : std::filesystem::directory_iterator(testdata / "corpora")) {
    std::ifstream in(entry.path());
    std::stringstream buffer;
    buffer << in.rdbuf();
    text += buffer.str();
  }
  std::string out;
  while (out.size() < (4u << 20))
    out += text;
  return out;
}

template <class F>
double
best_of(int rounds, F&& f) {
  double best = 1e30;
  for (int i = 0; i < rounds; ++i) {
    const double start = now();
    f();
    best = std::min(best, now() - start);
  }
  return best;
}

} // namespace

int
main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: perf_tokenizer TESTDATA_DIR [TOKENIZER_DIR...]\n");
    return 2;
  }
  const std::filesystem::path testdata = argv[1];
  const auto text = large_text(testdata);
  const double mb = static_cast<double>(text.size()) / 1e6;
  fmt::print("text: {:.1f} MB of the test corpora, best of 3 rounds\n\n", mb);
  fmt::print("{:<44} {:>10} {:>12} {:>12}\n", "tokenizer", "tokens", "encode MB/s", "Mtokens/s");
  std::vector<std::filesystem::path> dirs{testdata / "models" / "tiny-base"};
  for (int i = 2; i < argc; ++i)
    dirs.emplace_back(argv[i]);
  for (const auto& dir : dirs) {
    const auto tokenizer = model::Tokenizer::load_folder(dir);
    std::size_t tokens = 0;
    const double seconds = best_of(3, [&] { tokens = tokenizer.encode(text, false).size(); });
    auto name = dir.parent_path().filename().string() + "/" + dir.filename().string();
    if (name.size() > 44)
      name = name.substr(name.size() - 44);
    fmt::print("{:<44} {:>10} {:>12.2f} {:>12.2f}\n", name, tokens, mb / seconds,
               static_cast<double>(tokens) / seconds / 1e6);
  }

#ifdef OPTKIT_PERF_HAS_ONIG
  const auto wide = model::decode_utf8(text);
  std::size_t pieces_scanner = 0, pieces_regex = 0;
  const double scanner =
      best_of(3, [&] { pieces_scanner = model::split_text(model::SplitPattern::llama3, wide).size(); });
  const model::OnigRegex regex(model::split_pattern_regex(model::SplitPattern::llama3), "perf");
  const double onig = best_of(3, [&] { pieces_regex = regex.find_all(text).size(); });
  fmt::print("\nLlama-3 split: scanner {:.1f} MB/s ({} pieces), Oniguruma {:.1f} MB/s ({} pieces): scanner {:.1f}x\n",
             mb / scanner, pieces_scanner, mb / onig, pieces_regex, onig / scanner);
#endif
  return 0;
}
