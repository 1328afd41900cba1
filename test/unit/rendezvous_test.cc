// The rendezvous service of MPI-less launches: launcher/engine/rendezvous_server.h against
// runtime/ucx/rendezvous_client.h over real gRPC on 127.0.0.1.
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

#include "launcher/engine/rendezvous_server.h"
#include "proto/rendezvous.grpc.pb.h"
#include "runtime/ucx/rendezvous_client.h"

namespace chorus {
namespace {

using launcher::RendezvousServer;
using launcher::RendezvousServerOptions;
using runtime::RendezvousAddressExchange;
using runtime::RendezvousClient;

// Long enough never to pass in a passing run; a broken wake-up fails the test instead of
// hanging it.
const absl::Duration kLongWait = absl::Seconds(60);

std::string Secret() {
  absl::StatusOr<std::string> secret = launcher::GenerateRendezvousSecret();
  REQUIRE(secret.ok());
  return *secret;
}

struct Fixture {
  explicit Fixture(RendezvousServerOptions options = {}) : secret(Secret()) {
    options.host = "127.0.0.1";
    options.secret = secret;
    absl::StatusOr<std::unique_ptr<RendezvousServer>> started = RendezvousServer::Start(options);
    REQUIRE(started.ok());
    server = std::move(*started);
    REQUIRE(server->port() > 0);
    address = absl::StrCat("127.0.0.1:", server->port());
  }

  std::unique_ptr<RendezvousClient> Client(const std::string& with_secret) const {
    absl::StatusOr<std::unique_ptr<RendezvousClient>> client =
        RendezvousClient::Create(address, with_secret);
    REQUIRE(client.ok());
    return std::move(*client);
  }
  std::unique_ptr<RendezvousClient> Client() const { return Client(secret); }

  std::string secret;
  std::unique_ptr<RendezvousServer> server;
  std::string address;
};

std::string Pattern(size_t size, int seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + seed) % 251);
  return s;
}

// A TCP port on 127.0.0.1 that is bound but not listening: connections to it are refused for
// as long as `fd` stays open. With `listen_silently`, it listens but never accepts or answers.
struct DeadPort {
  explicit DeadPort(bool listen_silently) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    socklen_t len = sizeof(addr);
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port = ntohs(addr.sin_port);
    if (listen_silently) REQUIRE(listen(fd, 16) == 0);
  }
  ~DeadPort() { close(fd); }
  int fd = -1;
  int port = 0;
};

TEST_CASE("rendezvous: the secret is 32 random bytes in hex", "[rendezvous]") {
  const std::string a = Secret();
  const std::string b = Secret();
  CHECK(a.size() == 64);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a != b);
}

TEST_CASE("rendezvous: put then get returns the value", "[rendezvous]") {
  Fixture f;
  auto client = f.Client();
  const std::string value("ucx\0address\xff", 12);
  REQUIRE(client->Put("world/0", "0", value).ok());
  absl::StatusOr<std::string> got = client->Get("world/0", "0", absl::ZeroDuration());
  REQUIRE(got.ok());
  CHECK(*got == value);
  // Another client of the same job sees it too.
  got = f.Client()->Get("world/0", "0", absl::ZeroDuration());
  REQUIRE(got.ok());
  CHECK(*got == value);
}

TEST_CASE("rendezvous: a waiting get is answered by a later put", "[rendezvous]") {
  Fixture f;
  auto client = f.Client();
  absl::StatusOr<std::string> got = absl::UnknownError("not run");
  std::thread waiter([&] { got = client->Get("world/0", "late", kLongWait); });
  f.server->TEST_AwaitWaitingGets(1);
  const absl::Status put = f.Client()->Put("world/0", "late", "here at last");
  waiter.join();
  REQUIRE(put.ok());
  REQUIRE(got.ok());
  CHECK(*got == "here at last");
}

