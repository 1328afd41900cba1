// File: launcher/mpi/mpi_job.h
//
// An MPI-mode job (chorusrun without --gloo): resolve the hosts and programs, build the mpirun
// command (launcher/mpi/mpirun_command.h), check ssh to every host mpirun will reach with it
// (launcher/hosts/host_checks.h), run mpirun (launcher/process/child_process.h) while printing its
// output per rank (launcher/mpi/mpirun_output.h) and watching for the runtime's no-progress reports
// (launcher/mpi/no_progress_report.h), and end as launcher/mpi/mpirun_verdict.h says.
// launcher/README.md describes what the user sees.
//
// Exit status: 2 for bad input (nothing started); 1 when a host cannot be reached over ssh
// (nothing started) or mpirun cannot be run; 128 + N when chorusrun was told to stop by signal N
// during the ssh checks; else JudgeMpirunJob's (launcher/mpi/mpirun_verdict.h).
//
// Thread-safety: call from the main thread (signal handlers).
#ifndef CHORUS_LAUNCHER_MPI_MPI_JOB_H_
#define CHORUS_LAUNCHER_MPI_MPI_JOB_H_

#include "launcher/mpi/mpirun_command.h"
#include "launcher/options.h"

namespace chorus::launcher {

// `launcher_env`: chorusrun's environment.
int RunMpiJob(const LaunchOptions& options, const Environment& launcher_env);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_MPI_MPI_JOB_H_
