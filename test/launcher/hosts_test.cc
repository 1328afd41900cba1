#include "launcher/hosts/hosts.h"

#include <fstream>
#include <string>

#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

TEST_CASE("ParseHosts reads host:slots lists", "[launcher][hosts]") {
  auto hosts = ParseHosts("host1:2,host2:4,10.0.0.3:1");
  REQUIRE(hosts.ok());
  REQUIRE(*hosts == std::vector<HostSlots>{{"host1", 2}, {"host2", 4}, {"10.0.0.3", 1}});
  CHECK(TotalSlots(*hosts) == 7);
  CHECK(FormatHosts(*hosts) == "host1:2,host2:4,10.0.0.3:1");
}

TEST_CASE("ParseHosts tolerates spaces around entries", "[launcher][hosts]") {
  auto hosts = ParseHosts(" a:1 , b-c_d.e:3 ");
  REQUIRE(hosts.ok());
  REQUIRE(*hosts == std::vector<HostSlots>{{"a", 1}, {"b-c_d.e", 3}});
}

TEST_CASE("ParseHosts rejects malformed entries", "[launcher][hosts]") {
  const std::string bad = GENERATE(as<std::string>{}, "", "host", "host:", ":2", "host:0",
                                   "host:-1", "host:+2", "host:2x", "host:1,", "a:1,,b:1",
                                   "ho st:1", "host:1000001", "a:1,a:2", "host:99999999999");
  auto hosts = ParseHosts(bad);
  INFO("input: '" << bad << "'");
  REQUIRE_FALSE(hosts.ok());
  CHECK(hosts.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(hosts.status().message().find('\n') == std::string::npos);
}

TEST_CASE("ParseHosts names the malformed entry", "[launcher][hosts]") {
  auto hosts = ParseHosts("good:2,bad");
  REQUIRE_FALSE(hosts.ok());
  CHECK_THAT(std::string(hosts.status().message()), Catch::Contains("malformed host 'bad'"));
  auto twice = ParseHosts("a:1,a:2");
  REQUIRE_FALSE(twice.ok());
  CHECK_THAT(std::string(twice.status().message()),
             Catch::Contains("'a' is listed more than once"));
}

TEST_CASE("ParseHostfile reads host slots=N lines with comments", "[launcher][hosts]") {
  const char* contents =
      "# cluster\n"
      "\n"
      "node1 slots=4\n"
      "  node2\tslots=2   # the small one\n"
      "node3\n"
      "   \n";
  auto hosts = ParseHostfile(contents, "hosts.txt");
  REQUIRE(hosts.ok());
  REQUIRE(*hosts == std::vector<HostSlots>{{"node1", 4}, {"node2", 2}, {"node3", 1}});
  CHECK(FormatHosts(*hosts) == "node1:4,node2:2,node3:1");
}

TEST_CASE("ParseHostfile accepts CRLF line ends", "[launcher][hosts]") {
  auto hosts = ParseHostfile("a slots=2\r\nb slots=1\r\n", "f");
  REQUIRE(hosts.ok());
  REQUIRE(*hosts == std::vector<HostSlots>{{"a", 2}, {"b", 1}});
}

TEST_CASE("ParseHostfile rejects malformed lines naming file and line", "[launcher][hosts]") {
  auto [contents, expected] = GENERATE(table<std::string, std::string>({
      {"a slots=2\nb slots=x\n", "hosts.txt:2: malformed 'slots=x'"},
      {"a slots=0\n", "hosts.txt:1: malformed 'slots=0'"},
      {"a max_slots=2\n", "hosts.txt:1: malformed 'max_slots=2'"},
      {"a slots=2 extra\n", "hosts.txt:1: unexpected 'extra'"},
      {"\n\nb@d slots=1\n", "hosts.txt:3: malformed host name 'b@d'"},
      {"# only comments\n\n", "hostfile hosts.txt lists no hosts"},
      {"a slots=1\na slots=2\n", "hosts.txt: host 'a' is listed more than once"},
  }));
  auto hosts = ParseHostfile(contents, "hosts.txt");
  REQUIRE_FALSE(hosts.ok());
  CHECK_THAT(std::string(hosts.status().message()), Catch::StartsWith(expected));
}

TEST_CASE("ReadHostfile reads a file and reports a missing one", "[launcher][hosts]") {
  const std::string path = "/tmp/chorus_launcher_hosts_test.txt";
  {
    std::ofstream out(path);
    out << "x slots=3\ny slots=1\n";
  }
  auto hosts = ReadHostfile(path);
  REQUIRE(hosts.ok());
  CHECK(*hosts == std::vector<HostSlots>{{"x", 3}, {"y", 1}});
  std::remove(path.c_str());

  auto missing = ReadHostfile("/nonexistent/dir/hosts");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("/nonexistent/dir/hosts"));
}

}  // namespace
}  // namespace chorus::launcher
