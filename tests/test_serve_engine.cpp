// The continuous-batching engine against the runtime it runs on: whatever the batching does —
// many requests at once, prompts split into chunks by a small token budget, sequences preempted
// and recomputed when the KV cache is short — each request's greedy tokens are those of the same
// prompt decoded alone, one token at a time, on a plain CpuTransformer.
#include "core/error.hpp"
#include "runtime/kv_cache.hpp"
#include "runtime/sampler.hpp"
#include "runtime/transformer.hpp"
#include "serve/engine.hpp"
#include "serve/swap_model.hpp"
#include "serve/text_stream.hpp"
#include "support/delta_fixture.hpp"
#include "support/oracle_logits.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

using namespace optkit;
using namespace optkit::serve;
using runtime::TokenId;
using test::tiny_base;

namespace {

// Greedy decoding of one prompt alone, the reference (with `delta`: the delta merged on load).
std::vector<TokenId>
greedy_alone(const std::vector<TokenId>& prompt, int count,
             const std::optional<std::filesystem::path>& delta = std::nullopt,
             const std::filesystem::path& model_dir = tiny_base()) {
  runtime::CpuTransformer model(model_dir, {.threads = 2, .delta = delta});
  const auto seq = model.add_sequence();
  std::vector<TokenId> out;
  std::vector<TokenId> next = prompt;
  for (int i = 0; i < count; ++i) {
    const runtime::SequenceInput input{seq, next, false};
    const auto logits = model.forward(std::span(&input, 1));
    out.push_back(runtime::argmax(logits));
    next = {out.back()};
  }
  return out;
}

struct Collected {
  std::mutex mutex;
  std::condition_variable cv;
  std::map<RequestId, std::vector<TokenId>> tokens;
  std::map<RequestId, FinishReason> finish;
  std::map<RequestId, std::optional<std::int64_t>> cached_tokens;
  std::vector<RequestId> finish_order;

  OutputSink sink_for(std::shared_ptr<RequestId> id) {
    return [this, id](const StepOutput& out) {
      const std::lock_guard lock(mutex);
      if (out.token)
        tokens[*id].push_back(*out.token);
      if (out.finish != FinishReason::none) {
        finish[*id] = out.finish;
        cached_tokens[*id] = out.cached_tokens;
        finish_order.push_back(*id);
        cv.notify_all();
      }
    };
  }
  bool wait_for(std::size_t finished) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, std::chrono::seconds(120), [&] { return finish.size() >= finished; });
  }
};

struct EngineUnderTest {
  std::unique_ptr<Engine> engine;
  std::int32_t variant = -1, second_variant = -1;
  explicit EngineUnderTest(EngineOptions options, std::uint64_t kv_budget = 0, bool with_delta = false,
                           bool prefix_caching = false) {
    runtime::RuntimeOptions runtime_options{.threads = 2};
    runtime_options.kv_cache.budget_bytes = kv_budget;
    runtime_options.kv_cache.prefix_caching = prefix_caching;
    auto model = std::make_unique<runtime::CpuTransformer>(tiny_base(), runtime_options);
    if (with_delta) { // the same delta twice: two variants as far as the scheduler is concerned
      variant = model->add_variant(test::code_delta());
      second_variant = model->add_variant(test::code_delta());
    }
    const runtime::KvCache& kv = model->kv_cache();
    engine = std::make_unique<Engine>(std::move(model), kv, options);
  }
  // Submits with the id known to the sink before any output arrives.
  RequestId submit(Collected& c, std::vector<TokenId> prompt, GenerationParams params) {
    auto id = std::make_shared<RequestId>(0);
    const std::lock_guard lock(c.mutex); // the sink takes this lock: it waits for the id
    *id = engine->submit(std::move(prompt), params, c.sink_for(id));
    return *id;
  }
};

// The engine publishes its stats after each step, a moment after the sinks ran.
bool
blocks_return(const Engine& engine) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (engine.stats().kv_used_blocks != 0) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

GenerationParams
greedy(int max_tokens) {
  GenerationParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.seeded = true;
  return p;
}

