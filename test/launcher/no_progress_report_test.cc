// The runtime's no-progress report as chorusrun reads it (Note [The no-progress report
// contract] in launcher/mpi/no_progress_report.h), the ranks a job's reports imply were lost, and
// the words chorusrun's last line uses for them. test/launcher/no_progress_contract.cc parses
// what the runtime itself renders.
#include "launcher/mpi/no_progress_report.h"

#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

// What rank 1 of a 3-rank job whose rank 2 was cut off printed (a cluster run, 30 s bound),
// after mpirun's tag.
constexpr char kRealReport[] =
    "[chorus 1/0 ERROR mpi_controller.cc:106] rank 1: no progress for 30s: MPI_Iallreduce (the "
    "cycle's bit vector) has not completed, running the cycle's negotiation, no op pending on "
    "this rank; it waits on ranks 0, 2 (the transport does not say which of them has not "
    "answered). A peer that stopped answering without closing its connections (its host lost, a "
    "link cut, the process stopped or stuck) looks like this. Ending the job. If those ranks are "
    "only slow, raise CHORUS_NO_PROGRESS_TIMEOUT_SECONDS (0 disables this check). (MPI_Abort, "
    "exit code 75)";

// A report with the given rank, bound text and PEERS, in the runtime's shape.
std::string Report(int rank, const std::string& bound, const std::string& peers,
                   const std::string& work = "the cycle's negotiation",
                   const std::string& suffix = " (MPI_Abort, exit code 75)") {
  return "[chorus " + std::to_string(rank) + "/0 ERROR mpi_controller.cc:106] rank " +
         std::to_string(rank) + ": no progress for " + bound +
         ": the MPI data plane's Allreduce has not completed, running " + work + "; " + peers +
         ". A peer that stopped answering without closing its connections (its host lost, a "
         "link cut, the process stopped or stuck) looks like this. Ending the job. If those "
         "ranks are only slow, raise CHORUS_NO_PROGRESS_TIMEOUT_SECONDS (0 disables this check)." +
         suffix;
}

NoProgressReport Made(int rank, absl::Duration bound, std::optional<std::vector<int>> peers,
                      std::optional<int> exit_code = 75) {
  return {rank, bound, std::move(peers), exit_code};
}

TEST_CASE("A real report: rank, bound, the ranks it waited on, the exit code",
          "[launcher][no_progress]") {
  std::optional<NoProgressReport> r = ParseNoProgressReport(kRealReport);
  REQUIRE(r);
  CHECK(*r == Made(1, absl::Seconds(30), std::vector<int>{0, 2}, 75));
}

TEST_CASE("Every form of PEERS and of the bound", "[launcher][no_progress]") {
  CHECK(ParseNoProgressReport(Report(0, "5s", "it waits on rank 2")) ==
        Made(0, absl::Seconds(5), std::vector<int>{2}));
  CHECK(ParseNoProgressReport(Report(3, "1m30s",
                                     "it waits on ranks 0, 1, 2, 17 (the transport "
                                     "does not say which of them has not answered)")) ==
        Made(3, absl::Seconds(90), std::vector<int>{0, 1, 2, 17}));
  CHECK(ParseNoProgressReport(Report(1, "500ms", "it cannot tell which ranks it waits on")) ==
        Made(1, absl::Milliseconds(500), std::nullopt));
  CHECK(ParseNoProgressReport(Report(2,
                                     "3s (+12s allowed for the work of process sets this rank "
                                     "is not in)",
                                     "it waits on rank 0")) ==
        Made(2, absl::Seconds(3), std::vector<int>{0}));
}

TEST_CASE("The exit code is read only from the line's end", "[launcher][no_progress]") {
  CHECK(ParseNoProgressReport(Report(0, "5s", "it waits on rank 1", "x", "")) ==
        Made(0, absl::Seconds(5), std::vector<int>{1}, std::nullopt));
  CHECK(ParseNoProgressReport(
            Report(0, "5s", "it waits on rank 1", "x", " (MPI_Abort, exit code 75)\r")) ==
        Made(0, absl::Seconds(5), std::vector<int>{1}, 75));
  CHECK(ParseNoProgressReport(
            Report(0, "5s", "it waits on rank 1", "x", " (MPI_Abort, exit code 75) and more")) ==
        Made(0, absl::Seconds(5), std::vector<int>{1}, std::nullopt));
}

TEST_CASE("Tensor names in WORK cannot pass for the report's own parts",
          "[launcher][no_progress]") {
  // WORK is free text: names that look like a rank, a bound and PEERS come before the real
  // PEERS, which is found from the end.
  const std::string work =
      "allreduce of tensors 'rank 9: no progress for 1s: x', '; it waits on ranks 7, 8' and "
      "'; it cannot tell which ranks it waits on' (process set 0)";
  CHECK(ParseNoProgressReport(Report(1, "5s", "it waits on ranks 0, 2 (the transport ...)",
                                     work)) == Made(1, absl::Seconds(5), std::vector<int>{0, 2}));
  CHECK(ParseNoProgressReport(Report(1, "5s", "it waits on rank 4", work)) ==
        Made(1, absl::Seconds(5), std::vector<int>{4}));
}

