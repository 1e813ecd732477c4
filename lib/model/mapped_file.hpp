// A file's bytes in memory, read-only: mapped (zero copy) or read whole (see LoadMode). The
// safetensors and GGUF readers sit on it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace optkit::model {

// How a weights file's bytes come into memory:
//  - map: mapped read-only (zero copy): pages shared with the page cache and with every other
//    process reading the file, loaded as they are first touched. The mapping is advised onto huge
//    pages: where the filesystem caches files in large folios (ext4 and XFS on recent kernels) the
//    pages read under it are mapped 2 MiB at a time, as fast to stream as the read mode's; pages
//    already cached in 4 KiB folios (a file just written, or read by another program) stay small;
//  - read: read whole into this process's own memory, on transparent huge pages where the kernel
//    allows them (llama.cpp's --no-mmap). Streaming weights then needs no 4 KiB page walks and the
//    hardware prefetcher does not stop at every page: on a 2-core Zen 5, Llama-3.2-1B-shaped BF16
//    decode 12.7 -> 15.5 tok/s and prefill 171 -> 222 tok/s. Each process holds its own copy.
enum class LoadMode { map, read };

class MappedFile {
public:
  MappedFile(const std::filesystem::path& path, LoadMode mode);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {m_data, m_size}; }
  // The whole pages of `bytes` (a part of this file) leave this process's resident set. Mapped,
  // they stay in the page cache and come back if touched again; read into memory, they become a
  // mapping of the same bytes of the file (what is read there later comes from the file). Bytes
  // outside the file: nothing.
  void release(std::span<const std::byte> bytes) const;

private:
  bool m_mapped = false;
  int m_fd = -1; // read into memory: kept open for release()
  const std::byte* m_data = nullptr;
  std::size_t m_size = 0;
};

} // namespace optkit::model
