// HiddenStates: spilled to an unnamed scratch file, the states read back exactly what was written
// after their pages left the resident set, and nothing is left in the folder.
#include "core/error.hpp"
#include "runtime/hidden_states.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace optkit;

TEST_CASE("spilled hidden states keep their values through release and leave no file behind") {
  test::ScratchDir dir;
  constexpr std::int64_t rows = 3000, hidden = 96; // > 1 MiB: many whole pages to release
  runtime::HiddenStates memory(rows, hidden), spilled(rows, hidden, dir.path());
  CHECK_FALSE(memory.spilled());
  CHECK(spilled.spilled());
  CHECK(spilled.bytes() == std::uint64_t{rows * hidden * 4});
  for (auto* states : {&memory, &spilled}) {
    auto all = states->all();
    for (std::size_t i = 0; i < all.size(); ++i)
      all[i] = static_cast<float>(i % 977) * 0.25f - 7.0f;
    states->release(0, rows / 2);        // the first half leaves the resident set
    states->release(rows / 2, rows / 2); // then the rest
  }
  const auto a = memory.all(), b = spilled.all();
  CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  CHECK(std::filesystem::is_empty(dir.path())); // O_TMPFILE: no name in the folder
}

TEST_CASE("a scratch folder that cannot hold the states is named") {
  CHECK_THROWS_WITH_AS(runtime::HiddenStates(10, 10, std::filesystem::path("/nonexistent-optkit-dir")),
                       doctest::Contains("/nonexistent-optkit-dir: cannot create a scratch file"), RuntimeFailure);
}
