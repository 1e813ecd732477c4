#include "selftest/test_tasks.hpp"

#include "archive/run_archive.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>
#include <unistd.h>

namespace optkit::selftest {
namespace {

[[noreturn]] void
sleep_forever() {
  while (true) {
    ::pause();
  }
}

void
write_pid_file(const std::filesystem::path& dir, pid_t pid) {
  std::ofstream(dir / std::to_string(pid)) << pid << '\n';
}

// Tells a waiting test that this child is set up (signal handlers installed, children started):
// the file appears complete, by rename, only after everything before this call has happened.
void
report_ready(const proc::WorkerSpec& spec) {
  const std::string ready = spec.payload.value("ready_file", "");
  if (ready.empty()) {
    return;
  }
  const std::string partial = ready + ".partial";
  std::ofstream(partial) << ::getpid() << '\n';
  std::filesystem::rename(partial, ready);
}

// Holds a slot until `expect` children hold one at the same time (each marks itself with a file in
// `dir`), and reports the most it saw: a direct measure of the pool's concurrency, with no clock.
nlohmann::json
rendezvous(const proc::WorkerSpec& spec) {
  const std::filesystem::path dir = spec.payload.at("dir").get<std::string>();
  const std::size_t expect = spec.payload.value("expect", std::size_t{2});
  const auto mine = dir / std::to_string(::getpid());
  std::ofstream(mine) << ::getpid() << '\n';
  const auto present = [&] {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), {}));
  };
  std::size_t most = present();
  // The bound only keeps a broken pool from hanging the suite; the test then sees too few.
  for (int waited_ms = 0; most < expect && waited_ms < 300'000; waited_ms += 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    most = std::max(most, present());
  }
  // Everyone expected is here; look a little longer for an extra one the pool should not have started.
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    most = std::max(most, present());
  }
  std::filesystem::remove(mine);
  return {{"most_at_once", most}};
}

nlohmann::json
spawn_tree(const proc::WorkerSpec& spec) {
  const std::filesystem::path pid_dir = spec.payload.at("pid_dir").get<std::string>();
  const int children = spec.payload.value("children", 2);
  write_pid_file(pid_dir, ::getpid());
  for (int i = 0; i < children; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::signal(SIGTERM, SIG_IGN); // only SIGKILL of the whole group can stop these
      sleep_forever();
    }
    write_pid_file(pid_dir, pid);
  }
  std::cout << "spawned " << children << " grandchildren" << std::endl;
  report_ready(spec);
  sleep_forever();
}

// Writes `trials` trials with `metrics` metrics each, one transaction per trial, and prints the
// id of every committed trial so a test can check that none of them is lost after a SIGKILL.
nlohmann::json
write_archive(const proc::WorkerSpec& spec) {
  archive::RunArchive archive(spec.archive);
  const int trials = spec.payload.value("trials", 500);
  const int metrics = spec.payload.value("metrics", 3);
  const std::int64_t base_index = spec.payload.value("base_index", std::int64_t{0});
  for (int i = 0; i < trials; ++i) {
    std::int64_t trial_id = 0;
    archive.transaction([&] {
      trial_id = archive.begin_trial(spec.run_id, base_index + i, 1, {{"writer", ::getpid()}, {"i", i}});
      for (int m = 0; m < metrics; ++m) {
        archive.add_metric(spec.run_id, trial_id, {fmt::format("metric_{}", m), i * 0.5 + m, "unit", i});
      }
      archive.finish_trial(trial_id, {archive::TrialStatus::succeeded, 0, std::nullopt, {{"i", i}}, ""});
    });
    std::cout << "committed " << trial_id << '\n' << std::flush;
  }
  return {{"trials", trials}};
}

} // namespace

nlohmann::json
run_test_task(const proc::WorkerSpec& spec) {
  const std::string task = spec.payload.value("task", "");
  if (task == "echo") {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return {{"value", spec.payload.value("value", nlohmann::json(nullptr))},
            {"pid", ::getpid()},
            {"attempt", spec.attempt},
            {"gpu", spec.gpu ? nlohmann::json(*spec.gpu) : nlohmann::json(nullptr)},
            {"cuda_visible_devices", visible ? nlohmann::json(visible) : nlohmann::json(nullptr)}};
  }
  if (task == "sleep") {
    std::this_thread::sleep_for(std::chrono::duration<double>(spec.payload.value("seconds", 1.0)));
    return {{"slept", true}};
  }
  if (task == "hang") {
    std::signal(SIGTERM, SIG_IGN);
    std::cout << "hanging, ignoring SIGTERM" << std::endl;
    report_ready(spec);
    sleep_forever();
  }
  if (task == "crash") {
    std::cerr << "about to crash with signal " << spec.payload.value("signal", SIGABRT) << std::endl;
    std::signal(spec.payload.value("signal", SIGABRT), SIG_DFL);
    std::raise(spec.payload.value("signal", SIGABRT));
    sleep_forever();
  }
  if (task == "exit") {
    std::cerr << "exiting with code " << spec.payload.value("code", 1) << " on purpose" << std::endl;
    std::exit(spec.payload.value("code", 1));
  }
  if (task == "flaky") {
    if (spec.attempt < spec.payload.value("succeed_on_attempt", 2)) {
      std::cerr << "attempt " << spec.attempt << " fails on purpose" << std::endl;
      std::signal(SIGABRT, SIG_DFL);
      std::raise(SIGABRT);
    }
    return {{"attempt", spec.attempt}};
  }
  if (task == "rendezvous") {
    return rendezvous(spec);
  }
  if (task == "spawn-tree") {
    return spawn_tree(spec);
  }
  if (task == "write-archive") {
    return write_archive(spec);
  }
  throw InputError(fmt::format("internal-test: unknown task '{}'", task));
}

std::vector<proc::WorkerTask>
read_test_tasks(const std::filesystem::path& file) {
  std::ifstream in(file);
  const nlohmann::json doc = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
  if (!doc.is_array()) {
    throw InputError(fmt::format("--tasks {}: expected a JSON array of tasks", file.string()));
  }
  std::vector<proc::WorkerTask> tasks;
  for (const auto& t : doc) {
    proc::WorkerTask task;
    task.command = {"internal-test"};
    task.payload = t.at("payload");
    task.params = {{"task", task.payload.value("task", "")}};
    task.timeout_s = t.value("timeout_s", 0.0);
    task.grace_s = t.value("grace_s", 2.0);
    task.retry.max_attempts = t.value("max_attempts", 1);
    task.retry.retry_on_signal = t.value("retry_on_signal", false);
    task.retry.retry_on_timeout = t.value("retry_on_timeout", false);
    task.retry.retry_exit_codes = t.value("retry_exit_codes", std::vector<int>{});
    task.retry.backoff_initial_s = t.value("backoff_s", 0.05);
    tasks.push_back(std::move(task));
  }
  return tasks;
}

} // namespace optkit::selftest
