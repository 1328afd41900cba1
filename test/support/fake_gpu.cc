#include "test/support/fake_gpu.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "ops/cpu/reduce_kernels.h"
#include "ops/cuda/batched_copy_reference.h"

namespace chorus::testing {
namespace {

using ops::gpu::EventHandle;
using ops::gpu::StreamHandle;

// An in-order queue of host work with its own thread.
class FakeStream {
 public:
  FakeStream() : thread_([this] { Run(); }) {}
  ~FakeStream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Work queued and not yet started.
  int64_t Queued() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(work_.size());
  }
  void Push(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      work_.push_back(std::move(work));
    }
    cv_.notify_all();
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> next;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !work_.empty(); });
        if (work_.empty()) return;  // stop_, and everything queued has run
        next = std::move(work_.front());
        work_.pop_front();
      }
      next();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  bool stop_ = false;
  std::thread thread_;  // last
};

struct FakeEvent {
  std::mutex mu;
  std::condition_variable cv;
  int64_t recorded = 0;   // captures so far
  int64_t completed = 0;  // the latest capture that ran
};

// One rank's contribution to a collective.
struct Post {
  const void* send = nullptr;
  std::vector<int64_t> meta;  // alltoall: send offsets then send sizes
};

// The members of one communicator id.
struct CommWorld {
  std::mutex mu;
  std::condition_variable cv;
  int size = 0;
  int joined = 0;
  int64_t generation = 0;
  int arrived = 0;
  int departed = 0;
  std::vector<Post> posts;
};

}  // namespace

struct FakeGpuCluster::State {
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false;
  int held_ever = 0;  // collectives that were held, whether or not they still are
  std::string async_error;
  int64_t next_id = 0;
  std::map<std::string, std::shared_ptr<CommWorld>> worlds;
};

FakeGpuCluster::FakeGpuCluster() : state_(std::make_shared<State>()) {}
FakeGpuCluster::~FakeGpuCluster() = default;

void FakeGpuCluster::HoldCollectives() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->hold = true;
}

void FakeGpuCluster::ReleaseCollectives() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->hold = false;
  }
  state_->cv.notify_all();
}

void FakeGpuCluster::WaitUntilHeld(int n) {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->held_ever >= n; });
}

void FakeGpuCluster::InjectAsyncError(std::string message) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->async_error = std::move(message);
}

struct FakeGpuPlatform::Impl {
  std::shared_ptr<FakeGpuCluster::State> cluster;
  int num_devices = 0;

  mutable std::mutex mu;
  std::map<void*, std::unique_ptr<FakeStream>> streams;
  std::map<void*, std::shared_ptr<FakeEvent>> events;
  std::map<const std::byte*, int64_t> allocations;  // start -> bytes
  bool fail_allocations = false;
  bool no_host_callbacks = false;
  Counters counters;
  FakeStream default_stream;  // the null stream

  FakeStream& StreamOf(StreamHandle s) {
    if (s == nullptr) return default_stream;
    std::lock_guard<std::mutex> lock(mu);
    return *streams.at(s);
  }
  std::shared_ptr<FakeEvent> EventOf(EventHandle e) {
    std::lock_guard<std::mutex> lock(mu);
    return events.at(e);
  }
};

namespace {

// Shared by a FakeCommunicator and the stream work it queued (which may outlive it).
struct CommState {
  std::shared_ptr<FakeGpuCluster::State> cluster;
  std::shared_ptr<CommWorld> world;
  FakeGpuPlatform::Impl* platform = nullptr;
  int rank = 0;
  std::atomic<bool> aborted{false};
};

class FakeCommunicator final : public ops::gpu::GpuCommunicator {
 public:
  FakeCommunicator(std::shared_ptr<CommState> state, int device)
      : state_(std::move(state)), device_(device) {}
  ~FakeCommunicator() override {
    if (state_->aborted.load()) return;
    std::lock_guard<std::mutex> lock(state_->platform->mu);
    ++state_->platform->counters.communicators_destroyed;
  }

