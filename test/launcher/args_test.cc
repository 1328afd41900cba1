#include "launcher/cli/args.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/process/shell_words.h"

namespace chorus::launcher {
namespace {

using Args = std::vector<std::string>;

CommandLine ParseOk(const Args& args) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine(args);
  INFO(cl.status().ToString());
  REQUIRE(cl.ok());
  return *cl;
}

absl::Status ParseError(const Args& args) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine(args);
  REQUIRE_FALSE(cl.ok());
  CHECK(cl.status().message().find('\n') == std::string::npos);
  return cl.status();
}

TEST_CASE("The command starts at the first word that is not a flag", "[launcher][args]") {
  CommandLine cl =
      ParseOk({"-np", "4", "-H", "a:2,b:2", "python", "train.py", "-np", "3", "--verbose"});
  CHECK(cl.action == CommandLine::Action::kRun);
  CHECK(cl.options.num_proc == 4);
  CHECK(cl.options.hosts == "a:2,b:2");
  CHECK_FALSE(cl.options.verbose);
  CHECK(cl.options.command == Args{"python", "train.py", "-np", "3", "--verbose"});
}

TEST_CASE("Horovod's spellings of -np are accepted", "[launcher][args]") {
  const Args prefix = GENERATE(Args{"-np", "3"}, Args{"-np=3"}, Args{"--num-proc", "3"},
                               Args{"--num-proc=3"}, Args{"-n", "3"}, Args{"-n3"});
  Args args = prefix;
  args.push_back("true");
  CommandLine cl = ParseOk(args);
  CHECK(cl.options.num_proc == 3);
  CHECK(cl.options.command == Args{"true"});
}

TEST_CASE("-- ends chorusrun's flags", "[launcher][args]") {
  CommandLine cl = ParseOk({"-np", "2", "--", "--weird-program", "x"});
  CHECK(cl.options.command == Args{"--weird-program", "x"});
}

TEST_CASE("Flag values that look like flags stay values", "[launcher][args]") {
  CommandLine cl = ParseOk({"-np", "2", "--mpi-args", "-mca btl self,vader --report-bindings",
                            "--binding-args=--bind-to core", "prog"});
  CHECK(cl.options.mpi_args == "-mca btl self,vader --report-bindings");
  CHECK(cl.options.binding_args == "--bind-to core");
  CHECK(cl.options.command == Args{"prog"});
}

TEST_CASE("Unset flags leave the runtime defaults", "[launcher][args]") {
  CommandLine cl = ParseOk({"-np", "1", "prog"});
  const LaunchOptions& o = cl.options;
  CHECK_FALSE(o.hosts);
  CHECK_FALSE(o.hostfile);
  CHECK_FALSE(o.fusion_threshold_mb);
  CHECK_FALSE(o.cycle_time_ms);
  CHECK_FALSE(o.cache_capacity);
  CHECK_FALSE(o.hierarchical_allreduce);
  CHECK_FALSE(o.no_stall_check);
  CHECK_FALSE(o.log_level);
  CHECK_FALSE(o.tcp);
  CHECK(o.network_interfaces.empty());
}

