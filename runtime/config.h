// File: runtime/config.h
//
// Every tunable of the runtime, read once from the environment at Init() and passed down as a
// value. runtime/config.cc is the only file of chorus that reads the environment. Each
// CHORUS_* variable also accepts its Horovod name (HOROVOD_*) as an alias; when both are set the
// CHORUS_* one wins. A malformed or out-of-range value is an InvalidArgument naming the variable
// and the accepted values.
//
// Thread-safety: a plain value (thread-compatible).
#ifndef CHORUS_RUNTIME_CONFIG_H_
#define CHORUS_RUNTIME_CONFIG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chorus::runtime {

struct Config {
  // Max bytes of small tensors packed into one fused collective; 0 disables fusion.
  // CHORUS_FUSION_THRESHOLD (bytes; HOROVOD_FUSION_THRESHOLD). Default 128 MiB.
  int64_t fusion_threshold_bytes = int64_t{128} << 20;
  // Batching window of the background loop while work is pending; it ends early once local
  // submissions pause (checked after 50 µs, then at doubling intervals).
  // CHORUS_CYCLE_TIME_MS (milliseconds, may be fractional; HOROVOD_CYCLE_TIME). Default 1.
  absl::Duration cycle_time = absl::Milliseconds(1);
  // Response cache entries; 0 disables the cache.
  // CHORUS_CACHE_CAPACITY (HOROVOD_CACHE_CAPACITY). Default 4096 (Horovod's is 1024): a job
  // whose steps cycle through more distinct tensors than the capacity misses the LRU cache on
  // every one of them (a model of 1161 gradients renegotiated a quarter of them each step at
  // 1024); the bit vector costs 3 bits per entry per cycle.
  int32_t cache_capacity = 4096;
  // A fused batch is reduced in pieces of this many bytes (see Note [Pipelined fusion] in
  // docs/fusion.md). CHORUS_PIPELINE_CHUNK_BYTES. Default 4 MiB. Must be >= 4 KiB.
  int64_t pipeline_chunk_bytes = int64_t{4} << 20;
  // Tensors of at least this many bytes are reduced in place instead of being copied into the
  // fusion buffer. CHORUS_INPLACE_MIN_BYTES. Default 256 KiB.
  int64_t inplace_min_bytes = int64_t{256} << 10;
  // CPU tensors of at least 2 MiB reduced in place have the 2 MiB pages they overlap collapsed
  // into transparent huge pages first, and the fusion buffer is mapped on huge pages (Note
  // [Huge pages for large tensors] in docs/fusion.md). CHORUS_HUGE_PAGES. Default true.
  bool huge_pages = true;
  // GPU tensors: NCCL streams (each with its own communicator and fusion buffer) per process
  // set; fused batches take them in turn, so consecutive batches may overlap on the device.
  // CHORUS_NUM_NCCL_STREAMS (HOROVOD_NUM_NCCL_STREAMS). Default 1, at most 16.
  int32_t num_nccl_streams = 1;
  // Seconds after which the coordinator warns about a tensor some ranks have not submitted;
  // CHORUS_STALL_CHECK_TIME_SECONDS (HOROVOD_STALL_CHECK_TIME_SECONDS). Default 60.
  absl::Duration stall_warning_time = absl::Seconds(60);
  // Seconds after which stalled ops fail with DeadlineExceeded on every rank; 0 = never.
  // CHORUS_STALL_SHUTDOWN_TIME_SECONDS (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS). Default 0.
  absl::Duration stall_shutdown_time = absl::ZeroDuration();
  // Disables the stall inspector. CHORUS_STALL_CHECK_DISABLE (HOROVOD_STALL_CHECK_DISABLE).
  bool stall_check_disabled = false;
  // Note [Flight recorder] (runtime/flight/flight_recorder.h): the batches each rank remembers
  // (CHORUS_FLIGHT_RECORDER_ENTRIES; default 2048, about 560 bytes each; at most 100000; 0: none,
  // and no dumps), and the directory
  // its dumps go to (CHORUS_FLIGHT_RECORDER_DIR; empty: chorus-flight under $TMPDIR or /tmp).
  int32_t flight_recorder_entries = 2048;
  std::string flight_recorder_dir;
  // Note [Batch metrics]: the base port chorus.metrics serves Prometheus metrics on (each process
  // on it + its local rank; CHORUS_METRICS_PORT, read by the Python package); 0: none.
  int32_t metrics_port = 0;
  // How long an idle background loop sleeps between cycles when no rank has work; it wakes
  // at once when work is submitted locally. CHORUS_IDLE_CYCLE_MS. Default 20.
  absl::Duration idle_cycle_time = absl::Milliseconds(20);
  // MPI: how long the background loop may wait on its peers without any of its MPI calls
  // completing (a negotiation collective, a piece of a fused batch, ...) before the peer is
  // presumed lost and the job is ended with MPI_Abort, naming the ranks it waited on; zero
  // disables the bound (Note [No-progress bound] in runtime/progress/progress_watchdog.h). Must
  // exceed twice the idle cycle time and the cycle time (a peer with nothing to do checks in only
  // once per cycle). The UCX transport applies the same bound
  // (UcxTransportOptions::no_progress_timeout, set from this in controller_factory.cc), and so
  // does the GPU path to each launched batch (GpuBatch::deadline: its communicators are aborted).
  // CHORUS_NO_PROGRESS_TIMEOUT_SECONDS. Default 30: a live peer completes a call every few ms
  // (a 4 MiB piece crosses a 100 Mbit/s link in under a second), a dead one is noticed within
  // half a minute.
  absl::Duration no_progress_timeout = absl::Seconds(30);
  // Hierarchical allreduce (Horovod's): reduce-scatter among the ranks of each host, allreduce
  // of each slice among the ranks with the same local rank on every host, allgather within the
  // host; for process sets with the same number of ranks on each of several hosts, else the flat
  // algorithm (one warning). CPU (MPI and UCX) and GPU (NCCL) tensors. Agreed at init (rank 0's
  // value); the loop hands it to the data plane per batch (docs/hierarchical.md).
  // CHORUS_HIERARCHICAL_ALLREDUCE (HOROVOD_HIERARCHICAL_ALLREDUCE). Default false.
  bool hierarchical_allreduce = false;
  // Hierarchical allgather of CPU tensors: gather within the host, exchange among the hosts'
  // first ranks, broadcast within the host; same conditions.
  // CHORUS_HIERARCHICAL_ALLGATHER (HOROVOD_HIERARCHICAL_ALLGATHER). Default false.
  bool hierarchical_allgather = false;
  // Autotune (docs/autotune.md): rank 0 searches the fusion threshold, pipeline chunk size,
  // in-place minimum and cycle time (and hierarchical allreduce where it applies) for the most
  // bytes reduced per second, and every rank switches to each point it tries in the same cycle.
  // The values above are where the search starts. CHORUS_AUTOTUNE (HOROVOD_AUTOTUNE). Default
  // false.
  bool autotune = false;
  // Rank 0 appends one CSV line per sample to this file (the format is in docs/autotune.md);
  // empty: no file. CHORUS_AUTOTUNE_LOG (HOROVOD_AUTOTUNE_LOG).
  std::string autotune_log;
  // Samples measured and discarded before the search, at the starting point.
  // CHORUS_AUTOTUNE_WARMUP_SAMPLES (HOROVOD_AUTOTUNE_WARMUP_SAMPLES). Default 3.
  int32_t autotune_warmup_samples = 3;
  // Training steps per sample (a step ends where a tensor name repeats: docs/autotune.md).
  // CHORUS_AUTOTUNE_STEPS_PER_SAMPLE (HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE). Default 10, >= 1.
  int32_t autotune_steps_per_sample = 10;
  // Samples of the Bayesian optimisation, the starting point's included; then the best is kept.
  // CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES (HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES). Default 20,
  // >= 1.
  int32_t autotune_bayes_opt_max_samples = 20;
  // The Gaussian process's noise: the variance of a sample's score around the model, in units
  // of the variance of the scores seen, in [0, 1]. CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE
  // (HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE). Default 0.8.
  double autotune_gaussian_process_noise = 0.8;
  // trace, debug, info, warning, error. CHORUS_LOG_LEVEL (HOROVOD_LOG_LEVEL). Default warning.
  std::string log_level = "warning";
  // Log lines without a timestamp. CHORUS_LOG_HIDE_TIME (HOROVOD_LOG_HIDE_TIME). Default true
  // (chorusrun --log-with-timestamp sets it to 0).
  bool log_hide_time = true;
  // The core each local rank's background thread is pinned to: CHORUS_THREAD_AFFINITY
  // (HOROVOD_THREAD_AFFINITY), a comma-separated list of core ids, one per local rank (local
  // rank i uses the i-th); a list shorter than the local size is ignored with a warning, as in
  // Horovod. Empty: not pinned.
  std::vector<int> thread_affinity;
  // Rank 0 logs the effective configuration at init. CHORUS_PRINT_CONFIG. Default false.
  bool print_config = false;

