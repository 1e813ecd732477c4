#include "sim/serving_simulator.hpp"

#include "core/error.hpp"
#include "core/random_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <numeric>
#include <queue>

namespace optkit::sim {

std::string
to_string(Batching batching) {
  return batching == Batching::continuous ? "continuous" : "static";
}

Batching
parse_batching(const std::string& text) {
  if (text == "continuous")
    return Batching::continuous;
  if (text == "static")
    return Batching::static_batches;
  throw InputError("batching '" + text + "' is not continuous or static");
}

namespace {

constexpr double never = std::numeric_limits<double>::infinity();

// Where arrivals come from: a fixed schedule, or clients that send again when served.
class ArrivalFeed {
public:
  ArrivalFeed(std::span<const SimJob> jobs, int concurrency) : m_jobs(jobs), m_closed(concurrency > 0) {
    if (m_closed) {
      for (int c = 0; c < concurrency && m_next_job < jobs.size(); ++c)
        m_pending.push({0.0, m_next_job++});
    } else {
      m_order.resize(jobs.size());
      std::iota(m_order.begin(), m_order.end(), std::size_t{0});
      std::stable_sort(m_order.begin(), m_order.end(),
                       [&](std::size_t a, std::size_t b) { return jobs[a].arrival < jobs[b].arrival; });
    }
  }

  double next_time() const {
    if (m_closed)
      return m_pending.empty() ? never : m_pending.top().first;
    return m_cursor < m_order.size() ? m_jobs[m_order[m_cursor]].arrival : never;
  }
  std::pair<double, std::size_t> pop() {
    if (m_closed) {
      const auto top = m_pending.top();
      m_pending.pop();
      return top;
    }
    const std::size_t job = m_order[m_cursor++];
    return {m_jobs[job].arrival, job};
  }
  // A request ended at `t`: its client sends the next job then.
  void completed(double t) {
    if (m_closed && m_next_job < m_jobs.size())
      m_pending.push({t, m_next_job++});
  }

private:
  using Entry = std::pair<double, std::size_t>;
  std::span<const SimJob> m_jobs;
  bool m_closed;
  std::vector<std::size_t> m_order;
  std::size_t m_cursor = 0;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> m_pending;
  std::size_t m_next_job = 0;
};

struct Sequence {
  std::size_t job = 0;
  std::int64_t prompt_left = 0; // tokens still to prefill
  std::int64_t output_left = 0; // tokens still to emit
  std::int64_t context = 0;     // tokens in its KV cache
  std::int64_t reserved = 0;    // KV tokens held for it (prompt + output)
};

class Server {
public:
  Server(const SimTiming& timing, const SimKnobs& knobs, std::span<const SimJob> jobs, int concurrency,
         const SimOptions& options)
      : m_timing(timing)
      , m_knobs(knobs)
      , m_jobs(jobs)
      , m_feed(jobs, concurrency)
      , m_random(options.seed)
      , m_record_tokens(options.record_token_times) {
    validate();
    m_out.resize(jobs.size());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      m_out[i].job = i;
      m_out[i].prompt_tokens = prompt_of(i);
      m_out[i].output_tokens = output_of(i);
    }
  }

  std::vector<SimRequest> run() {
    for (;;) {
      take_arrivals();
      if (m_running.empty() && m_waiting.empty()) {
        const double next = m_feed.next_time();
        if (next == never)
          break;
        m_t = std::max(m_t, next);
        continue;
      }
      if (m_knobs.batching == Batching::continuous)
        continuous_step();
      else
        static_step();
    }
    return std::move(m_out);
  }

private:
  std::int64_t prompt_of(std::size_t job) const { return std::max<std::int64_t>(1, m_jobs[job].prompt_tokens); }
  std::int64_t output_of(std::size_t job) const { return std::max<std::int64_t>(1, m_jobs[job].output_tokens); }
  std::int64_t reserve_of(std::size_t job) const { return prompt_of(job) + output_of(job); }

