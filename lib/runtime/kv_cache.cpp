#include "runtime/kv_cache.hpp"

#include <fmt/format.h>

namespace optkit::runtime {

KvCache::KvCache(std::int64_t layers, std::int64_t kv_dim, std::int64_t max_positions, KvCacheOptions options)
    : m_layers(layers)
    , m_kv_dim(kv_dim)
    , m_max_positions(max_positions)
    , m_block_tokens(options.block_tokens)
    , m_element_bytes(options.device_element_bytes)
    , m_prefix_caching(options.prefix_caching) {
  if (m_block_tokens < 1)
    throw InputError(fmt::format("KV cache block of {} tokens: a block holds at least one", m_block_tokens));
  if (options.budget_bytes > 0) {
    m_capacity = static_cast<std::int64_t>(options.budget_bytes / block_bytes());
    if (*m_capacity == 0)
      throw InputError(fmt::format("KV cache budget of {} bytes holds no block of {} bytes ({} tokens)",
                                   options.budget_bytes, block_bytes(), m_block_tokens));
  }
}

std::uint64_t
KvCache::block_bytes() const {
  return static_cast<std::uint64_t>(m_layers * 2 * m_block_tokens * m_kv_dim) *
         (host_storage() ? sizeof(float) : m_element_bytes);
}

std::optional<std::int64_t>
KvCache::capacity_blocks() const {
  return m_capacity;
}

std::optional<std::int64_t>
KvCache::free_blocks() const {
  if (!m_capacity)
    return std::nullopt;
  return *m_capacity - m_used;
}

SequenceId
KvCache::add() {
  Entry e;
  e.keys.resize(static_cast<std::size_t>(m_layers));
  e.values.resize(static_cast<std::size_t>(m_layers));
  m_entries.emplace(m_next, std::move(e));
  return m_next++;
}

void
KvCache::remove(SequenceId sequence) {
  const auto it = m_entries.find(sequence);
  if (it == m_entries.end())
    return;
  // The last block first: cached blocks are evicted least recently released first, and a
  // sequence's early blocks are the ones other prompts share.
  const auto& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b)
    release_block(*b);
  m_entries.erase(it);
}

void
KvCache::clear(SequenceId sequence) {
  auto& e = entry(sequence);
  for (auto b = e.blocks.rbegin(); b != e.blocks.rend(); ++b)
    release_block(*b);
  Entry empty;
  empty.keys.resize(static_cast<std::size_t>(m_layers));
  empty.values.resize(static_cast<std::size_t>(m_layers));
  e = std::move(empty);
}

void
KvCache::release_block(std::int32_t block) {
  auto& state = m_state[static_cast<std::size_t>(block)];
  if (--state.refs > 0)
    return;
  --m_used;
  if (state.serial != 0)
    state.evictable = m_evictable.insert(m_evictable.end(), block);
  else
    m_free.push_back(block);
}

void
KvCache::attach(Entry& e, std::int32_t block) {
  e.blocks.push_back(block);
  if (!host_storage())
    return;
  float* base = m_blocks[static_cast<std::size_t>(block)].get();
  const auto layer_floats = 2 * m_block_tokens * m_kv_dim;
  for (std::int64_t l = 0; l < m_layers; ++l) {
    e.keys[static_cast<std::size_t>(l)].push_back(base + l * layer_floats);
    e.values[static_cast<std::size_t>(l)].push_back(base + l * layer_floats + m_block_tokens * m_kv_dim);
  }
}

KvCache::Entry&
KvCache::entry(SequenceId sequence) {
  const auto it = m_entries.find(sequence);
  if (it == m_entries.end())
    throw InputError("unknown sequence " + std::to_string(sequence));
  return it->second;
}

const KvCache::Entry&
KvCache::entry(SequenceId sequence) const {
  return const_cast<KvCache*>(this)->entry(sequence);
}

std::int64_t
KvCache::length(SequenceId sequence) const {
  return entry(sequence).length;
}

std::int64_t
KvCache::blocks_needed(SequenceId sequence, std::int64_t count) const {
  const Entry& e = entry(sequence);
  const std::int64_t blocks = (e.length + count + m_block_tokens - 1) / m_block_tokens;
  return std::max<std::int64_t>(0, blocks - static_cast<std::int64_t>(e.blocks.size()));
}

void
KvCache::check_free(std::int64_t blocks) const {
  if (m_capacity && m_used + blocks > *m_capacity)
    throw KvCacheFull(fmt::format("the KV cache needs {} more blocks of {} tokens but has {} of {} free", blocks,
                                  m_block_tokens, *m_capacity - m_used, *m_capacity));
}

std::int32_t
KvCache::take_block() {
  ++m_used;
  // A new block while the budget has room; without a budget, only when no cached block can be
  // evicted (so the cache keeps what the busiest moment needed, no more).
  const bool grow = m_capacity ? static_cast<std::int64_t>(m_blocks.size()) < *m_capacity : m_evictable.empty();
  if (m_free.empty() && !grow)
    uncache(m_evictable.front()); // evicted: now free
  std::int32_t block = 0;
  if (!m_free.empty()) {
    block = m_free.back();
    m_free.pop_back();
  } else {
    const auto floats = static_cast<std::size_t>(m_layers * 2 * m_block_tokens * m_kv_dim);
    m_blocks.push_back(host_storage() ? std::make_unique_for_overwrite<float[]>(floats) : nullptr);
    m_state.emplace_back();
    block = static_cast<std::int32_t>(m_blocks.size() - 1);
  }
  m_state[static_cast<std::size_t>(block)].refs = 1;
  return block;
}

