#include "runtime/ucx/rendezvous_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

#include "base/status_macros.h"
#include "proto/rendezvous.grpc.pb.h"

namespace chorus::runtime {
namespace {

// Shared with launcher/engine/rendezvous_server.cc (the server matches these exactly).
constexpr char kSecretMetadataKey[] = "chorus-rendezvous-secret";
constexpr char kShuttingDownMessage[] = "rendezvous shutting down";

std::string Quote(absl::string_view name) {
  constexpr size_t kShown = 64;
  return absl::StrCat("'", absl::CHexEscape(name.substr(0, kShown)),
                      name.size() > kShown ? "...'" : "'");
}

}  // namespace

struct RendezvousClient::Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<chorus::rendezvous::Rendezvous::Stub> stub;

  // One call's context: the secret and a deadline.
  std::unique_ptr<grpc::ClientContext> NewContext(const std::string& secret, absl::Time deadline) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata(kSecretMetadataKey, secret);
    context->set_deadline(absl::ToChronoTime(deadline));
    return context;
  }

  // `status` of the call `what` (which ran until `deadline`) in the words of the header.
  absl::Status Map(const grpc::Status& status, const std::string& address, absl::Time deadline,
                   const std::string& what) {
    if (status.ok()) return absl::OkStatus();
    const std::string& message = status.error_message();
    switch (status.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
        if (message == kShuttingDownMessage) {
          return absl::UnavailableError(
              absl::StrCat("rendezvous at ", address, " is shutting down (", what, ")"));
        }
        return absl::UnavailableError(
            absl::StrCat("rendezvous at ", address, " unreachable: ", message, " (", what, ")"));
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        // The server's own timeouts come before the call's deadline, with the missing keys.
        if (absl::Now() >= deadline) {
          if (channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY) {
            return absl::UnavailableError(absl::StrCat("rendezvous at ", address,
                                                       " unreachable: no connection before the "
                                                       "deadline (",
                                                       what, ")"));
          }
          return absl::DeadlineExceededError(absl::StrCat(
              "rendezvous at ", address, " did not answer before the deadline (", what, ")"));
        }
        break;
      default:
        break;
    }
    // absl::StatusCode and grpc::StatusCode both follow google.rpc.Code.
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("rendezvous at ", address, ": ", what, ": ", message));
  }
};

absl::StatusOr<std::unique_ptr<RendezvousClient>> RendezvousClient::Create(
    const std::string& address, const std::string& secret, absl::Duration call_timeout,
    int64_t generation) {
  if (address.empty()) return absl::InvalidArgumentError("rendezvous client: empty address");
  if (secret.empty()) return absl::InvalidArgumentError("rendezvous client: empty secret");
  if (call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous client: call timeout ",
                                                   absl::FormatDuration(call_timeout),
                                                   " is not positive"));
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // the server bounds its answers
  args.SetMaxSendMessageSize(-1);     // and what it accepts
  // The launcher is reached directly, never through an http_proxy of the environment.
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  auto connection = std::make_unique<Connection>();
  connection->channel =
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  connection->stub = chorus::rendezvous::Rendezvous::NewStub(connection->channel);
  return std::unique_ptr<RendezvousClient>(
      new RendezvousClient(address, secret, call_timeout, generation, std::move(connection)));
}

RendezvousClient::RendezvousClient(std::string address, std::string secret,
                                   absl::Duration call_timeout, int64_t generation,
                                   std::unique_ptr<Connection> connection)
    : address_(std::move(address)),
      secret_(std::move(secret)),
      call_timeout_(call_timeout),
      generation_(generation),
      connection_(std::move(connection)) {}

RendezvousClient::~RendezvousClient() = default;

absl::Status RendezvousClient::Put(const std::string& scope, const std::string& key,
                                   const std::string& value) {
  chorus::rendezvous::PutRequest request;
  request.set_scope(scope);
  request.set_key(key);
  request.set_value(value);
  request.set_generation(generation_);
  chorus::rendezvous::PutResponse response;
  const absl::Time deadline = absl::Now() + call_timeout_;
  std::unique_ptr<grpc::ClientContext> context = connection_->NewContext(secret_, deadline);
  const grpc::Status status = connection_->stub->Put(context.get(), request, &response);
  return connection_->Map(status, address_, deadline,
                          absl::StrCat("put of key ", Quote(key), " in scope ", Quote(scope)));
}

