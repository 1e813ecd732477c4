// optkit's entry point: global flags, subcommand registration, one place that catches errors and
// maps them to the documented exit codes, and the run record around every recorded command.
#include "app_context.hpp"

#include "archive/recorded_run.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"

#include <fmt/format.h>

#include <iostream>
#include <unistd.h>

namespace {

using namespace optkit;

void
add_global_flags(CLI::App& app, cmd::GlobalFlags& flags) {
  app.add_option("--archive", flags.archive,
                 "run archive (SQLite); env OPTKIT_ARCHIVE; default ~/.local/share/optkit/archive.db")
      ->group("Global");
  app.add_option("--config", flags.config, "config file; env OPTKIT_CONFIG; default ~/.config/optkit/config.yaml")
      ->group("Global");
  app.add_flag("-v,--verbose", flags.verbose, "more log output (repeat for more)")->group("Global");
  app.add_flag("-q,--quiet", flags.quiet, "errors only; no progress output")->group("Global");
  app.add_option("--log-format", flags.log_format, "log lines as text or json (on stderr)")
      ->check(CLI::IsMember({"text", "json"}))
      ->group("Global");
  app.add_flag("--no-color", flags.no_color, "no colour in logs and tables (also env NO_COLOR)")->group("Global");
}

log::Options
log_options(const cmd::GlobalFlags& flags, log::Format format, bool color) {
  log::Options options;
  options.format = format;
  options.color = color;
  options.level = flags.quiet ? log::Level::error : flags.verbose > 0 ? log::Level::debug : log::Level::info;
  return options;
}

int
run_command(const cmd::Command& command, cmd::AppContext& ctx) {
  const bool worker = command.worker_spec && !command.worker_spec->empty();
  if (!worker) {
    // A parent stops its workers and records the interruption; a worker keeps the default
    // actions so SIGTERM from its parent's timeout ends it at once.
    install_interrupt_handlers();
  }
  if (!command.records_run || worker) {
    command.run(ctx);
    return 0;
  }
  archive::NewRun run;
  run.command = command.name;
  run.argv = ctx.argv;
  run.config = {{"options", cmd::resolved_options(command.app)}, {"settings", settings_json(ctx.settings)}};
  archive::record_run(ctx.archive(), run, [&](std::int64_t run_id) {
    ctx.run_id = run_id;
    log::debug("recording run {} in {}", run_id, ctx.settings.archive.string());
    command.run(ctx);
  });
  return 0;
}

} // namespace

int
main(int argc, char** argv) {
  cmd::AppContext ctx;
  ctx.argv.assign(argv, argv + argc);

  CLI::App app{"optkit — from a checkpoint on disk to a deployment that meets its SLOs at the lowest GPU cost"};
  app.name("optkit");
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  app.footer("Exit codes: 0 done, 1 goal not met, 2 bad input, 3 runtime failure, 130 interrupted.\n"
             "See man optkit(1).");
  add_global_flags(app, ctx.flags);

  cmd::CommandRegistry commands;
  cmd::register_compress(app, commands);
  cmd::register_doctor(app, commands);
  cmd::register_eval(app, commands);
  cmd::register_plan(app, commands);
  cmd::register_runs(app, commands);
  cmd::register_serve_deltas(app, commands);
  cmd::register_bench(app, commands);
  cmd::register_tune(app, commands);
  cmd::register_flow(app, commands);
  cmd::register_internal_test(app, commands);

  // Logging as the flags ask, before anything can fail, so even a bad config file is reported in
  // the requested format.
  bool early_json = false;
  for (std::size_t i = 1; i < ctx.argv.size(); ++i) {
    early_json |= ctx.argv[i] == "--log-format=json" ||
                  (ctx.argv[i] == "--log-format" && i + 1 < ctx.argv.size() && ctx.argv[i + 1] == "json");
  }
  log::configure(log_options({}, early_json ? log::Format::json : log::Format::text, ::isatty(STDERR_FILENO)));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RequiredError& e) {
    if (argc == 1) {
      std::cout << app.help();
      return static_cast<int>(ExitCode::bad_input);
    }
    log::error("{}", cmd::missing_subcommand_message(app, e));
    return static_cast<int>(ExitCode::bad_input);
  } catch (const CLI::ParseError& e) {
    log::error("{}; run 'optkit --help' or 'optkit <command> --help'", e.what());
    return static_cast<int>(ExitCode::bad_input);
  }

  try {
    SettingsOverrides overrides;
    if (!ctx.flags.archive.empty()) {
      overrides.archive = ctx.flags.archive;
    }
    if (!ctx.flags.config.empty()) {
      overrides.config_file = ctx.flags.config;
    }
    if (!ctx.flags.log_format.empty()) {
      overrides.log_format = ctx.flags.log_format == "json" ? log::Format::json : log::Format::text;
    }
    overrides.no_color = ctx.flags.no_color;
    log::configure(log_options(ctx.flags, overrides.log_format.value_or(log::Format::text), !ctx.flags.no_color));
    ctx.settings = resolve_settings(overrides);
    log::configure(log_options(ctx.flags, ctx.settings.log_format, ctx.settings.color));
    ProgressOptions progress;
    progress.mode = choose_progress_mode(ctx.flags.quiet, ::isatty(STDERR_FILENO));
    ProgressOptions::set_defaults(progress);

    const cmd::Command* command = commands.selected();
    if (!command) {
      throw InputError("no command given; run 'optkit --help'");
    }
    return run_command(*command, ctx);
  } catch (const Error& e) {
    log::error("{}", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    log::error("internal error: {}; please report it with the command line that caused it", e.what());
    return static_cast<int>(ExitCode::runtime);
  }
}
