// File: launcher/hosts/rendezvous_address.h
//
// The address of this machine that a remote host's workers dial to reach the rendezvous server
// of an MPI-less job (the server listens on every IPv4 address, 0.0.0.0). Per remote host:
//
//   --network-interface(s) given: the IPv4 address of the first named interface whose subnet
//     holds the host's address; else of the first named interface that has an IPv4 address
//     here (the choice is the user's, and is honoured even when no subnet matches). Named
//     interfaces that do not exist here are passed over (the names may be the workers'); when
//     none has an IPv4 address, that is the error.
//   none given: the source address of this machine's route to the host, i.e. the address the
//     host sees our packets come from: the kernel's choice, asked with connect() and
//     getsockname() on a UDP socket (no packet is sent). The host is resolved with
//     getaddrinfo (IPv4), as ssh would resolve it unless its configuration renames it.
//
// Not this machine's hostname: Debian's /etc/hosts maps it to 127.0.1.1, which no other
// machine can dial, and a host that resolves it otherwise would only be lucky.
//
// Every error names the host, the address tried or the interface looked for, this machine's
// IPv4 interfaces, and says to choose one with --network-interface. A host that does not resolve
// or has no route is Unavailable (chorusrun exits 1, as MPI mode does when its ssh check fails
// for the same host); named interfaces without an address are InvalidArgument (exit 2).
//
// Thread-safety: ChooseRendezvousAddress and FormatInterfaces are pure; the others read the
// system's state (interfaces, resolver, routing table) and may be called from any thread.
#ifndef CHORUS_LAUNCHER_HOSTS_RENDEZVOUS_ADDRESS_H_
#define CHORUS_LAUNCHER_HOSTS_RENDEZVOUS_ADDRESS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace chorus::launcher {

// One IPv4 address of one of this machine's interfaces.
struct InterfaceAddress {
  std::string interface;   // e.g. "eth0"
  std::string address;     // dotted quad
  int prefix_length = 32;  // of its subnet (netmask 255.255.255.0 -> 24)

  friend bool operator==(const InterfaceAddress&, const InterfaceAddress&) = default;
};

// What the system says about one remote host: its IPv4 address, and this machine's source
// address on the route to it. A failed lookup is a status naming the cause.
struct HostRoute {
  std::string host;                      // as the host list names it
  absl::StatusOr<std::string> resolved;  // getaddrinfo's first IPv4 address
  absl::StatusOr<std::string> source;    // the route's source address (needs `resolved`)
};

// The decision above for one host (pure). `interfaces`: every IPv4 address of this machine;
// `requested`: --network-interface(s), in order. InvalidArgument with the message above when
// nothing can be chosen.
absl::StatusOr<std::string> ChooseRendezvousAddress(const HostRoute& route,
                                                    const std::vector<InterfaceAddress>& interfaces,
                                                    const std::vector<std::string>& requested);

// "eth0 10.1.2.3/24, ib0 192.168.7.1/16", or "none" (for messages).
std::string FormatInterfaces(const std::vector<InterfaceAddress>& interfaces);

// Every IPv4 address of this machine's interfaces (getifaddrs), loopback included, in the
// system's order.
absl::StatusOr<std::vector<InterfaceAddress>> ListInterfaceAddresses();

// `host`'s route facts: getaddrinfo (AF_INET) and, when it resolved, the UDP connect() probe.
HostRoute LookUpHostRoute(const std::string& host);

// The address to advertise to each of `remote_hosts` (keys: the hosts as given), looked up
// and decided as above. The first host for which nothing can be chosen is the error.
absl::StatusOr<std::map<std::string, std::string>> RendezvousAddresses(
    const std::vector<std::string>& remote_hosts,
    const std::vector<std::string>& network_interfaces);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_HOSTS_RENDEZVOUS_ADDRESS_H_
