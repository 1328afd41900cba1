// The process-wide C++ API (chorus/chorus.h): one Runtime (over MPI or UCX, see
// runtime/controller_factory.h) in a guarded slot.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "base/logging.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "chorus/chorus.h"
#include "ops/gpu_platform.h"
#include "runtime/config.h"
#include "runtime/controller_factory.h"
#include "runtime/elastic/membership_watcher.h"
#include "runtime/flight/flight_recorder.h"
#include "runtime/runtime.h"

namespace chorus {
namespace {

// Guards the runtime slot. Never destroyed (no destruction-order problems at exit).
Mutex& SlotMutex() {
  static auto* mu = new Mutex();
  return *mu;
}
// The only global of chorus. Shared so that a call in progress keeps the runtime alive while
// another thread shuts it down.
std::shared_ptr<runtime::Runtime>& Slot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(SlotMutex()) {
  static auto* slot = new std::shared_ptr<runtime::Runtime>();
  return *slot;
}

// Note [Per-thread runtime reference]
// Every call looks the runtime up, several times per op, so each thread keeps its own
// reference, tagged with the slot's generation (bumped under the slot's lock whenever the slot
// changes): while the generation is unchanged the thread uses its reference without taking
// the lock. A call in progress holds its thread's reference, which only that thread replaces
// (at its next lookup after a change), so the runtime outlives every call that uses it, as
// with a shared copy per call. After a shutdown, a thread's stale reference keeps the stopped
// runtime's memory until that thread calls again or exits.
std::atomic<uint64_t> g_slot_generation{1};

struct ThreadRuntime {
  uint64_t generation = 0;  // never a slot generation: the first lookup takes the lock
  std::shared_ptr<runtime::Runtime> runtime;
};
thread_local ThreadRuntime t_runtime;

void SlotChanged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(SlotMutex()) {
  g_slot_generation.fetch_add(1, std::memory_order_release);
}

// The runtime, valid until this thread's next Current() (see the Note above).
absl::StatusOr<runtime::Runtime*> Current() {
  ThreadRuntime& mine = t_runtime;
  if (mine.generation != g_slot_generation.load(std::memory_order_acquire)) {
    MutexLock lock(&SlotMutex());
    mine.runtime = Slot();
    mine.generation = g_slot_generation.load(std::memory_order_relaxed);
  }
  if (mine.runtime == nullptr) {
    return absl::FailedPreconditionError("chorus is not initialized; call init() first");
  }
  return mine.runtime.get();
}

log::Level ParseLevel(const std::string& name) {
  if (name == "trace") return log::Level::kTrace;
  if (name == "debug") return log::Level::kDebug;
  if (name == "info") return log::Level::kInfo;
  if (name == "error") return log::Level::kError;
  return log::Level::kWarning;
}

// What Reform needs to form the world again: whether Init ran on MPI_COMM_WORLD (or without
// MPI). A caller's communicator is only borrowed for Init (the runtime duplicates it).
bool& InitOnWorld() ABSL_EXCLUSIVE_LOCKS_REQUIRED(SlotMutex()) {
  static bool on_world = true;
  return on_world;
}

struct World {
  runtime::Config config;
  std::unique_ptr<runtime::Controller> controller;
};

// Says once per process, on rank 0, which CHORUS_*/HOROVOD_* variables have no effect.
void WarnOfUnreadVariables(int rank) {
  static std::once_flag once;
  if (rank != 0) return;
  std::call_once(once, [] {
    const std::vector<std::string> unread = runtime::Config::UnreadVariables();
    if (unread.empty()) return;
    CHORUS_LOG(WARNING) << "chorus does not support, and ignores: " << absl::StrJoin(unread, ", ")
                        << " (the variables chorus reads: README.md, Configuration)";
  });
}

// The configuration of this worker's next world: the launch configuration, with the place an
// elastic worker adopted last (the membership watcher owns it) applied over it.
absl::StatusOr<runtime::Config> WorldConfig() {
  CHORUS_ASSIGN_OR_RETURN(runtime::Config config, runtime::Config::FromEnvironment());
  const runtime::MembershipWatcher* watcher = runtime::MembershipWatcher::Current();
  if (watcher != nullptr && watcher->elastic()) {
    CHORUS_RETURN_IF_ERROR(config.Adopt(watcher->adopted_variables()));
  }
  return config;
}

// WorldConfig for a rank whose variables do not all parse: its place in the world, for failing
// there with the others (each bad variable at its default).
runtime::Config LenientWorldConfig() {
  runtime::Config config = runtime::Config::FromEnvironmentLenient();
  const runtime::MembershipWatcher* watcher = runtime::MembershipWatcher::Current();
  if (watcher != nullptr && watcher->elastic()) {
    config.Adopt(watcher->adopted_variables()).IgnoreError();
  }
  return config;
}

// Reads the configuration and forms the world it describes (collective over that world).
absl::StatusOr<World> FormWorld(const void* mpi_comm) {
  absl::StatusOr<runtime::Config> config = WorldConfig();
  if (config.ok()) {
    log::SetLevel(ParseLevel(config->log_level));
    log::SetShowTime(!config->log_hide_time);
  }
  // A bad variable still joins the world (its place from the variables that parse, the rest at
  // their defaults) to fail everywhere, naming this rank.
  CHORUS_ASSIGN_OR_RETURN(
      std::unique_ptr<runtime::Controller> controller,
      runtime::CreateController(config.ok() ? *config : LenientWorldConfig(), mpi_comm));
  const Topology topology = controller->topology();
  log::SetRankTag(topology.rank, topology.local_rank);
  WarnOfUnreadVariables(topology.rank);
  if (const runtime::MembershipWatcher* watcher = runtime::MembershipWatcher::Current();
      watcher != nullptr && config.ok()) {
    // A joining worker adopted its place while the world formed.
    if (watcher->elastic()) config = WorldConfig();
    if (config.ok()) {
      config->timeline = runtime::PerGenerationPath(config->timeline, watcher->adopted());
    }
  }
  // A bad variable on one rank must fail on every rank, not leave the others waiting.
  CHORUS_RETURN_IF_ERROR(runtime::AgreeNoProblem(
      *controller,
      config.ok() ? "" : absl::StrCat("rank ", topology.rank, ": ", config.status().message()),
      "a CHORUS_*/HOROVOD_* variable there is invalid"));
  return World{*std::move(config), std::move(controller)};
}

// Empties the slot; returns what it held.
std::shared_ptr<runtime::Runtime> TakeSlot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(SlotMutex()) {
  std::shared_ptr<runtime::Runtime> rt = std::move(Slot());
  Slot().reset();
  SlotChanged();
  return rt;
}

}  // namespace

absl::Status Init(const InitOptions& options) {
  // Note [Flight dump on demand]: before the world forms (and before an MPI-less worker's first
  // heartbeat, which tells chorusrun to pass SIGUSR2 on to it): from here on the signal asks for
  // a dump and ends nothing.
  runtime::InstallFlightDumpSignal();
  MutexLock lock(&SlotMutex());
  if (Slot() != nullptr) return absl::OkStatus();
  CHORUS_ASSIGN_OR_RETURN(World world, FormWorld(options.mpi_comm));
  CHORUS_ASSIGN_OR_RETURN(
      std::unique_ptr<runtime::Runtime> rt,
      runtime::Runtime::Create(std::move(world.config), std::move(world.controller),
                               options.process_sets));
  Slot() = std::move(rt);
  InitOnWorld() = options.mpi_comm == nullptr;
  SlotChanged();
  return absl::OkStatus();
}

absl::Status Shutdown(std::string cause) {
  std::shared_ptr<runtime::Runtime> rt;
  {
    MutexLock lock(&SlotMutex());
    rt = TakeSlot();
  }
  t_runtime = ThreadRuntime{};  // this thread's reference goes now, not at its next call
  if (rt != nullptr) rt->Shutdown("chorus was shut down", std::move(cause));
  return absl::OkStatus();
}

absl::Status Suspend() {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  rt->Shutdown("chorus is suspended until its world is re-formed");
  return absl::OkStatus();
}

absl::Status Reform() {
  std::shared_ptr<runtime::Runtime> rt;
  {
    MutexLock lock(&SlotMutex());
    rt = Slot();
    if (rt == nullptr) {
      return absl::FailedPreconditionError("chorus is not initialized; call init() first");
    }
    if (!InitOnWorld()) {
      return absl::FailedPreconditionError(
          "chorus was initialized on a communicator of the caller's, which it cannot form "
          "again: call shutdown() and init(comm) instead of re-forming");
    }
  }
  // Stopped first (collective over the old world), then formed again; the slot keeps the same
  // runtime, so no thread's reference changes (Note [Per-thread runtime reference]).
  rt->Shutdown("chorus is re-forming its world");
  absl::StatusOr<World> world = FormWorld(nullptr);
  absl::Status status = world.ok()
                            ? rt->Reform(std::move(world->config), std::move(world->controller))
                            : world.status();
  if (!status.ok()) {
    MutexLock lock(&SlotMutex());
    if (Slot() == rt) TakeSlot();
    t_runtime = ThreadRuntime{};
  }
  return status;
}

bool IsInitialized() {
  MutexLock lock(&SlotMutex());
  return Slot() != nullptr;
}

absl::StatusOr<Topology> GetTopology() {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->topology();
}

absl::StatusOr<Handle> Enqueue(OpRequest request, DoneCallback done) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->Enqueue(std::move(request), std::move(done));
}

