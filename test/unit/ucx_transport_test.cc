// Unit tier: the real UCX transport (ops/ucx/ucx_transport.h), UcxBackend on it and
// UcxController (runtime/ucx/ucx_controller.h), with N UcxTransports in one process, one thread
// per rank, addresses exchanged in memory. Each rank checks its own numbers on its thread and
// reports a Status; the main thread CHECKs them (Catch2 is not thread-safe).
#include "ops/ucx/ucx_transport.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "base/interrupt.h"
#include "base/status_macros.h"
#include "ops/cpu/reduce_kernels.h"
#include "ops/no_progress.h"
#include "ops/ucx/algorithms/common.h"
#include "ops/ucx/ucx_backend.h"
#include "runtime/ucx/address_exchange.h"
#include "runtime/ucx/ucx_controller.h"
#include "test/support/rank_failures.h"

namespace chorus {
namespace {

using ops::UcxTransport;
using ops::UcxTransportOptions;
using runtime::UcxController;

// Every rank's published bytes; AllGather blocks until all n have published.
class Board {
 public:
  explicit Board(int n) : slots_(static_cast<size_t>(n)) {}
  std::vector<std::string> AllGather(int rank, const std::string& mine) {
    std::unique_lock<std::mutex> lock(mu_);
    slots_[static_cast<size_t>(rank)] = mine;
    cv_.notify_all();
    cv_.wait(lock, [&] {
      for (const auto& s : slots_) {
        if (!s.has_value()) return false;
      }
      return true;
    });
    std::vector<std::string> all;
    for (const auto& s : slots_) all.push_back(*s);
    return all;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::optional<std::string>> slots_;
};

class BoardExchange : public runtime::AddressExchange {
 public:
  BoardExchange(Board* board, int rank) : board_(board), rank_(rank) {}
  absl::StatusOr<std::vector<std::string>> AllGather(const std::string& mine) override {
    return board_->AllGather(rank_, mine);
  }

 private:
  Board* board_;
  int rank_;
};

Topology OneHost(int rank, int n) {
  Topology t;
  t.rank = rank;
  t.size = n;
  t.local_rank = rank;
  t.local_size = n;
  return t;
}

// Forms a UCX world of n ranks (one thread each) and runs fn on every rank with its
// controller; returns every rank's status. The controller is destroyed when fn returns.
std::vector<absl::Status> RunWorld(
    int n, const UcxTransportOptions& options,
    const std::function<absl::Status(int, std::unique_ptr<UcxController>&)>& fn) {
  Board board(n);
  std::vector<absl::Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      absl::Status& st = status[static_cast<size_t>(r)];
      auto transport = UcxTransport::Create(options);
      if (!transport.ok()) {
        st = transport.status();
        // The others wait for this rank's address: give them one that fails their Connect.
        board.AllGather(r, "");
        return;
      }
      BoardExchange exchange(&board, r);
      auto controller = UcxController::Create(OneHost(r, n), std::move(*transport), exchange);
      if (!controller.ok()) {
        st = controller.status();
        return;
      }
      st = fn(r, *controller);
    });
  }
  for (std::thread& t : threads) t.join();
  return status;
}

using testing::CheckAllOk;

absl::Status Wrong(const std::string& what) { return absl::InternalError("wrong result: " + what); }

TEST_CASE("A no-progress error carries what did not complete and the ranks it waited on",
          "[ucx][transport]") {
  const ops::NoProgress what{
      absl::Milliseconds(1500), "a UCX transfer\nwith: a newline", {0, 2, 7}};
  const absl::Status status = ops::NoProgressError(what, "words");
  CHECK(status.code() == absl::StatusCode::kUnavailable);
  CHECK(status.message() == "words");
  CHECK(ops::NoProgressOf(status) == what);
  CHECK(ops::NoProgressOf(ops::NoProgressError({absl::Seconds(3), "x", {}}, "w"))->peers.empty());
  CHECK_FALSE(ops::NoProgressOf(absl::UnavailableError("words")).has_value());
  CHECK_FALSE(ops::NoProgressOf(absl::OkStatus()).has_value());
}

// ---------------------------------------------------------------------------------------------

