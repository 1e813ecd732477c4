#include "core/interrupt.hpp"

#include "core/error.hpp"

#include <atomic>
#include <csignal>

namespace optkit {
namespace {

std::atomic<int> g_count{0};
std::atomic<int> g_signal{0};

extern "C" void
on_interrupt(int signal) {
  // Only lock-free atomics here: this runs in signal context.
  g_signal.store(signal);
  if (g_count.fetch_add(1) >= 2) {
    // Third signal: whatever is stopping is stuck; give the user their terminal back.
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

} // namespace

void
install_interrupt_handlers() {
  struct sigaction action = {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool
interrupt_requested() {
  return g_count.load() > 0;
}

int
interrupt_count() {
  return g_count.load();
}

int
interrupt_signal() {
  return g_signal.load();
}

void
throw_if_interrupted() {
  if (interrupt_requested()) {
    throw Interrupted("interrupted by signal " + std::to_string(interrupt_signal()));
  }
}

void
reset_interrupt() {
  g_count.store(0);
  g_signal.store(0);
}

void
request_interrupt(int signal) {
  on_interrupt(signal);
}

} // namespace optkit
