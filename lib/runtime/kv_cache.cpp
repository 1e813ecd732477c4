#include "runtime/kv_cache.hpp"

#include <fmt/format.h>

namespace optkit::runtime {

KvCache::KvCache(std::int64_t layers, std::int64_t kv_dim, std::int64_t max_positions, KvCacheOptions options)
    : m_layers(layers), m_kv_dim(kv_dim), m_max_positions(max_positions), m_block_tokens(options.block_tokens) {
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
  return static_cast<std::uint64_t>(m_layers * 2 * m_block_tokens * m_kv_dim) * sizeof(float);
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
  for (const auto block : it->second.blocks)
    m_free.push_back(block);
  m_used -= static_cast<std::int64_t>(it->second.blocks.size());
  m_entries.erase(it);
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
  if (!m_free.empty()) {
    const auto block = m_free.back();
    m_free.pop_back();
    return block;
  }
  const auto floats = static_cast<std::size_t>(m_layers * 2 * m_block_tokens * m_kv_dim);
  m_blocks.push_back(std::make_unique_for_overwrite<float[]>(floats));
  return static_cast<std::int32_t>(m_blocks.size() - 1);
}

std::int64_t
KvCache::reserve(SequenceId sequence, std::int64_t count) {
  auto& e = entry(sequence);
  if (e.length + count > m_max_positions)
    throw InputError("sequence of " + std::to_string(e.length + count) +
                     " tokens exceeds the model's max_position_embeddings " + std::to_string(m_max_positions));
  const std::int64_t needed = blocks_needed(sequence, count);
  check_free(needed);
  const auto layer_floats = 2 * m_block_tokens * m_kv_dim;
  for (std::int64_t b = 0; b < needed; ++b) {
    const auto block = take_block();
    e.blocks.push_back(block);
    float* base = m_blocks[static_cast<std::size_t>(block)].get();
    for (std::int64_t l = 0; l < m_layers; ++l) {
      e.keys[static_cast<std::size_t>(l)].push_back(base + l * layer_floats);
      e.values[static_cast<std::size_t>(l)].push_back(base + l * layer_floats + m_block_tokens * m_kv_dim);
    }
  }
  return e.length;
}

void
KvCache::advance(SequenceId sequence, std::int64_t count) {
  entry(sequence).length += count;
}

KvRows
KvCache::rows(SequenceId sequence, std::int64_t layer) const {
  const Entry& e = entry(sequence);
  return {e.keys[static_cast<std::size_t>(layer)].data(), e.values[static_cast<std::size_t>(layer)].data(),
          m_block_tokens, m_kv_dim};
}

} // namespace optkit::runtime
