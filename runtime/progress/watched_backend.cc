#include "runtime/progress/watched_backend.h"

#include <iterator>
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
  for (size_t c = 0; c < std::size(call_names_); ++c) {
    call_names_[c] =
        absl::StrCat("the ", transport, " data plane's ", ops::kCollectiveCallNames[c]);
  }
}

absl::Status WatchedBackend::Run(const ops::CollectiveCall& call) {
  ProgressWatchdog::BlockingCall watch(watchdog_, call_names_[call.index()].c_str(), peers_);
  return inner_->Run(call);
}

}  // namespace chorus::runtime