  void validate() const {
    if (m_knobs.max_num_seqs < 1)
      throw InputError(fmt::format("max_num_seqs {} must be at least 1", m_knobs.max_num_seqs));
    if (m_knobs.speculative_tokens < 0 || m_knobs.draft_width < 1)
      throw InputError(fmt::format("speculative_tokens {} must be ≥ 0 and draft_width {} ≥ 1",
                                   m_knobs.speculative_tokens, m_knobs.draft_width));
    if (m_knobs.batching == Batching::continuous && m_knobs.max_num_batched_tokens < 1 + m_knobs.speculative_tokens)
      throw InputError(fmt::format("max_num_batched_tokens {} cannot fit one decode step of {} tokens",
                                   m_knobs.max_num_batched_tokens, 1 + m_knobs.speculative_tokens));
    if (m_timing.step_cost && m_knobs.speculative_tokens > 0)
      throw InputError("a step-cost model does not price speculative decoding; set speculative_tokens to 0");
    if (m_knobs.batching == Batching::static_batches)
      for (const SimJob& job : m_jobs)
        if (job.prefilled)
          throw InputError("static batching prefills every batch itself; prefilled requests need continuous batching");
    if (m_timing.kv_capacity_tokens > 0)
      for (std::size_t i = 0; i < m_jobs.size(); ++i)
        if (reserve_of(i) > m_timing.kv_capacity_tokens)
          throw InputError(fmt::format("request {} needs {} KV tokens, more than the capacity {}", i, reserve_of(i),
                                       m_timing.kv_capacity_tokens));
  }

  void take_arrivals() {
    while (m_feed.next_time() <= m_t) {
      const auto [time, job] = m_feed.pop();
      m_out[job].arrival = time;
      m_waiting.push_back(job);
    }
  }

  bool fits(std::size_t job) const {
    return m_timing.kv_capacity_tokens <= 0 || m_kv_used + reserve_of(job) <= m_timing.kv_capacity_tokens;
  }

  void admit(std::size_t job) {
    Sequence s;
    s.job = job;
    s.prompt_left = m_jobs[job].prefilled ? 0 : prompt_of(job);
    s.context = m_jobs[job].prefilled ? prompt_of(job) : 0;
    s.output_left = output_of(job);
    s.reserved = reserve_of(job);
    m_kv_used += s.reserved;
    m_out[job].start = m_t;
    m_running.push_back(s);
  }

  // Multiplicative noise of `steps` steps taken together: mean 1, CV noise_cv/√steps.
  double noise(std::int64_t steps) {
    if (m_timing.noise_cv <= 0)
      return 1.0;
    return std::max(0.2, 1.0 + m_timing.noise_cv / std::sqrt(static_cast<double>(steps)) * m_random.normal());
  }

  // Tokens accepted from a speculative round of k drafted tokens (the accepted prefix).
  std::int64_t accepted_prefix() {
    const int k = m_knobs.speculative_tokens;
    const double p = 1.0 - std::pow(1.0 - std::clamp(m_timing.acceptance, 0.0, 1.0), m_knobs.draft_width);
    if (p >= 1.0)
      return k;
    if (p <= 0.0)
      return 0;
    const double u = 1.0 - m_random.uniform(); // (0, 1]
    return std::min<std::int64_t>(k, static_cast<std::int64_t>(std::floor(std::log(u) / std::log(p))));
  }

  double speculation_cost(double decoders) const {
    const int k = m_knobs.speculative_tokens;
    if (k == 0 || decoders == 0)
      return 0;
    const double w = m_knobs.draft_width;
    return k * (m_timing.draft_step_s + m_timing.draft_seq_s * decoders * w) +
           m_timing.verify_token_s * decoders * k * w;
  }

  void emit(std::size_t job, double time, std::int64_t tokens) {
    auto& r = m_out[job];
    if (r.first_token < 0)
      r.first_token = time;
    if (m_record_tokens)
      r.token_times.insert(r.token_times.end(), static_cast<std::size_t>(tokens), time);
  }

  void retire_finished() {
    auto done =
        std::stable_partition(m_running.begin(), m_running.end(), [](const Sequence& s) { return s.output_left > 0; });
    for (auto it = done; it != m_running.end(); ++it) {
      m_out[it->job].end = m_t;
      m_kv_used -= it->reserved;
      m_feed.completed(m_t);
    }
    m_running.erase(done, m_running.end());
  }