// The data plane over all ranks: every op with number checks.
absl::Status RunBackendOps(int r, int n, ops::CollectiveBackend& be) {
  if (be.name() != "UCX" || be.rank() != r || be.size() != n) return Wrong("backend identity");
  // Allreduce, small (recursive doubling) and 4 MiB (ring), float32 and float16.
  for (int64_t count : {int64_t{1}, int64_t{256}, int64_t{1} << 20}) {
    std::vector<float> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      v[static_cast<size_t>(i)] = static_cast<float>(i % 1000) + 0.25f * r;
    CHORUS_RETURN_IF_ERROR(
        be.Allreduce(v.data(), v.data(), count, DataType::kFloat32, ReduceOp::kSum));
    for (int64_t i = 0; i < count; ++i) {
      const float want = static_cast<float>(n * (i % 1000)) + 0.25f * (n * (n - 1) / 2);
      if (v[static_cast<size_t>(i)] != want) {
        return Wrong("allreduce of " + std::to_string(count) + " at " + std::to_string(i) + ": " +
                     std::to_string(v[static_cast<size_t>(i)]) + " != " + std::to_string(want));
      }
    }
  }
  {
    std::vector<uint16_t> h(3001), out(3001);
    for (size_t i = 0; i < h.size(); ++i) h[i] = ops::FloatToHalf(r == 0 ? 1.5f : -0.25f);
    CHORUS_RETURN_IF_ERROR(
        be.Allreduce(h.data(), out.data(), 3001, DataType::kFloat16, ReduceOp::kMax));
    for (uint16_t x : out) {
      if (ops::HalfToFloat(x) != 1.5f) return Wrong("float16 max");
    }
  }
  // Allgatherv: rank q contributes q * 1000 + 1 bytes of value q.
  {
    std::vector<int64_t> bytes(static_cast<size_t>(n));
    int64_t total = 0;
    for (int q = 0; q < n; ++q) total += bytes[static_cast<size_t>(q)] = q * 1000 + 1;
    std::vector<char> mine(static_cast<size_t>(bytes[static_cast<size_t>(r)]),
                           static_cast<char>(r));
    std::vector<char> all(static_cast<size_t>(total), 'x');
    CHORUS_RETURN_IF_ERROR(be.Allgatherv(mine.data(), all.data(), bytes));
    size_t at = 0;
    for (int q = 0; q < n; ++q) {
      for (int64_t j = 0; j < bytes[static_cast<size_t>(q)]; ++j) {
        if (all[at++] != static_cast<char>(q)) return Wrong("allgatherv");
      }
    }
  }
  // Broadcast from the last rank: small (tree) and 3 MiB + 1 (chain).
  for (int64_t bytes : {int64_t{7}, (int64_t{3} << 20) + 1}) {
    std::vector<char> buf(static_cast<size_t>(bytes), r == n - 1 ? 'B' : '.');
    CHORUS_RETURN_IF_ERROR(be.Broadcast(buf.data(), bytes, n - 1));
    for (char c : buf) {
      if (c != 'B') return Wrong("broadcast of " + std::to_string(bytes));
    }
  }
  // Alltoallv: 2 bytes to every rank: (sender, receiver).
  {
    std::vector<char> out(static_cast<size_t>(2 * n)), in(static_cast<size_t>(2 * n), '?');
    std::vector<int64_t> two(static_cast<size_t>(n), 2), offs(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) {
      offs[static_cast<size_t>(q)] = 2 * q;
      out[static_cast<size_t>(2 * q)] = static_cast<char>(r);
      out[static_cast<size_t>(2 * q + 1)] = static_cast<char>(q);
    }
    CHORUS_RETURN_IF_ERROR(be.Alltoallv(out.data(), two, offs, in.data(), two, offs));
    for (int q = 0; q < n; ++q) {
      if (in[static_cast<size_t>(2 * q)] != q || in[static_cast<size_t>(2 * q + 1)] != r) {
        return Wrong("alltoallv");
      }
    }
  }
  // ReduceScatter: rank q gets q + 2 elements of int64: sum over ranks of (rank + index).
  {
    std::vector<int64_t> counts(static_cast<size_t>(n));
    int64_t total = 0;
    for (int q = 0; q < n; ++q) total += counts[static_cast<size_t>(q)] = q + 2;
    std::vector<int64_t> in(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) in[static_cast<size_t>(i)] = r + i;
    std::vector<int64_t> out(static_cast<size_t>(counts[static_cast<size_t>(r)]));
    CHORUS_RETURN_IF_ERROR(
        be.ReduceScatter(in.data(), out.data(), counts, DataType::kInt64, ReduceOp::kSum));
    const int64_t first = ops::ucx::BlockOffsets(counts)[static_cast<size_t>(r)];
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] != n * (first + static_cast<int64_t>(i)) + n * (n - 1) / 2)
        return Wrong("reducescatter");
    }
  }
  return be.Barrier();
}

