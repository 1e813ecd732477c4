#include "flow/flow_package.hpp"

#include "archive/run_report.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "engines/engine_adapter.hpp"
#include "flow/flow_report.hpp"

#include <fmt/format.h>

#include <unistd.h>

namespace optkit::flow {

namespace fs = std::filesystem;

std::vector<std::string>
launch_argv(const FlowJob& job, const FlowOutcome& outcome) {
  engines::EngineSettings settings;
  settings.model = "model";
  settings.host = "127.0.0.1";
  if (outcome.tune_live && outcome.tune_live->study.best) {
    for (const auto& [knob, value] : outcome.tune_live->study.best->items())
      if (value.is_number())
        engines::apply_knob(engines::EngineKind::optkit, settings, knob, value.get<double>());
  } else {
    settings.extra_args = job.bench.engine_args;
  }
  return engines::command_line(engines::EngineKind::optkit, settings).argv();
}

fs::path
write_package(const FlowJob& job, const FlowOutcome& outcome, archive::RunArchive& archive) {
  const fs::path final_dir = fs::path(job.output) / "package";
  const fs::path temp = fs::path(job.output) / fmt::format("package.tmp-{}", ::getpid());
  std::error_code ec;
  fs::remove_all(temp, ec);
  fs::create_directories(temp / "deploy");
  const auto& chosen = outcome.trials.at(*outcome.chosen);
  fs::copy(chosen.model, temp / "model", fs::copy_options::recursive);

  const auto launch = launch_argv(job, outcome);
  std::string command;
  for (const auto& a : launch)
    command += (command.empty() ? "" : " ") + shell_quote(a);
  const std::string script =
      "#!/bin/sh\n# optkit flow: serve the chosen model with the tuned knobs\ncd \"$(dirname \"$0\")/..\" "
      "&& exec " +
      command + " \"$@\"\n";
  write_file_atomic(temp / "deploy" / "launch.sh", script);
  fs::permissions(temp / "deploy" / "launch.sh", fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add);
  fs::copy_file(resolve_bundled_yaml(job.bench.profile, find_data_directory().path / "profiles" / "serving",
                                     "bench.profile", "serving profile"),
                temp / "deploy" / "serving-profile.yaml");
  std::string slos;
  for (const auto& s : job.bench.slos)
    slos += s + "\n";
  write_file_atomic(temp / "deploy" / "slo.txt", slos);

  // The manifest: what was chosen and the bytes of every model file — the same for every run of
  // the same job and seeds, interrupted or not.
  nlohmann::json files = nlohmann::json::object();
  std::vector<fs::path> model_files;
  for (const auto& e : fs::recursive_directory_iterator(temp / "model"))
    if (e.is_regular_file())
      model_files.push_back(e.path());
  std::sort(model_files.begin(), model_files.end());
  for (const auto& f : model_files)
    files[fs::relative(f, temp).string()] = digest_file(f).sha256;
  const nlohmann::json manifest = {{"job", job.name},     {"recipe", chosen.recipe}, {"trial", chosen.trial},
                                   {"seed", chosen.seed}, {"launch", launch},        {"slo", job.bench.slos},
                                   {"files", files}};
  write_file_atomic(temp / "manifest.json", manifest.dump(2) + "\n");

  write_file_atomic(temp / "report.md", report_markdown(job, outcome, launch));
  write_file_atomic(temp / "report.html", report_html(job, outcome, launch));
  nlohmann::json lineage = nlohmann::json::array();
  for (const auto run_id : outcome.stage_runs)
    if (archive.find_run(run_id))
      lineage.push_back(archive::run_detail_json(archive.load_run(run_id)));
  write_file_atomic(temp / "lineage.json", lineage.dump(1) + "\n");

  // Replace an older package only now that the new one is whole.
  const fs::path old = fs::path(job.output) / fmt::format("package.old-{}", ::getpid());
  if (fs::exists(final_dir))
    fs::rename(final_dir, old);
  fs::rename(temp, final_dir);
  fs::remove_all(old, ec);
  return final_dir;
}

} // namespace optkit::flow
