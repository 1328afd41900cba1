#include "launcher/hosts/slurm.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/hosts/job_hosts.h"

namespace chorus::launcher {
namespace {

using Names = std::vector<std::string>;

TEST_CASE("Slurm node lists expand like scontrol show hostnames", "[launcher][slurm]") {
  auto [text, expected] = GENERATE(table<std::string, Names>({
      {"node01", {"node01"}},
      {"a,b,c", {"a", "b", "c"}},
      {"node[01-03,07]", {"node01", "node02", "node03", "node07"}},
      {"node[08-11]", {"node08", "node09", "node10", "node11"}},
      {"n[9-10]", {"n9", "n10"}},
      {"gpu[1-2],cpu5,login[3]", {"gpu1", "gpu2", "cpu5", "login3"}},
      {"rack[1-2]-n[1-2]", {"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
      {"[1-2]x", {"1x", "2x"}},
      {"10.0.0.[1-2]", {"10.0.0.1", "10.0.0.2"}},
      {" node[1-2] ", {"node1", "node2"}},
  }));
  INFO(text);
  absl::StatusOr<Names> names = ParseSlurmNodelist(text);
  REQUIRE(names.ok());
  CHECK(*names == expected);
}

TEST_CASE("Malformed Slurm node lists are errors naming the list", "[launcher][slurm]") {
  auto [text, expected] = GENERATE(table<std::string, std::string>({
      {"", "empty"},
      {"a,,b", "empty entry"},
      {"node[1-3", "unbalanced '['"},
      {"node1-3]", "unbalanced ']'"},
      {"node[[1]]", "nested '['"},
      {"node[3-1]", "range '3-1' ends below its start"},
      {"node[a-b]", "'a-b' is not a number or a range N-M"},
      {"node[]", "'' is not a number"},
      {"node[1-]", "'1-' is not a number"},
      {"n[0-999999],m[0-999999]", "more than 1000000 names"},
      {"n[0-1000]x[0-1000]", "more than 1000000 names"},
      {"a b", "'a b' holds a character a host name cannot"},
      {"n1, n2", "' n2' holds a character a host name cannot"},
      {"rack;1[1-2]", "'rack;1' holds a character a host name cannot"},
  }));
  INFO(text);
  absl::StatusOr<Names> names = ParseSlurmNodelist(text);
  REQUIRE_FALSE(names.ok());
  CHECK(names.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(names.status().message()), Catch::Contains(expected));
  CHECK_THAT(std::string(names.status().message()), Catch::Contains("Slurm node list"));
}

TEST_CASE("SLURM_TASKS_PER_NODE expands its (xK) repeats", "[launcher][slurm]") {
  auto [text, expected] = GENERATE(table<std::string, std::vector<int>>({
      {"4", {4}},
      {"2(x3),1", {2, 2, 2, 1}},
      {"1,2,3", {1, 2, 3}},
      {"8(x2)", {8, 8}},
  }));
  absl::StatusOr<std::vector<int>> counts = ParseSlurmTasksPerNode(text);
  REQUIRE(counts.ok());
  CHECK(*counts == expected);
}

TEST_CASE("Malformed SLURM_TASKS_PER_NODE is an error", "[launcher][slurm]") {
  const std::string text = GENERATE(as<std::string>{}, "", "0", "x", "2(x0)", "2(3)", "2(x3",
                                    "2(x3),", "-1", "2 (x3)", "+2");
  INFO("'" << text << "'");
  absl::StatusOr<std::vector<int>> counts = ParseSlurmTasksPerNode(text);
  REQUIRE_FALSE(counts.ok());
  CHECK_THAT(std::string(counts.status().message()), Catch::Contains("SLURM_TASKS_PER_NODE"));
}

TEST_CASE("SlurmHosts reads the allocation from the environment", "[launcher][slurm]") {
  auto [env, expected] = GENERATE(table<Environment, std::vector<HostSlots>>({
      {{{"SLURM_JOB_NODELIST", "node[01-03]"}, {"SLURM_TASKS_PER_NODE", "2(x2),1"}},
       {{"node01", 2}, {"node02", 2}, {"node03", 1}}},
      // The older name.
      {{{"SLURM_NODELIST", "a,b"}, {"SLURM_TASKS_PER_NODE", "3,1"}}, {{"a", 3}, {"b", 1}}},
      // SLURM_TASKS_PER_NODE wins over SLURM_NTASKS.
      {{{"SLURM_JOB_NODELIST", "a,b"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}, {"SLURM_NTASKS", "9"}},
       {{"a", 1}, {"b", 1}}},
      // SLURM_NTASKS alone: block distribution.
      {{{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_NTASKS", "7"}},
       {{"n1", 3}, {"n2", 2}, {"n3", 2}}},
      {{{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_NTASKS", "2"}}, {{"n1", 1}, {"n2", 1}}},
      // Neither: one task per node.
      {{{"SLURM_JOB_NODELIST", "n[1-2]"}}, {{"n1", 1}, {"n2", 1}}},
  }));
  absl::StatusOr<std::optional<std::vector<HostSlots>>> hosts = SlurmHosts(env);
  INFO(hosts.status().ToString());
  REQUIRE(hosts.ok());
  REQUIRE(hosts->has_value());
  CHECK(**hosts == expected);
}

TEST_CASE("SlurmHosts: no allocation, or one that does not add up", "[launcher][slurm]") {
  absl::StatusOr<std::optional<std::vector<HostSlots>>> none =
      SlurmHosts({{"SLURM_NTASKS", "4"}, {"PATH", "/bin"}});
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());

  auto [env, expected] = GENERATE(table<Environment, std::string>({
      {{{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}},
       "SLURM_TASKS_PER_NODE '2(x2)' counts 2 nodes but SLURM_JOB_NODELIST 'n[1-3]' lists 3"},
      {{{"SLURM_JOB_NODELIST", "n[1-"}}, "SLURM_JOB_NODELIST: malformed Slurm node list"},
      {{{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_NTASKS", "zero"}}, "malformed SLURM_NTASKS 'zero'"},
      {{{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_TASKS_PER_NODE", "2(x"}}, "SLURM_TASKS_PER_NODE"},
  }));
  absl::StatusOr<std::optional<std::vector<HostSlots>>> hosts = SlurmHosts(env);
  REQUIRE_FALSE(hosts.ok());
  CHECK(hosts.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(hosts.status().message()), Catch::Contains(expected));
}

LaunchOptions Options(int np, std::optional<std::string> hosts = std::nullopt) {
  LaunchOptions o;
  o.num_proc = np;
  o.hosts = std::move(hosts);
  o.command = {"prog"};
  return o;
}

TEST_CASE("Job hosts: -H wins over Slurm; Slurm only in --gloo mode", "[launcher][slurm]") {
  const Environment slurm = {{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}};

  absl::StatusOr<JobHosts> from_slurm = ResolveJobHosts(Options(3), slurm, /*use_slurm=*/true);
  REQUIRE(from_slurm.ok());
  CHECK(from_slurm->hosts == std::vector<HostSlots>{{"n1", 2}, {"n2", 2}});
  CHECK(from_slurm->source == "the Slurm allocation (SLURM_JOB_NODELIST=n[1-2])");

  absl::StatusOr<JobHosts> given = ResolveJobHosts(Options(2, "a:2"), slurm, true);
  REQUIRE(given.ok());
  CHECK(given->hosts == std::vector<HostSlots>{{"a", 2}});

  absl::StatusOr<JobHosts> mpi_mode = ResolveJobHosts(Options(3), slurm, /*use_slurm=*/false);
  REQUIRE(mpi_mode.ok());
  CHECK(mpi_mode->hosts == std::vector<HostSlots>{{"localhost", 3}});

  absl::StatusOr<JobHosts> outside = ResolveJobHosts(Options(3), {{"PATH", "/bin"}}, true);
  REQUIRE(outside.ok());
  CHECK(outside->hosts == std::vector<HostSlots>{{"localhost", 3}});

  absl::StatusOr<JobHosts> too_many = ResolveJobHosts(Options(5), slurm, true);
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().message() ==
        "-np 5 is more than the 4 slots of the Slurm allocation (SLURM_JOB_NODELIST=n[1-2])");
}

}  // namespace
}  // namespace chorus::launcher
