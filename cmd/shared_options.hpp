// The flags several commands share, defined once so each has one spelling and one meaning
// everywhere (llama.cpp's habit of one option table per tool).
#pragma once

#include "core/settings.hpp"
#include "runtime/activation_precision.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace optkit::cmd {

// -o/--output PATH: where the command writes its result; `what` says what is written there.
// `old_spelling` ("--out") keeps a command's earlier name for the flag working.
CLI::Option* add_output_option(CLI::App& app, std::string& target, const std::string& what,
                               const std::string& old_spelling = "");
// --threads N: CPU threads each worker child uses; 0 divides the hardware threads among the
// children that run at once.
CLI::Option* add_threads_option(CLI::App& app, unsigned& target);
// --activations fp32|bf16: how BF16 weights multiply activations on the CPU
// (runtime/activation_precision.hpp). Left empty when not given: resolve_activations then takes
// the config file's `activations`.
CLI::Option* add_activations_option(CLI::App& app, std::string& target);
// The --activations value, or the settings' when the flag was not given; an InputError naming the
// flag when it is neither fp32 nor bf16.
runtime::ActivationPrecision resolve_activations(const std::string& flag_value, const Settings& settings);
// --no-mmap: read the model's weights into memory (transparent huge pages) instead of mapping
// the safetensors files (model/safetensors.hpp).
CLI::Option* add_no_mmap_flag(CLI::App& app, bool& target);
// --max-memory BYTES: the peak resident memory the command keeps, or refuses at start naming
// what it needs (model/memory_needs.hpp); `what` says how this command keeps it.
CLI::Option* add_max_memory_option(CLI::App& app, std::string& target, const std::string& what);
// The --max-memory value in bytes; none when the flag was not given.
std::optional<std::uint64_t> parse_max_memory(const std::string& flag_value);
// --timeout SECONDS: how long each worker child attempt may run before it is stopped (SIGTERM, a
// grace period, SIGKILL); 0 means no limit. `target` holds the command's default.
CLI::Option* add_timeout_option(CLI::App& app, double& target);
// --seed N: the random seed of the command's draws; the same seed repeats the same run.
CLI::Option* add_seed_option(CLI::App& app, std::uint64_t& target, const std::string& what);
// --format table|json|csv bound to `target`.
// --api-key's value, or $OPENAI_API_KEY when the flag was not given (the OpenAI clients' convention).
std::string api_key_or_environment(const std::string& flag_value);

CLI::Option* add_format_option(CLI::App& app, std::string& target, const std::string& default_value = "table");

} // namespace optkit::cmd
