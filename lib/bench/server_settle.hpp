// Before each open-loop trial, bench waits for the server to drain what the trials before left
// (streams it is still generating for clients that gave up, queues still emptying), so that no
// trial's result depends on the one before it: until its /metrics show nothing running or waiting
// (where it exports them, server_queue.hpp) and a probe request, sent alone, comes back within a
// limit set from the closed-loop gate's latencies. The wait is capped and what it saw recorded.
#pragma once

#include "bench/certification.hpp"
#include "bench/load_generator.hpp"

namespace optkit::bench {

SettleReport settle_server(const LoadGenerator& generator, const PreparedRequest& probe, double probe_limit_s,
                           double timeout_s);

} // namespace optkit::bench
