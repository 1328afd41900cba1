#include "launcher/mpi/mpirun_command.h"

#include <catch2/catch.hpp>

#include "launcher/cli/args.h"
#include "launcher/cli/worker_env.h"
#include "launcher/hosts/rank_layout.h"
#include "launcher/process/shell_words.h"

namespace chorus::launcher {
namespace {

using Args = std::vector<std::string>;

LaunchOptions Options(Args flags) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine(flags);
  INFO(cl.status().ToString());
  REQUIRE(cl.ok());
  return cl->options;
}

MpirunJob Job(const LaunchOptions& o, bool as_root, std::vector<HostSlots> hosts,
              const Environment& env = {{"PATH", "/usr/bin"}, {"HOME", "/root"}}) {
  MpirunJob job;
  job.as_root = as_root;
  job.hosts = std::move(hosts);
  job.environment = MpirunEnvironment(env, WorkerEnvironment(o), as_root);
  return job;
}

TEST_CASE("The default mpirun command", "[launcher][mpirun]") {
  LaunchOptions o = Options({"-np", "2", "prog", "--arg"});
  auto argv = BuildMpirunArgv(o, Job(o, /*as_root=*/false, {{"localhost", 2}}));
  REQUIRE(argv.ok());
  CHECK(*argv == Args{"mpirun", "--tag-output", "-np", "2", "-H", "localhost:2", "-bind-to", "none",
                      "-map-by", "slot", "-x", "HOME", "-x", "PATH", "prog", "--arg"});
}

TEST_CASE("As root, mpirun is allowed to run as root", "[launcher][mpirun]") {
  LaunchOptions o = Options({"-np", "3", "prog"});
  MpirunJob job = Job(o, /*as_root=*/true, {{"a", 2}, {"b", 1}});
  CHECK(job.environment.at("OMPI_ALLOW_RUN_AS_ROOT") == "1");
  CHECK(job.environment.at("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1");
  auto argv = BuildMpirunArgv(o, job);
  REQUIRE(argv.ok());
  CHECK(*argv == Args{"mpirun",
                      "--allow-run-as-root",
                      "--tag-output",
                      "-np",
                      "3",
                      "-H",
                      "a:2,b:1",
                      "-bind-to",
                      "none",
                      "-map-by",
                      "slot",
                      "-x",
                      "HOME",
                      "-x",
                      "OMPI_ALLOW_RUN_AS_ROOT",
                      "-x",
                      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
                      "-x",
                      "PATH",
                      "prog"});
  CHECK(Job(o, false, {{"a", 3}}).environment.count("OMPI_ALLOW_RUN_AS_ROOT") == 0);
}

TEST_CASE("Every flag that reaches mpirun, in order", "[launcher][mpirun]") {
  LaunchOptions o = Options(
      {"-np", "4", "--tcp", "-p", "2222", "-i", "/k/id", "--network-interfaces", "eth0,eth1",
       "--prefix-output-with-timestamp", "--output-filename", "/tmp/logs", "--fusion-threshold-mb",
       "32", "--mpi-args", "-mca btl_tcp_if_exclude lo --report-bindings", "python", "t.py"});
  const Environment env = {{"PATH", "/bin"},
                           {"LD_LIBRARY_PATH", "/lib"},
                           {"PYTHONPATH", "/py"},
                           {"HOROVOD_CYCLE_TIME", "3"},
                           {"NCCL_DEBUG", "INFO"},
                           {"HOME", "/root"},
                           {"CHORUS_LOG_LEVEL", "info"}};
  MpirunJob job = Job(o, /*as_root=*/false, {{"h1", 2}, {"h2", 2}}, env);
  auto argv = BuildMpirunArgv(o, job);
  REQUIRE(argv.ok());
  CHECK(*argv == Args{"mpirun",
                      "--tag-output",
                      "-np",
                      "4",
                      "-H",
                      "h1:2,h2:2",
                      "-bind-to",
                      "none",
                      "-map-by",
                      "slot",
                      "-mca",
                      "pml",
                      "ob1",
                      "-mca",
                      "btl",
                      "^openib",
                      "-mca",
                      "plm_rsh_args",
                      "-p 2222 -i /k/id",
                      "-mca",
                      "btl_tcp_if_include",
                      "eth0,eth1",
                      "--timestamp-output",
                      "--output-filename",
                      "/tmp/logs",
                      "-x",
                      "CHORUS_FUSION_THRESHOLD",
                      "-x",
                      "CHORUS_LOG_LEVEL",
                      "-x",
                      "HOME",
                      "-x",
                      "HOROVOD_CYCLE_TIME",
                      "-x",
                      "LD_LIBRARY_PATH",
                      "-x",
                      "NCCL_DEBUG",
                      "-x",
                      "NCCL_IB_DISABLE",
                      "-x",
                      "NCCL_SOCKET_IFNAME",
                      "-x",
                      "PATH",
                      "-x",
                      "PYTHONPATH",
                      "-x",
                      "UCX_TLS",
                      "-mca",
                      "btl_tcp_if_exclude",
                      "lo",
                      "--report-bindings",
                      "python",
                      "t.py"});
  CHECK(job.environment.at("CHORUS_FUSION_THRESHOLD") == "33554432");
  CHECK(job.environment.at("NCCL_SOCKET_IFNAME") == "eth0,eth1");
}

TEST_CASE("Flags win over the launcher's environment", "[launcher][mpirun]") {
  LaunchOptions o = Options({"-np", "1", "--cache-capacity", "5", "prog"});
  MpirunJob job = Job(o, false, {{"localhost", 1}}, {{"CHORUS_CACHE_CAPACITY", "99"}});
  CHECK(job.environment.at("CHORUS_CACHE_CAPACITY") == "5");
}

TEST_CASE("--binding-args replaces the default binding", "[launcher][mpirun]") {
  LaunchOptions o = Options({"-np", "2", "--binding-args", "--bind-to core --map-by socket", "p"});
  auto argv = BuildMpirunArgv(o, Job(o, false, {{"localhost", 2}}, {}));
  REQUIRE(argv.ok());
  CHECK(*argv == Args{"mpirun", "--tag-output", "-np", "2", "-H", "localhost:2", "--bind-to",
                      "core", "--map-by", "socket", "p"});
}

TEST_CASE("Malformed --mpi-args is InvalidArgument", "[launcher][mpirun]") {
  LaunchOptions o = Options({"-np", "2", "--mpi-args", "-mca 'x", "p"});
  auto argv = BuildMpirunArgv(o, Job(o, false, {{"localhost", 2}}));
  REQUIRE_FALSE(argv.ok());
  CHECK_THAT(std::string(argv.status().message()), Catch::StartsWith("--mpi-args: unterminated"));
}

TEST_CASE("ExportedNames: every variable but horovodrun's exclusions and this session's",
          "[launcher][mpirun]") {
  const Environment env = {{"CHORUS_X", "1"},
                           {"HOROVOD_Y", "1"},
                           {"NCCL_Z", "1"},
                           {"PATH", "/b"},
                           {"HOME", "/r"},
                           {"MYVAR", "a b\n'c' \"d\" =e \xc3\xa9"},
                           {"my.var", "1"},
                           {"CUDA_VISIBLE_DEVICES", "0,1"},
                           {"BASH_FUNC_module%%", "() { :; }"},
                           {"OLDPWD", "/o"},
                           {"OLDPWD_SAVED", "/o"},
                           {"_HOROVOD_SECRET_KEY", "k"},
                           {"CHORUS_RENDEZVOUS_SECRET", "s"},
                           {"CHORUS_RENDEZVOUS_ADDR", "h:1"},
                           {"HOSTNAME", "n0"},
                           {"PWD", "/w"},
                           {"_", "/usr/bin/chorusrun"},
                           {"SSH_AUTH_SOCK", "/tmp/a"},
                           {"SSH_AGENT_PID", "1"},
                           {"SSH_CLIENT", "c"},
                           {"SSH_CONNECTION", "c"},
                           {"SSH_TTY", "/dev/pts/0"},
                           {"SSH_ASKPASS", "/usr/bin/a"}};
  CHECK(ExportedNames(env) == Args{"CHORUS_RENDEZVOUS_ADDR", "CHORUS_X", "CUDA_VISIBLE_DEVICES",
                                   "HOME", "HOROVOD_Y", "MYVAR", "NCCL_Z", "PATH", "SSH_ASKPASS",
                                   "my.var"});
}

TEST_CASE("mpirun exports the caller's variables by name; their values stay in its environment",
          "[launcher][mpirun]") {
  const std::string awkward = "a b\n'c' \"d\" =e \xc3\xa9";
  LaunchOptions o = Options({"-np", "2", "--cache-capacity", "7", "prog"});
  MpirunJob job = Job(o, /*as_root=*/false, {{"n1", 1}, {"n2", 1}},
                      {{"PATH", "/usr/bin"}, {"MYVAR", awkward}, {"SSH_AUTH_SOCK", "/tmp/a"}});
  CHECK(job.environment.at("MYVAR") == awkward);
  CHECK(job.environment.at("SSH_AUTH_SOCK") == "/tmp/a");  // mpirun's own (its ssh uses it)
  auto argv = BuildMpirunArgv(o, job);
  REQUIRE(argv.ok());
  std::vector<std::string> exported;
  for (size_t i = 0; i + 1 < argv->size(); ++i) {
    if ((*argv)[i] == "-x") exported.push_back((*argv)[i + 1]);
  }
  CHECK(exported == Args{"CHORUS_CACHE_CAPACITY", "MYVAR", "PATH"});
  for (const std::string& word : *argv) CHECK(word.find(awkward) == std::string::npos);
}

TEST_CASE("ShellJoin quotes what a shell would split", "[launcher][mpirun]") {
  CHECK(ShellJoin({"mpirun", "-np", "2", "-H", "a:1,b:1", "-mca", "btl", "^openib"}) ==
        "mpirun -np 2 -H a:1,b:1 -mca btl ^openib");
  CHECK(ShellJoin({"sh", "-c", "echo $X; it's"}) == "sh -c 'echo $X; it'\\''s'");
  CHECK(ShellJoin({"a", ""}) == "a ''");
}

bool AsksToYield(const Args& argv) {
  for (size_t i = 0; i + 2 < argv.size(); ++i) {
    if (argv[i] == "-mca" && argv[i + 1] == "mpi_yield_when_idle" && argv[i + 2] == "1") {
      return true;
    }
  }
  return false;
}

TEST_CASE("Ranks on this machine are counted as -map-by slot places them", "[launcher][mpirun]") {
  const std::vector<HostSlots> hosts = {{"node1", 2}, {"localhost", 3}, {"myhost", 4}};
  CHECK(LocalRanks(hosts, 2, "myhost") == 0);  // both on node1
  CHECK(LocalRanks(hosts, 4, "myhost") == 2);
  CHECK(LocalRanks(hosts, 9, "myhost") == 7);
  CHECK(LocalRanks(hosts, 9, "other") == 3);  // "myhost" is not this machine
  CHECK(LocalRanks({}, 3, "myhost") == 0);
}

TEST_CASE("More local ranks than cores: waiting ranks yield, unless the user decided",
          "[launcher][mpirun]") {
  LaunchOptions o = Options({"-np", "3", "prog"});
  MpirunJob job = Job(o, false, {{"localhost", 3}});
  job.this_hostname = "myhost";
  job.local_cores = 2;
  auto argv = BuildMpirunArgv(o, job);
  REQUIRE(argv.ok());
  CHECK(AsksToYield(*argv));

  job.local_cores = 4;  // enough cores: Open MPI's default (spin) stays
  argv = BuildMpirunArgv(o, job);
  REQUIRE(argv.ok());
  CHECK_FALSE(AsksToYield(*argv));

  job.local_cores = 0;  // unknown: nothing is assumed
  argv = BuildMpirunArgv(o, job);
  REQUIRE(argv.ok());
  CHECK_FALSE(AsksToYield(*argv));

  job.local_cores = 2;
  job.hosts = {{"node1", 2}, {"node2", 1}};  // no rank here
  argv = BuildMpirunArgv(o, job);
  REQUIRE(argv.ok());
  CHECK_FALSE(AsksToYield(*argv));

  job.hosts = {{"localhost", 3}};
  job.environment["OMPI_MCA_mpi_yield_when_idle"] = "0";  // the user's choice wins
  argv = BuildMpirunArgv(o, job);
  REQUIRE(argv.ok());
  CHECK_FALSE(AsksToYield(*argv));

  LaunchOptions with_args = Options({"-np", "3", "--mpi-args=--mca mpi_yield_when_idle 0", "prog"});
  MpirunJob job2 = Job(with_args, false, {{"localhost", 3}});
  job2.local_cores = 2;
  argv = BuildMpirunArgv(with_args, job2);
  REQUIRE(argv.ok());
  CHECK_FALSE(AsksToYield(*argv));
}

TEST_CASE("mpirun reaches other hosts with ssh unless told otherwise", "[launcher][mpirun]") {
  const LaunchOptions plain = Options({"-np", "2", "prog"});
  CHECK(MpirunUsesSsh(plain, {{"PATH", "/usr/bin"}}));
  // Another launcher or agent, from the environment or --mpi-args; a Slurm job (srun).
  CHECK_FALSE(MpirunUsesSsh(plain, {{"OMPI_MCA_plm_rsh_agent", "/opt/rsh"}}));
  CHECK_FALSE(MpirunUsesSsh(plain, {{"OMPI_MCA_orte_rsh_agent", "rsh"}}));
  CHECK_FALSE(MpirunUsesSsh(plain, {{"OMPI_MCA_plm", "slurm"}}));
  CHECK_FALSE(MpirunUsesSsh(plain, {{"SLURM_JOB_ID", "42"}}));
  CHECK_FALSE(MpirunUsesSsh(plain, {{"SLURM_JOBID", "42"}}));
  CHECK_FALSE(MpirunUsesSsh(
      Options({"-np", "2", "--mpi-args", "-mca plm_rsh_agent /opt/rsh", "prog"}), {}));
  CHECK_FALSE(MpirunUsesSsh(Options({"-np", "2", "--mpi-args", "--mca plm isolated", "prog"}), {}));
  // Other MCA parameters leave ssh in place.
  CHECK(MpirunUsesSsh(Options({"-np", "2", "--mpi-args", "-mca plm_rsh_args '-x'", "prog"}), {}));
  CHECK(MpirunUsesSsh(plain, {{"OMPI_MCA_plm_rsh_args", "-x"}}));
}

TEST_CASE("Each rank's host is LayoutRanks' as -map-by slot places them", "[launcher][mpirun]") {
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 1}, {"c", 3}};
  LaunchOptions o = Options({"-np", "5", "prog"});
  const std::optional<std::vector<std::string>> got = MpirunRankHosts(o, Job(o, false, hosts));
  REQUIRE(got);
  CHECK(*got == std::vector<std::string>{"a", "a", "b", "c", "c"});
  absl::StatusOr<std::vector<RankPlacement>> layout = LayoutRanks(hosts, 5);
  REQUIRE(layout.ok());
  for (const RankPlacement& p : *layout) CHECK((*got)[p.rank] == p.host);
  // Oversubscription allowed changes nothing while -np fits the slots.
  CHECK(MpirunRankHosts(o, Job(o, false, hosts, {{"OMPI_MCA_rmaps_base_oversubscribe", "1"}})) ==
        got);
}

