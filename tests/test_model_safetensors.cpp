// safetensors: writer -> reader round trips for every dtype, sharding with an index, and
// refusal of files whose header lies (the full fixture set runs through the CLI test).
#include "core/error.hpp"
#include "model/safetensors.hpp"
#include "model/safetensors_writer.hpp"
#include "model/weight_store.hpp"
#include "support/test_support.hpp"

#include <cstring>
#include <doctest/doctest.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

using namespace optkit;
using namespace optkit::model;

namespace {

template <typename T>
std::span<const std::byte>
bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span(v));
}

std::string
header_text(const std::filesystem::path& file) {
  const auto blob = test::read_text(file);
  std::uint64_t n = 0;
  std::memcpy(&n, blob.data(), 8);
  return blob.substr(8, n);
}

} // namespace

TEST_CASE("every dtype round-trips through the writer and the mmap reader") {
  test::ScratchDir dir;
  const std::vector<float> f32{1.5f, -2.25f, 0.0f, 3.0e-5f};
  const std::vector<std::uint16_t> bf16{float_to_bf16(1.0f), float_to_bf16(-0.5f)};
  const std::vector<std::uint16_t> f16{float_to_f16(2.0f), float_to_f16(-0.125f), float_to_f16(65504.0f)};
  const std::vector<std::uint8_t> f8{0x38, 0xb8, 0x7e}; // 1.0, -1.0, 448
  const std::vector<std::int8_t> i8{-128, 0, 127};
  const std::vector<std::uint8_t> u8{0, 255};
  const std::vector<std::int32_t> i32{-7, 1 << 20};
  const std::vector<std::int64_t> i64{-1, 5};
  const std::vector<TensorToWrite> tensors{{"f32", DType::f32, {2, 2}, bytes_of(f32)},
                                           {"bf16", DType::bf16, {2}, bytes_of(bf16)},
                                           {"f16", DType::f16, {3}, bytes_of(f16)},
                                           {"f8", DType::f8_e4m3, {3}, bytes_of(f8)},
                                           {"i8", DType::i8, {3}, bytes_of(i8)},
                                           {"u8", DType::u8, {1, 2}, bytes_of(u8)},
                                           {"i32", DType::i32, {2}, bytes_of(i32)},
                                           {"i64", DType::i64, {2}, bytes_of(i64)},
                                           {"empty", DType::f32, {0, 4}, std::span<const std::byte>{}}};
  write_safetensors(dir / "m.safetensors", tensors, {{"producer", "optkit-test"}});
  CHECK(header_text(dir / "m.safetensors").size() % 8 == 0);
  CHECK(nlohmann::json::parse(header_text(dir / "m.safetensors"))["__metadata__"]["format"] == "pt");

  SafetensorsFile file(dir / "m.safetensors");
  CHECK(file.header().metadata.at("producer") == "optkit-test");
  CHECK(file.find("f32").shape() == std::vector<std::int64_t>{2, 2});
  CHECK(file.find("f32").at(1) == -2.25f);
  CHECK(file.find("bf16").at(1) == -0.5f);
  CHECK(file.find("f16").at(2) == 65504.0f);
  CHECK(file.find("f8").at(0) == 1.0f);
  CHECK(file.find("f8").at(1) == -1.0f);
  CHECK(file.find("f8").at(2) == 448.0f);
  CHECK(file.find("i8").at(0) == -128.0f);
  CHECK(file.find("u8").at(1) == 255.0f);
  CHECK(file.find("i32").at(1) == 1048576.0f);
  CHECK(file.find("i64").at(0) == -1.0f);
  CHECK(file.find("empty").element_count() == 0);
  CHECK(file.find("absent").info == nullptr);
}

