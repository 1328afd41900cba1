#include "launcher/engine/generation_notice.h"

#include <map>
#include <string>

#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

RankPlacement Place(const std::string& host, int rank, int size, int local_rank) {
  RankPlacement p;
  p.host = host;
  p.rank = rank;
  p.size = size;
  p.local_rank = local_rank;
  p.local_size = 2;
  p.cross_rank = rank / 2;
  p.cross_size = size / 2;
  return p;
}

TEST_CASE("GenerationVariables: the rank variables of the generation, without the fixed ones",
          "[elastic][generation_notice]") {
  std::map<std::string, std::string> vars;
  for (const auto& [name, value] : GenerationVariables(Place("hostB", 3, 4, 1), 7)) {
    CHECK(vars.emplace(name, value).second);  // each once
  }
  CHECK(vars.at("CHORUS_RANK") == "3");
  CHECK(vars.at("HOROVOD_RANK") == "3");
  CHECK(vars.at("CHORUS_SIZE") == "4");
  CHECK(vars.at("CHORUS_LOCAL_RANK") == "1");
  CHECK(vars.at("CHORUS_CROSS_RANK") == "1");
  CHECK(vars.at("CHORUS_HOSTNAME") == "hostB");
  CHECK(vars.at("CHORUS_RENDEZVOUS_SCOPE") == "world/7");
  CHECK(vars.at("CHORUS_ELASTIC_GENERATION") == "7");
  CHECK(vars.count("CHORUS_RENDEZVOUS_ADDR") == 0);
  CHECK(vars.count("CHORUS_RENDEZVOUS_SECRET") == 0);
  CHECK(vars.count("CHORUS_START_TIMEOUT_SECONDS") == 0);
}

TEST_CASE("MakeGenerationNotice carries the change and every worker's place",
          "[elastic][generation_notice]") {
  elastic::PublishGeneration change;
  change.number = 2;
  change.aborted = true;
  change.hold = true;
  change.cause = "rank 1 on hostA exited with code 3";
  change.lost_ranks = {1};
  change.hosts_removed = true;
  change.places = {{"w0", Place("hostA", 0, 2, 0)}, {"w5", Place("hostC", 1, 2, 0)}};
  const chorus::rendezvous::Generation g =
      MakeGenerationNotice(change, absl::FromUnixMicros(1234567));
  CHECK(g.number() == 2);
  CHECK(g.aborted());
  CHECK(g.hold());
  CHECK(g.cause() == change.cause);
  REQUIRE(g.lost_ranks_size() == 1);
  CHECK(g.lost_ranks(0) == 1);
  CHECK(g.hosts_removed());
  CHECK_FALSE(g.hosts_added());
  CHECK(g.timestamp_us() == 1234567);
  REQUIRE(g.places_size() == 2);
  CHECK(g.places(0).worker_id() == "w0");
  CHECK(g.places(1).worker_id() == "w5");
  CHECK(g.places(1).rank() == 1);
  CHECK(g.places(1).env().at("CHORUS_HOSTNAME") == "hostC");
  CHECK(g.places(1).env().at("CHORUS_RENDEZVOUS_SCOPE") == "world/2");
}

}  // namespace
}  // namespace chorus::launcher