absl::StatusOr<std::string> RendezvousClient::Get(const std::string& scope, const std::string& key,
                                                  absl::Duration timeout) {
  CHORUS_ASSIGN_OR_RETURN(std::vector<std::string> values,
                          GetMany(scope, absl::MakeConstSpan(&key, 1), timeout));
  return std::move(values.front());
}

absl::StatusOr<std::vector<std::string>> RendezvousClient::GetMany(
    const std::string& scope, absl::Span<const std::string> keys, absl::Duration timeout) {
  chorus::rendezvous::GetRequest request;
  request.set_scope(scope);
  for (const std::string& key : keys) request.add_keys(key);
  request.set_generation(generation_);
  // Rounded up: a wait of 0.5 ms must not become no wait at all.
  request.set_timeout_ms(absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1))));
  chorus::rendezvous::GetResponse response;
  const absl::Time deadline = absl::Now() + std::max(timeout, absl::ZeroDuration()) + call_timeout_;
  std::unique_ptr<grpc::ClientContext> context = connection_->NewContext(secret_, deadline);
  const grpc::Status status = connection_->stub->Get(context.get(), request, &response);
  const std::string what =
      keys.size() == 1
          ? absl::StrCat("get of key ", Quote(keys.front()), " in scope ", Quote(scope))
          : absl::StrCat("get of ", keys.size(), " keys in scope ", Quote(scope));
  CHORUS_RETURN_IF_ERROR(connection_->Map(status, address_, deadline, what));
  if (static_cast<size_t>(response.values_size()) != keys.size()) {
    return absl::InternalError(absl::StrCat("rendezvous at ", address_, " answered ",
                                            response.values_size(), " values to a ", what, " of ",
                                            keys.size()));
  }
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (std::string& value : *response.mutable_values()) values.push_back(std::move(value));
  return values;
}

absl::StatusOr<std::optional<chorus::rendezvous::Generation>> RendezvousClient::Watch(
    const std::string& worker_id, int64_t known_generation, absl::Duration timeout) {
  chorus::rendezvous::WatchRequest request;
  request.set_worker_id(worker_id);
  request.set_known_generation(known_generation);
  request.set_timeout_ms(absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1))));
  chorus::rendezvous::WatchResponse response;
  const absl::Time deadline = absl::Now() + std::max(timeout, absl::ZeroDuration()) + call_timeout_;
  std::unique_ptr<grpc::ClientContext> context = connection_->NewContext(secret_, deadline);
  const grpc::Status status = connection_->stub->Watch(context.get(), request, &response);
  CHORUS_RETURN_IF_ERROR(connection_->Map(
      status, address_, deadline,
      absl::StrCat("watch of worker ", Quote(worker_id), " after generation ", known_generation)));
  if (!response.has_generation()) return std::optional<chorus::rendezvous::Generation>();
  return std::optional<chorus::rendezvous::Generation>(std::move(*response.mutable_generation()));
}

absl::StatusOr<std::vector<std::string>> RendezvousClient::AllGather(const std::string& scope,
                                                                     int rank, int size,
                                                                     const std::string& mine,
                                                                     absl::Duration timeout) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous AllGather: rank ", rank, " is not in [0, ", size, ")"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  CHORUS_RETURN_IF_ERROR(Put(scope, absl::StrCat(rank), mine));
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) keys.push_back(absl::StrCat(r));
  return GetMany(scope, keys, std::max(deadline - absl::Now(), absl::ZeroDuration()));
}

RendezvousAddressExchange::RendezvousAddressExchange(std::shared_ptr<RendezvousClient> client,
                                                     std::string scope, int rank, int size,
                                                     absl::Duration timeout)
    : client_(std::move(client)),
      scope_(std::move(scope)),
      rank_(rank),
      size_(size),
      timeout_(timeout) {}

absl::StatusOr<std::vector<std::string>> RendezvousAddressExchange::AllGather(
    const std::string& mine) {
  const std::string scope = absl::StrCat(scope_, "/", calls_++);
  return client_->AllGather(scope, rank_, size_, mine, timeout_);
}

}  // namespace chorus::runtime
