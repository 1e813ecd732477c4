#include "sim/sim_config.hpp"

#include "core/input_file.hpp"
#include "core/resource_paths.hpp"
#include "core/schema_fields.hpp"
#include "core/yaml_schema.hpp"

#include <memory>

namespace optkit::sim {

namespace {

using config::Field;
using config::number_field;
using config::object_field;
using config::Schema;
using config::Type;

const Schema&
setup_schema() {
  static const Schema schema = [] {
    Schema timing{
        "timing",
        {number_field("step_base_ms", "fixed cost of one engine step", 0, 1e6),
         number_field("prefill_token_us", "per prompt token processed", 0, 1e6),
         number_field("decode_seq_us", "per decoding sequence in a step", 0, 1e6),
         number_field("kv_token_ns", "per cached token a decoding sequence attends to", 0, 1e9),
         number_field("noise_cv", "coefficient of variation of a step's duration", 0, 1),
         number_field("draft_step_ms", "one draft-model step for the batch", 0, 1e6),
         number_field("draft_seq_us", "per sequence and draft width in a draft step", 0, 1e6),
         number_field("verify_token_us", "per drafted token verified, per sequence", 0, 1e6),
         number_field("acceptance", "a width-1 draft token's acceptance probability", 0, 1),
         number_field("kv_capacity_tokens", "prompt + output tokens resident at once (0: unlimited)", 0, 1e12)}};
    Field arrivals{"arrivals", Type::string, false, "poisson, bursty or closed"};
    arrivals.choices = {"poisson", "bursty", "closed"};
    Schema workload{"workload",
                    {arrivals, number_field("rate", "mean requests/s (open loop)", 1e-6, 1e9),
                     number_field("burst_on_s", "bursty: length of an on-period", 1e-6, 1e9),
                     number_field("burst_off_s", "bursty: length of an off-period", 0, 1e9),
                     number_field("concurrency", "closed loop: clients", 1, 1e6),
                     number_field("prompt_mean", "mean prompt tokens (log-normal)", 1, 1e7),
                     number_field("prompt_log_sd", "log-space s.d. of prompt tokens", 0, 5),
                     number_field("output_mean", "mean output tokens (log-normal)", 1, 1e7),
                     number_field("output_log_sd", "log-space s.d. of output tokens", 0, 5),
                     number_field("max_prompt", "longest prompt", 1, 1e7),
                     number_field("max_output", "longest output", 1, 1e7)}};
    Schema segment{"segment",
                   {number_field("warmup_s", "arrivals before this are not measured", 0, 1e9),
                    number_field("min_duration_s", "shortest measured window", 0, 1e9),
                    number_field("min_completions", "fewest measured requests", 1, 1e9),
                    number_field("slo_s", "the end-to-end latency target goodput counts against", 1e-6, 1e9)}};
    return Schema{"simulator setup",
                  {Field{"name", Type::string, true, "the setup's name"},
                   Field{"description", Type::string, false, "one line for people"},
                   object_field("timing", "what an engine step costs", timing),
                   object_field("workload", "arrivals and request lengths", workload),
                   object_field("segment", "how long one measurement runs", segment)}};
  }();
  return schema;
}

} // namespace

SimSetup
parse_sim_setup(const std::string& yaml, const std::string& source) {
  const auto doc = config::parse_yaml(yaml, source, setup_schema());
  SimSetup s;
  s.source = source;
  s.name = doc.at("name").get<std::string>();
  s.description = doc.value("description", "");
  const auto t = doc.value("timing", nlohmann::json::object());
  auto& timing = s.timing;
  timing.step_base_s = t.value("step_base_ms", timing.step_base_s * 1e3) / 1e3;
  timing.prefill_token_s = t.value("prefill_token_us", timing.prefill_token_s * 1e6) / 1e6;
  timing.decode_seq_s = t.value("decode_seq_us", timing.decode_seq_s * 1e6) / 1e6;
  timing.kv_token_s = t.value("kv_token_ns", timing.kv_token_s * 1e9) / 1e9;
  timing.noise_cv = t.value("noise_cv", timing.noise_cv);
  timing.draft_step_s = t.value("draft_step_ms", timing.draft_step_s * 1e3) / 1e3;
  timing.draft_seq_s = t.value("draft_seq_us", timing.draft_seq_s * 1e6) / 1e6;
  timing.verify_token_s = t.value("verify_token_us", timing.verify_token_s * 1e6) / 1e6;
  timing.acceptance = t.value("acceptance", timing.acceptance);
  timing.kv_capacity_tokens = static_cast<std::int64_t>(t.value("kv_capacity_tokens", 0.0));
  const auto w = doc.value("workload", nlohmann::json::object());
  auto& workload = s.segment.workload;
  workload.arrivals = parse_arrivals(w.value("arrivals", std::string("poisson")));
  workload.rate = w.value("rate", workload.rate);
  workload.burst_on_s = w.value("burst_on_s", workload.burst_on_s);
  workload.burst_off_s = w.value("burst_off_s", workload.burst_off_s);
  workload.concurrency = static_cast<int>(w.value("concurrency", static_cast<double>(workload.concurrency)));
  workload.prompt_mean = w.value("prompt_mean", workload.prompt_mean);
  workload.prompt_log_sd = w.value("prompt_log_sd", workload.prompt_log_sd);
  workload.output_mean = w.value("output_mean", workload.output_mean);
  workload.output_log_sd = w.value("output_log_sd", workload.output_log_sd);
  workload.max_prompt = static_cast<std::int64_t>(w.value("max_prompt", static_cast<double>(workload.max_prompt)));
  workload.max_output = static_cast<std::int64_t>(w.value("max_output", static_cast<double>(workload.max_output)));
  const auto g = doc.value("segment", nlohmann::json::object());
  auto& segment = s.segment;
  segment.warmup_s = g.value("warmup_s", segment.warmup_s);
  segment.min_duration_s = g.value("min_duration_s", segment.min_duration_s);
  segment.min_completions =
      static_cast<std::size_t>(g.value("min_completions", static_cast<double>(segment.min_completions)));
  segment.slo_s = g.value("slo_s", segment.slo_s);
  return s;
}

SimSetup
resolve_sim_setup(const std::string& name_or_path) {
  const auto file =
      resolve_bundled_yaml(name_or_path, find_data_directory().path / "profiles" / "sim", "--sim", "simulator setup");
  return parse_sim_setup(read_input_file(file, "a simulator setup YAML file"), file.string());
}

nlohmann::json
to_json(const SimSetup& s) {
  const auto& t = s.timing;
  const auto& w = s.segment.workload;
  return {{"name", s.name},
          {"source", s.source},
          {"timing",
           {{"step_base_ms", t.step_base_s * 1e3},
            {"prefill_token_us", t.prefill_token_s * 1e6},
            {"decode_seq_us", t.decode_seq_s * 1e6},
            {"kv_token_ns", t.kv_token_s * 1e9},
            {"noise_cv", t.noise_cv},
            {"draft_step_ms", t.draft_step_s * 1e3},
            {"draft_seq_us", t.draft_seq_s * 1e6},
            {"verify_token_us", t.verify_token_s * 1e6},
            {"acceptance", t.acceptance},
            {"kv_capacity_tokens", t.kv_capacity_tokens}}},
          {"workload",
           {{"arrivals", to_string(w.arrivals)},
            {"rate", w.rate},
            {"burst_on_s", w.burst_on_s},
            {"burst_off_s", w.burst_off_s},
            {"concurrency", w.concurrency},
            {"prompt_mean", w.prompt_mean},
            {"prompt_log_sd", w.prompt_log_sd},
            {"output_mean", w.output_mean},
            {"output_log_sd", w.output_log_sd}}},
          {"segment",
           {{"warmup_s", s.segment.warmup_s},
            {"min_duration_s", s.segment.min_duration_s},
            {"min_completions", s.segment.min_completions},
            {"slo_s", s.segment.slo_s}}}};
}

} // namespace optkit::sim
