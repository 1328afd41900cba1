// InProcessFabric: one shared-memory collective engine under an in-process Controller and
// CollectiveBackend.
//
// Note [One collective engine]: a communicator (the world is comm 0; CreateBackend adds more)
// keeps one sequence counter per member. The k-th call of a member meets the k-th call of every
// other member in slot k:
//   1. post: the member stores a Contribution (pointers to its arguments and buffers) in the
//      slot, unless a member of the communicator is dead (then Unavailable, nothing posted);
//   2. wait until every member posted (or, while some have not, until a member dies:
//      Unavailable);
//   3. validate all contributions and compute this member's result into private storage,
//      reading the other members' buffers directly; every member sees the same contributions,
//      so validation errors are identical on all of them;
//   4. mark the slot read and wait until every member has read it (not interruptible by Kill:
//      once all have posted, every member is computing, and no buffer may be released while
//      another member reads it);
//   5. commit the private result to this member's output buffers.
// Because outputs are written only after step 4, send and receive buffers may alias.
#include "test/support/in_process_fabric.h"

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

#include "base/status_macros.h"
#include "chorus/chorus.h"
#include "chorus/types.h"
#include "ops/collective_backend.h"
#include "ops/cpu/reduce_kernels.h"
#include "runtime/controller.h"

namespace chorus::testing {
namespace {

constexpr char kName[] = "in-process";

enum class Kind {
  kGatherToRoot,
  kBroadcastFromRoot,
  kBitAnd,
  kBarrier,
  kCreateBackend,
  kCreateGroupBackend,
  kAllreduce,
  kAllgatherv,
  kBroadcast,
  kAlltoallv,
  kReduceScatter,
};

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kGatherToRoot:
      return "GatherToRoot";
    case Kind::kBroadcastFromRoot:
      return "BroadcastFromRoot";
    case Kind::kBitAnd:
      return "AllreduceBitAnd";
    case Kind::kBarrier:
      return "Barrier";
    case Kind::kCreateBackend:
      return "CreateBackend";
    case Kind::kCreateGroupBackend:
      return "CreateGroupBackend";
    case Kind::kAllreduce:
      return "Allreduce";
    case Kind::kAllgatherv:
      return "Allgatherv";
    case Kind::kBroadcast:
      return "Broadcast";
    case Kind::kAlltoallv:
      return "Alltoallv";
    case Kind::kReduceScatter:
      return "ReduceScatter";
  }
  return "unknown";
}

// One member's arguments to one collective. Everything it points to is owned by the member and
// stays valid until every member has read the slot (step 4 of the Note).
struct Contribution {
  Kind kind = Kind::kBarrier;
  const void* send = nullptr;
  int64_t count = 0;  // elements (reductions), bytes (broadcast), words (bit AND)
  DataType dtype = DataType::kUint8;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  absl::Span<const int64_t> sizes = {};       // recv_bytes / send_bytes / recv_counts
  absl::Span<const int64_t> offsets = {};     // alltoallv send_offsets
  absl::Span<const int64_t> recv_sizes = {};  // alltoallv recv_bytes
  const std::string* text = nullptr;
  absl::Span<const int32_t> ranks = {};  // CreateBackend; CreateGroupBackend: group of each rank
};

struct Slot {
  Slot(int64_t seq, int n) : seq(seq), contributions(n) {}
  const int64_t seq;
  std::vector<Contribution> contributions;
  int posted = 0;
  int finished = 0;
};

struct Comm {
  Comm(int id, std::vector<int> members)
      : id(id), members(std::move(members)), next_seq(this->members.size(), 0) {}
  const int id;
  const std::vector<int> members;  // world ranks, ascending
  bool group = false;              // made by CreateGroupBackend
  // Both guarded by Engine::mu.
  std::vector<int64_t> next_seq;  // per member
  absl::flat_hash_map<int64_t, std::shared_ptr<Slot>> slots;
};

// Computes this member's result from every member's contribution into private storage.
using Compute = std::function<absl::Status(absl::Span<const Contribution> all)>;
// Writes the private result to this member's output buffers (after every member read).
using Commit = std::function<void()>;

absl::Status Mismatch(Kind kind, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("in-process ", KindName(kind), ": ranks disagree on ", what));
}

// The state every controller and backend of one fabric shares. Thread-safe.
struct Engine {
  Engine(int world_size, std::vector<int> host_of_rank)
      : world_size(world_size),
        host_of_rank(std::move(host_of_rank)),
        dead(world_size, false),
        create_count(world_size, 0) {
    std::vector<int> world(world_size);
    for (int r = 0; r < world_size; ++r) world[r] = r;
    comms.emplace(0, std::make_shared<Comm>(0, std::move(world)));
  }