absl::Status RunControllerOps(int r, int n, UcxController& c) {
  if (c.name() != "UCX" || c.rank() != r || c.size() != n) return Wrong("controller identity");
  // GatherToRoot with lengths 0 (rank 1), small and large, NULs included.
  for (size_t base : {size_t{0}, size_t{7}, size_t{100001}}) {
    auto message = [base](int q) {
      std::string m(q == 1 ? 0 : base * (q + 1) + q, '\0');
      for (size_t j = 0; j < m.size(); ++j) m[j] = static_cast<char>((q * 31 + j * 7) % 256);
      return m;
    };
    std::vector<std::string> all = {"stale"};
    CHORUS_RETURN_IF_ERROR(c.GatherToRoot(message(r), &all));
    if (r == 0) {
      if (all.size() != static_cast<size_t>(n)) return Wrong("gather size");
      for (int q = 0; q < n; ++q) {
        if (all[static_cast<size_t>(q)] != message(q))
          return Wrong("gather of rank " + std::to_string(q));
      }
    } else if (!all.empty()) {
      return Wrong("gather left data on a non-root");
    }
  }
  // BroadcastFromRoot: empty, small, large (chain).
  for (size_t len : {size_t{0}, size_t{7}, size_t{300000}}) {
    std::string root(len, '\0');
    for (size_t j = 0; j < len; ++j) root[j] = static_cast<char>((j * 13 + 5) % 256);
    std::string data = r == 0 ? root : std::string(len % 3 + 5, 'x');
    CHORUS_RETURN_IF_ERROR(c.BroadcastFromRoot(&data));
    if (data != root) return Wrong("broadcast of " + std::to_string(len));
  }
  // AllreduceBitAnd: rank q clears bit b of word k when (b + k) % (q + 2) == 0.
  for (size_t words : {size_t{0}, size_t{1}, size_t{129}}) {
    auto bits_of = [](int q, size_t k) {
      uint64_t v = ~uint64_t{0};
      for (int b = 0; b < 64; ++b) {
        if ((static_cast<size_t>(b) + k) % static_cast<size_t>(q + 2) == 0)
          v &= ~(uint64_t{1} << b);
      }
      return v;
    };
    std::vector<uint64_t> bits(words);
    for (size_t k = 0; k < words; ++k) bits[k] = bits_of(r, k);
    CHORUS_RETURN_IF_ERROR(c.AllreduceBitAnd(absl::MakeSpan(bits)));
    for (size_t k = 0; k < words; ++k) {
      uint64_t want = ~uint64_t{0};
      for (int q = 0; q < n; ++q) want &= bits_of(q, k);
      if (bits[k] != want) return Wrong("bit and");
    }
  }
  CHORUS_RETURN_IF_ERROR(c.Barrier());

  // A data plane over the first and last rank; the others get null.
  const std::vector<int32_t> ends = {0, n - 1};
  auto sub = c.CreateBackend(ends);
  CHORUS_RETURN_IF_ERROR(sub.status());
  const bool member = r == 0 || r == n - 1;
  if ((*sub != nullptr) != member) return Wrong("membership");
  if (*sub != nullptr) {
    ops::CollectiveBackend& be = **sub;
    if (be.size() != 2 || be.rank() != (r == 0 ? 0 : 1)) return Wrong("subset identity");
    int64_t v[2] = {r, 1};
    CHORUS_RETURN_IF_ERROR(be.Allreduce(v, v, 2, DataType::kInt64, ReduceOp::kSum));
    if (v[0] != n - 1 || v[1] != 2) return Wrong("subset allreduce");
  }
  // Invalid sets are rejected alike everywhere; the control plane still works afterwards.
  if (c.CreateBackend(std::vector<int32_t>{}).status().code() !=
          absl::StatusCode::kInvalidArgument ||
      c.CreateBackend(std::vector<int32_t>{1, 0}).status().code() !=
          absl::StatusCode::kInvalidArgument ||
      c.CreateBackend(std::vector<int32_t>{n}).status().code() !=
          absl::StatusCode::kInvalidArgument) {
    return Wrong("invalid sets accepted");
  }
  return c.Barrier();
}

