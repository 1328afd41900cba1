// Fuzzes the rendezvous service of MPI-less launches (launcher/engine/rendezvous_server.h) with the
// requests workers send it: Put, Get and Watch with fuzzed scopes, keys, values, generations,
// timeouts and secrets, interleaved with chorusrun's own PublishGeneration, SilentWorkers, Heard
// and ForgetWorker. The service has no in-process seam (its handlers take gRPC server contexts
// filled by gRPC), so each input gets a fresh server on 127.0.0.1 and a raw gRPC stub, and at most
// kMaxCalls calls, each bounded by a deadline.
//
// Input (FuzzedDataProvider): the server's limits (small, so that they are reached), then calls
// until the input ends: which one, its fields (names mostly from a small set, so that keys meet)
// and its secret (mostly the right one).
//
// Properties: no crash in the server; every answer has one of the documented codes; limits are
// answered, never exceeded; a call without the secret changes nothing; a key is written once and
// a Get answers what was put.
#include <fuzzer/FuzzedDataProvider.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "launcher/engine/rendezvous_server.h"
#include "proto/rendezvous.grpc.pb.h"
#include "test/fuzz/fuzz_check.h"
#include "test/fuzz/fuzz_text.h"

namespace chorus::launcher {
namespace {

namespace rv = chorus::rendezvous;

constexpr int kMaxCalls = 24;
constexpr char kSecret[] = "0123456789abcdef";
// Bounds every wait a call asks for: the server answers a Get or Watch by this deadline.
constexpr auto kWaitBound = std::chrono::milliseconds(40);
// Bounds every other call: far beyond what answering takes.
constexpr auto kCallBound = std::chrono::seconds(10);

std::string Name(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
      return "";
    case 1:
      return std::string(in.ConsumeIntegralInRange<size_t>(1020, 1030), 'k');
    case 2:
      return in.ConsumeRandomLengthString(32);
    default: {
      static const char* const kNames[] = {"world/0", "world/0/0", "0", "1", "2"};
      return kNames[in.ConsumeIntegralInRange<size_t>(0, std::size(kNames) - 1)];
    }
  }
}

int64_t Generation(FuzzedDataProvider& in) {
  return in.ConsumeProbability<float>() < 0.1f ? in.ConsumeIntegral<int64_t>()
                                               : in.ConsumeIntegralInRange<int64_t>(-2, 3);
}

int64_t TimeoutMs(FuzzedDataProvider& in) {
  return in.ConsumeProbability<float>() < 0.1f ? in.ConsumeIntegral<int64_t>()
                                               : in.ConsumeIntegralInRange<int64_t>(0, 2);
}

// The call's context: the secret (mostly the right one) and a deadline.
std::unique_ptr<grpc::ClientContext> Context(FuzzedDataProvider& in, bool waits, bool* authentic) {
  auto context = std::make_unique<grpc::ClientContext>();
  *authentic = false;  // until the right secret is sent once
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
      break;  // none
    case 1: {
      // Printable: gRPC refuses to send other bytes in a text metadata value.
      std::string guess = in.ConsumeRandomLengthString(20);
      for (char& c : guess) c = static_cast<char>(0x20 + static_cast<unsigned char>(c) % 0x5f);
      context->AddMetadata("chorus-rendezvous-secret", guess);
      *authentic = guess == kSecret;
      break;
    }
    case 2:  // twice
      context->AddMetadata("chorus-rendezvous-secret", kSecret);
      context->AddMetadata("chorus-rendezvous-secret", kSecret);
      break;
    default:
      context->AddMetadata("chorus-rendezvous-secret", kSecret);
      *authentic = true;
  }
  // A call the server must answer at once (any call without the secret) gets the long bound, so
  // that only a server that waits for it runs into a deadline.
  context->set_deadline(std::chrono::system_clock::now() +
                        (waits && *authentic ? kWaitBound : kCallBound));
  return context;
}

rv::Generation MakeGeneration(FuzzedDataProvider& in, int64_t number) {
  rv::Generation g;
  g.set_number(number);
  g.set_aborted(in.ConsumeBool());
  g.set_cause(chorus::fuzz::PrintableText(in, 16));  // chorusrun's words and host names
  g.set_hold(in.ConsumeBool());
  const int places = in.ConsumeIntegralInRange<int>(0, 3);
  for (int i = 0; i < places; ++i) {
    rv::WorkerPlace* p = g.add_places();
    p->set_worker_id(absl::StrCat("w", i));
    p->set_rank(i);
    (*p->mutable_env())["CHORUS_RANK"] = absl::StrCat(i);
  }
  return g;
}

// What the store must hold: (scope, key) -> value, of Puts that succeeded.
using Model = std::map<std::pair<std::string, std::string>, std::string>;