TEST_CASE("rendezvous: a get times out naming the missing key", "[rendezvous]") {
  Fixture f;
  auto client = f.Client();
  REQUIRE(client->Put("world/0", "present", "x").ok());
  const absl::Duration timeout = GENERATE(absl::ZeroDuration(), absl::Milliseconds(20));
  absl::StatusOr<std::string> got = client->Get("world/0", "absent", timeout);
  REQUIRE(absl::IsDeadlineExceeded(got.status()));
  CHECK_THAT(std::string(got.status().message()), Catch::Contains("'absent'") &&
                                                      Catch::Contains("'world/0'") &&
                                                      Catch::Contains(f.address));
  const std::vector<std::string> keys = {"present", "absent", "gone"};
  absl::StatusOr<std::vector<std::string>> many = client->GetMany("world/0", keys, timeout);
  REQUIRE(absl::IsDeadlineExceeded(many.status()));
  CHECK_THAT(std::string(many.status().message()),
             Catch::Contains("'absent', 'gone' (2 of 3)") && !Catch::Contains("'present'"));
}

TEST_CASE("rendezvous: AllGather returns every rank's value in rank order", "[rendezvous]") {
  Fixture f;
  const int size = GENERATE(1, 2, 3);
  std::vector<std::string> expected;
  for (int r = 0; r < size; ++r) expected.push_back(absl::StrCat("address-of-", r, Pattern(r, r)));
  // Each rank has its own client, as each worker process does (made here: Catch2's assertions
  // are not thread-safe); the last rank starts first.
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  for (int r = 0; r < size; ++r) clients.push_back(f.Client());
  std::vector<absl::StatusOr<std::vector<std::string>>> results(size);
  std::vector<std::thread> ranks;
  for (int r = size - 1; r >= 0; --r) {
    ranks.emplace_back(
        [&, r] { results[r] = clients[r]->AllGather("world/0", r, size, expected[r], kLongWait); });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < size; ++r) {
    INFO("rank " << r);
    REQUIRE(results[r].ok());
    CHECK(*results[r] == expected);
  }
}

TEST_CASE("rendezvous: AllGather with a rank missing times out naming it", "[rendezvous]") {
  Fixture f;
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  for (int r = 0; r < 2; ++r) clients.push_back(f.Client());
  std::vector<absl::StatusOr<std::vector<std::string>>> results(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      results[r] = clients[r]->AllGather("world/0", r, 3, "a", absl::Milliseconds(50));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    REQUIRE(absl::IsDeadlineExceeded(results[r].status()));
    CHECK_THAT(std::string(results[r].status().message()), Catch::Contains("key '2' (1 of 3)"));
  }
}

TEST_CASE("rendezvous: AllGather checks its rank and refuses a second writer of a rank",
          "[rendezvous]") {
  Fixture f;
  auto client = f.Client();
  CHECK(absl::IsInvalidArgument(client->AllGather("w", 3, 3, "x", kLongWait).status()));
  CHECK(absl::IsInvalidArgument(client->AllGather("w", -1, 3, "x", kLongWait).status()));
  CHECK(absl::IsInvalidArgument(client->AllGather("w", 0, 0, "x", kLongWait).status()));
  REQUIRE(client->Put("w", "0", "first").ok());
  const absl::Status again = client->AllGather("w", 0, 2, "second", kLongWait).status();
  CHECK(absl::IsAlreadyExists(again));
  CHECK_THAT(std::string(again.message()), Catch::Contains("key '0'"));
}

