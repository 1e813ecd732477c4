#include "core/progress.hpp"

#include "core/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <mutex>

namespace optkit {
namespace {

std::mutex g_defaults_mutex;
ProgressOptions g_defaults;

} // namespace

ProgressOptions
ProgressOptions::defaults() {
  std::lock_guard lock(g_defaults_mutex);
  return g_defaults;
}

void
ProgressOptions::set_defaults(const ProgressOptions& options) {
  std::lock_guard lock(g_defaults_mutex);
  g_defaults = options;
}

ProgressMode
choose_progress_mode(bool quiet, bool stderr_is_terminal) {
  if (quiet) {
    return ProgressMode::silent;
  }
  return stderr_is_terminal ? ProgressMode::bar : ProgressMode::lines;
}

Progress::Progress(std::string label, std::uint64_t total, std::string unit, const ProgressOptions& options)
    : m_label(std::move(label))
    , m_total(total)
    , m_unit(std::move(unit))
    , m_options(options)
    , m_out(options.out ? *options.out : std::cerr)
    , m_clock(options.clock ? *options.clock : SystemClock::instance())
    , m_start(m_clock.monotonic_seconds())
    , m_last_report(m_start) {}

Progress::~Progress() {
  finish();
}

void
Progress::advance(std::uint64_t count) {
  set_done(m_done + count);
}

void
Progress::set_done(std::uint64_t done) {
  m_done = done;
  maybe_report(false);
}

void
Progress::set_detail(std::string detail) {
  if (detail == m_detail)
    return;
  m_detail = std::move(detail);
  maybe_report(false);
}

double
Progress::rate() const {
  const double elapsed = m_clock.monotonic_seconds() - m_start;
  return elapsed > 0 ? static_cast<double>(m_done) / elapsed : 0.0;
}

std::string
Progress::status_text() const {
  const double per_second = rate();
  std::string text =
      m_total > 0 ? fmt::format("{}/{} {}", m_done, m_total, m_unit) : fmt::format("{} {}", m_done, m_unit);
  if (m_total > 0) {
    text += fmt::format(" ({:.0f}%)",
                        100.0 * static_cast<double>(std::min(m_done, m_total)) / static_cast<double>(m_total));
  }
  text += fmt::format(", {:.3g} {}/s", per_second, m_unit);
  if (m_finished) {
    text += fmt::format(", {} elapsed", format_duration(m_clock.monotonic_seconds() - m_start));
  } else if (m_total > 0 && per_second > 0 && m_done < m_total) {
    text += fmt::format(", ETA {}", format_duration(static_cast<double>(m_total - m_done) / per_second));
  }
  if (!m_finished && !m_detail.empty())
    text += "; " + m_detail;
  return text;
}

void
Progress::maybe_report(bool force) {
  if (m_options.mode == ProgressMode::silent) {
    return;
  }
  const double now = m_clock.monotonic_seconds();
  const double interval = m_options.mode == ProgressMode::bar ? m_options.redraw_interval_s : m_options.line_interval_s;
  if (!force && now - m_last_report < interval) {
    return;
  }
  m_last_report = now;
  if (m_options.mode == ProgressMode::lines) {
    m_out << m_label << ": " << status_text() << '\n' << std::flush;
    return;
  }
  std::string bar;
  if (m_total > 0) {
    const auto filled =
        static_cast<std::size_t>(static_cast<double>(m_options.bar_width) *
                                 static_cast<double>(std::min(m_done, m_total)) / static_cast<double>(m_total));
    bar = "[" + std::string(filled, '#') + std::string(m_options.bar_width - filled, '.') + "] ";
  }
  // \r and erase-to-end-of-line redraw the bar in place.
  m_out << '\r' << m_label << ' ' << bar << status_text() << "\x1b[K" << std::flush;
  m_drawn = true;
}

void
Progress::finish() {
  if (m_finished) {
    return;
  }
  m_finished = true;
  maybe_report(true);
  if (m_drawn) {
    m_out << '\n' << std::flush;
  }
}

} // namespace optkit
