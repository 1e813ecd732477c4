#include "tune/trial_executor.hpp"

#include "core/interrupt.hpp"
#include "core/text.hpp"

#include <chrono>
#include <deque>
#include <future>

namespace optkit::tune {

namespace {

class LocalExecutor final : public TrialExecutor {
public:
  LocalExecutor(TrialEvaluator& evaluator, int slots, std::filesystem::path directory, std::vector<std::string> gpus)
      : m_evaluator(evaluator), m_slots(std::max(1, slots)), m_directory(std::move(directory)) {
    // Slot i holds the i-th share of the devices: CUDA_VISIBLE_DEVICES for its engines.
    m_slot_gpus.assign(static_cast<std::size_t>(m_slots), "");
    if (!gpus.empty()) {
      const std::size_t per = std::max<std::size_t>(1, gpus.size() / static_cast<std::size_t>(m_slots));
      for (std::size_t s = 0; s < m_slot_gpus.size(); ++s)
        m_slot_gpus[s] = join(std::vector<std::string>(gpus.begin() + static_cast<std::ptrdiff_t>(s * per),
                                                       gpus.begin() + static_cast<std::ptrdiff_t>((s + 1) * per)),
                              ",");
    }
    for (int s = 0; s < m_slots; ++s)
      m_free.push_back(s);
  }

  int slots() const override { return m_slots; }
  std::size_t in_flight() const override { return m_done.size() + m_running.size(); }

  void submit(const TrialJob& job) override {
    const int slot = m_free.front();
    m_free.pop_front();
    TrialContext context{m_directory.empty() ? m_directory : m_directory / ("trial-" + std::to_string(job.number)),
                         m_slot_gpus[static_cast<std::size_t>(slot)]};
    if (m_slots == 1) {
      m_done.emplace_back(job, m_evaluator.evaluate(job.config, job.seed, context));
      m_free.push_back(slot);
      return;
    }
    m_running.push_back({job, slot, std::async(std::launch::async, [this, job, context] {
                           return m_evaluator.evaluate(job.config, job.seed, context);
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
        if (it->future.wait_for(std::chrono::milliseconds(5)) == std::future_status::ready) {
          std::pair<TrialJob, TrialOutcome> out{it->job, it->future.get()};
          m_free.push_back(it->slot);
          m_running.erase(it);
          return out;
        }
    }
  }

  void cancel_all() override {
    m_done.clear();
    for (auto& r : m_running)
      r.future.wait(); // an evaluation stops its own engine when interrupted
    m_running.clear();
  }

private:
  struct Running {
    TrialJob job;
    int slot = 0;
    std::future<TrialOutcome> future;
  };

  TrialEvaluator& m_evaluator;
  int m_slots;
  std::filesystem::path m_directory;
  std::vector<std::string> m_slot_gpus;
  std::deque<int> m_free;
  std::deque<std::pair<TrialJob, TrialOutcome>> m_done;
  std::vector<Running> m_running;
};

} // namespace

std::unique_ptr<TrialExecutor>
make_local_executor(TrialEvaluator& evaluator, int slots, std::filesystem::path directory,
                    std::vector<std::string> gpus) {
  return std::make_unique<LocalExecutor>(evaluator, slots, std::move(directory), std::move(gpus));
}

} // namespace optkit::tune