TEST_CASE("rendezvous: the address exchange gathers each call in a scope of its own",
          "[rendezvous]") {
  Fixture f;
  constexpr int kSize = 3;
  std::vector<std::unique_ptr<RendezvousAddressExchange>> exchanges;
  for (int r = 0; r < kSize; ++r) {
    exchanges.push_back(
        std::make_unique<RendezvousAddressExchange>(f.Client(), "world/7", r, kSize, kLongWait));
  }
  std::vector<std::vector<absl::StatusOr<std::vector<std::string>>>> results(kSize);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kSize; ++r) {
    ranks.emplace_back([&, r] {
      runtime::AddressExchange& exchange = *exchanges[r];
      results[r].push_back(exchange.AllGather(absl::StrCat("first-", r)));
      results[r].push_back(exchange.AllGather(absl::StrCat("second-", r)));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < kSize; ++r) {
    INFO("rank " << r);
    REQUIRE(results[r].size() == 2);
    REQUIRE(results[r][0].ok());
    REQUIRE(results[r][1].ok());
    CHECK(*results[r][0] == std::vector<std::string>{"first-0", "first-1", "first-2"});
    CHECK(*results[r][1] == std::vector<std::string>{"second-0", "second-1", "second-2"});
  }
  absl::StatusOr<std::string> stored = f.Client()->Get("world/7/1", "2", absl::ZeroDuration());
  REQUIRE(stored.ok());
  CHECK(*stored == "second-2");
}

TEST_CASE("rendezvous: a wrong or missing secret is refused and changes nothing", "[rendezvous]") {
  Fixture f;
  auto good = f.Client();
  REQUIRE(good->Put("world/0", "0", "real").ok());
  // Another job's secret, a prefix of the right one, the right one and more, a short one.
  const int kind = GENERATE(0, 1, 2, 3);
  const std::string wrong_secret = kind == 0   ? Secret()
                                   : kind == 1 ? f.secret.substr(0, 63)
                                   : kind == 2 ? f.secret + "0"
                                               : std::string("x");
  REQUIRE(wrong_secret != f.secret);
  auto bad = f.Client(wrong_secret);

  const absl::Status put_new = bad->Put("world/0", "1", "intruder");
  CHECK(absl::IsUnauthenticated(put_new));
  CHECK_THAT(std::string(put_new.message()), Catch::Contains("wrong rendezvous secret"));
  CHECK(absl::IsUnauthenticated(bad->Put("world/0", "0", "intruder")));
  const absl::StatusOr<std::string> read = bad->Get("world/0", "0", absl::ZeroDuration());
  CHECK(absl::IsUnauthenticated(read.status()));
  CHECK(absl::IsUnauthenticated(bad->AllGather("world/0", 1, 2, "x", kLongWait).status()));

  CHECK(absl::IsDeadlineExceeded(good->Get("world/0", "1", absl::ZeroDuration()).status()));
  absl::StatusOr<std::string> kept = good->Get("world/0", "0", absl::ZeroDuration());
  REQUIRE(kept.ok());
  CHECK(*kept == "real");
}

TEST_CASE("rendezvous: a call without the secret metadata is refused", "[rendezvous]") {
  Fixture f;
  auto channel = grpc::CreateChannel(f.address, grpc::InsecureChannelCredentials());
  auto stub = chorus::rendezvous::Rendezvous::NewStub(channel);
  chorus::rendezvous::PutRequest request;
  request.set_scope("world/0");
  request.set_key("0");
  request.set_value("intruder");
  chorus::rendezvous::PutResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kLongWait));
  const grpc::Status status = stub->Put(&context, request, &response);
  CHECK(status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK_THAT(status.error_message(), Catch::Contains("missing rendezvous secret"));
  CHECK(absl::IsDeadlineExceeded(f.Client()->Get("world/0", "0", absl::ZeroDuration()).status()));
}

