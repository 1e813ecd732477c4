// The flow's deliverable: one folder, built beside its final place and renamed into it, holding
// the chosen compressed model, deploy/ (the launch command with the tuned knobs, the serving
// profile and SLOs it was certified under), the evidence as report.md and a self-contained
// report.html, manifest.json (what was chosen, every model file's sha256) and lineage.json (every
// stage's archived run, as `runs export` writes it).
#pragma once

#include "archive/run_archive.hpp"
#include "flow/flow_job.hpp"
#include "flow/flow_run.hpp"

#include <filesystem>
#include <string>

namespace optkit::flow {

// The serve-deltas command line for the package: the live study's best knobs when it found one,
// else the bench's engine flags; the model path is `model` relative to the package.
std::vector<std::string> launch_argv(const FlowJob& job, const FlowOutcome& outcome);

// Writes <output>/package atomically (a previous package is replaced only once the new one is
// complete) and returns its path.
std::filesystem::path write_package(const FlowJob& job, const FlowOutcome& outcome, archive::RunArchive& archive);

} // namespace optkit::flow
