#include "delta_slots.cuh"

#include "check.cuh"

#include <stdexcept>
#include <string>

namespace optkit::cuda {

namespace {

SbmmDelta
sbmm_view(const PackedDelta& p) {
  SbmmDelta d;
  d.bits = p.bits;
  d.sparse = p.sparse ? 1 : 0;
  d.offset = p.offset;
  d.words = static_cast<int>(p.words);
  d.groups = static_cast<int>(p.groups);
  d.group_size = static_cast<int>(p.group_size);
  return d;
}

} // namespace

bool
sbmm_takes(const PackedDelta& p, int cols) {
  return sbmm_supports(sbmm_view(p), cols) && p.values != nullptr && p.scales != nullptr &&
         (!p.sparse || p.indices != nullptr) && p.group_size >= 1 && (cols - 1) / p.group_size < p.groups;
}

void
DeltaSlots::set(int slot, const PackedDelta& p) {
  if (slot < 0 || slot > 1'000'000)
    throw std::runtime_error("delta slot " + std::to_string(slot) + " is out of range");
  if (!sbmm_takes(p, m_cols))
    throw std::runtime_error("SBMM takes 2, 4 or 8-bit Δs with columns a multiple of 8 and one scale per group (got " +
                             std::to_string(p.bits) + " bits, " + std::to_string(m_cols) + " columns)");
  SbmmDelta d = sbmm_view(p);
  auto delta = std::make_unique<Slot>();
  delta->values.upload(p.values, std::size_t(m_rows) * p.words);
  d.values = delta->values.data;
  if (p.sparse) {
    delta->indices.upload(p.indices, std::size_t(m_rows) * (m_cols / 8));
    d.indices = delta->indices.data;
  }
  delta->scales.upload(p.scales, std::size_t(m_rows) * p.groups);
  d.scales = delta->scales.data;
  check(cudaDeviceSynchronize(), "uploads");
  delta->view = d;
  delta->bytes = std::uint64_t(m_rows) * std::uint64_t(p.words * 4 + (p.sparse ? m_cols / 8 : 0) + p.groups * 4);
  widen(slot + 1);
  m_slots[static_cast<std::size_t>(slot)] = std::move(delta); // frees the Δ the slot held
  m_table[static_cast<std::size_t>(slot)] = d;
  m_stale = true;
}

void
DeltaSlots::clear(int slot) {
  if (!holds(slot))
    return;
  m_slots[static_cast<std::size_t>(slot)].reset();
  m_table[static_cast<std::size_t>(slot)] = SbmmDelta{};
  m_stale = true;
}

void
DeltaSlots::widen(int size) {
  if (size <= static_cast<int>(m_table.size()))
    return;
  m_slots.resize(static_cast<std::size_t>(size));
  m_table.resize(static_cast<std::size_t>(size));
  m_stale = true;
}

const SbmmDelta*
DeltaSlots::table(cudaStream_t stream) {
  if (m_stale && !m_table.empty()) {
    m_device_table.reserve(m_table.size(), "cudaMalloc (Δ slot table)");
    check(cudaMemcpyAsync(m_device_table.data, m_table.data(), m_table.size() * sizeof(SbmmDelta),
                          cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (slot table)");
    // The copy reads pageable host memory: it must land before the table changes again.
    check(cudaStreamSynchronize(stream), "the slot table upload");
    m_stale = false;
  }
  return m_device_table.data;
}

std::uint64_t
DeltaSlots::bytes() const {
  std::uint64_t total = 0;
  for (const auto& s : m_slots)
    if (s)
      total += s->bytes;
  return total;
}

} // namespace optkit::cuda
