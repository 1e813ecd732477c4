// The transformer with its linear layers on a CUDA device (serve-deltas --device cuda): base
// products in cuBLASLt, the served variants' compressed Δs by one SBMM launch, the rest on the CPU.
// On a device, its logits and greedy tokens equal the all-CPU path's for a batch mixing the base and
// a real delta (optkit compress delta) through prefill and decode, after a variant leaves its slot,
// and after a swap of whole weights. Without one, asking for a device is refused with the reason.
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

} // namespace

TEST_CASE("linear layers on a CUDA device give the CPU path's logits and greedy tokens, deltas and base mixed") {
  const doctor::GpuProbe probe = doctor::probe_gpus();
  if (probe.devices.empty()) {
    // Asking for a device where there is none is refused, naming it and why.
    CHECK_THROWS_WITH_AS(CpuTransformer(test::tiny_base(), {.threads = 1, .device = 0}),
                         doctest::Contains("cannot serve on CUDA device 0"), RuntimeFailure);
    MESSAGE("no CUDA device (" << probe.error << "): the GPU comparison did not run");
    return;
  }
  CpuTransformer cpu(test::tiny_base(), {.threads = 2});
  CpuTransformer gpu(test::tiny_base(), {.threads = 2, .device = 0});
  REQUIRE(gpu.device() != nullptr);
  const auto code_cpu = cpu.add_variant(test::code_delta());
  const auto code = gpu.add_variant(test::code_delta());
  REQUIRE(code == code_cpu);
  const DeviceLinearLayers& device = *gpu.device();
  CHECK(device.holds(&gpu.variant(code), device.matrix(0, Projection::gate)));
  CHECK(device.delta_bytes() > 0);
  const auto vocab = static_cast<std::size_t>(gpu.config().vocab_size);

  const std::vector<TokenId> p1{11, 200, 31, 77, 1500, 9}, p2{5, 6, 7}, p3{42, 43, 44, 45, 46, 47, 48, 49, 50, 51};
  std::vector<SequenceId> on_cpu, on_gpu;
  for (int i = 0; i < 4; ++i) {
    on_cpu.push_back(cpu.add_sequence());
    on_gpu.push_back(gpu.add_sequence());
  }
  const std::int32_t variants[] = {-1, code, code, -1};
  const std::vector<TokenId>* prompts[] = {&p1, &p1, &p3, &p2};
  const auto batch = [&](const std::vector<SequenceId>& ids, const std::vector<std::vector<TokenId>>& tokens,
                         bool all) {
    std::vector<SequenceInput> inputs;
    for (std::size_t i = 0; i < ids.size(); ++i)
      inputs.push_back({ids[i], tokens[i], all, variants[i]});
    return inputs;
  };
  std::vector<std::vector<TokenId>> prompt_tokens;
  for (const auto* p : prompts)
    prompt_tokens.push_back(*p);
  const auto expected = cpu.forward(batch(on_cpu, prompt_tokens, true));
  const auto got = gpu.forward(batch(on_gpu, prompt_tokens, true));
  MESSAGE(device.device_name() << ": prefill logits, max |gpu - cpu| / max |cpu| = " << relative_error(got, expected));
  CHECK(relative_error(got, expected) <= 1e-4);

  // Greedy decoding, each side from its own choices: the same tokens for 12 steps.
  const auto last_rows = [&](const std::vector<float>& logits) {
    const auto all = argmax_rows(logits, vocab);
    std::vector<TokenId> last;
    std::size_t end = 0;
    for (const auto& t : prompt_tokens)
      last.push_back(all[(end += t.size()) - 1]);
    return last;
  };
  auto cpu_next = last_rows(expected), gpu_next = last_rows(got);
  for (int step = 0; step < 12; ++step) {
    REQUIRE(cpu_next == gpu_next);
    std::vector<std::vector<TokenId>> tokens;
    for (const auto t : cpu_next)
      tokens.push_back({t});
    const auto cpu_logits = cpu.forward(batch(on_cpu, tokens, false));
    const auto gpu_logits = gpu.forward(batch(on_gpu, tokens, false));
    CHECK(relative_error(gpu_logits, cpu_logits) <= 1e-4);
    cpu_next = argmax_rows(cpu_logits, vocab);
    gpu_next = argmax_rows(gpu_logits, vocab);
  }
  CHECK(cpu_next == gpu_next);

  // The variant leaves its slot; base rows are unchanged and the device no longer holds it.
  gpu.set_variant(code, nullptr);
  CHECK(device.delta_bytes() == 0);
  const auto s = gpu.add_sequence(), c = cpu.add_sequence();
  const std::vector<SequenceInput> base_gpu{{s, p2, true, -1}}, base_cpu{{c, p2, true, -1}};
  CHECK(relative_error(gpu.forward(base_gpu), cpu.forward(base_cpu)) <= 1e-4);
}

TEST_CASE("a swap of whole weights re-uploads them to the device") {
  if (doctor::probe_gpus().devices.empty()) {
    MESSAGE("no CUDA device: not run");
    return;
  }
  CpuTransformer merged(test::tiny_base(), {.threads = 2, .delta = test::code_delta()});
  CpuTransformer swapped(test::tiny_base(), {.threads = 2, .device = 0});
  swapped.reload(test::code_delta());
  const std::vector<TokenId> p{3, 14, 15, 92, 65};
  const std::vector<SequenceInput> a{{merged.add_sequence(), p, true, -1}}, b{{swapped.add_sequence(), p, true, -1}};
  CHECK(relative_error(swapped.forward(b), merged.forward(a)) <= 1e-4);
}