TEST_CASE("UCX world: controller primitives, world and subset data planes", "[ucx][transport]") {
  const int n = GENERATE(2, 3);
  const auto mode =
      GENERATE(ops::PeerErrorHandling::kRemotePeers, ops::PeerErrorHandling::kAllPeers);
  CAPTURE(n, static_cast<int>(mode));
  UcxTransportOptions options;
  options.error_handling = mode;
  CheckAllOk(RunWorld(n, options, [n](int r, std::unique_ptr<UcxController>& c) -> absl::Status {
    CHORUS_RETURN_IF_ERROR(RunControllerOps(r, n, *c));
    std::vector<int32_t> all(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) all[static_cast<size_t>(q)] = q;
    auto be = c->CreateBackend(all);
    CHORUS_RETURN_IF_ERROR(be.status());
    if (*be == nullptr) return Wrong("world backend is null");
    return RunBackendOps(r, n, **be);
  }));
}

TEST_CASE("UCX transport: a destroyed peer makes Wait return Unavailable naming it",
          "[ucx][transport]") {
  const auto mode =
      GENERATE(ops::PeerErrorHandling::kRemotePeers, ops::PeerErrorHandling::kAllPeers);
  CAPTURE(static_cast<int>(mode));
  UcxTransportOptions options;
  options.error_handling = mode;
  // Bounds the wait when UCX does not report the loss (shared memory); a parameter of the code
  // under test, not an assertion on time.
  options.no_progress_timeout = absl::Milliseconds(300);
  absl::Status after_loss, later_call;
  const auto status =
      RunWorld(2, options, [&](int r, std::unique_ptr<UcxController>& c) -> absl::Status {
        auto be = c->CreateBackend(std::vector<int32_t>{0, 1});
        CHORUS_RETURN_IF_ERROR(be.status());
        float x = 1.0f;
        CHORUS_RETURN_IF_ERROR((*be)->Allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum));
        if (x != 2.0f) return Wrong("allreduce before the loss");
        if (r == 1) {
          // Rank 1 leaves: its transport goes with the last owner.
          be->reset();
          c.reset();
          return absl::OkStatus();
        }
        // Rank 0 waits for a contribution that never comes.
        std::vector<float> v(1000, 1.0f);
        after_loss = (*be)->Allreduce(v.data(), v.data(), 1000, DataType::kFloat32, ReduceOp::kSum);
        // Errors are final: the control plane fails at once too.
        later_call = c->Barrier();
        return absl::OkStatus();
      });
  CheckAllOk(status);
  INFO(after_loss.ToString());
  CHECK(after_loss.code() == absl::StatusCode::kUnavailable);
  CHECK(after_loss.message().find("rank 1") != std::string::npos);
  // Past the bound (UCX did not report the loss): what the runtime reports it from.
  if (const std::optional<ops::NoProgress> what = ops::NoProgressOf(after_loss)) {
    CHECK(what->bound == absl::Milliseconds(300));
    CHECK(what->call == "a UCX transfer");
    CHECK(what->peers == std::vector<int32_t>{1});
  }
  CHECK(later_call.code() == absl::StatusCode::kUnavailable);
  CHECK(later_call.message() == after_loss.message());
}

// Two bare transports connected to each other, each driven by its own thread.
std::vector<absl::Status> RunPair(const UcxTransportOptions& options,
                                  const std::function<absl::Status(int, UcxTransport&)>& fn) {
  Board board(2);
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto t = UcxTransport::Create(options);
      if (!t.ok()) {
        status[static_cast<size_t>(r)] = t.status();
        board.AllGather(r, "");
        return;
      }
      const std::vector<std::string> all = board.AllGather(r, (*t)->WorkerAddress());
      absl::Status st = (*t)->Connect(r, all);
      status[static_cast<size_t>(r)] = st.ok() ? fn(r, **t) : st;
    });
  }
  for (std::thread& t : threads) t.join();
  return status;
}

