// Calibration text for data-aware work on a model (compress's calibration, plan hetero's
// indicator): documents from a text file (paragraphs separated by blank lines) or JSONL
// ({"text": ...} rows, or {"messages": [...]} rows rendered through the model's chat template),
// tokenized with the model's tokenizer and cut to the sequence length; documents under 8 tokens
// are dropped. Or a text file as one token stream, as llama.cpp's tools read their -f file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace optkit::model {

// InputError naming `--calib FILE` for a missing or empty file or a malformed JSONL line.
std::vector<std::vector<std::int32_t>> read_calibration_documents(const std::filesystem::path& file,
                                                                  const std::filesystem::path& model_dir,
                                                                  std::int64_t sequence_length);

// Whether `file` is read as JSONL rows (.jsonl, .json) rather than as plain text.
bool is_jsonl_calibration(const std::filesystem::path& file);

// A plain-text calibration file as one token sequence, as llama-imatrix reads its -f file: the
// whole text less one final newline, tokenized with the tokenizer's special tokens (BOS first).
// InputError naming `--calib FILE` for a missing file or one of under 8 tokens.
std::vector<std::int32_t> read_calibration_stream(const std::filesystem::path& file,
                                                  const std::filesystem::path& model_dir);

} // namespace optkit::model
