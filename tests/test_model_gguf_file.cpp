// The GGUF container: what GgufWriter writes parse_gguf reads back (typed keys, arrays, tensor
// infos in ggml order, 32-byte aligned offsets); every defect of an untrusted file is one
// InputError naming it; HF ↔ GGUF tensor names and the Q/K RoPE row permutation.
#include "core/error.hpp"
#include "model/gguf_file.hpp"
#include "model/gguf_model.hpp"
#include "model/gguf_names.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace optkit;
using model::GgmlType;
using model::GgufValue;

namespace {

// One scratch folder for the file's tests, removed when the test binary exits.
std::filesystem::path
scratch_file(const std::string& name) {
  static const test::ScratchDir dir;
  return dir / name;
}

std::string
read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A small valid file: three keys, a Q8_0 matrix [64 cols, 2 rows] and an F32 vector of 3.
std::string
sample_file() {
  const auto path = scratch_file("sample.gguf");
  model::GgufWriter w(path);
  w.set("general.architecture", GgufValue::string("llama"));
  w.set("llama.block_count", GgufValue::u32(2));
  w.set("tokenizer.ggml.tokens", GgufValue::strings({"a", "b", "ü"}));
  w.add_tensor("blk.0.attn_q.weight", {64, 2}, GgmlType::q8_0);
  w.add_tensor("output_norm.weight", {3}, GgmlType::f32);
  std::vector<std::byte> matrix(2 * 2 * 34, std::byte{7});
  w.write({matrix.data(), 100}); // in two pieces
  w.write({matrix.data() + 100, matrix.size() - 100});
  const float norm[3] = {1, 2, 3};
  w.write(std::as_bytes(std::span<const float>(norm)));
  w.finish();
  return read_all(path);
}

model::GgufHeader
parse(const std::string& bytes) {
  return model::parse_gguf(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), "test.gguf");
}

std::string
error_of(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Where `needle` first occurs in the file's bytes (the test edits the bytes there).
std::size_t
find(const std::string& haystack, const std::string& needle) {
  const auto at = haystack.find(needle);
  REQUIRE(at != std::string::npos);
  return at;
}

} // namespace

TEST_CASE("what GgufWriter writes parses back") {
  const auto bytes = sample_file();
  const auto h = parse(bytes);
  CHECK(h.version == 3);
  CHECK(h.metadata.at("general.architecture").value == "llama");
  CHECK(h.metadata.at("llama.block_count").type == model::GgufValueType::u32);
  CHECK(h.metadata.at("tokenizer.ggml.tokens").element_type == model::GgufValueType::string);
  CHECK(h.metadata.at("tokenizer.ggml.tokens").value.size() == 3);
  REQUIRE(h.tensors.size() == 2);
  CHECK(h.tensors[0].dims == std::vector<std::int64_t>{64, 2});
  CHECK(h.tensors[0].rows() == 2);
  CHECK(h.tensors[0].bytes == 136);
  CHECK(h.tensors[1].offset % 32 == 0);
  CHECK(h.data_offset % 32 == 0);
  float norm[3];
  std::memcpy(norm, bytes.data() + h.data_offset + h.tensors[1].offset, sizeof norm);
  CHECK(norm[2] == 3.0f);
  CHECK(bytes.size() == h.data_offset + h.tensors[1].offset + 32); // the last tensor padded too
}

TEST_CASE("a damaged or hostile GGUF is one InputError naming the defect") {
  const auto good = sample_file();
  CHECK(error_of("GGUX" + good.substr(4)).find("magic") != std::string::npos);
  auto version = good;
  version[4] = 9;
  CHECK(error_of(version).find("version 9") != std::string::npos);
  CHECK(error_of(good.substr(0, 40)).find("truncated") != std::string::npos);
  CHECK(error_of(good.substr(0, good.size() - 40)).find("past the end") != std::string::npos);

  auto counts = good;
  const std::uint64_t huge = std::uint64_t{1} << 60;
  std::memcpy(counts.data() + 16, &huge, 8); // kv_count
  CHECK(error_of(counts).find("cannot fit") != std::string::npos);

  auto type = good; // the Q8_0 tensor's type id (8) → 2 (Q4_0, not read)
  const auto name = find(type, "blk.0.attn_q.weight");
  type[name + 19 + 4 + 16] = 2;
  CHECK(error_of(type).find("ggml type 2") != std::string::npos);

  auto dims = good; // ne0 64 → 60: not a whole number of Q8_0 blocks
  dims[name + 19 + 4] = 60;
  CHECK(error_of(dims).find("whole number") != std::string::npos);

  auto offset = good; // the vector's offset moved inside the matrix
  const auto second = find(offset, "output_norm.weight");
  const std::uint64_t overlapping = 128;
  std::memcpy(offset.data() + second + 18 + 4 + 8 + 4, &overlapping, 8);
  CHECK(error_of(offset).find("overlap") != std::string::npos);
  const std::uint64_t unaligned = 161;
  std::memcpy(offset.data() + second + 18 + 4 + 8 + 4, &unaligned, 8);
  CHECK(error_of(offset).find("alignment") != std::string::npos);

  auto utf8 = good; // "ü" → an invalid UTF-8 byte pair
  const auto u = find(utf8, "\xc3\xbc");
  utf8[u] = '\xff';
  CHECK(error_of(utf8).find("not UTF-8") != std::string::npos);
}

