// Calibration text for data-aware work on a model (compress's calibration, plan hetero's
// indicator): documents from a text file (paragraphs separated by blank lines) or JSONL
// ({"text": ...} rows, or {"messages": [...]} rows rendered through the model's chat template),
// tokenized with the model's tokenizer and cut to the sequence length; documents under 8 tokens
// are dropped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace optkit::model {

// InputError naming `--calib FILE` for a missing or empty file or a malformed JSONL line.
std::vector<std::vector<std::int32_t>> read_calibration_documents(const std::filesystem::path& file,
                                                                  const std::filesystem::path& model_dir,
                                                                  std::int64_t sequence_length);

} // namespace optkit::model
