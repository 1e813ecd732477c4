#include "runtime/packed_panels.hpp"

#include "core/error.hpp"
#include "runtime/panel_gemm.hpp"

#include <cstdint>
#include <sys/mman.h>
#include <unistd.h>

namespace optkit::runtime {

namespace {

// W's pages read in and mapped with one call where W is a mapped file's (Linux 5.14+), rather than
// a page fault per 4 KiB page as the packing reaches them (advice only).
void
populate(const Bf16* w, std::int64_t count) {
#ifdef MADV_POPULATE_READ
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(w) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(w + count);
  if (end > begin)
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)w;
  (void)count;
#endif
}

} // namespace

PackedPanels::PackedPanels(const Bf16* w, std::int64_t rows, std::int64_t cols)
    : m_rows(rows), m_cols(cols), m_words(words_for(cols)) {
  const std::int64_t panels = (rows + kPanelRows - 1) / kPanelRows;
  m_bytes = static_cast<std::uint64_t>(panels * kPanelRows * m_words) * sizeof(std::uint32_t);
  if (m_bytes == 0)
    return;
  void* memory = ::mmap(nullptr, m_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED)
    throw RuntimeFailure("cannot allocate " + std::to_string(m_bytes) + " bytes to pack a " + std::to_string(rows) +
                         "x" + std::to_string(cols) + " BF16 weight into: " + errno_text(errno));
  ::madvise(memory, m_bytes, MADV_HUGEPAGE); // advice only
  m_data = static_cast<std::uint32_t*>(memory);
  populate(w, rows * cols);
  pack_weight_panels(w, rows, cols, m_data);
}

PackedPanels::~PackedPanels() {
  if (m_data)
    ::munmap(m_data, m_bytes);
}

void
PackedPanels::row(std::int64_t r, float* out) const {
  const std::uint32_t* words = panel(r) + r % kPanelRows;
  for (std::int64_t c = 0; c < m_cols; ++c) {
    const std::uint32_t word = words[c / 2 * kPanelRows];
    out[c] = model::bf16_to_float(static_cast<std::uint16_t>(c % 2 == 0 ? word : word >> 16));
  }
}

} // namespace optkit::runtime