TEST_CASE("UCX transport: a raised interrupt fails the Wait in progress and every later call",
          "[ucx][transport]") {
  auto interrupt = std::make_shared<Interrupt>();
  UcxTransportOptions options;
  options.interrupt = interrupt;
  // Far beyond the test: only the interrupt can end rank 0's wait.
  options.no_progress_timeout = absl::Hours(1);
  absl::Status waited, later;
  std::atomic<bool> rank0_waiting{false};
  const std::vector<absl::Status> status =
      RunPair(options, [&](int r, UcxTransport& t) -> absl::Status {
        if (r == 1) {
          // Raised from another thread while rank 0 waits for a message rank 1 never sends.
          while (!rank0_waiting.load()) std::this_thread::yield();
          interrupt->Raise(absl::AbortedError("generation 3 aborted"));
          return absl::OkStatus();
        }
        int32_t value = 0;
        CHORUS_ASSIGN_OR_RETURN(auto id, t.Irecv(1, 7, &value, sizeof(value)));
        rank0_waiting.store(true);
        waited = t.Wait({id});
        later = t.Isend(1, 8, &value, sizeof(value)).status();
        return absl::OkStatus();
      });
  CHECK(status[0].ok());
  CHECK(status[1].ok());
  CHECK(waited.code() == absl::StatusCode::kAborted);
  CHECK(waited.message() == "generation 3 aborted");
  CHECK(later.code() == absl::StatusCode::kAborted);
}

// ---------------------------------------------------------------------------------------------
// An abort (a raised interrupt, or any final error) ends every request at once
// (Note [Abandoning requests] in docs/ucx_transport.md).

// The no-progress timeout of these tests: the default. An abort that waited for it would take a
// minute; one that ends the requests at once takes milliseconds. The bounds below, half of it,
// separate the two; they are not performance assertions.
constexpr absl::Duration kNoProgress = absl::Seconds(60);
constexpr auto kAtOnce = std::chrono::seconds(30);
// Well above UCX's rendezvous threshold on every transport.
constexpr size_t kLarge = size_t{8} << 20;

using Clock = std::chrono::steady_clock;

// Two transports connected as ranks 0 and 1 (Connect is local, so one thread does it); each may
// then be driven by any one thread at a time.
std::vector<std::unique_ptr<UcxTransport>> ConnectedPair(const UcxTransportOptions& options) {
  std::vector<std::unique_ptr<UcxTransport>> pair;
  std::vector<std::string> addresses;
  for (int r = 0; r < 2; ++r) {
    auto t = UcxTransport::Create(options);
    REQUIRE(t.ok());
    addresses.push_back((*t)->WorkerAddress());
    pair.push_back(std::move(*t));
  }
  for (int r = 0; r < 2; ++r) REQUIRE(pair[static_cast<size_t>(r)]->Connect(r, addresses).ok());
  return pair;
}

// Raises `interrupt` from its own thread `delay` after Start(), as an elastic worker's
// membership watcher does; joined on destruction.
class DelayedRaise {
 public:
  DelayedRaise(std::shared_ptr<Interrupt> interrupt, std::chrono::milliseconds delay)
      : interrupt_(std::move(interrupt)), delay_(delay) {}
  ~DelayedRaise() {
    if (thread_.joinable()) thread_.join();
  }
  void Start() {
    thread_ = std::thread([this] {
      std::this_thread::sleep_for(delay_);
      interrupt_->Raise(absl::AbortedError("generation 3 aborted"));
    });
  }

 private:
  std::shared_ptr<Interrupt> interrupt_;
  std::chrono::milliseconds delay_;
  std::thread thread_;
};

void Free(std::vector<char>& buffer) { std::vector<char>().swap(buffer); }