TEST_CASE("a key or tensor name twice is refused") {
  const auto path = scratch_file("twice.gguf");
  {
    model::GgufWriter w(path);
    w.set("key.a", GgufValue::u32(1));
    w.set("key.b", GgufValue::u32(2));
    w.add_tensor("t.a", {32}, GgmlType::f32);
    w.add_tensor("t.b", {32}, GgmlType::f32);
    std::vector<std::byte> zeros(256);
    w.write(zeros);
    w.finish();
  }
  auto bytes = read_all(path);
  CHECK(error_of(bytes).empty());
  auto keys = bytes;
  keys[find(keys, "key.b") + 4] = 'a';
  CHECK(error_of(keys).find("key 'key.a' appears twice") != std::string::npos);
  auto tensors = bytes;
  tensors[find(tensors, "t.b") + 2] = 'a';
  CHECK(error_of(tensors).find("tensor 't.a' appears twice") != std::string::npos);
}

TEST_CASE("a vocabulary of the wrong kinds of values is refused, not misread") {
  const auto path = scratch_file("vocab.gguf");
  {
    model::GgufWriter w(path);
    w.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
    w.set("tokenizer.ggml.tokens", GgufValue::i32s({1, 2, 3})); // numbers where strings belong
    w.finish();
  }
  const model::GgufFile file(path);
  CHECK_THROWS_WITH_AS(model::gguf_tokenizer_json(file), doctest::Contains("must be an array of strings"), InputError);
  CHECK_THROWS_AS(model::gguf_special_tokens(file), InputError);
  CHECK_THROWS_WITH_AS(model::gguf_model_config(file), doctest::Contains("general.architecture"), InputError);
}

TEST_CASE("HF and GGUF tensor names map both ways") {
  CHECK(model::gguf_tensor_name("model.layers.3.self_attn.o_proj.weight") == "blk.3.attn_output.weight");
  CHECK(model::gguf_tensor_name("model.layers.0.mlp.down_proj.weight") == "blk.0.ffn_down.weight");
  CHECK(model::gguf_tensor_name("model.layers.1.post_attention_layernorm.weight") == "blk.1.ffn_norm.weight");
  CHECK(model::gguf_tensor_name("model.embed_tokens.weight") == "token_embd.weight");
  CHECK(model::gguf_tensor_name("lm_head.weight") == "output.weight");
  CHECK_FALSE(model::gguf_tensor_name("model.layers.0.self_attn.rotary_emb.inv_freq").has_value());
  CHECK(model::hf_tensor_name("blk.12.attn_k.weight") == "model.layers.12.self_attn.k_proj.weight");
  CHECK(model::hf_tensor_name("output_norm.weight") == "model.norm.weight");
  CHECK_FALSE(model::hf_tensor_name("rope_freqs.weight").has_value());
  CHECK(model::gguf_rope_permuted("llama", "model.layers.0.self_attn.q_proj.weight"));
  CHECK_FALSE(model::gguf_rope_permuted("llama", "model.layers.0.self_attn.v_proj.weight"));
  CHECK_FALSE(model::gguf_rope_permuted("qwen2", "model.layers.0.self_attn.q_proj.weight")); // NEOX: unpermuted
  CHECK(model::hf_tensor_name("blk.3.attn_k_norm.weight") == "model.layers.3.self_attn.k_norm.weight");
  CHECK(model::gguf_tensor_name("model.layers.0.self_attn.q_proj.bias") == "blk.0.attn_q.bias");
}

TEST_CASE("tokenizer.ggml.pre names the split regexes llama.cpp knows, both ways, and no other") {
  for (const char* name : {"llama-bpe", "qwen2", "gpt-2", "tekken", "gpt-4o"}) {
    const auto regex = model::gguf_pre_tokenizer_regex(name);
    REQUIRE(regex.has_value());
    CHECK(model::gguf_pre_tokenizer_name(*regex) == name);
  }
  CHECK(model::gguf_pre_tokenizer_regex("llama3") == model::gguf_pre_tokenizer_regex("llama-bpe"));
  CHECK_FALSE(model::gguf_pre_tokenizer_name(R"(\p{N}{1,3})").has_value()); // DeepSeek V3's first of three splits
  CHECK_FALSE(model::gguf_pre_tokenizer_regex("deepseek-v3").has_value());
}

TEST_CASE("Q/K rows: within a head, HF row p·hd/2 + i becomes row 2i + p") {
  // head_dim 8: HF rows 0..3 are the first halves of the pairs, 4..7 the second halves.
  const std::int64_t expected[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  for (std::int64_t r = 0; r < 8; ++r) {
    CHECK(model::gguf_rope_row(r, 8) == expected[r]);
    CHECK(model::gguf_rope_row(8 + r, 8) == 8 + expected[r]); // the next head, the same way
  }
}
