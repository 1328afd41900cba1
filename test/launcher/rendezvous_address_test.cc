#include "launcher/hosts/rendezvous_address.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

using Names = std::vector<std::string>;

// A machine with a loopback, a LAN and a test bench bridge.
const std::vector<InterfaceAddress> kInterfaces = {
    {"lo", "127.0.0.1", 8},
    {"eth0", "10.0.0.5", 16},
    {"chcl0", "198.18.0.1", 24},
};

HostRoute Route(const std::string& host, const std::string& resolved, const std::string& source) {
  return HostRoute{host, resolved, source};
}

TEST_CASE("Without interface flags, the route's source address is advertised",
          "[launcher][rendezvous_address]") {
  CHECK(*ChooseRendezvousAddress(Route("n1", "198.18.0.11", "198.18.0.1"), kInterfaces, {}) ==
        "198.18.0.1");
  CHECK(*ChooseRendezvousAddress(Route("gpu7", "10.0.3.7", "10.0.0.5"), kInterfaces, {}) ==
        "10.0.0.5");
  // A host that is this machine under another name is reached over loopback.
  CHECK(*ChooseRendezvousAddress(Route("alias", "127.0.1.1", "127.0.0.1"), kInterfaces, {}) ==
        "127.0.0.1");
}

TEST_CASE("A host that does not resolve: the error names it and says how to choose",
          "[launcher][rendezvous_address]") {
  const HostRoute route{"n9", absl::NotFoundError("getaddrinfo: Name or service not known"),
                        absl::NotFoundError("getaddrinfo: Name or service not known")};
  absl::StatusOr<std::string> a = ChooseRendezvousAddress(route, kInterfaces, {});
  REQUIRE(absl::IsUnavailable(a.status()));
  CHECK(a.status().message() ==
        "cannot resolve host n9 (getaddrinfo: Name or service not known), so chorusrun cannot "
        "tell which address of this machine it reaches; name the interface its workers reach "
        "this machine through with --network-interface (this machine's: lo 127.0.0.1/8, eth0 "
        "10.0.0.5/16, chcl0 198.18.0.1/24)");
}

TEST_CASE("A host without a route: the error names the address tried",
          "[launcher][rendezvous_address]") {
  const HostRoute route{"far", std::string("203.0.113.5"),
                        absl::UnavailableError("connect: Network is unreachable")};
  absl::StatusOr<std::string> a = ChooseRendezvousAddress(route, kInterfaces, {});
  REQUIRE(absl::IsUnavailable(a.status()));
  CHECK_THAT(std::string(a.status().message()),
             Catch::StartsWith("host far resolves to 203.0.113.5, and this machine has no route "
                               "to it (connect: Network is unreachable), so its workers could "
                               "not reach the rendezvous; name the interface") &&
                 Catch::Contains("--network-interface (this machine's: lo 127.0.0.1/8"));
}

TEST_CASE("A named interface wins over the route", "[launcher][rendezvous_address]") {
  // The route would say 10.0.0.5; the user asked for the bridge.
  CHECK(*ChooseRendezvousAddress(Route("gpu7", "10.0.3.7", "10.0.0.5"), kInterfaces, {"chcl0"}) ==
        "198.18.0.1");
  // Even where the host does not resolve here (an ssh alias, say).
  const HostRoute alias{"alias", absl::NotFoundError("x"), absl::NotFoundError("x")};
  CHECK(*ChooseRendezvousAddress(alias, kInterfaces, {"eth0"}) == "10.0.0.5");
}

