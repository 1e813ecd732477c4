#include "shared_options.hpp"

#include "core/byte_size.hpp"

#include "number_checks.hpp"

#include <cstdlib>

namespace optkit::cmd {

CLI::Option*
add_output_option(CLI::App& app, std::string& target, const std::string& what, const std::string& old_spelling) {
  return app.add_option(old_spelling.empty() ? "-o,--output" : "-o,--output," + old_spelling, target, what);
}

CLI::Option*
add_threads_option(CLI::App& app, unsigned& target) {
  return app
      .add_option("--threads", target,
                  "CPU threads each worker child uses (0: the CPUs optkit may use — affinity mask, cgroup quota — "
                  "shared among the children running at once)")
      ->capture_default_str();
}

CLI::Option*
add_activations_option(CLI::App& app, std::string& target) {
  return app
      .add_option("--activations", target,
                  "how BF16 weights multiply activations on the CPU: fp32 (the default: exact to fp32 rounding) or "
                  "bf16 (rounded to BF16 first, as llama.cpp does: about twice the prefill speed on AVX512_BF16 "
                  "CPUs); default: the config file's `activations`")
      ->check(CLI::IsMember({"fp32", "bf16"}));
}

runtime::ActivationPrecision
resolve_activations(const std::string& flag_value, const Settings& settings) {
  return flag_value.empty() ? runtime::parse_activation_precision(settings.activations, "config activations")
                            : runtime::parse_activation_precision(flag_value);
}

CLI::Option*
add_no_mmap_flag(CLI::App& app, bool& target) {
  return app.add_flag("--no-mmap", target,
                      "read the weights into this process's memory (huge pages) instead of mapping the safetensors "
                      "files: faster decode and prefill, but no sharing of the pages with other processes");
}

CLI::Option*
add_max_memory_option(CLI::App& app, std::string& target, const std::string& what) {
  return app.add_option("--max-memory", target,
                        "peak resident memory to keep, e.g. 8GiB: " + what +
                            "; refused at start when it cannot be kept");
}

std::optional<std::uint64_t>
parse_max_memory(const std::string& flag_value) {
  if (flag_value.empty())
    return std::nullopt;
  return parse_byte_size(flag_value, "--max-memory");
}

CLI::Option*
add_timeout_option(CLI::App& app, double& target) {
  return app
      .add_option("--timeout", target,
                  "seconds each worker child may run before it is stopped (SIGTERM, then SIGKILL; 0: no limit)")
      ->check(non_negative_number())
      ->capture_default_str();
}

CLI::Option*
add_seed_option(CLI::App& app, std::uint64_t& target, const std::string& what) {
  return app.add_option("--seed", target, what)->capture_default_str();
}

CLI::Option*
add_format_option(CLI::App& app, std::string& target, const std::string& default_value) {
  target = default_value;
  return app.add_option("--format", target, "output format")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
}

std::string
api_key_or_environment(const std::string& flag_value) {
  if (!flag_value.empty())
    return flag_value;
  const char* key = std::getenv("OPENAI_API_KEY");
  return key != nullptr ? key : "";
}

} // namespace optkit::cmd
