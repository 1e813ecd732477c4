#include "eval/python_random.hpp"

#include "core/error.hpp"

#include <bit>
#include <cmath>
#include <unordered_set>

namespace optkit::eval {

namespace {

void
init_genrand(std::array<std::uint32_t, 624>& mt, std::uint32_t s) {
  mt[0] = s;
  for (std::uint32_t i = 1; i < 624; ++i)
    mt[i] = 1812433253u * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i;
}

} // namespace

PythonRandom::PythonRandom(std::uint64_t seed) {
  // random.seed(int): the key is abs(seed) in 32-bit words, least significant first (one word 0
  // for seed 0).
  std::vector<std::uint32_t> key;
  do {
    key.push_back(static_cast<std::uint32_t>(seed & 0xffffffffu));
    seed >>= 32;
  } while (seed != 0);
  init_genrand(m_state, 19650218u);
  std::uint32_t i = 1, j = 0;
  const auto n = static_cast<std::uint32_t>(m_state.size());
  const auto key_length = static_cast<std::uint32_t>(key.size());
  for (std::uint32_t k = n > key_length ? n : key_length; k > 0; --k) {
    m_state[i] = (m_state[i] ^ ((m_state[i - 1] ^ (m_state[i - 1] >> 30)) * 1664525u)) + key[j] + j;
    ++i;
    ++j;
    if (i >= n) {
      m_state[0] = m_state[n - 1];
      i = 1;
    }
    if (j >= key_length)
      j = 0;
  }
  for (std::uint32_t k = n - 1; k > 0; --k) {
    m_state[i] = (m_state[i] ^ ((m_state[i - 1] ^ (m_state[i - 1] >> 30)) * 1566083941u)) - i;
    ++i;
    if (i >= n) {
      m_state[0] = m_state[n - 1];
      i = 1;
    }
  }
  m_state[0] = 0x80000000u;
  m_index = 624;
}

std::uint32_t
PythonRandom::next_u32() {
  constexpr std::uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrix = 0x9908b0dfu;
  if (m_index >= 624) {
    for (std::size_t k = 0; k < 624; ++k) {
      const std::uint32_t y = (m_state[k] & kUpper) | (m_state[(k + 1) % 624] & kLower);
      m_state[k] = m_state[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
    }
    m_index = 0;
  }
  std::uint32_t y = m_state[m_index++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

std::uint64_t
PythonRandom::getrandbits(int bits) {
  if (bits <= 0 || bits > 64)
    throw InputError("getrandbits: bits must be 1..64");
  if (bits <= 32)
    return next_u32() >> (32 - bits);
  // Larger counts fill 32-bit words from the least significant end; the last word is shifted.
  const std::uint64_t low = next_u32();
  const std::uint64_t high = next_u32() >> (64 - bits);
  return low | (high << 32);
}

std::uint64_t
PythonRandom::randbelow(std::uint64_t n) {
  if (n == 0)
    throw InputError("randbelow: n must be at least 1");
  const int bits = static_cast<int>(std::bit_width(n));
  std::uint64_t r = getrandbits(bits);
  while (r >= n)
    r = getrandbits(bits);
  return r;
}

std::vector<std::size_t>
PythonRandom::sample(std::size_t n, std::size_t k) {
  if (k > n)
    throw InputError("sample larger than population");
  std::vector<std::size_t> result(k);
  std::size_t setsize = 21;
  if (k > 5)
    setsize +=
        static_cast<std::size_t>(std::pow(4.0, std::ceil(std::log(3.0 * static_cast<double>(k)) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<std::size_t> pool(n);
    for (std::size_t i = 0; i < n; ++i)
      pool[i] = i;
    for (std::size_t i = 0; i < k; ++i) {
      const auto j = static_cast<std::size_t>(randbelow(n - i));
      result[i] = pool[j];
      pool[j] = pool[n - i - 1];
    }
  } else {
    std::unordered_set<std::size_t> selected;
    for (std::size_t i = 0; i < k; ++i) {
      auto j = static_cast<std::size_t>(randbelow(n));
      while (selected.count(j) != 0)
        j = static_cast<std::size_t>(randbelow(n));
      selected.insert(j);
      result[i] = j;
    }
  }
  return result;
}

} // namespace optkit::eval