TEST_CASE("rendezvous: malformed and oversized calls are rejected without harm", "[rendezvous]") {
  RendezvousServerOptions options;
  options.max_value_bytes = 1024;
  options.max_keys_per_scope = 2;
  Fixture f(options);
  auto client = f.Client();
  const std::string longest_key(1024, 'k');
  REQUIRE(client->Put("s", longest_key, std::string(1024, 'v')).ok());

  CHECK(absl::IsInvalidArgument(client->Put("", "k", "v")));
  CHECK(absl::IsInvalidArgument(client->Put("s", "", "v")));
  CHECK(absl::IsInvalidArgument(client->Put("s", longest_key + "k", "v")));
  CHECK(absl::IsInvalidArgument(client->Get("", "k", absl::ZeroDuration()).status()));
  CHECK(absl::IsInvalidArgument(client->Get("s", "", absl::ZeroDuration()).status()));
  CHECK(absl::IsInvalidArgument(client->Get("s", "k", absl::Milliseconds(-1)).status()));
  CHECK(absl::IsInvalidArgument(client->GetMany("s", {}, absl::ZeroDuration()).status()));

  const absl::Status too_big = client->Put("s", "k", std::string(1025, 'v'));
  CHECK(absl::IsResourceExhausted(too_big));
  CHECK_THAT(std::string(too_big.message()), Catch::Contains("1025 bytes"));
  // Past the transport's limit too: refused before it is even read.
  CHECK(absl::IsResourceExhausted(client->Put("s", "k", std::string(2 << 20, 'v'))));

  REQUIRE(client->Put("s", "second", "v").ok());
  CHECK(client->Put("s", "second", "v").ok());  // the same value again: a no-op
  CHECK(absl::IsAlreadyExists(client->Put("s", "second", "w")));
  const absl::Status third = client->Put("s", "third", "v");
  CHECK(absl::IsResourceExhausted(third));
  CHECK_THAT(std::string(third.message()), Catch::Contains("2 keys"));
  CHECK(client->Put("other scope", "third", "v").ok());

  absl::StatusOr<std::string> kept = client->Get("s", longest_key, absl::ZeroDuration());
  REQUIRE(kept.ok());
  CHECK(*kept == std::string(1024, 'v'));
  CHECK(absl::IsDeadlineExceeded(client->Get("s", "k", absl::ZeroDuration()).status()));
  CHECK(absl::IsDeadlineExceeded(client->Get("s", "third", absl::ZeroDuration()).status()));
}

TEST_CASE("rendezvous: the store's total size is bounded", "[rendezvous]") {
  RendezvousServerOptions options;
  options.max_total_bytes = 100;
  Fixture f(options);
  auto client = f.Client();
  REQUIRE(client->Put("s", "a", std::string(60, 'v')).ok());  // 1 + 1 + 60 bytes
  CHECK(absl::IsResourceExhausted(client->Put("s", "b", std::string(60, 'v'))));
  CHECK(client->Put("s", "b", std::string(36, 'v')).ok());  // exactly 100
  CHECK(absl::IsResourceExhausted(client->Put("t", "c", "")));
}

TEST_CASE("rendezvous: the server refuses bad options and a port in use", "[rendezvous]") {
  RendezvousServerOptions options;
  options.host = "127.0.0.1";
  CHECK(absl::IsInvalidArgument(RendezvousServer::Start(options).status()));  // no secret
  options.secret = Secret();
  options.port = 65536;
  CHECK(absl::IsInvalidArgument(RendezvousServer::Start(options).status()));
  options.port = 0;
  options.max_keys_per_scope = 0;
  CHECK(absl::IsInvalidArgument(RendezvousServer::Start(options).status()));

  Fixture f;
  options = RendezvousServerOptions{};
  options.host = "127.0.0.1";
  options.secret = Secret();
  options.port = f.server->port();
  const absl::Status taken = RendezvousServer::Start(options).status();
  CHECK(absl::IsUnavailable(taken));
  CHECK_THAT(std::string(taken.message()), Catch::Contains(f.address));
}

TEST_CASE("rendezvous: shutdown answers waiting gets", "[rendezvous]") {
  Fixture f;
  auto client = f.Client();
  constexpr int kWaiters = 3;
  std::vector<absl::StatusOr<std::vector<std::string>>> got(kWaiters,
                                                            absl::UnknownError("not run"));
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] { got[i] = client->AllGather("world/0", i, 4, "v", kLongWait); });
  }
  f.server->TEST_AwaitWaitingGets(kWaiters);
  f.server->Shutdown();
  for (std::thread& t : waiters) t.join();
  for (int i = 0; i < kWaiters; ++i) {
    REQUIRE(absl::IsUnavailable(got[i].status()));
    CHECK_THAT(std::string(got[i].status().message()), Catch::Contains("shutting down"));
  }
  f.server->Shutdown();  // idempotent
  const absl::Status after = client->Put("world/0", "x", "v");
  CHECK(absl::IsUnavailable(after));
  CHECK_THAT(std::string(after.message()), Catch::Contains("unreachable"));
}

