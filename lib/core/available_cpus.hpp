// How many CPUs this process may use, for default thread counts. std::thread::hardware_concurrency
// counts every online CPU of the machine, but a process started by taskset, inside a Slurm job
// (cgroup cpusets) or in a container may run on fewer: its affinity mask, and a CFS bandwidth
// quota (docker --cpus, Kubernetes CPU limits) rounded up. More threads than that make the thread
// pool's workers wait on one another for whole scheduler slices.
#pragma once

#include <optional>
#include <string_view>

namespace optkit {

// At least 1; read once per process.
unsigned available_cpus();

// The CPUs a cgroup quota allows, rounded up, from cgroup v2's cpu.max text ("150000 100000": 2)
// or cgroup v1's quota and period joined by a space; none for no quota ("max", "-1 100000") or for
// text it does not understand.
std::optional<unsigned> quota_cpus(std::string_view cpu_max);

} // namespace optkit
