#include "eval/choice_scoring.hpp"

#include "core/error.hpp"
#include "eval/paired_statistics.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace optkit::eval {

namespace {

std::size_t
argmax(const std::vector<double>& values) {
  return static_cast<std::size_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

// lm-eval's process_results_mc2: the choices before the first false label are the true ones;
// their share of the probability mass exp(ll), computed relative to the largest ll.
double
mc2_mass(const std::vector<double>& lls, const std::vector<int>& labels) {
  const auto split = static_cast<std::size_t>(std::find(labels.begin(), labels.end(), 0) - labels.begin());
  const double top = *std::max_element(lls.begin(), lls.end());
  double all = 0, truthful = 0;
  for (std::size_t k = 0; k < lls.size(); ++k) {
    const double p = std::exp(lls[k] - top);
    all += p;
    truthful += k < split ? p : 0;
  }
  return truthful / all;
}

double
score(const std::string& metric, const ChoiceItem& item, const std::vector<double>& lls) {
  if (metric == "mc2")
    return mc2_mass(lls, item.mc2_labels);
  std::vector<double> scaled = lls;
  for (std::size_t k = 0; k < lls.size(); ++k) {
    if (metric == "acc_norm")
      scaled[k] /= static_cast<double>(std::max<std::size_t>(1, code_points(item.choices[k])));
    else if (metric == "acc_bytes")
      scaled[k] /= static_cast<double>(std::max<std::size_t>(1, item.choices[k].size()));
  }
  return argmax(scaled) == item.gold ? 1.0 : 0.0;
}

std::string
reported_name(const std::string& metric) {
  return metric == "mc2" ? "acc" : metric; // lm-eval's truthfulqa_mc2 reports its mass as acc
}

// Which names an item's scores are also filed under: its breakdown value and that value's groups.
std::vector<std::string>
breakdown_keys(const TaskSuite& suite, const ChoiceItem& item) {
  std::vector<std::string> keys;
  if (suite.choice.breakdown.empty())
    return keys;
  for (const auto& g : suite.choice.groups)
    if (std::find(g.members.begin(), g.members.end(), item.breakdown) != g.members.end())
      keys.push_back(g.name);
  keys.push_back(item.breakdown);
  return keys;
}

// Overall first, then the groups in the suite's order, then the values in name order.
std::vector<MetricScores>
ordered_metrics(const TaskSuite& suite, const std::vector<ItemOutcome>& items) {
  auto metrics = metrics_from_items(items);
  std::map<std::string, std::size_t> rank;
  std::size_t next = 0;
  for (const auto& m : suite.choice.metrics) {
    rank[reported_name(m)] = next++;
    for (const auto& g : suite.choice.groups)
      rank[reported_name(m) + "," + g.name] = next++;
  }
  const auto rank_of = [&](const std::string& name) {
    const auto it = rank.find(name);
    return it != rank.end() ? it->second : next;
  };
  std::stable_sort(metrics.begin(), metrics.end(), [&](const MetricScores& a, const MetricScores& b) {
    const auto ra = rank_of(a.name), rb = rank_of(b.name);
    return ra != rb ? ra < rb : (ra == next && a.name < b.name);
  });
  return metrics;
}

const MetricScores*
find_metric(const std::vector<MetricScores>& metrics, const std::string& name) {
  for (const auto& m : metrics)
    if (m.name == name)
      return &m;
  return nullptr;
}

// lm-eval's group stderr: each group's pooled from its members' (the breakdown values in it), the
// whole's pooled from the groups' and the values in no group.
void
pool_group_stderrs(const TaskSuite& suite, std::vector<MetricScores>& metrics) {
  if (suite.choice.breakdown.empty())
    return;
  const auto pool = [&](MetricScores& target, const std::vector<const MetricScores*>& members) {
    std::vector<double> stderrs;
    std::vector<std::size_t> sizes;
    for (const auto* m : members) {
      stderrs.push_back(m->stderr_value());
      sizes.push_back(m->items.size());
    }
    if (const double se = pooled_stderr(stderrs, sizes); !std::isnan(se))
      target.pooled_stderr = se;
  };
  for (const auto& metric : suite.choice.metrics) {
    const auto name = reported_name(metric);
    std::vector<const MetricScores*> top;
    std::set<std::string> grouped;
    for (const auto& g : suite.choice.groups) {
      std::vector<const MetricScores*> members;
      for (const auto& value : g.members) {
        grouped.insert(value);
        if (const auto* m = find_metric(metrics, name + "," + value))
          members.push_back(m);
      }
      for (auto& m : metrics)
        if (m.name == name + "," + g.name) {
          pool(m, members);
          top.push_back(&m);
        }
    }
    for (const auto& m : metrics) {
      const auto value = m.name.substr(std::min(m.name.size(), name.size() + 1));
      if (m.name.starts_with(name + ",") && !grouped.contains(value) &&
          std::none_of(suite.choice.groups.begin(), suite.choice.groups.end(),
                       [&](const ChoiceGroup& g) { return g.name == value; }))
        top.push_back(&m);
    }
    for (auto& m : metrics)
      if (m.name == name)
        pool(m, top);
  }
}

} // namespace

std::size_t
code_points(const std::string& text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

SuiteScores
score_multiple_choice(const TaskSuite& suite, const std::vector<ChoiceItem>& items,
                      const std::vector<double>& loglikelihoods) {
  SuiteScores out;
  out.suite = suite.name;
  std::size_t next = 0;
  for (const auto& item : items) {
    if (next + item.requests.size() > loglikelihoods.size())
      throw InputError("score_multiple_choice: one loglikelihood per request is needed");
    const std::vector<double> lls(loglikelihoods.begin() + static_cast<std::ptrdiff_t>(next),
                                  loglikelihoods.begin() + static_cast<std::ptrdiff_t>(next + item.requests.size()));
    next += item.requests.size();
    const auto predicted = argmax(lls);
    ItemOutcome outcome{item.index,
                        item.choices[predicted],
                        {{"loglikelihoods", lls}, {"prediction", predicted}, {"gold", item.gold}},
                        nlohmann::json::object()};
    const auto keys = breakdown_keys(suite, item);
    for (const auto& metric : suite.choice.metrics) {
      const double value = score(metric, item, lls);
      outcome.scores[reported_name(metric)] = value;
      for (const auto& key : keys)
        outcome.scores[reported_name(metric) + "," + key] = value;
    }
    out.items.push_back(std::move(outcome));
  }
  out.metrics = ordered_metrics(suite, out.items);
  pool_group_stderrs(suite, out.metrics);
  return out;
}

} // namespace optkit::eval
