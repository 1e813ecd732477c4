// The deltas serve-deltas serves, in DeltaZip's tiers: registered on disk (a name and a folder),
// resident in host memory (loaded and checked, Δs compressed: CpuTransformer's variant slots), and
// active in a step (the engine's --max-deltas). The host tier has a byte budget; a request for a
// delta on disk loads it on the store's loader thread — then evicts the least recently used idle
// deltas until the budget holds (load first: a failed load evicts nothing). Registrations come
// from --delta at start and from POST /v1/load_lora_adapter while serving; unregistering
// (/v1/unload_lora_adapter) refuses new requests at once and frees the delta when its last
// request ends. Thread-safe; the model is changed only between engine steps.
#pragma once

#include "runtime/transformer.hpp"
#include "serve/engine.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace optkit::serve {

// The name is not registered (HTTP 404).
class UnknownDelta : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// How add_async ended: the variant id, or the error; `timed_out` when the load ran past its
// deadline and was abandoned (nothing registered).
struct AddOutcome {
  std::int32_t id = -1;
  std::string error;
  bool timed_out = false;
};

struct DeltaStoreOptions {
  std::uint64_t host_budget_bytes = 0; // resident deltas together (0: no budget)
};

struct DeltaEntry {
  std::string name;
  std::filesystem::path dir;
  std::int32_t id = -1; // the model's variant id, stable for the registration
  bool resident = false;
  std::uint64_t bytes = 0; // when resident
  std::int64_t in_flight = 0;
};

struct DeltaStoreStats {
  std::int64_t loads = 0, evictions = 0, failed_loads = 0;
  double load_seconds = 0; // disk → host, summed
  std::uint64_t resident_bytes = 0;
};

class DeltaStore {
public:
  // `model` is owned by `engine`; both must outlive the store.
  DeltaStore(runtime::CpuTransformer& model, Engine& engine, DeltaStoreOptions options);
  // Joins the loader thread: queued loads are dropped, and a load under way is abandoned before
  // its next layer, so shutdown waits at most for one layer's read.
  ~DeltaStore();
  DeltaStore(const DeltaStore&) = delete;
  DeltaStore& operator=(const DeltaStore&) = delete;

  // Registers `name` → `dir` and loads it now (evicting idle deltas beyond the budget). Throws
  // InputError, with nothing registered or evicted, for a taken name, an artifact that is not a
  // delta of the base, or one larger than the whole budget. Returns the variant id.
  std::int32_t add(const std::string& name, const std::filesystem::path& dir);
  // The same on the loader thread, abandoned before its next layer once `deadline` has passed
  // (the time it waited behind other loads counts): `then` runs there when done.
  void add_async(const std::string& name, const std::filesystem::path& dir,
                 std::chrono::steady_clock::time_point deadline, std::function<void(const AddOutcome&)> then);
  // Unregisters `name`: new requests for it are refused at once; it leaves memory when its last
  // request ends. Throws UnknownDelta.
  void remove(const std::string& name);

  // A request for `name`: counted in flight (so it is not evicted), loaded first when on disk.
  // `then(id, error)` runs with the variant id, or with an error message when loading failed —
  // inline when resident, else on the loader thread. Throws UnknownDelta.
  void acquire(const std::string& name, std::function<void(std::int32_t id, const std::string& error)> then);
  // The request acquired under `id` ended.
  void release(std::int32_t id);

  std::vector<DeltaEntry> list() const; // registered deltas, by id
  DeltaStoreStats stats() const;

private:
  using Callback = std::function<void(std::int32_t, const std::string&)>;
  struct Slot {
    DeltaEntry entry;
    bool registered = true;
    bool loading = false;
    std::uint64_t last_used = 0;
    std::vector<Callback> waiting;
  };
  // Every change to the model runs on the loader thread, in order (a load never overtakes the
  // eviction of the same slot), and never with m_mutex held while it waits for the engine.
  void post(std::function<void()> job);
  void loader();
  // `checkpoint` runs before each layer is read, and throws to abandon the load.
  std::int32_t register_and_load(const std::string& name, const std::filesystem::path& dir,
                                 const std::function<void()>& checkpoint);
  void load(std::int32_t id); // a registered slot on disk, for the requests waiting on it
  // Loads `dir` and installs it as variant `id`; returns its bytes. Throws InputError.
  std::uint64_t load_and_install(std::int32_t id, const std::filesystem::path& dir,
                                 const std::function<void()>& checkpoint);
  void throw_if_stopping() const; // a checkpoint: LoadAbandoned once the store stops
  void evict_idle_beyond_budget(std::unique_lock<std::mutex>& lock, std::int32_t keep);
  void evict(std::unique_lock<std::mutex>& lock, std::int32_t id);
  void evict_if_unregistered(std::int32_t id);
  Slot& registered(const std::string& name); // m_mutex held; throws UnknownDelta
  std::uint64_t resident_bytes() const;      // m_mutex held: the resident slots' bytes

  runtime::CpuTransformer& m_model;
  Engine& m_engine;
  DeltaStoreOptions m_options;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::map<std::int32_t, Slot> m_slots;     // by id; unregistered slots leave once idle
  std::deque<std::function<void()>> m_jobs; // for the loader thread
  std::uint64_t m_clock = 0;                // for LRU
  DeltaStoreStats m_stats;                  // counters; resident_bytes is summed from the slots when asked
  std::atomic<bool> m_stopping{false};      // set under m_mutex; read by loads' checkpoints without it
  std::int32_t m_next_id = 0;
  std::thread m_thread;
};

} // namespace optkit::serve
