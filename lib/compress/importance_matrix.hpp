// The importance matrix llama.cpp's k-quants weigh rounding errors by (llama-imatrix's
// statistic): for every decoder linear layer, the mean square of each input column over the
// calibration tokens (in_sum2 / count). Collected through optkit's runtime, one decoder layer at
// a time over the whole calibration set, in full precision: the next layer's inputs come from the
// unquantized layer, as llama-imatrix runs the original model. Or read from llama-imatrix's GGUF
// file (general.type imatrix: <tensor>.in_sum2 and <tensor>.counts per weight).
#pragma once

#include "compress/calibration.hpp"
#include "runtime/activation_precision.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace optkit::compress {

struct ImportanceMatrix {
  // HF module path (model.layers.0.self_attn.q_proj) → mean x² of each input column.
  std::map<std::string, std::vector<float>> columns;
  std::int64_t tokens = 0;
  std::int64_t samples = 0; // sequences (llama-imatrix: chunks)
  std::string dataset;      // what it was collected over
};

// InputError naming the file for anything but a dense model's llama-imatrix GGUF.
ImportanceMatrix read_importance_matrix(const std::filesystem::path& file);

ImportanceMatrix collect_importance_matrix(const std::filesystem::path& model_dir, const CalibrationSet& calibration,
                                           unsigned threads, runtime::ActivationPrecision activations);

} // namespace optkit::compress
