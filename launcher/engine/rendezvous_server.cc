#include "launcher/engine/rendezvous_server.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "base/mutex.h"
#include "proto/rendezvous.grpc.pb.h"

namespace chorus::launcher {
namespace {

// Shared with runtime/ucx/rendezvous_client.cc (the client matches these exactly).
constexpr char kSecretMetadataKey[] = "chorus-rendezvous-secret";
constexpr char kShuttingDownMessage[] = "rendezvous shutting down";

constexpr size_t kMaxNameBytes = 1024;  // scope and key
constexpr int64_t kTransportLimitBytes = int64_t{1} << 30;
constexpr int64_t kRequestSlackBytes = int64_t{1} << 20;  // names and framing around a value
constexpr size_t kMaxMissingKeysNamed = 16;
constexpr int kSecretBytes = 32;

// 'name' with unprintable bytes escaped, cut after 64 bytes.
std::string Quote(absl::string_view name) {
  constexpr size_t kShown = 64;
  return absl::StrCat("'", absl::CHexEscape(name.substr(0, kShown)),
                      name.size() > kShown ? "...'" : "'");
}

// Compares every byte of `expected` whatever `given` holds, so that the time taken does not
// tell how much of a guess was right.
bool ConstantTimeEquals(absl::string_view expected, absl::string_view given) {
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(expected[i]) ^ g;
  }
  return diff == 0;
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode both follow google.rpc.Code.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

std::string HostPort(const std::string& host, int port) {
  const bool bare_ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return bare_ipv6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::Status ValidateName(absl::string_view what, absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("empty rendezvous ", what));
  if (name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous ", what, " ", Quote(name), " is ",
                                                   name.size(), " bytes, more than the limit of ",
                                                   kMaxNameBytes));
  }
  return absl::OkStatus();
}

// The key/value store with waiting reads. Thread-safe.
class Store {
 public:
  explicit Store(const RendezvousServerOptions& options) : options_(options) {}

