#include "runtime/sampler.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace optkit::runtime {

namespace {

constexpr std::size_t kBlock = 16; // tokens per step of the vector scans below

// The largest logit. One running maximum would wait on each comparison before the next (a
// 128k vocabulary is then ~0.2 ms per token); four vector accumulators do not.
float
max_logit(std::span<const float> logits) {
  float top = logits[0];
  std::size_t i = 0;
#if defined(__SSE2__)
  __m128 m0 = _mm_set1_ps(top), m1 = m0, m2 = m0, m3 = m0;
  for (; i + kBlock <= logits.size(); i += kBlock) {
    m0 = _mm_max_ps(m0, _mm_loadu_ps(&logits[i]));
    m1 = _mm_max_ps(m1, _mm_loadu_ps(&logits[i + 4]));
    m2 = _mm_max_ps(m2, _mm_loadu_ps(&logits[i + 8]));
    m3 = _mm_max_ps(m3, _mm_loadu_ps(&logits[i + 12]));
  }
  float lanes[4];
  _mm_storeu_ps(lanes, _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3)));
  for (const float l : lanes)
    top = std::max(top, l);
#endif
  for (; i < logits.size(); ++i)
    top = std::max(top, logits[i]);
  return top;
}

// Whether any of the kBlock logits from `at` is at least `top + cut` (as logit − top, in float).
bool
any_at_least(const float* at, float top, float cut) {
#if defined(__SSE2__)
  const __m128 t = _mm_set1_ps(top), c = _mm_set1_ps(cut);
  __m128 hit = _mm_cmpge_ps(_mm_sub_ps(_mm_loadu_ps(at), t), c);
  for (std::size_t k = 4; k < kBlock; k += 4)
    hit = _mm_or_ps(hit, _mm_cmpge_ps(_mm_sub_ps(_mm_loadu_ps(at + k), t), c));
  return _mm_movemask_ps(hit) != 0;
#else
  for (std::size_t k = 0; k < kBlock; ++k)
    if (at[k] - top >= cut)
      return true;
  return false;
#endif
}

} // namespace

TokenId
argmax(std::span<const float> logits) {
  return static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(SamplingParams params) : m_params(params), m_rng(params.seed) {
  if (params.temperature < 0.0f)
    throw InputError("temperature must be >= 0, got " + std::to_string(params.temperature));
  if (params.top_p <= 0.0f || params.top_p > 1.0f)
    throw InputError("top_p must be in (0, 1], got " + std::to_string(params.top_p));
  if (params.top_k < 0)
    throw InputError("top_k must be >= 0, got " + std::to_string(params.top_k));
  if (params.min_p < 0.0f || params.min_p > 1.0f)
    throw InputError("min_p must be in [0, 1], got " + std::to_string(params.min_p));
}

TokenId
Sampler::next(std::span<const float> logits) {
  if (m_params.temperature == 0.0f)
    return argmax(logits);
  if (m_params.top_k == 0 && m_params.top_p >= 1.0f && m_params.min_p <= 0.0f) {
    // Plain temperature sampling needs no order: one pass for the maximum, one for the weights of
    // the tokens that can be drawn, one over those for the draw (a sort of the vocabulary per
    // token is what a serving engine cannot afford).
    const float top = max_logit(logits);
    // Below e^-80 of the top token's weight a token cannot be drawn (its share is < 1e-34 even
    // over a million-token vocabulary); skipping exp() there avoids libm's slow underflow path.
    // The float pre-test, a hair below that cut, spares the division for almost every token and
    // leaves the exact test, so the draw is the same as over the whole vocabulary.
    const double temperature = static_cast<double>(m_params.temperature);
    const float surely_below = static_cast<float>(-80.0 * 1.0001 * temperature);
    thread_local std::vector<std::pair<TokenId, double>> drawable;
    drawable.clear();
    double total = 0.0;
    const auto consider = [&](std::size_t i) {
      const float d = logits[i] - top;
      if (d < surely_below)
        return;
      const double z = static_cast<double>(d) / temperature;
      if (z < -80.0)
        return;
      const double weight = std::exp(z);
      drawable.emplace_back(static_cast<TokenId>(i), weight);
      total += weight;
    };
    // Whole blocks below the pre-test are skipped by one vector test each.
    std::size_t i = 0;
    for (; i + kBlock <= logits.size(); i += kBlock)
      if (any_at_least(&logits[i], top, surely_below))
        for (std::size_t k = 0; k < kBlock; ++k)
          consider(i + k);
    for (; i < logits.size(); ++i)
      consider(i);
    double draw = std::uniform_real_distribution<double>(0.0, total)(m_rng);
    for (const auto& [token, weight] : drawable) {
      draw -= weight;
      if (draw < 0.0)
        return token;
    }
    return argmax(logits);
  }
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const auto by_logit = [&](std::int32_t a, std::int32_t b) {
    const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::size_t keep = order.size();
  if (m_params.top_k > 0 && static_cast<std::size_t>(m_params.top_k) < keep) {
    keep = static_cast<std::size_t>(m_params.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), by_logit);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  const float top = logits[static_cast<std::size_t>(order[0])];
  std::vector<double> probs(keep);
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp(static_cast<double>(logits[static_cast<std::size_t>(order[i])] - top) /
                        static_cast<double>(m_params.temperature));
    total += probs[i];
  }
  if (m_params.min_p > 0.0f) { // probs[0] is the top token's, exp(0) = 1
    std::size_t cut = 1;
    while (cut < keep && probs[cut] >= static_cast<double>(m_params.min_p))
      ++cut;
    keep = cut;
    total = std::accumulate(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  if (m_params.top_p < 1.0f) {
    double cumulative = 0.0;
    std::size_t cut = keep;
    for (std::size_t i = 0; i < keep; ++i) {
      cumulative += probs[i] / total;
      if (cumulative >= static_cast<double>(m_params.top_p)) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = std::accumulate(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  double draw = std::uniform_real_distribution<double>(0.0, total)(m_rng);
  for (std::size_t i = 0; i < keep; ++i) {
    draw -= probs[i];
    if (draw < 0.0)
      return order[i];
  }
  return order[keep - 1];
}

void
apply_penalties(std::span<float> logits, const Penalties& penalties, std::span<const TokenId> prompt,
                std::span<const TokenId> output) {
  if (!penalties.any())
    return;
  // Per token: its count in the output, or −1 for one only in the prompt.
  std::unordered_map<TokenId, std::int64_t> seen;
  seen.reserve(prompt.size() + output.size());
  for (const auto t : output)
    ++seen[t];
  if (penalties.repetition != 1.0f)
    for (const auto t : prompt)
      seen.try_emplace(t, -1);
  for (const auto& [token, count] : seen) {
    if (token < 0 || static_cast<std::size_t>(token) >= logits.size())
      continue;
    float& logit = logits[static_cast<std::size_t>(token)];
    logit = logit > 0.0f ? logit / penalties.repetition : logit * penalties.repetition;
    if (count > 0)
      logit -= penalties.frequency * static_cast<float>(count) + penalties.presence;
  }
}

} // namespace optkit::runtime