TEST_CASE("UCX transport: an abort ends a rendezvous send to a peer that never answers at once",
          "[ucx][transport][ucx_abort]") {
  const auto mode =
      GENERATE(ops::PeerErrorHandling::kRemotePeers, ops::PeerErrorHandling::kAllPeers);
  CAPTURE(static_cast<int>(mode));
  auto interrupt = std::make_shared<Interrupt>();
  UcxTransportOptions options;
  options.error_handling = mode;
  options.interrupt = interrupt;
  options.no_progress_timeout = kNoProgress;
  // Declared before the transports, which would otherwise outlive them if a REQUIRE fails.
  std::vector<char> out(kLarge, 's'), never_waited(kLarge, 'n'), in(4096, 'r');
  auto pair = ConnectedPair(options);
  // Rank 0 is a peer that hangs (or died without closing): nothing ever progresses its worker.
  UcxTransport& t = *pair[1];
  auto send = t.Isend(0, 1, out.data(), static_cast<int64_t>(out.size()));
  auto recv = t.Irecv(0, 2, in.data(), static_cast<int64_t>(in.size()));  // in flight, unmatched
  auto other = t.Isend(0, 3, never_waited.data(), static_cast<int64_t>(never_waited.size()));
  REQUIRE(send.ok());
  REQUIRE(recv.ok());
  REQUIRE(other.ok());

  DelayedRaise raise(interrupt, std::chrono::milliseconds(50));
  raise.Start();  // shortly after the Wait below starts
  const auto wait_start = Clock::now();
  const absl::Status waited = t.Wait({*send, *recv});
  const auto wait_time = Clock::now() - wait_start;
  INFO("Wait: " << waited.ToString() << " after "
                << std::chrono::duration<double>(wait_time).count() << " s");
  CHECK(waited.code() == absl::StatusCode::kAborted);
  CHECK(waited.message() == "generation 3 aborted");
  CHECK(wait_time < kAtOnce);
  // Errors are final.
  CHECK(t.Isend(0, 4, out.data(), 1).status() == waited);

  // The transport no longer touches any request's buffer, waited on or not: the caller may free
  // them before destroying it (a late access is what ASan runs would report).
  Free(out);
  Free(never_waited);
  Free(in);
  const auto destroy_start = Clock::now();
  pair[1].reset();  // with `other` never waited on
  const auto destroy_time = Clock::now() - destroy_start;
  INFO("destroyed after " << std::chrono::duration<double>(destroy_time).count() << " s");
  CHECK(destroy_time < kAtOnce);
  pair[0].reset();
}

TEST_CASE("UCX transport: destruction after the interrupt is raised ends requests at once",
          "[ucx][transport][ucx_abort]") {
  const auto mode =
      GENERATE(ops::PeerErrorHandling::kRemotePeers, ops::PeerErrorHandling::kAllPeers);
  // Raised before the destructor runs (no Wait has seen it), or while it flushes the sends.
  const bool raised_before = GENERATE(true, false);
  CAPTURE(static_cast<int>(mode), raised_before);
  auto interrupt = std::make_shared<Interrupt>();
  UcxTransportOptions options;
  options.error_handling = mode;
  options.interrupt = interrupt;
  options.no_progress_timeout = kNoProgress;
  std::vector<char> out(kLarge, 's'), in(4096, 'r');  // outlive the transports
  auto pair = ConnectedPair(options);
  // Requests never waited on, to rank 0, which nothing progresses.
  REQUIRE(pair[1]->Isend(0, 1, out.data(), static_cast<int64_t>(out.size())).ok());
  REQUIRE(pair[1]->Irecv(0, 2, in.data(), static_cast<int64_t>(in.size())).ok());
  DelayedRaise raise(interrupt, std::chrono::milliseconds(50));
  if (raised_before) {
    interrupt->Raise(absl::AbortedError("generation 3 aborted"));
  } else {
    raise.Start();  // shortly after the destructor starts
  }
  const auto start = Clock::now();
  pair[1].reset();
  const auto destroy_time = Clock::now() - start;
  INFO("destroyed after " << std::chrono::duration<double>(destroy_time).count() << " s");
  CHECK(destroy_time < kAtOnce);
  pair[0].reset();
}

