// PythonRandom against CPython 3.11's random module. Expected values printed by
//   python3 -c "import random; r = random.Random(1234); print([r.sample(range(7473), 5) for _ in range(3)])"
// and the like — lm-eval's random few-shot sampler draws exactly this way.
#include "eval/python_random.hpp"

#include <doctest/doctest.h>

using optkit::eval::PythonRandom;

TEST_CASE("random.Random(1234).sample over GSM8K's 7473 train documents, three draws in a row") {
  PythonRandom r(1234);
  CHECK(r.sample(7473, 5) == std::vector<std::size_t>{6374, 3610, 957, 61, 742});
  CHECK(r.sample(7473, 5) == std::vector<std::size_t>{7462, 6610, 4769, 286, 5501});
  CHECK(r.sample(7473, 5) == std::vector<std::size_t>{5677, 687, 806, 6279, 2905});
}

TEST_CASE("small populations take the pool branch; getrandbits beyond 32 bits; seeds beyond 32 bits") {
  PythonRandom r(0);
  CHECK(r.sample(10, 3) == std::vector<std::size_t>{6, 9, 0});
  CHECK(r.getrandbits(40) == 1061968961082ull);
  PythonRandom wide((1ull << 40) + 5);
  CHECK(wide.sample(100, 10) == std::vector<std::size_t>{64, 66, 34, 84, 3, 67, 97, 5, 21, 10});
}

TEST_CASE("the first 32-bit output of random.Random(1234)") {
  PythonRandom r(1234);
  CHECK(r.getrandbits(32) == 4150886329u);
}
