#include "doctor/doctor.hpp"

#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "core/text.hpp"
#include "doctor/gpu_probe.hpp"
#include "doctor/model_check.hpp"
#include "proc/worker_pool.hpp"

#include <fmt/format.h>

namespace optkit::doctor {
namespace {

// YAML files under `dir`: the recipes or profiles optkit can load.
std::size_t
count_yaml_files(const std::filesystem::path& dir) {
  std::size_t count = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const auto ext = it->path().extension();
    count += it->is_regular_file() && (ext == ".yaml" || ext == ".yml") ? 1u : 0u;
  }
  return count;
}

Check
check_archive(archive::RunArchive& archive) {
  const std::string verdict = archive.integrity_check();
  return {"archive", verdict == "ok" ? CheckStatus::ok : CheckStatus::fail,
          fmt::format("{} (schema v{}, {} runs, integrity {})", archive.path().string(), archive.schema_version(),
                      archive.count("runs"), verdict)};
}

Check
check_data() {
  try {
    const DataDirectory data = find_data_directory();
    return {"data", CheckStatus::ok,
            fmt::format("{} ({}; {} recipes, {} profiles)", data.path.string(), data.origin,
                        count_yaml_files(data.path / "recipes"), count_yaml_files(data.path / "profiles"))};
  } catch (const InputError& e) {
    return {"data", CheckStatus::fail, e.what()};
  }
}

void
add_probe_checks(Report& report, const nlohmann::json& probes, archive::RunArchive& archive, std::int64_t run_id) {
  const auto& blas = probes.at("blas");
  const double error = blas.at("max_relative_error").get<double>();
  report.checks.push_back(
      {"blas", error < 1e-4 ? CheckStatus::ok : CheckStatus::fail,
       fmt::format("sgemm max rel. error {:.1e}, {:.1f} GFLOP/s at n=1024 on {} thread(s); {}", error,
                   blas.at("gflops").get<double>(), blas.at("threads").get<int>(), build_info().blas)});
  archive.add_metric(run_id, std::nullopt, {"blas_sgemm_gflops", blas.at("gflops").get<double>(), "GFLOP/s", {}});

  const auto& cpu = probes.at("cpu_kernels");
  const double cpu_error = cpu.at("max_relative_error").get<double>();
  report.checks.push_back(
      {"cpu kernels", cpu_error < 1e-4 ? CheckStatus::ok : CheckStatus::fail,
       fmt::format("ISA {}; decode row-dot {}; prefill at 128x2048x2048: BF16 {} {:.0f} GFLOP/s, {:.0f} with "
                   "--activations bf16 (widened sgemm {:.0f}), F32 {} {:.0f} GFLOP/s (OpenBLAS sgemm {:.0f}), W8A8 {} "
                   "{:.0f} GFLOP/s; served deltas' decode product {}; attention and SiLU {}; max rel. error {:.1e}",
                   cpu.at("isa").get<std::string>(), cpu.at("row_dot").get<std::string>(),
                   cpu.at("bf16_prefill").get<std::string>(), cpu.at("bf16_gflops").get<double>(),
                   cpu.at("bf16_rounded_gflops").get<double>(), cpu.at("bf16_widened_gflops").get<double>(),
                   cpu.at("f32_prefill").get<std::string>(), cpu.at("f32_gflops").get<double>(),
                   cpu.at("f32_sgemm_gflops").get<double>(), cpu.at("w8a8").get<std::string>(),
                   cpu.at("w8a8_gflops").get<double>(), cpu.at("delta_product").get<std::string>(),
                   cpu.at("attention").get<std::string>(), cpu_error)});
  archive.add_metric(run_id, std::nullopt, {"w8a8_prefill_gflops", cpu.at("w8a8_gflops").get<double>(), "GFLOP/s", {}});
  const double read = cpu.at("read_gbps").get<double>(), bf16_decode = cpu.at("bf16_decode_gbps").get<double>(),
               f32_decode = cpu.at("f32_decode_gbps").get<double>();
  report.checks.push_back(
      {"cpu memory", CheckStatus::ok,
       fmt::format("read bandwidth {:.1f} GB/s over {:.0f} MiB; decode row-dot streams BF16 "
                   "weights at {:.1f} GB/s ({:.0f} %), F32 at {:.1f} GB/s ({:.0f} %)",
                   read, cpu.at("stream_mib").get<double>(), bf16_decode, 100.0 * bf16_decode / std::max(read, 1e-9),
                   f32_decode, 100.0 * f32_decode / std::max(read, 1e-9))});
  archive.add_metric(run_id, std::nullopt, {"cpu_read_bandwidth", read, "GB/s", {}});
  archive.add_metric(run_id, std::nullopt, {"bf16_decode_bandwidth", bf16_decode, "GB/s", {}});
  archive.add_metric(run_id, std::nullopt, {"f32_decode_bandwidth", f32_decode, "GB/s", {}});
  archive.add_metric(run_id, std::nullopt, {"bf16_prefill_gflops", cpu.at("bf16_gflops").get<double>(), "GFLOP/s", {}});
  archive.add_metric(run_id, std::nullopt,
                     {"bf16_rounded_prefill_gflops", cpu.at("bf16_rounded_gflops").get<double>(), "GFLOP/s", {}});
  archive.add_metric(run_id, std::nullopt, {"f32_prefill_gflops", cpu.at("f32_gflops").get<double>(), "GFLOP/s", {}});

  const auto& gpu = probes.at("gpu");
  const auto& devices = gpu.at("devices");
  archive.add_metric(run_id, std::nullopt, {"cuda_devices", static_cast<double>(devices.size()), "count", {}});
  if (!gpu.at("compiled").get<bool>()) {
    report.checks.push_back({"cuda", CheckStatus::warn, "built without CUDA: GPU work is unavailable"});
    return;
  }
  if (devices.empty()) {
    report.checks.push_back({"cuda", CheckStatus::warn,
                             fmt::format("compiled in (runtime {}), no usable device: {}",
                                         gpu.at("runtime_version").get<int>(), gpu.at("error").get<std::string>())});
    return;
  }
  for (const auto& device : devices) {
    const int index = device.at("index").get<int>();
    const auto kernel = std::find_if(probes.at("kernels").begin(), probes.at("kernels").end(),
                                     [&](const nlohmann::json& k) { return k.at("device") == index; });
    std::string detail =
        fmt::format("{} ({}, cc {}, {} SMs)", device.at("name").get<std::string>(),
                    format_bytes(device.at("memory_bytes").get<std::uint64_t>()),
                    device.at("compute_capability").get<std::string>(), device.at("multiprocessors").get<int>());
    CheckStatus status = CheckStatus::ok;
    if (kernel == probes.at("kernels").end() || !kernel->at("ran").get<bool>()) {
      status = CheckStatus::fail;
      detail +=
          "; axpy kernel failed: " +
          (kernel == probes.at("kernels").end() ? std::string("not run") : kernel->at("error").get<std::string>());
    } else {
      const double err = kernel->at("max_abs_error").get<double>();
      const double bandwidth = kernel->at("gigabytes_per_second").get<double>();
      status = err < 1e-5 ? CheckStatus::ok : CheckStatus::fail;
      detail += fmt::format("; axpy kernel max error {:.1e}, {:.0f} GB/s", err, bandwidth);
      archive.add_metric(run_id, std::nullopt, {fmt::format("cuda{}_axpy_bandwidth", index), bandwidth, "GB/s", {}});
      const auto attention_error = kernel->value("decode_attention_error", std::string{});
      const double attention_err = kernel->value("decode_attention_max_error", 0.0);
      if (!attention_error.empty()) {
        status = CheckStatus::fail;
        detail += "; decode attention kernel failed: " + attention_error;
      } else {
        if (attention_err >= kDecodeAttentionTolerance)
          status = CheckStatus::fail;
        detail += fmt::format("; decode attention max error {:.1e}", attention_err);
      }
    }
    report.checks.push_back({fmt::format("cuda:{}", index), status, detail});
  }
}

} // namespace

