// File: base/config_names.h
//
// The names of the CHORUS_* variables that cross from chorusrun to its workers: the launcher
// writes them (launcher/cli/worker_env.cc, launcher/engine/rank_env.cc,
// launcher/engine/worker_fleet.cc) and the runtime reads them (runtime/config.cc). Named once here
// so that the two sides cannot drift (test/unit/config_names_test.cc checks that every CHORUS_*
// name the launcher writes is one the runtime reads, or is listed in kInformational).
//
// Thread-safety: constants.
#ifndef CHORUS_BASE_CONFIG_NAMES_H_
#define CHORUS_BASE_CONFIG_NAMES_H_

namespace chorus::config_names {

// Tunables (horovodrun's flags).
inline constexpr char kFusionThreshold[] = "CHORUS_FUSION_THRESHOLD";
inline constexpr char kCycleTimeMs[] = "CHORUS_CYCLE_TIME_MS";
inline constexpr char kCacheCapacity[] = "CHORUS_CACHE_CAPACITY";
inline constexpr char kNumNcclStreams[] = "CHORUS_NUM_NCCL_STREAMS";
inline constexpr char kThreadAffinity[] = "CHORUS_THREAD_AFFINITY";
inline constexpr char kNoProgressTimeoutSeconds[] = "CHORUS_NO_PROGRESS_TIMEOUT_SECONDS";
inline constexpr char kHierarchicalAllreduce[] = "CHORUS_HIERARCHICAL_ALLREDUCE";
inline constexpr char kHierarchicalAllgather[] = "CHORUS_HIERARCHICAL_ALLGATHER";
inline constexpr char kTimeline[] = "CHORUS_TIMELINE";
inline constexpr char kTimelineMarkCycles[] = "CHORUS_TIMELINE_MARK_CYCLES";
inline constexpr char kStallCheckDisable[] = "CHORUS_STALL_CHECK_DISABLE";
inline constexpr char kStallCheckTimeSeconds[] = "CHORUS_STALL_CHECK_TIME_SECONDS";
inline constexpr char kStallShutdownTimeSeconds[] = "CHORUS_STALL_SHUTDOWN_TIME_SECONDS";
inline constexpr char kLogLevel[] = "CHORUS_LOG_LEVEL";
inline constexpr char kLogHideTime[] = "CHORUS_LOG_HIDE_TIME";
inline constexpr char kAutotune[] = "CHORUS_AUTOTUNE";
inline constexpr char kAutotuneLog[] = "CHORUS_AUTOTUNE_LOG";
inline constexpr char kAutotuneWarmupSamples[] = "CHORUS_AUTOTUNE_WARMUP_SAMPLES";
inline constexpr char kAutotuneStepsPerSample[] = "CHORUS_AUTOTUNE_STEPS_PER_SAMPLE";
inline constexpr char kAutotuneBayesOptMaxSamples[] = "CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES";
inline constexpr char kAutotuneGaussianProcessNoise[] = "CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE";

// A worker's place in an MPI-less job.
inline constexpr char kRank[] = "CHORUS_RANK";
inline constexpr char kSize[] = "CHORUS_SIZE";
inline constexpr char kLocalRank[] = "CHORUS_LOCAL_RANK";
inline constexpr char kLocalSize[] = "CHORUS_LOCAL_SIZE";
inline constexpr char kCrossRank[] = "CHORUS_CROSS_RANK";
inline constexpr char kCrossSize[] = "CHORUS_CROSS_SIZE";
inline constexpr char kRendezvousAddr[] = "CHORUS_RENDEZVOUS_ADDR";
inline constexpr char kRendezvousSecret[] = "CHORUS_RENDEZVOUS_SECRET";
inline constexpr char kRendezvousScope[] = "CHORUS_RENDEZVOUS_SCOPE";
inline constexpr char kStartTimeoutSeconds[] = "CHORUS_START_TIMEOUT_SECONDS";
inline constexpr char kElasticWorkerId[] = "CHORUS_ELASTIC_WORKER_ID";
inline constexpr char kElasticGeneration[] = "CHORUS_ELASTIC_GENERATION";
inline constexpr char kElastic[] = "CHORUS_ELASTIC";
inline constexpr char kElasticTimeout[] = "CHORUS_ELASTIC_TIMEOUT";

// Written for the workers' programs to read, not by the runtime.
inline constexpr char kHostname[] = "CHORUS_HOSTNAME";
inline constexpr const char* kInformational[] = {kHostname};

}  // namespace chorus::config_names

#endif  // CHORUS_BASE_CONFIG_NAMES_H_