  // Timeline (docs/timeline.md). CHORUS_TIMELINE (HOROVOD_TIMELINE): a file to record from
  // init on, or "DYNAMIC" to allow start_timeline() only; empty: no timeline.
  std::string timeline;
  // CYCLE_START marks. CHORUS_TIMELINE_MARK_CYCLES (HOROVOD_TIMELINE_MARK_CYCLES).
  bool timeline_mark_cycles = false;
  // Every rank records (else rank 0 only, unless the path has {rank}). CHORUS_TIMELINE_ALL_RANKS.
  bool timeline_all_ranks = false;
  // Cap per timeline file in bytes; 0 = none. CHORUS_TIMELINE_MAX_MB (MiB, may be fractional).
  int64_t timeline_max_bytes = 0;
  // Events waiting for the writer thread before more are dropped. CHORUS_TIMELINE_QUEUE_EVENTS.
  int64_t timeline_queue_events = 262144;
  // Record background cycles start <= c < stop only; stop 0 = no end.
  // CHORUS_TIMELINE_START_CYCLE, CHORUS_TIMELINE_STOP_CYCLE.
  int64_t timeline_start_cycle = 0;
  int64_t timeline_stop_cycle = 0;

  // The control and data plane. CHORUS_CONTROLLER: "auto" (UCX when chorusrun started the job
  // without MPI, i.e. CHORUS_RENDEZVOUS_ADDR is set; else MPI), "mpi", or "ucx" (UCX collectives;
  // under mpirun the ranks exchange their UCX addresses over MPI). Default auto.
  std::string controller = "auto";
  // MPI-less launches (set by chorusrun --gloo for each worker): the rendezvous service
  // ("host:port"), the job's secret, the scope of this world's keys, and how long to wait for
  // every rank to join. CHORUS_RENDEZVOUS_ADDR, CHORUS_RENDEZVOUS_SECRET,
  // CHORUS_RENDEZVOUS_SCOPE (default "world/0"), CHORUS_START_TIMEOUT_SECONDS (default 30).
  std::string rendezvous_addr;
  std::string rendezvous_secret;
  std::string rendezvous_scope = "world/0";
  absl::Duration start_timeout = absl::Seconds(30);
  // Workers chorusrun starts without MPI: this worker's id, with which it heartbeats chorusrun
  // (CHORUS_ELASTIC_WORKER_ID; empty: no membership watcher), the generation its world belongs
  // to, sent with every rendezvous call (stale ones are refused; CHORUS_ELASTIC_GENERATION,
  // default 0; -1: a worker joining an elastic job, whose init waits for a generation that
  // places it), whether the job is elastic (CHORUS_ELASTIC=1: a reset adopts chorusrun's next
  // generation; a fixed-size job's worker re-forms the same world) and how long an elastic
  // worker waits for chorusrun (CHORUS_ELASTIC_TIMEOUT, HOROVOD_ELASTIC_TIMEOUT; default 600 s).
  // Membership changes: runtime/elastic/membership_watcher.h.
  std::string elastic_worker_id;
  int64_t elastic_generation = 0;
  bool elastic = false;
  absl::Duration elastic_timeout = absl::Seconds(600);
  // This worker's place in an MPI-less job (chorusrun --gloo sets them; -1 = unset):
  // CHORUS_RANK, CHORUS_SIZE, CHORUS_LOCAL_RANK, CHORUS_LOCAL_SIZE, CHORUS_CROSS_RANK,
  // CHORUS_CROSS_SIZE (HOROVOD_RANK, ... as aliases).
  int32_t launch_rank = -1;
  int32_t launch_size = -1;
  int32_t launch_local_rank = -1;
  int32_t launch_local_size = -1;
  int32_t launch_cross_rank = -1;
  int32_t launch_cross_size = -1;

