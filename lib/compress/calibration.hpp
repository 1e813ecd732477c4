// Calibration data for data-aware compression: the documents of a calibration file
// (model::read_calibration_documents), drawn by a seeded sampler:
//   uniform     every document equally likely;
//   length      probability proportional to token count (long documents carry more context);
//   stratified  documents binned into quartiles of mean token rarity (the negative log unigram
//               frequency over the whole file) and drawn evenly across the bins, so rare-token
//               text is represented as well as common prose.
// Draws are without replacement; the chosen document ids are kept for the archive.
#pragma once

#include "compress/recipe.hpp"

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace optkit::compress {

struct CalibrationSet {
  std::vector<std::vector<std::int32_t>> samples;
  std::vector<std::int64_t> document_ids; // the document each sample is, in draw order
  std::int64_t documents = 0;             // documents available
  std::int64_t tokens = 0;                // tokens over all samples
  std::string source_sha256;
};

// The documents cut into consecutive windows of at most `length` tokens, so all of a long
// document's text is calibration data (as llama-imatrix reads its file in chunks); with `lead`
// (the BOS a tokenizer puts first), every window after a document's first starts with it too.
// Windows under 8 tokens are dropped.
std::vector<std::vector<std::int32_t>> document_windows(const std::vector<std::vector<std::int32_t>>& documents,
                                                        std::int64_t length, std::optional<std::int32_t> lead);

// A token stream cut as llama-imatrix cuts its file into chunks: consecutive windows of `length`
// tokens, the partial last one dropped (kept when it is the only one, if of 8 tokens or more), and
// with `lead` (the BOS a tokenizer puts first, when the stream starts with it) in place of each
// window's first token.
std::vector<std::vector<std::int32_t>> stream_windows(const std::vector<std::int32_t>& tokens, std::int64_t length,
                                                      std::optional<std::int32_t> lead);

// What a trial's calibration was, for its report and the archive: the file and its SHA-256, the
// sampler and seed, the documents available and drawn, the tokens, the drawn documents' ids.
nlohmann::json calibration_report(const CalibrationSet& calibration, const std::filesystem::path& file, Sampler sampler,
                                  const nlohmann::json& seed);

// Draws min(samples, documents) documents.
CalibrationSet sample_calibration(const std::vector<std::vector<std::int32_t>>& documents, std::int64_t samples,
                                  Sampler sampler, std::uint64_t seed);

} // namespace optkit::compress