  absl::Status Put(const std::string& scope, const std::string& key, const std::string& value,
                   int64_t generation) {
    MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError(kShuttingDownMessage);
    if (absl::Status s = CheckGeneration(generation, scope); !s.ok()) return s;
    auto scope_it = scopes_.find(scope);
    if (scope_it != scopes_.end()) {
      auto it = scope_it->second.find(key);
      if (it != scope_it->second.end()) {
        if (it->second == value) return absl::OkStatus();
        return absl::AlreadyExistsError(
            absl::StrCat("key ", Quote(key), " of scope ", Quote(scope),
                         " already holds a different value (keys are written once)"));
      }
      if (static_cast<int64_t>(scope_it->second.size()) >= options_.max_keys_per_scope) {
        return absl::ResourceExhaustedError(absl::StrCat("scope ", Quote(scope), " already holds ",
                                                         options_.max_keys_per_scope,
                                                         " keys, the limit"));
      }
    }
    const int64_t bytes = static_cast<int64_t>(scope.size() + key.size() + value.size());
    if (total_bytes_ + bytes > options_.max_total_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("rendezvous store full: ", total_bytes_, " bytes held, ", bytes,
                       " more would pass the limit of ", options_.max_total_bytes));
    }
    scopes_[scope].emplace(key, value);
    total_bytes_ += bytes;
    cv_.notify_all();
    return absl::OkStatus();
  }

  // The values of `keys` in order, once all exist; DeadlineExceeded naming the missing keys
  // when `deadline` passes first.
  absl::StatusOr<std::vector<std::string>> Get(const std::string& scope,
                                               const std::vector<std::string>& keys,
                                               absl::Duration timeout, absl::Time deadline,
                                               int64_t generation) {
    MutexLock lock(&mu_);
    size_t present = 0;  // keys[0, present) exist; keys are never removed
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (shutting_down_ || generation != JobGeneration()) return true;
      auto scope_it = scopes_.find(scope);
      if (scope_it == scopes_.end()) return false;
      while (present < keys.size() && scope_it->second.contains(keys[present])) ++present;
      return present == keys.size();
    };
    if (!done()) {
      ++waiting_gets_;
      cv_.notify_all();  // TEST_AwaitWaitingGets
      for (absl::Duration left = deadline - absl::Now(); left > absl::ZeroDuration();
           left = deadline - absl::Now()) {
        // In pieces: a far deadline must not overflow the condition variable's clock.
        if (lock.WaitFor(cv_, std::min(left, absl::Hours(1)), done)) break;
      }
      --waiting_gets_;
    }
    if (shutting_down_) return absl::UnavailableError(kShuttingDownMessage);
    if (absl::Status s = CheckGeneration(generation, scope); !s.ok()) return s;
    if (!done()) return TimedOut(scope, keys, timeout);
    const auto& values = scopes_.find(scope)->second;
    std::vector<std::string> out;
    out.reserve(keys.size());
    int64_t reply_bytes = 0;
    for (const std::string& key : keys) {
      const std::string& value = values.find(key)->second;
      reply_bytes += static_cast<int64_t>(value.size());
      if (reply_bytes > options_.max_reply_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the values of ", keys.size(), " keys of scope ", Quote(scope),
                         " exceed the limit of ", options_.max_reply_bytes, " bytes per Get"));
      }
      out.push_back(value);
    }
    return out;
  }

  void Shutdown() {
    MutexLock lock(&mu_);
    shutting_down_ = true;
    cv_.notify_all();
  }

  absl::Status Publish(chorus::rendezvous::Generation generation) {
    MutexLock lock(&mu_);
    const int64_t current = Current();
    if (generation.number() <= current) {
      return absl::InvalidArgumentError(absl::StrCat("elastic generation ", generation.number(),
                                                     " published after generation ", current,
                                                     " (generations only grow)"));
    }
    if (generation.aborted()) {
      chorus::rendezvous::AbortRecord record;
      record.set_number(generation.number());
      record.set_cause(generation.cause());
      *record.mutable_lost_ranks() = generation.lost_ranks();
      last_abort_ = std::move(record);
    }
    if (last_abort_) *generation.mutable_last_abort() = *last_abort_;
    generation_ = std::move(generation);
    cv_.notify_all();
    return absl::OkStatus();
  }

  int64_t Current() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return generation_ ? generation_->number() : -1;
  }

  int64_t generation() const {
    MutexLock lock(&mu_);
    return Current();
  }

  // Watch: records the heartbeat, then waits for a generation above `known`.
  absl::StatusOr<std::optional<chorus::rendezvous::Generation>> Watch(const std::string& worker,
                                                                      int64_t known,
                                                                      absl::Time deadline) {
    MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError(kShuttingDownMessage);
    if (known > Current()) {
      return absl::InvalidArgumentError(absl::StrCat("Watch from worker ", Quote(worker),
                                                     " knows generation ", known,
                                                     ", beyond the job's ", Current()));
    }
    heartbeats_[worker] = absl::Now();
    ++waiting_watches_;
    cv_.notify_all();  // TEST_AwaitWaitingWatches
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutting_down_ || Current() > known;
    };
    for (absl::Duration left = deadline - absl::Now(); !done() && left > absl::ZeroDuration();
         left = deadline - absl::Now()) {
      lock.WaitFor(cv_, std::min(left, absl::Hours(1)), done);
    }
    --waiting_watches_;
    if (shutting_down_) return absl::UnavailableError(kShuttingDownMessage);
    return generation_;
  }

  std::vector<std::string> SilentWorkers(absl::Duration silence) const {
    MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    std::vector<std::string> silent;
    for (const auto& [worker, last] : heartbeats_) {
      if (now - last > silence) silent.push_back(worker);
    }
    std::sort(silent.begin(), silent.end());
    return silent;
  }

  void ForgetWorker(const std::string& worker) {
    MutexLock lock(&mu_);
    heartbeats_.erase(worker);
  }

  bool Heard(const std::string& worker) const {
    MutexLock lock(&mu_);
    return heartbeats_.contains(worker);
  }

  void AwaitWaitingWatches(int n) {
    MutexLock lock(&mu_);
    lock.Wait(cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiting_watches_ >= n; });
  }

  void AwaitWaitingGets(int n) {
    MutexLock lock(&mu_);
    lock.Wait(cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiting_gets_ >= n; });
  }

 private:
  absl::Status TimedOut(const std::string& scope, const std::vector<std::string>& keys,
                        absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> missing;
    size_t missing_count = 0;
    auto scope_it = scopes_.find(scope);
    for (const std::string& key : keys) {
      if (scope_it != scopes_.end() && scope_it->second.contains(key)) continue;
      if (++missing_count <= kMaxMissingKeysNamed) missing.push_back(Quote(key));
    }
    std::string names = absl::StrJoin(missing, ", ");
    if (missing_count > missing.size()) {
      absl::StrAppend(&names, " and ", missing_count - missing.size(), " more");
    }
    return absl::DeadlineExceededError(absl::StrCat(
        missing_count == 1 ? "key " : "keys ", names, " (", missing_count, " of ", keys.size(),
        ") of scope ", Quote(scope), " not published within ", absl::FormatDuration(timeout)));
  }

  // The generation calls must carry (before the first publish, 0).
  int64_t JobGeneration() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::max<int64_t>(Current(), 0);
  }

  // FailedPrecondition for a call of an older generation than the job's, InvalidArgument for a
  // newer one (before the first publish, the job counts as generation 0).
  absl::Status CheckGeneration(int64_t generation, const std::string& scope) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t current = JobGeneration();
    if (generation < current) {
      return absl::FailedPreconditionError(absl::StrCat("stale generation ", generation,
                                                        ": the job is at generation ", current,
                                                        " (scope ", Quote(scope), ")"));
    }
    if (generation > current) {
      return absl::InvalidArgumentError(absl::StrCat("generation ", generation,
                                                     " is beyond the job's generation ", current,
                                                     " (scope ", Quote(scope), ")"));
    }
    return absl::OkStatus();
  }

  const RendezvousServerOptions options_;
  mutable Mutex mu_;
  std::condition_variable cv_;  // a Put, a publish, Shutdown() or a new waiting Get or Watch
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, std::string>> scopes_
      ABSL_GUARDED_BY(mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_gets_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_watches_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // The job's current generation.
  std::optional<chorus::rendezvous::Generation> generation_ ABSL_GUARDED_BY(mu_);
  // The newest aborted generation published, stamped into every later one (see Generation).
  std::optional<chorus::rendezvous::AbortRecord> last_abort_ ABSL_GUARDED_BY(mu_);
  // Worker id -> its last Watch.
  absl::flat_hash_map<std::string, absl::Time> heartbeats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

class RendezvousServer::Service final : public chorus::rendezvous::Rendezvous::Service {
 public:
  explicit Service(const RendezvousServerOptions& options)
      : secret_(options.secret), max_value_bytes_(options.max_value_bytes), store_(options) {}

  Store& store() { return store_; }

  grpc::Status Put(grpc::ServerContext* context, const chorus::rendezvous::PutRequest* request,
                   chorus::rendezvous::PutResponse* response) override {
    if (grpc::Status auth = Authenticate(*context); !auth.ok()) return auth;
    if (absl::Status s = ValidateName("scope", request->scope()); !s.ok()) return ToGrpc(s);
    if (absl::Status s = ValidateName("key", request->key()); !s.ok()) return ToGrpc(s);
    if (static_cast<int64_t>(request->value().size()) > max_value_bytes_) {
      return ToGrpc(absl::ResourceExhaustedError(absl::StrCat(
          "value of key ", Quote(request->key()), " of scope ", Quote(request->scope()), " is ",
          request->value().size(), " bytes, more than the limit of ", max_value_bytes_)));
    }
    return ToGrpc(
        store_.Put(request->scope(), request->key(), request->value(), request->generation()));
  }

  grpc::Status Get(grpc::ServerContext* context, const chorus::rendezvous::GetRequest* request,
                   chorus::rendezvous::GetResponse* response) override {
    if (grpc::Status auth = Authenticate(*context); !auth.ok()) return auth;
    if (absl::Status s = ValidateName("scope", request->scope()); !s.ok()) return ToGrpc(s);
    if (request->keys().empty()) {
      return ToGrpc(absl::InvalidArgumentError("rendezvous Get of no keys"));
    }
    for (const std::string& key : request->keys()) {
      if (absl::Status s = ValidateName("key", key); !s.ok()) return ToGrpc(s);
    }
    if (request->timeout_ms() < 0) {
      return ToGrpc(absl::InvalidArgumentError(
          absl::StrCat("negative rendezvous Get timeout: ", request->timeout_ms(), " ms")));
    }
    const absl::Duration timeout = absl::Milliseconds(request->timeout_ms());
    const absl::Time deadline =
        std::min(absl::Now() + timeout, absl::FromChrono(context->deadline()));
    std::vector<std::string> keys(request->keys().begin(), request->keys().end());
    absl::StatusOr<std::vector<std::string>> values =
        store_.Get(request->scope(), keys, timeout, deadline, request->generation());
    if (!values.ok()) return ToGrpc(values.status());
    for (std::string& value : *values) response->add_values(std::move(value));
    return grpc::Status::OK;
  }

  grpc::Status Watch(grpc::ServerContext* context, const chorus::rendezvous::WatchRequest* request,
                     chorus::rendezvous::WatchResponse* response) override {
    if (grpc::Status auth = Authenticate(*context); !auth.ok()) return auth;
    if (absl::Status s = ValidateName("worker id", request->worker_id()); !s.ok()) {
      return ToGrpc(s);
    }
    if (request->timeout_ms() < 0 || request->known_generation() < -1) {
      return ToGrpc(absl::InvalidArgumentError(
          absl::StrCat("rendezvous Watch: negative timeout (", request->timeout_ms(),
                       " ms) or known generation below -1 (", request->known_generation(), ")")));
    }
    const absl::Time deadline = std::min(absl::Now() + absl::Milliseconds(request->timeout_ms()),
                                         absl::FromChrono(context->deadline()));
    absl::StatusOr<std::optional<chorus::rendezvous::Generation>> g =
        store_.Watch(request->worker_id(), request->known_generation(), deadline);
    if (!g.ok()) return ToGrpc(g.status());
    if (*g) *response->mutable_generation() = **g;
    return grpc::Status::OK;
  }

 private:
  grpc::Status Authenticate(const grpc::ServerContext& context) const {
    const auto range = context.client_metadata().equal_range(kSecretMetadataKey);
    if (range.first == range.second) {
      return grpc::Status(
          grpc::StatusCode::UNAUTHENTICATED,
          absl::StrCat("missing rendezvous secret (metadata ", kSecretMetadataKey, ")"));
    }
    const grpc::string_ref given = range.first->second;
    if (std::next(range.first) != range.second ||
        !ConstantTimeEquals(secret_, absl::string_view(given.data(), given.size()))) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong rendezvous secret");
    }
    return grpc::Status::OK;
  }

  const std::string secret_;
  const int64_t max_value_bytes_;
  Store store_;
};

