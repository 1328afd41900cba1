// HandleTable: the release paths (Release waits, TryRelease does not).
#include "runtime/submit/handle_table.h"

#include <thread>

#include <catch2/catch.hpp>

namespace chorus::runtime {
namespace {

OpResult ResultWith(absl::Status status) {
  OpResult r;
  r.status = std::move(status);
  return r;
}

TEST_CASE("TryRelease leaves an op in flight alone and releases a completed one", "[handles]") {
  HandleTable table;
  const Handle h = table.Create();
  absl::StatusOr<std::optional<OpResult>> early = table.TryRelease(h);
  REQUIRE(early.ok());
  CHECK_FALSE(early->has_value());
  CHECK(table.Poll(h).ok());  // still known

  table.Complete(h, ResultWith(absl::DataLossError("lost")));
  absl::StatusOr<std::optional<OpResult>> done = table.TryRelease(h);
  REQUIRE(done.ok());
  REQUIRE(done->has_value());
  CHECK((*done)->status.code() == absl::StatusCode::kDataLoss);
  CHECK((*done)->status.message() == "lost");

  // Released: unknown from now on, to every path.
  CHECK(table.TryRelease(h).status().code() == absl::StatusCode::kNotFound);
  CHECK(table.Release(h).status().code() == absl::StatusCode::kNotFound);
  CHECK(table.Poll(h).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("TryRelease of a handle never created is NotFound", "[handles]") {
  HandleTable table;
  CHECK(table.TryRelease(42).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("Release waits for the completion made on another thread", "[handles]") {
  HandleTable table;
  const Handle h = table.Create();
  std::thread completer([&] { table.Complete(h, ResultWith(absl::OkStatus())); });
  absl::StatusOr<OpResult> r = table.Release(h);
  completer.join();
  REQUIRE(r.ok());
  CHECK(r->status.ok());
  CHECK(table.TryRelease(h).status().code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace chorus::runtime
