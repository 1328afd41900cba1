#include "runtime/elastic/membership_watcher.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "base/logging.h"

namespace chorus::runtime {
namespace {

// How long a call may take beyond the wait it asks for before it counts as failed.
constexpr absl::Duration kCallTimeout = absl::Seconds(5);

// The process's watcher: destroyed at exit, which stops its thread before gRPC goes away.
std::unique_ptr<MembershipWatcher>& Slot() {
  static auto* slot = new std::unique_ptr<MembershipWatcher>();
  return *slot;
}

Mutex& SlotMutex() {
  static auto* mu = new Mutex();
  return *mu;
}

// Stops the watcher at exit (registered once, when it starts).
void StopAtExit() {
  MutexLock lock(&SlotMutex());
  Slot().reset();
}

absl::Status AbortReason(const chorus::rendezvous::AbortRecord& abort) {
  std::string lost;
  if (!abort.lost_ranks().empty()) {
    lost = absl::StrCat(" (lost rank", abort.lost_ranks_size() > 1 ? "s " : " ",
                        absl::StrJoin(abort.lost_ranks(), ", "), ")");
  }
  return absl::AbortedError(
      absl::StrCat("generation ", abort.number(), " aborted by chorusrun: ", abort.cause(), lost));
}

// The newest abort `g` tells of: itself when aborted, else the one the server stamped into it.
std::optional<chorus::rendezvous::AbortRecord> NewestAbort(
    const chorus::rendezvous::Generation& g) {
  if (g.aborted()) {
    chorus::rendezvous::AbortRecord record;
    record.set_number(g.number());
    record.set_cause(g.cause());
    *record.mutable_lost_ranks() = g.lost_ranks();
    return record;
  }
  if (g.has_last_abort()) return g.last_abort();
  return std::nullopt;
}

}  // namespace

absl::StatusOr<MembershipWatcher*> MembershipWatcher::ForConfig(const Config& config) {
  MutexLock lock(&SlotMutex());
  if (Slot() != nullptr || config.elastic_worker_id.empty()) return Slot().get();
  if (config.rendezvous_addr.empty() || config.rendezvous_secret.empty()) {
    return absl::InvalidArgumentError(
        "an elastic worker (CHORUS_ELASTIC_WORKER_ID set) needs CHORUS_RENDEZVOUS_ADDR and "
        "CHORUS_RENDEZVOUS_SECRET; start the job with chorusrun --host-discovery-script or "
        "--min-np");
  }
  absl::StatusOr<std::unique_ptr<RendezvousClient>> client =
      RendezvousClient::Create(config.rendezvous_addr, config.rendezvous_secret, kCallTimeout);
  if (!client.ok()) return client.status();
  Slot() = Start(*std::move(client), config.elastic_worker_id, config.elastic_generation,
                 config.elastic);
  static const bool registered = atexit(StopAtExit) == 0;
  (void)registered;
  return Slot().get();
}

std::unique_ptr<MembershipWatcher> MembershipWatcher::Start(
    std::shared_ptr<RendezvousClient> client, std::string worker_id, int64_t generation,
    bool elastic) {
  return std::unique_ptr<MembershipWatcher>(
      new MembershipWatcher(std::move(client), std::move(worker_id), generation, elastic));
}

MembershipWatcher* MembershipWatcher::Current() {
  MutexLock lock(&SlotMutex());
  return Slot().get();
}

MembershipWatcher::MembershipWatcher(std::shared_ptr<RendezvousClient> client,
                                     std::string worker_id, int64_t generation, bool elastic)
    : client_(std::move(client)),
      worker_id_(std::move(worker_id)),
      elastic_(elastic),
      adopted_(generation),
      thread_([this] { ThreadMain(); }) {}

MembershipWatcher::~MembershipWatcher() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MembershipWatcher::ThreadMain() {
  while (true) {
    int64_t known = -1;
    {
      MutexLock lock(&mu_);
      if (stop_) return;
      if (latest_) known = latest_->number();
    }
    absl::StatusOr<std::optional<chorus::rendezvous::Generation>> answer =
        client_->Watch(worker_id_, known, kPollPeriod);
    MutexLock lock(&mu_);
    if (!answer.ok()) {
      if (link_error_.ok()) {
        CHORUS_LOG(WARNING) << "elastic worker " << worker_id_
                            << ": cannot reach chorusrun: " << answer.status();
      }
      link_error_ = answer.status();
      // A refused or failed call returns at once: pause before the next one.
      lock.WaitFor(cv_, kPollPeriod, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; });
      continue;
    }
    link_error_ = absl::OkStatus();
    if (*answer && (*answer)->number() > known) Apply(**answer);
  }
}

