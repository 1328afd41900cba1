#include "launcher/engine/rank_env.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

const RendezvousInfo kRendezvous = {"10.1.2.3:4567", std::string(64, 'a'), 45};

TEST_CASE("A rank's environment: numbers under both prefixes, then the rendezvous",
          "[launcher][env]") {
  const RankPlacement p = {"127.0.0.1", 2, 3, 0, 1, 1, 2};
  CHECK(RankEnvironment(p, kRendezvous) == std::vector<EnvVar>{
                                               {"CHORUS_RANK", "2"},
                                               {"CHORUS_SIZE", "3"},
                                               {"CHORUS_LOCAL_RANK", "0"},
                                               {"CHORUS_LOCAL_SIZE", "1"},
                                               {"CHORUS_CROSS_RANK", "1"},
                                               {"CHORUS_CROSS_SIZE", "2"},
                                               {"CHORUS_HOSTNAME", "127.0.0.1"},
                                               {"HOROVOD_RANK", "2"},
                                               {"HOROVOD_SIZE", "3"},
                                               {"HOROVOD_LOCAL_RANK", "0"},
                                               {"HOROVOD_LOCAL_SIZE", "1"},
                                               {"HOROVOD_CROSS_RANK", "1"},
                                               {"HOROVOD_CROSS_SIZE", "2"},
                                               {"HOROVOD_HOSTNAME", "127.0.0.1"},
                                               {"CHORUS_RENDEZVOUS_ADDR", "10.1.2.3:4567"},
                                               {"CHORUS_RENDEZVOUS_SECRET", std::string(64, 'a')},
                                               {"CHORUS_RENDEZVOUS_SCOPE", "world/0"},
                                               {"CHORUS_START_TIMEOUT_SECONDS", "45"},
                                           });
}

TEST_CASE("A local worker gets the launcher's environment; chorusrun's values win",
          "[launcher][env]") {
  const Environment launcher = {
      {"PATH", "/bin"}, {"CHORUS_RANK", "7"}, {"CHORUS_CACHE_CAPACITY", "5"}, {"HOME", "/h"}};
  const RankPlacement p = {"localhost", 1, 2, 1, 2, 0, 1};
  const Environment env = MergeEnvironment(launcher, {{"CHORUS_CACHE_CAPACITY", "64"}},
                                           RankEnvironment(p, kRendezvous));
  CHECK(env.at("PATH") == "/bin");
  CHECK(env.at("HOME") == "/h");
  CHECK(env.at("CHORUS_RANK") == "1");
  CHECK(env.at("HOROVOD_RANK") == "1");
  CHECK(env.at("CHORUS_CACHE_CAPACITY") == "64");
  CHECK(env.at("CHORUS_RENDEZVOUS_SECRET") == std::string(64, 'a'));
  CHECK(env.size() == launcher.size() + RankEnvironment(p, kRendezvous).size() - 1);
}

TEST_CASE("A remote worker gets every forwarded variable a shell can export, without the secret",
          "[launcher][env]") {
  const Environment env = {{"PATH", "/bin"},
                           {"HOME", "/h"},
                           {"MYVAR", "a b\n'c' \"d\" =e \xc3\xa9"},
                           {"SSH_AUTH_SOCK", "/s"},
                           {"LD_LIBRARY_PATH", "/l"},
                           {"NCCL_DEBUG", "INFO"},
                           {"HOROVOD_RANK", "1"},
                           {"CHORUS_RANK", "1"},
                           {"CHORUS_RENDEZVOUS_SECRET", "s3cr3t"},
                           {"OLDPWD", "/o"},
                           {"BASH_FUNC_f%%", "() { :; }"},
                           {"my.var", "1"},
                           {"my-var", "1"},
                           {"1X", "1"},
                           {"_x9", "1"}};
  CHECK(RemoteEnvironment(env) == std::vector<EnvVar>{{"CHORUS_RANK", "1"},
                                                      {"HOME", "/h"},
                                                      {"HOROVOD_RANK", "1"},
                                                      {"LD_LIBRARY_PATH", "/l"},
                                                      {"MYVAR", "a b\n'c' \"d\" =e \xc3\xa9"},
                                                      {"NCCL_DEBUG", "INFO"},
                                                      {"PATH", "/bin"},
                                                      {"_x9", "1"}});
}

TEST_CASE("Shell names: letters, digits and '_', not starting with a digit", "[launcher][env]") {
  for (const char* name : {"A", "_", "_1", "path", "CHORUS_RANK", "x9_Y"}) {
    CHECK(IsShellName(name));
  }
  for (const char* name : {"", "1A", "A.B", "A-B", "A B", "BASH_FUNC_f%%", "h\xc3\xa9"}) {
    CHECK_FALSE(IsShellName(name));
  }
}

}  // namespace
}  // namespace chorus::launcher
