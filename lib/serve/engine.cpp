#include "serve/engine.hpp"

#include "core/error.hpp"
#include "runtime/kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <span>

namespace optkit::serve {

const char*
finish_reason_name(FinishReason reason) {
  switch (reason) {
  case FinishReason::stop:
    return "stop";
  case FinishReason::length:
    return "length";
  case FinishReason::cancelled:
    return "cancelled";
  case FinishReason::error:
    return "error";
  case FinishReason::none:
    break;
  }
  return "";
}

struct Engine::Active {
  RequestId id = 0;
  std::vector<TokenId> tokens; // the prompt, then every generated token
  std::int64_t prompt_len = 0;
  std::int64_t generated = 0;
  std::int64_t computed = 0; // tokens whose keys and values are in the cache
  std::optional<runtime::SequenceId> sequence;
  GenerationParams params;
  runtime::Sampler sampler;
  OutputSink sink;
  Clock::time_point arrival, scheduled, first_token;
  bool skipped_line = false;                              // admitted past a request the --max-deltas cap held back
  std::vector<runtime::PositionLogprobs> prompt_logprobs; // collected while the prompt is prefilled
  std::optional<std::int64_t> cached_tokens;              // prompt tokens found in the prefix cache at admission

  Active(GenerationParams p) : params(std::move(p)), sampler(params.sampling) {}

  // Logprobs of prompt tokens not yet collected (they are sent with the first generated token).
  bool wants_prompt_logprobs() const {
    return params.prompt_logprobs && generated == 0 &&
           static_cast<std::int64_t>(prompt_logprobs.size()) < prompt_len - 1;
  }

  // Tokens this request may put in one step: with prompt logprobs every position yields a row of
  // vocabulary logits, so its chunks are kept short (128 rows of a 128k vocabulary: 64 MiB) and
  // within what the step has left of its rows (`logit_rows`).
  std::int64_t chunk_cap(std::int64_t logit_rows) const {
    return wants_prompt_logprobs() ? std::min<std::int64_t>(128, logit_rows) : std::numeric_limits<std::int64_t>::max();
  }

