// SLO-Tuner's discrete-event serving model (seed 002 §"Simulator"), in virtual time: requests
// arrive (open loop from a schedule, or closed loop from N clients), wait in one FCFS queue and
// are served in engine steps. Two batching disciplines:
//   - static: the paper's — an idle server forms a batch of up to B queued requests (waiting up
//     to max_wait for a fuller one), prefills it as long as its longest prompt (padded), then
//     decodes until its last sequence ends; freed slots stay empty until the batch is done;
//   - continuous: vLLM's and serve-deltas' — every step admits queued requests while fewer than B
//     run and the KV capacity allows, spends a per-step token budget on prompt chunks, and decodes
//     every running sequence by one token (or one speculative round).
// A step costs base + per prefill token + per decoding sequence + per attended KV token, with
// light multiplicative noise. Speculative decoding drafts k tokens at draft width W, then one
// verification step checks them: each drafted token is accepted with probability
// 1 − (1 − α)^W given the ones before it were, so a round yields 1 + (accepted prefix) tokens —
// wide cadences pay k draft steps and a wider verification even when acceptance is low.
//
// Runs of identical decode steps between two events (an arrival that can be admitted, a
// completion) are advanced at once, so a request costs a few events, not one per token: the
// noise of n coalesced steps is drawn as one factor with the variance of their sum.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace optkit::sim {

// A step as the simulator forms it, for a step-cost model other than the linear one
// (SimTiming::step_cost): each prompt chunk's new and already-cached tokens, and each decoding
// sequence's cached tokens.
struct SimStep {
  struct Chunk {
    double new_tokens = 0;
    double cached_tokens = 0;
  };
  std::vector<Chunk> prefills;
  std::vector<double> decode_contexts;
};

struct SimTiming {
  double step_base_s = 0.006;          // fixed cost of one engine step (launch, sampling, scheduling)
  double prefill_token_s = 4e-5;       // per prompt token processed in a step
  double decode_seq_s = 2.5e-4;        // per sequence decoding in a step
  double kv_token_s = 0;               // per cached token a decoding sequence attends to
  double noise_cv = 0.05;              // coefficient of variation of a step's duration
  double draft_step_s = 0.0015;        // one draft-model step for the batch
  double draft_seq_s = 5e-5;           // per sequence and draft width in a draft step
  double verify_token_s = 1.5e-4;      // per drafted token verified, per sequence
  double acceptance = 0.6;             // α: a width-1 draft token's acceptance probability
  std::int64_t kv_capacity_tokens = 0; // prompt + output tokens resident at once (0: unlimited)
  // When set, a step costs step_cost(step) seconds instead of the linear terms above (noise still
  // applies; speculative decoding is not priced through it). A run of n decode steps costs
  // n × the mean of its first and last step's cost, exact for costs linear in the KV length.
  std::function<double(const SimStep&)> step_cost;
};

enum class Batching { continuous, static_batches };
std::string to_string(Batching batching);
Batching parse_batching(const std::string& text); // "continuous" | "static"

struct SimKnobs {
  Batching batching = Batching::continuous;
  int max_num_seqs = 64;                      // B
  std::int64_t max_num_batched_tokens = 8192; // tokens one continuous step may process
  double max_wait_s = 0;                      // static: wait this long for a fuller batch
  int speculative_tokens = 0;                 // k, tokens drafted per verification (0: off)
  int draft_width = 1;                        // W
};

// One request to serve: when it arrives (open loop; closed loop ignores it) and its lengths.
struct SimJob {
  double arrival = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 1;
  // Its prompt is already in this server's KV cache (a disaggregated decode worker's requests): it
  // is admitted straight to decoding, and its first token here is its second overall.
  bool prefilled = false;
};

struct SimRequest {
  std::size_t job = 0; // index into the jobs given
  double arrival = 0, start = -1, first_token = -1, end = -1;
  std::vector<double> token_times; // when each step emitted this request's output (first included)
  std::int64_t prompt_tokens = 0, output_tokens = 0;
  double e2e() const { return end - arrival; }
  double ttft() const { return first_token - arrival; }
};

struct SimOptions {
  std::uint64_t seed = 0;
  bool record_token_times = false; // per-step emission times (bench's ITL needs them)
};

// Serves `jobs` arriving at their own times; every job is served to completion (the queue drains).
// Results in job order. Throws InputError on an impossible setting (B < 1, a prompt larger than
// the KV capacity, a token budget below one decode step).
std::vector<SimRequest> run_open_loop(const SimTiming& timing, const SimKnobs& knobs, std::span<const SimJob> jobs,
                                      const SimOptions& options);

// `concurrency` clients each send their next job the moment their previous one ends (zero think
// time), taking jobs in order, until all are sent.
std::vector<SimRequest> run_closed_loop(const SimTiming& timing, const SimKnobs& knobs, std::span<const SimJob> jobs,
                                        int concurrency, const SimOptions& options);

} // namespace optkit::sim
