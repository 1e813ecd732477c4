#include "archive/records.hpp"

#include <algorithm>

namespace optkit::archive {

std::string
to_string(RunStatus status) {
  switch (status) {
  case RunStatus::running:
    return "running";
  case RunStatus::succeeded:
    return "succeeded";
  case RunStatus::goal_not_met:
    return "goal_not_met";
  case RunStatus::failed:
    return "failed";
  case RunStatus::interrupted:
    return "interrupted";
  }
  return "failed";
}

const std::vector<std::string>&
run_status_names() {
  static const std::vector<std::string> names = {"running", "succeeded",   "goal_not_met",
                                                 "failed",  "interrupted", "abandoned"};
  return names;
}

} // namespace optkit::archive