TEST_CASE("rendezvous: a client of a closed port fails with Unavailable", "[rendezvous]") {
  DeadPort dead(/*listen_silently=*/false);
  const std::string address = absl::StrCat("127.0.0.1:", dead.port);
  absl::StatusOr<std::unique_ptr<RendezvousClient>> client =
      RendezvousClient::Create(address, Secret(), kLongWait);
  REQUIRE(client.ok());
  const absl::Status put = (*client)->Put("world/0", "0", "v");
  CHECK(absl::IsUnavailable(put));
  CHECK_THAT(std::string(put.message()),
             Catch::Contains(absl::StrCat("rendezvous at ", address, " unreachable")));
  const absl::Status get = (*client)->Get("world/0", "0", kLongWait).status();
  CHECK(absl::IsUnavailable(get));
}

TEST_CASE("rendezvous: a server that never answers fails the call at its deadline",
          "[rendezvous]") {
  DeadPort silent(/*listen_silently=*/true);
  const std::string address = absl::StrCat("127.0.0.1:", silent.port);
  absl::StatusOr<std::unique_ptr<RendezvousClient>> client =
      RendezvousClient::Create(address, Secret(), absl::Milliseconds(200));
  REQUIRE(client.ok());
  const absl::Status put = (*client)->Put("world/0", "0", "v");
  CHECK(absl::IsUnavailable(put));
  CHECK_THAT(std::string(put.message()),
             Catch::Contains(absl::StrCat("rendezvous at ", address, " unreachable")));
}

TEST_CASE("rendezvous: the client checks its arguments", "[rendezvous]") {
  CHECK(absl::IsInvalidArgument(RendezvousClient::Create("", "s").status()));
  CHECK(absl::IsInvalidArgument(RendezvousClient::Create("127.0.0.1:1", "").status()));
  CHECK(absl::IsInvalidArgument(
      RendezvousClient::Create("127.0.0.1:1", "s", absl::ZeroDuration()).status()));
}

TEST_CASE("rendezvous: scopes are isolated", "[rendezvous]") {
  Fixture f;
  auto client = f.Client();
  REQUIRE(client->Put("world/0", "0", "old world").ok());
  REQUIRE(client->Put("world/1", "0", "new world").ok());
  absl::StatusOr<std::string> old_world = client->Get("world/0", "0", absl::ZeroDuration());
  absl::StatusOr<std::string> new_world = client->Get("world/1", "0", absl::ZeroDuration());
  REQUIRE(old_world.ok());
  REQUIRE(new_world.ok());
  CHECK(*old_world == "old world");
  CHECK(*new_world == "new world");
  CHECK(absl::IsDeadlineExceeded(client->Get("world/2", "0", absl::ZeroDuration()).status()));
  CHECK(absl::IsDeadlineExceeded(client->Get("world", "0", absl::ZeroDuration()).status()));
}

TEST_CASE("rendezvous: values up to the limit round-trip", "[rendezvous]") {
  Fixture f;
  auto client = f.Client();
  const size_t size =
      GENERATE(size_t{0}, size_t{1}, size_t{1} << 20, size_t{5} << 20, size_t{16} << 20);
  const std::string value = Pattern(size, 7);
  REQUIRE(client->Put("world/0", "big", value).ok());
  absl::StatusOr<std::string> got = client->Get("world/0", "big", kLongWait);
  REQUIRE(got.ok());
  CHECK(got->size() == size);
  CHECK(*got == value);
  CHECK(absl::IsResourceExhausted(client->Put("world/0", "bigger", Pattern((16 << 20) + 1, 7))));
}