std::vector<TokenId>
prompt_of(int length, int salt) {
  std::vector<TokenId> p;
  for (int i = 0; i < length; ++i)
    p.push_back(static_cast<TokenId>((i * 37 + salt * 101) % 2000 + 10));
  return p;
}

// `shared`, then 5 + salt tokens of its own.
std::vector<TokenId>
shared_then_own(const std::vector<TokenId>& shared, int salt) {
  auto p = shared;
  for (const auto t : prompt_of(5 + salt, 20 + salt))
    p.push_back(t);
  return p;
}

} // namespace

TEST_CASE("batched, chunked and preempted requests decode exactly as each prompt alone") {
  const int count = 12;
  std::vector<std::vector<TokenId>> prompts;
  for (int r = 0; r < 6; ++r)
    prompts.push_back(prompt_of(5 + r * 23, r));
  std::vector<std::vector<TokenId>> expected;
  for (const auto& p : prompts)
    expected.push_back(greedy_alone(p, count));

  // Submits every prompt at once and checks each request's tokens against its reference.
  const auto serve_all = [&](EngineUnderTest& t) {
    Collected c;
    std::vector<RequestId> ids;
    for (const auto& p : prompts)
      ids.push_back(t.submit(c, p, greedy(count)));
    REQUIRE(c.wait_for(prompts.size()));
    for (std::size_t i = 0; i < ids.size(); ++i) {
      CAPTURE(i);
      CHECK(c.tokens[ids[i]] == expected[i]);
      CHECK(c.finish[ids[i]] == FinishReason::length);
    }
  };
  SUBCASE("ample budget") {
    EngineUnderTest t({256, 2048});
    serve_all(t);
  }
  SUBCASE("a 16-token step budget: prompts prefilled in chunks between decodes") {
    EngineUnderTest t({4, 16});
    serve_all(t);
  }
  SUBCASE("a KV cache too small for all of them at once: preemption and recompute") {
    // 12 blocks of 16 tokens; the longest request needs 9 (5 + 5·23 + 12 = 132 tokens).
    runtime::KvCache probe(4, 64, 1024, {0, 16});
    EngineUnderTest t({256, 2048}, probe.block_bytes() * 12);
    serve_all(t);
    CHECK(t.engine->stats().preemptions > 0);
    CHECK(blocks_return(*t.engine)); // every block came back
  }
  SUBCASE("the same with prefix caching: a recomputed sequence takes back its own cached blocks") {
    runtime::KvCache probe(4, 64, 1024, {0, 16});
    EngineUnderTest t({256, 2048}, probe.block_bytes() * 12, false, true);
    serve_all(t);
    const auto stats = t.engine->stats();
    CHECK(stats.preemptions > 0);
    CHECK(stats.prefix_cache_hits > 0);
    CHECK(blocks_return(*t.engine)); // cached blocks no request holds are free, not used
  }
}