  const int world_size;
  const std::vector<int> host_of_rank;
  // std::mutex rather than absl::Mutex: Debian's Abseil is not built for ThreadSanitizer,
  // which would then report every access below as a race.
  std::mutex mu;
  std::condition_variable changed;  // notified on every post, finish and Kill
  // The members below, and every Comm's next_seq and slots, are guarded by mu.
  std::vector<bool> dead;
  // Per world rank: how many CreateBackend and CreateGroupBackend calls it has made (the id of
  // its last comm, or partition).
  std::vector<int> create_count;
  absl::flat_hash_map<int, std::shared_ptr<Comm>> comms;
  // The groups of CreateGroupBackend calls: (call id, group) -> comm.
  absl::flat_hash_map<std::pair<int, int>, std::shared_ptr<Comm>> group_comms;
  int64_t group_calls = 0;  // collective calls on group comms, per member

  std::shared_ptr<Comm> GetComm(int id) {
    std::lock_guard<std::mutex> lock(mu);
    return comms.at(id);
  }

  // Lowest dead member of `comm`, or -1. REQUIRES: mu held.
  int FirstDeadMember(const Comm& comm) {
    for (int r : comm.members) {
      if (dead[r]) return r;
    }
    return -1;
  }

  absl::Status Lost(int world_rank) {
    return absl::UnavailableError(absl::StrCat("in-process fabric: rank ", world_rank, " lost"));
  }

  // Runs one collective of `comm` for its member number `member` (see the Note).
  absl::Status Run(Comm& comm, int member, const Contribution& mine, const Compute& compute,
                   const Commit& commit) {
    const int n = static_cast<int>(comm.members.size());
    std::shared_ptr<Slot> slot;
    {
      std::unique_lock<std::mutex> lock(mu);
      const int64_t seq = comm.next_seq[member]++;
      if (comm.group) ++group_calls;
      if (int lost = FirstDeadMember(comm); lost >= 0) return Lost(lost);
      std::shared_ptr<Slot>& entry = comm.slots[seq];
      if (entry == nullptr) entry = std::make_shared<Slot>(seq, n);
      slot = entry;
      slot->contributions[member] = mine;
      ++slot->posted;
      changed.notify_all();
      changed.wait(lock, [&] { return slot->posted == n || FirstDeadMember(comm) >= 0; });
      if (slot->posted != n) return Lost(FirstDeadMember(comm));
    }
    // Every member has posted; nobody writes a contribution or a buffer until step 4 is over.
    absl::Status status = absl::OkStatus();
    for (const Contribution& c : slot->contributions) {
      if (c.kind != mine.kind) {
        status = absl::InternalError(
            absl::StrCat("in-process fabric: collective order differs across ranks (",
                         KindName(mine.kind), " met ", KindName(c.kind), ")"));
        break;
      }
    }
    if (status.ok()) status = compute(slot->contributions);
    {
      std::unique_lock<std::mutex> lock(mu);
      if (++slot->finished == n) {
        comm.slots.erase(slot->seq);
        changed.notify_all();
      }
      changed.wait(lock, [&] { return slot->finished == n; });
    }
    if (status.ok() && commit) commit();
    return status;
  }
};

absl::Status CheckReduction(Kind kind, absl::Span<const Contribution> all) {
  const Contribution& first = all[0];
  for (const Contribution& c : all) {
    if (c.dtype != first.dtype) return Mismatch(kind, "dtype");
    if (c.op != first.op) return Mismatch(kind, "reduce op");
  }
  if (!IsReducible(first.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("in-process ", KindName(kind), ": dtype ",
                                                   DataTypeName(first.dtype),
                                                   " cannot be reduced"));
  }
  if (first.op != ReduceOp::kSum && first.op != ReduceOp::kMin && first.op != ReduceOp::kMax &&
      first.op != ReduceOp::kProduct) {
    return absl::InvalidArgumentError(absl::StrCat(
        "in-process ", KindName(kind), ": unsupported reduce op ", ReduceOpName(first.op)));
  }
  return absl::OkStatus();
}

