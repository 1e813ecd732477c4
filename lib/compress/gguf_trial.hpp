// One trial of a GGUF recipe in a compress worker: the calibration sample drawn (when --calib is
// given) and turned into an importance matrix, or llama-imatrix's read (--imatrix), then the model
// exported to `output`/model.gguf.
// Its report has the shape of the compressed-tensors trials' (metrics, per-tensor errors).
#pragma once

#include "compress/recipe.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

namespace optkit::compress {

inline constexpr const char* kGgufFileName = "model.gguf";
// The importance matrix a trial collected from --calib, with --imatrix-out (llama-imatrix's format).
inline constexpr const char* kImatrixFileName = "imatrix.gguf";

// `payload`: the worker payload of compress_run (model, calib, seed, threads, activations, output).
nlohmann::json run_gguf_trial(const Recipe& recipe, const nlohmann::json& payload);

} // namespace optkit::compress