TEST_CASE("prefix caching: prompts that share a prefix reuse its blocks, per model, and decode as each prompt alone") {
  const int count = 8;
  const auto shared = prompt_of(40, 7); // two full blocks of 16 tokens, and 8 more
  const auto with_suffix = [&](int salt) { return shared_then_own(shared, salt); };
  EngineUnderTest t({256, 2048}, 0, true, true);
  Collected c;
  GenerationParams on_variant = greedy(count);
  on_variant.variant = t.variant;
  // The first request fills the cache; it ends before the others arrive.
  const auto first = t.submit(c, with_suffix(0), greedy(count));
  REQUIRE(c.wait_for(1));
  CHECK(c.cached_tokens[first] == 0);
  // Then, at once: two base prompts with the shared prefix, and the variant with it, twice: the
  // variant's keys and values are its own, so its first request finds nothing of the base's.
  const auto b1 = t.submit(c, with_suffix(1), greedy(count));
  const auto b2 = t.submit(c, with_suffix(2), greedy(count));
  const auto v1 = t.submit(c, with_suffix(1), on_variant);
  REQUIRE(c.wait_for(4));
  const auto v2 = t.submit(c, with_suffix(3), on_variant);
  // A prompt of exactly the cached blocks: its last token is computed, so one block is reused.
  const auto exact = t.submit(c, std::vector<TokenId>(shared.begin(), shared.begin() + 32), greedy(count));
  REQUIRE(c.wait_for(6));
  CHECK(c.cached_tokens[b1] == 32);
  CHECK(c.cached_tokens[b2] == 32);
  CHECK(c.cached_tokens[v1] == 0);
  CHECK(c.cached_tokens[v2] == 32);
  CHECK(c.cached_tokens[exact] == 16);
  for (const auto& request : {std::pair{first, 0}, {b1, 1}, {b2, 2}}) {
    CAPTURE(request.second);
    CHECK(c.tokens[request.first] == greedy_alone(with_suffix(request.second), count));
  }
  CHECK(c.tokens[v1] == greedy_alone(with_suffix(1), count, test::code_delta()));
  CHECK(c.tokens[v2] == greedy_alone(with_suffix(3), count, test::code_delta()));
  CHECK(c.tokens[exact] == greedy_alone(std::vector<TokenId>(shared.begin(), shared.begin() + 32), count));
  const auto stats = t.engine->stats();
  CHECK(stats.prefix_cache_hits == 32 + 32 + 32 + 16);
  CHECK(blocks_return(*t.engine));
}

TEST_CASE("prefix caching: requests that arrive together with a shared prefix compute it once") {
  const int count = 6;
  const auto shared = prompt_of(40, 9); // two full blocks of 16 tokens, and 8 more
  const auto with_suffix = [&](int salt) { return shared_then_own(shared, salt); };
  EngineUnderTest t({256, 2048}, 0, true, true);
  Collected c;
  GenerationParams on_variant = greedy(count);
  on_variant.variant = t.variant;
  // Nothing is cached yet. Whenever the engine picks them up, the first of each model computes
  // the shared blocks and the others wait for them rather than compute them too.
  const auto b0 = t.submit(c, with_suffix(0), greedy(count));
  const auto v0 = t.submit(c, with_suffix(0), on_variant);
  const auto b1 = t.submit(c, with_suffix(1), greedy(count));
  const auto b2 = t.submit(c, with_suffix(2), greedy(count));
  const auto v1 = t.submit(c, with_suffix(1), on_variant);
  // Shorter than a block past the first: nothing to share, nothing to wait for.
  const auto short_one = t.submit(c, std::vector<TokenId>(shared.begin(), shared.begin() + 16), greedy(count));
  REQUIRE(c.wait_for(6));
  CHECK(c.cached_tokens[b0] == 0);
  CHECK(c.cached_tokens[v0] == 0);
  CHECK(c.cached_tokens[b1] == 32);
  CHECK(c.cached_tokens[b2] == 32);
  CHECK(c.cached_tokens[v1] == 32);
  CHECK(c.cached_tokens[short_one] == 0);
  for (const auto& request : {std::pair{b0, 0}, {b1, 1}, {b2, 2}}) {
    CAPTURE(request.second);
    CHECK(c.tokens[request.first] == greedy_alone(with_suffix(request.second), count));
  }
  CHECK(c.tokens[v0] == greedy_alone(with_suffix(0), count, test::code_delta()));
  CHECK(c.tokens[v1] == greedy_alone(with_suffix(1), count, test::code_delta()));
  const auto stats = t.engine->stats();
  CHECK(stats.prefix_cache_hits == 3 * 32);
  CHECK(stats.prompt_tokens == 45 + 45 + 46 + 47 + 46 + 16 - 3 * 32);
  CHECK(blocks_return(*t.engine));
}

