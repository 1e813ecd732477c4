#include "tune/trial_executor.hpp"

#include "core/interrupt.hpp"

#include <chrono>
#include <deque>
#include <future>

namespace optkit::tune {

namespace {

class LocalExecutor final : public TrialExecutor {
public:
  LocalExecutor(TrialEvaluator& evaluator, int slots, std::filesystem::path directory)
      : m_evaluator(evaluator), m_slots(std::max(1, slots)), m_directory(std::move(directory)) {}

  int slots() const override { return m_slots; }
  std::size_t in_flight() const override { return m_done.size() + m_running.size(); }

  void submit(const TrialJob& job) override {
    const auto dir = m_directory.empty() ? m_directory : m_directory / ("trial-" + std::to_string(job.number));
    if (m_slots == 1) {
      m_done.emplace_back(job, m_evaluator.evaluate(job.config, job.seed, dir));
      return;
    }
    m_running.push_back({job, std::async(std::launch::async, [this, job, dir] {
                           return m_evaluator.evaluate(job.config, job.seed, dir);
                         })});
  }

  std::optional<std::pair<TrialJob, TrialOutcome>> wait_one() override {
    if (!m_done.empty()) {
      auto out = std::move(m_done.front());
      m_done.pop_front();
      return out;
    }
    for (;;) {
      if (interrupt_requested())
        return std::nullopt;
      for (auto it = m_running.begin(); it != m_running.end(); ++it)
        if (it->second.wait_for(std::chrono::milliseconds(5)) == std::future_status::ready) {
          std::pair<TrialJob, TrialOutcome> out{it->first, it->second.get()};
          m_running.erase(it);
          return out;
        }
    }
  }

  void cancel_all() override {
    m_done.clear();
    for (auto& [job, future] : m_running)
      future.wait(); // an evaluation stops its own engine when interrupted
    m_running.clear();
  }

private:
  TrialEvaluator& m_evaluator;
  int m_slots;
  std::filesystem::path m_directory;
  std::deque<std::pair<TrialJob, TrialOutcome>> m_done;
  std::vector<std::pair<TrialJob, std::future<TrialOutcome>>> m_running;
};

} // namespace

std::unique_ptr<TrialExecutor>
make_local_executor(TrialEvaluator& evaluator, int slots, std::filesystem::path directory) {
  return std::make_unique<LocalExecutor>(evaluator, slots, std::move(directory));
}

} // namespace optkit::tune
