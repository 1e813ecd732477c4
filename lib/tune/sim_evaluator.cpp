#include "tune/sim_evaluator.hpp"

#include "bench/arrivals.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace optkit::tune {

const std::vector<std::string>&
sim_knobs() {
  static const std::vector<std::string> knobs{"batching",    "max_num_seqs",       "max_num_batched_tokens",
                                              "max_wait_ms", "speculative_tokens", "speculation",
                                              "draft_width", "concurrency"};
  return knobs;
}

namespace {

double
number(const nlohmann::json& config, const char* knob, double fallback) {
  return config.contains(knob) ? config.at(knob).get<double>() : fallback;
}

sim::SimKnobs
knobs_of(const nlohmann::json& config) {
  sim::SimKnobs k;
  if (config.contains("batching"))
    k.batching = sim::parse_batching(config.at("batching").get<std::string>());
  k.max_num_seqs = static_cast<int>(number(config, "max_num_seqs", k.max_num_seqs));
  k.max_num_batched_tokens = static_cast<std::int64_t>(
      number(config, "max_num_batched_tokens", static_cast<double>(k.max_num_batched_tokens)));
  k.max_wait_s = number(config, "max_wait_ms", 0) / 1e3;
  k.speculative_tokens = static_cast<int>(number(config, "speculative_tokens", 0));
  if (config.contains("speculation") && value_text(config.at("speculation")) == "off")
    k.speculative_tokens = 0; // SLO-Tuner's on/off toggle
  k.draft_width = static_cast<int>(number(config, "draft_width", 1));
  return k;
}

// bench's certification against the simulator: requests with the setup's lengths, arrivals as
// bench draws them, every time virtual.
class SimTrialRunner final : public bench::TrialRunner {
public:
  SimTrialRunner(const sim::SimSetup& setup, sim::SimKnobs knobs, std::uint64_t seed)
      : m_setup(setup), m_knobs(knobs), m_seed(seed) {}

  bench::TrialRecording closed_loop(std::size_t count, int concurrency) override {
    const auto jobs = lengths(count, m_seed);
    return record(sim::run_closed_loop(m_setup.timing, m_knobs, jobs, concurrency, options(m_seed)));
  }
  bench::TrialRecording open_loop(double rate, std::size_t count, std::uint64_t seed) override {
    auto jobs = lengths(count, seed ^ m_seed);
    const auto offsets = bench::arrival_offsets({bench::ArrivalProcess::poisson, rate, 1, seed}, count);
    for (std::size_t i = 0; i < count; ++i)
      jobs[i].arrival = offsets[i];
    return record(sim::run_open_loop(m_setup.timing, m_knobs, jobs, options(seed ^ m_seed)));
  }

private:
  static sim::SimOptions options(std::uint64_t seed) {
    sim::SimOptions o;
    o.seed = seed;
    o.record_token_times = true;
    return o;
  }
  std::vector<sim::SimJob> lengths(std::size_t count, std::uint64_t seed) const {
    sim::SegmentSpec spec = m_setup.segment;
    spec.workload.arrivals = sim::ArrivalKind::closed_loop;
    spec.min_completions = count;
    auto jobs = sim::segment_jobs(spec, seed);
    jobs.resize(count);
    return jobs;
  }
  static bench::TrialRecording record(const std::vector<sim::SimRequest>& served) {
    bench::TrialRecording out;
    std::vector<const sim::SimRequest*> order;
    for (const auto& r : served)
      order.push_back(&r);
    std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->arrival < b->arrival; });
    for (const auto* r : order) {
      bench::RequestRecord rec;
      rec.index = out.requests.size();
      rec.intended = r->arrival;
      rec.sent = r->arrival;
      rec.first_token = r->first_token;
      rec.end = r->end;
      rec.chunk_times = r->token_times;
      rec.input_tokens = r->prompt_tokens;
      rec.output_tokens = r->output_tokens;
      rec.usage_reported = true;
      rec.server_queue_s = r->start - r->arrival;
      rec.status = 200;
      out.duration_s = std::max(out.duration_s, r->end);
      out.requests.push_back(std::move(rec));
    }
    return out;
  }

  const sim::SimSetup& m_setup;
  sim::SimKnobs m_knobs;
  std::uint64_t m_seed;
};

class SimEvaluator final : public TrialEvaluator {
public:
  explicit SimEvaluator(SimEvaluatorOptions options) : m_options(std::move(options)) {}

  std::string invalid_reason(const nlohmann::json& config) const override {
    const auto k = knobs_of(config);
    if (k.batching == sim::Batching::continuous && k.max_num_batched_tokens < k.max_num_seqs)
      return fmt::format("max_num_batched_tokens {} < max_num_seqs {} (vLLM's rule: a step must fit one token "
                         "per sequence)",
                         k.max_num_batched_tokens, k.max_num_seqs);
    if (k.batching == sim::Batching::continuous && k.max_num_batched_tokens < 1 + k.speculative_tokens)
      return fmt::format("max_num_batched_tokens {} cannot fit one speculative round of {} tokens",
                         k.max_num_batched_tokens, 1 + k.speculative_tokens);
    return "";
  }

  std::string launch_command(const nlohmann::json& config) const override {
    std::vector<std::string> parts;
    for (const auto& [knob, value] : config.items())
      parts.push_back(knob + "=" + value_text(value));
    return "sim " + m_options.setup.name + " " + join(parts, " ");
  }

  TrialOutcome evaluate(const nlohmann::json& config, std::uint64_t seed, const TrialContext&) override {
    const auto knobs = knobs_of(config);
    if (m_options.objective.kind == ObjectiveKind::goodput) {
      sim::SegmentSpec spec = m_options.setup.segment;
      if (config.contains("concurrency")) {
        spec.workload.arrivals = sim::ArrivalKind::closed_loop;
        spec.workload.concurrency = config.at("concurrency").get<int>();
      }
      const auto m = sim::run_segment(m_options.setup.timing, knobs, spec, seed);
      auto out = goodput_outcome(m_options.objective, {m.goodput, m.p50, m.p95, m.p99, m.throughput, m.attainment},
                                 spec.slo_s, config);
      out.metrics["measured"] = m.measured;
      out.metrics["window_s"] = m.window_s;
      return out;
    }
    SimTrialRunner runner(m_options.setup, knobs, seed);
    auto certify = m_options.certify;
    certify.seed = seed;
    return certified_outcome(m_options.objective, bench::certify(runner, certify), 1); // the simulator has no TP
  }

private:
  SimEvaluatorOptions m_options;
};

} // namespace

std::unique_ptr<TrialEvaluator>
make_sim_evaluator(const SearchSpace& space, SimEvaluatorOptions options) {
  for (const auto& p : space.parameters)
    if (std::find(sim_knobs().begin(), sim_knobs().end(), p.name) == sim_knobs().end())
      throw InputError(fmt::format("{}: knob '{}' is not one the simulator has ({})", space.source, p.name,
                                   join(sim_knobs(), ", ")));
  if (options.objective.kind == ObjectiveKind::certified && options.certify.summary.slos.empty())
    throw InputError("--objective certified needs at least one --slo (e.g. 'e2e:p99<=1.2s')");
  return std::make_unique<SimEvaluator>(std::move(options));
}

} // namespace optkit::tune
