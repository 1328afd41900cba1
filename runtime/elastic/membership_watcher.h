// File: runtime/elastic/membership_watcher.h
//
// An elastic worker's link to chorusrun's job engine (launcher/engine/job_engine.h): one thread per
// process that
// long-polls the rendezvous service for new generations (Watch in proto/rendezvous.proto) every
// kPollPeriod, which doubles as the worker's heartbeat (chorusrun treats a worker silent for 5 s
// as lost and kills it). The watcher outlives chorus::Init/Shutdown: it runs from the first Init
// of an elastic worker until the process exits, so resets keep heartbeating.
//
// What a new generation G does here:
// - aborted (a worker of the previous generation is gone): the interrupt of every world formed
//   in a generation below G is raised (base/interrupt.h), so their pending and later ops fail
//   with Aborted "generation G aborted by chorusrun: <cause>" at once instead of waiting
//   on a dead peer; the training loop then rolls back (chorus.elastic).
// - not aborted (hosts added, or removed from discovery): a host update is recorded, which the
//   training loop takes at its next commit (TakeHostUpdates, chorus.elastic check_host_updates)
//   and acts on at the same commit on every rank.
// After a reset, Adopt() takes this worker's place in the newest generation: its variables as
// chorusrun published them (CHORUS_RANK, CHORUS_SIZE, ..., the HOROVOD_* copies,
// CHORUS_RENDEZVOUS_SCOPE, CHORUS_ELASTIC_GENERATION). The watcher is the one owner of a
// worker's generation: forming a world applies the adopted place over the launch configuration
// (Config::Adopt); the process environment is never written (the Python package copies the
// variables into os.environ for user code).
//
// Thread-safety: thread-safe.
#ifndef CHORUS_RUNTIME_ELASTIC_MEMBERSHIP_WATCHER_H_
#define CHORUS_RUNTIME_ELASTIC_MEMBERSHIP_WATCHER_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "base/interrupt.h"
#include "base/mutex.h"
#include "proto/rendezvous.pb.h"
#include "runtime/config.h"
#include "runtime/ucx/rendezvous_client.h"

namespace chorus::runtime {

class MembershipWatcher {
 public:
  // How often the watcher calls chorusrun (its heartbeat period, and the longest a notice waits
  // in the server when none is pending).
  static constexpr absl::Duration kPollPeriod = absl::Milliseconds(250);
  // A worker waiting for chorusrun (a joiner for its place, a held survivor for its world)
  // waits this much longer than chorusrun's own bound (the elastic timeout), so that
  // chorusrun, which decides, ends the wait before the worker gives up on its own.
  static constexpr absl::Duration kAdoptMargin = absl::Seconds(60);

  // A membership change the training loop acts on at its next commit.
  struct HostUpdate {
    int64_t generation = 0;
    int64_t timestamp_us = 0;  // chorusrun's clock: grows with each change
    bool added = false;
    bool removed = false;
  };

  // The process's watcher. The first call with an elastic `config` (elastic_worker_id set, and
  // the rendezvous variables of an MPI-less launch) starts it; later calls return it. Null for a
  // process that is not an elastic worker. InvalidArgument when the rendezvous client cannot be
  // made from `config`.
  static absl::StatusOr<MembershipWatcher*> ForConfig(const Config& config);
  // The started watcher, or null.
  static MembershipWatcher* Current();

  // A watcher of its own (not the process's): for tests. `generation` is the one this worker
  // starts in (-1: it joins a running job); `elastic`: whether the job is.
  static std::unique_ptr<MembershipWatcher> Start(std::shared_ptr<RendezvousClient> client,
                                                  std::string worker_id, int64_t generation,
                                                  bool elastic = true);

  // Stops the thread (waits for its call in progress, at most kPollPeriod plus a call).
  ~MembershipWatcher();
  MembershipWatcher(const MembershipWatcher&) = delete;
  MembershipWatcher& operator=(const MembershipWatcher&) = delete;

  // An interrupt for a world formed in `generation`: raised once an aborted generation above it
  // is published (at once if one already was).
  std::shared_ptr<const Interrupt> WorldInterrupt(int64_t generation);

  // Whether the job is elastic (CHORUS_ELASTIC): its resets adopt chorusrun's next generation.
  // A fixed-size job's workers have a watcher too, for the heartbeats and the aborts.
  bool elastic() const { return elastic_; }

  // The newest generation published so far (-1: none yet).
  int64_t latest() const;
  // The generation this worker is in: CHORUS_ELASTIC_GENERATION at start, then the last one
  // Adopt() took.
  int64_t adopted() const;

  // This worker's variables for the adopted generation, as the last Adopt() set them (empty
  // before any).
  std::map<std::string, std::string> adopted_variables() const;

  // The host updates of generations above the adopted one, oldest first; each is returned once.
  std::vector<HostUpdate> TakeHostUpdates();

  // Waits up to `timeout` for a generation above `after` that places this worker and forms a
  // world, then adopts it: returns this worker's variables of it (name -> value), which
  // adopted_variables() holds from then on. On the way, a generation on hold (Generation.hold: too
  // few workers) is waited past, and so is one without this worker while it joins (it has never had
  // a place). NotFound when a generation has no place for this worker after it had one
  // (chorusrun released it: it should exit quietly), DeadlineExceeded when none comes in time
  // (naming the last link error, if any).
  absl::StatusOr<std::map<std::string, std::string>> Adopt(int64_t after, absl::Duration timeout);

 private:
  MembershipWatcher(std::shared_ptr<RendezvousClient> client, std::string worker_id,
                    int64_t generation, bool elastic);
  void ThreadMain();
  void Apply(const chorus::rendezvous::Generation& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<RendezvousClient> client_;
  const std::string worker_id_;
  const bool elastic_;

  mutable Mutex mu_;
  std::condition_variable cv_;  // a new generation, or stop
  std::optional<chorus::rendezvous::Generation> latest_ ABSL_GUARDED_BY(mu_);
  int64_t adopted_ ABSL_GUARDED_BY(mu_);  // the generation this worker is in
  std::map<std::string, std::string> adopted_variables_ ABSL_GUARDED_BY(mu_);
  int64_t aborted_up_to_ ABSL_GUARDED_BY(mu_) = -1;  // newest aborted generation seen
  absl::Status aborted_reason_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int64_t, std::weak_ptr<Interrupt>>> worlds_ ABSL_GUARDED_BY(mu_);
  std::vector<HostUpdate> updates_ ABSL_GUARDED_BY(mu_);
  absl::Status link_error_ ABSL_GUARDED_BY(mu_);  // the last failed call, OK after a success
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after every member above exists
};

// The CHORUS_TIMELINE file of an elastic worker in `generation`: generation 0 records into
// `path` itself, later ones into "<stem>.gen<g><ext>" (the extension of the last path
// component), so that a reset does not overwrite the earlier generations' timelines. Empty and
// "DYNAMIC" stay as they are.
std::string PerGenerationPath(const std::string& path, int64_t generation);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_ELASTIC_MEMBERSHIP_WATCHER_H_
