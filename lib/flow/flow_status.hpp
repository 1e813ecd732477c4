// What a flow's output folder holds: each task finished (with its exit code and time), left
// unfinished by an interruption, or not started; and whether the package exists. Read from the
// folder alone, so `flow status` works while the flow runs and after it was killed.
#pragma once

#include "core/table.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace optkit::flow {

nlohmann::json flow_status(const std::filesystem::path& output);
Table status_table(const nlohmann::json& status);

} // namespace optkit::flow
