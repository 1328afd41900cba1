// File: ops/ucx/testing/in_memory_transport.cc
#include "ops/ucx/testing/in_memory_transport.h"

#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/mutex.h"

namespace chorus::ops::testing {

// Messages in flight, per (source, destination, tag) channel, numbered in sending order.
struct InMemoryFabric::Shared {
  explicit Shared(int n) : waiting(static_cast<size_t>(n)), alive(static_cast<size_t>(n), true) {}

  struct Channel {
    uint64_t sent = 0;    // messages sent so far (the next one's number)
    uint64_t posted = 0;  // receives posted so far
    std::map<uint64_t, std::vector<std::byte>> messages;
  };
  using Key = std::tuple<int, int, uint64_t>;  // (source, destination, tag)
  struct Wanted {
    Key key;
    uint64_t number;
  };

  bool Available(const Wanted& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = channels.find(w.key);
    return it != channels.end() && it->second.messages.count(w.number) > 0;
  }

  // True when some rank is alive and every live rank waits for a message that is not there.
  bool AllStuck() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    bool any = false;
    for (size_t r = 0; r < alive.size(); ++r) {
      if (!alive[r]) continue;
      if (!waiting[r].has_value() || Available(*waiting[r])) return false;
      any = true;
    }
    return any;
  }

  Mutex mu;
  std::condition_variable cv;
  std::map<Key, Channel> channels ABSL_GUARDED_BY(mu);
  std::vector<std::optional<Wanted>> waiting ABSL_GUARDED_BY(mu);  // per rank, while blocked
  std::vector<bool> alive ABSL_GUARDED_BY(mu);                     // its transport exists
  int killed ABSL_GUARDED_BY(mu) = -1;
  bool deadlocked ABSL_GUARDED_BY(mu) = false;
};

namespace {

class InMemoryTransport : public TagTransport {
 public:
  InMemoryTransport(std::shared_ptr<InMemoryFabric::Shared> shared, int rank, int size)
      : shared_(std::move(shared)), rank_(rank), size_(size) {}

  ~InMemoryTransport() override {
    MutexLock lock(&shared_->mu);
    shared_->alive[static_cast<size_t>(rank_)] = false;
    if (shared_->AllStuck()) shared_->deadlocked = true;
    shared_->cv.notify_all();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t max_tag() const override { return kMaxWorldTag; }

  absl::StatusOr<RequestId> Isend(int peer, uint64_t tag, const void* data,
                                  int64_t bytes) override {
    if (absl::Status st = Check(peer, tag, data, bytes); !st.ok()) return st;
    std::vector<std::byte> message(static_cast<size_t>(bytes));
    if (bytes > 0) std::memcpy(message.data(), data, message.size());
    {
      MutexLock lock(&shared_->mu);
      InMemoryFabric::Shared::Channel& c = shared_->channels[{rank_, peer, tag}];
      c.messages.emplace(c.sent++, std::move(message));
      shared_->cv.notify_all();
    }
    const RequestId id = next_id_++;
    requests_.emplace(id, Request{});
    return id;
  }

  absl::StatusOr<RequestId> Irecv(int peer, uint64_t tag, void* data, int64_t bytes) override {
    if (absl::Status st = Check(peer, tag, data, bytes); !st.ok()) return st;
    Request req;
    req.recv = true;
    req.data = data;
    req.bytes = bytes;
    {
      MutexLock lock(&shared_->mu);
      InMemoryFabric::Shared::Channel& c = shared_->channels[{peer, rank_, tag}];
      req.wanted = InMemoryFabric::Shared::Wanted{{peer, rank_, tag}, c.posted++};
    }
    const RequestId id = next_id_++;
    requests_.emplace(id, req);
    return id;
  }

  absl::Status Wait(absl::Span<const RequestId> ids) override {
    absl::Status result;
    for (RequestId id : ids) {
      auto it = requests_.find(id);
      if (it == requests_.end()) {
        result.Update(absl::InvalidArgumentError("in-memory transport: unknown request id " +
                                                 std::to_string(id)));
        continue;
      }
      const Request req = it->second;
      requests_.erase(it);
      // After an error the remaining requests are released without waiting (cancelled).
      if (req.recv && result.ok()) result = Receive(req);
    }
    return result;
  }

 private:
  struct Request {
    bool recv = false;
    void* data = nullptr;
    int64_t bytes = 0;
    InMemoryFabric::Shared::Wanted wanted;
  };

  absl::Status Check(int peer, uint64_t tag, const void* data, int64_t bytes) const {
    if (peer < 0 || peer >= size_) {
      return absl::InvalidArgumentError("in-memory transport: bad peer " + std::to_string(peer));
    }
    if (tag > kMaxWorldTag) return absl::InvalidArgumentError("in-memory transport: bad tag");
    if (bytes < 0 || (bytes > 0 && data == nullptr)) {
      return absl::InvalidArgumentError("in-memory transport: bad buffer");
    }
    return absl::OkStatus();
  }

  absl::Status Receive(const Request& req) {
    InMemoryFabric::Shared& s = *shared_;
    std::vector<std::byte> message;
    {
      MutexLock lock(&s.mu);
      if (!s.Available(req.wanted)) {
        s.waiting[static_cast<size_t>(rank_)] = req.wanted;
        if (s.AllStuck()) {
          s.deadlocked = true;
          s.cv.notify_all();
        }
        lock.Wait(s.cv, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
          return s.Available(req.wanted) || s.killed >= 0 || s.deadlocked;
        });
        s.waiting[static_cast<size_t>(rank_)].reset();
        if (!s.Available(req.wanted)) {
          if (s.killed >= 0) {
            return absl::UnavailableError("in-memory transport: rank " + std::to_string(s.killed) +
                                          " lost");
          }
          return absl::InternalError("in-memory transport: deadlock: rank " +
                                     std::to_string(rank_) + " waits for a message from rank " +
                                     std::to_string(std::get<0>(req.wanted.key)) +
                                     " that no live rank will send");
        }
      }
      auto& messages = s.channels[req.wanted.key].messages;
      auto it = messages.find(req.wanted.number);
      message = std::move(it->second);
      messages.erase(it);
    }
    if (static_cast<int64_t>(message.size()) != req.bytes) {
      return absl::InternalError("in-memory transport: message of " +
                                 std::to_string(message.size()) + " bytes from rank " +
                                 std::to_string(std::get<0>(req.wanted.key)) + ", expected " +
                                 std::to_string(req.bytes));
    }
    if (req.bytes > 0) std::memcpy(req.data, message.data(), message.size());
    return absl::OkStatus();
  }

  std::shared_ptr<InMemoryFabric::Shared> shared_;
  int rank_;
  int size_;
  RequestId next_id_ = 1;
  std::map<RequestId, Request> requests_;
};

}  // namespace

InMemoryFabric::InMemoryFabric(int size) : size_(size), shared_(std::make_shared<Shared>(size)) {}

InMemoryFabric::~InMemoryFabric() = default;

std::unique_ptr<TagTransport> InMemoryFabric::CreateTransport(int rank) {
  return std::make_unique<InMemoryTransport>(shared_, rank, size_);
}

void InMemoryFabric::Kill(int rank) {
  MutexLock lock(&shared_->mu);
  if (shared_->killed < 0) shared_->killed = rank;
  shared_->cv.notify_all();
}

}  // namespace chorus::ops::testing