TEST_CASE("sharded writing produces an index that WeightStore resolves tensor by tensor") {
  test::ScratchDir dir;
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> tensors;
  for (int i = 0; i < 5; ++i)
    data.push_back(std::vector<float>(100, static_cast<float>(i)));
  for (int i = 0; i < 5; ++i)
    tensors.push_back(
        {"layer." + std::to_string(i), DType::f32, {10, 10}, bytes_of(data[static_cast<std::size_t>(i)])});
  const auto files = write_safetensors_sharded(dir.path(), tensors, 900);
  CHECK(files.size() == 4); // 3 shards of <= 2 tensors + the index
  CHECK(files[0] == "model-00001-of-00003.safetensors");
  const auto index = nlohmann::json::parse(test::read_text(dir / "model.safetensors.index.json"));
  CHECK(index["metadata"]["total_size"] == 2000);
  CHECK(index["weight_map"]["layer.4"] == "model-00003-of-00003.safetensors");
  WeightStore store(dir.path());
  CHECK(store.names().size() == 5);
  CHECK(store.require("layer.3").at(99) == 3.0f);
  CHECK_THROWS_WITH_AS(store.require("layer.9"), doctest::Contains("'layer.9' is missing"), InputError);

  SUBCASE("an index that maps a tensor to the wrong shard is refused") {
    auto bad = index;
    bad["weight_map"]["layer.0"] = "model-00002-of-00003.safetensors";
    test::write_text(dir / "model.safetensors.index.json", bad.dump());
    CHECK_THROWS_WITH_AS(WeightStore(dir.path()), doctest::Contains("does not contain it"), InputError);
  }
  SUBCASE("an index that names a path outside the folder is refused") {
    auto bad = index;
    bad["weight_map"]["layer.0"] = "../elsewhere.safetensors";
    test::write_text(dir / "model.safetensors.index.json", bad.dump());
    CHECK_THROWS_WITH_AS(WeightStore(dir.path()), doctest::Contains("not a file in the folder"), InputError);
  }
}

TEST_CASE("the streaming shard writer takes tensors in any order and writes the files the one-shot writer writes") {
  test::ScratchDir a, b;
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> tensors;
  std::vector<TensorSpec> specs;
  for (int i = 0; i < 5; ++i)
    data.push_back(std::vector<float>(100, static_cast<float>(i) + 0.5f));
  for (int i = 0; i < 5; ++i) {
    tensors.push_back(
        {"layer." + std::to_string(i), DType::f32, {10, 10}, bytes_of(data[static_cast<std::size_t>(i)])});
    specs.push_back({tensors.back().name, DType::f32, {10, 10}});
  }
  const auto expected = write_safetensors_sharded(a.path(), tensors, 900);
  {
    ShardedSafetensorsWriter writer(b.path(), specs, 900);
    for (const int i : {4, 1, 3, 0, 2}) {
      CHECK_FALSE(writer.written(tensors[static_cast<std::size_t>(i)].name));
      writer.write(tensors[static_cast<std::size_t>(i)].name, tensors[static_cast<std::size_t>(i)].bytes);
      CHECK(writer.written(tensors[static_cast<std::size_t>(i)].name));
    }
    // A shard is in place as soon as its last tensor is: before finish(), only the index is missing.
    CHECK(std::filesystem::exists(b / "model-00001-of-00003.safetensors"));
    CHECK_FALSE(std::filesystem::exists(b / "model.safetensors.index.json"));
    CHECK(writer.finish() == expected);
  }
  for (const auto& name : expected)
    CHECK(test::read_text(a / name) == test::read_text(b / name));
}

TEST_CASE("the streaming shard writer refuses wrong bytes and leaves no temporary file when abandoned") {
  test::ScratchDir dir;
  const std::vector<float> ten(10, 1.0f), nine(9, 1.0f);
  {
    ShardedSafetensorsWriter writer(dir.path(), {{"a", DType::f32, {10}}, {"b", DType::f32, {10}}}, 1000);
    CHECK_THROWS_WITH_AS(writer.write("a", bytes_of(nine)), doctest::Contains("has 36 bytes but"), RuntimeFailure);
    CHECK_THROWS_WITH_AS(writer.write("c", bytes_of(ten)), doctest::Contains("'c' is not among"), RuntimeFailure);
    writer.write("a", bytes_of(ten));
    CHECK_THROWS_WITH_AS(writer.write("a", bytes_of(ten)), doctest::Contains("written twice"), RuntimeFailure);
    CHECK_THROWS_WITH_AS(writer.finish(), doctest::Contains("'b' of"), RuntimeFailure);
  }
  CHECK(std::filesystem::is_empty(dir.path())); // the unfinished shard's temporary file is gone
}