  int rank() const override { return state_->rank; }
  int size() const override { return state_->world->size; }
  int device() const override { return device_; }

  absl::Status Allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                         StreamHandle stream) override {
    const int64_t bytes = count * static_cast<int64_t>(DataTypeSize(dtype));
    {
      std::lock_guard<std::mutex> lock(state_->platform->mu);
      state_->platform->counters.allreduce_bytes += bytes;
    }
    return Enqueue(stream, Post{send, {}}, [=](const std::vector<Post>& posts) {
      std::vector<std::byte> out(static_cast<size_t>(bytes));
      if (bytes > 0) std::memcpy(out.data(), posts[0].send, static_cast<size_t>(bytes));
      for (size_t r = 1; r < posts.size(); ++r) {
        (void)ops::ReduceInto(out.data(), posts[r].send, count, dtype, op);
      }
      return [recv, out = std::move(out)] {
        if (!out.empty()) std::memcpy(recv, out.data(), out.size());
      };
    });
  }

  absl::Status Allgatherv(const void* send, void* recv, absl::Span<const int64_t> recv_bytes,
                          StreamHandle stream) override {
    std::vector<int64_t> sizes(recv_bytes.begin(), recv_bytes.end());
    return Enqueue(stream, Post{send, {}}, [=](const std::vector<Post>& posts) {
      std::vector<std::byte> out;
      for (size_t r = 0; r < posts.size(); ++r) {
        const auto* p = static_cast<const std::byte*>(posts[r].send);
        out.insert(out.end(), p, p + sizes[r]);
      }
      return [recv, out = std::move(out)] {
        if (!out.empty()) std::memcpy(recv, out.data(), out.size());
      };
    });
  }

  absl::Status Broadcast(void* buffer, int64_t bytes, int root, StreamHandle stream) override {
    return Enqueue(stream, Post{buffer, {}}, [=](const std::vector<Post>& posts) {
      const auto* p = static_cast<const std::byte*>(posts[root].send);
      std::vector<std::byte> out(p, p + bytes);
      return [buffer, out = std::move(out)] {
        if (!out.empty()) std::memcpy(buffer, out.data(), out.size());
      };
    });
  }

