// The continuous-batching engine serve-deltas runs (vLLM's iteration-level scheduling on optkit's
// runtime): every step the running sequences each get their next token or prompt chunk, waiting
// requests are admitted first come, first served while --max-num-seqs and the per-step token
// budget (--max-num-batched-tokens, so long prompts are prefilled in chunks between decodes)
// allow and the paged KV cache has blocks for them, and when blocks run out the latest admitted
// sequence is preempted and later recomputed. One engine thread owns the model; requests arrive
// and are cancelled from any thread, and their tokens are handed to each request's sink on the
// engine thread.
#pragma once

#include "runtime/language_model.hpp"
#include "runtime/logits_processor.hpp"
#include "runtime/sampler.hpp"
#include "runtime/token_logprobs.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

namespace optkit::runtime {
class KvCache;
}

namespace optkit::serve {

using runtime::TokenId;
using RequestId = std::uint64_t;
using Clock = std::chrono::steady_clock;

struct EngineOptions {
  int max_num_seqs = 256;                     // sequences in one step (vLLM max_num_seqs)
  std::int64_t max_num_batched_tokens = 2048; // tokens in one step, prompt chunks and decodes together
  // Most distinct deltas active in one step (0: no cap). Requests of active variants and of the
  // base skip the line past one held back by the cap; the bound on its wait: it is admitted at
  // the first step after every request of some active variant that did not skip the line
  // finished — those that did are preempted then (DeltaZip's parent/child preemption).
  int max_deltas = 0;
  // The base counts against max_deltas like a delta: with max_deltas 1, one model per step — what
  // swap-full-model serving (SwapModel, the --baseline swap of serve-deltas) needs.
  bool base_takes_slot = false;
  // What becomes of the line-skippers once their variant's other requests finished while a request
  // waits for the slot: preempted and recomputed later (DeltaZip's policy, the default), or — false,
  // as the swap baseline serves — left to finish while their variant admits no more, after which
  // the waiting request gets the slot (nothing is computed twice; its wait grows by their length).
  bool preempt_skippers = true;
};

struct GenerationParams {
  std::int64_t max_tokens = 16;
  std::int64_t min_tokens = 0; // EOS and stop tokens are suppressed until this many are generated
  bool ignore_eos = false;
  runtime::SamplingParams sampling;                  // a random seed is drawn when none is given
  runtime::Penalties penalties;                      // on the logits before sampling (not on reported logprobs)
  std::vector<std::pair<TokenId, float>> logit_bias; // OpenAI's: added to those tokens' logits, before the penalties
  bool seeded = false;
  std::vector<TokenId> stop_token_ids; // besides the model's EOS
  std::int32_t variant = -1;           // a delta served beside the base (the model's variant id)
  // OpenAI logprobs: -1 none; n >= 0: each generated token's log-probability and the n most likely.
  int logprobs = -1;
  // Also each prompt token's after the first (completions `echo`), with the same n (0 when none).
  bool prompt_logprobs = false;
};

// error: the model failed (out of memory, say); every request in flight ends with it.
enum class FinishReason { none, stop, length, cancelled, error };
const char* finish_reason_name(FinishReason reason); // "stop", "length", "cancelled", "error"; "" for none

// What one step produced for one request; the last call has finish != none.
struct StepOutput {
  std::optional<TokenId> token;                           // none on a cancellation or an error
  std::optional<runtime::PositionLogprobs> logprobs;      // the token's, when asked for
  std::vector<runtime::PositionLogprobs> prompt_logprobs; // with the first token, when asked: prompt tokens 1..n-1
  std::string error;                                      // what failed, with FinishReason::error
  FinishReason finish = FinishReason::none;
  std::int64_t prompt_tokens = 0;
  std::optional<std::int64_t> cached_tokens; // of the prompt, found in the prefix cache (none: no prefix caching)
  std::int64_t generated_tokens = 0;
  Clock::time_point arrival, scheduled, first_token, finished;
};
using OutputSink = std::function<void(const StepOutput&)>;

struct EngineStats {
  std::int64_t running = 0, waiting = 0;
  std::int64_t preemptions = 0, steps = 0;
  std::int64_t prompt_tokens = 0, generated_tokens = 0;
  bool prefix_caching = false;
  std::int64_t prefix_cache_queries = 0, prefix_cache_hits = 0; // tokens looked up at admission, tokens found
  std::int64_t kv_used_blocks = 0;
  std::optional<std::int64_t> kv_capacity_blocks;
  std::map<std::int32_t, std::int64_t> running_by_variant, waiting_by_variant; // -1: the base
};

class Engine {
public:
  // `kv` is the model's cache (for admission by free blocks); it must outlive the engine.
  Engine(std::unique_ptr<runtime::LanguageModel> model, const runtime::KvCache& kv, EngineOptions options);
  ~Engine(); // stop()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws InputError, naming the limit, when it can never run: an empty
  // prompt, prompt + max_tokens beyond the model's context, or more KV blocks than the cache has.
  RequestId submit(std::vector<TokenId> prompt, GenerationParams params, OutputSink sink);
  // Stops a request at the next step boundary (its sink gets finish = cancelled); unknown or
  // finished ids are ignored. Its KV blocks are freed then.
  void cancel(RequestId id);
  // Runs `task` on the engine thread between two steps — where the model may be changed (a delta
  // installed or evicted) — and returns once it ran, rethrowing what it threw. Must not be called
  // from a sink (that is the engine thread: it would wait for itself). Throws RuntimeFailure once
  // the engine is stopping.
  void run_between_steps(std::function<void()> task);
  // Cancels everything and joins the engine thread. Idempotent.
  void stop();

  EngineStats stats() const;
  const model::ModelConfig& config() const { return m_model->config(); }

private:
  struct Active;
  struct Planned;
  struct StepPlan;
  void loop();
  // One step: schedule (running requests, then admissions), the forward pass, then each
  // sampling request's next token through the logits processor, and the finished ones released.
  bool step();
  StepPlan schedule();
  void schedule_running(StepPlan& plan);
  void admit_waiting(StepPlan& plan);
  std::vector<float> forward(std::vector<Planned>& rows, std::int64_t& prompt_tokens);
  void collect_prompt_logprobs(Active& request, std::span<const float> chunk_logits);
  FinishReason emit_next_token(Active& request, std::span<const float> row);
  FinishReason finish_reason(const Active& request, TokenId token) const;
  void release(Active& request);        // gives its KV blocks back
  void cancel_request(Active& request); // released, and its sink told
  void preempt(Active& request);
  std::int64_t release_skippers();
  // The active variants kept active only by requests that skipped the line, while a request waits
  // for a slot the --max-deltas cap holds (else none).
  std::set<std::int32_t> held_only_by_skippers() const;
  bool awaits_shared_prefix(const Active& request) const;
  bool takes_slot(std::int32_t variant) const { return variant >= 0 || m_options.base_takes_slot; }

  std::unique_ptr<runtime::LanguageModel> m_model;
  const runtime::KvCache& m_kv;
  EngineOptions m_options;

  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::deque<std::unique_ptr<Active>> m_incoming;
  std::unordered_set<RequestId> m_cancelled;
  std::deque<std::packaged_task<void()>> m_tasks; // run_between_steps
  bool m_stopping = false;
  RequestId m_next_id = 1;
  EngineStats m_stats; // under m_mutex

  // Engine-thread state.
  runtime::LogitsProcessor m_logits;
  std::deque<std::unique_ptr<Active>> m_waiting;
  std::vector<std::unique_ptr<Active>> m_running; // in admission order
  std::thread m_thread;
};

} // namespace optkit::serve
