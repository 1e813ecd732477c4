// Runtime adapter folders: confined to the adapter root (links and .. included), regular files
// under the size cap only, one answer for every refusal; adapter names checked.
#include "serve/adapter_loading.hpp"
#include "serve/openai_protocol.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

using namespace optkit;
using namespace optkit::serve;

namespace {

// The message of the BadRequest `lora_path` gets, or "(accepted)".
std::string
adapter_folder_answer(const AdapterLoading& loading, const std::string& lora_path) {
  try {
    confined_adapter_folder(loading, lora_path);
    return "(accepted)";
  } catch (const BadRequest& e) {
    CHECK(e.param == "lora_path");
    return e.what();
  }
}

} // namespace

TEST_CASE("a folder under the root is accepted; anything else gets the one refusal") {
  test::ScratchDir scratch;
  const auto root = scratch.path() / "adapters";
  std::filesystem::create_directories(root / "good" / "notes");
  test::write_text(root / "good" / "delta_config.json", "{}");
  std::filesystem::create_directories(scratch.path() / "elsewhere");
  test::write_text(scratch.path() / "elsewhere" / "delta_config.json", "{}");
  std::filesystem::create_directory_symlink(scratch.path() / "elsewhere", root / "link_out");
  std::filesystem::create_directory_symlink(root / "good", root / "link_in");
  std::filesystem::create_directories(root / "zero");
  std::filesystem::create_symlink("/dev/zero", root / "zero" / "delta.safetensors");
  std::filesystem::create_directories(root / "fifo");
  REQUIRE(::mkfifo((root / "fifo" / "delta_config.json").c_str(), 0600) == 0);
  std::filesystem::create_directories(root / "big");
  test::write_text(root / "big" / "delta.safetensors", std::string(2000, 'x'));

  AdapterLoading loading{.enabled = true, .root = root, .max_file_bytes = 1000};
  CHECK(confined_adapter_folder(loading, "good") == std::filesystem::canonical(root / "good"));
  CHECK(confined_adapter_folder(loading, (root / "good").string()) == std::filesystem::canonical(root / "good"));
  CHECK(confined_adapter_folder(loading, "link_in") == std::filesystem::canonical(root / "good"));
  for (const std::string& path :
       std::vector<std::string>{"nowhere", "../elsewhere", (scratch.path() / "elsewhere").string(), "link_out", "/etc",
                                "zero", "fifo", "big", ".", "", "good/delta_config.json"}) {
    CAPTURE(path);
    CHECK(adapter_folder_answer(loading, path) == "lora_path '" + path + "' is not an adapter under the adapter root");
  }
  loading.root = scratch.path() / "no-such-root";
  CHECK(adapter_folder_answer(loading, "good") != "(accepted)");
}

TEST_CASE("adapter names: 1 to max_name_bytes printable characters") {
  const AdapterLoading loading{.max_name_bytes = 8};
  CHECK_NOTHROW(check_adapter_name(loading, "sql-lora"));
  for (const std::string& name :
       std::vector<std::string>{"", "123456789", "a b", "a\"b", "a\\b", "caf\xc3\xa9", std::string("a\0b", 3)}) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(check_adapter_name(loading, name), doctest::Contains("'lora_name' must be 1 to 8"),
                         BadRequest);
  }
}
