#include "model/model_folder.hpp"

#include "core/error.hpp"
#include "model/gguf_model.hpp"
#include "model/model_config.hpp"
#include "model/weight_store.hpp"

#include <fmt/format.h>

namespace optkit::model {

void
check_model_folder(const std::filesystem::path& dir, const std::string& flag) {
  if (is_gguf_model(dir)) {
    const GgufFile file(dir);
    gguf_model_config(file);
    gguf_tokenizer_json(file);
    return;
  }
  if (!std::filesystem::is_directory(dir))
    throw InputError(fmt::format("{} {}: not a directory (expected a Hugging Face model folder or a GGUF file)", flag,
                                 dir.string()));
  load_model_config(dir);
  WeightStore weights(dir);
  if (!std::filesystem::is_regular_file(dir / "tokenizer.json"))
    throw InputError(
        fmt::format("{} {}: no tokenizer.json (the model folder needs one to read text)", flag, dir.string()));
}

} // namespace optkit::model
