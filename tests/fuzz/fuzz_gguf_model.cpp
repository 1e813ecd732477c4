// libFuzzer target: a GGUF file given as a model — its header, metadata, the config and tokenizer
// rebuilt from them, and every matrix loaded as the runtime loads it with its first and last rows
// dequantized — must work or throw InputError, never crash or read outside the file, for any bytes.
// Seeds: a one-layer random model written by optkit compress as Q8_0 and as Q4_K_M.
#include "core/error.hpp"
#include "model/model_config.hpp"
#include "model/tokenizer.hpp"
#include "model/weight_store.hpp"
#include "runtime/ggml_weight.hpp"

#include "../support/scratch_dir.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const optkit::test::ScratchDir scratch; // removed when the fuzzer exits
  static const auto path = scratch / "model.gguf";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
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
