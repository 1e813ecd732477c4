#include "serve/swap_model.hpp"

#include "core/error.hpp"
#include "model/model_config.hpp"

#include <fmt/format.h>

namespace optkit::serve {

namespace {

// A variant folder read as a whole model: a delta artifact merged into the base, or a checkpoint
// of the base's shape loaded as it is.
bool
is_delta_artifact(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / "delta_config.json");
}

} // namespace

SwapModel::SwapModel(const std::filesystem::path& base, std::vector<std::filesystem::path> variants,
                     runtime::RuntimeOptions options)
    : m_base(base), m_model(base, std::move(options)) {
  for (auto& dir : variants) {
    if (is_delta_artifact(dir)) {
      m_variants.push_back({base, std::move(dir)});
      continue;
    }
    if (!std::filesystem::exists(dir / "config.json"))
      throw InputError(fmt::format("{}: neither a delta artifact (delta_config.json) nor a checkpoint folder "
                                   "(config.json); --baseline swap serves each variant as a whole model",
                                   dir.string()));
    if (const auto why = model::shape_difference(m_model.config(), model::load_model_config(dir)); !why.empty())
      throw InputError(fmt::format("{}: a checkpoint of another shape than the base {} ({}); --baseline swap "
                                   "serves variants of the base's shape",
                                   dir.string(), base.string(), why));
    m_variants.push_back({std::move(dir), std::nullopt});
  }
}

SwapModel::WholeModel
SwapModel::whole_model(std::int32_t variant) const {
  return variant < 0 ? WholeModel{m_base, std::nullopt} : m_variants[static_cast<std::size_t>(variant)];
}

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
    if (in.variant < -1 || in.variant >= static_cast<std::int32_t>(m_variants.size()))
      throw InputError(fmt::format("variant {} is not served ({} variants)", in.variant, m_variants.size()));
    in.variant = -1; // the loaded weights are the variant's, merged
  }
  if (variant != m_loaded) {
    const auto start = std::chrono::steady_clock::now();
    const auto next = whole_model(variant);
    m_model.reload(next.model_dir, next.delta);
    m_loaded = variant;
    ++m_swaps;
    m_swap_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return m_model.forward(merged);
}

} // namespace optkit::serve
