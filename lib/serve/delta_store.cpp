#include "serve/delta_store.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/text.hpp"

#include <algorithm>
#include <chrono>
#include <future>

namespace optkit::serve {

namespace {

// Thrown by a load's checkpoint: the load ran past its deadline or the store is stopping.
class LoadAbandoned : public std::runtime_error {
public:
  LoadAbandoned(const std::string& why, bool past_deadline) : std::runtime_error(why), timed_out(past_deadline) {}
  bool timed_out;
};

} // namespace

DeltaStore::DeltaStore(runtime::CpuTransformer& model, Engine& engine, DeltaStoreOptions options)
    : m_model(model), m_engine(engine), m_options(options), m_thread([this] { loader(); }) {}

DeltaStore::~DeltaStore() {
  {
    const std::lock_guard lock(m_mutex);
    m_stopping = true;
    m_wake.notify_one();
  }
  m_thread.join();
}

void
DeltaStore::post(std::function<void()> job) {
  const std::lock_guard lock(m_mutex);
  m_jobs.push_back(std::move(job));
  m_wake.notify_one();
}

void
DeltaStore::loader() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock lock(m_mutex);
      m_wake.wait(lock, [&] { return m_stopping || !m_jobs.empty(); });
      if (m_stopping)
        return;
      job = std::move(m_jobs.front());
      m_jobs.pop_front();
    }
    try {
      job();
    } catch (const std::exception& e) { // the engine stopped under an eviction, at shutdown
      log::warn("serve-deltas: delta store: {}", e.what());
    }
  }
}

