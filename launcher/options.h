// File: launcher/options.h
//
// Everything chorusrun's command line says, as parsed by ParseCommandLine (launcher/cli/args.h).
// An unset optional means "flag not given": the worker then sees no variable for it and the
// runtime's default applies (runtime/config.h).
//
// Thread-safety: a plain value (thread-compatible).
#ifndef CHORUS_LAUNCHER_OPTIONS_H_
#define CHORUS_LAUNCHER_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace chorus::launcher {

struct LaunchOptions {
  int num_proc = 0;
  // --gloo: MPI-less mode; chorusrun starts the workers itself (launcher/engine/job_engine.h).
  bool gloo = false;
  std::optional<std::string> hosts;     // -H/--hosts, unparsed
  std::optional<std::string> hostfile;  // --hostfile path
  bool verbose = false;
  std::optional<int>
      start_timeout_s;  // unset: HOROVOD_START_TIMEOUT, else 30 (MPI mode: ssh checks)
  std::vector<std::string> network_interfaces;  // --network-interface(s), in order, unique
  // MPI mode: mpirun's --output-filename; --gloo: DIR/rank.<r>/{stdout,stderr}.
  std::optional<std::string> output_filename;
  std::optional<int> ssh_port;
  std::optional<std::string> ssh_identity_file;
  std::optional<std::string> mpi_args;      // --mpi-args, split like a shell does
  std::optional<std::string> binding_args;  // replaces "-bind-to none -map-by slot"
  bool tcp = false;
  bool prefix_output_with_timestamp = false;
  std::optional<std::string> config_file;  // --config-file (YAML); flags given win over it

  // Tunables (horovodrun's "tuneable parameter arguments").
  std::optional<int64_t> fusion_threshold_mb;
  std::optional<double> cycle_time_ms;
  std::optional<int> cache_capacity;
  std::optional<bool> hierarchical_allreduce;
  std::optional<bool> hierarchical_allgather;

  // Autotune.
  std::optional<bool> autotune;
  std::optional<std::string> autotune_log_file;
  std::optional<int> autotune_warmup_samples;
  std::optional<int> autotune_steps_per_sample;
  std::optional<int> autotune_bayes_opt_max_samples;
  std::optional<double> autotune_gaussian_process_noise;

  // Timeline.
  std::optional<std::string> timeline_filename;
  std::optional<bool> timeline_mark_cycles;

  // Stall check.
  std::optional<bool> no_stall_check;
  std::optional<int> stall_check_warning_time_seconds;
  std::optional<int> stall_check_shutdown_time_seconds;

  // Library options.
  std::optional<bool> mpi_threads_disable;
  std::optional<int> num_nccl_streams;
  // --thread-affinity: a core id, or a comma-separated list of them (one per local rank).
  std::optional<std::string> thread_affinity;
  std::optional<int> gloo_timeout_seconds;

  // Logging: trace, debug, info, warning, error, fatal (lower case).
  std::optional<std::string> log_level;
  std::optional<bool> log_with_timestamp;

  // Elastic training (horovodrun's elastic flags). Any of them makes the job elastic, which
  // implies --gloo (launcher/engine/job_engine.h); --mpi given with them is an error.
  struct Elastic {
    std::optional<int> min_np;                    // --min-np/--min-num-proc; unset: -np
    std::optional<int> max_np;                    // --max-np/--max-num-proc; unset: no cap
    std::optional<int> slots_per_host;            // --slots-per-host/--slots; unset: 1
    std::optional<int> elastic_timeout_s;         // unset: HOROVOD_ELASTIC_TIMEOUT, else 600
    std::optional<int> reset_limit;               // unset: no limit
    std::optional<std::string> discovery_script;  // --host-discovery-script
    std::optional<std::pair<int, int>> blacklist_cooldown_s;  // MIN MAX seconds
  };
  Elastic elastic;
  // True when any elastic flag was given.
  bool is_elastic = false;

  // The command each worker runs: program and arguments, verbatim.
  std::vector<std::string> command;
};

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_OPTIONS_H_
