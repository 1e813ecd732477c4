// The block KV cache: block accounting against a byte budget, refusals that change nothing,
// blocks reused after a sequence leaves, and rows addressed across block boundaries.
#include "runtime/kv_cache.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace optkit;
using namespace optkit::runtime;

TEST_CASE("blocks are counted per sequence and the budget caps them") {
  // 2 layers × K,V × 4 tokens × 8 floats × 4 bytes = 512 bytes a block; 1600 bytes hold 3.
  KvCache cache(2, 8, 100, {.budget_bytes = 1600, .block_tokens = 4});
  CHECK(cache.block_bytes() == 512);
  CHECK(cache.capacity_blocks() == 3);
  const auto a = cache.add();
  CHECK(cache.blocks_needed(a, 1) == 1);
  CHECK(cache.blocks_needed(a, 4) == 1);
  CHECK(cache.blocks_needed(a, 5) == 2);
  CHECK(cache.reserve(a, 5) == 0);
  cache.advance(a, 5);
  CHECK(cache.used_blocks() == 2);
  CHECK(cache.blocks_needed(a, 3) == 0); // the second block has room for 3 more
  CHECK(cache.blocks_needed(a, 4) == 1);
  const auto b = cache.add();
  CHECK_THROWS_AS(cache.reserve(b, 5), KvCacheFull); // 2 blocks > 1 free
  CHECK(cache.used_blocks() == 2);
  CHECK(cache.length(b) == 0);
  CHECK(cache.reserve(b, 4) == 0);
  CHECK(cache.free_blocks() == 0);
  cache.remove(a);
  CHECK(cache.free_blocks() == 2);
  CHECK_NOTHROW(cache.reserve(b, 12));
  CHECK(cache.free_blocks() == 0);
  CHECK_THROWS_AS(cache.reserve(b, 200), InputError); // past max_positions: bad input, not a full cache
}

TEST_CASE("without a budget the cache grows as sequences do, and reuses given-back blocks") {
  KvCache cache(1, 4, 1000, {.block_tokens = 2});
  CHECK(!cache.capacity_blocks());
  CHECK(!cache.free_blocks());
  const auto a = cache.add();
  cache.reserve(a, 7);
  CHECK(cache.used_blocks() == 4);
  std::set<const float*> first_blocks;
  for (std::int64_t p = 0; p < 7; p += 2)
    first_blocks.insert(cache.rows(a, 0).key(p));
  cache.remove(a);
  CHECK(cache.used_blocks() == 0);
  const auto b = cache.add();
  cache.reserve(b, 8);
  std::set<const float*> second_blocks;
  for (std::int64_t p = 0; p < 8; p += 2)
    second_blocks.insert(cache.rows(b, 0).key(p));
  CHECK(second_blocks == first_blocks); // the same memory, no new allocation
}

TEST_CASE("rows are addressed block by block, keys and values of every layer apart") {
  KvCache cache(3, 5, 64, {.block_tokens = 3});
  const auto s = cache.add();
  cache.reserve(s, 10);
  // Write a distinct value into every position of every layer, read them all back.
  for (std::int64_t layer = 0; layer < 3; ++layer)
    for (std::int64_t p = 0; p < 10; ++p)
      for (std::int64_t d = 0; d < 5; ++d) {
        cache.rows(s, layer).key(p)[d] = float(1000 * layer + 10 * p + d);
        cache.rows(s, layer).value(p)[d] = -float(1000 * layer + 10 * p + d);
      }
  for (std::int64_t layer = 0; layer < 3; ++layer)
    for (std::int64_t p = 0; p < 10; ++p)
      for (std::int64_t d = 0; d < 5; ++d) {
        CHECK(cache.rows(s, layer).key(p)[d] == float(1000 * layer + 10 * p + d));
        CHECK(cache.rows(s, layer).value(p)[d] == -float(1000 * layer + 10 * p + d));
      }
  CHECK(cache.rows(s, 0).key(3) != cache.rows(s, 0).key(2) + 5); // position 3 starts a new block
}

TEST_CASE("a budget smaller than one block, or a block of no tokens, is refused") {
  CHECK_THROWS_AS(KvCache(2, 8, 100, {.budget_bytes = 500, .block_tokens = 4}), InputError);
  CHECK_THROWS_AS(KvCache(2, 8, 100, {.block_tokens = 0}), InputError);
}
