// The server alone, for the eval benchmarks' side-by-side figures: request bodies already built,
// sent by `concurrency` plain HTTP clients to one path, nothing parsed or scored.
#pragma once

#include "http/client.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace optkit::perf_support {

// Requests per second; aborts on any answer but 200 (a benchmark of failures measures nothing).
inline double
server_alone(const http::Url& url, const std::string& path, const std::vector<std::string>& requests, int concurrency) {
  std::atomic<std::size_t> next{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < concurrency; ++t)
    pool.emplace_back([&] {
      http::Client client(url);
      for (std::size_t i = next++; i < requests.size(); i = next++)
        if (client.request("POST", path, requests[i]).status != 200)
          std::abort();
    });
  for (auto& t : pool)
    t.join();
  return static_cast<double>(requests.size()) /
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace optkit::perf_support
