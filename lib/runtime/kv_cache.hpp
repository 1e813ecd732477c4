// Per-sequence key/value cache of the CPU runtime: for every layer, K and V rows of kv_dim floats
// (post-RoPE keys), one row per position, growing as tokens are appended.
#pragma once

#include "runtime/language_model.hpp"

#include <cstdint>
#include <map>
#include <vector>

namespace optkit::runtime {

class KvCache {
public:
  KvCache(std::int64_t layers, std::int64_t kv_dim, std::int64_t max_positions);

  SequenceId add();
  void remove(SequenceId sequence);
  std::int64_t length(SequenceId sequence) const;
  std::int64_t size() const { return static_cast<std::int64_t>(m_entries.size()); }
  // Makes room for `count` more positions and returns the first new position (throws InputError
  // past max_positions or for an unknown sequence). Commit with advance() after the layers ran.
  std::int64_t reserve(SequenceId sequence, std::int64_t count);
  void advance(SequenceId sequence, std::int64_t count);
  float* keys(SequenceId sequence, std::int64_t layer);
  float* values(SequenceId sequence, std::int64_t layer);

private:
  struct Entry {
    std::int64_t length = 0;
    std::vector<std::vector<float>> keys, values; // [layer][position * kv_dim]
  };
  Entry& entry(SequenceId sequence);
  const Entry& entry(SequenceId sequence) const;

  std::int64_t m_layers, m_kv_dim, m_max_positions;
  SequenceId m_next = 0;
  std::map<SequenceId, Entry> m_entries;
};

} // namespace optkit::runtime
