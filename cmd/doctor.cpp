// optkit doctor — checks this installation end to end and records what it measured.
#include "app_context.hpp"

#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "doctor/doctor.hpp"
#include "doctor/probes.hpp"
#include "proc/worker_spec.hpp"

#include <fmt/format.h>

namespace optkit::cmd {

void
register_doctor(CLI::App& app, CommandRegistry& commands) {
  struct Flags {
    std::string format;
    double timeout_s = 300;
    std::string worker;
    std::string model;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* doctor = app.add_subcommand(
      "doctor", "Check this installation: archive, data files, config, worker processes, BLAS, CUDA devices; "
                "with --model, whether optkit understands a model folder");
  add_format_option(*doctor, flags->format);
  add_timeout_option(*doctor, flags->timeout_s);
  doctor
      ->add_option("--model", flags->model,
                   "also check a model folder or GGUF file: config, quantization, tokenizer components, special "
                   "tokens, chat template")
      ->check(CLI::ExistingPath);
  doctor->add_option("--worker", flags->worker, "internal: run as a worker child")->group("");
  commands.add({"doctor", doctor,
                [flags](AppContext& ctx) {
                  if (!flags->worker.empty()) {
                    const auto spec = proc::read_worker_spec(flags->worker);
                    proc::write_worker_result(spec, doctor::run_probes());
                    return;
                  }
                  const auto report = doctor::run_doctor(
                      ctx.settings, ctx.run_context(flags->timeout_s),
                      flags->model.empty() ? std::nullopt : std::optional<std::filesystem::path>(flags->model));
                  const Table checks = doctor::report_table(report);
                  ctx.emit_result(flags->format,
                                  {.json = {{"checks", checks.to_json()}, {"probes", report.probes}}, .table = checks});
                  if (report.failures() > 0) {
                    throw GoalNotMet(fmt::format("doctor found {} problem(s); see the FAIL rows above (run {})",
                                                 report.failures(), ctx.run_id));
                  }
                },
                true, &flags->worker});
}

} // namespace optkit::cmd
