#include "launcher/hosts/rendezvous_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chorus::launcher {
namespace {

std::optional<uint32_t> ParseIPv4(const std::string& text) {
  struct in_addr a = {};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

bool InSubnet(const std::string& address, const InterfaceAddress& ia) {
  const std::optional<uint32_t> a = ParseIPv4(address);
  const std::optional<uint32_t> b = ParseIPv4(ia.address);
  if (!a || !b || ia.prefix_length < 0 || ia.prefix_length > 32) return false;
  const uint32_t mask = ia.prefix_length == 0 ? 0 : ~uint32_t{0} << (32 - ia.prefix_length);
  return (*a & mask) == (*b & mask);
}

std::string Choose(const std::vector<InterfaceAddress>& interfaces) {
  return absl::StrCat(
      "name the interface its workers reach this machine through with "
      "--network-interface (this machine's: ",
      FormatInterfaces(interfaces), ")");
}

std::string Ntop(const struct sockaddr_in& in) {
  char text[INET_ADDRSTRLEN] = {};
  if (::inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text)) == nullptr) return "";
  return text;
}

int PrefixLength(const struct sockaddr* netmask) {
  if (netmask == nullptr || netmask->sa_family != AF_INET) return 32;
  uint32_t mask = ntohl(reinterpret_cast<const struct sockaddr_in*>(netmask)->sin_addr.s_addr);
  int length = 0;
  while (mask & 0x80000000u) {
    ++length;
    mask <<= 1;
  }
  return length;
}

}  // namespace

absl::StatusOr<std::string> ChooseRendezvousAddress(const HostRoute& route,
                                                    const std::vector<InterfaceAddress>& interfaces,
                                                    const std::vector<std::string>& requested) {
  if (!requested.empty()) {
    std::vector<const InterfaceAddress*> named;  // requested order, then the system's
    for (const std::string& name : requested) {
      for (const InterfaceAddress& ia : interfaces) {
        if (ia.interface == name) named.push_back(&ia);
      }
    }
    if (named.empty()) {
      const std::string which =
          requested.size() == 1
              ? absl::StrCat(requested[0], " has no")
              : absl::StrCat("none of ", absl::StrJoin(requested, ", "), " has an");
      return absl::InvalidArgumentError(absl::StrCat(
          "--network-interface: ", which, " IPv4 address on this machine, so the workers on ",
          route.host, " have no address to reach it at; ", Choose(interfaces)));
    }
    if (route.resolved.ok()) {
      for (const InterfaceAddress* ia : named) {
        if (InSubnet(*route.resolved, *ia)) return ia->address;
      }
    }
    if (route.source.ok()) {
      for (const InterfaceAddress* ia : named) {
        if (ia->address == *route.source) return ia->address;
      }
    }
    return named.front()->address;
  }
  // What this machine cannot reach is its environment's, not bad input: exit 1, as the same
  // host fails the ssh check in MPI mode (a named interface without an address stays bad input).
  if (!route.resolved.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve host ", route.host, " (", route.resolved.status().message(),
                     "), so chorusrun cannot tell which address of this machine it reaches; ",
                     Choose(interfaces)));
  }
  if (!route.source.ok()) {
    return absl::UnavailableError(
        absl::StrCat("host ", route.host, " resolves to ", *route.resolved,
                     ", and this machine has no route to it (", route.source.status().message(),
                     "), so its workers could not reach the rendezvous; ", Choose(interfaces)));
  }
  return *route.source;
}

std::string FormatInterfaces(const std::vector<InterfaceAddress>& interfaces) {
  if (interfaces.empty()) return "none";
  return absl::StrJoin(interfaces, ", ", [](std::string* out, const InterfaceAddress& ia) {
    absl::StrAppend(out, ia.interface, " ", ia.address, "/", ia.prefix_length);
  });
}

absl::StatusOr<std::vector<InterfaceAddress>> ListInterfaceAddresses() {
  struct ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return absl::InternalError(absl::StrCat("getifaddrs: ", std::strerror(errno)));
  }
  std::vector<InterfaceAddress> out;
  for (struct ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    InterfaceAddress ia;
    ia.interface = a->ifa_name;
    ia.address = Ntop(*reinterpret_cast<const struct sockaddr_in*>(a->ifa_addr));
    ia.prefix_length = PrefixLength(a->ifa_netmask);
    if (!ia.address.empty()) out.push_back(std::move(ia));
  }
  ::freeifaddrs(list);
  return out;
}

HostRoute LookUpHostRoute(const std::string& host) {
  HostRoute route{host, absl::UnknownError("not looked up"), absl::UnknownError("not looked up")};
  struct addrinfo hints = {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  struct addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0) {
    route.resolved = absl::NotFoundError(
        absl::StrCat("getaddrinfo: ", rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc)));
    route.source = route.resolved.status();
    return route;
  }
  struct sockaddr_in target = *reinterpret_cast<const struct sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  route.resolved = Ntop(target);
  // connect() on a UDP socket only picks the route and binds the source address.
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    route.source = absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
    return route;
  }
  struct sockaddr_in local = {};
  socklen_t length = sizeof(local);
  if (::connect(fd, reinterpret_cast<const struct sockaddr*>(&target), sizeof(target)) != 0) {
    route.source = absl::UnavailableError(absl::StrCat("connect: ", std::strerror(errno)));
  } else if (::getsockname(fd, reinterpret_cast<struct sockaddr*>(&local), &length) != 0) {
    route.source = absl::InternalError(absl::StrCat("getsockname: ", std::strerror(errno)));
  } else {
    route.source = Ntop(local);
  }
  ::close(fd);
  return route;
}

absl::StatusOr<std::map<std::string, std::string>> RendezvousAddresses(
    const std::vector<std::string>& remote_hosts,
    const std::vector<std::string>& network_interfaces) {
  absl::StatusOr<std::vector<InterfaceAddress>> interfaces = ListInterfaceAddresses();
  if (!interfaces.ok()) return interfaces.status();
  // With at most one address on the named interfaces the host's address cannot change the
  // choice: no lookup (a slow resolver would delay the start for nothing).
  int named = 0;
  for (const InterfaceAddress& ia : *interfaces) {
    for (const std::string& name : network_interfaces) named += ia.interface == name ? 1 : 0;
  }
  const bool look_up = network_interfaces.empty() || named > 1;
  std::map<std::string, std::string> chosen;
  for (const std::string& host : remote_hosts) {
    if (chosen.count(host) != 0) continue;
    const absl::Status skipped = absl::UnknownError("not looked up");
    const HostRoute route = look_up ? LookUpHostRoute(host) : HostRoute{host, skipped, skipped};
    absl::StatusOr<std::string> address =
        ChooseRendezvousAddress(route, *interfaces, network_interfaces);
    if (!address.ok()) return address.status();
    chosen[host] = *std::move(address);
  }
  return chosen;
}

}  // namespace chorus::launcher
