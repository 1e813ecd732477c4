#include "tune/live_evaluator.hpp"

#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/resource_paths.hpp"
#include "engines/engine_process.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace optkit::tune {

namespace {

constexpr const char* client_knob = "concurrency";

class LiveEvaluator final : public TrialEvaluator {
public:
  explicit LiveEvaluator(LiveEvaluatorOptions options) : m_options(std::move(options)) {}

  engines::EngineSettings settings_of(const nlohmann::json& config) const {
    engines::EngineSettings s;
    s.model = m_options.model;
    s.port = 8000; // replaced by a free port at launch
    s.extra_args = m_options.engine_args;
    for (const auto& [knob, value] : config.items())
      if (knob != client_knob)
        engines::apply_knob(m_options.kind, s, knob, value.get<double>());
    return s;
  }

  std::string invalid_reason(const nlohmann::json& config) const override {
    try {
      (void)engines::command_line(m_options.kind, settings_of(config));
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }

  std::string launch_command(const nlohmann::json& config) const override {
    return engines::command_line(m_options.kind, settings_of(config)).render();
  }

  TrialOutcome evaluate(const nlohmann::json& config, std::uint64_t seed, const TrialContext& context) override {
    const auto& directory = context.directory;
    TrialOutcome out;
    engines::LaunchOptions launch;
    launch.kind = m_options.kind;
    launch.settings = settings_of(config);
    launch.settings.port = 0;
    launch.executable = m_options.executable;
    if (launch.executable.empty() && launch.kind == engines::EngineKind::optkit)
      launch.executable = executable_path().string();
    launch.directory = directory;
    launch.ready_timeout_s = m_options.ready_timeout_s;
    if (!context.gpus.empty())
      launch.environment["CUDA_VISIBLE_DEVICES"] = context.gpus;
    std::filesystem::create_directories(directory);
    std::unique_ptr<engines::EngineProcess> engine;
    try {
      engine = std::make_unique<engines::EngineProcess>(launch);
    } catch (const RuntimeFailure& e) {
      const std::string why = e.what();
      out.status =
          why.find("did not answer") != std::string::npos ? TrialStatus::timed_out : TrialStatus::launch_failed;
      out.error = why;
      out.violation = 10;
      return out;
    }
    out.engine = engine->record();
    out.log = engine->log_file().string();
    auto bench = m_options.bench;
    bench.endpoint = engine->url();
    bench.engine.clear();
    bench.calibration = false;
    bench.certify.seed = seed;
    archive::RunContext quiet; // the study archives the trial; bench's own rows would be noise here
    try {
      if (m_options.objective.kind == ObjectiveKind::certified) {
        const auto r = bench::run_bench(bench, quiet);
        auto measured = certified_outcome(m_options.objective, r.certification, launch.settings.tensor_parallel);
        if (r.certification.status == bench::CertificationStatus::interrupted || interrupt_requested()) {
          measured.status = TrialStatus::interrupted; // not a measurement: --resume runs it again
          measured.value = -std::numeric_limits<double>::infinity();
        }
        measured.engine = out.engine;
        measured.log = out.log;
        return measured;
      }
      bench.concurrency = config.contains(client_knob) ? config.at(client_knob).get<int>() : 8;
      bench.requests = m_options.goodput_requests;
      bench.slos = {fmt::format("e2e:p99<={}s", m_options.slo_s)};
      const auto r = bench::run_bench(bench, quiet);
      if (r.certification.trials.empty() || interrupt_requested()) {
        out.status = TrialStatus::interrupted;
        return out;
      }
      const auto& s = r.certification.trials.back().summary;
      auto measured = goodput_outcome(
          m_options.objective, {s.goodput, s.e2e.p50, s.e2e.p95, s.e2e.p99, s.request_throughput, s.slo_attainment},
          m_options.slo_s, config);
      measured.metrics["error_rate"] = s.error_rate;
      if (s.error_rate > 0.01) {
        measured.violation = std::max(measured.violation, 1.0);
        measured.error = fmt::format("{:.1f} % of requests failed", 100 * s.error_rate);
      }
      measured.engine = out.engine;
      measured.log = out.log;
      return measured;
    } catch (const RuntimeFailure& e) {
      out.status = TrialStatus::crashed;
      out.error = e.what();
      out.violation = 10;
      out.value = -std::numeric_limits<double>::infinity();
    }
    return out;
  }

private:
  LiveEvaluatorOptions m_options;
};

} // namespace

std::unique_ptr<TrialEvaluator>
make_live_evaluator(const SearchSpace& space, LiveEvaluatorOptions options) {
  if (options.model.empty())
    throw InputError("--engine " + engines::to_string(options.kind) + " needs --model (what the engine serves)");
  const auto& knobs = engines::logical_knobs(options.kind);
  for (const auto& p : space.parameters) {
    if (p.name == client_knob)
      continue;
    if (std::find(knobs.begin(), knobs.end(), p.name) == knobs.end()) {
      std::string list;
      for (const auto& k : knobs)
        list += k + ", ";
      throw InputError(fmt::format("{}: knob '{}' is not one engine {} has ({}concurrency)", space.source, p.name,
                                   engines::to_string(options.kind), list));
    }
    if (p.kind == ParamKind::categorical)
      throw InputError(fmt::format("{}: knob '{}' of engine {} is numeric, not categorical", space.source, p.name,
                                   engines::to_string(options.kind)));
  }
  if (options.objective.kind == ObjectiveKind::certified && options.bench.slos.empty())
    throw InputError("--objective certified needs at least one --slo (e.g. 'e2e:p95<=2s')");
  return std::make_unique<LiveEvaluator>(std::move(options));
}

} // namespace optkit::tune
