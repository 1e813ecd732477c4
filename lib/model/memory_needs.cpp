#include "model/memory_needs.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace optkit::model {

namespace {

// Measured (tests/perf/perf_compress_memory on the 1B and 8B shapes): the program with its
// stacks and BLAS buffers, and with calibration the tokenizer and the tokenized documents.
constexpr std::uint64_t kProcessBytes = 128ULL << 20;
constexpr std::uint64_t kCalibrationTextBytes = 256ULL << 20;
constexpr std::uint64_t kFloat = sizeof(float);

std::uint64_t
u(std::int64_t v) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v));
}

} // namespace

CompressMemoryNeeds
compress_memory_needs(const ModelConfig& c, const CompressWork& work) {
  const auto h = u(c.hidden_size), i = u(c.intermediate_size), q = u(c.q_dim()), kv = u(c.kv_dim());
  // A mixture of experts' layer holds all its experts (and its router) at once.
  const auto ie = u(c.expert_intermediate_size), experts = u(c.num_experts);
  const std::uint64_t moe_mlp = experts * (3 * h * ie + h);
  const std::uint64_t layer_elements = h * (q + 2 * kv) + q * h + std::max(3 * h * i, moe_mlp);
  const std::uint64_t largest_linear = std::max({q * h, i * h, kv * h, ie * h});
  const std::uint64_t widest_input = std::max({h, q, i});
  const bool calibrated = work.calibration_tokens > 0;
  CompressMemoryNeeds needs;
  needs.process = kProcessBytes;
  std::uint64_t mapped = work.weight_bytes * layer_elements;
  std::uint64_t per_element = 3 * kFloat + 1; // fp32 weight, grid values, reconstruction, encoded
  if (work.delta) {                           // the base's mapped layer and fp32 weight beside
    mapped *= 2;
    per_element += kFloat;
  }
  // Each linear's mapped pages are released once it is widened: the largest one's are resident.
  needs.compression = mapped / layer_elements * largest_linear + per_element * largest_linear;
  if (!calibrated)
    return needs;
  needs.process += kCalibrationTextBytes;
  needs.compression += kFloat * (layer_elements - largest_linear); // the reconstructions before it
  if (work.hessians) // GPTQ's working copy of the weight (then the error report's two), and the
    // Hessian, which GPTQ factors in place
    needs.compression += 2 * kFloat * largest_linear + kFloat * widest_input * widest_input;
  needs.chunk_tokens = std::min(work.calibration_tokens, std::max<std::int64_t>(1, work.chunk_tokens));
  const auto block = std::min(needs.chunk_tokens, std::max<std::int64_t>(1, work.mlp_block_tokens));
  const std::uint64_t chunk = kFloat * (u(needs.chunk_tokens) * (3 * h + 2 * q + 4 * kv + i) + u(block) * 2 * i);
  const std::uint64_t hessians = work.hessians ? kFloat * (2 * h * h + q * q + i * i) : 0;
  needs.calibration_pass = mapped + hessians + chunk;
  if (experts > 0) { // the routed MLP inputs kept whole, then one expert's rows, activations and Hessians
    const auto tokens = u(work.calibration_tokens);
    needs.calibration_pass += kFloat * tokens * h + 8 * tokens * u(c.experts_per_token);
    needs.compression += kFloat * tokens * (h + 2 * h + 2 * ie) + kFloat * (h * h + ie * ie);
  }
  needs.states = kFloat * u(work.calibration_tokens) * h;
  return needs;
}

std::string
CompressMemoryNeeds::describe(bool spilled) const {
  std::string out = fmt::format("{}: {} for a layer", gigabytes(total(spilled)), gigabytes(layer()));
  if (chunk_tokens > 0)
    out += calibration_pass >= compression
               ? fmt::format(" (its calibration pass over chunks of up to {} tokens)", chunk_tokens)
               : std::string(" (compressing its largest linear)");
  if (states > 0 && !spilled)
    out += fmt::format(", {} of calibration states", gigabytes(states));
  return out + fmt::format(", {} for the process", gigabytes(process));
}

RunMemoryNeeds
run_memory_needs(const ModelConfig& c, std::uint64_t weight_bytes, std::int64_t step_tokens, std::uint64_t kv_bytes) {
  const auto h = u(c.hidden_size), i = u(c.intermediate_size), q = u(c.q_dim()), kv = u(c.kv_dim());
  RunMemoryNeeds needs;
  needs.process = kProcessBytes;
  needs.weights = weight_bytes;
  needs.activations = kFloat * u(step_tokens) * (3 * h + 2 * q + 2 * kv + 2 * i + u(c.vocab_size));
  needs.kv_cache = kv_bytes;
  return needs;
}

std::string
RunMemoryNeeds::describe() const {
  return fmt::format("{}: {} of weights, {} of KV cache, {} of activations, {} for the process", gigabytes(total()),
                     gigabytes(weights), gigabytes(kv_cache), gigabytes(activations), gigabytes(process));
}

std::string
gigabytes(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  return b >= 1e9   ? fmt::format("{:.2f} GB", b / 1e9)
         : b >= 1e6 ? fmt::format("{:.0f} MB", b / 1e6)
                    : fmt::format("{:.0f} kB", b / 1e3);
}

} // namespace optkit::model
