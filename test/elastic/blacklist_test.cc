#include "elastic/blacklist.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::elastic {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

Blacklist Make(std::optional<CooldownRange> range, double u = 0.0, double jitter = 0.1) {
  absl::StatusOr<Blacklist> b = Blacklist::Create({range, jitter}, [u]() { return u; });
  REQUIRE(b.ok());
  return *std::move(b);
}

TEST_CASE("Blacklist without a cooldown range is permanent", "[elastic][blacklist]") {
  Blacklist b = Make(std::nullopt);
  CHECK_FALSE(b.IsBlacklisted("a", kStart));
  CHECK(b.failure_count("a") == 0);
  CHECK(b.RecordFailure("a", kStart) == absl::InfiniteFuture());
  CHECK(b.IsBlacklisted("a", kStart));
  CHECK(b.IsBlacklisted("a", kStart + absl::Hours(24 * 365)));
  CHECK_FALSE(b.IsBlacklisted("b", kStart));
  CHECK(b.failure_count("a") == 1);
}

TEST_CASE("Blacklist cooldown doubles from MIN and is capped at MAX", "[elastic][blacklist]") {
  Blacklist b = Make(CooldownRange{absl::Seconds(10), absl::Seconds(100)}, /*u=*/0.0);
  const std::vector<absl::Duration> expected = {absl::Seconds(10),  absl::Seconds(20),
                                                absl::Seconds(40),  absl::Seconds(80),
                                                absl::Seconds(100), absl::Seconds(100)};
  absl::Time now = kStart;
  for (size_t k = 0; k < expected.size(); ++k) {
    INFO("failure " << k + 1);
    const absl::Time until = b.RecordFailure("h", now);
    CHECK(until - now == expected[k]);
    CHECK(b.failure_count("h") == static_cast<int>(k + 1));
    // Out until the period ends, re-admitted exactly then.
    CHECK(b.IsBlacklisted("h", now));
    CHECK(b.IsBlacklisted("h", until - absl::Nanoseconds(1)));
    CHECK_FALSE(b.IsBlacklisted("h", until));
    now = until + absl::Seconds(1);  // fails again a little after coming back
  }
}

TEST_CASE("Blacklist jitter stays within its bounds", "[elastic][blacklist]") {
  const CooldownRange range{absl::Seconds(10), absl::Seconds(100)};
  const double u = GENERATE(0.0, 0.25, 0.5, 0.999999);
  const int k = GENERATE(1, 2, 3, 4, 5, 40);
  Blacklist b = Make(range, u);
  const absl::Duration d = b.CooldownFor(k, u);
  absl::Duration base = absl::Seconds(10);
  for (int i = 1; i < k && base < range.max; ++i) base *= 2;
  INFO("k=" << k << " u=" << u << " cooldown=" << absl::FormatDuration(d));
  CHECK(d >= std::min(base, range.max));
  CHECK(d <= range.max);
  CHECK(d < base * 1.1);
  if (base * 1.1 < range.max) CHECK(d == base + base * (0.1 * u));
}

TEST_CASE("Blacklist draws a jitter for each failure", "[elastic][blacklist]") {
  std::vector<double> draws = {0.5, 0.0};
  size_t next = 0;
  absl::StatusOr<Blacklist> b =
      Blacklist::Create({CooldownRange{absl::Seconds(10), absl::Seconds(100)}, 0.2},
                        [&]() { return draws[next++ % draws.size()]; });
  REQUIRE(b.ok());
  CHECK(b->RecordFailure("h", kStart) - kStart == absl::Seconds(11));  // 10 + 0.2*10*0.5
  const absl::Time later = kStart + absl::Seconds(11);
  CHECK(b->RecordFailure("h", later) - later == absl::Seconds(20));  // 20 + 0
  CHECK(next == 2);
}

TEST_CASE("Blacklist: MIN == MAX gives a fixed cooldown", "[elastic][blacklist]") {
  Blacklist b = Make(CooldownRange{absl::Seconds(5), absl::Seconds(5)}, 0.9);
  absl::Time now = kStart;
  for (int k = 0; k < 4; ++k) {
    const absl::Time until = b.RecordFailure("h", now);
    CHECK(until - now == absl::Seconds(5));
    now = until;
  }
}

TEST_CASE("Blacklist: a failure while still out is the same incident", "[elastic][blacklist]") {
  Blacklist b = Make(CooldownRange{absl::Seconds(10), absl::Seconds(100)});
  const absl::Time until = b.RecordFailure("h", kStart);
  CHECK(b.RecordFailure("h", kStart) == until);  // a second worker of the same host
  CHECK(b.RecordFailure("h", kStart + absl::Seconds(9)) == until);
  CHECK(b.failure_count("h") == 1);
  // After re-admission a failure counts again, with the doubled period.
  const absl::Time again = kStart + absl::Seconds(10);
  CHECK(b.RecordFailure("h", again) - again == absl::Seconds(20));
  CHECK(b.failure_count("h") == 2);
}

TEST_CASE("Blacklist filters a host set at a given time", "[elastic][blacklist]") {
  Blacklist b = Make(CooldownRange{absl::Seconds(10), absl::Seconds(100)});
  b.RecordFailure("b", kStart);
  b.RecordFailure("c", kStart + absl::Seconds(5));
  const HostSet hosts = {{"a", 1}, {"b", 2}, {"c", 3}};
  CHECK(b.Filter(hosts, kStart + absl::Seconds(1)) == HostSet{{"a", 1}});
  CHECK(b.Filter(hosts, kStart + absl::Seconds(10)) == HostSet{{"a", 1}, {"b", 2}});
  CHECK(b.Filter(hosts, kStart + absl::Seconds(15)) == hosts);
}

TEST_CASE("Blacklist rejects bad cooldown ranges and jitter", "[elastic][blacklist]") {
  const auto bad = [](CooldownRange r, double jitter = 0.1) {
    absl::StatusOr<Blacklist> b = Blacklist::Create({r, jitter}, [] { return 0.0; });
    REQUIRE_FALSE(b.ok());
    CHECK(b.status().code() == absl::StatusCode::kInvalidArgument);
  };
  bad({absl::ZeroDuration(), absl::Seconds(10)});
  bad({absl::Seconds(-1), absl::Seconds(10)});
  bad({absl::Seconds(10), absl::Seconds(5)});
  bad({absl::Seconds(1), absl::Seconds(5)}, -0.1);
  bad({absl::Seconds(1), absl::Seconds(5)}, 1.5);
  CHECK(Blacklist::Create({CooldownRange{absl::Seconds(1), absl::Seconds(1)}, 0.0}).ok());
}

TEST_CASE("Blacklist's default random source is in [0, 1)", "[elastic][blacklist]") {
  Blacklist::RandomSource random = Blacklist::DefaultRandomSource();
  for (int i = 0; i < 1000; ++i) {
    const double u = random();
    CHECK(u >= 0.0);
    CHECK(u < 1.0);
  }
}

}  // namespace
}  // namespace chorus::elastic
