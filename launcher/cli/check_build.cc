#include "launcher/cli/check_build.h"

#include "absl/strings/str_cat.h"

#ifndef CHORUS_VERSION
#define CHORUS_VERSION "unknown"
#endif

namespace chorus::launcher {
namespace {

std::string Line(bool built, const char* name) {
  return absl::StrCat("    [", built ? "X" : " ", "] ", name, "\n");
}

}  // namespace

BuildInfo CurrentBuild() {
  BuildInfo info;
  info.version = CHORUS_VERSION;
  info.pytorch = CHORUS_BUILT_PYTORCH != 0;  // the chorus.torch package of this build
  info.mpi_controller = true;
  info.mpi_ops = true;
  info.ucx_controller = true;  // chorusrun --gloo and CHORUS_CONTROLLER=ucx
  info.ucx_ops = true;
  // horovodrun's Gloo lines say whether --gloo works: it does, on chorus's own MPI-less mode
  // (UCX), as hvd.gloo_built() says too.
  info.gloo_controller = true;
  info.gloo_ops = true;
  info.nccl_ops = CHORUS_BUILT_CUDA != 0;  // the GPU data plane: CUDA kernels and NCCL
  info.cuda = CHORUS_BUILT_CUDA != 0;
  return info;
}

std::string CheckBuildText(const BuildInfo& b, bool verbose) {
  return absl::StrCat(verbose ? "\n" : "", "chorus v", b.version, ":\n\n",  //
                      "Available Frameworks:\n", Line(b.tensorflow, "TensorFlow"),
                      Line(b.pytorch, "PyTorch"), Line(b.mxnet, "MXNet"), "\n",  //
                      "Available Controllers:\n", Line(b.mpi_controller, "MPI"),
                      Line(b.ucx_controller, "UCX"), Line(b.gloo_controller, "Gloo"), "\n",  //
                      "Available Tensor Operations:\n", Line(b.nccl_ops, "NCCL"),
                      Line(b.ddl_ops, "DDL"), Line(b.ccl_ops, "CCL"), Line(b.mpi_ops, "MPI"),
                      Line(b.ucx_ops, "UCX"), Line(b.gloo_ops, "Gloo"), "\n",  //
                      "Available Devices:\n", Line(b.cuda, "CUDA"));
}

}  // namespace chorus::launcher
