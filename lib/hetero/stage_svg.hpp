// A hetero plan as a picture (`optkit plan hetero --svg FILE`): one row per pipeline stage, in
// device order — the GPU, its node, its layers and their bits on the left; then three panels of
// bars on their own axes: memory used against the GPU's capacity, the stage's time for one
// prefill micro-batch, and its time for one decode step. Self-contained SVG 1.1.
#pragma once

#include "hetero/hetero_run.hpp"

#include <string>

namespace optkit::hetero {

std::string stage_svg(const HeteroRun& run);

} // namespace optkit::hetero