TEST_CASE("base and delta requests in one batch decode as the base alone and the merged variant alone") {
  const int count = 10;
  const auto p1 = prompt_of(9, 1), p2 = prompt_of(30, 2);
  EngineUnderTest t({256, 2048}, 0, true);
  Collected c;
  GenerationParams on_variant = greedy(count);
  on_variant.variant = t.variant;
  // Interleaved on purpose: the engine must group the variant's rows.
  const auto a = t.submit(c, p1, on_variant);
  const auto b = t.submit(c, p1, greedy(count));
  const auto d = t.submit(c, p2, on_variant);
  REQUIRE(c.wait_for(3));
  CHECK(c.tokens[a] == greedy_alone(p1, count, test::code_delta()));
  CHECK(c.tokens[b] == greedy_alone(p1, count));
  CHECK(c.tokens[d] == greedy_alone(p2, count, test::code_delta()));
  CHECK(c.tokens[a] != c.tokens[b]); // the variant is not the base
}

TEST_CASE("swap serving (the --baseline swap): one whole model per step, outputs those of each model alone") {
  // Base and variant requests interleaved: the engine must run them one model at a time (SwapModel
  // refuses a mixed step, which would end the requests with an error) and swap between them.
  const int count = 8;
  const auto p1 = prompt_of(9, 1), p2 = prompt_of(20, 2);
  runtime::RuntimeOptions runtime_options{.threads = 2};
  auto model = std::make_unique<SwapModel>(tiny_base(), std::vector{test::code_delta()}, runtime_options);
  const SwapModel& swap = *model;
  const runtime::KvCache& kv = model->kv_cache();
  Engine engine(std::move(model), kv, {256, 2048, 1, true});
  Collected c;
  std::vector<std::pair<RequestId, bool>> submitted; // id, on the variant
  for (int i = 0; i < 6; ++i) {
    GenerationParams params = greedy(count);
    params.variant = i % 2 == 0 ? 0 : -1;
    auto id = std::make_shared<RequestId>(0);
    const std::lock_guard lock(c.mutex);
    *id = engine.submit(i < 3 ? p1 : p2, params, c.sink_for(id));
    submitted.emplace_back(*id, params.variant == 0);
  }
  REQUIRE(c.wait_for(submitted.size()));
  for (std::size_t i = 0; i < submitted.size(); ++i) {
    CAPTURE(i);
    const auto& [id, on_variant] = submitted[i];
    CHECK(c.finish[id] == FinishReason::length);
    const auto& prompt = i < 3 ? p1 : p2;
    CHECK(c.tokens[id] == greedy_alone(prompt, count, on_variant ? std::optional(test::code_delta()) : std::nullopt));
  }
  engine.stop();
  CHECK(swap.swaps() >= 1); // the base was loaded first; the variant needed at least one swap
}

TEST_CASE("swap serving loads a checkpoint folder as it is, and refuses one of another shape") {
  // Variant 0 is a delta artifact (merged into the base), variant 1 the fine-tuned checkpoint itself.
  const int count = 8;
  const auto p1 = prompt_of(9, 1);
  const auto fine_tune = test::testdata_dir() / "models" / "tiny-code";
  auto model = std::make_unique<SwapModel>(tiny_base(), std::vector{test::code_delta(), fine_tune},
                                           runtime::RuntimeOptions{.threads = 2});
  const SwapModel& swap = *model;
  const runtime::KvCache& kv = model->kv_cache();
  Engine engine(std::move(model), kv, {256, 2048, 1, true});
  Collected c;
  std::vector<RequestId> ids;
  for (const std::int32_t variant : {1, 0, 1, -1}) {
    GenerationParams params = greedy(count);
    params.variant = variant;
    auto id = std::make_shared<RequestId>(0);
    const std::lock_guard lock(c.mutex);
    *id = engine.submit(p1, params, c.sink_for(id));
    ids.push_back(*id);
  }
  REQUIRE(c.wait_for(ids.size()));
  engine.stop();
  const auto from_checkpoint = greedy_alone(p1, count, std::nullopt, fine_tune);
  CHECK(c.tokens[ids[0]] == from_checkpoint);
  CHECK(c.tokens[ids[2]] == from_checkpoint);
  CHECK(c.tokens[ids[1]] == greedy_alone(p1, count, test::code_delta()));
  CHECK(c.tokens[ids[3]] == greedy_alone(p1, count));
  CHECK(from_checkpoint != greedy_alone(p1, count)); // the fine-tune is not the base
  CHECK(swap.swaps() >= 2);

  test::ScratchDir other;
  std::filesystem::copy(tiny_base(), other.path(), std::filesystem::copy_options::recursive);
  auto config = nlohmann::json::parse(test::read_text(other / "config.json"));
  config["num_hidden_layers"] = config["num_hidden_layers"].get<int>() + 1;
  test::write_text(other / "config.json", config.dump());
  CHECK_THROWS_WITH_AS(SwapModel(tiny_base(), {other.path()}, {.threads = 1}), doctest::Contains("num_hidden_layers"),
                       InputError);
  CHECK_THROWS_WITH_AS(SwapModel(tiny_base(), {test::testdata_dir()}, {.threads = 1}),
                       doctest::Contains("neither a delta artifact"), InputError);
}