TEST_CASE("Tuning, stall and library flags parse", "[launcher][args]") {
  CommandLine cl = ParseOk({"-np",
                            "2",
                            "--fusion-threshold-mb",
                            "64",
                            "--cycle-time-ms",
                            "2.5",
                            "--cache-capacity",
                            "0",
                            "--no-hierarchical-allreduce",
                            "--no-hierarchical-allgather",
                            "--no-stall-check",
                            "--stall-check-warning-time-seconds",
                            "30",
                            "--stall-check-shutdown-time-seconds",
                            "90",
                            "--log-level",
                            "DEBUG",
                            "--tcp",
                            "--network-interfaces",
                            "eth0,eth1",
                            "--network-interface",
                            "eth1",
                            "--network-interface",
                            "ib0",
                            "-p",
                            "2222",
                            "-i",
                            "/k/id_rsa",
                            "--output-filename",
                            "/tmp/out",
                            "--prefix-output-with-timestamp",
                            "--start-timeout",
                            "60",
                            "--timeline-filename",
                            "/tmp/t.json",
                            "--timeline-mark-cycles",
                            "--no-mpi-threads-disable",
                            "--autotune",
                            "--autotune-log-file",
                            "/tmp/at.csv",
                            "--autotune-warmup-samples",
                            "0",
                            "--autotune-steps-per-sample",
                            "4",
                            "--autotune-bayes-opt-max-samples",
                            "12",
                            "--autotune-gaussian-process-noise",
                            "0.25",
                            "--mpi",
                            "prog"});
  const LaunchOptions& o = cl.options;
  CHECK(o.autotune == true);
  CHECK(o.autotune_log_file == "/tmp/at.csv");
  CHECK(o.autotune_warmup_samples == 0);
  CHECK(o.autotune_steps_per_sample == 4);
  CHECK(o.autotune_bayes_opt_max_samples == 12);
  CHECK(o.autotune_gaussian_process_noise == 0.25);
  CHECK(o.fusion_threshold_mb == 64);
  CHECK(o.cycle_time_ms == 2.5);
  CHECK(o.cache_capacity == 0);
  CHECK(o.hierarchical_allreduce == false);
  CHECK(o.hierarchical_allgather == false);
  CHECK(o.no_stall_check == true);
  CHECK(o.stall_check_warning_time_seconds == 30);
  CHECK(o.stall_check_shutdown_time_seconds == 90);
  CHECK(o.log_level == "debug");
  CHECK(o.tcp);
  CHECK(o.network_interfaces == Args{"eth0", "eth1", "ib0"});
  CHECK(o.ssh_port == 2222);
  CHECK(o.ssh_identity_file == "/k/id_rsa");
  CHECK(o.output_filename == "/tmp/out");
  CHECK(o.prefix_output_with_timestamp);
  CHECK(o.start_timeout_s == 60);
  CHECK(o.timeline_filename == "/tmp/t.json");
  CHECK(o.timeline_mark_cycles == true);
  CHECK(o.mpi_threads_disable == false);
}

TEST_CASE("Flags chorus cannot honour are refused with the reason", "[launcher][args]") {
  auto [flags, expected] = GENERATE(table<std::vector<std::string>, std::string>({
      {{"--mpi-threads-disable"}, "--mpi-threads-disable is not supported: chorus calls MPI"},
      {{"--thread-affinity", "1,x"}, "--thread-affinity=1,x is not a comma-separated list"},
      {{"--thread-affinity", "-1"}, "--thread-affinity=-1 is not a comma-separated list"},
  }));
  std::vector<std::string> args = {"-np", "2"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back("prog");
  absl::StatusOr<CommandLine> cl = ParseCommandLine(args);
  REQUIRE_FALSE(cl.ok());
  CHECK(cl.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(cl.status().message()), Catch::StartsWith(expected));
}

TEST_CASE("--hierarchical-allreduce and --hierarchical-allgather are accepted",
          "[launcher][args]") {
  CommandLine cl =
      ParseOk({"-np", "4", "--hierarchical-allreduce", "--hierarchical-allgather", "prog"});
  CHECK(cl.options.hierarchical_allreduce == true);
  CHECK(cl.options.hierarchical_allgather == true);
}

TEST_CASE("--stall-check undoes nothing but sets the check on", "[launcher][args]") {
  CommandLine cl = ParseOk({"-np", "2", "--stall-check", "prog"});
  CHECK(cl.options.no_stall_check == false);
}

TEST_CASE("Single-dash horovod names", "[launcher][args]") {
  CommandLine cl = ParseOk({"-np", "2", "-hostfile", "/h", "-prefix-timestamp", "prog"});
  CHECK(cl.options.hostfile == "/h");
  CHECK(cl.options.prefix_output_with_timestamp);
  CHECK(ParseOk({"-cb"}).action == CommandLine::Action::kCheckBuild);
}

TEST_CASE("--version, --check-build and --help need no -np", "[launcher][args]") {
  CHECK(ParseOk({"-v"}).action == CommandLine::Action::kVersion);
  CHECK(ParseOk({"--version"}).action == CommandLine::Action::kVersion);
  CHECK(ParseOk({"--check-build", "--verbose"}).action == CommandLine::Action::kCheckBuild);
  CommandLine help = ParseOk({"--help"});
  CHECK(help.action == CommandLine::Action::kHelp);
  CHECK_THAT(help.help_text, Catch::Contains("--fusion-threshold-mb"));
}

TEST_CASE("Bad input is one-line InvalidArgument", "[launcher][args]") {
  auto [args, expected] = GENERATE(table<Args, std::string>({
      {{"prog"}, "-np/--num-proc is required"},
      {{"-np", "2"}, "no command given"},
      {{"-np", "0", "prog"}, "-np=0 is out of range"},
      {{"-np", "x", "prog"}, "num-proc"},
      {{"-np"}, "num-proc"},
      {{"-np", "2", "--bogus", "prog"}, "unrecognized argument '--bogus'"},
      {{"-np", "2", "-Z", "prog"}, "unrecognized argument '-Z'"},
      {{"-np", "2", "--fusion-threshold-mb", "-1", "prog"}, "--fusion-threshold-mb=-1 is out"},
      {{"-np", "2", "--cycle-time-ms", "0", "prog"}, "--cycle-time-ms=0 is out of range"},
      {{"-np", "2", "--cache-capacity", "2000000", "prog"}, "--cache-capacity=2000000 is out"},
      {{"-np", "2", "--stall-check-warning-time-seconds", "-5", "prog"},
       "--stall-check-warning-time-seconds=-5 is out"},
      {{"-np", "2", "--ssh-port", "70000", "prog"}, "--ssh-port=70000 is out of range"},
      {{"-np", "2", "--start-timeout", "0", "prog"}, "--start-timeout=0 is out of range"},
      {{"-np", "2", "--autotune-gaussian-process-noise", "1.5", "prog"},
       "--autotune-gaussian-process-noise=1.5 is out"},
      {{"-np", "2", "--autotune-warmup-samples", "-1", "prog"},
       "--autotune-warmup-samples=-1 is out"},
      {{"-np", "2", "--autotune-steps-per-sample", "0", "prog"},
       "--autotune-steps-per-sample=0 is out"},
      {{"-np", "2", "--autotune-bayes-opt-max-samples", "0", "prog"},
       "--autotune-bayes-opt-max-samples=0 is out"},
      {{"-np", "2", "--log-level", "LOUD", "prog"}, "--log-level=LOUD is not one of"},
      {{"-np", "2", "-H", "a:1", "--hostfile", "f", "prog"}, "excludes"},
      {{"-np", "2", "--hierarchical-allreduce", "--no-hierarchical-allreduce", "prog"}, "excludes"},
  }));
  INFO("args[0..]: " << args.size());
  absl::Status status = ParseError(args);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains(expected));
}

