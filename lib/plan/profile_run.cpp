#include "plan/profile_run.hpp"

#include "core/atomic_file.hpp"
#include "core/build_info.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/resource_paths.hpp"
#include "perf/perf_database.hpp"
#include "perf/system_spec.hpp"

#include <fmt/format.h>
#include <map>

namespace optkit::plan {

namespace {

std::filesystem::path
output_directory(const ProfileOptions& options, const DataDirectory& data, const perf::SystemSpec& system) {
  if (!options.out.empty()) {
    auto out = std::filesystem::absolute(options.out).lexically_normal();
    return out.has_filename() ? out : out.parent_path(); // "db/" names db itself
  }
  return data.path / "profiles" / "perf" / system.name;
}

void
archive_results(archive::RunArchive& archive, std::int64_t run_id, const ProfileRun& run) {
  const auto& m = *run.measured;
  archive.transaction([&] {
    archive.add_metric(run_id, std::nullopt, {"points_measured", static_cast<double>(m.measured), "points", {}});
    archive.add_metric(run_id, std::nullopt, {"points_failed", static_cast<double>(m.failures.size()), "points", {}});
    archive.add_metric(run_id, std::nullopt, {"best_copy_bandwidth", m.best_copy_gbs, "GB/s", {}});
    for (const auto& [kind, tflops] : m.best_tflops)
      archive.add_metric(run_id, std::nullopt, {"best_gemm_" + kind, tflops, "TFLOP/s", {}});
    for (const auto& table : perf::perf_tables())
      if (std::filesystem::exists(run.output / table.file))
        archive.add_artifact(run_id, std::nullopt, run.output / table.file, "perf-table");
  });
}

} // namespace

ProfileRun
run_profile(const ProfileOptions& options, const archive::RunContext& context) {
  const auto data = find_data_directory();
  const perf::SystemSpec system = perf::load_system(data.path / "profiles", options.system);
  ProfileRun run;
  run.system = system.name;
  SweepOptions sweep_options;
  sweep_options.models = options.models;
  sweep_options.quick = options.quick;
  run.sweep = build_profile_sweep(sweep_options, system);
  log::info("plan profile: {}", sweep_summary(run.sweep));
  if (options.dry_run)
    return run;

  const auto output = output_directory(options, data, system);
  const bool exists = std::filesystem::exists(output);
  if (exists && !std::filesystem::is_empty(output) && !options.replace)
    throw InputError(
        fmt::format("--out {}: already holds a perf database; pass --replace to measure it again", output.string()));
  StagedDirectory staged(output, exists ? ExistingDestination::replace : ExistingDestination::refuse);
  proc::WorkerTask task;
  task.command = {"plan", "profile"};
  task.payload = {{"sweep", to_json(run.sweep)}, {"directory", staged.path().string()}};
  task.params = {{"system", system.name}, {"points", run.sweep.points()}, {"gpu", options.gpu}};
  task.timeout_s = context.timeout_s;
  auto pool = archive::pool_options(context, "plan profile");
  pool.gpus = {options.gpu};
  const auto outcome = proc::WorkerPool(pool).run({task}).front();
  if (!outcome.succeeded())
    proc::throw_worker_failure(outcome, "plan profile worker failed");
  const auto report = profile_report_from_json(outcome.result);
  if (report.measured == 0)
    throw RuntimeFailure(fmt::format("plan profile: the device measured no point (first refusal: {})",
                                     report.failures.empty() ? std::string("none") : report.failures.front()));
  // The tables must load exactly as a plan will read them.
  try {
    perf::PerfDatabase::load(staged.path(), system);
  } catch (const InputError& e) {
    throw RuntimeFailure(std::string("plan profile wrote a table the planner rejects: ") + e.what());
  }
  auto manifest = to_json(report);
  manifest["system"] = system.name;
  manifest["optkit"] = build_info().version;
  manifest["measured_at"] = iso8601_utc(SystemClock::instance().wall_ms());
  manifest["skipped_sites"] = run.sweep.skipped;
  write_file_atomic(staged.path() / "profile.json", manifest.dump(2) + "\n");
  staged.commit();
  run.measured = report;
  run.output = output;
  archive_results(*context.archive, context.run_id, run);
  return run;
}

void
profile_worker(const proc::WorkerSpec& spec) {
  const auto sweep = profile_sweep_from_json(spec.payload.at("sweep"));
  const std::filesystem::path directory = spec.payload.at("directory").get<std::string>();
  auto timer = open_cuda_timer(0); // the pool's GPU slot is the only visible device
  log::info("plan profile: {} on {}", sweep_summary(sweep), timer->device_name());
  const auto tables = measure_sweep(sweep, *timer, [](std::size_t done, std::size_t total) {
    if (done % 200 == 0 || done == total)
      log::info("plan profile: {}/{} points", done, total);
  });
  for (const auto& [file, text] : tables.csv)
    write_file_atomic(directory / file, text);
  proc::write_worker_result(spec, to_json(tables));
}

Table
profile_table(const ProfileRun& run) {
  Table table({"item", "value"});
  table.add_row({"system", run.system});
  table.add_row({"sweep", sweep_summary(run.sweep)});
  if (const auto& m = run.measured) {
    table.add_row({"device", m->device});
    table.add_row({"measured points", fmt::format("{}", m->measured)});
    table.add_row({"failed points", fmt::format("{}", m->failures.size())});
    for (const auto& [kind, tflops] : m->best_tflops)
      table.add_row({"best " + kind + " GEMM", fmt::format("{:.0f} TFLOP/s", tflops)});
    table.add_row({"best copy", fmt::format("{:.0f} GB/s", m->best_copy_gbs)});
    table.add_row({"written to", run.output.string()});
  }
  std::map<std::string, std::size_t> reasons; // sites left out, counted by why
  for (const auto& skipped : run.sweep.skipped)
    ++reasons[skipped.substr(skipped.find(": ") + 2)];
  for (const auto& [reason, count] : reasons)
    table.add_row({"not measured", fmt::format("{} site(s): {}", count, reason)});
  return table;
}

nlohmann::json
to_json(const ProfileRun& run) {
  return {{"system", run.system},
          {"sweep", {{"points", run.sweep.points()}, {"summary", sweep_summary(run.sweep)}}},
          {"skipped_sites", run.sweep.skipped},
          {"output", run.output.empty() ? nlohmann::json() : nlohmann::json(run.output.string())},
          {"measured", run.measured ? to_json(*run.measured) : nlohmann::json()}};
}

} // namespace optkit::plan
