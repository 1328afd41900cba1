// File: runtime/flight/flight_recorder.h
//
// Note [Flight recorder]
// Each rank keeps its last collectives in a fixed ring, so that a job that hangs or fails can be
// explained after the fact: which collective each rank ran last, which one it is stuck in, and
// which tensors it submitted that the others did not. A record is one batch (a response of the
// cycle's plan: one collective, fused or not), not one tensor, so that recording costs a few
// stores per batch and nothing per tensor (the host-cost budget; docs/perf.md). Every rank plans
// the same responses in the same order (Note [One global execution order]), so a batch's number
// (`batch`: its place among the world's planned responses) names the same collective on every
// rank, whether or not this rank is a member of its process set.
//
// What a batch does not show, the dump adds from the loop's state at that moment: the ops this
// rank submitted that are not yet negotiated (`pending`), and on rank 0 the coordinator's view of
// them (which ranks submitted each). The dump is one JSON file per rank (FormatFlightDump;
// format in docs/flight_recorder.md), written when the stall inspector reports, when the
// no-progress bound gives up, when the loop stops on a failure, when a batch fails, and when asked
// (Note [Flight dump on demand], below); `chorus-timeline flight DIR` reads a directory of them
// and names the first collective where the ranks part and the ranks that never submitted it.
//
// Thread-safety: Begin, End and Records are thread-safe (one mutex, taken twice per batch); the
// loop records, the GPU completion thread may end a record, a watchdog's thread may read.
#ifndef CHORUS_RUNTIME_FLIGHT_FLIGHT_RECORDER_H_
#define CHORUS_RUNTIME_FLIGHT_FLIGHT_RECORDER_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "base/mutex.h"
#include "chorus/types.h"
#include "runtime/flight/batch_metrics.h"
#include "runtime/message.h"
#include "runtime/negotiate/coordinator.h"

namespace chorus::runtime {

// A name or message in a fixed buffer (no allocation per record); longer text is cut, ending in
// "...".
template <size_t N>
struct FixedText {
  std::array<char, N> text{};
  void Set(absl::string_view value);
  absl::string_view view() const;
};

struct FlightRecord {
  enum class State : uint8_t { kStarted, kLaunched, kDone, kFailed };
  int64_t batch = -1;  // the batch's number in this world's global order (Note above)
  int64_t cycle = -1;  // the cycle that ran it
  OpType type = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  int32_t device = kCpuDevice;
  int32_t process_set_id = kGlobalProcessSetId;
  int32_t tensors = 0;
  int64_t bytes = 0;  // what the batch moves (ResponseBytes: allgather, the gathered size)
  FixedText<96> first_name;
  FixedText<96> last_name;  // empty for one tensor
  std::array<int64_t, 4> first_shape{};
  int32_t first_ndim = 0;  // may exceed 4: the shape is cut
  State state = State::kStarted;
  absl::Time started;
  absl::Time ended;  // InfinitePast while started or launched
  FixedText<256> error;
};

const char* FlightStateName(FlightRecord::State state);

class FlightRecorder {
 public:
  // Keeps the last `capacity` batches; 0: records nothing. Each batch that ends is added to
  // `metrics` (Note [Batch metrics]; borrowed, may be null).
  explicit FlightRecorder(int32_t capacity, BatchMetrics* metrics = nullptr);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  bool enabled() const { return capacity_ > 0; }
  // Records the start of batch `batch` (running `response`, which moves `bytes`, in `cycle`);
  // `launched`: a GPU batch, whose device work runs after the launch. The returned token ends it
  // (-1: not recorded). Constant time: nothing per tensor.
  int64_t Begin(const Response& response, int64_t bytes, int64_t batch, int64_t cycle,
                bool launched, absl::Time now);
  // Ends the record of `token` (nothing if the ring has moved past it): done or failed.
  void End(int64_t token, const absl::Status& status, absl::Time now);
  // The records, oldest first.
  std::vector<FlightRecord> Records() const;

 private:
  const int32_t capacity_;
  BatchMetrics* const metrics_;
  mutable Mutex mu_;
  std::vector<FlightRecord> ring_ ABSL_GUARDED_BY(mu_);
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;  // records begun so far; the next token
};

// An op this rank submitted that is not negotiated yet.
struct FlightPendingOp {
  std::string name;
  OpType type = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  int32_t process_set_id = kGlobalProcessSetId;
  int32_t device = kCpuDevice;
  absl::Time submitted;
};

struct FlightDump {
  std::string reason;  // why it was written (a stall, the no-progress report, a failure)
  std::string job;     // the same on every rank of the job (FlightJobId)
  int32_t rank = 0;
  int32_t size = 1;
  std::string host;
  int64_t pid = 0;
  absl::Time written;
  int64_t cycles = 0;   // cycles this world's loop has run
  int64_t batches = 0;  // batches planned so far (the next batch's number)
  std::vector<std::pair<int32_t, std::vector<int32_t>>> process_sets;  // id, world ranks
  std::vector<std::string> host_names;                                 // by world rank
  std::vector<FlightRecord> records;
  std::vector<FlightPendingOp> pending;
  // Rank 0: the ops the coordinator waits on, with the ranks that submitted each and those it
  // waits for (Coordinator::WaitingOps).
  bool has_coordinator = false;
  std::vector<StallReport> coordinator;
};

// The format's version (docs/flight_recorder.md); the analyzer refuses others.
inline constexpr int kFlightDumpFormat = 1;

std::string FormatFlightDump(const FlightDump& dump);
// This job's identity, the same on every rank: Open MPI's PMIx namespace, else the MPI-less
// rendezvous address and generation, else "".
std::string FlightJobId();
// Where dumps go: CHORUS_FLIGHT_RECORDER_DIR, else chorus-flight under $TMPDIR or /tmp.
std::string FlightDirectory(const std::string& configured);
// The file of `rank`'s dump in `dir`.
std::string FlightDumpPath(const std::string& dir, int32_t rank);
// Writes `dump` to FlightDumpPath (creating `dir` and its parents), whole or not at all (a
// temporary file renamed).
absl::Status WriteFlightDump(const std::string& dir, const FlightDump& dump);

// Note [Flight dump on demand]
// SIGUSR2 asks for the dumps of a job that neither failed nor stalled (slow, or stuck under a
// no-progress bound raised for long steps). The handler only counts (async-signal-safe); the
// background loop reads the count once per cycle and, when it grew, raises
// CacheBitVector::kFlightDumpAsked in that cycle's bit exchange, so that every rank dumps at the
// cycle's end: one signal to one rank (or chorusrun's, passed to every rank) dumps the whole job.
// A rank whose loop is inside a call that is not completing (a peer stopped or gone) runs no
// cycle; the no-progress watchdog's thread (MPI) reads the count at each of its checks and, for a
// request the loop has not answered while it has been inside one call for over a second, dumps
// that rank alone (the request stays the loop's: if the call completes, its next cycle dumps every
// rank). The handler goes in at init, before the handshake, recorder on or off, so that from init
// on SIGUSR2 ends no process (chorusrun passes it to every worker; a process that has not reached
// init yet still dies of it), and only where SIGUSR2 has its default action: an application's own
// handler, or SIG_IGN, is left alone, and the recorder then dumps on its other occasions only.
//
// Installs the handler (once per process); true when SIGUSR2's handler is chorus's.
bool InstallFlightDumpSignal();
// The SIGUSR2 signals this process has received since the handler went in.
uint64_t FlightDumpRequests();

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_FLIGHT_FLIGHT_RECORDER_H_