absl::Status CheckSizes(Kind kind, absl::Span<const Contribution> all, bool offsets) {
  const size_t n = all.size();
  for (const Contribution& c : all) {
    if (c.sizes.size() != n || (offsets && c.offsets.size() != n)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "in-process ", KindName(kind), ": size and offset lists need ", n, " entries"));
    }
    for (size_t i = 0; i < n; ++i) {
      if (c.sizes[i] < 0 || (offsets && c.offsets[i] < 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("in-process ", KindName(kind), ": negative size or offset"));
      }
    }
  }
  return absl::OkStatus();
}

class InProcessBackend : public ops::CollectiveBackend {
 public:
  InProcessBackend(std::shared_ptr<Engine> shared, std::shared_ptr<Comm> comm, int member)
      : shared_(std::move(shared)), comm_(std::move(comm)), member_(member) {}

  int rank() const override { return member_; }
  int size() const override { return static_cast<int>(comm_->members.size()); }
  std::string name() const override { return kName; }

  absl::Status Run(const ops::CollectiveCall& call) override { return ops::RunOn(*this, call); }

  absl::Status Allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op) {
    Contribution mine{
        .kind = Kind::kAllreduce, .send = send, .count = count, .dtype = dtype, .op = op};
    std::vector<std::byte> result;
    auto compute = [&](absl::Span<const Contribution> all) -> absl::Status {
      CHORUS_RETURN_IF_ERROR(CheckReduction(mine.kind, all));
      for (const Contribution& c : all) {
        if (c.count != count) return Mismatch(mine.kind, "element count");
      }
      if (count < 0) return absl::InvalidArgumentError("in-process Allreduce: negative count");
      const size_t bytes = static_cast<size_t>(count) * DataTypeSize(dtype);
      result.assign(static_cast<const std::byte*>(all[0].send),
                    static_cast<const std::byte*>(all[0].send) + bytes);
      for (size_t r = 1; r < all.size(); ++r) {
        CHORUS_RETURN_IF_ERROR(ops::ReduceInto(result.data(), all[r].send, count, dtype, op));
      }
      return absl::OkStatus();
    };
    auto commit = [&] {
      if (!result.empty()) std::memcpy(recv, result.data(), result.size());
    };
    return shared_->Run(*comm_, member_, mine, compute, commit);
  }

  absl::Status Allgatherv(const void* send, void* recv, absl::Span<const int64_t> recv_bytes) {
    Contribution mine{.kind = Kind::kAllgatherv, .send = send, .sizes = recv_bytes};
    std::vector<std::byte> result;
    auto compute = [&](absl::Span<const Contribution> all) -> absl::Status {
      CHORUS_RETURN_IF_ERROR(CheckSizes(mine.kind, all, /*offsets=*/false));
      for (const Contribution& c : all) {
        if (!std::equal(c.sizes.begin(), c.sizes.end(), recv_bytes.begin())) {
          return Mismatch(mine.kind, "recv_bytes");
        }
      }
      for (size_t r = 0; r < all.size(); ++r) {
        const auto* from = static_cast<const std::byte*>(all[r].send);
        result.insert(result.end(), from, from + recv_bytes[r]);
      }
      return absl::OkStatus();
    };
    auto commit = [&] {
      if (!result.empty()) std::memcpy(recv, result.data(), result.size());
    };
    return shared_->Run(*comm_, member_, mine, compute, commit);
  }

  absl::Status Broadcast(void* buffer, int64_t bytes, int root) {
    Contribution mine{.kind = Kind::kBroadcast, .send = buffer, .count = bytes, .root = root};
    std::vector<std::byte> result;
    auto compute = [&](absl::Span<const Contribution> all) -> absl::Status {
      for (const Contribution& c : all) {
        if (c.root != root) return Mismatch(mine.kind, "root");
        if (c.count != bytes) return Mismatch(mine.kind, "byte count");
      }
      if (root < 0 || root >= static_cast<int>(all.size()) || bytes < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("in-process Broadcast: bad root ", root, " or byte count ", bytes));
      }
      if (root != member_) {
        const auto* from = static_cast<const std::byte*>(all[root].send);
        result.assign(from, from + bytes);
      }
      return absl::OkStatus();
    };
    auto commit = [&] {
      if (!result.empty()) std::memcpy(buffer, result.data(), result.size());
    };
    return shared_->Run(*comm_, member_, mine, compute, commit);
  }

  absl::Status Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                         absl::Span<const int64_t> send_offsets, void* recv,
                         absl::Span<const int64_t> recv_bytes,
                         absl::Span<const int64_t> recv_offsets) {
    Contribution mine{.kind = Kind::kAlltoallv,
                      .send = send,
                      .sizes = send_bytes,
                      .offsets = send_offsets,
                      .recv_sizes = recv_bytes};
    std::vector<std::vector<std::byte>> result;
    auto compute = [&](absl::Span<const Contribution> all) -> absl::Status {
      const size_t n = all.size();
      CHORUS_RETURN_IF_ERROR(CheckSizes(mine.kind, all, /*offsets=*/true));
      for (const Contribution& c : all) {
        if (c.recv_sizes.size() != n) {
          return absl::InvalidArgumentError(
              absl::StrCat("in-process Alltoallv: receive lists need ", n, " entries"));
        }
      }
      // Checked over the whole matrix so that every member reports the same error.
      for (size_t s = 0; s < n; ++s) {
        for (size_t d = 0; d < n; ++d) {
          if (all[s].sizes[d] != all[d].recv_sizes[s]) {
            return absl::InvalidArgumentError(
                absl::StrCat("in-process Alltoallv: rank ", s, " sends ", all[s].sizes[d],
                             " bytes to rank ", d, ", which expects ", all[d].recv_sizes[s]));
          }
        }
      }
      result.resize(n);
      for (size_t s = 0; s < n; ++s) {
        const auto* from = static_cast<const std::byte*>(all[s].send) + all[s].offsets[member_];
        result[s].assign(from, from + recv_bytes[s]);
      }
      return absl::OkStatus();
    };
    auto commit = [&] {
      for (size_t s = 0; s < result.size(); ++s) {
        if (!result[s].empty()) {
          std::memcpy(static_cast<std::byte*>(recv) + recv_offsets[s], result[s].data(),
                      result[s].size());
        }
      }
    };
    return shared_->Run(*comm_, member_, mine, compute, commit);
  }

  absl::Status ReduceScatter(const void* send, void* recv, absl::Span<const int64_t> recv_counts,
                             DataType dtype, ReduceOp op) {
    Contribution mine{
        .kind = Kind::kReduceScatter, .send = send, .dtype = dtype, .op = op, .sizes = recv_counts};
    std::vector<std::byte> result;
    auto compute = [&](absl::Span<const Contribution> all) -> absl::Status {
      CHORUS_RETURN_IF_ERROR(CheckReduction(mine.kind, all));
      CHORUS_RETURN_IF_ERROR(CheckSizes(mine.kind, all, /*offsets=*/false));
      for (const Contribution& c : all) {
        if (!std::equal(c.sizes.begin(), c.sizes.end(), recv_counts.begin())) {
          return Mismatch(mine.kind, "recv_counts");
        }
      }
      const size_t element = DataTypeSize(dtype);
      int64_t offset = 0;
      for (int r = 0; r < member_; ++r) offset += recv_counts[r];
      const int64_t count = recv_counts[member_];
      const size_t begin = static_cast<size_t>(offset) * element;
      const auto* first = static_cast<const std::byte*>(all[0].send) + begin;
      result.assign(first, first + static_cast<size_t>(count) * element);
      for (size_t r = 1; r < all.size(); ++r) {
        CHORUS_RETURN_IF_ERROR(ops::ReduceInto(
            result.data(), static_cast<const std::byte*>(all[r].send) + begin, count, dtype, op));
      }
      return absl::OkStatus();
    };
    auto commit = [&] {
      if (!result.empty()) std::memcpy(recv, result.data(), result.size());
    };
    return shared_->Run(*comm_, member_, mine, compute, commit);
  }

  absl::Status Barrier() {
    return shared_->Run(
        *comm_, member_, Contribution{.kind = Kind::kBarrier},
        [](absl::Span<const Contribution>) { return absl::OkStatus(); }, nullptr);
  }

 private:
  const std::shared_ptr<Engine> shared_;
  const std::shared_ptr<Comm> comm_;
  const int member_;
};

