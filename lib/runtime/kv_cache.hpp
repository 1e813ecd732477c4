// The CPU runtime's key/value cache, in blocks as serving engines keep it: a block holds
// `block_tokens` positions of post-RoPE keys and values for every layer; each sequence owns a
// list of blocks (its block table), taken from a pool as it grows and given back when it is
// removed, so memory is reused across requests without copying a sequence as it grows. With a
// byte budget the pool never holds more than budget / block_bytes() blocks, and a scheduler asks
// free_blocks() and blocks_needed() before it admits work.
//
// With prefix caching (vLLM's automatic prefix caching), a full block stays findable by its
// content after its sequence leaves: the variant that computed it and every token up to its end
// (the tokens of the block and, through its parent, all before). A new sequence whose prompt
// starts with cached blocks takes them instead of computing them again; blocks held by several
// sequences are never written, since a sequence only writes past its own length and a reused
// prefix always leaves its last token to compute. Cached blocks no sequence holds count as free
// and are evicted least recently released first, a sequence's last block before its first.
#pragma once

#include "core/error.hpp"
#include "runtime/kernels.hpp"
#include "runtime/language_model.hpp"

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace optkit::runtime {

struct KvCacheOptions {
  std::uint64_t budget_bytes = 0; // 0: no budget (sequences are bounded only by max_positions)
  std::int64_t block_tokens = 16;
  bool prefix_caching = false; // keep full blocks findable by content (see above)
  // > 0: the blocks hold no host memory. A device keeps their keys and values at the same block
  // ids (runtime/device_engine.hpp), this many bytes an element, and this cache only their
  // bookkeeping: block_table() instead of rows().
  std::uint32_t device_element_bytes = 0;
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
  // Empties the sequence, its blocks released, keeping its id (LongRoPE's recompute).
  void clear(SequenceId sequence);
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
  // `tokens` were computed by `variant` (-1: the base) and their keys and values written: the
  // length grows by their count, and with prefix caching each block they fill becomes findable.
  void advance(SequenceId sequence, std::span<const TokenId> tokens, std::int32_t variant);
  // The sequence's reserved rows in one layer (host storage only).
  KvRows rows(SequenceId sequence, std::int64_t layer) const;
  // The sequence's blocks in order: position p lies in block_table()[p / block_tokens()].
  std::span<const std::int32_t> block_table(SequenceId sequence) const { return entry(sequence).blocks; }
  bool host_storage() const { return m_element_bytes == 0; }

  // Prefix caching. reuse_prefix gives an empty sequence the cached blocks that `tokens` computed
  // by `variant` begin with (at most (tokens.size() − 1) / block_tokens of them, so the last token
  // is always computed) and returns the tokens they hold; 0 without prefix caching. The blocks
  // are counted as used from then on, so free_blocks() may shrink.
  bool prefix_caching() const { return m_prefix_caching; }
  std::int64_t reuse_prefix(SequenceId sequence, std::span<const TokenId> tokens, std::int32_t variant);
  // The tokens reuse_prefix would give a new sequence for `tokens`, taking nothing.
  std::int64_t cached_prefix(std::span<const TokenId> tokens, std::int32_t variant) const;
  // Forgets the cached blocks `variant` computed (its weights changed), or all of them (the
  // model's weights changed); blocks sequences still hold stay theirs.
  void forget_variant(std::int32_t variant);
  void forget_all();
  std::int64_t cached_blocks() const { return static_cast<std::int64_t>(m_cached.size()); }

private:
  struct Entry {
    std::int64_t length = 0;
    std::vector<std::int32_t> blocks;
    std::vector<std::vector<float*>> keys, values; // [layer][block]: that block's rows in the layer
    // Prefix caching: the variant that computes the sequence, the serial of its last full block
    // (0: none yet), the tokens written since, and whether its blocks are still findable (a
    // sequence appended to by two variants is not).
    std::int32_t variant = -1;
    std::uint64_t chain = 0;
    std::vector<TokenId> tail;
    bool cacheable = true;
  };
  // What a cached block is found by: its parent's serial (0: the sequence's first block), the
  // variant and the block's tokens. Serials are never reused, so a block whose parent was
  // evicted cannot be found through a later block that took the parent's place.
  struct BlockKey {
    std::uint64_t parent = 0;
    std::int32_t variant = -1;
    std::vector<TokenId> tokens;
    bool operator==(const BlockKey&) const = default;
  };
  struct BlockKeyHash {
    std::size_t operator()(const BlockKey& key) const;
  };
  struct BlockState {
    std::int32_t refs = 0;                       // sequences holding the block
    std::uint64_t serial = 0;                    // 0: not cached
    std::optional<BlockKey> key;                 // while cached
    std::list<std::int32_t>::iterator evictable; // while cached and held by none
  };
  // The cached blocks `tokens` computed by `variant` begin with (at most (size − 1) / block_tokens),
  // and the serial of the last of them (0: none).
  std::vector<std::int32_t> cached_chain(std::span<const TokenId> tokens, std::int32_t variant,
                                         std::uint64_t* last_serial) const;
  Entry& entry(SequenceId sequence);
  const Entry& entry(SequenceId sequence) const;
  std::int32_t take_block();
  void attach(Entry& e, std::int32_t block);
  void release_block(std::int32_t block);
  void cache_full_block(Entry& e, std::int32_t block);
  void uncache(std::int32_t block);

  std::int64_t m_layers, m_kv_dim, m_max_positions, m_block_tokens;
  std::uint32_t m_element_bytes; // 0: host fp32 blocks
  std::optional<std::int64_t> m_capacity;
  std::vector<std::unique_ptr<float[]>> m_blocks; // [layer][key, value][block_tokens][kv_dim] each (null on a device)
  std::vector<BlockState> m_state;                // per block
  std::vector<std::int32_t> m_free;               // blocks neither held nor cached
  std::int64_t m_used = 0;                        // blocks held by a sequence
  bool m_prefix_caching;
  std::unordered_map<BlockKey, std::int32_t, BlockKeyHash> m_cached;
  std::list<std::int32_t> m_evictable; // cached blocks held by none, least recently released first
  std::uint64_t m_next_serial = 1;
  SequenceId m_next = 0;
  std::map<SequenceId, Entry> m_entries;
};

} // namespace optkit::runtime