namespace {

// DeltaZip's adversarial pattern under --max-deltas 1: A (variant 0, 30 tokens) runs; B (variant
// 1, 5 tokens) is held by the cap; C1..C4 (variant 0, 50 tokens each) skip the line past B.
struct AdversarialStream {
  RequestId a, b;
  std::vector<RequestId> cs;
};

AdversarialStream
submit_adversarial_stream(EngineUnderTest& t, Collected& c) {
  GenerationParams a_params = greedy(30), b_params = greedy(5), c_params = greedy(50);
  a_params.variant = c_params.variant = t.variant;
  b_params.variant = t.second_variant;
  AdversarialStream s;
  s.a = t.submit(c, prompt_of(8, 1), a_params);
  s.b = t.submit(c, prompt_of(8, 2), b_params);
  for (int i = 0; i < 4; ++i)
    s.cs.push_back(t.submit(c, prompt_of(6 + i, 3 + i), c_params));
  return s;
}

std::ptrdiff_t
finish_position(const Collected& c, RequestId id) {
  return std::find(c.finish_order.begin(), c.finish_order.end(), id) - c.finish_order.begin();
}

} // namespace

TEST_CASE("--max-deltas 1 against an adversarial stream: line-skippers give the slot back, the held request runs") {
  // A (variant 0, long) runs; B (variant 1) is held by the cap; C1..C4 (variant 0) skip the line
  // past B and would keep variant 0 active long after A — without DeltaZip's preemption B would
  // wait for all of them. The bound: B runs once A, the only variant-0 request that did not skip
  // the line, finishes.
  EngineUnderTest t({256, 2048, 1}, 0, true);
  Collected c;
  const auto [a, b, cs] = submit_adversarial_stream(t, c);
  REQUIRE(c.wait_for(6));
  const auto position = [&](RequestId id) { return finish_position(c, id); };
  CHECK(position(a) < position(b));
  for (const auto id : cs)
    CHECK(position(b) < position(id)); // B did not wait for the line-skippers
  CHECK(t.engine->stats().preemptions >= 4);
  // Preempted and recomputed, the skippers' tokens are still the merged variant's greedy tokens.
  for (int i = 0; i < 4; ++i)
    CHECK(c.tokens[cs[static_cast<std::size_t>(i)]] == greedy_alone(prompt_of(6 + i, 3 + i), 50, test::code_delta()));
}