absl::StatusOr<std::string> GenerateRendezvousSecret() {
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open /dev/urandom: ", std::strerror(errno)));
  }
  std::string bytes(kSecretBytes, '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "end of file";
      close(fd);
      return absl::InternalError(absl::StrCat("cannot read /dev/urandom: ", why));
    }
    got += static_cast<size_t>(n);
  }
  close(fd);
  return absl::BytesToHexString(bytes);
}

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    const RendezvousServerOptions& options) {
  if (options.secret.empty()) {
    return absl::InvalidArgumentError("rendezvous server needs a non-empty secret");
  }
  if (options.host.empty()) return absl::InvalidArgumentError("rendezvous server: empty host");
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous server: port ", options.port, " is outside [0, 65535]"));
  }
  if (options.max_value_bytes < 1 || options.max_value_bytes > kTransportLimitBytes ||
      options.max_reply_bytes < 1 || options.max_reply_bytes > kTransportLimitBytes ||
      options.max_keys_per_scope < 1 || options.max_total_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous server: limits must be positive, values and replies at most ",
                     kTransportLimitBytes, " bytes"));
  }
  const std::string address = HostPort(options.host, options.port);
  auto service = std::make_unique<Service>(options);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(service.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_value_bytes + kRequestSlackBytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_reply_bytes + kRequestSlackBytes));
  // A second server on a fixed port must fail to bind, not share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError(absl::StrCat("rendezvous server cannot listen on ", address));
  }
  return std::unique_ptr<RendezvousServer>(
      new RendezvousServer(std::move(service), std::move(server), bound_port));
}

