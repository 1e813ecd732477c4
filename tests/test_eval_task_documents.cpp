// Documents from the official files: JSONL, a JSON list, CSV with RFC 4180 quoting.
#include "core/error.hpp"
#include "eval/task_documents.hpp"

#include <doctest/doctest.h>

using namespace optkit::eval;

TEST_CASE("JSONL: one object per line, blank lines skipped, the bad line named") {
  const auto docs =
      parse_json_lines("{\"question\": \"q1\", \"answer\": \"#### 1\"}\n\n{\"question\": \"q2\"}\r\n", "t");
  REQUIRE(docs.size() == 2);
  CHECK(docs[1]["question"] == "q2");
  CHECK_THROWS_WITH_AS(parse_json_lines("{}\n[1]\n", "data.jsonl"), doctest::Contains("data.jsonl:2"),
                       optkit::InputError);
}

TEST_CASE("CSV: header row, quoted fields with commas, doubled quotes and newlines, CRLF, BOM") {
  const std::string text = "\xEF\xBB\xBFid,risk_area,question\r\n"
                           "0,\"Misinformation, harms\",\"What is \"\"X\"\"?\"\r\n"
                           "1,Privacy,\"two\nlines\"\n";
  const auto docs = parse_csv(text, "dna.csv");
  REQUIRE(docs.size() == 2);
  CHECK(docs[0]["id"] == "0");
  CHECK(docs[0]["risk_area"] == "Misinformation, harms");
  CHECK(docs[0]["question"] == "What is \"X\"?");
  CHECK(docs[1]["question"] == "two\nlines");
  CHECK_THROWS_WITH_AS(parse_csv("a,b\n1,2,3\n", "x.csv"), doctest::Contains("x.csv:2: 3 fields"), optkit::InputError);
  CHECK_THROWS_WITH_AS(parse_csv("a\n\"open\n", "x.csv"), doctest::Contains("never closed"), optkit::InputError);
  CHECK_THROWS_AS(parse_csv("", "x.csv"), optkit::InputError);
}

TEST_CASE("JSON list") {
  CHECK(parse_json_list("[{\"a\": 1}, {\"a\": 2}]", "x").size() == 2);
  CHECK_THROWS_AS(parse_json_list("{\"a\": 1}", "x"), optkit::InputError);
  CHECK_THROWS_AS(parse_json_list("[1]", "x"), optkit::InputError);
}
