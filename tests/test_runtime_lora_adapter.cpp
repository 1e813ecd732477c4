// A PEFT LoRA adapter served beside the base against the merged model it stands for: the test
// merges W + scale·B·A itself (plain loops, in fp32) into a model folder and runs it alone; the
// runtime serves the adapter decoupled (two sgemms per segment) in a batch with a base row. Logits
// must agree within 1e-3 of their range, for lora_alpha/r and rsLoRA's lora_alpha/√r scales; what
// the adapter format can hold and the server does not serve is refused by name.
#include "core/error.hpp"
#include "model/safetensors.hpp"
#include "model/safetensors_writer.hpp"
#include "runtime/transformer.hpp"
#include "support/oracle_logits.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>

using namespace optkit;
using runtime::TokenId;
using test::tiny_base;

namespace {

constexpr std::int64_t kRank = 4;
const char* const kTargets[] = {"self_attn.q_proj", "self_attn.v_proj", "mlp.down_proj"};

struct Factors {
  std::vector<float> a, b; // [r, cols], [rows, r]
  std::int64_t rows = 0, cols = 0;
};

void
write_json(const std::filesystem::path& path, const nlohmann::json& value) {
  std::ofstream(path) << value.dump(2);
}

// Random factors for kTargets on every layer, written as PEFT saves them; returns them by module.
std::map<std::string, Factors>
write_adapter(const std::filesystem::path& dir, bool rslora,
              const nlohmann::json& extra_config = nlohmann::json::object()) {
  runtime::CpuTransformer base(tiny_base(), {.threads = 1});
  const auto& c = base.config();
  std::mt19937 rng(7);
  std::normal_distribution<float> value(0.0f, 0.05f);
  std::map<std::string, Factors> out;
  model::TensorSet set;
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    for (const char* target : kTargets) {
      const std::string module = fmt::format("model.layers.{}.{}", l, target);
      Factors f;
      f.rows = std::string(target) == "self_attn.q_proj"   ? c.q_dim()
               : std::string(target) == "self_attn.v_proj" ? c.kv_dim()
                                                           : c.hidden_size;
      f.cols = std::string(target) == "mlp.down_proj" ? c.intermediate_size : c.hidden_size;
      f.a.resize(static_cast<std::size_t>(kRank * f.cols));
      f.b.resize(static_cast<std::size_t>(f.rows * kRank));
      for (auto& v : f.a)
        v = value(rng);
      for (auto& v : f.b)
        v = value(rng);
      set.add_values("base_model.model." + module + ".lora_A.weight", model::DType::f32, {kRank, f.cols}, f.a);
      set.add_values("base_model.model." + module + ".lora_B.weight", model::DType::f32, {f.rows, kRank}, f.b);
      out[module] = f;
    }
  std::filesystem::create_directories(dir);
  model::write_safetensors(dir / "adapter_model.safetensors", set.tensors());
  nlohmann::json config = {{"peft_type", "LORA"},
                           {"r", kRank},
                           {"lora_alpha", 8},
                           {"use_rslora", rslora},
                           {"bias", "none"},
                           {"use_dora", false},
                           {"fan_in_fan_out", false},
                           {"modules_to_save", nullptr},
                           {"target_modules", {"q_proj", "v_proj", "down_proj"}}};
  if (!extra_config.is_null())
    config.update(extra_config);
  write_json(dir / "adapter_config.json", config);
  return out;
}

// tiny-base with W + scale·B·A on the adapter's modules, every tensor in fp32.
void
write_merged(const std::filesystem::path& dir, const std::map<std::string, Factors>& factors, double scale) {
  std::filesystem::create_directories(dir);
  for (const char* file : {"config.json", "tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(tiny_base() / file, dir / file);
  model::SafetensorsFile base(tiny_base() / "model.safetensors");
  model::TensorSet set;
  for (const auto& info : base.header().tensors) {
    auto values = base.find(info.name).to_floats();
    const std::string suffix = ".weight";
    const std::string module = info.name.substr(0, info.name.size() - suffix.size());
    if (const auto it = factors.find(module); it != factors.end()) {
      const Factors& f = it->second;
      for (std::int64_t i = 0; i < f.rows; ++i)
        for (std::int64_t j = 0; j < f.cols; ++j) {
          double d = 0;
          for (std::int64_t k = 0; k < kRank; ++k)
            d += double(f.b[static_cast<std::size_t>(i * kRank + k)]) *
                 double(f.a[static_cast<std::size_t>(k * f.cols + j)]);
          values[static_cast<std::size_t>(i * f.cols + j)] += static_cast<float>(scale * d);
        }
    }
    set.add_values(info.name, model::DType::f32, info.shape, values);
  }
  model::write_safetensors(dir / "model.safetensors", set.tensors());
}

} // namespace

TEST_CASE("a LoRA adapter served decoupled beside the base gives the merged model's logits") {
  for (const bool rslora : {false, true}) {
    CAPTURE(rslora);
    test::ScratchDir scratch;
    const auto factors = write_adapter(scratch / "adapter", rslora);
    const double scale = rslora ? 8.0 / std::sqrt(double(kRank)) : 8.0 / double(kRank);
    write_merged(scratch / "merged", factors, scale);

    runtime::CpuTransformer merged(scratch / "merged", {.threads = 2});
    runtime::CpuTransformer served(tiny_base(), {.threads = 2});
    const auto lora = served.add_variant(scratch / "adapter");
    const auto vocab = static_cast<std::size_t>(served.config().vocab_size);
    for (const auto& p : test::read_oracle(tiny_base())) {
      // The adapter's row batched after a base row of the same prompt.
      const std::vector<runtime::SequenceInput> inputs = {{served.add_sequence(), p.ids, true, -1},
                                                          {served.add_sequence(), p.ids, true, lora}};
      const auto got = served.forward(inputs);
      const runtime::SequenceInput alone{merged.add_sequence(), p.ids, true};
      const auto want = merged.forward(std::span(&alone, 1));
      const std::size_t n = p.ids.size() * vocab;
      REQUIRE(got.size() == 2 * n);
      const auto [lo, hi] = std::minmax_element(want.begin(), want.end());
      double worst = 0, moved = 0;
      for (std::size_t i = 0; i < n; ++i) {
        worst = std::max(worst, double(std::fabs(got[n + i] - want[i])));
        moved = std::max(moved, double(std::fabs(got[i] - want[i]))); // the base row: not the merged model
      }
      const double range = double(*hi - *lo);
      CHECK(worst <= 1e-3 * range);
      CHECK(moved > 1e-2 * range); // the adapter changes the model: the comparison can fail
      for (const auto& in : inputs)
        served.remove_sequence(in.sequence);
    }
    CHECK(served.variant(lora).resident_bytes() > 0);
  }
}

TEST_CASE("what PEFT can save and serve-deltas does not serve is refused by name") {
  runtime::CpuTransformer base(tiny_base(), {.threads = 1});
  test::ScratchDir scratch;
  const auto refused = [&](const std::string& name, const nlohmann::json& extra, const std::string& message) {
    CAPTURE(name);
    write_adapter(scratch / name, false, extra);
    CHECK_THROWS_WITH_AS(base.load_variant(scratch / name), doctest::Contains(message.c_str()), InputError);
  };
  refused("dora", {{"use_dora", true}}, "use_dora");
  refused("bias", {{"bias", "all"}}, "bias");
  refused("saved", {{"modules_to_save", {"lm_head"}}}, "modules_to_save");
  refused("pattern", {{"rank_pattern", {{"q_proj", 8}}}}, "rank_pattern");
  refused("rank", {{"r", 8}}, "another base"); // factors of rank 4 under r = 8
  refused("no_r", {{"r", nullptr}}, "/r");

  // A factor on the LM head, and a lone lora_A.
  write_adapter(scratch / "head", false);
  {
    model::TensorSet set;
    set.add_values("base_model.model.lm_head.lora_A.weight", model::DType::f32, {kRank, 192},
                   std::vector<float>(kRank * 192));
    set.add_values("base_model.model.lm_head.lora_B.weight", model::DType::f32, {2048, kRank},
                   std::vector<float>(2048 * kRank));
    model::write_safetensors(scratch / "head" / "adapter_model.safetensors", set.tensors());
  }
  CHECK_THROWS_WITH_AS(base.load_variant(scratch / "head"), doctest::Contains("LoRA on lm_head is not served"),
                       InputError);
  {
    model::TensorSet set;
    set.add_values("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", model::DType::f32, {kRank, 192},
                   std::vector<float>(kRank * 192));
    model::write_safetensors(scratch / "head" / "adapter_model.safetensors", set.tensors());
  }
  CHECK_THROWS_WITH_AS(base.load_variant(scratch / "head"), doctest::Contains("without lora_B"), InputError);
  std::filesystem::remove(scratch / "head" / "adapter_model.safetensors");
  CHECK_THROWS_WITH_AS(base.load_variant(scratch / "head"), doctest::Contains("safe_serialization"), InputError);
}
