// Fuzzes the Slurm allocation parsers of chorusrun --gloo (launcher/hosts/slurm.h): the node list,
// the tasks per node, and SlurmHosts over an environment holding them, all of which come from the
// environment Slurm (or the user) set.
//
// Input: one flag byte, then up to three values separated by NUL bytes: the node list, the tasks
// per node, the task count. Flag bit 0 names the node list SLURM_NODELIST instead of
// SLURM_JOB_NODELIST, bit 1 leaves SLURM_TASKS_PER_NODE out, bit 2 leaves SLURM_NTASKS out.
//
// Properties (launcher/hosts/slurm.h): no crash; errors are InvalidArgument naming the list or the
// variable; a node list expands to 1..1000000 valid host names; tasks per node are counts in
// [1, 1000000]; SlurmHosts has a node's slots >= 1, one host per node with SLURM_TASKS_PER_NODE
// (in its counts), and SLURM_NTASKS slots in all with SLURM_NTASKS alone.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "launcher/hosts/slurm.h"
#include "test/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::launcher;
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> values = absl::StrSplit(rest, absl::MaxSplits('\0', 2));
  values.resize(3);
  const std::string& nodelist = values[0];
  const std::string& per_node = values[1];
  const std::string& ntasks = values[2];

  absl::StatusOr<std::vector<std::string>> names = ParseSlurmNodelist(nodelist);
  if (names.ok()) {
    FUZZ_CHECK(!names->empty() && names->size() <= 1000000) << names->size() << " names";
    for (const std::string& name : *names) {
      FUZZ_CHECK(IsValidHostName(name)) << "accepted node name '" << name << "'";
    }
  } else {
    FUZZ_CHECK(absl::IsInvalidArgument(names.status())) << names.status();
    FUZZ_CHECK(names.status().message().find("Slurm node list") != absl::string_view::npos)
        << names.status();
  }

  absl::StatusOr<std::vector<int>> counts = ParseSlurmTasksPerNode(per_node);
  if (counts.ok()) {
    FUZZ_CHECK(counts->size() <= 1000000) << counts->size() << " counts";
    for (int c : *counts) FUZZ_CHECK(c >= 1 && c <= 1000000) << "count " << c;
  } else {
    FUZZ_CHECK(absl::IsInvalidArgument(counts.status())) << counts.status();
    FUZZ_CHECK(counts.status().message().find("SLURM_TASKS_PER_NODE") != absl::string_view::npos)
        << counts.status();
  }

  Environment env;
  env[(flags & 1) ? "SLURM_NODELIST" : "SLURM_JOB_NODELIST"] = nodelist;
  const bool with_per_node = !(flags & 2);
  const bool with_ntasks = !(flags & 4);
  if (with_per_node) env["SLURM_TASKS_PER_NODE"] = per_node;
  if (with_ntasks) env["SLURM_NTASKS"] = ntasks;
  absl::StatusOr<std::optional<std::vector<HostSlots>>> hosts = SlurmHosts(env);
  if (!hosts.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(hosts.status())) << hosts.status();
    FUZZ_CHECK(hosts.status().message().find("SLURM_") != absl::string_view::npos)
        << "the error names no variable: " << hosts.status();
    return 0;
  }
  FUZZ_CHECK(hosts->has_value()) << "a node list was set";
  FUZZ_CHECK(names.ok()) << "SlurmHosts accepted a node list ParseSlurmNodelist refuses";
  const std::vector<HostSlots>& list = **hosts;
  int64_t total = 0;
  for (const HostSlots& h : list) {
    FUZZ_CHECK(h.slots >= 1) << "host '" << h.host << "' has " << h.slots << " slots";
    total += h.slots;
  }
  if (with_per_node) {
    FUZZ_CHECK(counts.ok() && counts->size() == names->size() && list.size() == names->size())
        << list.size() << " hosts for " << names->size() << " nodes";
    for (size_t i = 0; i < list.size(); ++i) {
      FUZZ_CHECK(list[i].host == (*names)[i] && list[i].slots == (*counts)[i]) << "node " << i;
    }
  } else if (with_ntasks) {
    int64_t n = 0;
    FUZZ_CHECK(absl::SimpleAtoi(ntasks, &n)) << "SLURM_NTASKS '" << ntasks << "' was accepted";
    FUZZ_CHECK(total == n) << total << " slots for SLURM_NTASKS=" << n;
  } else {
    FUZZ_CHECK(list.size() == names->size() && total == static_cast<int64_t>(names->size()))
        << "one slot per node";
  }
  return 0;
}