  StepOutput output(FinishReason finish) const {
    StepOutput out;
    out.finish = finish;
    out.prompt_tokens = prompt_len;
    out.cached_tokens = cached_tokens;
    out.generated_tokens = generated;
    out.arrival = arrival;
    out.scheduled = scheduled;
    out.first_token = first_token;
    if (finish != FinishReason::none)
      out.finished = Clock::now();
    return out;
  }
};

Engine::Engine(std::unique_ptr<runtime::LanguageModel> model, const runtime::KvCache& kv, EngineOptions options)
    : m_model(std::move(model)), m_kv(kv), m_options(options) {
  m_stats.prefix_caching = kv.prefix_caching();
  if (m_options.max_num_seqs < 1)
    throw InputError("max_num_seqs must be at least 1, got " + std::to_string(m_options.max_num_seqs));
  if (m_options.max_num_batched_tokens < 1)
    throw InputError("max_num_batched_tokens must be at least 1, got " +
                     std::to_string(m_options.max_num_batched_tokens));
  m_thread = std::thread([this] { loop(); });
}

Engine::~Engine() {
  stop();
}

RequestId
Engine::submit(std::vector<TokenId> prompt, GenerationParams params, OutputSink sink) {
  const auto& config = m_model->config();
  if (prompt.empty())
    throw InputError("the prompt is empty");
  if (params.max_tokens < 1)
    throw InputError("max_tokens must be at least 1, got " + std::to_string(params.max_tokens));
  if (params.min_tokens < 0 || params.min_tokens > params.max_tokens)
    throw InputError("min_tokens must be between 0 and max_tokens (" + std::to_string(params.max_tokens) + "), got " +
                     std::to_string(params.min_tokens));
  for (const TokenId t : prompt)
    if (t < 0 || t >= config.vocab_size)
      throw InputError("prompt token " + std::to_string(t) + " is outside the vocabulary (0.." +
                       std::to_string(config.vocab_size - 1) + ")");
  for (const auto& [t, bias] : params.logit_bias)
    if (t < 0 || t >= config.vocab_size)
      throw InputError("logit_bias names token " + std::to_string(t) + ", outside the vocabulary (0.." +
                       std::to_string(config.vocab_size - 1) + ")");
  const std::int64_t total = static_cast<std::int64_t>(prompt.size()) + params.max_tokens;
  if (total > config.max_position_embeddings)
    throw InputError("the prompt (" + std::to_string(prompt.size()) + " tokens) plus max_tokens (" +
                     std::to_string(params.max_tokens) + ") exceeds the model's context of " +
                     std::to_string(config.max_position_embeddings) + " tokens");
  if (const auto capacity = m_kv.capacity_blocks()) {
    const std::int64_t blocks = (total + m_kv.block_tokens() - 1) / m_kv.block_tokens();
    if (blocks > *capacity)
      throw InputError("the prompt plus max_tokens needs " + std::to_string(blocks) +
                       " KV cache blocks and the cache " + "holds " + std::to_string(*capacity) +
                       " (raise the KV cache memory or lower max_tokens)");
  }
  if (!params.seeded) {
    static thread_local std::mt19937_64 seeds{std::random_device{}()};
    params.sampling.seed = seeds();
  }
  auto request = std::make_unique<Active>(std::move(params)); // the sampler validates its parameters
  request->prompt_len = static_cast<std::int64_t>(prompt.size());
  request->tokens = std::move(prompt);
  request->sink = std::move(sink);
  request->arrival = Clock::now();
  const std::lock_guard lock(m_mutex);
  if (m_stopping)
    throw RuntimeFailure("the engine is stopping");
  request->id = m_next_id++;
  const RequestId id = request->id;
  m_incoming.push_back(std::move(request));
  m_wake.notify_one();
  return id;
}

void
Engine::cancel(RequestId id) {
  const std::lock_guard lock(m_mutex);
  m_cancelled.insert(id);
  m_wake.notify_one();
}

void
Engine::run_between_steps(std::function<void()> task) {
  std::packaged_task<void()> packaged(std::move(task));
  auto done = packaged.get_future();
  {
    const std::lock_guard lock(m_mutex);
    if (m_stopping)
      throw RuntimeFailure("the engine is stopping");
    m_tasks.push_back(std::move(packaged));
    m_wake.notify_one();
  }
  done.get();
}

void
Engine::stop() {
  {
    const std::lock_guard lock(m_mutex);
    m_stopping = true;
    m_wake.notify_one();
  }
  if (m_thread.joinable())
    m_thread.join();
}

EngineStats
Engine::stats() const {
  const std::lock_guard lock(m_mutex);
  return m_stats;
}

void
Engine::release(Active& request) {
  if (request.sequence) {
    m_model->remove_sequence(*request.sequence);
    request.sequence.reset();
  }
}

void
Engine::cancel_request(Active& request) {
  release(request);
  request.sink(request.output(FinishReason::cancelled));
}

void
Engine::preempt(Active& request) {
  // Recompute: the blocks go back now; on readmission the prompt and what was generated so far
  // are prefilled again, and generation continues (the sampler keeps its state).
  release(request);
  request.computed = 0;
}

std::set<std::int32_t>
Engine::held_only_by_skippers() const {
  if (m_options.max_deltas <= 0)
    return {};
  std::set<std::int32_t> active, held_by_others;
  for (const auto& r : m_running)
    if (takes_slot(r->params.variant)) {
      active.insert(r->params.variant);
      if (!r->skipped_line)
        held_by_others.insert(r->params.variant);
    }
  const bool someone_blocked = std::any_of(m_waiting.begin(), m_waiting.end(), [&](const auto& r) {
    return takes_slot(r->params.variant) && active.count(r->params.variant) == 0;
  });
  if (!someone_blocked || static_cast<int>(active.size()) < m_options.max_deltas)
    return {};
  std::set<std::int32_t> held;
  std::set_difference(active.begin(), active.end(), held_by_others.begin(), held_by_others.end(),
                      std::inserter(held, held.end()));
  return held;
}

std::int64_t
Engine::release_skippers() {
  // DeltaZip's bound on starvation under --max-deltas: a variant kept active only by requests
  // that skipped the line gives its slot up while a request waits for one — they are preempted
  // (recomputed later, in arrival order) so that the waiting variant gets the slot at once.
  // (Without preempt_skippers they finish instead: step() admits no more of their variant.)
  if (!m_options.preempt_skippers)
    return 0;
  const auto released = held_only_by_skippers();
  std::int64_t preempted = 0;
  for (auto it = m_running.begin(); it != m_running.end();) {
    const std::int32_t v = (*it)->params.variant;
    if (released.count(v) > 0) {
      preempt(**it);
      (*it)->skipped_line = false;
      // back in arrival order: behind the request that waits for the slot
      const auto at =
          std::find_if(m_waiting.begin(), m_waiting.end(), [&](const auto& w) { return w->id > (*it)->id; });
      m_waiting.insert(at, std::move(*it));
      it = m_running.erase(it);
      ++preempted;
    } else {
      ++it;
    }
  }
  return preempted;
}

void
Engine::loop() {
  while (true) {
    std::unordered_set<RequestId> cancelled;
    std::deque<std::packaged_task<void()>> tasks;
    {
      std::unique_lock lock(m_mutex);
      m_wake.wait(lock, [&] {
        return m_stopping || !m_incoming.empty() || !m_cancelled.empty() || !m_running.empty() || !m_waiting.empty() ||
               !m_tasks.empty();
      });
      tasks.swap(m_tasks);
      while (!m_incoming.empty()) {
        m_waiting.push_back(std::move(m_incoming.front()));
        m_incoming.pop_front();
      }
      cancelled.swap(m_cancelled);
      if (m_stopping) {
        lock.unlock();
        for (auto& task : tasks) // their callers wait for them
          task();
        for (auto& r : m_running)
          cancel_request(*r);
        for (auto& r : m_waiting)
          cancel_request(*r);
        m_running.clear();
        m_waiting.clear();
        return;
      }
    }
    for (auto& task : tasks) // between steps: the model is not in use
      task();
    const auto drop = [&](auto& queue) {
      for (auto it = queue.begin(); it != queue.end();)
        if (cancelled.count((*it)->id)) {
          cancel_request(**it);
          it = queue.erase(it);
        } else {
          ++it;
        }
    };
    drop(m_running);
    drop(m_waiting);
    bool progressed = false;
    try {
      progressed = step();
    } catch (const std::exception& e) {
      // The model failed: every request in flight ends with the reason; the engine goes on.
      for (auto& r : m_running) {
        release(*r);
        auto out = r->output(FinishReason::error);
        out.error = e.what();
        r->sink(out);
      }
      m_running.clear();
    }
    {
      const std::lock_guard lock(m_mutex);
      m_stats.running = static_cast<std::int64_t>(m_running.size());
      m_stats.waiting = static_cast<std::int64_t>(m_waiting.size() + m_incoming.size());
      m_stats.running_by_variant.clear();
      m_stats.waiting_by_variant.clear();
      for (const auto& r : m_running)
        ++m_stats.running_by_variant[r->params.variant];
      for (const auto* queue : {&m_waiting, &m_incoming})
        for (const auto& r : *queue)
          ++m_stats.waiting_by_variant[r->params.variant];
      m_stats.kv_used_blocks = m_kv.used_blocks();
      m_stats.kv_capacity_blocks = m_kv.capacity_blocks();
    }
    if (!progressed && m_running.empty() && !m_waiting.empty()) {
      // Nothing could be admitted with nothing running: only possible if the cache is held
      // elsewhere. Wait for a change rather than spin.
      std::unique_lock lock(m_mutex);
      m_wake.wait_for(lock, std::chrono::milliseconds(10));
    }
  }
}

// Blocks that a request's prompt begins with, that the prefix cache does not hold yet, and that a
// running request of the same variant is computing (in this step or a later one): the request
// waits for them to be cached instead of computing them a second time. Requests that arrive
// together with a shared system prompt, and the n choices of one request, compute it once. A
// request waits at most while another computes that prefix, which leaves the running set when it
// is preempted.
bool
Engine::awaits_shared_prefix(const Active& request) const {
  const std::int64_t block = m_kv.block_tokens();
  const auto prompt = std::span<const TokenId>(request.tokens);
  const std::int64_t usable = (static_cast<std::int64_t>(prompt.size()) - 1) / block * block;
  if (usable == 0)
    return false;
  std::optional<std::int64_t> cached; // looked up only once a running request shares blocks
  for (const auto& other : m_running) {
    if (other->params.variant != request.params.variant || other->computed >= usable)
      continue;
    const auto limit = std::min<std::int64_t>(usable, static_cast<std::int64_t>(other->tokens.size()));
    const auto differs = std::mismatch(prompt.begin(), prompt.begin() + limit, other->tokens.begin()).first;
    const std::int64_t shared = (differs - prompt.begin()) / block * block;
    if (other->computed >= shared)
      continue;
    if (!cached)
      cached = m_kv.cached_prefix(prompt, request.params.variant);
    if (shared > *cached)
      return true;
  }
  return false;
}

// One request's share of a step: `tokens` of it computed; `samples` when the chunk reaches the
// end of what is known (its last row gives the next token); `all_logits` while prompt logprobs
// are still to collect (a row per position).
struct Engine::Planned {
  Active* request;
  std::int64_t tokens;
  bool samples;
  bool all_logits = false;
};

// What schedule() decided for a step and what it had left when it stopped.
struct Engine::StepPlan {
  std::vector<Planned> rows;
  std::int64_t budget = 0;          // tokens the step may still take
  std::optional<std::int64_t> free; // KV blocks not yet promised (none: the cache has no limit)
  std::int64_t logit_rows = 512;    // rows of vocabulary logits for prompt logprobs, all requests
  std::int64_t preempted = 0;       // requests that gave their blocks back
  std::int64_t prefix_queries = 0;  // prompt tokens looked up in the prefix cache
  std::int64_t prefix_hits = 0;     // and found there
  bool blocked = false;             // a waiting request was held back by the --max-deltas cap

