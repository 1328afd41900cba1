#include "runtime/flight/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "base/config_names.h"
#include "chorus/types.h"
#include "nlohmann/json.hpp"

namespace chorus::runtime {

template <size_t N>
void FixedText<N>::Set(absl::string_view value) {
  constexpr size_t kRoom = N - 1;  // the terminating NUL
  if (value.size() <= kRoom) {
    // An empty view may hold a null pointer, which memcpy must not be given.
    if (!value.empty()) std::memcpy(text.data(), value.data(), value.size());
    text[value.size()] = '\0';
    return;
  }
  constexpr absl::string_view kCut = "...";
  std::memcpy(text.data(), value.data(), kRoom - kCut.size());
  std::memcpy(text.data() + kRoom - kCut.size(), kCut.data(), kCut.size());
  text[kRoom] = '\0';
}

template <size_t N>
absl::string_view FixedText<N>::view() const {
  return absl::string_view(text.data());
}

template struct FixedText<96>;
template struct FixedText<256>;

const char* FlightStateName(FlightRecord::State state) {
  switch (state) {
    case FlightRecord::State::kStarted:
      return "started";
    case FlightRecord::State::kLaunched:
      return "launched";
    case FlightRecord::State::kDone:
      return "done";
    case FlightRecord::State::kFailed:
      return "failed";
  }
  return "unknown";
}

FlightRecorder::FlightRecorder(int32_t capacity, BatchMetrics* metrics)
    : capacity_(std::max<int32_t>(0, capacity)), metrics_(metrics) {
  MutexLock lock(&mu_);
  ring_.resize(static_cast<size_t>(capacity_));
}

int64_t FlightRecorder::Begin(const Response& response, int64_t bytes, int64_t batch, int64_t cycle,
                              bool launched, absl::Time now) {
  if (capacity_ == 0) return -1;
  const size_t n = response.names.size();
  MutexLock lock(&mu_);
  const int64_t token = next_++;
  FlightRecord& r = ring_[static_cast<size_t>(token % capacity_)];
  r.batch = batch;
  r.cycle = cycle;
  r.type = response.type;
  r.dtype = response.dtype;
  r.device = response.device;
  r.process_set_id = response.process_set_id;
  r.tensors = static_cast<int32_t>(n);
  r.bytes = bytes;
  r.first_name.Set(n > 0 ? absl::string_view(response.names.front()) : absl::string_view());
  r.last_name.Set(n > 1 ? absl::string_view(response.names.back()) : absl::string_view());
  r.first_ndim = 0;
  if (!response.shapes.empty()) {
    const std::vector<int64_t>& shape = response.shapes.front();
    r.first_ndim = static_cast<int32_t>(shape.size());
    std::copy_n(shape.begin(), std::min(shape.size(), r.first_shape.size()), r.first_shape.begin());
  }
  r.state = launched ? FlightRecord::State::kLaunched : FlightRecord::State::kStarted;
  r.started = now;
  r.ended = absl::InfinitePast();
  r.error.Set(response.is_error() ? absl::string_view(response.error_message)
                                  : absl::string_view());
  return token;
}

void FlightRecorder::End(int64_t token, const absl::Status& status, absl::Time now) {
  if (token < 0) return;
  MutexLock lock(&mu_);
  if (token + capacity_ < next_) return;  // overwritten since
  FlightRecord& r = ring_[static_cast<size_t>(token % capacity_)];
  r.ended = now;
  if (status.ok()) {
    r.state = FlightRecord::State::kDone;
  } else {
    r.state = FlightRecord::State::kFailed;
    r.error.Set(status.message());
  }
  if (metrics_ != nullptr) metrics_->Add(r.type, r.tensors, r.bytes, now - r.started, status.ok());
}

std::vector<FlightRecord> FlightRecorder::Records() const {
  MutexLock lock(&mu_);
  std::vector<FlightRecord> out;
  const int64_t first = std::max<int64_t>(0, next_ - capacity_);
  out.reserve(static_cast<size_t>(next_ - first));
  for (int64_t t = first; t < next_; ++t) out.push_back(ring_[static_cast<size_t>(t % capacity_)]);
  return out;
}

namespace {

using nlohmann::json;

// Microseconds since the Unix epoch (null for InfinitePast: not yet).
json Micros(absl::Time t) {
  if (t == absl::InfinitePast()) return nullptr;
  return absl::ToUnixMicros(t);
}

json RecordJson(const FlightRecord& r) {
  json shape = json::array();
  for (int32_t d = 0; d < std::min<int32_t>(r.first_ndim, 4); ++d)
    shape.push_back(r.first_shape[d]);
  json out = {
      {"batch", r.batch},
      {"cycle", r.cycle},
      {"op", OpTypeName(r.type)},
      {"dtype", DataTypeName(r.dtype)},
      {"device", r.device},
      {"process_set", r.process_set_id},
      {"tensors", r.tensors},
      {"bytes", r.bytes},
      {"first_tensor", std::string(r.first_name.view())},
      {"last_tensor", std::string(r.last_name.view())},
      {"first_shape", shape},
      {"first_shape_cut", r.first_ndim > 4},
      {"state", FlightStateName(r.state)},
      {"started_us", Micros(r.started)},
      {"ended_us", Micros(r.ended)},
  };
  if (!r.error.view().empty()) out["error"] = std::string(r.error.view());
  return out;
}

}  // namespace

std::string FormatFlightDump(const FlightDump& dump) {
  json sets = json::array();
  for (const auto& [id, ranks] : dump.process_sets) sets.push_back({{"id", id}, {"ranks", ranks}});
  json records = json::array();
  for (const FlightRecord& r : dump.records) records.push_back(RecordJson(r));
  json pending = json::array();
  for (const FlightPendingOp& op : dump.pending) {
    pending.push_back({{"name", op.name},
                       {"op", OpTypeName(op.type)},
                       {"dtype", DataTypeName(op.dtype)},
                       {"shape", op.shape},
                       {"process_set", op.process_set_id},
                       {"device", op.device},
                       {"submitted_us", Micros(op.submitted)}});
  }
  json out = {
      {"format", "chorus-flight-recorder"},
      {"version", kFlightDumpFormat},
      {"reason", dump.reason},
      {"job", dump.job},
      {"rank", dump.rank},
      {"size", dump.size},
      {"host", dump.host},
      {"pid", dump.pid},
      {"written_us", Micros(dump.written)},
      {"cycles", dump.cycles},
      {"batches", dump.batches},
      {"process_sets", sets},
      {"hosts", dump.host_names},
      {"records", records},
      {"pending", pending},
  };
  if (dump.has_coordinator) {
    json coordinator = json::array();
    for (const StallReport& op : dump.coordinator) {
      coordinator.push_back({{"name", op.name},
                             {"op", OpTypeName(op.type)},
                             {"process_set", op.process_set_id},
                             {"submitted_ranks", op.submitted_ranks},
                             {"missing_ranks", op.missing_ranks},
                             {"waited_s", absl::ToDoubleSeconds(op.waited)}});
    }
    out["coordinator"] = coordinator;
  }
  // Names are bytes from the framework: invalid UTF-8 is replaced, never a failed dump.
  return out.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string FlightJobId() {
  if (const char* ns = std::getenv("PMIX_NAMESPACE"); ns != nullptr && *ns != '\0') {
    return absl::StrCat("mpi:", ns);
  }
  const char* addr = std::getenv(config_names::kRendezvousAddr);
  if (addr != nullptr && *addr != '\0') {
    const char* generation = std::getenv(config_names::kElasticGeneration);
    return absl::StrCat("rendezvous:", addr,
                        generation != nullptr ? absl::StrCat("/", generation) : "");
  }
  return "";
}

std::string FlightDirectory(const std::string& configured) {
  if (!configured.empty()) return configured;
  const char* tmp = std::getenv("TMPDIR");
  return absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/chorus-flight");
}

std::string FlightDumpPath(const std::string& dir, int32_t rank) {
  return absl::StrCat(dir, "/rank", rank, ".json");
}

absl::Status WriteFlightDump(const std::string& dir, const FlightDump& dump) {
  std::error_code made;
  std::filesystem::create_directories(dir, made);
  if (made) {
    return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", made.message()));
  }
  const std::string path = FlightDumpPath(dir, dump.rank);
  // Unique among the dumps this process writes at once (in-process worlds of tests share a pid).
  static std::atomic<int64_t> serial{0};
  const std::string tmp = absl::StrCat(path, ".", ::getpid(), ".",
                                       serial.fetch_add(1, std::memory_order_relaxed), ".tmp");
  const std::string text = FormatFlightDump(dump);
  // A new file, never one found there (O_EXCL), nor through a link (O_NOFOLLOW); the rename
  // then replaces the directory entry, whatever it was.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  FILE* f = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
  if (f == nullptr) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("cannot write ", tmp));
  }
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

namespace {

// Note [Flight dump on demand]: what the handler may touch (a lock-free atomic).
std::atomic<uint64_t> g_dump_requests{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

void OnDumpSignal(int) { g_dump_requests.fetch_add(1, std::memory_order_relaxed); }

bool DumpSignalIsOurs(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) == 0 && action.sa_handler == OnDumpSignal;
}

}  // namespace

bool InstallFlightDumpSignal() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  struct sigaction current = {};
  if (::sigaction(SIGUSR2, nullptr, &current) != 0) return false;
  if (DumpSignalIsOurs(current)) return true;
  if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) return false;
  struct sigaction action = {};
  action.sa_handler = OnDumpSignal;
  action.sa_flags = SA_RESTART;  // the application's system calls go on
  sigemptyset(&action.sa_mask);
  return ::sigaction(SIGUSR2, &action, nullptr) == 0;
}

uint64_t FlightDumpRequests() { return g_dump_requests.load(std::memory_order_relaxed); }

}  // namespace chorus::runtime