  // True when this process must use the UCX controller.
  bool UsesUcx() const {
    return controller == "ucx" || (controller == "auto" && !rendezvous_addr.empty());
  }

  // An elastic worker's place in a new generation, as chorusrun published it and the membership
  // watcher adopted it (CHORUS_RANK, ..., CHORUS_RENDEZVOUS_SCOPE, CHORUS_ELASTIC_GENERATION):
  // each variable of `place` replaces this config's value, parsed as FromEnvironment parses it.
  // The process environment is not read. InvalidArgument naming a malformed variable.
  absl::Status Adopt(const std::map<std::string, std::string>& place);

  // Reads the variables through `lookup` (returns null when a variable is unset); the default
  // lookup is the process environment.
  using Lookup = std::function<const char*(const char*)>;
  static absl::StatusOr<Config> FromEnvironment(const Lookup& lookup = nullptr);
  // Every variable that parses, each bad one left at its default: enough to form the world
  // (this rank's place, its peers' addresses) and fail there with FromEnvironment's error.
  static Config FromEnvironmentLenient(const Lookup& lookup = nullptr);

  // One "NAME=value" line per field, in a stable order (for CHORUS_PRINT_CONFIG).
  std::vector<std::string> Describe() const;

  // A variable FromEnvironment reads, as documented (docs/configuration.md; the worker's place
  // that chorusrun sets: launcher/README.md), for the check that the documents say what the
  // code does (test/unit/config_docs_test.cc).
  struct VariableInfo {
    std::string name;                  // CHORUS_*
    std::vector<std::string> aliases;  // Horovod's names
    std::string help;                  // one line
    std::string default_value;         // as the variable would give it; "" when unset
  };
  static std::vector<VariableInfo> Variables();

  // Whether FromEnvironment reads variable `name` (a CHORUS_* name or a HOROVOD_* alias).
  static bool Reads(const std::string& name);
  // The CHORUS_* and HOROVOD_* variables set in the process environment that chorus does not
  // read (Horovod's features chorus lacks, misspellings), sorted: they have no effect, and init
  // says so once on rank 0. Excepted: the names chorusrun sets for the workers' programs
  // (config_names::kInformational and their HOROVOD_* copies), chorusrun's own settings, and
  // CHORUS_TEST_* (chorus's tests).
  static std::vector<std::string> UnreadVariables();
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_CONFIG_H_
