// The block KV cache: block accounting against a byte budget, refusals that change nothing,
// blocks reused after a sequence leaves, rows addressed across block boundaries, and prefix
// caching: blocks found again by content, shared and never written, evicted in order, forgotten
// when their model changes.
#include "runtime/kv_cache.hpp"

#include <doctest/doctest.h>

#include <numeric>
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
  const std::vector<TokenId> five{1, 2, 3, 4, 5};
  cache.advance(a, five, -1);
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

namespace {
// A sequence of `tokens` computed by `variant`: reserved, its first key of layer 0 stamped with
// `stamp` per position (what "computing" writes), advanced. Returns the sequence.
SequenceId
compute(KvCache& cache, SequenceId s, const std::vector<TokenId>& tokens, std::int32_t variant, float stamp) {
  const auto start = cache.length(s);
  const auto count = static_cast<std::int64_t>(tokens.size()) - start;
  cache.reserve(s, count);
  for (std::int64_t p = start; p < start + count; ++p)
    cache.rows(s, 0).key(p)[0] = stamp + float(p);
  cache.advance(s, std::span<const TokenId>(tokens).subspan(static_cast<std::size_t>(start)), variant);
  return s;
}
std::vector<TokenId>
iota_tokens(std::size_t n, TokenId first) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}
} // namespace

TEST_CASE("prefix caching: a new sequence takes the full blocks an earlier one computed, never the last token's") {
  KvCache cache(2, 4, 100, {.budget_bytes = 8 * 2 * 2 * 4 * 4 * 4, .block_tokens = 4, .prefix_caching = true});
  REQUIRE(cache.capacity_blocks() == 8);
  const auto prompt = iota_tokens(10, 100); // blocks [0,4) [4,8) full, [8,10) partial
  const auto a = compute(cache, cache.add(), prompt, -1, 1000);
  CHECK(cache.cached_blocks() == 2);
  CHECK(cache.used_blocks() == 3);

  // Same tokens: both full blocks, shared (no new block used), keys as `a` wrote them. Asking
  // first takes nothing.
  CHECK(cache.cached_prefix(prompt, -1) == 8);
  CHECK(cache.cached_prefix(prompt, 3) == 0);
  CHECK(cache.cached_prefix(iota_tokens(8, 100), -1) == 4);
  CHECK(cache.used_blocks() == 3);
  const auto b = cache.add();
  CHECK(cache.reuse_prefix(b, prompt, -1) == 8);
  CHECK(cache.length(b) == 8);
  CHECK(cache.used_blocks() == 3);
  CHECK(cache.rows(b, 0).key(5) == cache.rows(a, 0).key(5));
  CHECK(cache.rows(b, 0).key(7)[0] == 1007.0f);
  compute(cache, b, prompt, -1, 2000); // writes positions 8, 9 in a block of its own
  CHECK(cache.rows(a, 0).key(8)[0] == 1008.0f);
  CHECK(cache.rows(b, 0).key(8)[0] == 2008.0f);

  // A prompt of exactly the two cached blocks takes only the first: its last token is computed.
  const auto c = cache.add();
  CHECK(cache.reuse_prefix(c, iota_tokens(8, 100), -1) == 4);
  // Another variant, or a different token inside the second block, or a different first block.
  CHECK(cache.reuse_prefix(cache.add(), prompt, 3) == 0);
  auto changed = prompt;
  changed[6] = 7;
  CHECK(cache.reuse_prefix(cache.add(), changed, -1) == 4);
  changed[0] = 7;
  CHECK(cache.reuse_prefix(cache.add(), changed, -1) == 0);
  // Only an empty sequence takes a prefix.
  CHECK_THROWS_AS(cache.reuse_prefix(b, prompt, -1), InputError);
}

TEST_CASE("prefix caching: cached blocks nobody holds count as free and go least recently released first") {
  KvCache cache(1, 2, 100, {.budget_bytes = 4 * 1 * 2 * 2 * 2 * 4, .block_tokens = 2, .prefix_caching = true});
  REQUIRE(cache.capacity_blocks() == 4);
  const auto first = iota_tokens(5, 10);  // 2 full blocks + 1 partial
  const auto second = iota_tokens(5, 50); // another 2 + 1
  const auto a = compute(cache, cache.add(), first, -1, 0);
  cache.remove(a);
  CHECK(cache.used_blocks() == 0);
  CHECK(cache.free_blocks() == 4);
  CHECK(cache.cached_blocks() == 2);
  // `second` needs 3 blocks: the partial one's freed block, a new one, then the oldest released
  // cached block — `first`'s second block (a sequence's last block is released first).
  const auto b = compute(cache, cache.add(), second, -1, 100);
  CHECK(cache.used_blocks() == 3);
  CHECK(cache.cached_blocks() == 3); // second's 2 full blocks, and first's first block
  const auto probe = cache.add();
  CHECK(cache.reuse_prefix(probe, first, -1) == 2);
  CHECK(cache.rows(probe, 0).key(1)[0] == 1.0f);
  cache.remove(probe);
  cache.remove(b);
  // Taking cached blocks no one held reduces what is free.
  const auto c = cache.add();
  CHECK(cache.reuse_prefix(c, second, -1) == 4);
  CHECK(cache.free_blocks() == 2);
  CHECK_THROWS_AS(cache.reserve(c, 7), KvCacheFull); // 4 more blocks: refused, nothing changed
  CHECK(cache.length(c) == 4);
  CHECK(cache.used_blocks() == 2);
}

