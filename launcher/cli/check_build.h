// File: launcher/cli/check_build.h
//
// The text of `chorusrun --check-build`, in horovodrun's layout ("[X] MPI" for what is built).
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_CLI_CHECK_BUILD_H_
#define CHORUS_LAUNCHER_CLI_CHECK_BUILD_H_

#include <string>

namespace chorus::launcher {

struct BuildInfo {
  std::string version;
  bool tensorflow = false;
  bool pytorch = false;
  bool mxnet = false;
  bool mpi_controller = false;
  bool ucx_controller = false;
  bool gloo_controller = false;
  bool nccl_ops = false;
  bool ddl_ops = false;
  bool ccl_ops = false;
  bool mpi_ops = false;
  bool ucx_ops = false;
  bool gloo_ops = false;
  bool cuda = false;  // the GPU data plane (CUDA kernels, NCCL)
};

// What this build of chorus has: the MPI controller and MPI tensor operations.
BuildInfo CurrentBuild();

// `verbose` adds a leading blank line, as horovodrun does.
std::string CheckBuildText(const BuildInfo& info, bool verbose);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_CLI_CHECK_BUILD_H_
