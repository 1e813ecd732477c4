#include "core/sha256.hpp"

#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cstdio>

using namespace optkit;

TEST_CASE("SHA-256 matches the FIPS 180-4 example vectors") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1'000'000, 'a');
  CHECK(sha256_hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("incremental updates give the same digest as one update, across block boundaries") {
  std::string data;
  for (int i = 0; i < 1000; ++i) {
    data += static_cast<char>(i * 7);
  }
  for (std::size_t chunk : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 200u}) {
    Sha256 hash;
    for (std::size_t i = 0; i < data.size(); i += chunk) {
      hash.update(std::string_view(data).substr(i, chunk));
    }
    CHECK(hash.finish_hex() == sha256_hex(data));
  }
}

TEST_CASE("digest_file agrees with sha256sum") {
  test::ScratchDir dir;
  std::string content;
  for (int i = 0; i < 100000; ++i) {
    content += static_cast<char>('a' + i % 26);
  }
  test::write_text(dir / "f.bin", content);
  const FileDigest digest = digest_file(dir / "f.bin");
  CHECK(digest.bytes == content.size());
  std::FILE* pipe = ::popen(("sha256sum " + (dir / "f.bin").string()).c_str(), "r");
  REQUIRE(pipe);
  char line[128] = {};
  REQUIRE(std::fgets(line, sizeof line, pipe));
  ::pclose(pipe);
  CHECK(std::string(line).substr(0, 64) == digest.sha256);
}

TEST_CASE("digest_file names the file it cannot read") {
  CHECK_THROWS_WITH(digest_file("/nonexistent/optkit/file"), doctest::Contains("/nonexistent/optkit/file"));
}