TEST_CASE("UCX transport: an abort ends a receive whose rendezvous has begun at once",
          "[ucx][transport][ucx_abort]") {
  // Over TCP (peer error handling everywhere) a receiver that has matched the sender's RTS asks
  // the sender for the data, which the sender sends from its own progress calls: a sender that
  // stops leaves a matched receive in flight, which ucp_request_cancel cannot end. (Over shared
  // memory the receiver fetches the data itself, and such a receive finishes.)
  auto interrupt = std::make_shared<Interrupt>();
  UcxTransportOptions options;
  options.error_handling = ops::PeerErrorHandling::kAllPeers;
  options.interrupt = interrupt;
  options.no_progress_timeout = kNoProgress;
  constexpr size_t kHuge = size_t{32} << 20;          // far more than the sockets hold
  std::vector<char> out(kHuge, 's'), in(kHuge, 'r');  // outlive the transports
  auto pair = ConnectedPair(options);
  absl::Status sender, matched, waited;
  std::chrono::steady_clock::duration wait_time{};
  DelayedRaise raise(interrupt, std::chrono::milliseconds(200));  // shortly after Wait starts
  std::thread rank0([&] {
    // The rendezvous send, then a small message behind it on the same endpoint; progresses only
    // until rank 1 acknowledges the small one, then never again.
    UcxTransport& t = *pair[0];
    char small = 'm', ack = 0;
    auto big = t.Isend(1, 2, out.data(), static_cast<int64_t>(out.size()));
    auto behind = t.Isend(1, 3, &small, 1);
    auto acked = t.Irecv(1, 4, &ack, 1);
    sender = !big.ok()      ? big.status()
             : !behind.ok() ? behind.status()
             : !acked.ok()  ? acked.status()
                            : t.Wait({*behind, *acked});
  });
  UcxTransport& t = *pair[1];
  char small = 0, ack = 'a';
  auto recv = t.Irecv(0, 2, in.data(), static_cast<int64_t>(in.size()));
  auto behind = t.Irecv(0, 3, &small, 1);
  // UCP matches one endpoint's messages in order: once the small message is here, the RTS
  // before it has been matched to `recv`.
  matched = !recv.ok() ? recv.status() : !behind.ok() ? behind.status() : t.Wait({*behind});
  if (matched.ok()) {
    auto acked = t.Isend(0, 4, &ack, 1);
    matched = acked.ok() ? t.Wait({*acked}) : acked.status();
  }
  rank0.join();  // rank 0 progresses no more
  REQUIRE(sender.ok());
  REQUIRE(matched.ok());
  raise.Start();
  const auto start = Clock::now();
  waited = t.Wait({*recv});
  wait_time = Clock::now() - start;
  INFO("Wait: " << waited.ToString() << " after "
                << std::chrono::duration<double>(wait_time).count() << " s");
  CHECK(waited.code() == absl::StatusCode::kAborted);
  CHECK(wait_time < kAtOnce);
  Free(in);
  const auto destroy_start = Clock::now();
  pair[1].reset();
  pair[0].reset();  // with its send never waited on
  CHECK(Clock::now() - destroy_start < kAtOnce);
}

