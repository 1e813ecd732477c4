#include "proc/trial_recorder.hpp"

namespace optkit::proc {

std::string
to_string(TrialStatus status) {
  switch (status) {
  case TrialStatus::running:
    return "running";
  case TrialStatus::succeeded:
    return "succeeded";
  case TrialStatus::failed:
    return "failed";
  case TrialStatus::timed_out:
    return "timed_out";
  case TrialStatus::interrupted:
    return "interrupted";
  }
  return "failed";
}

} // namespace optkit::proc