TEST_CASE("Where the mapping is not chorusrun's, no host is guessed", "[launcher][mpirun]") {
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 2}};
  for (const char* args :
       {"-map-by node", "--map-by=ppr:1:node", "-rank-by node", "--rankfile /tmp/rf", "-npernode 1",
        "-mca rmaps_base_mapping_policy node", "--bynode", "-H a:1,b:3"}) {
    INFO(args);
    LaunchOptions o = Options({"-np", "3", "--mpi-args", args, "prog"});
    CHECK_FALSE(MpirunRankHosts(o, Job(o, false, hosts)));
  }
  LaunchOptions binding = Options({"-np", "3", "--binding-args", "-bind-to core", "prog"});
  CHECK_FALSE(MpirunRankHosts(binding, Job(binding, false, hosts)));
  LaunchOptions o = Options({"-np", "3", "prog"});
  CHECK_FALSE(
      MpirunRankHosts(o, Job(o, false, hosts, {{"OMPI_MCA_rmaps_base_ranking_policy", "node"}})));
  // Other --mpi-args keep the layout.
  LaunchOptions tcp = Options({"-np", "3", "--mpi-args", "-mca btl_tcp_if_include eth0", "prog"});
  CHECK(MpirunRankHosts(tcp, Job(tcp, false, hosts)) == std::vector<std::string>{"a", "a", "b"});
}

}  // namespace
}  // namespace chorus::launcher
