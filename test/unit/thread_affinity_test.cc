#include "runtime/loop/thread_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <thread>

#include <catch2/catch.hpp>

namespace chorus::runtime {
namespace {

TEST_CASE("CoreFor: one core per local rank, Horovod's rule for a short list",
          "[thread_affinity]") {
  CHECK(*CoreFor({}, 0, 2) == std::nullopt);
  CHECK(*CoreFor({3, 1}, 0, 2) == 3);
  CHECK(*CoreFor({3, 1}, 1, 2) == 1);
  CHECK(*CoreFor({3, 1, 2}, 1, 2) == 1);
  absl::StatusOr<std::optional<int>> short_list = CoreFor({3}, 0, 2);
  REQUIRE_FALSE(short_list.ok());
  CHECK(std::string(short_list.status().message()) ==
        "CHORUS_THREAD_AFFINITY=3 names 1 core(s) for 2 local ranks (one per local rank); it is "
        "ignored");
}

TEST_CASE("PinCallingThread sets the calling thread's mask to one core", "[thread_affinity]") {
  std::thread t([] {
    REQUIRE(PinCallingThread(0).ok());
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(::pthread_getaffinity_np(::pthread_self(), sizeof(set), &set) == 0);
    CHECK(CPU_COUNT(&set) == 1);
    CHECK(CPU_ISSET(0, &set));
    CHECK_FALSE(PinCallingThread(-1).ok());
    CHECK_FALSE(PinCallingThread(1 << 20).ok());
  });
  t.join();
}

}  // namespace
}  // namespace chorus::runtime
