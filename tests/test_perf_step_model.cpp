// The step model's per-sequence batches and its use from many threads, on the roofline path where
// the work each shape does can be counted by hand.
#include "perf/roofline.hpp"
#include "perf/step_model.hpp"
#include "support/system_fixtures.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <thread>
#include <vector>

using namespace optkit;
using namespace optkit::perf;

namespace {

// Causal attention work of one prompt chunk, as attention_prefill_cost counts it.
double
prefill_work(double new_tokens, double cached) {
  return new_tokens * (cached + (new_tokens + 1.0) / 2.0);
}

} // namespace

TEST_CASE("a uniform batch reduces to the shape it already is") {
  StepBatch batch;
  batch.prefills = {{512, 128}, {512, 128}};
  batch.decode_kv_lens = {1000, 1000, 1000};
  const StepShape shape = equivalent_shape(batch);
  CHECK(shape.prefill_requests == 2);
  CHECK(shape.prefill_tokens == 512);
  CHECK(shape.prefix == doctest::Approx(128));
  CHECK(shape.decode_requests == 3);
  CHECK(shape.kv_len == 1000);
  CHECK(shape.tokens_per_decode == 1);
}

TEST_CASE("a mixed batch keeps its token count, its prefill attention FLOPs and its decode KV reads") {
  StepBatch batch;
  batch.prefills = {{64, 0}, {448, 0}, {200, 1000}};
  batch.decode_kv_lens = {10, 4000, 250, 90};
  const StepShape shape = equivalent_shape(batch);
  CHECK(shape.prefill_requests * shape.prefill_tokens == doctest::Approx(64 + 448 + 200));
  const double work = prefill_work(64, 0) + prefill_work(448, 0) + prefill_work(200, 1000);
  CHECK(shape.prefill_requests * prefill_work(shape.prefill_tokens, shape.prefix) == doctest::Approx(work));
  CHECK(shape.decode_requests * shape.kv_len == doctest::Approx(10 + 4000 + 250 + 90));

  // The averaged shape the planner used to assume (mean prompt, mean prefix) undercounts the
  // quadratic term: one long prompt costs more than two of half its length.
  const double naive = 3 * prefill_work((64 + 448 + 200) / 3.0, 1000 / 3.0);
  CHECK(naive < work);
}

TEST_CASE("pricing a long and a short prompt together costs more than two of their mean length") {
  const SystemSpec system = test::h100_sxm();
  const PerfDatabase db(system);
  const ModelArch model = resolve_model("llama-3.1-8b");
  const StepModel step(model, system, db, ParallelConfig{}, ServingPrecision{}, 0);
  StepBatch mixed, even;
  mixed.prefills = {{256, 0}, {7936, 0}};
  even.prefills = {{4096, 0}, {4096, 0}};
  const Estimate a = step.step(mixed), b = step.step(even);
  CHECK(a.us > b.us);
  CHECK(a.sources == calibrated); // the system file's fitted fallback
  // The linear layers see the same 8192 tokens either way; the difference is attention alone.
  const auto attention = [&](const StepBatch& batch) {
    const StepShape s = equivalent_shape(batch);
    return db.attention_prefill("bf16", model.heads, model.kv_heads, model.head_dim, s.prefill_requests,
                                s.prefill_tokens, s.prefix)
               .us *
           model.layers;
  };
  CHECK(a.us - b.us == doctest::Approx(attention(mixed) - attention(even)));
}

TEST_CASE("one step model priced from many threads gives each the single-threaded answer") {
  const SystemSpec system = test::h100_sxm();
  const PerfDatabase db(system);
  const ModelArch model = resolve_model("llama-3.1-8b");
  const StepModel step(model, system, db, ParallelConfig{2, 1, 1, 1}, ServingPrecision{}, 0);
  std::vector<StepShape> shapes;
  for (int i = 1; i <= 64; ++i) {
    StepShape s;
    s.decode_requests = i;
    s.kv_len = 100.0 * i;
    s.prefill_requests = i % 3;
    s.prefill_tokens = 37.0 * i;
    shapes.push_back(s);
  }
  std::vector<double> expected;
  for (const auto& s : shapes)
    expected.push_back(step.step(s).us);
  // A fresh model, so the threads race to fill its memo.
  const StepModel shared(model, system, db, ParallelConfig{2, 1, 1, 1}, ServingPrecision{}, 0);
  std::vector<std::vector<double>> seen(4, std::vector<double>(shapes.size()));
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < seen.size(); ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round)
        for (std::size_t i = 0; i < shapes.size(); ++i) {
          const std::size_t k = (i * (t + 1) + std::size_t(round)) % shapes.size();
          seen[t][k] = shared.step(shapes[k]).us;
        }
    });
  for (auto& thread : threads)
    thread.join();
  for (const auto& answers : seen)
    for (std::size_t i = 0; i < shapes.size(); ++i)
      CHECK(answers[i] == expected[i]);
}

TEST_CASE("an engine's attention runs at the efficiencies fitted to its points, optkit's at the database's") {
  SystemSpec system = test::h100_sxm();
  system.efficiency.attention = 0.8;
  system.efficiency.decode_attention = 0.9;
  system.efficiency.engine_attention["trtllm"] = {0.4, 0.45};
  const ModelArch model = resolve_model("llama-3.1-8b");
  PerfDatabase db(system);
  // A measured decode-attention table (optkit's kernels) at half the time the roofline says.
  const StepShape decode{.decode_requests = 64, .kv_len = 4096};
  const auto decode_attention = [&](const StepModel& step) { return step.step_parts(decode)[StepPart::attention]; };
  const StepModel roofline(model, system, db, ParallelConfig{}, ServingPrecision{}, 0, Engine::vllm);
  const StepModel trtllm(model, system, db, ParallelConfig{}, ServingPrecision{}, 0, Engine::trtllm);
  // vLLM has no fitted entry: the system's attention efficiencies; TensorRT-LLM its own, half of
  // those, so its KV reads take about twice as long (the fixed per-kernel cost aside).
  const double overhead = system.efficiency.kernel_overhead_us * model.layers;
  CHECK((decode_attention(trtllm).us - overhead) / (decode_attention(roofline).us - overhead) ==
        doctest::Approx(0.9 / 0.45).epsilon(0.01));
  CHECK(decode_attention(trtllm).sources == system.efficiency.fallback_label());

  const double measured_us = 37.0;
  db.add_point("attention_decode", {"bf16", "32", "8", "128"}, 64, 4096, measured_us);
  db.finish();
  const StepModel profiled(model, system, db, ParallelConfig{}, ServingPrecision{}, 0);
  CHECK(decode_attention(profiled).us == doctest::Approx(measured_us * model.layers));
  CHECK(decode_attention(profiled).sources == measured);
  CHECK(decode_attention(trtllm).us ==
        decode_attention(StepModel(model, system, PerfDatabase(system), ParallelConfig{}, ServingPrecision{}, 0,
                                   Engine::trtllm))
            .us); // the engine never reads the table
}