absl::StatusOr<Handle> EnqueueFrom(OpRequest& request, DoneCallback done) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->EnqueueFrom(request, std::move(done));
}

absl::StatusOr<OpSlot> RegisterOp(OpRequest request) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->RegisterOp(std::move(request));
}

absl::StatusOr<Handle> Submit(OpSlot slot, const SubmitArgs& args) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->Submit(slot, args);
}

absl::Status UnregisterOp(OpSlot slot) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->UnregisterOp(slot);
}

absl::StatusOr<std::vector<Handle>> EnqueueGroup(std::vector<OpRequest> requests) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->EnqueueGroup(std::move(requests));
}

absl::StatusOr<bool> Poll(Handle handle) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->Poll(handle);
}

absl::Status Wait(Handle handle) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->Wait(handle);
}

absl::StatusOr<OpResult> Release(Handle handle) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->Release(handle);
}

absl::StatusOr<std::optional<OpResult>> TryRelease(Handle handle) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->TryRelease(handle);
}

absl::StatusOr<std::string> ControllerName() {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->controller_name();
}

absl::StatusOr<std::string> MetricsJson() {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->MetricsJson();
}

bool CudaBuilt() { return ops::gpu::DefaultGpuPlatform()->name() == "CUDA"; }

int NcclBuildVersion() { return ops::gpu::NcclBuildVersion(); }

absl::Status StartTimeline(const std::string& path, bool mark_cycles) {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->StartTimeline(path, mark_cycles);
}

absl::Status StopTimeline() {
  CHORUS_ASSIGN_OR_RETURN(auto rt, Current());
  return rt->StopTimeline();
}

}  // namespace chorus
