#include "core/resource_paths.hpp"

#include "core/build_config.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>

namespace optkit {

std::filesystem::path
executable_path() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : path;
}

std::vector<DataDirectory>
data_directory_candidates() {
  std::vector<DataDirectory> candidates;
  if (const char* env = std::getenv("OPTKIT_DATA_DIR"); env && *env) {
    candidates.push_back({env, "OPTKIT_DATA_DIR"});
  }
  const auto exe = executable_path();
  if (!exe.empty()) {
    const auto bin_dir = exe.parent_path();
    candidates.push_back({bin_dir.parent_path() / OPTKIT_INSTALL_DATADIR / "optkit", "install"});
    candidates.push_back({bin_dir.parent_path(), "source tree"});
  }
  candidates.push_back({OPTKIT_SOURCE_DIR, "source tree"});
  return candidates;
}

DataDirectory
find_data_directory() {
  std::vector<std::string> looked;
  for (const auto& candidate : data_directory_candidates()) {
    std::error_code ec;
    if (std::filesystem::is_directory(candidate.path / "recipes", ec) &&
        std::filesystem::is_directory(candidate.path / "profiles", ec)) {
      return {std::filesystem::weakly_canonical(candidate.path, ec), candidate.origin};
    }
    if (candidate.origin == "OPTKIT_DATA_DIR") {
      // Set on purpose, so a wrong value is an error rather than a silent fall-back.
      throw InputError(fmt::format("OPTKIT_DATA_DIR={} does not hold recipes/ and profiles/; "
                                   "set OPTKIT_DATA_DIR to the directory that holds them, or unset it",
                                   candidate.path.string()));
    }
    looked.push_back(candidate.path.string());
  }
  throw InputError(fmt::format("cannot find optkit's recipes/ and profiles/ (looked in {}); "
                               "set OPTKIT_DATA_DIR to the directory that holds them",
                               join(looked, ", ")));
}

std::vector<std::string>
bundled_yaml_names(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error))
    if (entry.path().extension() == ".yaml")
      names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::filesystem::path
resolve_bundled_yaml(const std::string& name_or_path, const std::filesystem::path& folder, const std::string& flag,
                     const std::string& what) {
  const std::filesystem::path path(name_or_path);
  std::error_code ec; // a name the filesystem rejects (too long, say) is simply not found
  if (name_or_path.find('/') != std::string::npos || path.extension() == ".yaml" || path.extension() == ".yml") {
    if (!std::filesystem::is_regular_file(path, ec))
      throw InputError(fmt::format("{} {}: no such file", flag, name_or_path));
    return path;
  }
  const auto file = folder / (name_or_path + ".yaml");
  if (!std::filesystem::is_regular_file(file, ec)) {
    const auto names = bundled_yaml_names(folder);
    const auto closest = closest_match(name_or_path, names);
    throw InputError(fmt::format(
        "{} {}: no bundled {} of that name{} (bundled: {}; or give a path to a YAML file)", flag, name_or_path, what,
        closest ? fmt::format(" (did you mean '{}'?)", *closest) : "", fmt::join(names, ", ")));
  }
  return file;
}

} // namespace optkit