TEST_CASE("--jsrun is Unimplemented", "[launcher][args]") {
  absl::Status status = ParseError({"-np", "2", "--jsrun", "prog"});
  CHECK(status.code() == absl::StatusCode::kUnimplemented);
  CHECK_THAT(std::string(status.message()), Catch::Contains("--jsrun is not supported"));
}

TEST_CASE("Elastic flags parse, with their aliases, and imply --gloo", "[launcher][args]") {
  auto cl =
      ParseCommandLine({"-np", "2", "--min-num-proc", "1", "--max-num-proc", "4", "--slots", "3",
                        "--elastic-timeout", "7", "--reset-limit", "0", "--host-discovery-script",
                        "d.sh", "--blacklist-cooldown-range", "1", "5", "prog", "x"});
  REQUIRE(cl.ok());
  const LaunchOptions& o = cl->options;
  CHECK(o.is_elastic);
  CHECK(o.gloo);
  CHECK(o.elastic.min_np == 1);
  CHECK(o.elastic.max_np == 4);
  CHECK(o.elastic.slots_per_host == 3);
  CHECK(o.elastic.elastic_timeout_s == 7);
  CHECK(o.elastic.reset_limit == 0);
  CHECK(o.elastic.discovery_script == "d.sh");
  CHECK(o.elastic.blacklist_cooldown_s == std::make_pair(1, 5));
  CHECK(o.command == Args{"prog", "x"});

  auto fixed = ParseCommandLine({"-np", "2", "-H", "a:2,b:2", "--min-np", "1", "prog"});
  REQUIRE(fixed.ok());
  CHECK(fixed->options.is_elastic);
  CHECK(fixed->options.gloo);
  auto plain = ParseCommandLine({"-np", "2", "prog"});
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->options.is_elastic);
}

