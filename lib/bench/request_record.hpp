// What the load generator records about one request. Times are seconds from the trial's start
// on one monotonic clock; latencies are taken from `intended` (when the schedule said the
// request should leave), so a generator that falls behind inflates them instead of hiding the
// backlog (no coordinated omission).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace optkit::bench {

struct RequestRecord {
  std::size_t index = 0;
  double intended = 0;             // scheduled send time
  double sent = -1;                // first byte written (-1: never)
  double first_token = -1;         // first chunk carrying output text (-1: none)
  double end = -1;                 // response complete or failed
  std::vector<double> chunk_times; // every chunk that carried output text
  std::int64_t input_tokens = 0;   // server usage when reported, else the plan's count
  std::int64_t output_tokens = 0;  // server usage when reported, else chunks counted
  bool usage_reported = false;
  double server_queue_s = -1; // the server's own queue time when it reports one
  int status = 0;
  std::string error;              // empty when the request succeeded
  bool cancelled = false;         // abandoned by the client as the profile planned (cancel_fraction): no error
  std::int64_t conversation = -1; // multi-turn: which conversation (-1: a single request)
  int turn = 0;                   // multi-turn: the turn within it, from 0

  bool ok() const { return error.empty() && !cancelled; } // completed without an error
  double dispatch_lag() const { return sent >= 0 ? sent - intended : -1; }
  double ttft() const { return first_token - intended; }
  double e2e() const { return end - intended; }
  // (e2e − TTFT)/(output tokens − 1); -1 when fewer than two output tokens.
  double tpot() const;
};

} // namespace optkit::bench