std::string
to_string(CheckStatus status) {
  switch (status) {
  case CheckStatus::ok:
    return "ok";
  case CheckStatus::warn:
    return "warn";
  case CheckStatus::fail:
    return "FAIL";
  }
  return "FAIL";
}

std::size_t
Report::failures() const {
  return static_cast<std::size_t>(
      std::count_if(checks.begin(), checks.end(), [](const Check& c) { return c.status == CheckStatus::fail; }));
}

Report
run_doctor(const Settings& settings, const archive::RunContext& context,
           const std::optional<std::filesystem::path>& model_dir) {
  archive::RunArchive& archive = *context.archive;
  const std::int64_t run_id = context.run_id;
  Report report;
  const BuildInfo& build = build_info();
  report.checks.push_back(
      {"build", CheckStatus::ok, fmt::format("optkit {} ({}, {})", build.version, build.git_commit, build.build_type)});
  report.checks.push_back(check_archive(archive));
  report.checks.push_back({"config", CheckStatus::ok,
                           settings.config_file.empty() ? "no config file (built-in defaults)"
                                                        : settings.config_file.string() + " (valid)"});
  report.checks.push_back(check_data());
  if (model_dir)
    for (auto& check : check_model_folder(*model_dir))
      report.checks.push_back(std::move(check));

  proc::WorkerTask task;
  task.command = {"doctor"};
  task.payload = {{"probe", "all"}};
  task.timeout_s = context.timeout_s;
  task.grace_s = 5;
  proc::PoolOptions pool = archive::pool_options(context, "doctor");
  pool.show_progress = false;
  pool.gpus = settings.workers.gpus;
  const proc::WorkerOutcome outcome = proc::WorkerPool(pool).run({task}).front();
  if (!outcome.succeeded()) {
    report.checks.push_back({"worker", CheckStatus::fail,
                             fmt::format("child process failed: {} (log: {})", outcome.error, outcome.log.string())});
    return report;
  }
  report.checks.push_back(
      {"worker", CheckStatus::ok, fmt::format("child process ran and reported back in {:.2f} s", outcome.seconds)});
  archive.add_metric(run_id, std::nullopt, {"worker_roundtrip", outcome.seconds, "s", {}});
  report.probes = outcome.result;
  add_probe_checks(report, outcome.result, archive, run_id);
  return report;
}

Table
report_table(const Report& report) {
  Table table({"check", "status", "detail"});
  for (const auto& c : report.checks) {
    table.add_row({c.name, to_string(c.status), c.detail});
  }
  return table;
}

} // namespace optkit::doctor