class InProcessController : public runtime::Controller {
 public:
  InProcessController(std::shared_ptr<Engine> shared, Topology topology)
      : shared_(std::move(shared)), topology_(topology), world_(shared_->GetComm(0)) {}

  const Topology& topology() const override { return topology_; }
  std::string name() const override { return kName; }

  absl::Status GatherToRoot(const std::string& mine, std::vector<std::string>* all_out) override {
    std::vector<std::string> result;
    auto compute = [&](absl::Span<const Contribution> all) -> absl::Status {
      if (rank() != 0) return absl::OkStatus();
      for (const Contribution& c : all) result.push_back(*c.text);
      return absl::OkStatus();
    };
    auto commit = [&] { *all_out = std::move(result); };
    return shared_->Run(*world_, rank(), Contribution{.kind = Kind::kGatherToRoot, .text = &mine},
                        compute, commit);
  }

  absl::Status BroadcastFromRoot(std::string* data) override {
    std::string result;
    auto compute = [&](absl::Span<const Contribution> all) -> absl::Status {
      if (rank() != 0) result = *all[0].text;
      return absl::OkStatus();
    };
    auto commit = [&] {
      if (rank() != 0) *data = std::move(result);
    };
    return shared_->Run(*world_, rank(),
                        Contribution{.kind = Kind::kBroadcastFromRoot, .text = data}, compute,
                        commit);
  }

