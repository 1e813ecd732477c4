#include "eval/task_scoring.hpp"

#include "core/error.hpp"
#include "eval/answer_filters.hpp"
#include "eval/ifeval_checkers.hpp"

#include <map>

namespace optkit::eval {

double
MetricScores::mean() const {
  double sum = 0;
  for (const double v : items)
    sum += v;
  return items.empty() ? 0 : sum / static_cast<double>(items.size());
}

double
MetricScores::stderr_value() const {
  return pooled_stderr ? *pooled_stderr : mean_stderr(items);
}

namespace {

void
score_exact_match(const TaskSuite& suite, const std::vector<TaskItem>& items, SuiteScores& out) {
  std::vector<AnswerFilter> filters;
  for (const auto& pipeline : suite.filters)
    filters.emplace_back(pipeline);
  const ExactMatch metric(suite.exact_match);
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto& item = out.items[i];
    item.answers = nlohmann::json::object();
    item.scores = nlohmann::json::object();
    for (const auto& f : filters) {
      const std::string answer = f.apply(item.response);
      item.answers[f.name()] = answer;
      item.scores["exact_match," + f.name()] = metric.matches(answer, items[i].target) ? 1.0 : 0.0;
    }
  }
}

void
score_ifeval_items(const std::vector<TaskItem>& items, SuiteScores& out) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto s = score_ifeval(items[i].doc, out.items[i].response);
    auto as_scores = [](const std::vector<bool>& v) {
      nlohmann::json list = nlohmann::json::array();
      for (const bool b : v)
        list.push_back(b ? 1.0 : 0.0);
      return list;
    };
    auto& scores = out.items[i].scores;
    scores = nlohmann::json::object();
    scores["prompt_level_strict_acc"] = s.prompt_strict ? 1.0 : 0.0;
    scores["inst_level_strict_acc"] = as_scores(s.strict);
    scores["prompt_level_loose_acc"] = s.prompt_loose ? 1.0 : 0.0;
    scores["inst_level_loose_acc"] = as_scores(s.loose);
  }
}

void
score_do_not_answer(const std::vector<TaskItem>& items, const std::vector<SafetyLabel>& judged, SuiteScores& out) {
  std::vector<int> histogram(6, 0);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const SafetyLabel label = judged.empty() ? classify_response_offline(out.items[i].response) : judged[i];
    ++histogram[static_cast<std::size_t>(label.action)];
    out.items[i].answers = {{"action", label.action}, {"harmful", label.harmful}};
    out.items[i].scores = {{"harmless_rate", label.harmless ? 1.0 : 0.0},
                           {"refusal_rate", label.refused() ? 1.0 : 0.0}};
  }
  out.details = {{"classifier", judged.empty() ? "offline" : std::string("judge ") + kJudgePromptVersion},
                 {"action_histogram", histogram}};
}

} // namespace

SuiteScores
score_suite(const TaskSuite& suite, const std::vector<TaskItem>& items, const std::vector<std::string>& responses,
            const std::vector<SafetyLabel>& judged) {
  if (responses.size() != items.size())
    throw InputError("score_suite: one response per item is needed");
  SuiteScores out;
  out.suite = suite.name;
  for (std::size_t i = 0; i < items.size(); ++i)
    out.items.push_back({items[i].index, responses[i], nullptr, nullptr});
  switch (suite.scorer) {
  case Scorer::exact_match:
    score_exact_match(suite, items, out);
    break;
  case Scorer::ifeval:
    score_ifeval_items(items, out);
    break;
  case Scorer::do_not_answer:
    score_do_not_answer(items, judged, out);
    break;
  case Scorer::perplexity:
    throw InputError("suite " + suite.name + ": a perplexity suite is scored by score_perplexity");
  case Scorer::multiple_choice:
    throw InputError("suite " + suite.name + ": a multiple-choice suite is scored by score_multiple_choice");
  }
  out.metrics = metrics_from_items(out.items);
  return out;
}

SuiteScores
score_perplexity(const std::string& suite, const PerplexityResult& result) {
  SuiteScores out;
  out.suite = suite;
  for (std::size_t w = 0; w < result.window_nll.size(); ++w) {
    ItemOutcome item{w, "", nlohmann::json::object(), nlohmann::json::object()};
    item.scores["nll"] = result.window_nll[w];
    if (w < result.window_kl.size())
      item.scores["kl"] = result.window_kl[w];
    out.items.push_back(std::move(item));
  }
  out.metrics = metrics_from_items(out.items);
  // Corpus figures: one value each, reported beside the per-window ones, compared through them.
  out.metrics.push_back({"perplexity", {result.perplexity}, false});
  out.metrics.push_back({"bits_per_byte", {result.bits_per_byte}, false});
  if (result.kl)
    out.metrics.push_back({"top1_agreement", {result.kl->top1_agreement}, false});
  out.details = {{"method", result.method}, {"windows", result.windows}, {"scored_tokens", result.scored_tokens}};
  return out;
}

std::vector<MetricScores>
metrics_from_items(const std::vector<ItemOutcome>& items) {
  std::vector<MetricScores> metrics;
  std::map<std::string, std::size_t> slot;
  for (const auto& item : items) {
    if (!item.scores.is_object())
      continue;
    for (const auto& [name, value] : item.scores.items()) {
      auto [it, added] = slot.emplace(name, metrics.size());
      if (added)
        metrics.push_back({name, {}, !value.is_array()});
      auto& m = metrics[it->second];
      if (value.is_array())
        for (const auto& v : value)
          m.items.push_back(v.get<double>());
      else
        m.items.push_back(value.get<double>());
    }
  }
  return metrics;
}

nlohmann::json
to_json(const ItemOutcome& item) {
  return {{"index", item.index}, {"response", item.response}, {"answers", item.answers}, {"scores", item.scores}};
}

ItemOutcome
item_from_json(const nlohmann::json& json) {
  if (!json.is_object() || !json.contains("index") || !json["index"].is_number_unsigned() || !json.contains("scores") ||
      !json["scores"].is_object())
    throw InputError("an items record needs an unsigned 'index' and a 'scores' object");
  for (const auto& [name, value] : json["scores"].items()) {
    const bool ok = value.is_number() || (value.is_array() && std::all_of(value.begin(), value.end(),
                                                                          [](const auto& v) { return v.is_number(); }));
    if (!ok)
      throw InputError("an items record's score '" + name + "' is not a number or a list of numbers");
  }
  ItemOutcome item;
  item.index = json["index"].get<std::size_t>();
  item.response = json.value("response", "");
  item.answers = json.value("answers", nlohmann::json::object());
  item.scores = json["scores"];
  return item;
}

} // namespace optkit::eval