void Check(const grpc::Status& s, std::initializer_list<grpc::StatusCode> allowed,
           const char* what) {
  for (grpc::StatusCode c : allowed) {
    if (s.error_code() == c) return;
  }
  FUZZ_CHECK(false) << what << " answered code " << s.error_code() << ": " << s.error_message();
}

}  // namespace
}  // namespace chorus::launcher

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::launcher;
  using grpc::StatusCode;
  FuzzedDataProvider in(data, size);
  RendezvousServerOptions options;
  options.host = "127.0.0.1";
  options.secret = kSecret;
  options.max_value_bytes = in.ConsumeIntegralInRange<int64_t>(1, 4096);
  options.max_keys_per_scope = in.ConsumeIntegralInRange<int64_t>(1, 8);
  options.max_total_bytes = in.ConsumeIntegralInRange<int64_t>(1, 16384);
  options.max_reply_bytes = in.ConsumeIntegralInRange<int64_t>(1, 8192);
  absl::StatusOr<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start(options);
  FUZZ_CHECK(server.ok()) << server.status();
  auto stub = rv::Rendezvous::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));

  Model model;
  std::set<std::string> heard;
  for (int call = 0; call < kMaxCalls && in.remaining_bytes() > 0; ++call) {
    const int64_t job_generation = std::max<int64_t>((*server)->generation(), 0);
    bool authentic = false;
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
      case 0: {
        rv::PutRequest request;
        request.set_scope(Name(in));
        request.set_key(Name(in));
        request.set_value(in.ConsumeRandomLengthString(5000));
        request.set_generation(Generation(in));
        rv::PutResponse response;
        auto context = Context(in, /*waits=*/false, &authentic);
        const grpc::Status s = stub->Put(context.get(), request, &response);
        Check(s,
              {StatusCode::OK, StatusCode::INVALID_ARGUMENT, StatusCode::RESOURCE_EXHAUSTED,
               StatusCode::ALREADY_EXISTS, StatusCode::FAILED_PRECONDITION,
               StatusCode::UNAUTHENTICATED},
              "Put");
        FUZZ_CHECK(authentic || s.error_code() == StatusCode::UNAUTHENTICATED)
            << "a Put without the secret answered " << s.error_code();
        const auto at = std::make_pair(request.scope(), request.key());
        auto it = model.find(at);
        if (s.ok()) {
          FUZZ_CHECK(request.generation() == job_generation) << "a Put of another generation";
          FUZZ_CHECK(static_cast<int64_t>(request.value().size()) <= options.max_value_bytes);
          FUZZ_CHECK(it == model.end() || it->second == request.value()) << "a key was overwritten";
          model[at] = request.value();
        } else if (s.error_code() == StatusCode::ALREADY_EXISTS) {
          FUZZ_CHECK(it != model.end() && it->second != request.value())
              << "AlreadyExists for a key not put, or put with this value";
        }
        break;
      }
      case 1: {
        rv::GetRequest request;
        request.set_scope(Name(in));
        const int keys = in.ConsumeIntegralInRange<int>(0, 4);
        for (int k = 0; k < keys; ++k) request.add_keys(Name(in));
        request.set_timeout_ms(TimeoutMs(in));
        request.set_generation(Generation(in));
        rv::GetResponse response;
        auto context = Context(in, /*waits=*/true, &authentic);
        const grpc::Status s = stub->Get(context.get(), request, &response);
        Check(s,
              {StatusCode::OK, StatusCode::INVALID_ARGUMENT, StatusCode::RESOURCE_EXHAUSTED,
               StatusCode::FAILED_PRECONDITION, StatusCode::DEADLINE_EXCEEDED,
               StatusCode::UNAUTHENTICATED},
              "Get");
        FUZZ_CHECK(authentic || s.error_code() == StatusCode::UNAUTHENTICATED)
            << "a Get without the secret answered " << s.error_code();
        if (!s.ok()) break;
        FUZZ_CHECK(response.values_size() == request.keys_size())
            << response.values_size() << " values for " << request.keys_size() << " keys";
        int64_t bytes = 0;
        for (int k = 0; k < request.keys_size(); ++k) {
          auto it = model.find({request.scope(), request.keys(k)});
          FUZZ_CHECK(it != model.end()) << "a Get answered a key never put";
          FUZZ_CHECK(it->second == response.values(k)) << "a Get answered another value";
          bytes += static_cast<int64_t>(response.values(k).size());
        }
        FUZZ_CHECK(bytes <= options.max_reply_bytes) << bytes << " bytes answered";
        break;
      }
      case 2: {
        rv::WatchRequest request;
        request.set_worker_id(in.ConsumeBool() ? "w0" : Name(in));
        request.set_known_generation(Generation(in));
        request.set_timeout_ms(TimeoutMs(in));
        rv::WatchResponse response;
        auto context = Context(in, /*waits=*/true, &authentic);
        const grpc::Status s = stub->Watch(context.get(), request, &response);
        Check(s,
              {StatusCode::OK, StatusCode::INVALID_ARGUMENT, StatusCode::DEADLINE_EXCEEDED,
               StatusCode::UNAUTHENTICATED},
              "Watch");
        FUZZ_CHECK(authentic || s.error_code() == StatusCode::UNAUTHENTICATED)
            << "a Watch without the secret answered " << s.error_code();
        if (s.ok()) {
          heard.insert(request.worker_id());
          FUZZ_CHECK(response.has_generation() == ((*server)->generation() >= 0));
        }
        break;
      }
      case 3: {
        const int64_t current = (*server)->generation();
        const int64_t number =
            in.ConsumeBool() ? current + 1 : in.ConsumeIntegralInRange<int64_t>(-1, 4);
        const absl::Status s = (*server)->PublishGeneration(MakeGeneration(in, number));
        FUZZ_CHECK(s.ok() == (number > current))
            << "publish " << number << " after " << current << ": " << s;
        FUZZ_CHECK((*server)->generation() == (s.ok() ? number : current));
        break;
      }
      case 4: {
        for (const std::string& w : heard) FUZZ_CHECK((*server)->Heard(w)) << "'" << w << "'";
        // Silent workers are workers it has heard from (a Watch answered DeadlineExceeded counts
        // too, so `heard` may know fewer).
        for (const std::string& w : (*server)->SilentWorkers(absl::ZeroDuration())) {
          FUZZ_CHECK((*server)->Heard(w)) << "silent worker '" << w << "' never heard";
        }
        break;
      }
      case 5: {
        const std::string worker = in.ConsumeBool() ? "w0" : Name(in);
        (*server)->ForgetWorker(worker);
        heard.erase(worker);
        FUZZ_CHECK(!(*server)->Heard(worker));
        break;
      }
    }
  }
  (*server)->Shutdown();
  return 0;
}
