#include "runtime/device_linear_layers.hpp"

#include "core/build_config.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#if OPTKIT_HAVE_CUDA
#include "device_linears.cuh"

#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <vector>
#endif

namespace optkit::runtime {

#if OPTKIT_HAVE_CUDA

namespace {

int
narrow(std::int64_t n, const char* what) {
  if (n < 0 || n > std::numeric_limits<int>::max())
    throw RuntimeFailure(fmt::format("{} of {} is beyond what the device layers take", what, n));
  return static_cast<int>(n);
}

} // namespace

struct DeviceLinearLayers::State {
  std::unique_ptr<cuda::DeviceLinears> device;
  std::unordered_map<const DeltaVariant*, int> slot_of;
  std::vector<std::vector<bool>> held; // [slot][matrix]: the device holds the slot's Δ of it
};

DeviceLinearLayers::DeviceLinearLayers(int device, const DecoderWeights& weights)
    : m_state(std::make_unique<State>()), m_layers(static_cast<int>(weights.config().num_layers)) {
  try {
    m_state->device = std::make_unique<cuda::DeviceLinears>(device);
    const auto upload = [&](const LinearWeight& weight) {
      const auto w = dense_floats(weight);
      m_state->device->add_matrix(w.data(), narrow(weight.rows(), "rows"), narrow(weight.cols(), "columns"));
    };
    for (int l = 0; l < m_layers; ++l)
      for (const auto slot : kProjectionWeight)
        upload(*(weights.layer(l).*slot));
    upload(weights.lm_head());
  } catch (const std::runtime_error& e) {
    throw RuntimeFailure(fmt::format("cannot serve on CUDA device {}: {} (optkit doctor shows what this machine has)",
                                     device, e.what()));
  }
}

DeviceLinearLayers::~DeviceLinearLayers() = default;

std::string
DeviceLinearLayers::device_name() const {
  return m_state->device->device_name();
}

void
DeviceLinearLayers::set_variant(std::int32_t slot, const DeltaVariant* variant) {
  if (slot < 0)
    throw InputError(fmt::format("device slot {} is out of range", slot));
  State& s = *m_state;
  const auto index = static_cast<std::size_t>(slot);
  std::erase_if(s.slot_of, [&](const auto& entry) { return entry.second == slot; });
  s.device->clear_slot(slot);
  if (index < s.held.size())
    s.held[index].clear();
  if (variant == nullptr)
    return;
  if (index >= s.held.size())
    s.held.resize(index + 1);
  std::vector<bool>& held = s.held[index];
  held.assign(static_cast<std::size_t>(lm_head() + 1), false);
  const auto put = [&](int matrix, const VariantMatrix& m) {
    if (!m.delta)
      return;
    const auto& p = m.delta->codes();
    const cuda::PackedDelta packed{p.bits,   p.sparse, p.offset,  p.words, p.group_size,
                                   p.groups, p.values, p.indices, p.scales};
    if (!cuda::DeviceLinears::takes(packed, narrow(m.delta->cols(), "columns")))
      return; // the CPU applies it
    try {
      s.device->set_delta(matrix, slot, packed);
    } catch (const std::runtime_error& e) {
      s.device->clear_slot(slot);
      held.clear();
      throw RuntimeFailure(fmt::format("cannot put a variant's Δ on the device: {}", e.what()));
    }
    held[static_cast<std::size_t>(matrix)] = true;
  };
  for (int l = 0; l < m_layers; ++l)
    for (int p = 0; p < kProjections; ++p)
      put(matrix(l, static_cast<Projection>(p)), variant->layer(l).*kProjectionVariant[p]);
  put(lm_head(), variant->lm_head());
  s.slot_of[variant] = slot;
}

void
DeviceLinearLayers::multiply(int matrix, const float* x, std::int64_t rows, const BatchRows& batch, float* y) {
  std::vector<cuda::RowSegment> segments;
  for (const auto& segment : batch.segments)
    if (holds(segment.variant, matrix))
      segments.push_back({static_cast<int>(segment.begin), static_cast<int>(segment.end - segment.begin),
                          m_state->slot_of.at(segment.variant)});
  try {
    m_state->device->multiply(matrix, x, narrow(rows, "a batch"), segments, y);
  } catch (const std::runtime_error& e) {
    throw RuntimeFailure(fmt::format("device linear layer {}: {}", matrix, e.what()));
  }
}

bool
DeviceLinearLayers::holds(const DeltaVariant* variant, int matrix) const {
  const auto found = m_state->slot_of.find(variant);
  if (found == m_state->slot_of.end())
    return false;
  const auto& held = m_state->held[static_cast<std::size_t>(found->second)];
  return static_cast<std::size_t>(matrix) < held.size() && held[static_cast<std::size_t>(matrix)];
}

std::uint64_t
DeviceLinearLayers::weight_bytes() const {
  return m_state->device->weight_bytes();
}

std::uint64_t
DeviceLinearLayers::delta_bytes() const {
  return m_state->device->delta_bytes();
}

#else

struct DeviceLinearLayers::State {};

DeviceLinearLayers::DeviceLinearLayers(int device, const DecoderWeights&) {
  throw RuntimeFailure(fmt::format("cannot serve on CUDA device {}: this optkit was built without CUDA (rebuild where "
                                   "nvcc is found; optkit --version lists the features)",
                                   device));
}
DeviceLinearLayers::~DeviceLinearLayers() = default;
std::string
DeviceLinearLayers::device_name() const {
  return {};
}
void
DeviceLinearLayers::set_variant(std::int32_t, const DeltaVariant*) {}
void
DeviceLinearLayers::multiply(int, const float*, std::int64_t, const BatchRows&, float*) {}
bool
DeviceLinearLayers::holds(const DeltaVariant*, int) const {
  return false;
}
std::uint64_t
DeviceLinearLayers::weight_bytes() const {
  return 0;
}
std::uint64_t
DeviceLinearLayers::delta_bytes() const {
  return 0;
}

#endif

} // namespace optkit::runtime
