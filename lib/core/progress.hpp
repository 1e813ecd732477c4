// The one progress reporter every long operation uses: a redrawn bar with rate and ETA on a
// terminal, a plain line every few seconds otherwise (logs, CI, cron), nothing under -q.
#pragma once

#include "core/clock.hpp"

#include <cstdint>
#include <ostream>
#include <string>

namespace optkit {

enum class ProgressMode { bar, lines, silent };

struct ProgressOptions {
  ProgressMode mode = ProgressMode::lines;
  double line_interval_s = 10.0;  // lines mode: seconds between lines
  double redraw_interval_s = 0.1; // bar mode: most frequent redraw
  std::size_t bar_width = 30;
  std::ostream* out = nullptr;  // default: std::cerr
  const Clock* clock = nullptr; // default: SystemClock

  // The process-wide choice made by cmd/main.cpp from -q and whether stderr is a terminal.
  static ProgressOptions defaults();
  static void set_defaults(const ProgressOptions& options);
};

// Picks bar on a terminal, lines elsewhere, silent when quiet.
ProgressMode choose_progress_mode(bool quiet, bool stderr_is_terminal);

class Progress {
public:
  // `total` 0 means unknown: count and rate are shown without a bar or ETA.
  Progress(std::string label, std::uint64_t total, std::string unit,
           const ProgressOptions& options = ProgressOptions::defaults());
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(std::uint64_t count = 1);
  void set_done(std::uint64_t done);
  // What the running units say of themselves (e.g. a worker's "layer 5/32"), shown after the
  // count; empty: nothing.
  void set_detail(std::string detail);
  // Prints the final state once; later calls and the destructor do nothing.
  void finish();

  std::uint64_t done() const { return m_done; }
  // Units per second since the start, 0 before any time has passed.
  double rate() const;

private:
  void maybe_report(bool force);
  std::string status_text() const;

  std::string m_label;
  std::uint64_t m_total;
  std::string m_unit;
  ProgressOptions m_options;
  std::ostream& m_out;
  const Clock& m_clock;
  double m_start;
  double m_last_report;
  std::uint64_t m_done = 0;
  std::string m_detail;
  bool m_finished = false;
  bool m_drawn = false;
};

} // namespace optkit
