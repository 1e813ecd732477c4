#include "runtime/kv_cache.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace optkit::runtime {

KvCache::KvCache(std::int64_t layers, std::int64_t kv_dim, std::int64_t max_positions)
    : m_layers(layers), m_kv_dim(kv_dim), m_max_positions(max_positions) {}

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
  m_entries.erase(sequence);
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
KvCache::reserve(SequenceId sequence, std::int64_t count) {
  auto& e = entry(sequence);
  if (e.length + count > m_max_positions)
    throw InputError("sequence of " + std::to_string(e.length + count) +
                     " tokens exceeds the model's max_position_embeddings " + std::to_string(m_max_positions));
  const auto needed = static_cast<std::size_t>((e.length + count) * m_kv_dim);
  for (std::int64_t l = 0; l < m_layers; ++l) {
    auto& k = e.keys[static_cast<std::size_t>(l)];
    auto& v = e.values[static_cast<std::size_t>(l)];
    if (k.size() < needed) {
      k.resize(std::max(needed, k.size() * 2));
      v.resize(k.size());
    }
  }
  return e.length;
}

void
KvCache::advance(SequenceId sequence, std::int64_t count) {
  entry(sequence).length += count;
}

float*
KvCache::keys(SequenceId sequence, std::int64_t layer) {
  return entry(sequence).keys[static_cast<std::size_t>(layer)].data();
}

float*
KvCache::values(SequenceId sequence, std::int64_t layer) {
  return entry(sequence).values[static_cast<std::size_t>(layer)].data();
}

} // namespace optkit::runtime