TEST_CASE("Inconsistent elastic values are InvalidArgument", "[launcher][args]") {
  auto [args, expected] = GENERATE(table<Args, std::string>({
      {{"-np", "2", "--min-np", "3", "prog"}, "--min-np=3 is larger than -np=2"},
      {{"-np", "5", "--max-np", "4", "prog"}, "-np=5 is larger than --max-np=4"},
      {{"-np", "2", "--min-np", "0", "prog"}, "--min-np=0 is out of range"},
      {{"-np", "2", "--max-np", "-1", "prog"}, "--max-np=-1 is out of range"},
      {{"-np", "2", "--slots", "0", "prog"}, "--slots-per-host=0 is out of range"},
      {{"-np", "2", "--elastic-timeout", "0", "prog"}, "--elastic-timeout=0 is out of range"},
      {{"-np", "2", "--reset-limit", "-1", "prog"}, "--reset-limit=-1 is out of range"},
      {{"-np", "2", "--blacklist-cooldown-range", "5", "1", "prog"}, "MIN is larger than MAX"},
      {{"-np", "2", "--blacklist-cooldown-range", "0", "1", "prog"}, "seconds >= 1"},
      {{"-np", "2", "--host-discovery-script", "d", "-H", "a", "prog"}, "exclude each other"},
      {{"-np", "2", "--mpi", "--min-np", "1", "prog"}, "Open MPI 4.1 cannot resize a world"},
  }));
  absl::Status status = ParseError(args);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains(expected));
}

TEST_CASE("--blacklist-cooldown-range takes exactly two values", "[launcher][args]") {
  // The command after the two values is not swallowed.
  auto cl = ParseCommandLine({"-np", "2", "--blacklist-cooldown-range", "1", "2", "prog"});
  REQUIRE(cl.ok());
  CHECK(cl->options.command == Args{"prog"});
}

TEST_CASE("ShellSplit splits like a shell", "[launcher][args]") {
  auto [text, words] = GENERATE(table<std::string, Args>({
      {"", {}},
      {"   ", {}},
      {"-mca btl self,vader", {"-mca", "btl", "self,vader"}},
      {"  a\tb  ", {"a", "b"}},
      {"--map-by 'ppr:6:node' \"x y\"", {"--map-by", "ppr:6:node", "x y"}},
      {"a\\ b c", {"a b", "c"}},
      {"\"say \\\"hi\\\"\"", {"say \"hi\""}},
      {"''", {""}},
      {"pre'mid'post", {"premidpost"}},
  }));
  auto split = ShellSplit(text);
  REQUIRE(split.ok());
  CHECK(*split == words);
}

TEST_CASE("ShellSplit rejects unterminated quotes", "[launcher][args]") {
  const std::string text = GENERATE(as<std::string>{}, "'abc", "a \"b", "\"a\\\"");
  CHECK_FALSE(ShellSplit(text).ok());
}

TEST_CASE("--gloo selects the MPI-less mode", "[launcher][args]") {
  CHECK_FALSE(ParseOk({"-np", "2", "prog"}).options.gloo);
  CHECK_FALSE(ParseOk({"-np", "2", "--mpi", "prog"}).options.gloo);
  const CommandLine cl = ParseOk({"-np", "3", "--gloo", "-H", "a:2,b:1", "--start-timeout", "7",
                                  "--output-filename", "out", "prog", "--gloo"});
  CHECK(cl.options.gloo);
  CHECK(cl.options.num_proc == 3);
  CHECK(cl.options.start_timeout_s == 7);
  CHECK(cl.options.output_filename == "out");
  CHECK(cl.options.command == Args{"prog", "--gloo"});
}

TEST_CASE("--gloo rejects mpirun-only and conflicting flags", "[launcher][args]") {
  auto [args, expected] = GENERATE(table<Args, std::string>({
      {{"-np", "2", "--gloo", "--mpi-args=-mca x y", "prog"},
       "--mpi-args is for mpirun and has no effect with --gloo"},
      {{"-np", "2", "--gloo", "--binding-args", "-bind-to core", "prog"},
       "--binding-args is for mpirun and has no effect with --gloo"},
      {{"-np", "2", "--gloo", "--mpi", "prog"}, "excludes"},
  }));
  INFO(args[2] << " " << args[3]);
  absl::Status status = ParseError(args);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains(expected));
}

TEST_CASE("--help describes --gloo and its output layout", "[launcher][args]") {
  const CommandLine cl = ParseOk({"--help"});
  CHECK_THAT(cl.help_text, Catch::Contains("chorusrun starts the workers itself"));
  CHECK_THAT(cl.help_text, Catch::Contains("DIR/rank.<r>/stdout"));
}

}  // namespace
}  // namespace chorus::launcher
