// optkit flow run | resume | status | validate — OptiKit's whole pipeline as one resumable job.
#include "app_context.hpp"

#include "core/error.hpp"
#include "flow/flow_job.hpp"
#include "flow/flow_run.hpp"
#include "flow/flow_status.hpp"

#include <fmt/format.h>

#include <iostream>

namespace optkit::cmd {

namespace {

struct FlowFlags {
  std::string job;
  std::string run; // flow run id or output folder
  std::string output;
  std::string format;
};

void
emit_outcome(AppContext& ctx, const flow::FlowOutcome& outcome, const std::string& format_text) {
  ctx.emit_result(
      format_text,
      {.json = flow::to_json(outcome), .table = flow::trials_table(outcome), .after = "\n" + outcome.message + "\n"});
  flow::exit_for(outcome);
}

// Each task's start and end on stderr, unless -q.
flow::FlowProgress
flow_progress(const AppContext& ctx) {
  if (ctx.flags.quiet)
    return {};
  return [](const std::string& line) { std::cerr << line << "\n"; };
}

} // namespace

void
register_flow(CLI::App& app, CommandRegistry& commands) {
  CLI::App* flow = app.add_subcommand(
      "flow",
      "OptiKit's pipeline as one resumable job: compress trials, quality gate, SLO certification, tuning, package");
  flow->require_subcommand(1);
  auto flags = std::make_shared<FlowFlags>();

  CLI::App* run = flow->add_subcommand("run", "Run a flow job (finished work in its output folder is reused)");
  run->add_option("job", flags->job, "the job YAML")->required();
  add_output_option(*run, flags->output, "the output folder, overriding the job's output:");
  add_format_option(*run, flags->format);
  commands.add({"flow run", run, [flags](AppContext& ctx) {
                  flow::FlowJob job = flow::load_flow_job(flags->job);
                  if (!flags->output.empty())
                    job.output = std::filesystem::absolute(flags->output).lexically_normal().string();
                  flow::validate_flow_job(job);
                  emit_outcome(ctx, flow::run_flow(job, ctx.run_context(0), flow_progress(ctx)), flags->format);
                }});

  CLI::App* resume = flow->add_subcommand("resume", "Resume a flow that was interrupted or killed");
  resume->add_option("run", flags->run, "the flow's run id ('last') or its output folder")->required();
  add_format_option(*resume, flags->format);
  commands.add({"flow resume", resume, [flags](AppContext& ctx) {
                  const auto output = flow::resolve_flow_output(flags->run, ctx.archive());
                  emit_outcome(ctx,
                               flow::run_flow(flow::load_saved_job(output), ctx.run_context(0), flow_progress(ctx)),
                               flags->format);
                }});

  CLI::App* status = flow->add_subcommand("status", "Show which of a flow's tasks finished, and its package");
  status->add_option("run", flags->run, "the flow's run id ('last') or its output folder")->required();
  add_format_option(*status, flags->format);
  commands.add({"flow status", status,
                [flags](AppContext& ctx) {
                  const auto s = flow::flow_status(flow::resolve_flow_output(flags->run, ctx.archive()));
                  ctx.emit_result(flags->format,
                                  {.json = s,
                                   .table = flow::status_table(s),
                                   .after = fmt::format(
                                       "\n{} tasks finished; package: {}\n", s.at("finished_tasks").get<int>(),
                                       s.at("packaged").get<bool>() ? s.at("package").get<std::string>() : "not yet")});
                },
                false});

  CLI::App* validate = flow->add_subcommand("validate", "Check a job file and everything it names, running nothing");
  validate->add_option("job", flags->job, "the job YAML")->required();
  commands.add({"flow validate", validate,
                [flags](AppContext& ctx) {
                  const auto job = flow::load_flow_job(flags->job);
                  flow::validate_flow_job(job);
                  ctx.emit(fmt::format("{}: valid ({} recipe(s) x {} trial(s), gate {}, {} SLO(s); output {})\n",
                                       flags->job, job.compress.recipes.size(), job.compress.trials, job.gate.suite,
                                       job.bench.slos.size(), job.output));
                },
                false});
}

} // namespace optkit::cmd
