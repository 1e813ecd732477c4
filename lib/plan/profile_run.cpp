#include "plan/profile_run.hpp"

#include "core/atomic_file.hpp"
#include "core/build_info.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/resource_paths.hpp"
#include "plan/perf_database.hpp"
#include "plan/system_spec.hpp"

#include <fmt/format.h>
#include <map>

namespace optkit::plan {

namespace {

std::filesystem::path
output_directory(const ProfileOptions& options, const SystemSpec& system) {
  if (!options.out.empty()) {
    auto out = std::filesystem::absolute(options.out).lexically_normal();
    return out.has_filename() ? out : out.parent_path(); // "db/" names db itself
  }
  return find_data_directory().path / "profiles" / "perf" / system.name;
}

void
archive_results(archive::RunArchive& archive, std::int64_t run_id, const ProfileRun& run) {
  const auto& m = run.measured;
  archive.transaction([&] {
    archive.add_metric(run_id, std::nullopt, {"points_measured", m.at("measured").get<double>(), "points", {}});
    archive.add_metric(run_id, std::nullopt,
                       {"points_failed", static_cast<double>(m.at("failures").size()), "points", {}});
    archive.add_metric(run_id, std::nullopt, {"best_copy_bandwidth", m.at("best_copy_gbs").get<double>(), "GB/s", {}});
    for (const auto& [kind, tflops] : m.at("best_tflops").items())
      archive.add_metric(run_id, std::nullopt, {"best_gemm_" + kind, tflops.get<double>(), "TFLOP/s", {}});
    for (const auto& table : perf_tables())
      if (std::filesystem::exists(run.output / table.file))
        archive.add_artifact(run_id, std::nullopt, run.output / table.file, "perf-table");
  });
}

} // namespace

ProfileRun
run_profile(const ProfileOptions& options, const proc::RunContext& context) {
  const auto data = find_data_directory();
  const SystemSpec system = load_system(data.path / "profiles", options.system);
  ProfileRun run;
  run.system = system.name;
  SweepOptions sweep_options;
  sweep_options.models = options.models;
  sweep_options.quick = options.quick;
  run.sweep = build_profile_sweep(sweep_options, system);
  log::info("plan profile: {}", sweep_summary(run.sweep));
  if (options.dry_run)
    return run;

  const auto output = output_directory(options, system);
  if (std::filesystem::exists(output) && !std::filesystem::is_empty(output) && !options.replace)
    throw InputError(
        fmt::format("--out {}: already holds a perf database; pass --replace to measure it again", output.string()));
  const auto staging = output.parent_path() / fmt::format(".{}.profile-{}", output.filename().string(), context.run_id);
  std::filesystem::create_directories(staging);
  try {
    proc::WorkerTask task;
    task.command = {"plan", "profile"};
    task.payload = {{"sweep", to_json(run.sweep)}, {"directory", staging.string()}};
    task.params = {{"system", system.name}, {"points", run.sweep.points()}, {"gpu", options.gpu}};
    task.timeout_s = context.timeout_s;
    auto pool = proc::pool_options(context, "plan profile");
    pool.gpus = {options.gpu};
    const auto outcome = proc::WorkerPool(pool).run({task}).front();
    if (!outcome.succeeded())
      throw RuntimeFailure(outcome.child_message.empty() ? fmt::format("plan profile worker failed: {} (log: {})",
                                                                       outcome.error, outcome.log.string())
                                                         : outcome.child_message);
    run.measured = outcome.result;
    if (run.measured.at("measured").get<std::size_t>() == 0)
      throw RuntimeFailure(fmt::format("plan profile: the device measured no point (first refusal: {})",
                                       run.measured.at("failures").empty()
                                           ? std::string("none")
                                           : run.measured.at("failures").front().get<std::string>()));
    // The tables must load exactly as a plan will read them.
    try {
      PerfDatabase::load(staging, system);
    } catch (const InputError& e) {
      throw RuntimeFailure(std::string("plan profile wrote a table the planner rejects: ") + e.what());
    }
    nlohmann::json manifest = run.measured;
    manifest["system"] = system.name;
    manifest["optkit"] = build_info().version;
    manifest["measured_at"] = iso8601_utc(SystemClock::instance().wall_ms());
    manifest["skipped_sites"] = run.sweep.skipped;
    write_file_atomic(staging / "profile.json", manifest.dump(2) + "\n");
    if (std::filesystem::exists(output))
      std::filesystem::remove_all(output);
    std::filesystem::create_directories(output.parent_path());
    std::filesystem::rename(staging, output);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(staging, ignored);
    throw;
  }
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
  proc::write_worker_result(spec, {{"device", timer->device_name()},
                                   {"measured", tables.measured},
                                   {"failures", tables.failures},
                                   {"best_tflops", tables.best_tflops},
                                   {"best_copy_gbs", tables.best_copy_gbs}});
}

Table
profile_table(const ProfileRun& run) {
  Table table({"item", "value"});
  table.add_row({"system", run.system});
  table.add_row({"sweep", sweep_summary(run.sweep)});
  if (!run.measured.is_null()) {
    table.add_row({"device", run.measured.at("device").get<std::string>()});
    table.add_row({"measured points", fmt::format("{}", run.measured.at("measured").get<std::size_t>())});
    table.add_row({"failed points", fmt::format("{}", run.measured.at("failures").size())});
    for (const auto& [kind, tflops] : run.measured.at("best_tflops").items())
      table.add_row({"best " + kind + " GEMM", fmt::format("{:.0f} TFLOP/s", tflops.get<double>())});
    table.add_row({"best copy", fmt::format("{:.0f} GB/s", run.measured.at("best_copy_gbs").get<double>())});
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
          {"measured", run.measured}};
}

} // namespace optkit::plan
