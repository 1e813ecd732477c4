#include "core/text.hpp"

#include <doctest/doctest.h>

#include <csignal>

using namespace optkit;

TEST_CASE("edit_distance matches hand-computed optimal-string-alignment distances") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("flaw", "lawn") == 2);
  CHECK(edit_distance("jobs", "jbos") == 1); // one transposition
  CHECK(edit_distance("ca", "abc") == 3);    // OSA, not full Damerau (which gives 2)
  CHECK(edit_distance("timeout_s", "timeout_s") == 0);
}

TEST_CASE("closest_match suggests plausible typos only") {
  const std::vector<std::string> keys = {"jobs", "timeout_s", "grace_s", "max_attempts", "gpus"};
  CHECK(closest_match("job", keys) == "jobs");
  CHECK(closest_match("jbos", keys) == "jobs");
  CHECK(closest_match("timeout", keys) == "timeout_s");
  CHECK(closest_match("max_attempt", keys) == "max_attempts");
  CHECK(closest_match("h100", {"v100", "h100_sxm"}) == "h100_sxm"); // an extension beats a typo
  CHECK_FALSE(closest_match("completely_unrelated", keys).has_value());
}

TEST_CASE("split, join and trim") {
  CHECK(split("a,b,,c", ',') == std::vector<std::string>{"a", "b", "", "c"});
  CHECK(split("", ',') == std::vector<std::string>{""});
  CHECK(join({"a", "b", "c"}, ", ") == "a, b, c");
  CHECK(trim("  x y \n") == "x y");
  CHECK(trim("   ").empty());
}

TEST_CASE("durations and byte sizes read well") {
  CHECK(format_duration(1.25) == "1.2 s");
  CHECK(format_duration(125) == "2 min 05 s");
  CHECK(format_duration(3720) == "1 h 02 min");
  CHECK(format_duration(-1) == "?");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(3ull << 30) == "3.0 GiB");
}

TEST_CASE("csv_field quotes only when RFC 4180 requires it") {
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
}

TEST_CASE("signals are named the way users read them in logs") {
  CHECK(signal_name(SIGSEGV) == "SIGSEGV");
  CHECK(signal_name(SIGKILL) == "SIGKILL");
  CHECK(signal_name(999) == "signal 999");
}