TEST_CASE("--max-deltas 1 with preempt_skippers off (the swap baseline): line-skippers finish, their variant takes "
          "no more, then the held request runs") {
  // As above, but as vLLM-SCB batches a model's requests: nothing is preempted or computed twice.
  // Once A (the variant-0 request that did not skip) finishes, the skippers C1..C4 run to their end
  // while variant 0 admits no more — C5, submitted then, waits behind B, which runs next.
  EngineUnderTest t({256, 2048, 1, false, false}, 0, true);
  Collected c;
  const auto [a, b, cs] = submit_adversarial_stream(t, c);
  REQUIRE(c.wait_for(1));
  GenerationParams c5_params = greedy(50);
  c5_params.variant = t.variant;
  const auto c5 = t.submit(c, prompt_of(7, 9), c5_params);
  REQUIRE(c.wait_for(7));
  const auto position = [&](RequestId id) { return finish_position(c, id); };
  CHECK(position(a) == 0);
  for (const auto id : cs)
    CHECK(position(id) < position(b)); // the skippers were not preempted: B waited for them
  CHECK(position(b) < position(c5));   // variant 0 took no new request while B waited
  CHECK(t.engine->stats().preemptions == 0);
  for (int i = 0; i < 4; ++i)
    CHECK(c.tokens[cs[static_cast<std::size_t>(i)]] == greedy_alone(prompt_of(6 + i, 3 + i), 50, test::code_delta()));
  CHECK(c.tokens[c5] == greedy_alone(prompt_of(7, 9), 50, test::code_delta()));
  CHECK(c.tokens[b] == greedy_alone(prompt_of(8, 2), 5, test::code_delta()));
}

TEST_CASE("penalties: greedy decoding with repetition, frequency and presence penalties as a plain loop computes it") {
  const int count = 12;
  std::vector<TokenId> prompt; // a pattern the model continues, so that greedy decoding repeats tokens
  for (int i = 0; i < 24; ++i)
    prompt.push_back(static_cast<TokenId>(50 + 10 * (i % 3)));
  const runtime::Penalties penalties{.presence = 1.5f, .frequency = 2.0f, .repetition = 2.0f};
  // The reference: the runtime alone, each row penalised by a loop over the tokens written here.
  std::vector<TokenId> expected;
  {
    runtime::CpuTransformer model(tiny_base(), {.threads = 2});
    const auto seq = model.add_sequence();
    std::vector<TokenId> next = prompt;
    for (int i = 0; i < count; ++i) {
      const runtime::SequenceInput input{seq, next, false};
      auto logits = model.forward(std::span(&input, 1));
      std::map<TokenId, int> in_output;
      for (const auto t : expected)
        ++in_output[t];
      for (std::size_t v = 0; v < logits.size(); ++v) {
        const auto t = static_cast<TokenId>(v);
        const bool seen = in_output.count(t) > 0 || std::find(prompt.begin(), prompt.end(), t) != prompt.end();
        if (seen)
          logits[v] = logits[v] > 0 ? logits[v] / penalties.repetition : logits[v] * penalties.repetition;
        if (in_output.count(t) > 0)
          logits[v] -= penalties.frequency * static_cast<float>(in_output[t]) + penalties.presence;
      }
      expected.push_back(runtime::argmax(logits));
      next = {expected.back()};
    }
  }
  // Through the engine, with a small KV cache and another request so that it is preempted and
  // recomputed on the way: the penalties still count this request's own output only.
  runtime::KvCache probe(4, 64, 1024, {0, 16});
  EngineUnderTest t({256, 2048}, probe.block_bytes() * 4);
  Collected c;
  GenerationParams params = greedy(count);
  params.penalties = penalties;
  const auto penalised = t.submit(c, prompt, params);
  const auto plain = t.submit(c, prompt_of(30, 5), greedy(count));
  REQUIRE(c.wait_for(2));
  CHECK(c.tokens[penalised] == expected);
  CHECK(c.tokens[plain] == greedy_alone(prompt_of(30, 5), count));
  CAPTURE(fmt::format("{}", fmt::join(expected, " ")));
  CHECK(expected != greedy_alone(prompt, count)); // the penalties changed the output
  CHECK(t.engine->stats().preemptions > 0);
}

