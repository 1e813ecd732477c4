// The requests a server says it runs and queues, from the /metrics text of each engine bench
// benches (the gauge names as vLLM, SGLang, llama-server and serve-deltas export them).
#include "bench/server_queue.hpp"

#include <doctest/doctest.h>

using namespace optkit::bench;

TEST_CASE("each engine's running and waiting gauges are read and summed over their label sets") {
  const auto vllm =
      parse_server_queue("# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                         "# TYPE vllm:num_requests_running gauge\n"
                         "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"
                         "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 2.0\n"
                         "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 7.0\n"
                         "vllm:num_requests_running_total 99\n");
  REQUIRE(vllm);
  CHECK(vllm->running == 5);
  CHECK(vllm->waiting == 7);
  const auto llama = parse_server_queue("llamacpp:prompt_tokens_total 10\nllamacpp:requests_processing 1\n"
                                        "llamacpp:requests_deferred 4\n");
  REQUIRE(llama);
  CHECK(llama->running == 1);
  CHECK(llama->waiting == 4);
  const auto sglang = parse_server_queue("sglang:num_running_reqs{model_name=\"m\"} 6\r\n"
                                         "sglang:num_queue_reqs{model_name=\"m\"} 0 1730000000000\n");
  REQUIRE(sglang);
  CHECK(sglang->running == 6); // CRLF line ends
  CHECK(sglang->waiting == 0); // a sample with a timestamp
  const auto optkit = parse_server_queue("optkit:num_requests_running{model_name=\"base\"} 2\n"
                                         "optkit:num_requests_waiting{model_name=\"base\"} 1\n");
  REQUIRE(optkit);
  CHECK(optkit->running == 2);
  CHECK(optkit->waiting == 1);
}

TEST_CASE("a server without those gauges, and samples that are not counts, give nothing") {
  CHECK_FALSE(parse_server_queue(""));
  CHECK_FALSE(parse_server_queue("http_requests_total 4\nprocess_cpu_seconds_total 1.5\n"));
  CHECK_FALSE(parse_server_queue("vllm:num_requests_running NaN\nvllm:num_requests_waiting -1\n"));
  CHECK_FALSE(parse_server_queue("vllm:num_requests_running{model_name=\"m\" 3\nvllm:num_requests_waiting +Inf\n"));
  const auto partial = parse_server_queue("vllm:num_requests_running 2\nvllm:num_requests_waiting bogus\n");
  REQUIRE(partial);
  CHECK(partial->running == 2);
  CHECK(partial->waiting == 0);
}
