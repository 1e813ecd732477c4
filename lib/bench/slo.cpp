#include "bench/slo.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace optkit::bench {

namespace {

std::optional<double>
parse_number(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

} // namespace

std::string
to_string(LatencyMetric metric) {
  switch (metric) {
  case LatencyMetric::ttft:
    return "ttft";
  case LatencyMetric::tpot:
    return "tpot";
  case LatencyMetric::itl:
    return "itl";
  case LatencyMetric::e2e:
    return "e2e";
  }
  return "?";
}

bool
SloRule::passes(double value_s) const {
  if (!std::isfinite(value_s))
    return false;
  const double limit = threshold_s * (1.0 + margin);
  return strict ? value_s < limit : value_s <= limit;
}

std::string
SloRule::statistic_name() const {
  if (is_mean())
    return "mean";
  return fmt::format("p{}", percentile);
}

std::optional<double>
parse_duration_seconds(const std::string& text) {
  struct Unit {
    std::string_view suffix;
    double scale;
  };
  static constexpr Unit units[] = {{"ms", 1e-3}, {"us", 1e-6}, {"s", 1.0}};
  std::string_view view(text);
  for (const auto& unit : units) {
    if (view.size() > unit.suffix.size() && view.substr(view.size() - unit.suffix.size()) == unit.suffix) {
      const auto number = parse_number(view.substr(0, view.size() - unit.suffix.size()));
      if (!number || *number < 0)
        return std::nullopt;
      return *number * unit.scale;
    }
  }
  const auto number = parse_number(view);
  if (!number || *number < 0)
    return std::nullopt;
  return *number * 1e-3;
}

SloRule
parse_slo(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return InputError(fmt::format("SLO '{}': {} (expected METRIC:STAT<=VALUE[+N%], e.g. 'ttft:p95<=500ms' or "
                                  "'e2e:p99<2s+5%'; METRIC ttft|tpot|itl|e2e, STAT pNN or mean)",
                                  text, why));
  };
  SloRule rule;
  rule.text = text;
  const auto colon = text.find(':');
  if (colon == std::string::npos)
    throw bad("no ':' after the metric");
  const std::string metric = text.substr(0, colon);
  if (metric == "ttft")
    rule.metric = LatencyMetric::ttft;
  else if (metric == "tpot")
    rule.metric = LatencyMetric::tpot;
  else if (metric == "itl")
    rule.metric = LatencyMetric::itl;
  else if (metric == "e2e" || metric == "e2el")
    rule.metric = LatencyMetric::e2e;
  else
    throw bad("unknown metric '" + metric + "'");
  const auto op = text.find('<', colon);
  if (op == std::string::npos)
    throw bad("no '<=' or '<'");
  const std::string statistic = text.substr(colon + 1, op - colon - 1);
  if (statistic == "mean") {
    rule.percentile = -1;
  } else {
    const auto value = statistic.size() > 1 && statistic[0] == 'p' ? parse_number(statistic.substr(1)) : std::nullopt;
    if (!value || *value <= 0 || *value >= 100)
      throw bad("statistic '" + statistic + "' is not pNN (0 < NN < 100) or mean");
    rule.percentile = *value;
  }
  std::size_t value_start = op + 1;
  if (value_start < text.size() && text[value_start] == '=')
    ++value_start;
  else
    rule.strict = true;
  std::string value = text.substr(value_start);
  const auto plus = value.find('+');
  if (plus != std::string::npos) {
    std::string margin = value.substr(plus + 1);
    value = value.substr(0, plus);
    if (margin.empty() || margin.back() != '%')
      throw bad("margin '" + margin + "' is not N%");
    const auto fraction = parse_number(std::string_view(margin).substr(0, margin.size() - 1));
    if (!fraction || *fraction < 0 || *fraction > 100)
      throw bad("margin '" + margin + "' is not a percentage in 0-100");
    rule.margin = *fraction / 100.0;
  }
  const auto seconds = parse_duration_seconds(value);
  if (!seconds || *seconds <= 0)
    throw bad("threshold '" + value + "' is not a positive duration (500ms, 2s, 800us)");
  rule.threshold_s = *seconds;
  return rule;
}

std::vector<SloRule>
parse_slos(const std::vector<std::string>& texts) {
  std::vector<SloRule> rules;
  rules.reserve(texts.size());
  for (const auto& text : texts)
    rules.push_back(parse_slo(text));
  return rules;
}

} // namespace optkit::bench
