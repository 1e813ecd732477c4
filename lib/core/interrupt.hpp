// Ctrl-C and SIGTERM become a flag that long-running loops poll, so they can stop their child
// processes and record the run as interrupted instead of dying mid-write. A second signal while
// the first is handled cuts grace periods short; a third restores the default action (force quit).
#pragma once

namespace optkit {

// Installs handlers for SIGINT and SIGTERM (idempotent).
void install_interrupt_handlers();
// True once SIGINT or SIGTERM arrived.
bool interrupt_requested();
// How many interrupt signals arrived (a second Ctrl-C asks to skip the grace period).
int interrupt_count();
// The last interrupt signal number, 0 when none.
int interrupt_signal();
// Forgets earlier interrupts (tests).
void reset_interrupt();
// Throws Interrupted when an interrupt arrived: the safe point of a long loop.
void throw_if_interrupted();
// Marks an interrupt as if a signal had arrived (tests, and callers that cancel).
void request_interrupt(int signal);

} // namespace optkit
