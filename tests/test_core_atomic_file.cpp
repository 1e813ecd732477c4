#include "core/atomic_file.hpp"

#include "core/error.hpp"
#include "core/process_identity.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <unistd.h>

using namespace optkit;

namespace {

std::size_t
entries(const std::filesystem::path& dir) {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), {}));
}

} // namespace

TEST_CASE("write_file_atomic replaces the file and leaves no temporary behind") {
  test::ScratchDir dir;
  write_file_atomic(dir / "out.json", "first");
  write_file_atomic(dir / "out.json", "second");
  CHECK(test::read_text(dir / "out.json") == "second");
  CHECK(entries(dir.path()) == 1);
}

TEST_CASE("write_file_atomic into a missing directory fails naming the path and keeps nothing") {
  test::ScratchDir dir;
  CHECK_THROWS_AS(write_file_atomic(dir / "missing" / "out.json", "x"), RuntimeFailure);
  CHECK(entries(dir.path()) == 0);
}

TEST_CASE("a StagedDirectory appears only when committed") {
  test::ScratchDir dir;
  const auto destination = dir / "model";
  {
    StagedDirectory staged(destination);
    test::write_text(staged.path() / "weights.bin", "data");
    CHECK_FALSE(std::filesystem::exists(destination));
    staged.commit();
  }
  CHECK(test::read_text(destination / "weights.bin") == "data");
  CHECK(entries(dir.path()) == 1);
}

TEST_CASE("an uncommitted StagedDirectory is removed, as when the work fails") {
  test::ScratchDir dir;
  try {
    StagedDirectory staged(dir / "model");
    test::write_text(staged.path() / "partial.bin", "half");
    throw RuntimeFailure("simulated failure");
  } catch (const RuntimeFailure&) {
  }
  CHECK(entries(dir.path()) == 0);
}

TEST_CASE("a StagedDirectory never merges into an existing output") {
  test::ScratchDir dir;
  std::filesystem::create_directory(dir / "model");
  CHECK_THROWS_WITH_AS(StagedDirectory(dir / "model"), doctest::Contains("already exists"), InputError);
}

TEST_CASE("a replacing StagedDirectory swaps the old folder out only on commit") {
  test::ScratchDir dir;
  std::filesystem::create_directory(dir / "db");
  test::write_text(dir / "db" / "old.csv", "old");
  {
    StagedDirectory staged(dir / "db", ExistingDestination::replace);
    test::write_text(staged.path() / "new.csv", "new");
    CHECK(test::read_text(dir / "db" / "old.csv") == "old"); // untouched until commit
    staged.commit();
  }
  CHECK(test::read_text(dir / "db" / "new.csv") == "new");
  CHECK_FALSE(std::filesystem::exists(dir / "db" / "old.csv"));
  CHECK(entries(dir.path()) == 1); // the old folder is gone, not left aside
  {
    StagedDirectory abandoned(dir / "db", ExistingDestination::replace);
    test::write_text(abandoned.path() / "partial.csv", "half");
  }
  CHECK(test::read_text(dir / "db" / "new.csv") == "new");
  CHECK(entries(dir.path()) == 1);
}

TEST_CASE("a StagedDirectory sweeps the staging folders a killed writer of this host left") {
  test::ScratchDir dir;
  const std::string host = host_name();
  const auto killed = dir / fmt::format(".db.partial.{}.999999999.0000abcd", host);
  const auto other_host = dir / ".db.partial.some-other-host.999999999.0000abcd";
  const auto alive = dir / fmt::format(".db.partial.{}.{}.0000abcd", host, ::getpid());
  const auto unparsable = dir / ".db.partial.garbage";
  for (const auto& folder : {killed, other_host, alive, unparsable}) {
    std::filesystem::create_directory(folder);
    test::write_text(folder / "shard.safetensors", "half");
  }
  StagedDirectory staged(dir / "db");
  CHECK_FALSE(std::filesystem::exists(killed));
  CHECK(std::filesystem::exists(other_host)); // a shared file system: that host may still be writing
  CHECK(std::filesystem::exists(alive));
  CHECK(std::filesystem::exists(unparsable));
}

TEST_CASE("an old folder a killed commit set aside stays while it is the only copy") {
  test::ScratchDir dir;
  const auto set_aside = dir / fmt::format(".db.replaced.{}.999999999.0000abcd", host_name());
  std::filesystem::create_directory(set_aside);
  { StagedDirectory staged(dir / "db", ExistingDestination::replace); }
  CHECK(std::filesystem::exists(set_aside)); // no db: the set-aside folder holds the only copy
  std::filesystem::create_directory(dir / "db");
  { StagedDirectory staged(dir / "db", ExistingDestination::replace); }
  CHECK_FALSE(std::filesystem::exists(set_aside));
}