  void take(Active& request, std::int64_t n, std::int64_t pending, std::int64_t blocks) {
    if (request.wants_prompt_logprobs())
      logit_rows -= n;
    rows.push_back({&request, n, n == pending});
    budget -= n;
    if (free)
      *free -= blocks;
  }
};

bool
Engine::step() {
  StepPlan plan = schedule();
  if (plan.rows.empty()) {
    if (plan.preempted > 0) {
      const std::lock_guard lock(m_mutex);
      m_stats.preemptions += plan.preempted;
    }
    return false;
  }
  {
    const std::lock_guard lock(m_mutex);
    m_stats.prefix_cache_queries += plan.prefix_queries;
    m_stats.prefix_cache_hits += plan.prefix_hits;
  }
  std::int64_t prompt_tokens = 0;
  const std::vector<float> logits = forward(plan.rows, prompt_tokens);
  const auto vocab = static_cast<std::size_t>(m_model->config().vocab_size);

  std::int64_t generated = 0;
  std::vector<Active*> done;
  std::size_t next_row = 0;
  for (const Planned& planned : plan.rows) {
    Active& request = *planned.request;
    const std::size_t rows = planned.all_logits ? static_cast<std::size_t>(planned.tokens) : 1;
    const std::span<const float> step_logits(logits.data() + next_row * vocab, rows * vocab);
    next_row += rows;
    if (planned.all_logits)
      collect_prompt_logprobs(request, step_logits);
    request.computed += planned.tokens;
    if (!planned.samples)
      continue;
    ++generated;
    if (emit_next_token(request, step_logits.last(vocab)) != FinishReason::none)
      done.push_back(&request);
  }
  for (Active* request : done) {
    release(*request); // its sink already has the last token
    std::erase_if(m_running, [&](const auto& r) { return r.get() == request; });
  }
  plan.preempted += release_skippers();
  const std::lock_guard lock(m_mutex);
  m_stats.steps += 1;
  m_stats.preemptions += plan.preempted;
  m_stats.prompt_tokens += prompt_tokens;
  m_stats.generated_tokens += generated;
  return true;
}

Engine::StepPlan
Engine::schedule() {
  StepPlan plan;
  plan.budget = m_options.max_num_batched_tokens;
  plan.free = m_kv.free_blocks();
  schedule_running(plan);
  admit_waiting(plan);
  return plan;
}

// Running sequences first, in admission order; when the cache is short, the latest admitted
// gives its blocks back (and goes to the front of the queue).
void
Engine::schedule_running(StepPlan& plan) {
  for (std::size_t i = 0; i < m_running.size() && plan.budget > 0;) {
    Active& request = *m_running[i];
    const std::int64_t pending = static_cast<std::int64_t>(request.tokens.size()) - request.computed;
    const std::int64_t n = std::min({pending, plan.budget, request.chunk_cap(plan.logit_rows)});
    if (n == 0) {
      ++i;
      continue;
    }
    const std::int64_t need = m_kv.blocks_needed(*request.sequence, n);
    bool self_preempted = false;
    while (plan.free && need > *plan.free) {
      auto victim = std::move(m_running.back());
      m_running.pop_back();
      preempt(*victim);
      ++plan.preempted;
      const bool self = victim.get() == &request;
      m_waiting.push_front(std::move(victim));
      plan.free = m_kv.free_blocks();
      if (self) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted)
      return; // everything after it was preempted too
    plan.take(request, n, pending, need);
    ++i;
  }
}

// Then waiting requests, first come first served, while there is room. With --max-deltas, a
// request whose variant is not active while the cap is reached waits; later requests of active
// variants (or the base) may go past it — skip the line — and are marked so that they give
// their slot back (see release_skippers) instead of keeping the variant active forever.
void
Engine::admit_waiting(StepPlan& plan) {
  std::set<std::int32_t> active;
  for (const auto& r : m_running)
    if (takes_slot(r->params.variant))
      active.insert(r->params.variant);
  // Without preempt_skippers, a variant kept active only by its line-skippers takes no more.
  const auto draining = m_options.preempt_skippers ? std::set<std::int32_t>{} : held_only_by_skippers();
  for (auto it = m_waiting.begin();
       it != m_waiting.end() && plan.budget > 0 && static_cast<int>(m_running.size()) < m_options.max_num_seqs;) {
    Active& request = **it;
    const std::int32_t v = request.params.variant;
    const bool allowed = (!takes_slot(v) || active.count(v) > 0 || m_options.max_deltas <= 0 ||
                          static_cast<int>(active.size()) < m_options.max_deltas) &&
                         draining.count(v) == 0;
    if (!allowed) {
      plan.blocked = true;
      ++it;
      continue;
    }
    const std::int64_t known = static_cast<std::int64_t>(request.tokens.size());
    if (std::min({known, plan.budget, request.chunk_cap(plan.logit_rows)}) == 0) {
      ++it;
      continue;
    }
    // With prefix caching, the blocks a cached prefix fills are taken, not computed (not when
    // every prompt position's logits are wanted). Taking a cached block no one held uses one of
    // the free blocks the budget counts.
    const bool lookup = m_kv.prefix_caching() && !request.wants_prompt_logprobs();
    if (lookup && awaits_shared_prefix(request)) {
      ++it;
      continue;
    }
    request.sequence = m_model->add_sequence();
    std::int64_t reused = 0, taken = 0;
    if (lookup) {
      const auto used_before = m_kv.used_blocks();
      reused = m_model->reuse_prefix(*request.sequence, request.tokens, v);
      taken = m_kv.used_blocks() - used_before;
    }
    const std::int64_t pending = known - reused;
    const std::int64_t n = std::min({pending, plan.budget, request.chunk_cap(plan.logit_rows)});
    const std::int64_t need = m_kv.blocks_needed(*request.sequence, n);
    if (plan.free && need + taken > *plan.free) {
      release(request);
      return; // out of cache: first come, first served from here on
    }
    if (plan.free)
      *plan.free -= taken;
    request.computed = reused;
    if (lookup) {
      plan.prefix_queries += known;
      plan.prefix_hits += reused;
    }
    if (m_kv.prefix_caching() && request.generated == 0)
      request.cached_tokens = reused;
    if (request.scheduled == Clock::time_point{})
      request.scheduled = Clock::now();
    request.skipped_line = plan.blocked && takes_slot(v);
    if (takes_slot(v))
      active.insert(v);
    plan.take(request, n, pending, need);
    m_running.push_back(std::move(*it));
    it = m_waiting.erase(it);
  }
}

// The forward pass over the planned chunks, rows of one variant together (the runtime adds each
// variant's Δ over one run of rows); `prompt_tokens` counts the prompt positions computed.
std::vector<float>
Engine::forward(std::vector<Planned>& rows, std::int64_t& prompt_tokens) {
  std::stable_sort(rows.begin(), rows.end(), [](const Planned& a, const Planned& b) {
    return a.request->params.variant < b.request->params.variant;
  });
  std::vector<runtime::SequenceInput> inputs;
  inputs.reserve(rows.size());
  for (Planned& p : rows) {
    const Active& r = *p.request;
    const auto* first = r.tokens.data() + r.computed;
    // Echo wants the prompt's logprobs: every row of a chunk that still has prompt positions whose
    // next token's logprob is not collected (a recompute after preemption collected them already).
    p.all_logits = r.wants_prompt_logprobs();
    inputs.push_back({*r.sequence, std::span<const TokenId>(first, static_cast<std::size_t>(p.tokens)), p.all_logits,
                      r.params.variant});
    if (r.computed < r.prompt_len)
      prompt_tokens += std::min(p.tokens, r.prompt_len - r.computed);
  }
  return m_model->forward(inputs);
}

// Row j of a chunk's logits predicts the token at position computed + j + 1: a prompt token's
// logprob, kept until the first generated token carries them.
void
Engine::collect_prompt_logprobs(Active& request, std::span<const float> chunk_logits) {
  const auto vocab = static_cast<std::size_t>(m_model->config().vocab_size);
  const int top_n = std::max(request.params.logprobs, 0);
  for (std::size_t j = 0; j < chunk_logits.size() / vocab; ++j) {
    const std::int64_t next = request.computed + static_cast<std::int64_t>(j) + 1;
    if (next >= request.prompt_len || next != static_cast<std::int64_t>(request.prompt_logprobs.size()) + 1)
      continue;
    request.prompt_logprobs.push_back(runtime::position_logprobs(
        chunk_logits.subspan(j * vocab, vocab), request.tokens[static_cast<std::size_t>(next)], top_n));
  }
}

// Samples the request's next token from `row` through the logits processor, hands it to the sink
// and says whether the request finished with it.
FinishReason
Engine::emit_next_token(Active& request, std::span<const float> row) {
  const auto& config = m_model->config();
  const std::span<const TokenId> all(request.tokens);
  runtime::LogitsRules rules{request.params.logit_bias,
                             request.params.penalties,
                             all.first(static_cast<std::size_t>(request.prompt_len)),
                             all.subspan(static_cast<std::size_t>(request.prompt_len)),
                             {}};
  if (request.generated < request.params.min_tokens) { // no EOS or stop token before min_tokens
    rules.forbidden = request.params.stop_token_ids;
    for (const auto t : config.eos_token_ids)
      rules.forbidden.push_back(static_cast<TokenId>(t));
  }
  const TokenId token = request.sampler.next(m_logits.process(row, rules));
  request.tokens.push_back(token);
  ++request.generated;
  if (request.generated == 1)
    request.first_token = Clock::now();
  const FinishReason reason = finish_reason(request, token);
  auto out = request.output(reason);
  out.token = token;
  if (request.params.logprobs >= 0) // of the raw row, as vLLM reports them
    out.logprobs = runtime::position_logprobs(row, token, request.params.logprobs);
  if (request.generated == 1)
    out.prompt_logprobs = std::move(request.prompt_logprobs);
  request.sink(out);
  return reason;
}

FinishReason
Engine::finish_reason(const Active& request, TokenId token) const {
  const auto& config = m_model->config();
  const auto holds = [token](const auto& tokens) {
    return std::find(tokens.begin(), tokens.end(), token) != tokens.end();
  };
  if ((!request.params.ignore_eos && holds(config.eos_token_ids)) || holds(request.params.stop_token_ids))
    return FinishReason::stop;
  if (request.generated >= request.params.max_tokens ||
      static_cast<std::int64_t>(request.tokens.size()) >= config.max_position_embeddings)
    return FinishReason::length;
  return FinishReason::none;
}

} // namespace optkit::serve