  absl::Status Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                         absl::Span<const int64_t> send_offsets, void* recv,
                         absl::Span<const int64_t> recv_bytes,
                         absl::Span<const int64_t> recv_offsets, StreamHandle stream) override {
    Post mine{send, std::vector<int64_t>(send_offsets.begin(), send_offsets.end())};
    mine.meta.insert(mine.meta.end(), send_bytes.begin(), send_bytes.end());
    std::vector<int64_t> rbytes(recv_bytes.begin(), recv_bytes.end());
    std::vector<int64_t> roffs(recv_offsets.begin(), recv_offsets.end());
    const int me = rank();
    return Enqueue(stream, std::move(mine), [=](const std::vector<Post>& posts) {
      const size_t n = posts.size();
      std::vector<std::vector<std::byte>> pieces(n);
      for (size_t r = 0; r < n; ++r) {
        const int64_t off = posts[r].meta[me];
        const int64_t len = posts[r].meta[n + me];
        const auto* p = static_cast<const std::byte*>(posts[r].send) + off;
        pieces[r].assign(p, p + std::min(len, rbytes[r]));
      }
      return [recv, roffs, pieces = std::move(pieces)] {
        for (size_t r = 0; r < pieces.size(); ++r) {
          if (pieces[r].empty()) continue;
          std::memcpy(static_cast<std::byte*>(recv) + roffs[r], pieces[r].data(), pieces[r].size());
        }
      };
    });
  }

  absl::Status ReduceScatter(const void* send, void* recv, absl::Span<const int64_t> recv_counts,
                             DataType dtype, ReduceOp op, StreamHandle stream) override {
    const int64_t esize = static_cast<int64_t>(DataTypeSize(dtype));
    int64_t total = 0, first = 0;
    for (int r = 0; r < static_cast<int>(recv_counts.size()); ++r) {
      if (r == rank()) first = total;
      total += recv_counts[r];
    }
    const int64_t mine = recv_counts[rank()];
    return Enqueue(stream, Post{send, {}}, [=](const std::vector<Post>& posts) {
      std::vector<std::byte> all(static_cast<size_t>(total * esize));
      if (!all.empty()) std::memcpy(all.data(), posts[0].send, all.size());
      for (size_t r = 1; r < posts.size(); ++r) {
        (void)ops::ReduceInto(all.data(), posts[r].send, total, dtype, op);
      }
      std::vector<std::byte> out(all.begin() + first * esize, all.begin() + (first + mine) * esize);
      return [recv, out = std::move(out)] {
        if (!out.empty()) std::memcpy(recv, out.data(), out.size());
      };
    });
  }

  absl::Status AsyncError() override {
    std::lock_guard<std::mutex> lock(state_->cluster->mu);
    if (state_->cluster->async_error.empty()) return absl::OkStatus();
    return absl::UnavailableError(state_->cluster->async_error);
  }

  void Abort() override {
    if (state_->aborted.exchange(true)) return;
    {
      std::lock_guard<std::mutex> lock(state_->platform->mu);
      ++state_->platform->counters.communicators_aborted;
    }
    // Wake this member's collectives wherever they wait.
    { std::lock_guard<std::mutex> lock(state_->cluster->mu); }
    state_->cluster->cv.notify_all();
    { std::lock_guard<std::mutex> lock(state_->world->mu); }
    state_->world->cv.notify_all();
  }

 private:
  // compute(posts) runs once every member posted and returns the write of this rank's output,
  // which runs after every member has finished reading (in-place collectives stay correct).
  using Compute = std::function<std::function<void()>(const std::vector<Post>&)>;

  absl::Status Enqueue(StreamHandle stream, Post mine, Compute compute) {
    if (state_->aborted.load()) return absl::UnavailableError("communicator was aborted");
    {
      std::lock_guard<std::mutex> lock(state_->platform->mu);
      ++state_->platform->counters.collectives;
    }
    std::shared_ptr<CommState> s = state_;
    state_->platform->StreamOf(stream).Push(
        [s, mine = std::move(mine), compute = std::move(compute)]() mutable {
          Run(*s, std::move(mine), compute);
        });
    return absl::OkStatus();
  }

  static void Run(CommState& s, Post mine, const Compute& compute) {
    {
      std::unique_lock<std::mutex> lock(s.cluster->mu);
      if (s.cluster->hold) {
        ++s.cluster->held_ever;
        s.cluster->cv.notify_all();
        s.cluster->cv.wait(lock, [&] { return !s.cluster->hold || s.aborted.load(); });
      }
    }
    if (s.aborted.load()) return;
    CommWorld& w = *s.world;
    std::function<void()> commit;
    {
      std::unique_lock<std::mutex> lock(w.mu);
      const int64_t generation = w.generation;
      w.posts[s.rank] = std::move(mine);
      ++w.arrived;
      w.cv.notify_all();
      w.cv.wait(lock, [&] { return w.arrived == w.size || s.aborted.load(); });
      if (s.aborted.load()) return;
      commit = compute(w.posts);
      if (++w.departed == w.size) {
        w.arrived = 0;
        w.departed = 0;
        ++w.generation;
        w.cv.notify_all();
      } else {
        w.cv.wait(lock, [&] { return w.generation != generation || s.aborted.load(); });
        if (s.aborted.load()) return;
      }
    }
    commit();
  }

  std::shared_ptr<CommState> state_;
  int device_;
};

}  // namespace

