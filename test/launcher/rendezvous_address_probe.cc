// rendezvous_address_probe [--network-interface NAME]... HOST...
//
// Prints "HOST ADDRESS" per host, as RendezvousAddresses (launcher/hosts/rendezvous_address.h)
// decides, or its error on stderr and exits 1. For the multi-host tests (test/cluster/), which
// run it where real routes lead to other network namespaces.
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "launcher/hosts/rendezvous_address.h"

int main(int argc, char** argv) {
  std::vector<std::string> hosts, interfaces;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--network-interface") == 0 && i + 1 < argc) {
      interfaces.push_back(argv[++i]);
    } else {
      hosts.push_back(argv[i]);
    }
  }
  absl::StatusOr<std::map<std::string, std::string>> chosen =
      chorus::launcher::RendezvousAddresses(hosts, interfaces);
  if (!chosen.ok()) {
    std::cerr << "rendezvous_address_probe: " << chosen.status().message() << std::endl;
    return 1;
  }
  for (const std::string& host : hosts) std::cout << host << " " << chosen->at(host) << "\n";
  return 0;
}