TEST_CASE("logit_bias: +100 makes a token the greedy choice, -100 rules the greedy one out; out-of-vocabulary ids are "
          "refused") {
  const int count = 4;
  const auto prompt = prompt_of(12, 6);
  const auto plain = greedy_alone(prompt, count);
  EngineUnderTest t({256, 2048});
  Collected c;
  GenerationParams forced = greedy(count);
  forced.logit_bias = {{1234, 100.0f}};
  GenerationParams banned = greedy(1);
  banned.logit_bias = {{plain[0], -100.0f}};
  const auto a = t.submit(c, prompt, forced);
  const auto b = t.submit(c, prompt, banned);
  REQUIRE(c.wait_for(2));
  CHECK(c.tokens[a] == std::vector<TokenId>(count, 1234));
  REQUIRE(c.tokens[b].size() == 1);
  CHECK(c.tokens[b][0] != plain[0]);
  GenerationParams outside = greedy(1);
  outside.logit_bias = {{2048, 1.0f}}; // tiny-base's vocabulary is 2048 tokens
  CHECK_THROWS_WITH_AS(t.engine->submit(prompt, outside, [](const StepOutput&) {}),
                       doctest::Contains("logit_bias names token 2048, outside the vocabulary"), InputError);
}

TEST_CASE("EOS ends a request unless ignored or before min_tokens; stop token ids end it too") {
  const auto prompt = prompt_of(8, 3);
  const auto reference = greedy_alone(prompt, 6);
  EngineUnderTest t({256, 2048});
  Collected c;
  GenerationParams stop_at_third = greedy(6);
  stop_at_third.stop_token_ids = {reference[2]};
  const auto a = t.submit(c, prompt, stop_at_third);
  GenerationParams late = stop_at_third;
  late.min_tokens = 3; // the stop token is masked for the first three: a different third token
  const auto b = t.submit(c, prompt, late);
  REQUIRE(c.wait_for(2));
  CHECK(c.tokens[a] == std::vector<TokenId>(reference.begin(), reference.begin() + 3));
  CHECK(c.finish[a] == FinishReason::stop);
  CHECK(c.tokens[b].size() >= 3);
  CHECK(c.tokens[b][2] != reference[2]);
}

TEST_CASE("cancel frees the sequence at the next step; requests that can never run are refused by name") {
  EngineUnderTest t({256, 2048});
  Collected c;
  const auto id = t.submit(c, prompt_of(10, 1), greedy(900));
  t.engine->cancel(id);
  REQUIRE(c.wait_for(1));
  CHECK(c.finish[id] == FinishReason::cancelled);
  CHECK(c.tokens[id].size() < 900);
  CHECK(blocks_return(*t.engine));
  CHECK_THROWS_WITH_AS(t.engine->submit({}, greedy(4), {}), doctest::Contains("empty"), InputError);
  CHECK_THROWS_WITH_AS(t.engine->submit(prompt_of(1000, 1), greedy(100), {}),
                       doctest::Contains("exceeds the model's context of 1024"), InputError);
  CHECK_THROWS_WITH_AS(t.engine->submit({5000}, greedy(4), {}), doctest::Contains("outside the vocabulary"),
                       InputError);
  GenerationParams bad = greedy(4);
  bad.sampling.top_p = 0;
  CHECK_THROWS_AS(t.engine->submit({5}, bad, {}), InputError);
}

TEST_CASE("stopping the engine cancels what is queued and running") {
  EngineUnderTest t({1, 2048});
  Collected c;
  for (int i = 0; i < 3; ++i)
    t.submit(c, prompt_of(10, i), greedy(900));
  t.engine->stop();
  CHECK(c.finish.size() == 3);
  for (const auto& [id, reason] : c.finish)
    CHECK(reason == FinishReason::cancelled);
}

TEST_CASE("stop strings end the text before them, even when split across tokens, and never leak") {
  const auto tokenizer = model::Tokenizer::load_folder(tiny_base());
  const std::string text = "The quick brown fox jumps over the lazy dog. The end.";
  const auto ids = tokenizer.encode(text, false);
  for (const std::string stop : {"fox", "over the", "dog. The", "zebra", "."}) {
    CAPTURE(stop);
    TextStream stream(tokenizer, {stop, "never matches"});
    std::string sent;
    bool stopped = false;
    for (const auto id : ids) {
      auto piece = stream.push(id);
      sent += piece.text;
      CHECK(sent.find(stop) == std::string::npos); // not even the stop string itself
      if (piece.stopped) {
        stopped = true;
        break;
      }
    }
    if (!stopped)
      sent += stream.finish();
    const auto at = text.find(stop);
    CHECK(stopped == (at != std::string::npos));
    CHECK(sent == (at == std::string::npos ? text : text.substr(0, at)));
  }
}