// Elastic jobs: generations, Watch, heartbeats.

chorus::rendezvous::Generation MakeGeneration(int64_t number, bool aborted) {
  chorus::rendezvous::Generation g;
  g.set_number(number);
  g.set_aborted(aborted);
  g.set_cause(absl::StrCat("cause of ", number));
  g.add_lost_ranks(2);
  chorus::rendezvous::WorkerPlace* place = g.add_places();
  place->set_worker_id("w7");
  place->set_rank(1);
  (*place->mutable_env())["CHORUS_RANK"] = "1";
  return g;
}

std::unique_ptr<RendezvousClient> ClientAt(const Fixture& f, int64_t generation) {
  absl::StatusOr<std::unique_ptr<RendezvousClient>> client =
      RendezvousClient::Create(f.address, f.secret, absl::Seconds(30), generation);
  REQUIRE(client.ok());
  return std::move(*client);
}

TEST_CASE("rendezvous: Watch before any generation times out with none", "[rendezvous][elastic]") {
  Fixture f;
  CHECK(f.server->generation() == -1);
  auto w = f.Client()->Watch("w0", -1, absl::Milliseconds(1));
  REQUIRE(w.ok());
  CHECK_FALSE(w->has_value());
}

TEST_CASE("rendezvous: a waiting Watch is answered by a publish, intact", "[rendezvous][elastic]") {
  Fixture f;
  REQUIRE(f.server->PublishGeneration(MakeGeneration(0, false)).ok());
  auto client = f.Client();
  absl::StatusOr<std::optional<chorus::rendezvous::Generation>> answer;
  std::thread watcher([&] { answer = client->Watch("w7", 0, kLongWait); });
  f.server->TEST_AwaitWaitingWatches(1);
  REQUIRE(f.server->PublishGeneration(MakeGeneration(1, true)).ok());
  watcher.join();
  REQUIRE(answer.ok());
  REQUIRE(answer->has_value());
  const chorus::rendezvous::Generation& g = **answer;
  CHECK(g.number() == 1);
  CHECK(g.aborted());
  CHECK(g.cause() == "cause of 1");
  REQUIRE(g.lost_ranks_size() == 1);
  CHECK(g.lost_ranks(0) == 2);
  REQUIRE(g.places_size() == 1);
  CHECK(g.places(0).worker_id() == "w7");
  CHECK(g.places(0).env().at("CHORUS_RANK") == "1");
}

TEST_CASE("rendezvous: Watch answers at once when behind, waits when current",
          "[rendezvous][elastic]") {
  Fixture f;
  REQUIRE(f.server->PublishGeneration(MakeGeneration(0, false)).ok());
  REQUIRE(f.server->PublishGeneration(MakeGeneration(3, false)).ok());
  auto client = f.Client();
  auto behind = client->Watch("w0", 0, kLongWait);  // answered at once, not after kLongWait
  REQUIRE(behind.ok());
  REQUIRE(behind->has_value());
  CHECK((*behind)->number() == 3);
  auto current = client->Watch("w0", 3, absl::Milliseconds(1));
  REQUIRE(current.ok());
  REQUIRE(current->has_value());
  CHECK((*current)->number() == 3);
}

TEST_CASE("rendezvous: generations only grow", "[rendezvous][elastic]") {
  Fixture f;
  REQUIRE(f.server->PublishGeneration(MakeGeneration(2, false)).ok());
  const absl::Status same = f.server->PublishGeneration(MakeGeneration(2, false));
  CHECK(absl::IsInvalidArgument(same));
  CHECK_THAT(std::string(same.message()), Catch::Contains("generations only grow"));
  CHECK(absl::IsInvalidArgument(f.server->PublishGeneration(MakeGeneration(1, false))));
  CHECK(f.server->generation() == 2);
}

