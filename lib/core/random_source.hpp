// The seeded randomness behind every bench schedule, request plan, simulation and search: a 64-bit Mersenne
// Twister with the distributions written out here (not std::*_distribution, whose algorithms
// differ between standard libraries), so the same seed gives the same requests everywhere.
#pragma once

#include <cstdint>
#include <random>

namespace optkit {

class RandomSource {
public:
  explicit RandomSource(std::uint64_t seed) : m_engine(seed) {}

  double uniform();                         // [0, 1), 53 random bits
  double uniform(double low, double high);  // [low, high)
  double normal();                          // N(0, 1), Box-Muller
  double exponential(double rate);          // mean 1/rate
  double gamma(double shape);               // scale 1 (Marsaglia-Tsang; shape < 1 boosted)
  std::uint64_t below(std::uint64_t bound); // [0, bound), unbiased

private:
  std::mt19937_64 m_engine;
  bool m_has_spare = false;
  double m_spare = 0;
};

} // namespace optkit
