#include "launcher/engine/worker_fleet.h"

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"

#include "base/config_names.h"
#include "launcher/engine/generation_notice.h"
#include "launcher/hosts/rank_layout.h"
#include "launcher/hosts/ssh_command.h"
#include "launcher/process/shell_words.h"

namespace chorus::launcher {

WorkerFleet::WorkerFleet(Options options, Supervisor* supervisor)
    : options_(std::move(options)), supervisor_(supervisor) {}

bool WorkerFleet::remote(const std::string& host) const {
  return !IsLocalHost(host, options_.this_host);
}

Environment WorkerFleet::EnvironmentFor(const elastic::Worker& w, int generation) const {
  RendezvousInfo rendezvous = options_.rendezvous;
  rendezvous.address = options_.address_for(w.host);
  std::vector<EnvVar> vars;
  if (w.place) {
    vars = RankEnvironment(*w.place, rendezvous);
    // The variables that change with the generation are the ones a survivor adopts from the
    // notice; appended, they win over RankEnvironment's.
    for (EnvVar& v : GenerationVariables(*w.place, generation)) vars.push_back(std::move(v));
  } else {
    vars = JoiningEnvironment(w.host, rendezvous);
  }
  vars.emplace_back(config_names::kElasticWorkerId, w.id);
  if (options_.elastic) {
    vars.emplace_back(config_names::kElastic, "1");
    vars.emplace_back(config_names::kElasticTimeout,
                      absl::StrCat(absl::ToInt64Seconds(options_.elastic_timeout)));
  }
  return MergeEnvironment(options_.start.launcher_env, options_.worker_vars, vars);
}

absl::StatusOr<OutputSink*> WorkerFleet::JoiningSink(const std::string& id) {
  std::unique_ptr<OutputSink> sink;
  if (!options_.output_dir) {
    sink = std::make_unique<TerminalSink>(std::vector<std::string>{id}, options_.timestamps, stdout,
                                          stderr);
  } else {
    if (files_ == nullptr) {
      absl::StatusOr<std::unique_ptr<FileSink>> files = FileSink::Create(*options_.output_dir, {});
      if (!files.ok()) return files.status();
      files_ = files->get();
      sinks_.push_back(*std::move(files));
    }
    absl::StatusOr<std::unique_ptr<FileSink>> files = files_->ForWorker(id);
    if (!files.ok()) return files.status();
    sink = *std::move(files);
  }
  sinks_.push_back(std::move(sink));
  return sinks_.back().get();
}

absl::Status WorkerFleet::Start(const elastic::Worker& w, int generation) {
  const bool is_remote = remote(w.host);
  const std::string who = absl::StrCat("worker ", w.id, " on ", w.host);
  if (is_remote && options_.start.ssh_path.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, ": ssh is needed to start workers on ", w.host, " and was not found"));
  }
  if (!is_remote && options_.start.program.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(who, ": '", options_.start.command[0],
                                                      "' was not found on this machine's PATH"));
  }
  const WorkerSpec spec =
      MakeWorkerSpec(options_.start, w.host, is_remote, EnvironmentFor(w, generation));
  // A placed worker's output goes to its generation's sink (Publish made it); a joiner's to its
  // own until a generation places it.
  OutputSink* sink = nullptr;
  int index = 0;
  if (w.place) {
    if (generation_sink_ == nullptr) {
      return absl::InternalError(absl::StrCat(who, ": no generation was published"));
    }
    sink = generation_sink_;
    index = w.place->rank;
  } else {
    absl::StatusOr<OutputSink*> own = JoiningSink(w.id);
    if (!own.ok()) return own.status();
    sink = *own;
  }
  absl::StatusOr<int> id = supervisor_->Start(spec, sink, index);
  if (!id.ok())
    return absl::Status(id.status().code(), absl::StrCat(who, ": ", id.status().message()));
  if (options_.verbose) {
    std::cout << "chorusrun: "
              << (w.place ? absl::StrCat("rank ", w.place->rank, " on ", w.host)
                          : absl::StrCat("worker ", w.id, " joining on ", w.host))
              << ": " << ShellJoin(spec.argv) << std::endl;
  }
  processes_[w.id] = Process{*id, is_remote};
  ids_[*id] = w.id;
  return absl::OkStatus();
}

absl::Status WorkerFleet::Publish(const elastic::PublishGeneration& g) {
  std::vector<int> ranks;
  for (const auto& [id, place] : g.places) ranks.push_back(place.rank);
  std::unique_ptr<OutputSink> sink;
  if (!options_.output_dir) {
    sink = std::make_unique<TerminalSink>(ranks, options_.timestamps, stdout, stderr);
  } else if (files_ == nullptr) {
    absl::StatusOr<std::unique_ptr<FileSink>> files = FileSink::Create(*options_.output_dir, ranks);
    if (!files.ok()) return files.status();
    files_ = files->get();
    sink = *std::move(files);
  } else {
    absl::StatusOr<std::unique_ptr<FileSink>> files = files_->ForRanks(ranks);
    if (!files.ok()) return files.status();
    sink = *std::move(files);
  }
  sinks_.push_back(std::make_unique<FailureReportSink>(std::move(sink), &reports_));
  generation_sink_ = sinks_.back().get();
  // Workers already running take their new ranks' labels.
  for (const auto& [id, place] : g.places) {
    auto it = processes_.find(id);
    if (it != processes_.end())
      supervisor_->Redirect(it->second.supervisor_id, generation_sink_, place.rank);
  }
  return absl::OkStatus();
}

void WorkerFleet::Stop(const std::string& id, int signal) {
  auto it = processes_.find(id);
  if (it != processes_.end()) supervisor_->Stop(it->second.supervisor_id, signal);
}

void WorkerFleet::StopAll(int signal) {
  for (const auto& [id, p] : processes_) supervisor_->Stop(p.supervisor_id, signal);
}

int WorkerFleet::SignalLocal(int signal, const std::function<bool(const std::string& id)>& chosen) {
  int signalled = 0;
  for (const auto& [id, p] : processes_) {
    if (p.remote || !chosen(id)) continue;
    supervisor_->Signal(p.supervisor_id, signal);
    ++signalled;
  }
  return signalled;
}

std::vector<elastic::WorkerEnd> WorkerFleet::TakeEnds(Supervisor::Events& events) {
  std::vector<elastic::WorkerEnd> ends;
  for (auto it = events.exits.begin(); it != events.exits.end();) {
    auto known = ids_.find(it->id);
    if (known == ids_.end()) {
      ++it;
      continue;
    }
    const std::string id = known->second;
    const Process p = processes_.at(id);
    elastic::WorkerEnd end;
    end.id = id;
    end.verdict = elastic::ClassifyExit(it->exit, p.remote);
    end.shell_status = it->exit.shell_status();
    end.stopped = it->stop_signal.has_value();
    ends.push_back(std::move(end));
    processes_.erase(id);
    ids_.erase(known);
    it = events.exits.erase(it);
  }
  return ends;
}

}  // namespace chorus::launcher
