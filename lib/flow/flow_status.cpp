#include "flow/flow_status.hpp"

#include "flow/flow_run.hpp"
#include "flow/flow_stages.hpp"

#include <fstream>
#include <set>

namespace optkit::flow {

namespace fs = std::filesystem;

nlohmann::json
flow_status(const fs::path& output) {
  const FlowJob job = load_saved_job(output);
  nlohmann::json tasks = nlohmann::json::array();
  std::set<std::string> seen;
  int finished = 0;
  const fs::path work = output / "work";
  std::vector<fs::path> folders;
  if (fs::is_directory(work))
    for (const auto& e : fs::directory_iterator(work))
      if (e.is_directory())
        folders.push_back(e.path());
  std::sort(folders.begin(), folders.end());
  for (const auto& dir : folders) {
    std::ifstream in(dir / "result.json");
    const auto r = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
    if (r.is_object() && !r.is_discarded()) {
      ++finished;
      seen.insert(r.value("name", ""));
      tasks.push_back({{"task", r.value("name", "")},
                       {"state", "finished"},
                       {"exit_code", r.value("exit_code", 0)},
                       {"seconds", r.value("seconds", 0.0)},
                       {"attempts", r.value("attempts", 0)},
                       {"folder", dir.string()}});
    } else {
      tasks.push_back({{"task", dir.filename().string()}, {"state", "unfinished"}, {"folder", dir.string()}});
    }
  }
  // The first wave's tasks are known from the job alone; the ones with no folder yet have not started.
  std::vector<std::string> expected = {"baseline"};
  if (job.tune_sim.enabled)
    expected.push_back("tune-sim");
  for (const auto& recipe : job.compress.recipes)
    for (int t = 0; t < job.compress.trials; ++t) {
      expected.push_back(compress_name(recipe, t));
      expected.push_back(gate_name(recipe, t));
    }
  for (const auto& name : expected)
    if (!seen.count(name))
      tasks.push_back({{"task", name}, {"state", "not started"}});
  const bool packaged = fs::is_regular_file(output / "package" / "manifest.json");
  return {{"output", output.string()},
          {"job", job.name},
          {"finished_tasks", finished},
          {"packaged", packaged},
          {"package", packaged ? nlohmann::json((output / "package").string()) : nlohmann::json()},
          {"tasks", tasks}};
}

Table
status_table(const nlohmann::json& status) {
  Table table({"task", "state", "exit", "seconds", "attempts"});
  for (const auto& t : status.at("tasks"))
    table.add_row({t.at("task"), t.at("state"), t.value("exit_code", nlohmann::json()),
                   t.value("seconds", nlohmann::json()), t.value("attempts", nlohmann::json())});
  return table;
}

} // namespace optkit::flow
