// `optkit compress` and `optkit compress delta` as recorded runs. The parent validates the inputs
// (one error line before any child starts), runs N trials as isolated worker children — each with
// its own calibration subset (seed + trial index) writing into a private temporary folder —
// archives every trial's metrics, reports mean and standard deviation across trials, and keeps
// the representative trial (lowest calibration loss) as the output folder, renamed into place
// at the end so a failed or interrupted run leaves no partial output.
#pragma once

#include "archive/run_context.hpp"
#include "compress/checkpoint_writer.hpp"
#include "compress/recipe.hpp"
#include "core/table.hpp"
#include "proc/worker_spec.hpp"
#include "runtime/activation_precision.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace optkit::compress {

struct CompressOptions {
  std::filesystem::path model;               // the model (compress) or the fine-tuned variant (delta)
  std::optional<std::filesystem::path> base; // delta mode
  std::string recipe;                        // bundled name or YAML path
  std::optional<std::filesystem::path> calib;
  // A GGUF recipe's importance matrix from llama-imatrix's GGUF file (instead of --calib).
  std::optional<std::filesystem::path> imatrix;
  // A GGUF recipe with --calib: also write the importance matrix it collects there, in
  // llama-imatrix's GGUF format (llama-quantize --imatrix takes it).
  std::optional<std::filesystem::path> imatrix_out;
  std::optional<std::int64_t> samples, sequence_length;
  std::optional<Sampler> sampler;
  std::optional<std::filesystem::path> plan; // mixed precision: bits per layer from plan hetero's JSON
  bool all_experts = false;                  // --all-experts: every calibration token through every expert
  std::int64_t trials = 1;
  std::int64_t jobs = 1;
  std::uint64_t seed = 0;
  std::filesystem::path output;
  unsigned threads = 0; // per trial; 0: hardware threads / jobs
  // How BF16 weights multiply activations in the calibration pass (--activations).
  runtime::ActivationPrecision activations = runtime::ActivationPrecision::fp32;
  // Shards of the output model (--max-shard-size; compress delta writes one file): at most this
  // many bytes each, a tensor larger than it alone in its shard.
  std::uint64_t max_shard_bytes = kDefaultMaxShardBytes;
  // --max-memory: the peak resident bytes the trials running at once may hold together. The
  // calibration states spill to a scratch file when only that fits; a budget that cannot be kept
  // is refused before anything runs (model/memory_needs.hpp).
  std::optional<std::uint64_t> max_memory;
};

struct TrialSummary {
  std::int64_t trial = 0;
  bool succeeded = false;
  std::string error;
  nlohmann::json metrics; // calibration_loss, output_bytes, compression_ratio, seconds, ...
};

struct CompressResult {
  std::string recipe;
  std::filesystem::path output;
  std::vector<TrialSummary> trials;
  std::int64_t representative = -1; // trial index kept as the output
  nlohmann::json summary;           // mean / std of each metric across succeeded trials
  nlohmann::json plan = nullptr;    // the --plan applied: file, sha256, layer_bits
  // A trial's estimated peak as run (estimated_peak_bytes, model/memory_needs.hpp) and with its
  // calibration states in memory or spilled, whether they spilled, --max-memory (null without),
  // each trial's measured peak (trial_peak_bytes).
  nlohmann::json memory;
};

CompressResult run_compress(const CompressOptions& options, const archive::RunContext& context);
void compress_worker(const proc::WorkerSpec& spec);

nlohmann::json to_json(const CompressResult& result);
// A result read back from to_json's JSON (as flow reads its children's), so that
// to_json(compress_result_from_json(j)) == j. InputError naming `source` and the field.
CompressResult compress_result_from_json(const nlohmann::json& j, const std::string& source);
// A metric's mean across the succeeded trials ("calibration_loss", "compression_ratio"); none
// when no trial reported it.
std::optional<double> summary_mean(const CompressResult& result, const std::string& metric);
Table compress_table(const CompressResult& result);

} // namespace optkit::compress
