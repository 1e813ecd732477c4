// A BF16 W [rows, cols] packed once, when the model loads, into the panels the AVX-512 register
// tiles multiply (PanelKernel::avx512_packed in panel_gemm.hpp), the way llama.cpp repacks the
// types its CPU kernels want in another layout. Layout: panels of 64 W rows; in a panel, packed
// word p (W elements 2p and 2p + 1 of a row, the even one in the low half) of its 64 rows side by
// side for p = 0 .. words() - 1 in order; rows past W's last and elements past its last column
// are zero. A product then streams a panel from memory once, in order, without transposing it,
// and one activation row (decode) streams W as one contiguous run per thread.
// The words live in this process's memory on transparent huge pages (like --no-mmap's copy), as
// many bytes as W (plus its padding): the loader lets the mapped pages W was read from go (their
// tensor is released from the weight store).
#pragma once

#include "runtime/dot_rows.hpp"

#include <cstdint>

namespace optkit::runtime {

class PackedPanels {
public:
  static constexpr std::int64_t kPanelRows = 64;

  // Packs W; only where panel_packing_preferred() says so (the packing kernel is AVX-512).
  PackedPanels(const Bf16* w, std::int64_t rows, std::int64_t cols);
  ~PackedPanels();
  PackedPanels(const PackedPanels&) = delete;
  PackedPanels& operator=(const PackedPanels&) = delete;

  std::int64_t rows() const { return m_rows; }
  std::int64_t cols() const { return m_cols; }
  // Packed words per W row: cols / 2 rounded up to a multiple of 16.
  std::int64_t words() const { return m_words; }
  // The panel holding W row n0 (a multiple of 64).
  const std::uint32_t* panel(std::int64_t n0) const { return m_data + n0 / kPanelRows * m_words * kPanelRows; }
  std::uint64_t bytes() const { return m_bytes; }
  // W row r as fp32.
  void row(std::int64_t r, float* out) const;

  static std::int64_t words_for(std::int64_t cols) { return (cols + 31) / 32 * 16; }

private:
  std::int64_t m_rows, m_cols, m_words;
  std::uint64_t m_bytes;
  std::uint32_t* m_data = nullptr;
};

} // namespace optkit::runtime
