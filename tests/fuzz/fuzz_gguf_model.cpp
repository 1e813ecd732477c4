// libFuzzer target: a GGUF file given as a model — its header, metadata, the config and tokenizer
// rebuilt from them, and every matrix loaded as the runtime loads it with its first and last rows
// dequantized — must work or throw InputError, never crash or read outside the file, for any bytes.
// Seeds: one-layer random models written by optkit compress: llama as Q8_0 and as Q4_K_M, qwen2
// (q/k/v biases) as Q4_K_M, qwen3 (q/k norms) as Q8_0, and mixtures of 4 experts (each expert a
// slice of its stacked tensor): Mixtral (llama) as Q4_K_M and qwen3moe as Q8_0.
#include "core/error.hpp"
#include "model/model_config.hpp"
#include "model/tokenizer.hpp"
#include "model/weight_store.hpp"
#include "runtime/ggml_weight.hpp"

#include "fuzz_input_file.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& path = fuzz_input_file(data, size, "model.gguf");
  try {
    const optkit::model::WeightStore store(path);
    optkit::model::load_model_config(path);
    optkit::model::Tokenizer::load_folder(path).encode("fuzz the GGUF", true);
    for (const auto& name : store.names()) {
      const auto matrix = store.gguf_matrix(name);
      if (!matrix || matrix->rows == 0)
        continue;
      const auto weight = optkit::runtime::make_ggml_weight(*matrix);
      std::vector<float> row(static_cast<std::size_t>(matrix->cols));
      weight->row(0, row.data());
      weight->row(matrix->rows - 1, row.data());
    }
  } catch (const optkit::InputError&) {
  }
  return 0;
}