  absl::Status AllreduceBitAnd(absl::Span<uint64_t> bits) override {
    std::vector<uint64_t> result(bits.begin(), bits.end());
    auto compute = [&](absl::Span<const Contribution> all) -> absl::Status {
      for (const Contribution& c : all) {
        if (c.count != static_cast<int64_t>(bits.size())) return Mismatch(Kind::kBitAnd, "length");
      }
      for (const Contribution& c : all) {
        const auto* other = static_cast<const uint64_t*>(c.send);
        for (size_t i = 0; i < result.size(); ++i) result[i] &= other[i];
      }
      return absl::OkStatus();
    };
    auto commit = [&] { std::copy(result.begin(), result.end(), bits.begin()); };
    return shared_->Run(
        *world_, rank(),
        Contribution{
            .kind = Kind::kBitAnd, .send = bits.data(), .count = static_cast<int64_t>(bits.size())},
        compute, commit);
  }

  absl::Status Barrier() override {
    return shared_->Run(
        *world_, rank(), Contribution{.kind = Kind::kBarrier},
        [](absl::Span<const Contribution>) { return absl::OkStatus(); }, nullptr);
  }

  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> CreateGroupBackend(
      absl::Span<const int32_t> group_of_rank) override {
    int id = 0;
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      id = ++shared_->create_count[rank()];
    }
    const int32_t mine = static_cast<size_t>(rank()) < group_of_rank.size()
                             ? group_of_rank[static_cast<size_t>(rank())]
                             : -1;
    std::shared_ptr<Comm> comm;
    auto compute = [&](absl::Span<const Contribution> all) -> absl::Status {
      for (const Contribution& c : all) {
        if (!std::equal(c.ranks.begin(), c.ranks.end(), group_of_rank.begin(),
                        group_of_rank.end())) {
          return Mismatch(Kind::kCreateGroupBackend, "the partition");
        }
      }
      if (group_of_rank.size() != static_cast<size_t>(size())) {
        return absl::InvalidArgumentError(
            "in-process CreateGroupBackend: one group entry per world rank needed");
      }
      for (int32_t g : group_of_rank) {
        if (g < -1) return absl::InvalidArgumentError("in-process CreateGroupBackend: group < -1");
      }
      if (mine < 0) return absl::OkStatus();
      std::vector<int> members;
      for (int r = 0; r < size(); ++r) {
        if (group_of_rank[static_cast<size_t>(r)] == mine) members.push_back(r);
      }
      std::lock_guard<std::mutex> lock(shared_->mu);
      std::shared_ptr<Comm>& entry = shared_->group_comms[{id, mine}];
      if (entry == nullptr) {
        entry = std::make_shared<Comm>(id, std::move(members));
        entry->group = true;
      }
      comm = entry;
      return absl::OkStatus();
    };
    CHORUS_RETURN_IF_ERROR(shared_->Run(
        *world_, rank(), Contribution{.kind = Kind::kCreateGroupBackend, .ranks = group_of_rank},
        compute, nullptr));
    if (comm == nullptr) return std::unique_ptr<ops::CollectiveBackend>();
    auto it = std::find(comm->members.begin(), comm->members.end(), rank());
    return std::unique_ptr<ops::CollectiveBackend>(std::make_unique<InProcessBackend>(
        shared_, comm, static_cast<int>(it - comm->members.begin())));
  }

  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> CreateBackend(
      absl::Span<const int32_t> ranks) override {
    int id = 0;
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      id = ++shared_->create_count[rank()];
    }
    std::shared_ptr<Comm> comm;
    auto compute = [&](absl::Span<const Contribution> all) -> absl::Status {
      for (const Contribution& c : all) {
        if (!std::equal(c.ranks.begin(), c.ranks.end(), ranks.begin(), ranks.end())) {
          return Mismatch(Kind::kCreateBackend, "the rank list");
        }
      }
      if (ranks.empty()) {
        return absl::InvalidArgumentError("in-process CreateBackend: empty rank list");
      }
      for (size_t i = 0; i < ranks.size(); ++i) {
        if (ranks[i] < 0 || ranks[i] >= size() || (i > 0 && ranks[i] <= ranks[i - 1])) {
          return absl::InvalidArgumentError(
              "in-process CreateBackend: ranks must be ascending world ranks");
        }
      }
      std::lock_guard<std::mutex> lock(shared_->mu);
      std::shared_ptr<Comm>& entry = shared_->comms[id];
      if (entry == nullptr) {
        entry = std::make_shared<Comm>(id, std::vector<int>(ranks.begin(), ranks.end()));
      }
      comm = entry;
      return absl::OkStatus();
    };
    CHORUS_RETURN_IF_ERROR(shared_->Run(*world_, rank(),
                                        Contribution{.kind = Kind::kCreateBackend, .ranks = ranks},
                                        compute, nullptr));
    auto it = std::find(comm->members.begin(), comm->members.end(), rank());
    if (it == comm->members.end()) return std::unique_ptr<ops::CollectiveBackend>();
    return std::unique_ptr<ops::CollectiveBackend>(std::make_unique<InProcessBackend>(
        shared_, comm, static_cast<int>(it - comm->members.begin())));
  }

 private:
  const std::shared_ptr<Engine> shared_;
  const Topology topology_;
  const std::shared_ptr<Comm> world_;
};