TEST_CASE("echo's prompt logprobs and each token's logprobs are PyTorch's log-softmax, however the prompt is chunked") {
  const auto prompts = test::read_oracle(tiny_base());
  REQUIRE(prompts.size() >= 2);
  // Every prompt at once: several inputs with a row per position share each step.
  const auto check_all = [&](EngineUnderTest& t) {
    const std::size_t vocab = static_cast<std::size_t>(t.engine->config().vocab_size);
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::vector<StepOutput>> outputs(prompts.size());
    std::size_t finished = 0;
    for (std::size_t k = 0; k < prompts.size(); ++k) {
      GenerationParams params = greedy(2);
      params.logprobs = 3;
      params.prompt_logprobs = true;
      t.engine->submit(prompts[k].ids, params, [&, k](const StepOutput& out) {
        const std::lock_guard lock(mutex);
        outputs[k].push_back(out);
        finished += out.finish != FinishReason::none ? 1 : 0;
        cv.notify_all();
      });
    }
    std::unique_lock lock(mutex);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return finished == prompts.size(); }));
    for (std::size_t k = 0; k < prompts.size(); ++k) {
      const auto& p = prompts[k];
      CAPTURE(k);
      // The oracle's log-softmax of row `row` at `token`, in double.
      const auto oracle = [&](std::size_t row, TokenId token) {
        const float* l = p.logits.data() + row * vocab;
        const double top = static_cast<double>(*std::max_element(l, l + vocab));
        double sum = 0;
        for (std::size_t v = 0; v < vocab; ++v)
          sum += std::exp(static_cast<double>(l[v]) - top);
        return static_cast<double>(l[static_cast<std::size_t>(token)]) - top - std::log(sum);
      };
      const auto [lo, hi] = std::minmax_element(p.logits.begin(), p.logits.end());
      const double tolerance = 2e-3 * static_cast<double>(*hi - *lo); // the runtime's logit bound, twice
      REQUIRE(outputs[k].size() == 2);
      const auto& prompt_logprobs = outputs[k][0].prompt_logprobs;
      REQUIRE(prompt_logprobs.size() == p.ids.size() - 1); // every prompt token but the first
      for (std::size_t i = 0; i < prompt_logprobs.size(); ++i) {
        CAPTURE(i);
        CHECK(prompt_logprobs[i].chosen.token == p.ids[i + 1]);
        CHECK(std::fabs(static_cast<double>(prompt_logprobs[i].chosen.logprob) - oracle(i, p.ids[i + 1])) <= tolerance);
        REQUIRE(prompt_logprobs[i].top.size() == 3);
        for (const auto& top : prompt_logprobs[i].top)
          CHECK(std::fabs(static_cast<double>(top.logprob) - oracle(i, top.token)) <= tolerance);
      }
      // The first generated token comes from the last prompt row: greedy, so it is the most likely.
      REQUIRE(outputs[k][0].logprobs);
      const auto& first = *outputs[k][0].logprobs;
      CHECK(first.chosen.token == *outputs[k][0].token);
      CHECK(first.top[0].token == first.chosen.token);
      CHECK(std::fabs(static_cast<double>(first.chosen.logprob) - oracle(p.ids.size() - 1, first.chosen.token)) <=
            tolerance);
      CHECK(outputs[k][1].prompt_logprobs.empty()); // sent once
      REQUIRE(outputs[k][1].logprobs);
    }
  };
  SUBCASE("a 7-token step budget: prompts cross several chunks and steps") {
    EngineUnderTest t({4, 7});
    check_all(t);
  }
  SUBCASE("an ample budget: whole prompts side by side in one step") {
    EngineUnderTest t({256, 2048});
    check_all(t);
  }
}