FakeGpuPlatform::FakeGpuPlatform(FakeGpuCluster& cluster, int num_devices)
    : impl_(std::make_unique<Impl>()) {
  impl_->cluster = cluster.state_;
  impl_->num_devices = num_devices;
}

FakeGpuPlatform::~FakeGpuPlatform() {
  std::map<void*, std::unique_ptr<FakeStream>> streams;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    streams.swap(impl_->streams);
  }
  streams.clear();  // joins their threads
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (auto& [p, bytes] : impl_->allocations) std::free(const_cast<std::byte*>(p));
}

void FakeGpuPlatform::EnqueueHostWork(StreamHandle stream, std::function<void()> work) {
  impl_->StreamOf(stream).Push(std::move(work));
}

absl::Status FakeGpuPlatform::EnqueueHostCallback(int device, StreamHandle stream,
                                                  void (*fn)(void*), void* arg) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->no_host_callbacks) return absl::UnimplementedError("fake: host callbacks off");
    ++impl_->counters.host_callbacks;
  }
  EnqueueHostWork(stream, [fn, arg] { fn(arg); });
  return absl::OkStatus();
}

void FakeGpuPlatform::DisableHostCallbacks() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->no_host_callbacks = true;
}

FakeGpuPlatform::Counters FakeGpuPlatform::counters() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Counters c = impl_->counters;
  c.live_allocations = static_cast<int64_t>(impl_->allocations.size());
  c.live_events = static_cast<int64_t>(impl_->events.size());
  c.live_streams = static_cast<int64_t>(impl_->streams.size());
  c.queued_work = impl_->default_stream.Queued();
  for (auto& [handle, stream] : impl_->streams) c.queued_work += stream->Queued();
  return c;
}

bool FakeGpuPlatform::IsDeviceMemory(const void* p, int64_t bytes) const {
  const auto* b = static_cast<const std::byte*>(p);
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->allocations.upper_bound(b);
  if (it == impl_->allocations.begin()) return false;
  --it;
  return b >= it->first && b + bytes <= it->first + it->second;
}

void FakeGpuPlatform::FailAllocations() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->fail_allocations = true;
}

absl::Status FakeGpuPlatform::CheckDevice(int device) {
  if (impl_->num_devices == 0) {
    return absl::FailedPreconditionError("no CUDA device visible to chorus (fake platform)");
  }
  if (device < 0 || device >= impl_->num_devices) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU ", device, " is not visible: ", impl_->num_devices, " CUDA device(s)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StreamHandle> FakeGpuPlatform::CreateStream(int device) {
  auto stream = std::make_unique<FakeStream>();
  void* handle = stream.get();
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->streams.emplace(handle, std::move(stream));
  return handle;
}

void FakeGpuPlatform::DestroyStream(int device, StreamHandle stream) {
  std::unique_ptr<FakeStream> s;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->streams.find(stream);
    if (it == impl_->streams.end()) return;
    s = std::move(it->second);
    impl_->streams.erase(it);
  }
  s.reset();  // runs what is queued, then joins
}

absl::StatusOr<EventHandle> FakeGpuPlatform::CreateEvent(int device) {
  auto event = std::make_shared<FakeEvent>();
  void* handle = event.get();
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->events.emplace(handle, std::move(event));
  return handle;
}

void FakeGpuPlatform::DestroyEvent(int device, EventHandle event) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->events.erase(event);  // work still holding it keeps it alive
}

absl::Status FakeGpuPlatform::RecordEvent(int device, EventHandle event, StreamHandle stream) {
  std::shared_ptr<FakeEvent> e = impl_->EventOf(event);
  int64_t capture = 0;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    capture = ++e->recorded;
  }
  impl_->StreamOf(stream).Push([e, capture] {
    {
      std::lock_guard<std::mutex> lock(e->mu);
      e->completed = std::max(e->completed, capture);
    }
    e->cv.notify_all();
  });
  return absl::OkStatus();
}

