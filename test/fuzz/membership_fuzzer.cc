// Fuzzes the worker side of elastic membership (runtime/elastic/membership_watcher.h): the
// Generations chorusrun publishes, as a worker's watcher receives them through the rendezvous
// client (runtime/ucx/rendezvous_client.h), and Adopt, which takes this worker's WorkerPlace of
// a generation and returns its variables. Each input gets a fresh rendezvous server on 127.0.0.1
// (the watcher talks gRPC to it) and a watcher of its own.
//
// Input (FuzzedDataProvider): the worker's starting generation, then steps until the input ends
// (at most kMaxSteps): publish a generation (places, holds, aborts, env names and values), adopt
// (after a generation, with a short timeout), ask for a world's interrupt or the host updates.
//
// Properties: no crash; Adopt answers OK only with this worker's variables of a published
// generation above `after` that is not on hold; NotFound only
// for a published generation without this worker; otherwise DeadlineExceeded.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "base/logging.h"
#include "launcher/engine/rendezvous_server.h"
#include "proto/rendezvous.pb.h"
#include "runtime/elastic/membership_watcher.h"
#include "runtime/ucx/rendezvous_client.h"
#include "test/fuzz/fuzz_check.h"
#include "test/fuzz/fuzz_text.h"

namespace chorus::runtime {
namespace {

namespace rv = chorus::rendezvous;

constexpr int kMaxSteps = 12;
constexpr char kSecret[] = "fedcba9876543210";
constexpr char kWorker[] = "w1";

// Variable names a place may carry: the ones chorusrun sets, and odd ones. All but the first
// start with CHORUS_, so that a fuzzed place never changes how this process itself runs.
std::string EnvName(FuzzedDataProvider& in) {
  static const char* const kNames[] = {
      "CHORUS_RANK",     "CHORUS_SIZE", "CHORUS_RENDEZVOUS_SCOPE", "CHORUS_ELASTIC_GENERATION",
      "CHORUS_FUZZ_A=B", "CHORUS_FUZZ_"};
  if (in.ConsumeBool()) return "";
  if (in.ConsumeBool()) return kNames[in.ConsumeIntegralInRange<size_t>(0, std::size(kNames) - 1)];
  return absl::StrCat("CHORUS_FUZZ_", chorus::fuzz::PrintableText(in, 8));
}

rv::Generation MakeGeneration(FuzzedDataProvider& in, int64_t number) {
  rv::Generation g;
  g.set_number(number);
  g.set_aborted(in.ConsumeBool());
  g.set_hold(in.ConsumeProbability<float>() < 0.2f);
  g.set_cause(chorus::fuzz::PrintableText(in, 16));
  g.set_hosts_added(in.ConsumeBool());
  g.set_hosts_removed(in.ConsumeBool());
  g.set_timestamp_us(in.ConsumeIntegral<int64_t>());
  const int lost = in.ConsumeIntegralInRange<int>(0, 2);
  for (int i = 0; i < lost; ++i) g.add_lost_ranks(in.ConsumeIntegral<int32_t>());
  const int places = in.ConsumeIntegralInRange<int>(0, 3);
  for (int i = 0; i < places; ++i) {
    rv::WorkerPlace* p = g.add_places();
    p->set_worker_id(in.ConsumeBool() ? kWorker : chorus::fuzz::PrintableText(in, 4));
    p->set_rank(in.ConsumeIntegral<int32_t>());
    const int vars = in.ConsumeIntegralInRange<int>(0, 3);
    for (int v = 0; v < vars; ++v) {
      (*p->mutable_env())[EnvName(in)] = chorus::fuzz::PrintableText(in, 12);
    }
  }
  return g;
}

const rv::WorkerPlace* PlaceOf(const rv::Generation& g) {
  for (const rv::WorkerPlace& p : g.places()) {
    if (p.worker_id() == kWorker) return &p;  // the first, as Adopt takes it
  }
  return nullptr;
}

}  // namespace
}  // namespace chorus::runtime

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Every input ends its server under the watcher, which warns that it cannot reach chorusrun.
  chorus::log::SetLevel(chorus::log::Level::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::runtime;
  FuzzedDataProvider in(data, size);
  chorus::launcher::RendezvousServerOptions options;
  options.host = "127.0.0.1";
  options.secret = kSecret;
  absl::StatusOr<std::unique_ptr<chorus::launcher::RendezvousServer>> server =
      chorus::launcher::RendezvousServer::Start(options);
  FUZZ_CHECK(server.ok()) << server.status();
  const int64_t start = in.ConsumeIntegralInRange<int64_t>(-1, 2);
  absl::StatusOr<std::unique_ptr<RendezvousClient>> client = RendezvousClient::Create(
      absl::StrCat("127.0.0.1:", (*server)->port()), kSecret, absl::Seconds(10), start);
  FUZZ_CHECK(client.ok()) << client.status();
  std::unique_ptr<MembershipWatcher> watcher =
      MembershipWatcher::Start(*std::move(client), kWorker, start, in.ConsumeBool());

  std::map<int64_t, rv::Generation> published;
  for (int step = 0; step < kMaxSteps && in.remaining_bytes() > 0; ++step) {
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0: {
        const int64_t number = (*server)->generation() + in.ConsumeIntegralInRange<int64_t>(1, 2);
        rv::Generation g = MakeGeneration(in, number);
        FUZZ_CHECK((*server)->PublishGeneration(g).ok());
        published[number] = std::move(g);
        break;
      }
      case 1: {
        const int64_t after = in.ConsumeIntegralInRange<int64_t>(-2, 4);
        const absl::Duration timeout = absl::Milliseconds(in.PickValueInArray({0, 2, 20}));
        absl::StatusOr<std::map<std::string, std::string>> vars = watcher->Adopt(after, timeout);
        if (absl::IsDeadlineExceeded(vars.status())) break;
        const int64_t adopted = watcher->adopted();
        auto it = published.find(adopted);
        FUZZ_CHECK(it != published.end() && adopted > after)
            << "Adopt(" << after << ") took generation " << adopted << ": " << vars.status();
        const rv::WorkerPlace* place = PlaceOf(it->second);
        if (!vars.ok()) {
          FUZZ_CHECK(absl::IsNotFound(vars.status())) << vars.status();
          FUZZ_CHECK(place == nullptr) << "NotFound for a generation placing the worker";
          break;
        }
        FUZZ_CHECK(place != nullptr && !it->second.hold())
            << "adopted generation " << adopted << " (placed: " << (place != nullptr)
            << ", hold: " << it->second.hold() << ")";
        const std::map<std::string, std::string> expected(place->env().begin(), place->env().end());
        FUZZ_CHECK(*vars == expected) << "Adopt returned other variables than the place's";
        FUZZ_CHECK(watcher->adopted_variables() == expected);
        break;
      }
      case 2: {
        std::shared_ptr<const chorus::Interrupt> interrupt =
            watcher->WorldInterrupt(in.ConsumeIntegralInRange<int64_t>(-1, 4));
        FUZZ_CHECK(interrupt != nullptr);
        break;
      }
      case 3: {
        for (const MembershipWatcher::HostUpdate& u : watcher->TakeHostUpdates()) {
          FUZZ_CHECK(u.generation > watcher->adopted() || u.generation <= watcher->latest());
        }
        FUZZ_CHECK(watcher->latest() <= (*server)->generation());
        break;
      }
    }
  }
  // The server first: its shutdown answers the watcher's waiting Watch at once.
  (*server)->Shutdown();
  watcher.reset();
  return 0;
}