void
KvCache::uncache(std::int32_t block) {
  auto& state = m_state[static_cast<std::size_t>(block)];
  if (state.serial == 0)
    return;
  m_cached.erase(*state.key);
  state.key.reset();
  state.serial = 0;
  if (state.refs == 0) {
    m_evictable.erase(state.evictable);
    m_free.push_back(block);
  }
}

std::size_t
KvCache::BlockKeyHash::operator()(const BlockKey& key) const {
  // FNV-1a over the parent, the variant and the tokens; equality compares them all.
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(key.parent);
  mix(static_cast<std::uint32_t>(key.variant));
  for (const auto t : key.tokens)
    mix(static_cast<std::uint32_t>(t));
  return static_cast<std::size_t>(h);
}

std::vector<std::int32_t>
KvCache::cached_chain(std::span<const TokenId> tokens, std::int32_t variant, std::uint64_t* last_serial) const {
  std::vector<std::int32_t> chain;
  const auto most = (static_cast<std::int64_t>(tokens.size()) - 1) / m_block_tokens;
  BlockKey key{0, variant, {}};
  for (std::int64_t b = 0; b < most; ++b) {
    const auto first = tokens.begin() + b * m_block_tokens;
    key.tokens.assign(first, first + m_block_tokens);
    const auto found = m_cached.find(key);
    if (found == m_cached.end())
      break;
    chain.push_back(found->second);
    key.parent = m_state[static_cast<std::size_t>(found->second)].serial;
  }
  if (last_serial)
    *last_serial = key.parent;
  return chain;
}

std::int64_t
KvCache::cached_prefix(std::span<const TokenId> tokens, std::int32_t variant) const {
  if (!m_prefix_caching || tokens.empty())
    return 0;
  return static_cast<std::int64_t>(cached_chain(tokens, variant, nullptr).size()) * m_block_tokens;
}

std::int64_t
KvCache::reuse_prefix(SequenceId sequence, std::span<const TokenId> tokens, std::int32_t variant) {
  auto& e = entry(sequence);
  if (!m_prefix_caching || tokens.empty())
    return 0;
  if (e.length != 0 || !e.blocks.empty())
    throw InputError(
        fmt::format("sequence {} is not empty: a cached prefix is reused only by a new sequence", sequence));
  e.variant = variant;
  for (const auto block : cached_chain(tokens, variant, &e.chain)) {
    auto& state = m_state[static_cast<std::size_t>(block)];
    if (state.refs++ == 0) {
      ++m_used;
      m_evictable.erase(state.evictable);
    }
    attach(e, block);
  }
  e.length = static_cast<std::int64_t>(e.blocks.size()) * m_block_tokens;
  return e.length;
}

void
KvCache::cache_full_block(Entry& e, std::int32_t block) {
  BlockKey key{e.chain, e.variant, std::move(e.tail)};
  e.tail.clear();
  const auto [it, added] = m_cached.try_emplace(key, block);
  if (!added) { // another sequence computed the same block first: it stays the one found
    e.chain = m_state[static_cast<std::size_t>(it->second)].serial;
    return;
  }
  auto& state = m_state[static_cast<std::size_t>(block)];
  state.serial = m_next_serial++;
  state.key = std::move(key);
  e.chain = state.serial;
}

void
KvCache::forget_variant(std::int32_t variant) {
  std::vector<std::int32_t> blocks; // collected first: uncache() erases from m_cached
  for (const auto& [key, block] : m_cached)
    if (key.variant == variant)
      blocks.push_back(block);
  for (const auto block : blocks)
    uncache(block);
}

void
KvCache::forget_all() {
  while (!m_cached.empty())
    uncache(m_cached.begin()->second);
}

std::int64_t
KvCache::reserve(SequenceId sequence, std::int64_t count) {
  auto& e = entry(sequence);
  if (e.length + count > m_max_positions)
    throw InputError("sequence of " + std::to_string(e.length + count) +
                     " tokens exceeds the model's max_position_embeddings " + std::to_string(m_max_positions));
  const std::int64_t needed = blocks_needed(sequence, count);
  check_free(needed);
  for (std::int64_t b = 0; b < needed; ++b)
    attach(e, take_block());
  return e.length;
}

void
KvCache::advance(SequenceId sequence, std::span<const TokenId> tokens, std::int32_t variant) {
  auto& e = entry(sequence);
  if (e.length == 0)
    e.variant = variant;
  else if (e.variant != variant)
    e.cacheable = false;
  for (const auto token : tokens) {
    const auto position = e.length++;
    if (!m_prefix_caching || !e.cacheable)
      continue;
    e.tail.push_back(token);
    if (static_cast<std::int64_t>(e.tail.size()) == m_block_tokens)
      cache_full_block(e, e.blocks[static_cast<std::size_t>(position / m_block_tokens)]);
  }
}

KvRows
KvCache::rows(SequenceId sequence, std::int64_t layer) const {
  const Entry& e = entry(sequence);
  if (!host_storage())
    throw RuntimeFailure("the KV cache's blocks are on a device: no host rows to read");
  return {e.keys[static_cast<std::size_t>(layer)].data(), e.values[static_cast<std::size_t>(layer)].data(),
          m_block_tokens, m_kv_dim};
}

} // namespace optkit::runtime
