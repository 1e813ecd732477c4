// The cheap checks a command makes on a model folder (or GGUF file) before any child starts, so bad input is
// one error line: the folder, config.json, every safetensors header (mapped, not read) and the
// tokenizer file.
#pragma once

#include <filesystem>
#include <string>

namespace optkit::model {

// InputError naming `flag` and the folder when any check fails.
void check_model_folder(const std::filesystem::path& dir, const std::string& flag);

} // namespace optkit::model
