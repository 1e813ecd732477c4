#include "serve/swap_model.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

namespace optkit::serve {

SwapModel::SwapModel(const std::filesystem::path& base, std::vector<std::filesystem::path> deltas,
                     runtime::RuntimeOptions options)
    : m_model(base, std::move(options)), m_deltas(std::move(deltas)) {}

std::vector<float>
SwapModel::forward(std::span<const runtime::SequenceInput> inputs) {
  if (inputs.empty())
    return {};
  const std::int32_t variant = inputs.front().variant;
  std::vector<runtime::SequenceInput> merged(inputs.begin(), inputs.end());
  for (auto& in : merged) {
    if (in.variant != variant)
      throw InputError(fmt::format("a swap-served step mixes variants {} and {}; one model is loaded at a time",
                                   variant, in.variant));
    if (in.variant < -1 || in.variant >= static_cast<std::int32_t>(m_deltas.size()))
      throw InputError(fmt::format("variant {} is not served ({} deltas)", in.variant, m_deltas.size()));
    in.variant = -1; // the loaded weights are the variant's, merged
  }
  if (variant != m_loaded) {
    const auto start = std::chrono::steady_clock::now();
    m_model.reload(variant < 0 ? std::nullopt
                               : std::optional<std::filesystem::path>(m_deltas[static_cast<std::size_t>(variant)]));
    m_loaded = variant;
    ++m_swaps;
    m_swap_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return m_model.forward(merged);
}

} // namespace optkit::serve
