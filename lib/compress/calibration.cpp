#include "compress/calibration.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>

namespace optkit::compress {

namespace {

constexpr std::int64_t kMinDocumentTokens = 8;

std::vector<std::string>
paragraphs(const std::string& text) {
  std::vector<std::string> out;
  std::string current;
  std::istringstream in(text);
  std::string line;
  auto flush = [&] {
    if (current.find_first_not_of(" \t\n") != std::string::npos)
      out.push_back(current);
    current.clear();
  };
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      flush();
      continue;
    }
    if (!current.empty())
      current += '\n';
    current += line;
  }
  flush();
  return out;
}

std::vector<std::string>
jsonl_documents(const std::string& text, const std::filesystem::path& file, const std::filesystem::path& model_dir) {
  std::vector<std::string> out;
  std::optional<model::ChatTemplate> chat;
  std::istringstream in(text);
  std::string line;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const auto where = fmt::format("{}:{}", file.string(), number);
    nlohmann::json row;
    try {
      row = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(fmt::format("{}: not JSON ({})", where, e.what()));
    }
    if (row.is_object() && row.contains("text") && row.at("text").is_string()) {
      out.push_back(row.at("text").get<std::string>());
    } else if (row.is_object() && row.contains("messages") && row.at("messages").is_array()) {
      if (!chat)
        chat = model::load_chat_template(model_dir);
      std::vector<model::ChatMessage> messages;
      for (const auto& m : row.at("messages")) {
        if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m.at("role").is_string() ||
            !m.at("content").is_string())
          throw InputError(fmt::format("{}: each message needs string 'role' and 'content'", where));
        messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
      }
      out.push_back(model::render_chat(*chat, messages, false));
    } else {
      throw InputError(fmt::format("{}: a calibration row needs a string 'text' or a 'messages' list", where));
    }
  }
  return out;
}

// Efraimidis–Spirakis weighted sampling without replacement: keep the k largest u^(1/w).
std::vector<std::int64_t>
weighted_draw(const std::vector<double>& weights, std::int64_t k, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<std::pair<double, std::int64_t>> keys;
  for (std::size_t i = 0; i < weights.size(); ++i)
    keys.emplace_back(std::log(std::max(unit(rng), 1e-300)) / std::max(weights[i], 1e-12),
                      static_cast<std::int64_t>(i));
  std::sort(keys.begin(), keys.end(), std::greater<>());
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < std::min<std::int64_t>(k, static_cast<std::int64_t>(keys.size())); ++i)
    out.push_back(keys[static_cast<std::size_t>(i)].second);
  return out;
}

std::vector<std::int64_t>
stratified_draw(const std::vector<std::vector<std::int32_t>>& docs, std::int64_t k, std::mt19937_64& rng) {
  std::map<std::int32_t, double> counts;
  double total = 0;
  for (const auto& d : docs)
    for (const auto t : d) {
      counts[t] += 1;
      total += 1;
    }
  std::vector<std::pair<double, std::int64_t>> rarity;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    double sum = 0;
    for (const auto t : docs[i])
      sum -= std::log(counts[t] / total);
    rarity.emplace_back(sum / static_cast<double>(docs[i].size()), static_cast<std::int64_t>(i));
  }
  std::sort(rarity.begin(), rarity.end());
  constexpr std::int64_t kStrata = 4;
  const auto n = static_cast<std::int64_t>(docs.size());
  std::vector<std::vector<std::int64_t>> strata(kStrata);
  for (std::int64_t i = 0; i < n; ++i)
    strata[static_cast<std::size_t>(i * kStrata / n)].push_back(rarity[static_cast<std::size_t>(i)].second);
  for (auto& s : strata)
    std::shuffle(s.begin(), s.end(), rng);
  // Round-robin over the strata so every quartile is represented in proportion.
  std::vector<std::int64_t> out;
  for (std::size_t round = 0; static_cast<std::int64_t>(out.size()) < std::min(k, n); ++round)
    for (auto& s : strata)
      if (round < s.size() && static_cast<std::int64_t>(out.size()) < std::min(k, n))
        out.push_back(s[round]);
  return out;
}

} // namespace

std::vector<std::vector<std::int32_t>>
read_calibration_documents(const std::filesystem::path& file, const std::filesystem::path& model_dir,
                           std::int64_t sequence_length) {
  if (!std::filesystem::is_regular_file(file))
    throw InputError(fmt::format("--calib {}: no such file", file.string()));
  const auto text = read_input_file(file, "calibration data");
  const bool jsonl = file.extension() == ".jsonl" || file.extension() == ".json";
  const auto texts = jsonl ? jsonl_documents(text, file, model_dir) : paragraphs(text);
  const auto tokenizer = model::Tokenizer::load_folder(model_dir);
  std::vector<std::vector<std::int32_t>> docs;
  for (const auto& t : texts) {
    auto ids = tokenizer.encode(t, true);
    if (static_cast<std::int64_t>(ids.size()) < kMinDocumentTokens)
      continue;
    if (static_cast<std::int64_t>(ids.size()) > sequence_length)
      ids.resize(static_cast<std::size_t>(sequence_length));
    docs.push_back(std::move(ids));
  }
  if (docs.empty())
    throw InputError(fmt::format("--calib {}: no document of at least {} tokens (the file is empty or has only short "
                                 "lines; paragraphs are separated by blank lines)",
                                 file.string(), kMinDocumentTokens));
  return docs;
}

CalibrationSet
sample_calibration(const std::vector<std::vector<std::int32_t>>& docs, std::int64_t samples, Sampler sampler,
                   std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto n = static_cast<std::int64_t>(docs.size());
  const auto k = std::min(samples, n);
  std::vector<std::int64_t> ids;
  switch (sampler) {
  case Sampler::uniform: {
    ids.resize(static_cast<std::size_t>(n));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    ids.resize(static_cast<std::size_t>(k));
    break;
  }
  case Sampler::length: {
    std::vector<double> weights;
    for (const auto& d : docs)
      weights.push_back(static_cast<double>(d.size()));
    ids = weighted_draw(weights, k, rng);
    break;
  }
  case Sampler::stratified:
    ids = stratified_draw(docs, k, rng);
    break;
  }
  CalibrationSet set;
  set.documents = n;
  set.document_ids = ids;
  for (const auto id : ids) {
    set.samples.push_back(docs[static_cast<std::size_t>(id)]);
    set.tokens += static_cast<std::int64_t>(set.samples.back().size());
  }
  return set;
}

} // namespace optkit::compress
