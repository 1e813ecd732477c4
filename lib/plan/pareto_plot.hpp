// The Pareto picture as a standalone SVG: tokens/s/GPU against tokens/s/user for every feasible
// configuration (aggregated, disaggregated and static in their own colours), each mode's
// frontier as a line, the TPOT limit as a vertical line, and the chosen configuration marked.
#pragma once

#include "plan/search.hpp"

#include <string>

namespace optkit::plan {

std::string pareto_svg(const PlanResult& result, const PlanRequest& request, const std::string& title);

} // namespace optkit::plan
