// Python's `random.Random(seed)` — the Mersenne Twister seeded by init_by_array, getrandbits and
// the rejection-sampling _randbelow — so that `random.Random(1234).sample(docs, k)`, the draw
// lm-eval's random few-shot sampler makes, picks the same exemplars here.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace optkit::eval {

class PythonRandom {
public:
  explicit PythonRandom(std::uint64_t seed);

  std::uint32_t next_u32();                 // genrand_uint32
  std::uint64_t getrandbits(int bits);      // 1..64
  std::uint64_t randbelow(std::uint64_t n); // uniform in [0, n), n ≥ 1
  // The indices random.sample(range(n), k) returns, in order (CPython 3.11's algorithm).
  std::vector<std::size_t> sample(std::size_t n, std::size_t k);

private:
  std::array<std::uint32_t, 624> m_state{};
  std::size_t m_index = 625;
};

} // namespace optkit::eval