TEST_CASE("the streaming shard writer refuses a tensor planned twice and leaves nothing behind") {
  test::ScratchDir dir;
  CHECK_THROWS_WITH_AS(ShardedSafetensorsWriter(dir.path(), {{"a", DType::f32, {10}}, {"a", DType::f32, {10}}}, 1000),
                       doctest::Contains("'a' is planned twice"), RuntimeFailure);
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("one file under its own name, its tensors appended piece by piece, equals the one-shot file") {
  test::ScratchDir a, b;
  std::vector<float> x(60), y(8);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i) * 0.25f;
  for (std::size_t i = 0; i < y.size(); ++i)
    y[i] = -static_cast<float>(i);
  write_safetensors(a / "delta.safetensors",
                    {{"x", DType::f32, {6, 10}, bytes_of(x)}, {"y", DType::f32, {8}, bytes_of(y)}});
  ShardedSafetensorsWriter writer(b.path(), {{"x", DType::f32, {6, 10}}, {"y", DType::f32, {8}}}, 1'000'000, {},
                                  "delta.safetensors");
  const auto xb = bytes_of(x);
  writer.append("x", xb.subspan(0, 80)); // rows 0-1, then y whole, then the rest of x
  writer.append("y", bytes_of(y));
  CHECK_THROWS_WITH_AS(writer.append("y", bytes_of(y)), doctest::Contains("y"), RuntimeFailure);
  writer.append("x", xb.subspan(80));
  CHECK(writer.finish() == std::vector<std::string>{"delta.safetensors"});
  CHECK(test::read_text(a / "delta.safetensors") == test::read_text(b / "delta.safetensors"));
}

TEST_CASE("rows of a matrix are read a block at a time as the whole tensor's values") {
  test::ScratchDir dir;
  std::vector<float> m(7 * 5);
  for (std::size_t i = 0; i < m.size(); ++i)
    m[i] = static_cast<float>(i) * 1.5f - 3.0f;
  const auto bf16 = encode_floats(m, DType::bf16);
  write_safetensors(dir / "model.safetensors", {{"m", DType::bf16, {7, 5}, bf16}});
  const WeightStore store(dir.path());
  const auto whole = store.require("m").to_floats();
  const auto rows = store.rows_as_floats("m", 2, 3);
  CHECK(std::vector<float>(whole.begin() + 10, whole.begin() + 25) == rows);
  CHECK(store.rows_as_floats("m", 7, 0).empty());
  CHECK_THROWS_WITH_AS(store.rows_as_floats("m", 5, 3), doctest::Contains("has no rows [5, 8)"), InputError);
}

TEST_CASE("a single-file model is read whole and a folder without weights is named") {
  test::ScratchDir dir;
  CHECK_THROWS_WITH_AS(WeightStore(dir.path()), doctest::Contains("no model.safetensors"), InputError);
  const std::vector<float> v{1, 2, 3};
  write_safetensors(dir / "model.safetensors", {{"x", DType::f32, {3}, bytes_of(v)}});
  CHECK(WeightStore(dir.path()).require("x").at(2) == 3.0f);
}

TEST_CASE("headers that lie about sizes or offsets are refused before any data is read") {
  const auto parse = [](const std::string& header, std::size_t data_bytes) {
    std::string blob(8, '\0');
    const std::uint64_t n = header.size();
    std::memcpy(blob.data(), &n, 8);
    blob += header + std::string(data_bytes, '\0');
    return parse_safetensors(std::as_bytes(std::span(blob.data(), blob.size())), "t.safetensors");
  };
  CHECK(parse(R"({"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})", 8).tensors.size() == 1);
  CHECK_THROWS_WITH_AS(parse(R"({"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,6]}})", 6),
                       doctest::Contains("shape x dtype is 8 bytes but data_offsets span 6"), InputError);
  CHECK_THROWS_WITH_AS(parse(R"({"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})", 4),
                       doctest::Contains("truncated"), InputError);
  CHECK_THROWS_WITH_AS(parse(R"({"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", 1),
                       doctest::Contains("unsupported dtype 'F4'"), InputError);
  CHECK_THROWS_AS(parse(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                        4),
                  InputError);
}

namespace {

// This process's resident bytes (/proc/self/statm).
std::uint64_t
resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

} // namespace

TEST_CASE("a released tensor leaves the resident set and reads the same bytes again, mapped or read into memory") {
  test::ScratchDir dir;
  std::vector<float> big(2 << 20); // 8 MiB
  for (std::size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<float>(i % 9973) - 17.0f;
  const std::vector<float> small{1.0f, 2.0f};
  write_safetensors(dir / "model.safetensors",
                    {{"big", DType::f32, {2048, 1024}, bytes_of(big)}, {"small", DType::f32, {2}, bytes_of(small)}});
  for (const auto mode : {LoadMode::map, LoadMode::read}) {
    CAPTURE(static_cast<int>(mode));
    const WeightStore store(dir.path(), mode);
    const auto view = store.require("big");
    CHECK(std::memcmp(view.bytes.data(), big.data(), view.bytes.size()) == 0); // every page touched
    const auto before = resident_bytes();
    store.release("big");
    const auto after = resident_bytes();
    CHECK(after + (7u << 20) < before);
    CHECK(std::memcmp(view.bytes.data(), big.data(), view.bytes.size()) == 0);
    CHECK(store.require("small").at(1) == 2.0f);
  }
}
