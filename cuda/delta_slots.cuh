// One matrix's compressed Δs on a device, one per numbered variant slot, as SBMM reads them
// (cuda/sbmm.cuh): each Δ uploaded in the packed form the delta artifact stores, and the table of
// the slots' views the kernel indexes by slot. Used by DeviceLinears and DeviceDecoder.
#pragma once

#include "device_array.cuh"
#include "sbmm.cuh"

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace optkit::cuda {

// One compressed Δ [rows, cols] in host memory, as the delta artifact packs it.
struct PackedDelta {
  int bits = 0;
  bool sparse = true;
  float offset = 0;
  std::int64_t words = 0, group_size = 0, groups = 0;
  const std::int32_t* values = nullptr;  // [rows, words]
  const std::uint8_t* indices = nullptr; // [rows, cols/8] when sparse
  const float* scales = nullptr;         // [rows, groups]
};

// Whether SBMM takes `delta` for a matrix of `cols` columns: 2, 4 or 8 bits, columns a multiple
// of 8, one scale per group.
bool sbmm_takes(const PackedDelta& delta, int cols);

class DeltaSlots {
public:
  DeltaSlots(int rows, int cols) : m_rows(rows), m_cols(cols) {}

  // Uploads `delta` into slot `slot`, replacing what it held. Throws std::runtime_error, changing
  // nothing, when SBMM does not take it (naming why).
  void set(int slot, const PackedDelta& delta);
  // Empties the slot and frees its device memory (cudaFree waits for the device).
  void clear(int slot);
  bool holds(int slot) const {
    return slot >= 0 && slot < static_cast<int>(m_slots.size()) && m_slots[static_cast<std::size_t>(slot)];
  }
  // Makes the table at least `size` slots long (empty slots are skipped by the kernel), so tiles
  // of any slot below it may be launched on every matrix.
  void widen(int size);
  int size() const { return static_cast<int>(m_table.size()); }
  // The device table of views, uploaded on `stream` when it changed.
  const SbmmDelta* table(cudaStream_t stream);
  // Packed bytes of the Δ in `slot` (0: none), and of all.
  std::uint64_t bytes(int slot) const { return holds(slot) ? m_slots[static_cast<std::size_t>(slot)]->bytes : 0; }
  std::uint64_t bytes() const;
  // The slot's view (holds(slot) must be true).
  const SbmmDelta& view(int slot) const { return m_slots[static_cast<std::size_t>(slot)]->view; }

private:
  struct Slot {
    DeviceArray<std::int32_t> values;
    DeviceArray<std::uint8_t> indices;
    DeviceArray<float> scales;
    SbmmDelta view;
    std::uint64_t bytes = 0;
  };
  int m_rows, m_cols;
  std::vector<std::unique_ptr<Slot>> m_slots; // by slot; null: none
  std::vector<SbmmDelta> m_table;             // the slots' views, as the kernel indexes them
  DeviceArray<SbmmDelta> m_device_table;
  bool m_stale = false;
};

} // namespace optkit::cuda