absl::Status FakeGpuPlatform::StreamWaitEvent(int device, StreamHandle stream, EventHandle event) {
  std::shared_ptr<FakeEvent> e = impl_->EventOf(event);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->counters.stream_waits;
  }
  int64_t target = 0;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    target = e->recorded;
  }
  impl_->StreamOf(stream).Push([e, target] {
    std::unique_lock<std::mutex> lock(e->mu);
    e->cv.wait(lock, [&] { return e->completed >= target; });
  });
  return absl::OkStatus();
}

absl::StatusOr<bool> FakeGpuPlatform::EventDone(int device, EventHandle event) {
  std::shared_ptr<FakeEvent> e = impl_->EventOf(event);
  std::lock_guard<std::mutex> lock(e->mu);
  return e->completed >= e->recorded;
}

absl::StatusOr<void*> FakeGpuPlatform::Allocate(int device, int64_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->fail_allocations) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of device memory allocating ", bytes, " bytes (fake)"));
  }
  const size_t rounded = (static_cast<size_t>(bytes) + 255) / 256 * 256;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(256, std::max<size_t>(rounded, 256)));
  impl_->allocations.emplace(p, bytes);
  return static_cast<void*>(p);
}

void FakeGpuPlatform::Free(int device, void* ptr) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->allocations.find(static_cast<std::byte*>(ptr));
  if (it == impl_->allocations.end()) return;
  impl_->allocations.erase(it);
  std::free(ptr);
}

absl::Status FakeGpuPlatform::EnqueueCopy(int device, const ops::gpu::BatchedCopyPlan& plan,
                                          StreamHandle stream) {
  if (plan.chunks.empty()) return absl::OkStatus();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->counters.copy_launches;
  }
  impl_->StreamOf(stream).Push([plan] { ops::gpu::RunBatchedCopyOnHost(plan); });
  return absl::OkStatus();
}

absl::Status FakeGpuPlatform::EnqueueFillIdentity(int device, void* ptr, int64_t count,
                                                  DataType dtype, ReduceOp op,
                                                  StreamHandle stream) {
  impl_->StreamOf(stream).Push([=] { ops::FillIdentity(ptr, count, dtype, op); });
  return absl::OkStatus();
}

absl::StatusOr<std::string> FakeGpuPlatform::NewCommunicatorId() {
  std::lock_guard<std::mutex> lock(impl_->cluster->mu);
  return absl::StrCat("fake-comm-", impl_->cluster->next_id++);
}

absl::StatusOr<std::unique_ptr<ops::gpu::GpuCommunicator>> FakeGpuPlatform::CreateCommunicator(
    const std::string& id, int size, int rank, int device) {
  std::shared_ptr<CommWorld> world;
  {
    std::lock_guard<std::mutex> lock(impl_->cluster->mu);
    std::shared_ptr<CommWorld>& slot = impl_->cluster->worlds[id];
    if (slot == nullptr) {
      slot = std::make_shared<CommWorld>();
      slot->size = size;
      slot->posts.resize(size);
    }
    world = slot;
  }
  {
    // As ncclCommInitRank: returns once every member joined.
    std::unique_lock<std::mutex> lock(world->mu);
    if (world->size != size) {
      return absl::InvalidArgumentError(
          absl::StrCat("communicator ", id, " has ", world->size, " members, not ", size));
    }
    ++world->joined;
    world->cv.notify_all();
    world->cv.wait(lock, [&] { return world->joined >= world->size; });
  }
  auto state = std::make_shared<CommState>();
  state->cluster = impl_->cluster;
  state->world = std::move(world);
  state->platform = impl_.get();
  state->rank = rank;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->counters.communicators_created;
  }
  return std::unique_ptr<ops::gpu::GpuCommunicator>(
      std::make_unique<FakeCommunicator>(std::move(state), device));
}

}  // namespace chorus::testing
