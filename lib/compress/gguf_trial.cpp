#include "compress/gguf_trial.hpp"

#include "compress/calibration.hpp"
#include "compress/gguf_export.hpp"
#include "compress/importance_matrix.hpp"
#include "core/clock.hpp"
#include "core/log.hpp"
#include "core/sha256.hpp"
#include "model/calibration_documents.hpp"
#include "model/model_config.hpp"
#include "model/weight_store.hpp"

#include <limits>

namespace optkit::compress {

namespace {

// Every token of the file counts, in windows of the sequence length. A text file is one token
// stream cut into chunks exactly as llama-imatrix cuts its file, so both tools collect their
// statistic over the same windows; the documents of a JSONL file each in their own windows, those
// that start with the model's BOS starting each of their windows with it too.
std::vector<std::vector<std::int32_t>>
calibration_windows(const std::filesystem::path& calib, const std::filesystem::path& model_dir,
                    std::int64_t sequence_length) {
  const auto bos = model::load_model_config(model_dir).bos_token_id;
  const auto lead = bos ? std::optional<std::int32_t>(static_cast<std::int32_t>(*bos)) : std::nullopt;
  if (!model::is_jsonl_calibration(calib))
    return stream_windows(model::read_calibration_stream(calib, model_dir), sequence_length, lead);
  const auto docs = model::read_calibration_documents(calib, model_dir, std::numeric_limits<std::int32_t>::max());
  return document_windows(docs, sequence_length, lead);
}

struct CalibratedImportance {
  ImportanceMatrix matrix;
  nlohmann::json report;
};

CalibratedImportance
calibrate(const Recipe& recipe, const nlohmann::json& p, const std::filesystem::path& model_dir) {
  const std::filesystem::path calib = p.at("calib").get<std::string>();
  auto calibration =
      sample_calibration(calibration_windows(calib, model_dir, recipe.calibration.sequence_length),
                         recipe.calibration.samples, recipe.calibration.sampler, p.at("seed").get<std::uint64_t>());
  calibration.source_sha256 = digest_file(calib).sha256;
  CalibratedImportance out;
  out.matrix =
      collect_importance_matrix(model_dir, calibration, p.at("threads").get<unsigned>(),
                                runtime::parse_activation_precision(p.value("activations", "fp32"), "activations"));
  out.matrix.dataset = p.value("calib_as_given", calib.string());
  out.report = calibration_report(calibration, calib, recipe.calibration.sampler, p.at("seed"));
  return out;
}

} // namespace

nlohmann::json
run_gguf_trial(const Recipe& recipe, const nlohmann::json& p) {
  const auto started = SystemClock::instance().monotonic_seconds();
  const std::filesystem::path model_dir = p.at("model").get<std::string>();
  const std::filesystem::path output = p.at("output").get<std::string>();
  std::filesystem::create_directories(output);
  std::optional<CalibratedImportance> importance;
  if (p.contains("calib")) {
    importance = calibrate(recipe, p, model_dir);
    log::info("compress: importance matrix from {} calibration tokens", importance->matrix.tokens);
    if (p.value("imatrix_out", false))
      write_importance_matrix(importance->matrix, output / kImatrixFileName);
  } else if (p.contains("imatrix")) {
    const std::filesystem::path file = p.at("imatrix").get<std::string>();
    const auto config = model::load_model_config(model_dir);
    importance = CalibratedImportance{read_importance_matrix(file, &config), nullptr};
    importance->matrix.source = p.value("imatrix_as_given", file.string());
    importance->report = {{"imatrix", file.string()},
                          {"sha256", digest_file(file).sha256},
                          {"dataset", importance->matrix.dataset},
                          {"chunks", importance->matrix.samples}};
  }
  GgufExportOptions options;
  options.model = model_dir;
  options.output = output / kGgufFileName;
  options.file_type = *recipe.gguf;
  options.importance = importance ? &importance->matrix : nullptr;
  options.threads = p.at("threads").get<unsigned>();
  const auto exported = export_gguf(options);

  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : exported.tensors)
    tensors.push_back({{"module", t.name}, {"type", t.type}, {"relative_error", t.relative_error}});
  const std::uint64_t source_fp16 = model::WeightStore(model_dir).element_count() * 2;
  nlohmann::json metrics = {{"output_bytes", exported.bytes},
                            {"compression_ratio", static_cast<double>(source_fp16) /
                                                      static_cast<double>(std::max<std::uint64_t>(1, exported.bytes))},
                            {"calibration_loss", exported.mean_relative_error},
                            {"seconds", SystemClock::instance().monotonic_seconds() - started},
                            {"calibration_tokens", importance ? importance->matrix.tokens : 0}};
  return {{"metrics", metrics},
          {"layers", tensors},
          {"tensor_types", exported.type_counts},
          {"calibration", importance ? importance->report : nlohmann::json()}};
}

} // namespace optkit::compress
