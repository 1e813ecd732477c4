#include "runtime/logits_processor.hpp"

#include <limits>

namespace optkit::runtime {

std::span<const float>
LogitsProcessor::process(std::span<const float> row, const LogitsRules& rules) {
  if (rules.logit_bias.empty() && !rules.penalties.any() && rules.forbidden.empty())
    return row;
  m_processed.assign(row.begin(), row.end());
  for (const auto& [token, bias] : rules.logit_bias)
    m_processed[static_cast<std::size_t>(token)] += bias;
  if (rules.penalties.any())
    apply_penalties(m_processed, rules.penalties, rules.prompt, rules.output);
  for (const TokenId t : rules.forbidden)
    if (t >= 0 && static_cast<std::size_t>(t) < m_processed.size())
      m_processed[static_cast<std::size_t>(t)] = -std::numeric_limits<float>::infinity();
  return m_processed;
}

} // namespace optkit::runtime
