// File: launcher/engine/worker_fleet.h
//
// The worker processes of an MPI-less job (fixed-size or elastic), by worker id, for the job
// engine (launcher/engine/job_engine.h), which decides; this carries out:
//
// - Start: a worker starts locally, or over ssh (launcher::MakeWorkerSpec), with the caller's
//   environment, chorusrun's worker variables (launcher/cli/worker_env.h), its place in a
//   generation (launcher/engine/rank_env.h, launcher/engine/generation_notice.h) or none while it
//   joins, and CHORUS_ELASTIC_WORKER_ID (its heartbeats; elastic jobs also get CHORUS_ELASTIC=1 and
//   CHORUS_ELASTIC_TIMEOUT).
// - Output: one sink per generation labels each placed worker with its rank in it (survivors are
//   redirected there); a joining worker writes under its id ("[w5]", or --output-filename's
//   DIR/worker.w5/) until a generation places it.
// - Ends: each exit is classified once, by elastic::ClassifyExit (how it was started decides
//   how its status reads).
//
// Thread-safety: thread-compatible; the engine's thread, with its Supervisor.
#ifndef CHORUS_LAUNCHER_ENGINE_WORKER_FLEET_H_
#define CHORUS_LAUNCHER_ENGINE_WORKER_FLEET_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "elastic/next_generation.h"
#include "launcher/cli/worker_env.h"
#include "launcher/engine/rank_env.h"
#include "launcher/engine/worker_spec.h"
#include "launcher/process/failure_report.h"
#include "launcher/process/supervisor.h"
#include "launcher/process/worker_output.h"

namespace chorus::launcher {

class WorkerFleet {
 public:
  struct Options {
    WorkerStart start;                // program, command, ssh, directory, secret
    std::vector<EnvVar> worker_vars;  // WorkerEnvironment(options)
    RendezvousInfo rendezvous;        // the address is replaced by address_for(host)
    // host:port that workers on `host` dial for the rendezvous.
    std::function<std::string(const std::string& host)> address_for;
    std::string this_host;
    bool elastic = false;
    absl::Duration elastic_timeout = absl::Seconds(600);
    std::optional<std::string> output_dir;  // --output-filename
    bool timestamps = false;                // --prefix-output-with-timestamp
    bool verbose = false;                   // print each worker's command line
  };

  // `supervisor` is borrowed and must outlive this fleet's calls; the fleet (its output sinks)
  // must outlive the supervisor (it closes open streams into them when it goes).
  WorkerFleet(Options options, Supervisor* supervisor);

  // Starts `w`: placed in `generation` (w.place set) or joining. An error names the worker, its
  // host and what failed (no ssh, a pipe or fork failure).
  absl::Status Start(const elastic::Worker& w, int generation);

  // From now on the output of generation `g`'s workers is labelled with their ranks in it.
  absl::Status Publish(const elastic::PublishGeneration& g);

  void Stop(const std::string& id, int signal);
  void StopAll(int signal);
  // Sends `signal` to every running worker started on this host (not those started over ssh,
  // whose local process is the ssh client) for which `chosen(worker id)` holds; returns how many.
  int SignalLocal(int signal, const std::function<bool(const std::string& id)>& chosen);

  // The ends of the fleet's workers among `events.exits` (taken out of it), classified.
  std::vector<elastic::WorkerEnd> TakeEnds(Supervisor::Events& events);
  // The failure reports (launcher/process/failure_report.h) placed workers wrote since the last
  // call, in arrival order.
  std::vector<FailureReport> TakeFailureReports() { return std::exchange(reports_, {}); }

  bool remote(const std::string& host) const;
  // A worker of the fleet is running (started, not yet reaped).
  bool any_running() const { return !processes_.empty(); }

 private:
  struct Process {
    int supervisor_id = 0;
    bool remote = false;
  };

  absl::StatusOr<OutputSink*> JoiningSink(const std::string& id);
  Environment EnvironmentFor(const elastic::Worker& w, int generation) const;

  Options options_;
  Supervisor* supervisor_;
  std::map<std::string, Process> processes_;        // running workers
  std::map<int, std::string> ids_;                  // supervisor id -> worker id
  std::vector<std::unique_ptr<OutputSink>> sinks_;  // every sink made; they outlive the workers
  OutputSink* generation_sink_ = nullptr;           // the newest generation's
  FileSink* files_ = nullptr;  // --output-filename: the first sink, whose files the others share
  std::vector<FailureReport> reports_;  // from placed workers' stderr, not yet taken
};

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_ENGINE_WORKER_FLEET_H_