TEST_CASE("Lines that are not a report", "[launcher][no_progress]") {
  // The UCX transport's own message (an op's error) is not the MPI watchdog's report.
  CHECK_FALSE(
      ParseNoProgressReport("rank 0: FAILED: allreduce grad.0: UNAVAILABLE: UCX "
                            "transport: no progress for 3s waiting on rank 2"));
  CHECK_FALSE(ParseNoProgressReport("a line of the application's"));
  CHECK_FALSE(ParseNoProgressReport(""));
  // "rank" must be a word of its own.
  CHECK_FALSE(ParseNoProgressReport(
      Report(1, "5s", "it waits on rank 2")
          .replace(Report(1, "5s", "it waits on rank 2").find("] rank"), 6, "] prank")));
  // No PEERS, an unreadable bound, an empty list.
  CHECK_FALSE(ParseNoProgressReport("rank 1: no progress for 5s: MPI_Allreduce has not completed"));
  CHECK_FALSE(ParseNoProgressReport(Report(1, "five seconds", "it waits on rank 2")));
  CHECK_FALSE(ParseNoProgressReport(Report(1, "5s", "it waits on ranks (the transport ...)")));
  CHECK_FALSE(ParseNoProgressReport("rank : no progress for 5s: x; it waits on rank 2."));
}

TEST_CASE("Suspects: ranks waited on that did not report", "[launcher][no_progress]") {
  LostRanks both = JudgeNoProgress({Made(1, absl::Seconds(5), std::vector<int>{0, 2}),
                                    Made(0, absl::Seconds(5), std::vector<int>{1, 2})});
  CHECK(both.reporters == std::vector<int>{0, 1});
  CHECK(both.suspects == std::vector<int>{2});
  CHECK(both.bound == absl::Seconds(5));
  CHECK(both.exit_code == 75);
  CHECK_FALSE(both.some_peers_unknown);

  // Rank 1 was ended by the abort before its own report: it cannot be told from rank 2.
  LostRanks one = JudgeNoProgress({Made(0, absl::Seconds(5), std::vector<int>{1, 2})});
  CHECK(one.reporters == std::vector<int>{0});
  CHECK(one.suspects == std::vector<int>{1, 2});

  LostRanks unknown = JudgeNoProgress({Made(0, absl::Seconds(3), std::nullopt, std::nullopt),
                                       Made(1, absl::Seconds(9), std::vector<int>{0}, 75),
                                       Made(1, absl::Seconds(9), std::vector<int>{0}, 75)});
  CHECK(unknown.reporters == std::vector<int>{0, 1});
  CHECK(unknown.suspects.empty());
  CHECK(unknown.some_peers_unknown);
  CHECK(unknown.bound == absl::Seconds(3));
  CHECK(unknown.exit_code == 75);
}

TEST_CASE("The cause names each suspect with its host", "[launcher][no_progress]") {
  const std::vector<std::string> hosts = {"n1", "n2", "n3"};
  LostRanks lost = JudgeNoProgress({Made(0, absl::Seconds(5), std::vector<int>{1, 2}),
                                    Made(1, absl::Seconds(5), std::vector<int>{0, 2})});
  CHECK(DescribeLostRanks(lost, hosts) ==
        "rank 2 on n3 presumed lost: ranks 0, 1 saw no progress for 5s waiting on it "
        "(CHORUS_NO_PROGRESS_TIMEOUT_SECONDS)");
  // Where chorusrun cannot tell the hosts (--binding-args), ranks alone.
  CHECK(DescribeLostRanks(lost, std::nullopt) ==
        "rank 2 presumed lost: ranks 0, 1 saw no progress for 5s waiting on it "
        "(CHORUS_NO_PROGRESS_TIMEOUT_SECONDS)");

  lost = JudgeNoProgress({Made(0, absl::Seconds(5), std::vector<int>{1, 2})});
  CHECK(DescribeLostRanks(lost, hosts) ==
        "rank 1 on n2 or rank 2 on n3 presumed lost: rank 0 saw no progress for 5s waiting on "
        "them (CHORUS_NO_PROGRESS_TIMEOUT_SECONDS)");
  // A rank beyond the host list (a numbering of the application's own) has no host.
  lost = JudgeNoProgress({Made(0, absl::Seconds(5), std::vector<int>{1, 7})});
  CHECK(DescribeLostRanks(lost, hosts) ==
        "rank 1 on n2 or rank 7 presumed lost: rank 0 saw no progress for 5s waiting on them "
        "(CHORUS_NO_PROGRESS_TIMEOUT_SECONDS)");
}

TEST_CASE("Many suspects: the first 8 are named", "[launcher][no_progress]") {
  std::vector<int> peers;
  for (int r = 1; r <= 11; ++r) peers.push_back(r);
  LostRanks lost = JudgeNoProgress({Made(0, absl::Seconds(30), peers)});
  CHECK(
      DescribeLostRanks(lost, std::nullopt) ==
      "rank 1, rank 2, rank 3, rank 4, rank 5, rank 6, rank 7, rank 8 or 3 more ranks presumed "
      "lost: rank 0 saw no progress for 30s waiting on them (CHORUS_NO_PROGRESS_TIMEOUT_SECONDS)");
}

TEST_CASE("No suspect: every rank waited on reported, or they could not tell",
          "[launcher][no_progress]") {
  LostRanks all = JudgeNoProgress({Made(0, absl::Seconds(5), std::vector<int>{1}),
                                   Made(1, absl::Seconds(5), std::vector<int>{0})});
  CHECK(DescribeLostRanks(all, std::vector<std::string>{"a", "b"}) ==
        "ranks 0, 1 saw no progress for 5s (CHORUS_NO_PROGRESS_TIMEOUT_SECONDS); every rank "
        "waited on reported too: none is presumed lost (all may be stuck, or only slow)");
  LostRanks blind = JudgeNoProgress({Made(0, absl::Seconds(5), std::nullopt)});
  CHECK(DescribeLostRanks(blind, std::nullopt) ==
        "rank 0 saw no progress for 5s and could not tell which ranks it waited on "
        "(CHORUS_NO_PROGRESS_TIMEOUT_SECONDS)");
}

}  // namespace
}  // namespace chorus::launcher
