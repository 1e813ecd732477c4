// The transformer's whole step on a CUDA device (serve-deltas --device cuda): weights, norms,
// RoPE, paged attention over a device KV cache and the served variants' compressed Δs by SBMM.
// On a device: with fp32 weights its logits and greedy tokens equal the all-CPU path's for a
// batch mixing the base and a real delta (optkit compress delta) through prefill across cache
// blocks, decode, and a prefill beside decodes; after a variant leaves its slot; after a swap of
// whole weights; and with BF16 weights they stay within BF16's rounding. Without one, asking for
// a device is refused with the reason.
#include "core/error.hpp"
#include "doctor/gpu_probe.hpp"
#include "runtime/transformer.hpp"
#include "support/delta_fixture.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

using namespace optkit;
using namespace optkit::runtime;

namespace {

// max |a − b| over max |b|.
double
relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return worst / scale;
}

std::vector<TokenId>
argmax_rows(const std::vector<float>& logits, std::size_t vocab) {
  std::vector<TokenId> tokens;
  for (std::size_t r = 0; r * vocab < logits.size(); ++r) {
    const auto row = logits.begin() + static_cast<std::ptrdiff_t>(r * vocab);
    tokens.push_back(static_cast<TokenId>(std::max_element(row, row + static_cast<std::ptrdiff_t>(vocab)) - row));
  }
  return tokens;
}

bool
have_device() {
  return !doctor::probe_gpus().devices.empty();
}

// A prompt of n tokens.
std::vector<TokenId>
prompt(int n, int seed) {
  std::vector<TokenId> p;
  for (int i = 0; i < n; ++i)
    p.push_back(static_cast<TokenId>((seed * 131 + i * 37) % 2000 + 1));
  return p;
}

// Runs the same batches through `cpu` and `gpu` (prefill of `prompts` with every logit, then
// `steps` greedy decode steps, each side from its own choices) and returns the worst relative
// logit error; the greedy tokens must agree when `same_tokens`.
double
compare_runs(CpuTransformer& cpu, CpuTransformer& gpu, const std::vector<std::vector<TokenId>>& prompts,
             const std::vector<std::int32_t>& variants, int steps, bool same_tokens) {
  const auto vocab = static_cast<std::size_t>(gpu.config().vocab_size);
  std::vector<SequenceId> on_cpu, on_gpu;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    on_cpu.push_back(cpu.add_sequence());
    on_gpu.push_back(gpu.add_sequence());
  }
  const auto batch = [&](const std::vector<SequenceId>& ids, const std::vector<std::vector<TokenId>>& tokens,
                         bool all) {
    std::vector<SequenceInput> inputs;
    for (std::size_t i = 0; i < ids.size(); ++i)
      inputs.push_back({ids[i], tokens[i], all, variants[i]});
    return inputs;
  };
  const auto expected = cpu.forward(batch(on_cpu, prompts, true));
  const auto got = gpu.forward(batch(on_gpu, prompts, true));
  double worst = relative_error(got, expected);
  const auto last_rows = [&](const std::vector<float>& logits) {
    const auto all = argmax_rows(logits, vocab);
    std::vector<TokenId> last;
    std::size_t end = 0;
    for (const auto& t : prompts)
      last.push_back(all[(end += t.size()) - 1]);
    return last;
  };
  auto cpu_next = last_rows(expected), gpu_next = last_rows(got);
  for (int step = 0; step < steps; ++step) {
    if (same_tokens)
      REQUIRE(cpu_next == gpu_next);
    std::vector<std::vector<TokenId>> cpu_tokens, gpu_tokens;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      cpu_tokens.push_back({cpu_next[i]});
      gpu_tokens.push_back({same_tokens ? gpu_next[i] : cpu_next[i]}); // BF16: both fed the CPU's choice
    }
    const auto cpu_logits = cpu.forward(batch(on_cpu, cpu_tokens, false));
    const auto gpu_logits = gpu.forward(batch(on_gpu, gpu_tokens, false));
    worst = std::max(worst, relative_error(gpu_logits, cpu_logits));
    cpu_next = argmax_rows(cpu_logits, vocab);
    gpu_next = argmax_rows(gpu_logits, vocab);
  }
  if (same_tokens)
    CHECK(cpu_next == gpu_next);
  return worst;
}

} // namespace