TEST_CASE("prefix caching: a block is found through its parent only, and forgotten when its model changes") {
  KvCache cache(1, 2, 100, {.block_tokens = 2, .prefix_caching = true});
  const auto prompt = iota_tokens(7, 1);
  compute(cache, cache.add(), prompt, 2, 0);
  compute(cache, cache.add(), prompt, -1, 0);
  CHECK(cache.cached_blocks() == 6);
  // The same second block's tokens after another first block are another block.
  auto other_start = prompt;
  other_start[1] = 99;
  CHECK(cache.reuse_prefix(cache.add(), other_start, -1) == 0);
  cache.forget_variant(2);
  CHECK(cache.cached_blocks() == 3);
  CHECK(cache.reuse_prefix(cache.add(), prompt, 2) == 0);
  CHECK(cache.reuse_prefix(cache.add(), prompt, -1) == 6);
  cache.forget_all();
  CHECK(cache.cached_blocks() == 0);
  CHECK(cache.reuse_prefix(cache.add(), prompt, -1) == 0);
}

TEST_CASE("without prefix caching nothing is kept or found, and without a budget the pool stops growing") {
  {
    KvCache cache(1, 2, 100, {.block_tokens = 2});
    const auto prompt = iota_tokens(5, 1);
    cache.remove(compute(cache, cache.add(), prompt, -1, 0));
    CHECK(cache.cached_blocks() == 0);
    CHECK(cache.cached_prefix(prompt, -1) == 0);
    CHECK(cache.reuse_prefix(cache.add(), prompt, -1) == 0);
  }
  KvCache cache(1, 2, 100, {.block_tokens = 2, .prefix_caching = true});
  std::set<const float*> blocks;
  for (TokenId start = 0; start < 50; start += 5) { // 10 different prompts of 3 blocks, one at a time
    const auto s = compute(cache, cache.add(), iota_tokens(5, start * 10), -1, 0);
    for (std::int64_t p = 0; p < 5; p += 2)
      blocks.insert(cache.rows(s, 0).key(p));
    cache.remove(s);
  }
  CHECK(blocks.size() == 3); // cached blocks were evicted rather than the pool grown
}

TEST_CASE("a cache whose blocks live on a device keeps their bookkeeping: block tables, BF16 block bytes") {
  // 2 layers × K,V × 4 tokens × 8 elements × 2 bytes = 256 bytes a block; 1000 bytes hold 3.
  KvCache cache(2, 8, 100, {.budget_bytes = 1000, .block_tokens = 4, .device_element_bytes = 2});
  CHECK_FALSE(cache.host_storage());
  CHECK(cache.block_bytes() == 256);
  CHECK(cache.capacity_blocks() == 3);
  const auto a = cache.add(), b = cache.add();
  CHECK(cache.reserve(a, 5) == 0);
  CHECK(cache.reserve(b, 3) == 0);
  const auto table_a = cache.block_table(a), table_b = cache.block_table(b);
  REQUIRE(table_a.size() == 2);
  REQUIRE(table_b.size() == 1);
  // Three distinct block ids below the capacity: the device's cache is indexed by them.
  const std::set<std::int32_t> ids{table_a[0], table_a[1], table_b[0]};
  CHECK(ids.size() == 3);
  CHECK(*ids.rbegin() < 3);
  CHECK_THROWS_AS(cache.rows(a, 0), RuntimeFailure); // no host rows to read
  const std::set<std::int32_t> given_back{table_a[0], table_a[1]};
  cache.remove(a);
  const auto c = cache.add();
  CHECK(cache.reserve(c, 8) == 0);
  const auto table_c = cache.block_table(c);
  CHECK(std::set<std::int32_t>(table_c.begin(), table_c.end()) == given_back); // a's blocks, reused
}
