#include "runtime/token_logprobs.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>

namespace optkit::runtime {

PositionLogprobs
position_logprobs(std::span<const float> logits, TokenId chosen, int top_n) {
  if (logits.empty() || chosen < 0 || static_cast<std::size_t>(chosen) >= logits.size())
    throw InputError("token " + std::to_string(chosen) + " is outside the " + std::to_string(logits.size()) +
                     "-entry vocabulary");
  // log-sum-exp in double around the maximum, so no term overflows and the small ones still count.
  const float top = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float l : logits)
    sum += std::exp(static_cast<double>(l) - static_cast<double>(top));
  const double log_z = static_cast<double>(top) + std::log(sum);
  const auto logprob = [&](std::size_t i) { return static_cast<float>(static_cast<double>(logits[i]) - log_z); };

  PositionLogprobs out;
  out.chosen = {chosen, logprob(static_cast<std::size_t>(chosen))};
  const std::size_t n = std::min(static_cast<std::size_t>(std::max(top_n, 0)), logits.size());
  if (n == 0)
    return out;
  // One pass keeping the n best in order (n is small: OpenAI caps it at 20), with no per-row
  // allocation of the vocabulary — echo asks for this at every prompt position.
  const auto better = [&](std::size_t a, std::size_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<std::size_t> best;
  best.reserve(n + 1);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (best.size() == n && !better(i, best.back()))
      continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (best.size() > n)
      best.pop_back();
  }
  out.top.reserve(n);
  for (const std::size_t i : best)
    out.top.push_back({static_cast<TokenId>(i), logprob(i)});
  return out;
}

} // namespace optkit::runtime