TEST_CASE(
    "Of several named interfaces, the one on the host's subnet; else the route's; else "
    "the first",
    "[launcher][rendezvous_address]") {
  const Names both = {"eth0", "chcl0"};
  CHECK(*ChooseRendezvousAddress(Route("n2", "198.18.0.12", "198.18.0.1"), kInterfaces, both) ==
        "198.18.0.1");
  CHECK(*ChooseRendezvousAddress(Route("lan", "10.0.200.1", "10.0.0.5"), kInterfaces, both) ==
        "10.0.0.5");
  // Off every subnet, through a gateway on the bridge: the route's source, a named interface.
  CHECK(*ChooseRendezvousAddress(Route("wan", "100.64.0.1", "198.18.0.1"), kInterfaces, both) ==
        "198.18.0.1");
  // Off every subnet and the route leaves elsewhere: the first named.
  CHECK(*ChooseRendezvousAddress(Route("wan", "100.64.0.1", "172.16.0.9"), kInterfaces, both) ==
        "10.0.0.5");
  // Names that do not exist here are passed over (they may be the workers' names).
  CHECK(*ChooseRendezvousAddress(Route("n2", "198.18.0.12", "198.18.0.1"), kInterfaces,
                                 {"ib0", "chcl0"}) == "198.18.0.1");
}

TEST_CASE("Named interfaces without an IPv4 address here are an error naming them",
          "[launcher][rendezvous_address]") {
  absl::StatusOr<std::string> one =
      ChooseRendezvousAddress(Route("n1", "198.18.0.11", "198.18.0.1"), kInterfaces, {"ib0"});
  REQUIRE(absl::IsInvalidArgument(one.status()));
  CHECK_THAT(std::string(one.status().message()),
             Catch::StartsWith("--network-interface: ib0 has no IPv4 address on this machine, "
                               "so the workers on n1 have no address to reach it at; name the "
                               "interface") &&
                 Catch::Contains("eth0 10.0.0.5/16"));
  absl::StatusOr<std::string> two = ChooseRendezvousAddress(
      Route("n1", "198.18.0.11", "198.18.0.1"), kInterfaces, {"ib0", "ib1"});
  CHECK_THAT(std::string(two.status().message()),
             Catch::StartsWith("--network-interface: none of ib0, ib1 has an IPv4 address"));
}

TEST_CASE("Subnet matching uses the prefix length", "[launcher][rendezvous_address]") {
  const std::vector<InterfaceAddress> split = {{"a", "10.1.0.1", 24}, {"b", "10.1.1.1", 24}};
  CHECK(*ChooseRendezvousAddress(Route("h", "10.1.1.77", "10.1.0.1"), split, {"a", "b"}) ==
        "10.1.1.1");
  const std::vector<InterfaceAddress> wide = {{"a", "10.1.0.1", 24}, {"b", "10.2.0.1", 0}};
  CHECK(*ChooseRendezvousAddress(Route("h", "172.16.0.1", "9.9.9.9"), wide, {"a", "b"}) ==
        "10.2.0.1");
}

TEST_CASE("FormatInterfaces", "[launcher][rendezvous_address]") {
  CHECK(FormatInterfaces({}) == "none");
  CHECK(FormatInterfaces({{"eth0", "10.0.0.5", 16}}) == "eth0 10.0.0.5/16");
}

TEST_CASE("The system's answers for this machine", "[launcher][rendezvous_address]") {
  absl::StatusOr<std::vector<InterfaceAddress>> list = ListInterfaceAddresses();
  REQUIRE(list.ok());
  CHECK(std::find(list->begin(), list->end(), InterfaceAddress{"lo", "127.0.0.1", 8}) !=
        list->end());
  const HostRoute route = LookUpHostRoute("127.0.0.1");
  CHECK(*route.resolved == "127.0.0.1");
  CHECK(*route.source == "127.0.0.1");
  absl::StatusOr<std::map<std::string, std::string>> all =
      RendezvousAddresses({"127.0.0.1", "127.0.0.1"}, {});
  REQUIRE(all.ok());
  CHECK(*all == std::map<std::string, std::string>{{"127.0.0.1", "127.0.0.1"}});
  CHECK(*RendezvousAddresses({"127.0.0.1"}, {"lo"}) ==
        std::map<std::string, std::string>{{"127.0.0.1", "127.0.0.1"}});
}

}  // namespace
}  // namespace chorus::launcher
