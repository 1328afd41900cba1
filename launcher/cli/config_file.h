// File: launcher/cli/config_file.h
//
// --config-file: horovodrun's YAML layout of runtime parameters, e.g.
//
//   controller: mpi
//   params: {fusion_threshold_mb: 32, cycle_time_ms: 10, cache_capacity: 2048,
//            hierarchical_allreduce: true, hierarchical_allgather: false}
//   autotune: {enabled: true, log_file: f.csv, warmup_samples: 5, steps_per_sample: 20,
//              bayes_opt_max_samples: 50, gaussian_process_noise: 0.9}
//   timeline: {filename: t.json, mark_cycles: true}
//   stall_check: {enabled: true, warning_time_seconds: 120, shutdown_time_seconds: 240}
//   library_options: {mpi_threads_disable: true, num_nccl_streams: 2, thread_affinity: 1,
//                     gloo_timeout_seconds: 60}
//   logging: {level: INFO, with_timestamp: true}   # or hide_timestamp: true
//
// As in horovodrun, a value given on the command line wins over the file's. ccl_bgt_affinity (the
// key's name before Horovod 0.21) is an error naming thread_affinity. An unknown section or key and
// a value of the wrong type are errors naming the file and key, in one line (the YAML's own text
// shown with C escapes: chorusrun's messages are one line, launcher/cli/args.h).
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_CLI_CONFIG_FILE_H_
#define CHORUS_LAUNCHER_CLI_CONFIG_FILE_H_

#include <string>

#include "absl/status/status.h"

#include "launcher/options.h"

namespace chorus::launcher {

// Fills the fields of `options` that are still unset from YAML `text`; `file_name` labels errors.
absl::Status ApplyConfigYaml(const std::string& text, const std::string& file_name,
                             LaunchOptions* options);

// Reads `path` and applies it; NotFound when it cannot be read.
absl::Status ApplyConfigFile(const std::string& path, LaunchOptions* options);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_CLI_CONFIG_FILE_H_
