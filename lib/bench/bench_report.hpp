// bench's results for people and programs: JSON (everything, per trial), the trial table,
// per-request rows (JSONL) and the one-line progress each trial prints.
#pragma once

#include "bench/certification.hpp"
#include "core/table.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace optkit::bench {

nlohmann::json to_json(const LatencySummary& summary);
nlohmann::json to_json(const TrialSummary& summary);
nlohmann::json to_json(const SettleReport& settle); // null when the runner did not check
nlohmann::json to_json(const TrialResult& trial);
nlohmann::json to_json(const Certification& certification);
// A certification read back from to_json's JSON (bench's result, as flow reads its child's):
// everything the JSON holds, so to_json(certification_from_json(j)) == j; each trial's requests
// stay in its requests file. InputError naming `source` and the field when `j` is not one.
Certification certification_from_json(const nlohmann::json& j, const std::string& source);
// The trial that certified the rate (the last open-loop trial that passed at it); null when none.
const TrialResult* certifying_trial(const Certification& certification);

// One row per trial: phase, rate, requests, throughput, latency percentiles, β, verdict.
Table trials_table(const Certification& certification);
std::string progress_line(const TrialResult& trial);

// Every request of every trial as JSON lines (trial, rate, times, tokens, error).
void write_request_rows(const Certification& certification, const std::filesystem::path& file);

} // namespace optkit::bench
