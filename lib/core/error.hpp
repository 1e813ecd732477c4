// The one exception hierarchy of optkit. Library code throws these; cmd/main.cpp catches once and
// maps the category to the documented exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace optkit {

// Exit codes, exactly as optkit(1) documents them (EXIT STATUS).
enum class ExitCode : int {
  ok = 0,
  goal_not_met = 1,  // ran, but the goal was not met (quality gate failed, SLO infeasible)
  bad_input = 2,     // usage or bad input: the message names the file, flag or value and the fix
  runtime = 3,       // a worker crashed past its retries, a server did not come up, I/O failed
  interrupted = 130, // SIGINT / SIGTERM
};

class Error : public std::runtime_error {
public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), m_code(code) {}
  ExitCode code() const noexcept { return m_code; }

private:
  ExitCode m_code;
};

// Usage or bad input (exit 2).
class InputError : public Error {
public:
  explicit InputError(const std::string& message) : Error(ExitCode::bad_input, message) {}
};

// Something failed while running (exit 3).
class RuntimeFailure : public Error {
public:
  explicit RuntimeFailure(const std::string& message) : Error(ExitCode::runtime, message) {}
};

// The run completed but its goal was not met (exit 1).
class GoalNotMet : public Error {
public:
  explicit GoalNotMet(const std::string& message) : Error(ExitCode::goal_not_met, message) {}
};

// The user asked us to stop (exit 130).
class Interrupted : public Error {
public:
  explicit Interrupted(const std::string& message) : Error(ExitCode::interrupted, message) {}
};

// errno as text, for messages that name the file that failed.
std::string errno_text(int err);

} // namespace optkit
