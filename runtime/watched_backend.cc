#include "runtime/watched_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace chorus::runtime {

WatchedBackend::WatchedBackend(std::unique_ptr<ops::CollectiveBackend> inner,
                               ProgressWatchdog* watchdog, const std::vector<int32_t>& world_ranks,
                               int32_t world_rank)
    : inner_(std::move(inner)), watchdog_(watchdog) {
  for (int32_t r : world_ranks) {
    if (r != world_rank) peers_.push_back(r);
  }
  const std::string transport = inner_->name();
  const char* ops[kCalls] = {"Allreduce", "Allgatherv",    "Broadcast",
                             "Alltoallv", "ReduceScatter", "Barrier"};
  for (int c = 0; c < kCalls; ++c) {
    call_names_[c] = absl::StrCat("the ", transport, " data plane's ", ops[c]);
  }
}

absl::Status WatchedBackend::Allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                       ReduceOp op) {
  ProgressWatchdog::BlockingCall watch = Watch(kAllreduce);
  return inner_->Allreduce(send, recv, count, dtype, op);
}

absl::Status WatchedBackend::Allgatherv(const void* send, void* recv,
                                        absl::Span<const int64_t> recv_bytes) {
  ProgressWatchdog::BlockingCall watch = Watch(kAllgatherv);
  return inner_->Allgatherv(send, recv, recv_bytes);
}

absl::Status WatchedBackend::Broadcast(void* buffer, int64_t bytes, int root) {
  ProgressWatchdog::BlockingCall watch = Watch(kBroadcast);
  return inner_->Broadcast(buffer, bytes, root);
}

absl::Status WatchedBackend::Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                                       absl::Span<const int64_t> send_offsets, void* recv,
                                       absl::Span<const int64_t> recv_bytes,
                                       absl::Span<const int64_t> recv_offsets) {
  ProgressWatchdog::BlockingCall watch = Watch(kAlltoallv);
  return inner_->Alltoallv(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets);
}

absl::Status WatchedBackend::ReduceScatter(const void* send, void* recv,
                                           absl::Span<const int64_t> recv_counts, DataType dtype,
                                           ReduceOp op) {
  ProgressWatchdog::BlockingCall watch = Watch(kReduceScatter);
  return inner_->ReduceScatter(send, recv, recv_counts, dtype, op);
}

absl::Status WatchedBackend::Barrier() {
  ProgressWatchdog::BlockingCall watch = Watch(kBarrier);
  return inner_->Barrier();
}

}  // namespace chorus::runtime
