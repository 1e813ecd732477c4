// SHA-256 (FIPS 180-4) for artifact digests in the archive.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace optkit {

class Sha256 {
public:
  Sha256();
  void update(const void* data, std::size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // Finishes the digest; the object must not be updated afterwards.
  std::array<std::uint8_t, 32> finish();
  std::string finish_hex();

private:
  void compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> m_state;
  std::array<std::uint8_t, 64> m_buffer{};
  std::size_t m_buffered = 0;
  std::uint64_t m_total_bytes = 0;
};

std::string sha256_hex(std::string_view data);

struct FileDigest {
  std::string sha256;
  std::uint64_t bytes = 0;
};

// Streams the file through SHA-256; throws RuntimeFailure naming the file when it cannot be read.
FileDigest digest_file(const std::filesystem::path& path);

} // namespace optkit
