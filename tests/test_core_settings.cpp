#include "core/settings.hpp"

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <map>

using namespace optkit;

namespace {

EnvLookup
fake_env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto found = vars.find(name);
    return found == vars.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
}

} // namespace

TEST_CASE("defaults follow XDG and HOME") {
  const Settings s = resolve_settings({}, fake_env({{"HOME", "/home/u"}}));
  CHECK(s.archive == "/home/u/.local/share/optkit/archive.db");
  CHECK(s.archive_origin == "default");
  CHECK(s.config_file.empty());
  const Settings x = resolve_settings({}, fake_env({{"HOME", "/home/u"}, {"XDG_DATA_HOME", "/data"}}));
  CHECK(x.archive == "/data/optkit/archive.db");
}

TEST_CASE("precedence: config file < environment < command line") {
  test::ScratchDir dir;
  test::write_text(dir / "config.yaml", "archive: runs.db\nlog_format: json\ncolor: false\n"
                                        "workers:\n  jobs: 4\n  timeout_s: 60\n  gpus: [0, 2]\n");
  auto env = std::map<std::string, std::string>{{"HOME", "/home/u"}, {"OPTKIT_CONFIG", (dir / "config.yaml").string()}};

  Settings s = resolve_settings({}, fake_env(env));
  CHECK(s.archive == dir / "runs.db"); // relative to the config file
  CHECK(s.archive_origin == "config");
  CHECK(s.log_format == log::Format::json);
  CHECK_FALSE(s.color);
  CHECK(s.workers.jobs == 4);
  CHECK(s.workers.timeout_s == 60);
  CHECK(s.workers.gpus == std::vector<int>{0, 2});
  CHECK(s.workers.max_attempts == 2); // untouched default

  env["OPTKIT_ARCHIVE"] = "/env/a.db";
  s = resolve_settings({}, fake_env(env));
  CHECK(s.archive == "/env/a.db");
  CHECK(s.archive_origin == "OPTKIT_ARCHIVE");

  SettingsOverrides cli;
  cli.archive = "/cli/b.db";
  cli.log_format = log::Format::text;
  s = resolve_settings(cli, fake_env(env));
  CHECK(s.archive == "/cli/b.db");
  CHECK(s.archive_origin == "--archive");
  CHECK(s.log_format == log::Format::text);
}

TEST_CASE("the standard config location is read when it exists; NO_COLOR turns colour off") {
  test::ScratchDir dir;
  std::filesystem::create_directories(dir / "optkit");
  test::write_text(dir / "optkit" / "config.yaml", "workers:\n  jobs: 3\n");
  const Settings s =
      resolve_settings({}, fake_env({{"HOME", "/home/u"}, {"XDG_CONFIG_HOME", dir.path().string()}, {"NO_COLOR", ""}}));
  CHECK(s.workers.jobs == 3);
  CHECK(s.config_file == dir / "optkit" / "config.yaml");
  CHECK_FALSE(s.color);
}

TEST_CASE("a bad config file is an input error located in the file") {
  test::ScratchDir dir;
  test::write_text(dir / "c.yaml", "workers:\n  jbos: 2\n");
  SettingsOverrides cli;
  cli.config_file = dir / "c.yaml";
  CHECK_THROWS_WITH_AS(
      resolve_settings(cli, fake_env({{"HOME", "/h"}})),
      ((dir / "c.yaml").string() + ":2:3: unknown key 'workers.jbos'; did you mean 'workers.jobs'?").c_str(),
      InputError);
  test::write_text(dir / "c.yaml", "workers:\n  jobs: 0\n");
  CHECK_THROWS_WITH(resolve_settings(cli, fake_env({{"HOME", "/h"}})), doctest::Contains("it must be in [1, 1024]"));
}
