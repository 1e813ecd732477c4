#include "model/memory_needs.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace optkit::model {

namespace {

constexpr std::uint64_t kProcessBytes = 128ULL << 20; // code, tokenizer, stacks, BLAS buffers
constexpr std::uint64_t kFloat = sizeof(float);

std::uint64_t
u(std::int64_t v) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v));
}

} // namespace

CompressMemoryNeeds
compress_memory_needs(const ModelConfig& c, const CompressWork& work) {
  const auto h = u(c.hidden_size), i = u(c.intermediate_size), q = u(c.q_dim()), kv = u(c.kv_dim());
  const std::uint64_t layer_elements = h * (q + 2 * kv) + q * h + 3 * h * i;
  const std::uint64_t largest_linear = std::max({q * h, i * h, kv * h});
  const std::uint64_t widest_input = std::max({h, q, i});
  CompressMemoryNeeds needs;
  needs.process = kProcessBytes;
  // Mapped weights + fp32 weight, grid values and reconstruction + encoded output (≤ 1 byte each).
  needs.layer = work.weight_bytes * layer_elements + (3 * kFloat + 1) * largest_linear;
  if (work.delta) // the base's mapped layer and its fp32 weight beside the fine-tune's
    needs.layer += work.weight_bytes * layer_elements + kFloat * largest_linear;
  if (work.calibration_tokens > 0) {
    needs.layer += kFloat * layer_elements; // reconstructions for the next layer's pass
    if (work.hessians) {
      needs.layer += kFloat * (2 * h * h + q * q + i * i);                // the layer's Hessians
      needs.layer += kFloat * (3 * widest_input * widest_input + 2 * largest_linear); // GPTQ's copies
    }
    const auto tokens = u(std::min(work.calibration_tokens, std::max<std::int64_t>(1, work.chunk_tokens)));
    needs.states = kFloat * u(work.calibration_tokens) * h;
    needs.chunk = kFloat * tokens * (3 * h + 2 * q + 4 * kv + 2 * i);
  }
  return needs;
}

std::string
CompressMemoryNeeds::describe(bool spilled, std::int64_t chunk_tokens) const {
  std::string out = fmt::format("{}: {} for the largest layer", gigabytes(total(spilled)), gigabytes(layer));
  if (states > 0 && !spilled)
    out += fmt::format(", {} of calibration states", gigabytes(states));
  if (chunk > 0)
    out += fmt::format(", {} for a chunk of up to {} tokens", gigabytes(chunk), chunk_tokens);
  return out + fmt::format(", {} for the process", gigabytes(process));
}

std::string
gigabytes(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  return b >= 1e9 ? fmt::format("{:.2f} GB", b / 1e9) : b >= 1e6 ? fmt::format("{:.0f} MB", b / 1e6)
                                                               : fmt::format("{:.0f} kB", b / 1e3);
}

} // namespace optkit::model
