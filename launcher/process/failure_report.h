// File: launcher/process/failure_report.h
//
// A rank that dies of an uncaught Python exception writes one line to its stderr before its
// runtime shuts down (chorus.basics.FAILURE_REPORT):
//
//   chorus: rank 1 failed (uncaught exception): ValueError: bad batch
//
// Its shutdown then fails the other ranks' pending ops, and they may exit before it does, so
// the first worker to exit is often not the one that failed. chorusrun reads these lines back
// from the workers' output (tagged by mpirun in MPI mode, per worker in --gloo mode) and names
// the first rank that reported, with its exception, in the job's last line. A rank that ends
// otherwise (sys.exit, a signal, returning early) writes no report, but the other ranks' failed
// ops name it ("chorus was shut down by rank 2 on n3 before this op completed"): where no rank
// reported, chorusrun names the first rank named so (elastic/worker_exit.h's
// ChooseFailureReport).
//
// Thread-safety: thread-compatible.
#ifndef CHORUS_LAUNCHER_PROCESS_FAILURE_REPORT_H_
#define CHORUS_LAUNCHER_PROCESS_FAILURE_REPORT_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "elastic/worker_exit.h"
#include "launcher/process/worker_output.h"

namespace chorus::launcher {

using elastic::FailureReport;

// The report a line of a worker's stderr carries (without chorusrun's or mpirun's tag), if any:
// its own (the rank in it is the writer's), or a rank it names as having shut chorus down
// (named_by_other; one rank, as the runtime's DescribeShutdown names it).
std::optional<FailureReport> ParseFailureReport(absl::string_view line);

// ParseFailureReport of a line that the worker of rank `writer` wrote: an own report gets
// `writer` as its rank (the one the launcher knows the worker by), a named one keeps the line's.
std::optional<FailureReport> ParseWorkerFailureReport(absl::string_view line, int writer);

// An OutputSink that passes everything to `inner` and collects the failure reports in the
// stderr of its workers, in arrival order; an own report's rank is the index its worker writes
// under (its rank in the generation), not the one in the line; a named one's is the line's.
class FailureReportSink final : public OutputSink {
 public:
  FailureReportSink(std::unique_ptr<OutputSink> inner, std::vector<FailureReport>* reports)
      : inner_(std::move(inner)), reports_(reports) {}

  void Write(int index, OutputStream stream, absl::string_view bytes) override;
  void Close(int index, OutputStream stream) override;

 private:
  void Scan(int index, absl::string_view line);

  std::unique_ptr<OutputSink> inner_;
  std::vector<FailureReport>* reports_;
  std::map<int, LineSplitter> stderr_lines_;  // by index
};

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_PROCESS_FAILURE_REPORT_H_
