// File: launcher/hosts/slurm.h
//
// The hosts of a Slurm allocation, for chorusrun --gloo started inside one (sbatch, salloc, srun)
// without -H/--hostfile. Slurm describes the allocation in the environment:
//
//   SLURM_JOB_NODELIST=node[01-03,07],gpu5   -> node01 node02 node03 node07 gpu5
//   SLURM_TASKS_PER_NODE=2(x3),1             -> 2 2 2 1 (one count per node, in order)
//   SLURM_NTASKS=7                           -> used when SLURM_TASKS_PER_NODE is absent
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_HOSTS_SLURM_H_
#define CHORUS_LAUNCHER_HOSTS_SLURM_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "launcher/hosts/hosts.h"
#include "launcher/process/environment.h"

namespace chorus::launcher {

// Expands a Slurm host list: comma-separated entries, each a name with any number of bracketed
// ranges ("n[1-3,7]", "rack[1-2]-n[01-02]": every combination, leftmost bracket slowest).
// A range keeps the zero padding of its lower bound ("[08-10]" -> 08 09 10). InvalidArgument
// naming the list for an empty entry, an unbalanced bracket, a non-numeric bound, a range whose
// end is below its start, a character no host name holds (names are checked as -H checks them:
// IsValidHostName), or more than 1000000 names.
absl::StatusOr<std::vector<std::string>> ParseSlurmNodelist(absl::string_view text);

// Expands SLURM_TASKS_PER_NODE: "N" or "N(xK)" entries, comma-separated, N >= 1, K >= 1.
// InvalidArgument naming the text otherwise.
absl::StatusOr<std::vector<int>> ParseSlurmTasksPerNode(absl::string_view text);

// The allocation as hosts with slots, from `env`: nullopt when `env` has no SLURM_JOB_NODELIST
// (nor the older SLURM_NODELIST). Slots per node come from SLURM_TASKS_PER_NODE (its node count
// must match the node list's); without it SLURM_NTASKS is spread as Slurm's block distribution
// does (the first ntasks % nodes nodes get one more; a node left with none is left out); without
// either, one slot per node (Slurm's default of one task per node).
// InvalidArgument naming the variable when a value does not parse or the counts disagree.
absl::StatusOr<std::optional<std::vector<HostSlots>>> SlurmHosts(const Environment& env);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_HOSTS_SLURM_H_