TEST_CASE("UCX transport: same-tag order, self messages, size checks, bad calls",
          "[ucx][transport]") {
  UcxTransportOptions options;
  options.no_progress_timeout = absl::Seconds(30);
  CheckAllOk(RunPair(options, [](int r, UcxTransport& t) -> absl::Status {
    const int peer = 1 - r;
    if (t.peer_error_handling(peer)) return Wrong("same-host peer should use shared memory");
    if (t.Connect(r, {t.WorkerAddress()}).code() != absl::StatusCode::kFailedPrecondition) {
      return Wrong("second Connect accepted");
    }
    // 200 messages with one tag, small and large, arrive in order.
    constexpr int kMessages = 200;
    std::vector<std::vector<int32_t>> out(kMessages), in(kMessages);
    std::vector<ops::RequestId> ids;
    for (int k = 0; k < kMessages; ++k) {
      const size_t len = k % 10 == 0 ? 70000 : 3;
      out[static_cast<size_t>(k)].assign(len, 1000 * r + k);
      in[static_cast<size_t>(k)].assign(len, -1);
      auto recv =
          t.Irecv(peer, 42, in[static_cast<size_t>(k)].data(), static_cast<int64_t>(len * 4));
      auto send =
          t.Isend(peer, 42, out[static_cast<size_t>(k)].data(), static_cast<int64_t>(len * 4));
      CHORUS_RETURN_IF_ERROR(recv.status());
      CHORUS_RETURN_IF_ERROR(send.status());
      ids.push_back(*recv);
      ids.push_back(*send);
    }
    CHORUS_RETURN_IF_ERROR(t.Wait(ids));
    for (int k = 0; k < kMessages; ++k) {
      for (int32_t x : in[static_cast<size_t>(k)]) {
        if (x != 1000 * peer + k) return Wrong("message " + std::to_string(k) + " out of order");
      }
    }
    // A message to itself.
    int64_t a = 77 + r, b = 0;
    auto self_recv = t.Irecv(r, 7, &b, 8);
    auto self_send = t.Isend(r, 7, &a, 8);
    CHORUS_RETURN_IF_ERROR(self_recv.status());
    CHORUS_RETURN_IF_ERROR(self_send.status());
    CHORUS_RETURN_IF_ERROR(t.Wait({*self_recv, *self_send}));
    if (b != 77 + r) return Wrong("self message");
    // An id listed twice is the caller's bug (InvalidArgument, not final); both requests are
    // still finished and released.
    auto again_recv = t.Irecv(r, 8, &b, 8);
    auto again_send = t.Isend(r, 8, &a, 8);
    CHORUS_RETURN_IF_ERROR(again_recv.status());
    CHORUS_RETURN_IF_ERROR(again_send.status());
    if (t.Wait({*again_recv, *again_send, *again_recv}).code() !=
            absl::StatusCode::kInvalidArgument ||
        t.Wait({*again_send}).code() != absl::StatusCode::kInvalidArgument) {
      return Wrong("repeated id");
    }
    // Local argument errors, detected before anything is sent.
    char c = 0;
    if (t.Isend(5, 1, &c, 1).status().code() != absl::StatusCode::kInvalidArgument ||
        t.Irecv(peer, ops::kMaxWorldTag + 1, &c, 1).status().code() !=
            absl::StatusCode::kInvalidArgument ||
        t.Isend(peer, 1, nullptr, 1).status().code() != absl::StatusCode::kInvalidArgument ||
        t.Wait({ops::RequestId{12345}}).code() != absl::StatusCode::kInvalidArgument) {
      return Wrong("bad call accepted");
    }
    // Size disagreement: rank 0 sends 16 bytes, rank 1 expects 8.
    int64_t big[4] = {1, 2, 3, 4}, small[4] = {};
    if (r == 0) {
      auto s1 = t.Isend(peer, 9, big, 16);
      CHORUS_RETURN_IF_ERROR(s1.status());
      return t.Wait({*s1});
    }
    auto longer = t.Irecv(peer, 9, small, 8);
    CHORUS_RETURN_IF_ERROR(longer.status());
    const absl::Status truncated = t.Wait({*longer});
    if (truncated.code() != absl::StatusCode::kInternal ||
        truncated.message().find("longer than the 8 bytes") == std::string::npos) {
      return Wrong("truncation: " + truncated.ToString());
    }
    // Errors are final.
    if (t.Irecv(peer, 10, small, 32).status() != truncated) return Wrong("error not final");
    return absl::OkStatus();
  }));
}

TEST_CASE("UCX transport: malformed addresses and bad settings are rejected", "[ucx][transport]") {
  auto t = UcxTransport::Create();
  REQUIRE(t.ok());
  CHECK((*t)->Connect(0, {}).code() == absl::StatusCode::kInvalidArgument);
  CHECK((*t)->Connect(1, {(*t)->WorkerAddress()}).code() == absl::StatusCode::kInvalidArgument);
  CHECK((*t)->Connect(0, {"not mine"}).code() == absl::StatusCode::kInvalidArgument);
  CHECK((*t)->Connect(0, {(*t)->WorkerAddress(), "CUX1garbage"}).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(!(*t)->connected());
  char c = 0;
  CHECK((*t)->Isend(0, 0, &c, 1).status().code() == absl::StatusCode::kFailedPrecondition);
  // A world of one.
  REQUIRE((*t)->Connect(0, {(*t)->WorkerAddress()}).ok());
  CHECK((*t)->size() == 1);
  UcxTransportOptions bad;
  bad.ucx_config = {{"KEEPALIVE_INTERVAL", "banana"}};
  CHECK(UcxTransport::Create(bad).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chorus