TEST_CASE("the step on a CUDA device gives the CPU path's logits and greedy tokens, deltas and base mixed") {
  if (!have_device()) {
    // Asking for a device where there is none is refused, naming it and why.
    CHECK_THROWS_WITH_AS(CpuTransformer(test::tiny_base(), {.threads = 1, .device = 0}),
                         doctest::Contains("cannot serve on CUDA device 0"), RuntimeFailure);
    MESSAGE("no CUDA device (" << doctor::probe_gpus().error << "): the GPU comparison did not run");
    return;
  }
  CpuTransformer cpu(test::tiny_base(), {.threads = 2, .int8_delta_activations = false}); // as the device
  CpuTransformer gpu(
      test::tiny_base(),
      {.threads = 2, .kv_cache = {.budget_bytes = 8 << 20}, .device = 0, .device_precision = DevicePrecision::fp32});
  REQUIRE(gpu.device() != nullptr);
  CHECK(gpu.kv_cache().capacity_blocks() > 0);
  const auto code_cpu = cpu.add_variant(test::code_delta());
  const auto code = gpu.add_variant(test::code_delta());
  REQUIRE(code == code_cpu);
  const DeviceEngine& device = *gpu.device();
  CHECK(device.delta_bytes() > 0);

  // Prompts across several 16-token blocks, the base and the variant interleaved.
  const std::vector<std::vector<TokenId>> prompts{prompt(6, 1), prompt(6, 1), prompt(37, 2), prompt(3, 3),
                                                  prompt(70, 4)};
  const double worst = compare_runs(cpu, gpu, prompts, {-1, code, code, -1, code}, 12, true);
  MESSAGE(device.device_name() << ": fp32 weights, max |gpu - cpu| / max |cpu| = " << worst);
  CHECK(worst <= 1e-4);

  // A prefill beside decodes in one step: a new sequence's prompt with the running ones' tokens.
  {
    const auto a_cpu = cpu.add_sequence(), a_gpu = gpu.add_sequence();
    const auto b_cpu = cpu.add_sequence(), b_gpu = gpu.add_sequence();
    const auto first = prompt(20, 5), second = prompt(9, 6), next = std::vector<TokenId>{77};
    cpu.forward(std::vector<SequenceInput>{{a_cpu, first, false, code}});
    gpu.forward(std::vector<SequenceInput>{{a_gpu, first, false, code}});
    const auto expected =
        cpu.forward(std::vector<SequenceInput>{{a_cpu, next, false, code}, {b_cpu, second, true, -1}});
    const auto got = gpu.forward(std::vector<SequenceInput>{{a_gpu, next, false, code}, {b_gpu, second, true, -1}});
    CHECK(relative_error(got, expected) <= 1e-4);
  }

  // The variant leaves its slot; base rows are unchanged and the device no longer holds it.
  gpu.set_variant(code, nullptr);
  CHECK(device.delta_bytes() == 0);
  const std::vector<TokenId> p2{5, 6, 7};
  const auto s = gpu.add_sequence(), c = cpu.add_sequence();
  const std::vector<SequenceInput> base_gpu{{s, p2, true, -1}}, base_cpu{{c, p2, true, -1}};
  CHECK(relative_error(gpu.forward(base_gpu), cpu.forward(base_cpu)) <= 1e-4);
}

TEST_CASE("with BF16 weights and cache the device's logits stay within BF16's rounding of the CPU's") {
  if (!have_device()) {
    MESSAGE("no CUDA device: not run");
    return;
  }
  CpuTransformer cpu(test::tiny_base(), {.threads = 2, .int8_delta_activations = false}); // as the device
  CpuTransformer gpu(test::tiny_base(), {.threads = 2, .kv_cache = {.budget_bytes = 8 << 20}, .device = 0});
  const auto code = gpu.add_variant(test::code_delta());
  REQUIRE(cpu.add_variant(test::code_delta()) == code);
  const std::vector<std::vector<TokenId>> prompts{prompt(12, 7), prompt(40, 8), prompt(12, 7)};
  const double worst = compare_runs(cpu, gpu, prompts, {-1, code, code}, 8, false);
  MESSAGE(gpu.device()->device_name() << ": BF16 weights, max |gpu - cpu| / max |cpu| = " << worst);
  CHECK(worst <= 3e-2);
}

TEST_CASE("a swap of whole weights re-uploads them to the device") {
  if (!have_device()) {
    MESSAGE("no CUDA device: not run");
    return;
  }
  CpuTransformer merged(test::tiny_base(), {.threads = 2, .delta = test::code_delta()});
  CpuTransformer swapped(
      test::tiny_base(),
      {.threads = 2, .kv_cache = {.budget_bytes = 8 << 20}, .device = 0, .device_precision = DevicePrecision::fp32});
  const auto blocks = swapped.kv_cache().capacity_blocks();
  swapped.reload(test::tiny_base(), test::code_delta());
  CHECK(swapped.kv_cache().capacity_blocks() == blocks);
  const std::vector<TokenId> p{3, 14, 15, 92, 65};
  const std::vector<SequenceInput> a{{merged.add_sequence(), p, true, -1}}, b{{swapped.add_sequence(), p, true, -1}};
  CHECK(relative_error(swapped.forward(b), merged.forward(a)) <= 1e-4);
}