void MembershipWatcher::Apply(const chorus::rendezvous::Generation& g) {
  latest_ = g;
  const std::optional<chorus::rendezvous::AbortRecord> abort = NewestAbort(g);
  if (abort && abort->number() > aborted_up_to_) {
    aborted_up_to_ = abort->number();
    aborted_reason_ = AbortReason(*abort);
    for (auto& [generation, weak] : worlds_) {
      std::shared_ptr<Interrupt> interrupt = weak.lock();
      if (interrupt != nullptr && generation < abort->number()) interrupt->Raise(aborted_reason_);
    }
    worlds_.erase(std::remove_if(worlds_.begin(), worlds_.end(),
                                 [](const auto& w) { return w.second.expired(); }),
                  worlds_.end());
  }
  if (!g.aborted() && g.number() > adopted_) {
    updates_.push_back({g.number(), g.timestamp_us(), g.hosts_added(), g.hosts_removed()});
  }
  cv_.notify_all();
}

std::shared_ptr<const Interrupt> MembershipWatcher::WorldInterrupt(int64_t generation) {
  auto interrupt = std::make_shared<Interrupt>();
  MutexLock lock(&mu_);
  if (aborted_up_to_ > generation) interrupt->Raise(aborted_reason_);
  worlds_.emplace_back(generation, interrupt);
  return interrupt;
}

int64_t MembershipWatcher::latest() const {
  MutexLock lock(&mu_);
  return latest_ ? latest_->number() : -1;
}

std::map<std::string, std::string> MembershipWatcher::adopted_variables() const {
  MutexLock lock(&mu_);
  return adopted_variables_;
}

int64_t MembershipWatcher::adopted() const {
  MutexLock lock(&mu_);
  return adopted_;
}

std::vector<MembershipWatcher::HostUpdate> MembershipWatcher::TakeHostUpdates() {
  MutexLock lock(&mu_);
  std::vector<HostUpdate> taken;
  for (const HostUpdate& u : updates_) {
    if (u.generation > adopted_) taken.push_back(u);
  }
  updates_.clear();
  return taken;
}

absl::StatusOr<std::map<std::string, std::string>> MembershipWatcher::Adopt(
    int64_t after, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  int64_t seen = after;
  while (true) {
    const bool arrived = lock.WaitFor(cv_, deadline - absl::Now(),
                                      [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                                        return stop_ || (latest_ && latest_->number() > seen);
                                      });
    if (!arrived || !latest_ || latest_->number() <= seen) {
      return absl::DeadlineExceededError(absl::StrCat(
          "elastic worker ", worker_id_, ": no generation above ", after,
          " placing it from chorusrun within ", absl::FormatDuration(timeout),
          link_error_.ok() ? "" : absl::StrCat(" (last error: ", link_error_.ToString(), ")")));
    }
    const chorus::rendezvous::Generation& g = *latest_;
    seen = g.number();
    const auto place = std::find_if(g.places().begin(), g.places().end(),
                                    [this](const auto& p) { return p.worker_id() == worker_id_; });
    if (place == g.places().end()) {
      if (adopted_ < 0) continue;  // joining: placed by a later generation
      adopted_ = g.number();
      return absl::NotFoundError(absl::StrCat("elastic worker ", worker_id_,
                                              " has no place in generation ", g.number(),
                                              " (chorusrun released it)"));
    }
    adopted_ = g.number();
    if (g.hold()) continue;  // too few workers: the world forms in a later generation
    adopted_variables_ =
        std::map<std::string, std::string>(place->env().begin(), place->env().end());
    return adopted_variables_;
  }
}

std::string PerGenerationPath(const std::string& path, int64_t generation) {
  if (generation == 0 || path.empty() || path == "DYNAMIC") return path;
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  const size_t cut = has_ext ? dot : path.size();
  return absl::StrCat(path.substr(0, cut), ".gen", generation, path.substr(cut));
}

}  // namespace chorus::runtime
