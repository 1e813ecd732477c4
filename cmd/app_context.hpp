// What every subcommand gets: the global flags, the resolved settings, the archive (opened on
// first use) and the id of the run being recorded. Each cmd/<command>.cpp registers itself with
// one register_<command>() function that only wires flags to lib/.
#pragma once

#include "archive/run_context.hpp"
#include "core/settings.hpp"
#include "core/table.hpp"
#include "shared_options.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace optkit::cmd {

struct GlobalFlags {
  std::string archive;
  std::string config;
  int verbose = 0;
  bool quiet = false;
  std::string log_format;
  bool no_color = false;
};

// A command's result in each --format: `json` for json; `table` for table and csv; and, in the
// table format only, prose `before` and `after` the table (a summary line, a second table).
struct CommandResult {
  nlohmann::json json;
  Table table;
  std::string before, after;
};

class AppContext {
public:
  GlobalFlags flags;
  Settings settings;
  std::vector<std::string> argv;
  std::int64_t run_id = 0; // the run recorded for this invocation (0 when none)

  archive::RunArchive& archive();
  // What library entry points need to record this run and start its worker children, each
  // attempt limited to `timeout_s` (0: none).
  archive::RunContext run_context(double timeout_s);
  // Tables get colour only on a terminal and when settings allow it.
  bool color_stdout() const;
  // Flags a worker child needs so it logs and archives like its parent.
  std::vector<std::string> worker_global_args() const;
  // Prints a result to stdout, or writes it atomically to `output` when that is set.
  void emit(const std::string& text, const std::string& output = "") const;
  // Emits a JSON result, indented, with this run's id added (`run_id`) when the invocation
  // records a run.
  void emit_json(nlohmann::json result, const std::string& output = "") const;
  // Emits `result` as --format `format` asks (table|json|csv), to stdout or to `output`.
  void emit_result(const std::string& format, const CommandResult& result, const std::string& output = "") const;

private:
  std::unique_ptr<archive::RunArchive> m_archive;
};

struct Command {
  std::string name; // "doctor", "runs list", ...
  CLI::App* app = nullptr;
  std::function<void(AppContext&)> run;
  bool records_run = true;                  // archived as a run (not for `runs` itself)
  const std::string* worker_spec = nullptr; // set → this invocation is a worker child
};

class CommandRegistry {
public:
  void add(Command command) { m_commands.push_back(std::move(command)); }
  // The command the parsed command line selected (the deepest parsed subcommand).
  const Command* selected() const;

private:
  std::vector<Command> m_commands;
};

void register_runs(CLI::App& app, CommandRegistry& commands);
void register_doctor(CLI::App& app, CommandRegistry& commands);
void register_compress(CLI::App& app, CommandRegistry& commands);
void register_eval(CLI::App& app, CommandRegistry& commands);
void register_plan(CLI::App& app, CommandRegistry& commands);
void register_internal_test(CLI::App& app, CommandRegistry& commands);
void register_serve_deltas(CLI::App& app, CommandRegistry& commands);
void register_bench(CLI::App& app, CommandRegistry& commands);
void register_tune(CLI::App& app, CommandRegistry& commands);
void register_flow(CLI::App& app, CommandRegistry& commands);

// The options the selected command was given (or defaults to), for the run's archived config.
nlohmann::json resolved_options(const CLI::App* app);

// One line for a mistyped or missing subcommand, naming the choices at that level.
std::string missing_subcommand_message(const CLI::App& app, const CLI::RequiredError& error);

} // namespace optkit::cmd
