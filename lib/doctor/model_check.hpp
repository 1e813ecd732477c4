// `optkit doctor --model DIR`: whether optkit understands a model folder before hours are spent on
// it — its config.json, its tokenizer (every component named, a sample text encoded and decoded),
// its special tokens and its chat template (where it comes from, a sample chat rendered and
// tokenized). Each finding is one doctor check; anything optkit cannot load is a FAIL naming why.
#pragma once

#include "doctor/doctor.hpp"

#include <filesystem>
#include <vector>

namespace optkit::doctor {

std::vector<Check> check_model_folder(const std::filesystem::path& model_dir);

} // namespace optkit::doctor
