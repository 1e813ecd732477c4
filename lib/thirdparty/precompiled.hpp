// The headers that most of optkit's translation units include, parsed once per build instead of in
// each of them (cmake/OptkitPrecompiledHeaders.cmake). nlohmann/json alone took ~2.5 s of every
// translation unit that included it, and ~100 of lib/'s ~220 do. Third-party and standard headers
// only: an area's own headers stay reachable through its include root alone, so the layering the
// build enforces is unchanged. The heavy headers that few files need (Boost.Beast and Asio in
// lib/http, Boost.Process in lib/proc, spdlog in lib/core/log.cpp, CLI11 in cmd/) stay out: every
// translation unit would pay to load them.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
