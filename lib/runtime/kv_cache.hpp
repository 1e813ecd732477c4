// The CPU runtime's key/value cache, in blocks as serving engines keep it: a block holds
// `block_tokens` positions of post-RoPE keys and values for every layer; each sequence owns a
// list of blocks (its block table), taken from a pool as it grows and given back when it is
// removed, so memory is reused across requests without copying a sequence as it grows. With a
// byte budget the pool never holds more than budget / block_bytes() blocks, and a scheduler asks
// free_blocks() and blocks_needed() before it admits work.
#pragma once

#include "core/error.hpp"
#include "runtime/kernels.hpp"
#include "runtime/language_model.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace optkit::runtime {

struct KvCacheOptions {
  std::uint64_t budget_bytes = 0; // 0: no budget (sequences are bounded only by max_positions)
  std::int64_t block_tokens = 16;
};

// Appending would need more blocks than the budget has free (a resource limit, not bad input).
class KvCacheFull : public RuntimeFailure {
public:
  using RuntimeFailure::RuntimeFailure;
};

class KvCache {
public:
  KvCache(std::int64_t layers, std::int64_t kv_dim, std::int64_t max_positions, KvCacheOptions options = {});

  SequenceId add();
  // Gives the sequence's blocks back to the pool (an unknown sequence is ignored).
  void remove(SequenceId sequence);
  std::int64_t length(SequenceId sequence) const;
  std::int64_t size() const { return static_cast<std::int64_t>(m_entries.size()); }

  // Capacity, for schedulers.
  std::int64_t block_tokens() const { return m_block_tokens; }
  std::uint64_t block_bytes() const;
  std::optional<std::int64_t> capacity_blocks() const; // nullopt: no budget
  std::int64_t used_blocks() const { return m_used; }
  std::optional<std::int64_t> free_blocks() const;
  // Blocks `sequence` must take to append `count` tokens (0 when its last block has room).
  std::int64_t blocks_needed(SequenceId sequence, std::int64_t count) const;

  // Makes room for `count` more positions and returns the first new position. Throws InputError
  // past max_positions or for an unknown sequence, KvCacheFull past the budget; either way nothing
  // changes. Commit with advance() after the layers ran.
  std::int64_t reserve(SequenceId sequence, std::int64_t count);
  // Throws KvCacheFull unless `blocks` more blocks fit the budget (checks a whole batch at once).
  void check_free(std::int64_t blocks) const;
  void advance(SequenceId sequence, std::int64_t count);
  // The sequence's reserved rows in one layer.
  KvRows rows(SequenceId sequence, std::int64_t layer) const;

private:
  struct Entry {
    std::int64_t length = 0;
    std::vector<std::int32_t> blocks;
    std::vector<std::vector<float*>> keys, values; // [layer][block]: that block's rows in the layer
  };
  Entry& entry(SequenceId sequence);
  const Entry& entry(SequenceId sequence) const;
  std::int32_t take_block();

  std::int64_t m_layers, m_kv_dim, m_max_positions, m_block_tokens;
  std::optional<std::int64_t> m_capacity;
  std::vector<std::unique_ptr<float[]>> m_blocks; // [layer][key, value][block_tokens][kv_dim] each
  std::vector<std::int32_t> m_free;
  std::int64_t m_used = 0;
  SequenceId m_next = 0;
  std::map<SequenceId, Entry> m_entries;
};

} // namespace optkit::runtime