RendezvousServer::RendezvousServer(std::unique_ptr<Service> service,
                                   std::unique_ptr<grpc::Server> server, int port)
    : service_(std::move(service)), server_(std::move(server)), port_(port) {}

RendezvousServer::~RendezvousServer() { Shutdown(); }

void RendezvousServer::Shutdown() {
  // Waiting Gets return first, so that the server's shutdown does not wait for them.
  service_->store().Shutdown();
  std::call_once(shutdown_once_, [this] {
    // Calls still running after the grace period (a client stuck sending) are cancelled.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
  });
}

absl::Status RendezvousServer::PublishGeneration(chorus::rendezvous::Generation generation) {
  return service_->store().Publish(std::move(generation));
}

int64_t RendezvousServer::generation() const { return service_->store().generation(); }

std::vector<std::string> RendezvousServer::SilentWorkers(absl::Duration silence) const {
  return service_->store().SilentWorkers(silence);
}

bool RendezvousServer::Heard(const std::string& worker_id) const {
  return service_->store().Heard(worker_id);
}

void RendezvousServer::ForgetWorker(const std::string& worker_id) {
  service_->store().ForgetWorker(worker_id);
}

void RendezvousServer::TEST_AwaitWaitingGets(int n) { service_->store().AwaitWaitingGets(n); }

void RendezvousServer::TEST_AwaitWaitingWatches(int n) { service_->store().AwaitWaitingWatches(n); }

}  // namespace chorus::launcher
