// `optkit plan profile` as a recorded run: builds the sweep for the chosen models, measures it on
// one GPU in a worker child, validates the tables by loading them as a perf database, and puts
// them in place (profiles/perf/<system>/ or --out) all at once, with a profile.json manifest.
#pragma once

#include "archive/run_context.hpp"
#include "core/table.hpp"
#include "plan/profile_sweep.hpp"
#include "plan/profile_tables.hpp"
#include "proc/worker_spec.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace optkit::plan {

struct ProfileOptions {
  std::string system;              // profiles/systems/<name>.yaml: names the output folder
  std::vector<std::string> models; // whose shapes to measure; empty: every preset
  std::string out;                 // default: <data>/profiles/perf/<system>
  bool replace = false;            // overwrite an existing database folder
  bool quick = false;              // a few points per site
  bool dry_run = false;            // print the sweep, measure nothing (needs no GPU)
  int gpu = 0;                     // which GPU (CUDA_VISIBLE_DEVICES of the child)
};

struct ProfileRun {
  std::string system;
  ProfileSweep sweep;
  std::filesystem::path output;          // empty on a dry run
  std::optional<ProfileReport> measured; // none on a dry run
};

ProfileRun run_profile(const ProfileOptions& options, const archive::RunContext& context);
void profile_worker(const proc::WorkerSpec& spec);

Table profile_table(const ProfileRun& run);
nlohmann::json to_json(const ProfileRun& run);

} // namespace optkit::plan
