#include "compress/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

namespace optkit::compress {

namespace {

constexpr std::size_t kMinWindowTokens = 8; // a shorter window tells a model little

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
document_windows(const std::vector<std::vector<std::int32_t>>& documents, std::int64_t length,
                 std::optional<std::int32_t> lead) {
  std::vector<std::vector<std::int32_t>> windows;
  for (const auto& doc : documents) {
    const bool led = lead && !doc.empty() && doc.front() == *lead;
    for (std::size_t at = 0; at < doc.size();) {
      std::vector<std::int32_t> window;
      if (at > 0 && led)
        window.push_back(*lead);
      const auto take = std::min(doc.size() - at, static_cast<std::size_t>(length) - window.size());
      window.insert(window.end(), doc.begin() + static_cast<std::ptrdiff_t>(at),
                    doc.begin() + static_cast<std::ptrdiff_t>(at + take));
      at += take;
      if (window.size() >= kMinWindowTokens)
        windows.push_back(std::move(window));
    }
  }
  return windows;
}

std::vector<std::vector<std::int32_t>>
stream_windows(const std::vector<std::int32_t>& tokens, std::int64_t length, std::optional<std::int32_t> lead) {
  const auto size = static_cast<std::size_t>(length);
  std::vector<std::vector<std::int32_t>> windows;
  for (std::size_t at = 0; at + size <= tokens.size(); at += size)
    windows.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(at),
                         tokens.begin() + static_cast<std::ptrdiff_t>(at + size));
  if (windows.empty() && tokens.size() >= kMinWindowTokens)
    windows.push_back(tokens);
  if (lead && !tokens.empty() && tokens.front() == *lead)
    for (auto& window : windows)
      window.front() = *lead;
  return windows;
}

nlohmann::json
calibration_report(const CalibrationSet& calibration, const std::filesystem::path& file, Sampler sampler,
                   const nlohmann::json& seed) {
  return {{"file", file.string()},
          {"sha256", calibration.source_sha256},
          {"sampler", std::string(sampler_name(sampler))},
          {"seed", seed},
          {"documents_available", calibration.documents},
          {"samples", calibration.samples.size()},
          {"tokens", calibration.tokens},
          {"document_ids", calibration.document_ids}};
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
