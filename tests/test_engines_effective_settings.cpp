#include "engines/effective_settings.hpp"

#include <doctest/doctest.h>

using optkit::engines::config_info_labels;
using optkit::engines::effective_from_version;

TEST_CASE("vLLM's config info gauges are read from its /metrics text") {
  const char* text =
      "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
      "# TYPE vllm:cache_config_info gauge\n"
      "vllm:cache_config_info{block_size=\"16\",gpu_memory_utilization=\"0.9\",num_gpu_blocks=\"27204\"} 1.0\n"
      "vllm:num_requests_running{model_name=\"m\"} 0.0\n"
      "vllm:lora_requests_info{max_lora=\"4\"} 1.0\n";
  const auto info = config_info_labels(text);
  REQUIRE(info.size() == 1);
  CHECK(info["vllm:cache_config_info"]["block_size"] == "16");
  CHECK(info["vllm:cache_config_info"]["num_gpu_blocks"] == "27204");
  CHECK(info["vllm:cache_config_info"]["gpu_memory_utilization"] == "0.9");
}

TEST_CASE("label values are unescaped; malformed samples are skipped, not fatal") {
  const auto info = config_info_labels("a_config_info{x=\"q\\\"uote\\\\\", y = \"two\\nlines\",} 1\r\n"
                                       "b_config_info{x=1} 1\n"
                                       "c_config_info{x=\"open\n"
                                       "_config_info{} 1\n"
                                       "{x=\"1\"} 1\n");
  REQUIRE(info.contains("a_config_info"));
  CHECK(info["a_config_info"]["x"] == "q\"uote\\");
  CHECK(info["a_config_info"]["y"] == "two\nlines");
  CHECK_FALSE(info.contains("b_config_info"));
  CHECK_FALSE(info.contains("c_config_info"));
  CHECK(info.contains("_config_info"));
  CHECK(info["_config_info"].empty());
  CHECK(info.size() == 2);
}

TEST_CASE("serve-deltas' settings come from the engine object of /version") {
  CHECK(effective_from_version({{"version", "1"}, {"engine", {{"max_num_seqs", 8}}}})["max_num_seqs"] == 8);
  CHECK(effective_from_version({{"version", "1"}}).is_null());
  CHECK(effective_from_version({{"engine", "text"}}).is_null());
  CHECK(effective_from_version(nlohmann::json::array()).is_null());
}

TEST_CASE("llama-server's /props give its build as its version and the slots and context it resolved") {
  const auto props = nlohmann::json::parse(R"({"build_info": "b7012-3f545be", "total_slots": 4, "model_path":
      "/m.gguf", "default_generation_settings": {"n_ctx": 4096, "temperature": 0.8}, "is_sleeping": false})");
  CHECK(optkit::engines::llamacpp_version(props) == "b7012-3f545be");
  const auto effective = optkit::engines::effective_from_props(props);
  CHECK(effective == nlohmann::json{{"total_slots", 4}, {"n_ctx", 4096}});
  CHECK(optkit::engines::llamacpp_version(nlohmann::json::object()).is_null());
  CHECK(optkit::engines::effective_from_props(nlohmann::json::parse(R"({"total_slots": "4"})")).is_null());
  CHECK(optkit::engines::effective_from_props(nlohmann::json::array()).is_null());
}
