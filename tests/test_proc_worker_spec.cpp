#include "proc/worker_spec.hpp"

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::proc;

TEST_CASE("a worker spec round-trips through its file") {
  test::ScratchDir dir;
  WorkerSpec spec{7, 11, 2, 3, "/tmp/a.db", dir / "r.json", 1, {{"task", "echo"}}};
  test::write_text(dir / "s.json", to_json(spec).dump());
  const WorkerSpec back = read_worker_spec(dir / "s.json");
  CHECK(back.run_id == 7);
  CHECK(back.trial_id == 11);
  CHECK(back.trial_index == 2);
  CHECK(back.attempt == 3);
  CHECK(back.gpu == 1);
  CHECK(back.payload["task"] == "echo");
  write_worker_result(back, {{"ok", true}});
  CHECK(nlohmann::json::parse(test::read_text(dir / "r.json"))["ok"] == true);
}

TEST_CASE("malformed specs are input errors naming the file") {
  test::ScratchDir dir;
  CHECK_THROWS_WITH_AS(read_worker_spec(dir / "missing.json"), doctest::Contains("missing.json"), InputError);
  test::write_text(dir / "bad.json", "{not json");
  CHECK_THROWS_WITH_AS(read_worker_spec(dir / "bad.json"), doctest::Contains("not a JSON object"), InputError);
  test::write_text(dir / "partial.json", R"({"run_id": 1})");
  CHECK_THROWS_WITH_AS(read_worker_spec(dir / "partial.json"), doctest::Contains("malformed worker spec"), InputError);
}

TEST_CASE("ids must be JSON integers in range (found by fuzz_worker_spec)") {
  test::ScratchDir dir;
  const std::string rest =
      R"("trial_id":1,"trial_index":0,"attempt":1,"archive":"a","result_path":"r","gpu":null,"payload":{})";
  test::write_text(dir / "huge.json", R"({"run_id":100000003120365132444,)" + rest + "}");
  CHECK_THROWS_WITH_AS(read_worker_spec(dir / "huge.json"), doctest::Contains("\"run_id\" must be an integer"),
                       InputError);
  test::write_text(dir / "float.json", R"({"run_id":1.5,)" + rest + "}");
  CHECK_THROWS_AS(read_worker_spec(dir / "float.json"), InputError);
  test::write_text(dir / "ok.json", R"({"run_id":7,)" + rest + "}");
  CHECK(read_worker_spec(dir / "ok.json").run_id == 7);
}

TEST_CASE("a worker's progress line reaches the parent, the last one written") {
  test::ScratchDir dir;
  WorkerSpec spec{7, 11, 2, 3, "/tmp/a.db", dir / "r.json", 1, {{"task", "echo"}}};
  CHECK(read_worker_progress(spec.result_path).empty()); // nothing said yet
  write_worker_progress(spec, "layer 1/32, about 2 h left");
  write_worker_progress(spec, "layer 2/32, about 1.9 h left");
  CHECK(read_worker_progress(spec.result_path) == "layer 2/32, about 1.9 h left");
}
