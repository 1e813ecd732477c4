// The hidden states of a calibration set (rows × hidden fp32) as a layer-wise pass holds them
// between layers: in this process's memory, or spilled to a scratch file mapped shared. Spilled,
// each chunk's pages leave the resident set once the chunk is done (release()): the page cache
// and the disk hold the rest, the values are the same, and a pass over 512 × 512 tokens of an 8B
// model (4 GiB of states) holds one chunk of them at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

namespace optkit::runtime {

class HiddenStates {
public:
  // `scratch_dir`: spill to an unnamed file in that folder (O_TMPFILE: nothing is left behind,
  // even by a killed process); none: in memory. RuntimeFailure naming the folder if it cannot.
  HiddenStates(std::int64_t rows, std::int64_t hidden,
               const std::optional<std::filesystem::path>& scratch_dir = std::nullopt);
  ~HiddenStates();
  HiddenStates(const HiddenStates&) = delete;
  HiddenStates& operator=(const HiddenStates&) = delete;

  std::int64_t rows() const { return m_rows; }
  std::int64_t hidden() const { return m_hidden; }
  bool spilled() const { return m_mapped != nullptr; }
  std::span<float> all() { return {data(), static_cast<std::size_t>(m_rows * m_hidden)}; }
  std::span<const float> all() const { return {data(), static_cast<std::size_t>(m_rows * m_hidden)}; }
  std::span<float> rows(std::int64_t first, std::int64_t count) {
    return {data() + first * m_hidden, static_cast<std::size_t>(count * m_hidden)};
  }
  // Done with these rows for now: spilled, their whole pages leave the resident set (written back
  // to the scratch file as the kernel sees fit); in memory, nothing.
  void release(std::int64_t first, std::int64_t count);
  // Bytes of states: rows × hidden × 4.
  std::uint64_t bytes() const { return static_cast<std::uint64_t>(m_rows * m_hidden) * sizeof(float); }

private:
  float* data() const { return m_mapped ? m_mapped : const_cast<float*>(m_memory.data()); }

  std::int64_t m_rows, m_hidden;
  std::vector<float> m_memory;
  float* m_mapped = nullptr;
  int m_fd = -1;
};

} // namespace optkit::runtime
