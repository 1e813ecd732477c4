// optkit internal-test — hidden; drives real worker children for the test suite.
#include "app_context.hpp"

#include "core/error.hpp"
#include "selftest/test_tasks.hpp"

#include <fmt/format.h>

namespace optkit::cmd {

void
register_internal_test(CLI::App& app, CommandRegistry& commands) {
  struct Flags {
    std::string tasks;
    int jobs = 0;
    std::vector<int> gpus;
    std::string worker;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* test = app.add_subcommand("internal-test", "internal: worker-pool test driver")->group("");
  test->add_option("--tasks", flags->tasks, "JSON array of test tasks");
  test->add_option("--jobs", flags->jobs, "concurrent children (default: config workers.jobs)");
  test->add_option("--gpus", flags->gpus, "GPU ids, one per concurrent child")->delimiter(',');
  test->add_option("--worker", flags->worker, "run as a worker child");
  commands.add({"internal-test", test,
                [flags](AppContext& ctx) {
                  if (!flags->worker.empty()) {
                    const auto spec = proc::read_worker_spec(flags->worker);
                    proc::write_worker_result(spec, selftest::run_test_task(spec));
                    return;
                  }
                  if (flags->tasks.empty()) {
                    throw InputError("internal-test: --tasks FILE is required");
                  }
                  proc::PoolOptions pool = archive::pool_options(ctx.run_context(0), "internal-test");
                  pool.slots = flags->jobs > 0 ? flags->jobs : ctx.settings.workers.jobs;
                  pool.gpus = flags->gpus.empty() ? ctx.settings.workers.gpus : flags->gpus;
                  const auto outcomes = proc::WorkerPool(pool).run(selftest::read_test_tasks(flags->tasks));
                  nlohmann::json out = nlohmann::json::array();
                  std::size_t failed = 0;
                  for (const auto& o : outcomes) {
                    failed += o.succeeded() ? 0u : 1u;
                    out.push_back({{"task", o.task_index},
                                   {"status", proc::to_string(o.status)},
                                   {"attempts", o.attempts},
                                   {"exit_code", o.exit_code ? nlohmann::json(*o.exit_code) : nlohmann::json()},
                                   {"signal", o.signal ? nlohmann::json(*o.signal) : nlohmann::json()},
                                   {"seconds", o.seconds},
                                   {"error", o.error},
                                   {"result", o.result}});
                  }
                  ctx.emit(out.dump(2) + "\n");
                  if (failed > 0) {
                    throw RuntimeFailure(fmt::format("{} of {} worker task(s) failed", failed, outcomes.size()));
                  }
                },
                true, &flags->worker});
}

} // namespace optkit::cmd
