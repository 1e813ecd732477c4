// The importance matrix llama.cpp's k-quants weigh rounding errors by (llama-imatrix's
// statistic): for every decoder linear layer, the mean square of each input column over the
// calibration tokens (in_sum2 / count). Collected through optkit's runtime, one decoder layer at
// a time over the whole calibration set, in full precision: the next layer's inputs come from the
// unquantized layer, as llama-imatrix runs the original model. Or read from llama-imatrix's GGUF
// file (general.type imatrix: <tensor>.in_sum2 and <tensor>.counts per weight) or legacy
// imatrix.dat, and written in the GGUF format (compress --imatrix-out), so llama-quantize takes
// optkit's statistic.
#pragma once

#include "compress/calibration.hpp"
#include "model/model_config.hpp"
#include "runtime/activation_precision.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace optkit::compress {

// One weight's statistic as llama-imatrix stores it, and what the k-quants weigh by.
struct WeightImportance {
  std::vector<float> in_sum2; // Σx² of each input column
  float count = 0;            // over this many tokens
  std::vector<float> mean;    // in_sum2 / count in float, as llama-quantize reads a file; 1 with no count
};

// A weight's statistic from its Σx² and count, with the means (in_sum2 / count in float; 1 with
// no count).
WeightImportance weight_importance(std::vector<float> in_sum2, float count);

struct ImportanceMatrix {
  // HF module path (model.layers.0.self_attn.q_proj) → its statistic.
  std::map<std::string, WeightImportance> weights;
  std::int64_t tokens = 0;
  std::int64_t samples = 0;       // sequences (llama-imatrix: chunks)
  std::int64_t sample_tokens = 0; // tokens a sequence holds at most (llama-imatrix: the chunk size)
  std::string dataset;            // what it was collected over
  std::string source;             // the file it was read from; empty when collected by optkit
};

// A llama-imatrix file: its GGUF format, or its legacy binary one (imatrix.dat, --output-format
// dat; what most published importance matrices are), read as llama-quantize reads each. InputError
// naming the file for anything else, a truncated file, or a value that is negative or not finite.
// With `config`, a GGUF file's stacked experts entries (in_sum2 [columns, experts], counts [1,
// experts]) become each expert's weight, named as `config` names it; without, they are skipped.
ImportanceMatrix read_importance_matrix(const std::filesystem::path& file, const model::ModelConfig* config = nullptr);

// InputError naming `file` unless each weight of `matrix` that the model has gets one value per
// input column (an importance matrix of another model does not fit).
void check_importance_matrix_fits(const ImportanceMatrix& matrix, const std::filesystem::path& model_dir,
                                  const std::filesystem::path& file);

// Writes `matrix` as llama-imatrix's GGUF file: each weight's <gguf name>.in_sum2 and .counts, with
// the dataset, chunk count and chunk size; read back, it gives the same means bit for bit.
void write_importance_matrix(const ImportanceMatrix& matrix, const std::filesystem::path& file);

ImportanceMatrix collect_importance_matrix(const std::filesystem::path& model_dir, const CalibrationSet& calibration,
                                           unsigned threads, runtime::ActivationPrecision activations);

} // namespace optkit::compress