Topology TopologyOf(int rank, const std::vector<int>& host_of_rank) {
  const int size = static_cast<int>(host_of_rank.size());
  Topology t;
  t.rank = rank;
  t.size = size;
  t.local_rank = 0;
  t.local_size = 0;
  for (int r = 0; r < size; ++r) {
    if (host_of_rank[r] != host_of_rank[rank]) continue;
    ++t.local_size;
    if (r < rank) ++t.local_rank;
  }
  // Local rank of every rank, to split by local rank as MPI's cross communicator does.
  std::vector<int> local_rank(size, 0);
  absl::flat_hash_map<int, int> on_host;
  for (int r = 0; r < size; ++r) local_rank[r] = on_host[host_of_rank[r]]++;
  t.cross_rank = 0;
  t.cross_size = 0;
  for (int r = 0; r < size; ++r) {
    if (local_rank[r] != t.local_rank) continue;
    ++t.cross_size;
    if (r < rank) ++t.cross_rank;
  }
  t.is_homogeneous = true;
  for (const auto& [host, count] : on_host) {
    if (count != t.local_size) t.is_homogeneous = false;
  }
  return t;
}

}  // namespace

struct InProcessFabric::Shared {
  std::shared_ptr<Engine> engine;
};

InProcessFabric::InProcessFabric(int world_size, std::vector<int> host_of_rank)
    : shared_(std::make_shared<Shared>()) {
  if (world_size < 1 ||
      (!host_of_rank.empty() && static_cast<int>(host_of_rank.size()) != world_size)) {
    std::fprintf(stderr, "InProcessFabric: world_size %d with %zu host entries\n", world_size,
                 host_of_rank.size());
    std::abort();
  }
  if (host_of_rank.empty()) host_of_rank.assign(world_size, 0);
  shared_->engine = std::make_shared<Engine>(world_size, std::move(host_of_rank));
}

InProcessFabric::~InProcessFabric() = default;

int InProcessFabric::world_size() const { return shared_->engine->world_size; }

std::unique_ptr<runtime::Controller> InProcessFabric::CreateController(int rank) {
  const Engine& engine = *shared_->engine;
  if (rank < 0 || rank >= engine.world_size) {
    std::fprintf(stderr, "InProcessFabric: no rank %d in a world of %d\n", rank, engine.world_size);
    std::abort();
  }
  return std::make_unique<InProcessController>(shared_->engine,
                                               TopologyOf(rank, engine.host_of_rank));
}

int64_t InProcessFabric::group_collectives() const {
  Engine& engine = *shared_->engine;
  std::lock_guard<std::mutex> lock(engine.mu);
  return engine.group_calls;
}

void InProcessFabric::Kill(int rank) {
  Engine& engine = *shared_->engine;
  std::lock_guard<std::mutex> lock(engine.mu);
  engine.dead[rank] = true;
  engine.changed.notify_all();
}

}  // namespace chorus::testing
