#include "core/progress.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

using namespace optkit;

namespace {

ProgressOptions
options(ProgressMode mode, std::ostream& out, const Clock& clock) {
  ProgressOptions o;
  o.mode = mode;
  o.out = &out;
  o.clock = &clock;
  o.line_interval_s = 10;
  o.bar_width = 10;
  return o;
}

} // namespace

TEST_CASE("lines mode prints at most one line per interval, then a final line") {
  FakeClock clock;
  std::ostringstream out;
  {
    Progress p("calibrate", 100, "layers", options(ProgressMode::lines, out, clock));
    for (int i = 0; i < 50; ++i) {
      clock.advance(0.5); // 25 s in total
      p.advance();
    }
    p.finish();
  }
  const std::string text = out.str();
  CHECK(std::count(text.begin(), text.end(), '\n') == 3); // at 10 s, 20 s, and the final line
  CHECK(text.find("calibrate: 20/100 layers (20%), 2 layers/s, ETA 40.0 s\n") != std::string::npos);
  CHECK(text.find("calibrate: 50/100 layers (50%), 2 layers/s, 25.0 s elapsed\n") != std::string::npos);
}

TEST_CASE("bar mode redraws in place with a bar, rate and ETA") {
  FakeClock clock;
  std::ostringstream out;
  Progress p("trials", 4, "trials", options(ProgressMode::bar, out, clock));
  clock.advance(1);
  p.advance();
  CHECK(out.str() == "\rtrials [##........] 1/4 trials (25%), 1 trials/s, ETA 3.0 s\x1b[K");
  p.finish();
  CHECK(out.str().back() == '\n');
}

TEST_CASE("silent mode prints nothing") {
  FakeClock clock;
  std::ostringstream out;
  {
    Progress p("x", 10, "items", options(ProgressMode::silent, out, clock));
    clock.advance(100);
    p.advance(10);
  }
  CHECK(out.str().empty());
}

TEST_CASE("unknown totals show count and rate only") {
  FakeClock clock;
  std::ostringstream out;
  Progress p("requests", 0, "req", options(ProgressMode::lines, out, clock));
  clock.advance(10);
  p.advance(50);
  CHECK(out.str() == "requests: 50 req, 5 req/s\n");
}

TEST_CASE("the mode follows -q and whether stderr is a terminal") {
  CHECK(choose_progress_mode(true, true) == ProgressMode::silent);
  CHECK(choose_progress_mode(false, true) == ProgressMode::bar);
  CHECK(choose_progress_mode(false, false) == ProgressMode::lines);
}

TEST_CASE("the running units' detail follows the count until the final line") {
  FakeClock clock;
  std::ostringstream out;
  {
    Progress p("compress trials", 2, "tasks", options(ProgressMode::lines, out, clock));
    clock.advance(11);
    p.set_detail("task 0: layer 5/32, about 41 min left");
    clock.advance(11);
    p.set_detail("task 0: layer 6/32, about 40 min left");
    p.set_done(2);
    p.finish();
  }
  const std::string text = out.str();
  CHECK(text.find("compress trials: 0/2 tasks (0%), 0 tasks/s; task 0: layer 5/32, about 41 min left\n") !=
        std::string::npos);
  CHECK(text.find("layer 6/32") != std::string::npos);
  CHECK(text.find("compress trials: 2/2 tasks (100%), 0.0909 tasks/s, 22.0 s elapsed\n") != std::string::npos);
}
