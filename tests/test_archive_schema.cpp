#include "archive/schema.hpp"

#include "archive/run_archive.hpp"
#include "archive/sqlite_db.hpp"
#include "core/error.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::archive;

TEST_CASE("a new archive is created at the latest schema, in WAL mode, marked as optkit's") {
  test::ScratchDir dir;
  RunArchive archive(dir / "sub" / "a.db");
  CHECK(archive.schema_version() == latest_schema_version());
  Database db((dir / "sub" / "a.db").string());
  auto mode = db.prepare("PRAGMA journal_mode");
  REQUIRE(mode.step());
  CHECK(mode.text(0) == "wal");
  auto app = db.prepare("PRAGMA application_id");
  REQUIRE(app.step());
  CHECK(app.int64(0) == k_application_id);
}

TEST_CASE("reopening an archive keeps its data and does not migrate again") {
  test::ScratchDir dir;
  std::int64_t id = 0;
  {
    RunArchive archive(dir / "a.db");
    id = archive.begin_run({"doctor", nlohmann::json::array({"optkit", "doctor"}), nlohmann::json::object()});
  }
  RunArchive again(dir / "a.db");
  CHECK(again.find_run(id).has_value());
  CHECK(again.count("runs") == 1);
}

TEST_CASE("another application's database is refused with a clear message") {
  test::ScratchDir dir;
  {
    Database db((dir / "other.db").string());
    db.exec("CREATE TABLE t (x INTEGER)");
  }
  CHECK_THROWS_WITH_AS(RunArchive(dir / "other.db"), doctest::Contains("not an optkit archive"), InputError);
}

TEST_CASE("an archive from a newer optkit is refused, not downgraded") {
  test::ScratchDir dir;
  { RunArchive archive(dir / "a.db"); }
  {
    Database db((dir / "a.db").string());
    db.exec("PRAGMA user_version = 99");
  }
  CHECK_THROWS_WITH_AS(RunArchive(dir / "a.db"), doctest::Contains("schema version 99 from a newer optkit"),
                       InputError);
}

TEST_CASE("a file that is not SQLite at all is a clear failure") {
  test::ScratchDir dir;
  test::write_text(dir / "junk.db", std::string(4096, 'x'));
  CHECK_THROWS_WITH(RunArchive(dir / "junk.db"), doctest::Contains("junk.db"));
}
