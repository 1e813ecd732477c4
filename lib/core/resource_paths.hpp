// Where optkit's bundled data (recipes/, profiles/) lives: found both from an install
// (<prefix>/bin/optkit → <prefix>/share/optkit) and from a build inside the source tree.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace optkit {

struct DataDirectory {
  std::filesystem::path path;
  std::string origin; // "OPTKIT_DATA_DIR", "install", "source tree"
};

// The absolute path of the running executable (from /proc/self/exe).
std::filesystem::path executable_path();

// Candidate data directories in search order: $OPTKIT_DATA_DIR, <exe>/../share/optkit,
// the source tree the binary sits in (<exe>/..), and the source tree it was configured from.
std::vector<DataDirectory> data_directory_candidates();

// The first candidate holding both recipes/ and profiles/; InputError listing where it looked
// (and that OPTKIT_DATA_DIR overrides) when none does, or when OPTKIT_DATA_DIR is set but wrong.
DataDirectory find_data_directory();

// The names (stems) of the *.yaml files in a bundled folder (e.g. profiles/suites), sorted; none
// when the folder is absent.
std::vector<std::string> bundled_yaml_names(const std::filesystem::path& folder);

// A flag's value that is either a path to a YAML file (it holds a '/' or ends .yaml/.yml) or the
// name of one bundled in `folder`: the file to read. InputError naming `flag` when the path does
// not exist, or when no bundled `what` has that name (the closest name suggested, all listed).
std::filesystem::path resolve_bundled_yaml(const std::string& name_or_path, const std::filesystem::path& folder,
                                           const std::string& flag, const std::string& what);

} // namespace optkit
