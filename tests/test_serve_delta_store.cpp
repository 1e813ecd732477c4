// The delta store against the engine and runtime it serves: deltas registered, evicted under a
// host budget (least recently used and idle first, never one a request holds), reloaded on
// demand with the same outputs, a failed load that changes nothing, and unregistering that waits
// for the last request.
#include "core/error.hpp"
#include "runtime/sampler.hpp"
#include "runtime/transformer.hpp"
#include "serve/delta_store.hpp"
#include "serve/engine.hpp"
#include "support/delta_fixture.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>

using namespace optkit;
using namespace optkit::serve;
using runtime::TokenId;
using test::tiny_base;

namespace {

const std::vector<TokenId> kPrompt = {12, 345, 678, 90, 1234, 56};

std::vector<TokenId>
greedy_merged(int count) {
  runtime::CpuTransformer model(tiny_base(), {.threads = 2, .delta = test::code_delta()});
  const auto seq = model.add_sequence();
  std::vector<TokenId> out, next = kPrompt;
  for (int i = 0; i < count; ++i) {
    const runtime::SequenceInput input{seq, next, false};
    out.push_back(runtime::argmax(model.forward(std::span(&input, 1))));
    next = {out.back()};
  }
  return out;
}

struct Served {
  runtime::CpuTransformer* model = nullptr;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<DeltaStore> store;
  explicit Served(std::uint64_t budget) {
    auto owned = std::make_unique<runtime::CpuTransformer>(tiny_base(), runtime::RuntimeOptions{.threads = 2});
    model = owned.get();
    const runtime::KvCache& kv = owned->kv_cache();
    engine = std::make_unique<Engine>(std::move(owned), kv, EngineOptions{});
    store = std::make_unique<DeltaStore>(*model, *engine, DeltaStoreOptions{budget});
  }
  ~Served() {
    store.reset(); // before the engine it uses
    engine->stop();
  }
  bool resident(const std::string& name) const {
    for (const auto& d : store->list())
      if (d.name == name)
        return d.resident;
    return false;
  }
  // A greedy request on `name` through acquire, as the API server sends it; waits for its tokens.
  std::vector<TokenId> generate(const std::string& name, int count) {
    std::promise<std::vector<TokenId>> done;
    auto tokens = std::make_shared<std::vector<TokenId>>();
    store->acquire(name, [&, tokens](std::int32_t id, const std::string& error) {
      REQUIRE(error.empty());
      GenerationParams params;
      params.max_tokens = count;
      params.ignore_eos = true;
      params.seeded = true;
      params.variant = id;
      engine->submit(kPrompt, params, [&, tokens, id](const StepOutput& out) {
        if (out.token)
          tokens->push_back(*out.token);
        if (out.finish != FinishReason::none) {
          store->release(id);
          done.set_value(*tokens);
        }
      });
    });
    auto result = done.get_future();
    REQUIRE(result.wait_for(std::chrono::seconds(120)) == std::future_status::ready);
    return result.get();
  }
};

std::uint64_t
delta_bytes() {
  runtime::CpuTransformer model(tiny_base(), {.threads = 1});
  return model.load_variant(test::code_delta())->resident_bytes();
}

} // namespace

TEST_CASE("under a host budget for one delta, loading a second evicts the idle first; a request reloads it") {
  const auto expected = greedy_merged(6);
  Served s(delta_bytes());
  s.store->add("a", test::code_delta());
  CHECK(s.generate("a", 6) == expected);
  s.store->add("b", test::code_delta()); // loaded first, then "a" (idle) goes
  CHECK(s.resident("b"));
  CHECK_FALSE(s.resident("a"));
  CHECK(s.store->stats().evictions == 1);
  CHECK(s.generate("a", 6) == expected); // back from disk, "b" evicted for it
  CHECK(s.resident("a"));
  CHECK_FALSE(s.resident("b"));
  const auto stats = s.store->stats();
  CHECK(stats.loads == 3);
  CHECK(stats.evictions == 2);
  CHECK(stats.resident_bytes == delta_bytes());
}

TEST_CASE("a failed load registers and evicts nothing; a taken name or an oversized delta is refused") {
  Served s(delta_bytes());
  s.store->add("a", test::code_delta());
  test::ScratchDir scratch;
  const auto broken = scratch.path() / "broken";
  std::filesystem::copy(test::code_delta(), broken);
  std::ofstream(broken / "delta.safetensors.zst", std::ios::trunc) << "not zstd";
  CHECK_THROWS_AS(s.store->add("b", broken), InputError);
  CHECK(s.resident("a"));
  CHECK(s.store->list().size() == 1);
  CHECK(s.store->stats().evictions == 0);
  CHECK_THROWS_WITH_AS(s.store->add("a", test::code_delta()), doctest::Contains("already served"), InputError);
  Served small(1000); // a budget smaller than the delta itself
  CHECK_THROWS_WITH_AS(small.store->add("a", test::code_delta()), doctest::Contains("host budget"), InputError);
  CHECK(small.store->list().empty());
}

TEST_CASE("a delta a request holds is never evicted; unregistering refuses new requests and frees it after") {
  Served s(delta_bytes());
  s.store->add("a", test::code_delta());
  // Hold "a" as a request in flight does.
  std::promise<std::int32_t> acquired;
  s.store->acquire("a", [&](std::int32_t id, const std::string&) { acquired.set_value(id); });
  const std::int32_t a = acquired.get_future().get();
  s.store->add("b", test::code_delta()); // over budget: nothing idle to evict
  CHECK(s.resident("a"));
  CHECK(s.resident("b"));
  CHECK(s.store->stats().evictions == 0);

  s.store->remove("a");
  CHECK_THROWS_AS(s.store->acquire("a", [](std::int32_t, const std::string&) {}), UnknownDelta);
  CHECK_THROWS_AS(s.store->remove("a"), UnknownDelta);
  CHECK(s.store->stats().resident_bytes == 2 * delta_bytes()); // still held
  s.store->release(a);                                         // its last request ended
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (s.store->stats().resident_bytes != delta_bytes() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(s.store->stats().resident_bytes == delta_bytes());
  CHECK(s.store->list().size() == 1);
  s.store->add("a", test::code_delta()); // the name is free again (a new id)
  CHECK(s.generate("a", 4) == greedy_merged(4));
}

TEST_CASE("a runtime load past its deadline is abandoned with nothing registered; one within it loads") {
  Served s(0);
  const auto add = [&](const std::string& name, std::chrono::steady_clock::time_point deadline) {
    std::promise<AddOutcome> done;
    s.store->add_async(name, test::code_delta(), deadline, [&](const AddOutcome& o) { done.set_value(o); });
    return done.get_future().get();
  };
  const auto late = add("late", std::chrono::steady_clock::now() - std::chrono::seconds(1));
  CHECK(late.timed_out);
  CHECK(late.id < 0);
  CHECK(late.error.find("deadline") != std::string::npos);
  CHECK(s.store->list().empty());
  CHECK(s.store->stats().loads == 0);
  const auto in_time = add("late", std::chrono::steady_clock::now() + std::chrono::hours(1)); // the name is free
  CHECK_FALSE(in_time.timed_out);
  CHECK(in_time.error.empty());
  CHECK(in_time.id >= 0);
  CHECK(s.resident("late"));
  CHECK(s.generate("late", 4) == greedy_merged(4));
}
