// optkit runs list | show | export | compare | rm — reading and pruning the run archive.
#include "app_context.hpp"
#include "number_checks.hpp"

#include "archive/recorded_run.hpp"
#include "archive/run_report.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

namespace optkit::cmd {
namespace {

struct RunsFlags {
  std::string command;
  std::string status;
  std::string since;
  std::int64_t limit = 0;
  std::string format;
  std::string output;
  std::vector<std::string> refs;
};

archive::RunFilter
make_filter(const RunsFlags& f) {
  archive::RunFilter filter;
  if (!f.command.empty()) {
    filter.command = f.command;
  }
  if (!f.status.empty()) {
    filter.status = f.status;
  }
  if (!f.since.empty()) {
    filter.since = parse_time_point(f.since, SystemClock::instance().wall_ms());
    if (!filter.since) {
      throw InputError(fmt::format("--since {}: expected a date (2026-11-01), a UTC timestamp "
                                   "(2026-11-01T12:00:00Z) or an age (90m, 12h, 7d, 2w)",
                                   f.since));
    }
  }
  if (f.limit > 0) {
    filter.limit = f.limit;
  }
  return filter;
}

} // namespace

void
register_runs(CLI::App& app, CommandRegistry& commands) {
  auto flags = std::make_shared<RunsFlags>();
  CLI::App* runs = app.add_subcommand("runs", "List, show, export, compare and remove archived runs");
  runs->require_subcommand(1);

  CLI::App* list = runs->add_subcommand("list", "List runs, newest first");
  list->add_option("--command", flags->command, "only runs of this command (a trailing * matches a prefix)");
  list->add_option("--status", flags->status, "only runs with this status")
      ->check(CLI::IsMember(archive::run_status_names()));
  list->add_option("--since", flags->since, "only runs started since a date, UTC timestamp or age (7d, 12h)");
  list->add_option("--limit", flags->limit, "at most this many runs")->check(positive_number());
  add_format_option(*list, flags->format);
  commands.add({"runs list", list,
                [flags](AppContext& ctx) {
                  const auto runs_found = ctx.archive().list_runs(make_filter(*flags));
                  ctx.emit(
                      archive::runs_table(runs_found).render(parse_output_format(flags->format), ctx.color_stdout()));
                },
                false});

  CLI::App* show = runs->add_subcommand("show", "Show one run: trials, metrics, artifacts, events");
  show->add_option("run", flags->refs, "run id or 'last'")->required()->expected(1);
  add_format_option(*show, flags->format);
  commands.add({"runs show", show,
                [flags](AppContext& ctx) {
                  const auto detail = ctx.archive().load_run(ctx.archive().resolve_run(flags->refs.front()));
                  switch (parse_output_format(flags->format)) {
                  case OutputFormat::json:
                    ctx.emit(archive::run_detail_json(detail).dump(2) + "\n");
                    break;
                  case OutputFormat::csv:
                    ctx.emit(archive::metrics_table(detail).render_csv());
                    break;
                  case OutputFormat::table:
                    ctx.emit(archive::run_detail_text(detail, ctx.color_stdout()));
                    break;
                  }
                },
                false});

  CLI::App* exporter = runs->add_subcommand("export", "Export one run for scripts and notebooks");
  exporter->add_option("run", flags->refs, "run id or 'last'")->required()->expected(1);
  exporter->add_option("--format", flags->format, "json: the whole run; csv: one row per metric")
      ->check(CLI::IsMember({"json", "csv"}))
      ->default_str("json");
  add_output_option(*exporter, flags->output, "write to this file (atomically) instead of stdout");
  commands.add({"runs export", exporter,
                [flags](AppContext& ctx) {
                  const auto detail = ctx.archive().load_run(ctx.archive().resolve_run(flags->refs.front()));
                  ctx.emit(flags->format == "csv" ? archive::metrics_table(detail).render_csv()
                                                  : archive::run_detail_json(detail).dump(2) + "\n",
                           flags->output);
                },
                false});

  CLI::App* compare = runs->add_subcommand("compare", "Compare two runs: config differences and metrics");
  compare->add_option("runs", flags->refs, "two run ids (or 'last')")->required()->expected(2);
  add_format_option(*compare, flags->format);
  commands.add({"runs compare", compare,
                [flags](AppContext& ctx) {
                  auto& archive = ctx.archive();
                  const auto a = archive.load_run(archive.resolve_run(flags->refs[0]));
                  const auto b = archive.load_run(archive.resolve_run(flags->refs[1]));
                  ctx.emit(archive::compare_runs(a, b).render(parse_output_format(flags->format), ctx.color_stdout()));
                },
                false});

  CLI::App* rm = runs->add_subcommand("rm", "Remove runs and the logs optkit wrote for them");
  rm->add_option("runs", flags->refs, "run ids (or 'last')")->required()->expected(1, 1 << 20);
  commands.add({"runs rm", rm,
                [flags](AppContext& ctx) {
                  auto& archive = ctx.archive();
                  std::vector<std::int64_t> ids;
                  for (const auto& ref : flags->refs) {
                    ids.push_back(archive.resolve_run(ref)); // validate all before removing any
                  }
                  for (const auto id : ids) {
                    const auto files = archive::remove_run_with_files(archive, id);
                    ctx.emit(fmt::format("removed run {} ({} files)\n", id, files));
                  }
                },
                false});
}

} // namespace optkit::cmd