std::int32_t
DeltaStore::add(const std::string& name, const std::filesystem::path& dir) {
  std::promise<std::int32_t> done;
  auto result = done.get_future();
  post([&] {
    try {
      done.set_value(register_and_load(name, dir, [this] { throw_if_stopping(); }));
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  return result.get();
}

void
DeltaStore::add_async(const std::string& name, const std::filesystem::path& dir,
                      std::chrono::steady_clock::time_point deadline, std::function<void(const AddOutcome&)> then) {
  post([this, name, dir, deadline, then = std::move(then)] {
    const auto checkpoint = [this, deadline] {
      throw_if_stopping();
      if (std::chrono::steady_clock::now() > deadline)
        throw LoadAbandoned("the load ran past its deadline", true);
    };
    AddOutcome outcome;
    try {
      outcome.id = register_and_load(name, dir, checkpoint);
    } catch (const LoadAbandoned& e) {
      outcome.error = e.what();
      outcome.timed_out = e.timed_out;
    } catch (const std::exception& e) {
      outcome.error = e.what();
    }
    then(outcome);
  });
}

void
DeltaStore::throw_if_stopping() const {
  if (m_stopping.load())
    throw LoadAbandoned("the server is stopping", false);
}

std::uint64_t
DeltaStore::load_and_install(std::int32_t id, const std::filesystem::path& dir,
                             const std::function<void()>& checkpoint) {
  const auto start = std::chrono::steady_clock::now();
  auto variant = m_model.load_variant(dir, checkpoint); // off the engine thread: serving goes on meanwhile
  const std::uint64_t bytes = variant->resident_bytes();
  if (m_options.host_budget_bytes > 0 && bytes > m_options.host_budget_bytes)
    throw InputError(dir.string() + ": the delta holds " + format_bytes(bytes) + ", more than the whole " +
                     format_bytes(m_options.host_budget_bytes) + " host budget for deltas");
  m_engine.run_between_steps([&] { m_model.set_variant(id, std::move(variant)); }); // waits: `variant` lives
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::lock_guard lock(m_mutex);
  ++m_stats.loads;
  m_stats.load_seconds += seconds;
  return bytes;
}

std::int32_t
DeltaStore::register_and_load(const std::string& name, const std::filesystem::path& dir,
                              const std::function<void()>& checkpoint) {
  std::int32_t id = 0;
  {
    const std::lock_guard lock(m_mutex);
    if (std::any_of(m_slots.begin(), m_slots.end(),
                    [&](const auto& s) { return s.second.registered && s.second.entry.name == name; }))
      throw InputError("a delta named '" + name + "' is already served; unload it first or pick another name");
    id = m_next_id++;
  }
  const std::uint64_t bytes = load_and_install(id, dir, checkpoint); // throws with nothing registered
  std::unique_lock lock(m_mutex);
  Slot& slot = m_slots[id];
  slot.entry = {name, dir, id, true, bytes, 0};
  slot.last_used = ++m_clock;
  evict_idle_beyond_budget(lock, id);
  log::info("serve-deltas: delta '{}' loaded from {} ({} resident)", name, dir.string(), format_bytes(bytes));
  return id;
}

void
DeltaStore::load(std::int32_t id) {
  std::filesystem::path dir;
  {
    const std::lock_guard lock(m_mutex);
    dir = m_slots.at(id).entry.dir;
  }
  std::string error;
  std::uint64_t bytes = 0;
  try {
    bytes = load_and_install(id, dir, [this] { throw_if_stopping(); });
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::vector<Callback> waiting;
  {
    std::unique_lock lock(m_mutex);
    Slot& slot = m_slots.at(id);
    slot.loading = false;
    waiting.swap(slot.waiting);
    if (error.empty()) {
      slot.entry.resident = true;
      slot.entry.bytes = bytes;
      evict_idle_beyond_budget(lock, id);
    } else {
      ++m_stats.failed_loads;
      slot.entry.in_flight -= static_cast<std::int64_t>(waiting.size()); // their requests never start
    }
  }
  if (!error.empty())
    log::warn("serve-deltas: loading delta {} failed: {}", dir.string(), error);
  for (auto& then : waiting)
    then(error.empty() ? id : -1, error);
  if (!error.empty())
    evict_if_unregistered(id);
}

void
DeltaStore::evict_idle_beyond_budget(std::unique_lock<std::mutex>& lock, std::int32_t keep) {
  while (m_options.host_budget_bytes > 0 && resident_bytes() > m_options.host_budget_bytes) {
    const Slot* victim = nullptr;
    for (const auto& [id, slot] : m_slots)
      if (slot.entry.resident && slot.entry.in_flight == 0 && !slot.loading && id != keep &&
          (victim == nullptr || slot.last_used < victim->last_used))
        victim = &slot;
    if (victim == nullptr)
      return; // the rest are in use: over budget until they finish
    evict(lock, victim->entry.id);
  }
}

void
DeltaStore::evict(std::unique_lock<std::mutex>& lock, std::int32_t id) {
  Slot& slot = m_slots.at(id);
  slot.entry.resident = false; // new requests wait for a load from here on, queued behind this
  slot.entry.bytes = 0;
  ++m_stats.evictions;
  lock.unlock(); // the engine's sinks take m_mutex: never wait for the engine holding it
  m_engine.run_between_steps([&] { m_model.set_variant(id, nullptr); });
  lock.lock();
}

void
DeltaStore::evict_if_unregistered(std::int32_t id) {
  std::unique_lock lock(m_mutex);
  const auto it = m_slots.find(id);
  if (it == m_slots.end() || it->second.registered || it->second.entry.in_flight > 0 || it->second.loading)
    return;
  if (it->second.entry.resident)
    evict(lock, id);
  m_slots.erase(id);
}

DeltaStore::Slot&
DeltaStore::registered(const std::string& name) {
  for (auto& [_, slot] : m_slots)
    if (slot.registered && slot.entry.name == name)
      return slot;
  throw UnknownDelta("no delta named '" + name + "' is served");
}

void
DeltaStore::remove(const std::string& name) {
  const std::lock_guard lock(m_mutex);
  Slot& slot = registered(name);
  slot.registered = false;
  const std::int32_t id = slot.entry.id;
  m_jobs.push_back([this, id] { evict_if_unregistered(id); });
  m_wake.notify_one();
}

void
DeltaStore::acquire(const std::string& name, Callback then) {
  std::unique_lock lock(m_mutex);
  Slot& slot = registered(name);
  const std::int32_t id = slot.entry.id;
  ++slot.entry.in_flight;
  slot.last_used = ++m_clock;
  if (slot.entry.resident) {
    lock.unlock();
    then(id, {});
    return;
  }
  slot.waiting.push_back(std::move(then));
  if (!slot.loading) {
    slot.loading = true;
    m_jobs.push_back([this, id] { load(id); });
    m_wake.notify_one();
  }
}

void
DeltaStore::release(std::int32_t id) {
  const std::lock_guard lock(m_mutex);
  const auto it = m_slots.find(id);
  if (it == m_slots.end() || --it->second.entry.in_flight > 0 || it->second.registered)
    return;
  m_jobs.push_back([this, id] { evict_if_unregistered(id); }); // its last request ended
  m_wake.notify_one();
}

std::vector<DeltaEntry>
DeltaStore::list() const {
  const std::lock_guard lock(m_mutex);
  std::vector<DeltaEntry> out;
  for (const auto& [_, slot] : m_slots)
    if (slot.registered)
      out.push_back(slot.entry);
  return out;
}

std::uint64_t
DeltaStore::resident_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [_, slot] : m_slots)
    total += slot.entry.bytes; // 0 unless resident
  return total;
}

DeltaStoreStats
DeltaStore::stats() const {
  const std::lock_guard lock(m_mutex);
  DeltaStoreStats out = m_stats;
  out.resident_bytes = resident_bytes();
  return out;
}

} // namespace optkit::serve