TEST_CASE("rendezvous: calls of a stale generation are refused naming both",
          "[rendezvous][elastic]") {
  Fixture f;
  REQUIRE(ClientAt(f, 0)->Put("world/0", "0", "before").ok());  // generation 0 before a publish
  REQUIRE(f.server->PublishGeneration(MakeGeneration(0, false)).ok());
  REQUIRE(f.server->PublishGeneration(MakeGeneration(1, true)).ok());
  auto stale = ClientAt(f, 0);
  const absl::Status put = stale->Put("world/0", "1", "late");
  CHECK(absl::IsFailedPrecondition(put));
  CHECK_THAT(std::string(put.message()),
             Catch::Contains("stale generation 0: the job is at generation 1"));
  CHECK(absl::IsFailedPrecondition(stale->Get("world/0", "0", absl::ZeroDuration()).status()));
  const absl::Status too_new = ClientAt(f, 2)->Put("world/2", "0", "early");
  CHECK(absl::IsInvalidArgument(too_new));
  CHECK_THAT(std::string(too_new.message()), Catch::Contains("beyond the job's generation 1"));
  CHECK(ClientAt(f, 1)->Put("world/1", "0", "now").ok());
  // The refused calls changed nothing.
  CHECK(
      absl::IsDeadlineExceeded(ClientAt(f, 1)->Get("world/0", "1", absl::ZeroDuration()).status()));
}

TEST_CASE("rendezvous: a Get waiting in a generation that is replaced is refused at once",
          "[rendezvous][elastic]") {
  Fixture f;
  REQUIRE(f.server->PublishGeneration(MakeGeneration(0, false)).ok());
  auto client = ClientAt(f, 0);
  absl::StatusOr<std::string> got;
  std::thread getter([&] { got = client->Get("world/0", "never", kLongWait); });
  f.server->TEST_AwaitWaitingGets(1);
  REQUIRE(f.server->PublishGeneration(MakeGeneration(1, true)).ok());
  getter.join();
  CHECK(absl::IsFailedPrecondition(got.status()));
  CHECK_THAT(std::string(got.status().message()), Catch::Contains("stale generation 0"));
}

TEST_CASE("rendezvous: Watch checks its secret and arguments", "[rendezvous][elastic]") {
  Fixture f;
  REQUIRE(f.server->PublishGeneration(MakeGeneration(0, false)).ok());
  CHECK(absl::IsUnauthenticated(f.Client(Secret())->Watch("w0", -1, kLongWait).status()));
  auto client = f.Client();
  CHECK(absl::IsInvalidArgument(client->Watch("", -1, kLongWait).status()));
  CHECK(absl::IsInvalidArgument(client->Watch("w0", -2, kLongWait).status()));
  CHECK(absl::IsInvalidArgument(client->Watch("w0", 1, kLongWait).status()));  // beyond 0
  // None of them was a heartbeat.
  CHECK(f.server->SilentWorkers(absl::ZeroDuration()).empty());
}

TEST_CASE("rendezvous: a worker is silent once its last Watch is older than the silence",
          "[rendezvous][elastic]") {
  Fixture f;
  auto client = f.Client();
  REQUIRE(client->Watch("w1", -1, absl::ZeroDuration()).ok());
  REQUIRE(client->Watch("w0", -1, absl::ZeroDuration()).ok());
  CHECK(f.server->SilentWorkers(absl::Hours(1)).empty());
  absl::SleepFor(absl::Milliseconds(2));
  CHECK(f.server->SilentWorkers(absl::Milliseconds(1)) == std::vector<std::string>{"w0", "w1"});
  f.server->ForgetWorker("w1");
  CHECK(f.server->SilentWorkers(absl::Milliseconds(1)) == std::vector<std::string>{"w0"});
  REQUIRE(client->Watch("w1", -1, absl::ZeroDuration()).ok());  // tracked again
  CHECK(f.server->SilentWorkers(absl::Hours(1)).empty());
}

}  // namespace
}  // namespace chorus
