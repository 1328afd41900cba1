// chorusrun's exit status and last line in MPI mode (launcher/mpi/mpirun_verdict.h).
#include "launcher/mpi/mpirun_verdict.h"

#include <signal.h>

#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

constexpr char kCause[] =
    "rank 2 on n3 presumed lost: ranks 0, 1 saw no progress for 5s waiting on it "
    "(CHORUS_NO_PROGRESS_TIMEOUT_SECONDS)";

MpirunJobEnd CutJob() {
  MpirunJobEnd end;
  end.reports = {{0, absl::Seconds(5), std::vector<int>{1, 2}, 75},
                 {1, absl::Seconds(5), std::vector<int>{0, 2}, 75}};
  end.host_of_rank = std::vector<std::string>{"n1", "n2", "n3"};
  end.mpirun_cause = "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD";
  end.grace = absl::Seconds(3);
  return end;
}

TEST_CASE("mpirun ended the aborted job itself: its status, the lost rank as the cause",
          "[launcher][verdict]") {
  MpirunJobEnd end = CutJob();
  end.child.status = 75;
  MpirunVerdict v = JudgeMpirunJob(end);
  CHECK(v.status == 75);
  CHECK(v.line == std::string("chorusrun: job failed (mpirun exit status 75): ") + kCause);
}

TEST_CASE("chorusrun stopped mpirun: the ranks' exit code passes through", "[launcher][verdict]") {
  MpirunJobEnd end = CutJob();
  end.child.status = 139;  // Open MPI 4.1.4's mpirun crashes on SIGTERM during an abort
  end.child.stopped = true;
  MpirunVerdict v = JudgeMpirunJob(end);
  CHECK(v.status == 75);
  CHECK(v.line == std::string("chorusrun: job failed (exit status 75, mpirun stopped): ") + kCause);

  end.child.status = 128 + SIGKILL;
  end.child.killed = true;
  CHECK(JudgeMpirunJob(end).status == 75);

  // Reports that name no exit code (not the MPI controller's): 1.
  for (NoProgressReport& r : end.reports) r.exit_code.reset();
  CHECK(JudgeMpirunJob(end).status == 1);
}

TEST_CASE("A signal chorusrun received and mpirun obeyed: stopped, 128 + the signal",
          "[launcher][verdict]") {
  MpirunJobEnd end;
  end.grace = absl::Seconds(3);
  end.child.status = 1;  // what Open MPI's mpirun returns after SIGINT
  end.child.signal = SIGINT;
  MpirunVerdict v = JudgeMpirunJob(end);
  CHECK(v.status == 130);
  CHECK(v.line == "chorusrun: job stopped: chorusrun received signal 2 (Interrupt)");
  // The job ended well anyway: its status.
  end.child.status = 0;
  v = JudgeMpirunJob(end);
  CHECK(v.status == 0);
  CHECK_FALSE(v.line.has_value());
}

TEST_CASE("A signal chorusrun received and mpirun did not obey", "[launcher][verdict]") {
  MpirunJobEnd end;
  end.grace = absl::Seconds(3);
  end.child.status = 128 + SIGKILL;
  end.child.signal = SIGTERM;
  end.child.killed = true;
  MpirunVerdict v = JudgeMpirunJob(end);
  CHECK(v.status == 128 + SIGTERM);
  CHECK(v.line ==
        "chorusrun: job stopped: chorusrun received signal 15 (Terminated); mpirun had not ended "
        "3s later and was killed");

  // Obeyed: stopped by the signal, whatever mpirun then said about the ranks it stopped.
  end.child.killed = false;
  end.child.status = 1;
  end.mpirun_cause = "rank 1 exited with code 1";
  v = JudgeMpirunJob(end);
  CHECK(v.status == 128 + SIGTERM);
  CHECK(v.line == "chorusrun: job stopped: chorusrun received signal 15 (Terminated)");
}

TEST_CASE("A rank that reported an exception is the cause, whoever mpirun saw exit first",
          "[launcher][verdict]") {
  MpirunJobEnd end;
  end.child.status = 1;
  end.mpirun_cause = "rank 0 exited with code 1";
  end.failure_reports = {{2, "ValueError: bad"}, {0, "RuntimeError: later"}};
  end.host_of_rank = std::vector<std::string>{"n1", "n2", "n3"};
  MpirunVerdict v = JudgeMpirunJob(end);
  CHECK(v.status == 1);
  CHECK(v.line ==
        "chorusrun: job failed (mpirun exit status 1): rank 2 on n3 raised ValueError: bad");
  end.host_of_rank.reset();  // ranks chorusrun cannot place
  CHECK(JudgeMpirunJob(end).line ==
        "chorusrun: job failed (mpirun exit status 1): rank 2 raised ValueError: bad");
}

TEST_CASE("Without reports: mpirun's status and cause", "[launcher][verdict]") {
  MpirunJobEnd end;
  CHECK(JudgeMpirunJob(end).status == 0);
  CHECK_FALSE(JudgeMpirunJob(end).line);
  end.child.status = 137;
  CHECK(JudgeMpirunJob(end).line ==
        "chorusrun: job failed (mpirun exit status 137): mpirun reported no cause");
}

}  // namespace
}  // namespace chorus::launcher
