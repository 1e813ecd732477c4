// The GPU systems the planner tests price against, from the bundled profiles/systems/.
#pragma once

#include "perf/system_spec.hpp"
#include "support/test_support.hpp"

namespace optkit::test {

inline perf::SystemSpec
h100_sxm() {
  return perf::load_system(profiles_dir(), "h100_sxm");
}

} // namespace optkit::test