  // A decode-only step of every running sequence, each `advance` tokens further along.
  double decode_step_seconds(std::int64_t advance) const {
    if (m_timing.step_cost) {
      SimStep step;
      for (const auto& s : m_running)
        step.decode_contexts.push_back(static_cast<double>(s.context + advance));
      return m_timing.step_cost(step);
    }
    double attended = 0;
    for (const auto& s : m_running)
      attended += static_cast<double>(s.context + advance);
    const double d = static_cast<double>(m_running.size());
    return m_timing.step_base_s + m_timing.decode_seq_s * d + m_timing.kv_token_s * attended;
  }

  // Decode-only steps with nothing else happening: advance min(remaining) steps, or up to the
  // next arrival when it could be admitted, in one go. Their cost is linear in the KV length, so
  // n steps cost n × the mean of the first and the last.
  void coalesced_decode(bool arrival_could_join) {
    std::int64_t n = std::numeric_limits<std::int64_t>::max();
    for (const auto& s : m_running)
      n = std::min(n, s.output_left);
    const double step = decode_step_seconds(0);
    const double next = m_feed.next_time();
    if (arrival_could_join && next != never)
      n = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil((next - m_t) / step)), 1, n);
    const double steps = static_cast<double>(n);
    const double last = n > 1 ? decode_step_seconds(n - 1) : step;
    const double duration = steps * (step + last) / 2 * noise(n);
    for (auto& s : m_running) {
      if (m_record_tokens)
        for (std::int64_t i = 1; i <= n; ++i)
          emit(s.job, m_t + duration * static_cast<double>(i) / steps, 1);
      else
        emit(s.job, m_t + duration / steps, 1);
      s.output_left -= n;
      s.context += n;
    }
    m_t += duration;
  }

  // A step with prompt chunks: the step-cost model's, or the linear terms.
  double mixed_step_seconds(const std::vector<std::pair<Sequence*, std::int64_t>>& chunks, double prefill_tokens,
                            std::size_t decoders, double attended) const {
    if (m_timing.step_cost) {
      SimStep step;
      for (const auto& [s, chunk] : chunks)
        step.prefills.push_back({static_cast<double>(chunk), static_cast<double>(s->context)});
      for (const auto& s : m_running)
        if (s.prompt_left == 0)
          step.decode_contexts.push_back(static_cast<double>(s.context));
      return m_timing.step_cost(step);
    }
    const double dd = static_cast<double>(decoders);
    return m_timing.step_base_s + m_timing.prefill_token_s * prefill_tokens + m_timing.decode_seq_s * dd +
           m_timing.kv_token_s * attended + speculation_cost(dd);
  }

  void continuous_step() {
    while (!m_waiting.empty() && static_cast<int>(m_running.size()) < m_knobs.max_num_seqs && fits(m_waiting.front())) {
      admit(m_waiting.front());
      m_waiting.pop_front();
    }
    const int k = m_knobs.speculative_tokens;
    std::size_t decoders = 0;
    double attended = 0;
    for (const auto& s : m_running)
      if (s.prompt_left == 0) {
        ++decoders;
        attended += static_cast<double>(s.context);
      }
    const bool prefilling = decoders < m_running.size();
    if (!prefilling && k == 0) {
      const bool room = static_cast<int>(m_running.size()) < m_knobs.max_num_seqs;
      coalesced_decode(room);
      retire_finished();
      return;
    }
    std::int64_t budget = m_knobs.max_num_batched_tokens - static_cast<std::int64_t>(decoders) * (1 + k);
    std::vector<std::pair<Sequence*, std::int64_t>> chunks;
    double prefill_tokens = 0;
    for (auto& s : m_running) {
      if (s.prompt_left == 0 || budget <= 0)
        continue;
      const std::int64_t chunk = std::min(s.prompt_left, budget);
      budget -= chunk;
      prefill_tokens += static_cast<double>(chunk);
      chunks.emplace_back(&s, chunk);
    }
    const double duration = mixed_step_seconds(chunks, prefill_tokens, decoders, attended) * noise(1);
    m_t += duration;
    for (auto& s : m_running) {
      if (s.prompt_left != 0)
        continue;
      const std::int64_t tokens = std::min(s.output_left, 1 + (k > 0 ? accepted_prefix() : 0));
      emit(s.job, m_t, tokens);
      s.output_left -= tokens;
      s.context += tokens;
    }
    for (auto& [s, chunk] : chunks) {
      s->prompt_left -= chunk;
      s->context += chunk;
      if (s->prompt_left == 0) { // the step that finishes a prompt samples its first token
        emit(s->job, m_t, 1);
        s->output_left -= 1;
        s->context += 1;
      }
    }
    retire_finished();
  }

  // A static batch's prefill: every prompt padded to the longest.
  double padded_prefill_seconds(std::int64_t longest) const {
    if (m_timing.step_cost) {
      SimStep step;
      step.prefills.assign(m_running.size(), {static_cast<double>(longest), 0.0});
      return m_timing.step_cost(step);
    }
    const double padded = static_cast<double>(longest) * static_cast<double>(m_running.size());
    return m_timing.step_base_s + m_timing.prefill_token_s * padded;
  }

  void static_step() {
    if (m_running.empty()) {
      if (static_cast<int>(m_waiting.size()) < m_knobs.max_num_seqs && m_knobs.max_wait_s > 0) {
        const double deadline = m_out[m_waiting.front()].arrival + m_knobs.max_wait_s;
        if (m_t < deadline) {
          m_t = std::min(deadline, m_feed.next_time());
          return; // take the arrival (or the deadline) and look again
        }
      }
      std::int64_t longest = 0;
      while (!m_waiting.empty() && static_cast<int>(m_running.size()) < m_knobs.max_num_seqs &&
             fits(m_waiting.front())) {
        longest = std::max(longest, prompt_of(m_waiting.front()));
        admit(m_waiting.front());
        m_waiting.pop_front();
      }
      m_t += padded_prefill_seconds(longest) * noise(1);
      for (auto& s : m_running) {
        s.prompt_left = 0;
        s.context = prompt_of(s.job) + 1;
        emit(s.job, m_t, 1);
        s.output_left -= 1;
      }
      retire_finished();
      return;
    }
    if (m_knobs.speculative_tokens == 0) {
      coalesced_decode(false);
    } else {
      double attended = 0;
      for (const auto& s : m_running)
        attended += static_cast<double>(s.context);
      const double d = static_cast<double>(m_running.size());
      m_t += (m_timing.step_base_s + m_timing.decode_seq_s * d + m_timing.kv_token_s * attended + speculation_cost(d)) *
             noise(1);
      for (auto& s : m_running) {
        const std::int64_t tokens = std::min(s.output_left, 1 + accepted_prefix());
        emit(s.job, m_t, tokens);
        s.output_left -= tokens;
        s.context += tokens;
      }
    }
    retire_finished();
  }

  const SimTiming& m_timing;
  const SimKnobs& m_knobs;
  std::span<const SimJob> m_jobs;
  ArrivalFeed m_feed;
  RandomSource m_random;
  bool m_record_tokens;
  std::vector<SimRequest> m_out;
  std::deque<std::size_t> m_waiting;
  std::vector<Sequence> m_running;
  std::int64_t m_kv_used = 0;
  double m_t = 0;
};

} // namespace

std::vector<SimRequest>
run_open_loop(const SimTiming& timing, const SimKnobs& knobs, std::span<const SimJob> jobs, const SimOptions& options) {
  return Server(timing, knobs, jobs, 0, options).run();
}

std::vector<SimRequest>
run_closed_loop(const SimTiming& timing, const SimKnobs& knobs, std::span<const SimJob> jobs, int concurrency,
                const SimOptions& options) {
  if (concurrency < 1)
    throw InputError(fmt::format("closed-loop concurrency {} must be at least 1", concurrency));
  return Server(timing, knobs, jobs, concurrency, options).run();
}

} // namespace optkit::sim
