// ops/nccl/nccl_communicator.cc against the recording NCCL/CUDA fakes of fake_nccl.h: which
// NCCL calls each collective makes, with which arguments (types, ops, counts past 2^32, buffer
// offsets, roots, peers, communicator, stream, current device), in which order and group; how
// NCCL and CUDA failures become Status; and the Abort / AsyncError lifecycle. The one-rank
// behaviour on a real GPU is test/gpu/gpu_platform_test.cc's; this covers the multi-rank
// mapping, which no single-GPU machine can run.
//
// Buffers registered with the fake print as "send+12"; a call whose extent runs past one prints
// "(overflow)" and fails the exact comparisons below.
#include "ops/nccl/nccl_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "chorus/types.h"
#include "ops/gpu_platform.h"
#include "test/nccl_fake/fake_nccl.h"

namespace chorus::ops::gpu {
namespace {

namespace fake = chorus::test::fake_nccl;
using Lines = std::vector<std::string>;
using Sizes = std::vector<int64_t>;

// Never dereferenced: the fake prints it.
void* const kStream = reinterpret_cast<void*>(0x5);

std::string Id(size_t bytes = NCCL_UNIQUE_ID_BYTES) {
  std::string id(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) id[i] = static_cast<char>(255 - i);
  return id;
}

std::string Hex(uintptr_t p) { return absl::StrCat("0x", absl::Hex(p)); }

// A fresh fake world and communicator `rank` of `size` on `device` (the fake's comm=1), with
// device 0 current on the calling thread and no call recorded yet.
std::unique_ptr<GpuCommunicator> Join(int size, int rank, int device) {
  fake::Reset();
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  REQUIRE(id.ok());
  absl::StatusOr<std::unique_ptr<GpuCommunicator>> comm =
      CreateNcclCommunicator(*id, size, rank, device);
  REQUIRE(comm.ok());
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  fake::ClearCalls();
  return *std::move(comm);
}

// `size` host bytes registered with the fake under `name` (never null, even when empty).
struct Buffer {
  Buffer(const char* name, size_t size) : bytes(size + 1) {
    fake::RegisterBuffer(name, bytes.data(), size);
  }
  uint8_t* data() { return bytes.data(); }
  std::vector<uint8_t> bytes;
};

// " comm=1 stream=0x5 dev=<device>": the tail of every collective's line.
std::string Tail(int device) { return absl::StrCat(" comm=1 stream=0x5 dev=", device); }

TEST_CASE("NewNcclUniqueId returns ncclGetUniqueId's raw bytes", "[nccl_fake]") {
  fake::Reset();
  const absl::StatusOr<std::string> id = NewNcclUniqueId();
  REQUIRE(id.ok());
  CHECK(id->size() == NCCL_UNIQUE_ID_BYTES);
  CHECK(*id == fake::LastGeneratedId());
  CHECK(fake::Calls() == Lines{"ncclGetUniqueId dev=0"});
  const absl::StatusOr<std::string> second = NewNcclUniqueId();
  REQUIRE(second.ok());
  CHECK(*second == fake::LastGeneratedId());
  CHECK(*second != *id);
}

TEST_CASE("NewNcclUniqueId failures carry NCCL's strings", "[nccl_fake]") {
  fake::Reset();
  fake::FailCall("ncclGetUniqueId", ncclSystemError);
  const absl::StatusOr<std::string> id = NewNcclUniqueId();
  CHECK(absl::IsUnavailable(id.status()));
  CHECK(id.status().message() == "ncclGetUniqueId failed: " + fake::ErrorString(ncclSystemError) +
                                     " (peer 2 closed the socket)");
  CHECK(fake::LastErrorQueries() == Lines{"null"});
}

TEST_CASE("CreateNcclCommunicator joins with the id's bytes and destroys on its device",
          "[nccl_fake]") {
  fake::Reset();
  absl::StatusOr<std::unique_ptr<GpuCommunicator>> comm = CreateNcclCommunicator(Id(), 4, 2, 5);
  REQUIRE(comm.ok());
  CHECK(fake::LastInitId() == Id());
  CHECK(fake::Calls() == Lines{"ncclCommInitRank nranks=4 rank=2 dev=5"});
  CHECK(fake::CurrentDevice() == 5);  // documented: leaves the device current
  CHECK((*comm)->rank() == 2);
  CHECK((*comm)->size() == 4);
  CHECK((*comm)->device() == 5);

  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  fake::ClearCalls();
  comm->reset();
  CHECK(fake::Calls() == Lines{"ncclCommDestroy comm=1 dev=5"});
  CHECK(fake::CurrentDevice() == 1);  // the caller's device back
  CHECK(fake::PendingCudaError() == cudaSuccess);
}

TEST_CASE("CreateNcclCommunicator rejects bad ids and ranks before touching CUDA or NCCL",
          "[nccl_fake]") {
  const auto [id_bytes, size, rank] = GENERATE(table<size_t, int, int>({
      {0, 2, 0},
      {NCCL_UNIQUE_ID_BYTES - 1, 2, 0},
      {NCCL_UNIQUE_ID_BYTES + 1, 2, 0},
      {NCCL_UNIQUE_ID_BYTES, 0, 0},
      {NCCL_UNIQUE_ID_BYTES, 2, -1},
      {NCCL_UNIQUE_ID_BYTES, 2, 2},
  }));
  CAPTURE(id_bytes, size, rank);
  fake::Reset();
  const auto comm = CreateNcclCommunicator(Id(id_bytes), size, rank, 0);
  CHECK(absl::IsInvalidArgument(comm.status()));
  CHECK(fake::Calls().empty());
  CHECK(fake::CudaCalls().empty());
}

TEST_CASE("CreateNcclCommunicator without a usable device fails before ncclCommInitRank",
          "[nccl_fake]") {
  fake::Reset();
  fake::FailCudaSetDevice(cudaErrorInvalidDevice);
  const auto comm = CreateNcclCommunicator(Id(), 2, 0, 9);
  CHECK(absl::IsFailedPrecondition(comm.status()));
  CHECK(comm.status().message() == "NCCL communicator: cudaSetDevice(9) failed: " +
                                       fake::CudaErrorString(cudaErrorInvalidDevice));
  CHECK(fake::Calls().empty());
  CHECK(fake::PendingCudaError() == cudaSuccess);  // no CUDA error left behind
}

TEST_CASE("A failed ncclCommInitRank maps its error and aborts what it allocated", "[nccl_fake]") {
  const bool allocates = GENERATE(false, true);
  const auto [result, code] = GENERATE(table<ncclResult_t, absl::StatusCode>({
      {ncclRemoteError, absl::StatusCode::kUnavailable},
      {ncclSystemError, absl::StatusCode::kUnavailable},
      {ncclInvalidUsage, absl::StatusCode::kInvalidArgument},
      {ncclUnhandledCudaError, absl::StatusCode::kInternal},
  }));
  CAPTURE(allocates, result);
  fake::Reset();
  fake::SetInitFailureAllocatesComm(allocates);
  fake::FailCall("ncclCommInitRank", result);
  const auto comm = CreateNcclCommunicator(Id(), 2, 1, 6);
  CHECK(comm.status().code() == code);
  CHECK(comm.status().message() == "NCCL rank 1 of 2 on GPU 6: ncclCommInitRank failed: " +
                                       fake::ErrorString(result) + " (peer 2 closed the socket)");
  if (allocates) {
    CHECK(fake::Calls() ==
          Lines{"ncclCommInitRank nranks=2 rank=1 dev=6", "ncclCommAbort comm=1 dev=6"});
    CHECK(fake::LastErrorQueries() == Lines{"1"});  // asked before the abort freed it
  } else {
    CHECK(fake::Calls() == Lines{"ncclCommInitRank nranks=2 rank=1 dev=6"});
    CHECK(fake::LastErrorQueries() == Lines{"null"});
  }
}

TEST_CASE("Allreduce maps every reducible dtype and op onto NCCL's", "[nccl_fake]") {
  const auto [dtype, type] = GENERATE(table<DataType, std::string>({
      {DataType::kUint8, "ncclUint8"},
      {DataType::kInt8, "ncclInt8"},
      {DataType::kInt32, "ncclInt32"},
      {DataType::kInt64, "ncclInt64"},
      {DataType::kFloat16, "ncclFloat16"},
      {DataType::kBfloat16, "ncclBfloat16"},
      {DataType::kFloat32, "ncclFloat32"},
      {DataType::kFloat64, "ncclFloat64"},
  }));
  const auto [op, nccl_op] = GENERATE(table<ReduceOp, std::string>({
      {ReduceOp::kSum, "ncclSum"},
      {ReduceOp::kMin, "ncclMin"},
      {ReduceOp::kMax, "ncclMax"},
      {ReduceOp::kProduct, "ncclProd"},
  }));
  CAPTURE(DataTypeName(dtype), ReduceOpName(op));
  auto comm = Join(3, 1, 3);
  const int64_t count = 64;
  Buffer send("send", count * DataTypeSize(dtype));
  Buffer recv("recv", count * DataTypeSize(dtype));
  REQUIRE(comm->Allreduce(send.data(), recv.data(), count, dtype, op, kStream).ok());
  CHECK(fake::Calls() == Lines{"ncclAllReduce send=send+0 recv=recv+0 count=64 type=" + type +
                               " op=" + nccl_op + Tail(3)});
  CHECK(fake::CurrentDevice() == 0);  // the caller's device back
}

TEST_CASE("Reductions reject int16, bool, average and adasum without calling NCCL", "[nccl_fake]") {
  const auto [dtype, op, word] = GENERATE(table<DataType, ReduceOp, std::string>({
      {DataType::kInt16, ReduceOp::kSum, "int16"},
      {DataType::kBool, ReduceOp::kMax, "bool"},
      {DataType::kFloat32, ReduceOp::kAverage, "average"},
      {DataType::kFloat32, ReduceOp::kAdasum, "adasum"},
  }));
  CAPTURE(word);
  auto comm = Join(2, 0, 0);
  Buffer send("send", 64);
  Buffer recv("recv", 64);
  const absl::Status allreduce = comm->Allreduce(send.data(), recv.data(), 4, dtype, op, kStream);
  CHECK(absl::IsInvalidArgument(allreduce));
  CHECK_THAT(std::string(allreduce.message()), Catch::Contains(word));
  const absl::Status reduce_scatter =
      comm->ReduceScatter(send.data(), recv.data(), Sizes{2, 2}, dtype, op, kStream);
  CHECK(absl::IsInvalidArgument(reduce_scatter));
  CHECK_THAT(std::string(reduce_scatter.message()), Catch::Contains(word));
  CHECK(fake::Calls().empty());
  CHECK(fake::CudaCalls().empty());
}

TEST_CASE("Negative sizes and wrong entry counts are rejected without calling NCCL",
          "[nccl_fake]") {
  auto comm = Join(3, 0, 0);
  Buffer send("send", 64);
  Buffer recv("recv", 64);
  const Sizes ok = {1, 2, 3};
  const Sizes few = {1, 2};
  const Sizes negative = {1, -2, 3};
  CHECK(absl::IsInvalidArgument(
      comm->Allreduce(send.data(), recv.data(), -1, DataType::kFloat32, ReduceOp::kSum, kStream)));
  CHECK(absl::IsInvalidArgument(comm->Broadcast(recv.data(), -1, 0, kStream)));
  CHECK(absl::IsInvalidArgument(comm->Broadcast(recv.data(), 4, 3, kStream)));
  CHECK(absl::IsInvalidArgument(comm->Broadcast(recv.data(), 4, -1, kStream)));
  CHECK(absl::IsInvalidArgument(comm->Allgatherv(send.data(), recv.data(), few, kStream)));
  CHECK(absl::IsInvalidArgument(comm->Allgatherv(send.data(), recv.data(), negative, kStream)));
  CHECK(absl::IsInvalidArgument(comm->ReduceScatter(send.data(), recv.data(), negative,
                                                    DataType::kUint8, ReduceOp::kSum, kStream)));
  CHECK(
      absl::IsInvalidArgument(comm->Alltoallv(send.data(), few, ok, recv.data(), ok, ok, kStream)));
  CHECK(absl::IsInvalidArgument(
      comm->Alltoallv(send.data(), ok, ok, recv.data(), ok, negative, kStream)));
  CHECK(fake::Calls().empty());
}

TEST_CASE("Counts, sizes and offsets past 2^32 reach NCCL unchanged", "[nccl_fake]") {
  auto comm = Join(2, 0, 2);
  const int64_t big = (int64_t{5} << 32) + 3;
  // Never dereferenced (too large for any host buffer): the fake prints them.
  const uintptr_t s = 0x10000;
  const uintptr_t r = 0x20000;
  void* const send = reinterpret_cast<void*>(s);
  void* const recv = reinterpret_cast<void*>(r);
  const std::string n = absl::StrCat(big);

  REQUIRE(comm->Allreduce(send, recv, big, DataType::kFloat32, ReduceOp::kSum, kStream).ok());
  REQUIRE(comm->Broadcast(recv, big, 1, kStream).ok());
  REQUIRE(comm->Allgatherv(send, recv, Sizes{big, big}, kStream).ok());
  REQUIRE(comm->Allgatherv(send, recv, Sizes{big, 7}, kStream).ok());
  REQUIRE(
      comm->ReduceScatter(send, recv, Sizes{big, 2}, DataType::kFloat64, ReduceOp::kMin, kStream)
          .ok());
  REQUIRE(comm->Alltoallv(send, Sizes{big, 1}, Sizes{0, big}, recv, Sizes{2, big}, Sizes{big, 0},
                          kStream)
              .ok());
  CHECK(fake::Calls() ==
        Lines{
            "ncclAllReduce send=" + Hex(s) + " recv=" + Hex(r) + " count=" + n +
                " type=ncclFloat32 op=ncclSum" + Tail(2),
            "ncclBroadcast send=" + Hex(r) + " recv=" + Hex(r) + " count=" + n +
                " type=ncclUint8 root=1" + Tail(2),
            "ncclAllGather send=" + Hex(s) + " recv=" + Hex(r) + " count=" + n + " type=ncclUint8" +
                Tail(2),
            "ncclGroupStart dev=2",
            "ncclBroadcast send=" + Hex(s) + " recv=" + Hex(r) + " count=" + n +
                " type=ncclUint8 root=0" + Tail(2),
            "ncclBroadcast send=" + Hex(s) + " recv=" + Hex(r + big) +
                " count=7 type=ncclUint8 root=1" + Tail(2),
            "ncclGroupEnd dev=2",
            "ncclGroupStart dev=2",
            "ncclReduce send=" + Hex(s) + " recv=" + Hex(r) + " count=" + n +
                " type=ncclFloat64 op=ncclMin root=0" + Tail(2),
            "ncclReduce send=" + Hex(s + 8 * big) + " recv=" + Hex(r) +
                " count=2 type=ncclFloat64 op=ncclMin root=1" + Tail(2),
            "ncclGroupEnd dev=2",
            "ncclGroupStart dev=2",
            "ncclSend send=" + Hex(s) + " count=" + n + " type=ncclUint8 peer=0" + Tail(2),
            "ncclRecv recv=" + Hex(r + big) + " count=2 type=ncclUint8 peer=0" + Tail(2),
            "ncclSend send=" + Hex(s + big) + " count=1 type=ncclUint8 peer=1" + Tail(2),
            "ncclRecv recv=" + Hex(r) + " count=" + n + " type=ncclUint8 peer=1" + Tail(2),
            "ncclGroupEnd dev=2",
        });
}

TEST_CASE("Empty collectives make no NCCL call", "[nccl_fake]") {
  auto comm = Join(3, 1, 0);
  Buffer send("send", 8);
  Buffer recv("recv", 8);
  const Sizes zero = {0, 0, 0};
  CHECK(comm->Allreduce(send.data(), recv.data(), 0, DataType::kFloat32, ReduceOp::kSum, kStream)
            .ok());
  CHECK(comm->Broadcast(recv.data(), 0, 2, kStream).ok());
  CHECK(comm->Allgatherv(send.data(), recv.data(), zero, kStream).ok());
  CHECK(comm->ReduceScatter(send.data(), recv.data(), zero, DataType::kFloat32, ReduceOp::kSum,
                            kStream)
            .ok());
  CHECK(comm->Alltoallv(send.data(), zero, zero, recv.data(), zero, zero, kStream).ok());
  CHECK(fake::Calls().empty());
}

TEST_CASE("Allgatherv: one ncclAllGather for equal blocks, rooted broadcasts otherwise",
          "[nccl_fake]") {
  auto comm = Join(4, 2, 3);
  SECTION("equal") {
    Buffer send("send", 8);
    Buffer recv("recv", 32);
    REQUIRE(comm->Allgatherv(send.data(), recv.data(), Sizes{8, 8, 8, 8}, kStream).ok());
    CHECK(fake::Calls() ==
          Lines{"ncclAllGather send=send+0 recv=recv+0 count=8 type=ncclUint8" + Tail(3)});
  }
  SECTION("unequal, empty blocks skipped") {
    Buffer send("send", 7);  // this rank's (2) block
    Buffer recv("recv", 23);
    REQUIRE(comm->Allgatherv(send.data(), recv.data(), Sizes{5, 0, 7, 11}, kStream).ok());
    CHECK(fake::Calls() ==
          Lines{
              "ncclGroupStart dev=3",
              "ncclBroadcast send=send+0 recv=recv+0 count=5 type=ncclUint8 root=0" + Tail(3),
              "ncclBroadcast send=send+0 recv=recv+5 count=7 type=ncclUint8 root=2" + Tail(3),
              "ncclBroadcast send=send+0 recv=recv+12 count=11 type=ncclUint8 root=3" + Tail(3),
              "ncclGroupEnd dev=3",
          });
  }
  SECTION("only this rank's block is empty") {
    Buffer send("send", 0);
    Buffer recv("recv", 12);
    REQUIRE(comm->Allgatherv(send.data(), recv.data(), Sizes{4, 4, 0, 4}, kStream).ok());
    CHECK(fake::Calls() ==
          Lines{
              "ncclGroupStart dev=3",
              "ncclBroadcast send=send+0 recv=recv+0 count=4 type=ncclUint8 root=0" + Tail(3),
              "ncclBroadcast send=send+0 recv=recv+4 count=4 type=ncclUint8 root=1" + Tail(3),
              "ncclBroadcast send=send+0 recv=recv+8 count=4 type=ncclUint8 root=3" + Tail(3),
              "ncclGroupEnd dev=3",
          });
  }
  CHECK(fake::CurrentDevice() == 0);
}

TEST_CASE("Broadcast is an in-place ncclBroadcast from the root", "[nccl_fake]") {
  auto comm = Join(3, 1, 4);
  Buffer buffer("buffer", 99);
  REQUIRE(comm->Broadcast(buffer.data(), 99, 2, kStream).ok());
  REQUIRE(comm->Broadcast(buffer.data(), 99, 1, nullptr).ok());
  CHECK(fake::Calls() ==
        Lines{
            "ncclBroadcast send=buffer+0 recv=buffer+0 count=99 type=ncclUint8 root=2" + Tail(4),
            "ncclBroadcast send=buffer+0 recv=buffer+0 count=99 type=ncclUint8 root=1"
            " comm=1 stream=0x0 dev=4",
        });
}

TEST_CASE("ReduceScatter: one ncclReduceScatter for equal blocks, rooted reduces otherwise",
          "[nccl_fake]") {
  auto comm = Join(3, 1, 1);
  SECTION("equal") {
    Buffer send("send", 30 * 8);
    Buffer recv("recv", 10 * 8);
    REQUIRE(comm->ReduceScatter(send.data(), recv.data(), Sizes{10, 10, 10}, DataType::kFloat64,
                                ReduceOp::kSum, kStream)
                .ok());
    CHECK(fake::Calls() ==
          Lines{"ncclReduceScatter send=send+0 recv=recv+0 count=10 type=ncclFloat64 op=ncclSum" +
                Tail(1)});
  }
  SECTION("unequal: offsets in elements of the dtype") {
    Buffer send("send", 12 * 2);
    Buffer recv("recv", 4 * 2);  // this rank's (1) block
    REQUIRE(comm->ReduceScatter(send.data(), recv.data(), Sizes{3, 4, 5}, DataType::kFloat16,
                                ReduceOp::kMax, kStream)
                .ok());
    CHECK(fake::Calls() ==
          Lines{
              "ncclGroupStart dev=1",
              "ncclReduce send=send+0 recv=recv+0 count=3 type=ncclFloat16 op=ncclMax root=0" +
                  Tail(1),
              "ncclReduce send=send+6 recv=recv+0 count=4 type=ncclFloat16 op=ncclMax root=1" +
                  Tail(1),
              "ncclReduce send=send+14 recv=recv+0 count=5 type=ncclFloat16 op=ncclMax root=2" +
                  Tail(1),
              "ncclGroupEnd dev=1",
          });
  }
  SECTION("unequal, empty blocks skipped") {
    Buffer send("send", 8 * 4);
    Buffer recv("recv", 0);  // this rank's (1) block is empty
    REQUIRE(comm->ReduceScatter(send.data(), recv.data(), Sizes{3, 0, 5}, DataType::kInt32,
                                ReduceOp::kProduct, kStream)
                .ok());
    CHECK(fake::Calls() ==
          Lines{
              "ncclGroupStart dev=1",
              "ncclReduce send=send+0 recv=recv+0 count=3 type=ncclInt32 op=ncclProd root=0" +
                  Tail(1),
              "ncclReduce send=send+12 recv=recv+0 count=5 type=ncclInt32 op=ncclProd root=2" +
                  Tail(1),
              "ncclGroupEnd dev=1",
          });
  }
}

TEST_CASE("Alltoallv sends and receives each non-empty block at its offset, in one group",
          "[nccl_fake]") {
  auto comm = Join(3, 0, 2);
  Buffer send("send", 16);
  Buffer recv("recv", 8);
  SECTION("both directions") {
    REQUIRE(comm->Alltoallv(send.data(), Sizes{4, 0, 6}, Sizes{10, 0, 2}, recv.data(),
                            Sizes{2, 3, 0}, Sizes{5, 0, 99}, kStream)
                .ok());
    CHECK(fake::Calls() == Lines{
                               "ncclGroupStart dev=2",
                               "ncclSend send=send+10 count=4 type=ncclUint8 peer=0" + Tail(2),
                               "ncclRecv recv=recv+5 count=2 type=ncclUint8 peer=0" + Tail(2),
                               "ncclRecv recv=recv+0 count=3 type=ncclUint8 peer=1" + Tail(2),
                               "ncclSend send=send+2 count=6 type=ncclUint8 peer=2" + Tail(2),
                               "ncclGroupEnd dev=2",
                           });
  }
  SECTION("sends only") {
    const Sizes zero = {0, 0, 0};
    REQUIRE(
        comm->Alltoallv(send.data(), Sizes{0, 0, 16}, zero, recv.data(), zero, zero, kStream).ok());
    CHECK(fake::Calls() == Lines{
                               "ncclGroupStart dev=2",
                               "ncclSend send=send+0 count=16 type=ncclUint8 peer=2" + Tail(2),
                               "ncclGroupEnd dev=2",
                           });
  }
}

TEST_CASE("A group is closed even when a call inside it fails; the first failure wins",
          "[nccl_fake]") {
  auto comm = Join(4, 2, 3);
  Buffer send("send", 64);
  Buffer recv("recv", 64);
  const std::string who = "NCCL rank 2 of 4 on GPU 3: ";
  SECTION("the second broadcast of an Allgatherv") {
    fake::FailCall("ncclBroadcast", ncclInvalidUsage, 2);
    const absl::Status status =
        comm->Allgatherv(send.data(), recv.data(), Sizes{5, 0, 7, 11}, kStream);
    CHECK(absl::IsInvalidArgument(status));
    CHECK(status.message() ==
          who + "ncclBroadcast (Allgatherv) failed: " + fake::ErrorString(ncclInvalidUsage) +
              " (peer 2 closed the socket)");
    CHECK(fake::Calls() ==
          Lines{
              "ncclGroupStart dev=3",
              "ncclBroadcast send=send+0 recv=recv+0 count=5 type=ncclUint8 root=0" + Tail(3),
              "ncclBroadcast send=send+0 recv=recv+5 count=7 type=ncclUint8 root=2" + Tail(3),
              "ncclGroupEnd dev=3",
          });
  }
  SECTION("a receive of an Alltoallv") {
    fake::FailCall("ncclRecv", ncclRemoteError);
    const Sizes four = {4, 4, 4, 4};
    const Sizes offsets = {0, 4, 8, 12};
    const absl::Status status =
        comm->Alltoallv(send.data(), four, offsets, recv.data(), four, offsets, kStream);
    CHECK(absl::IsUnavailable(status));
    CHECK(status.message() ==
          who + "ncclRecv (Alltoallv) failed: " + fake::ErrorString(ncclRemoteError) +
              " (peer 2 closed the socket)");
    CHECK(fake::Calls() == Lines{
                               "ncclGroupStart dev=3",
                               "ncclSend send=send+0 count=4 type=ncclUint8 peer=0" + Tail(3),
                               "ncclRecv recv=recv+0 count=4 type=ncclUint8 peer=0" + Tail(3),
                               "ncclGroupEnd dev=3",
                           });
  }
  SECTION("the first reduce of a ReduceScatter, and ncclGroupEnd too") {
    fake::FailCall("ncclReduce", ncclSystemError);
    fake::FailCall("ncclGroupEnd", ncclInternalError);
    const absl::Status status = comm->ReduceScatter(send.data(), recv.data(), Sizes{1, 2, 3, 4},
                                                    DataType::kInt8, ReduceOp::kSum, kStream);
    CHECK(absl::IsUnavailable(status));
    CHECK(status.message() ==
          who + "ncclReduce (ReduceScatter) failed: " + fake::ErrorString(ncclSystemError) +
              " (peer 2 closed the socket)");
    CHECK(
        fake::Calls() ==
        Lines{
            "ncclGroupStart dev=3",
            "ncclReduce send=send+0 recv=recv+0 count=1 type=ncclInt8 op=ncclSum root=0" + Tail(3),
            "ncclGroupEnd dev=3",
        });
  }
  SECTION("only ncclGroupEnd") {
    fake::FailCall("ncclGroupEnd", ncclRemoteError);
    const absl::Status status =
        comm->Allgatherv(send.data(), recv.data(), Sizes{0, 0, 3, 0}, kStream);
    CHECK(absl::IsUnavailable(status));
    CHECK(status.message() == who + "ncclGroupEnd failed: " + fake::ErrorString(ncclRemoteError) +
                                  " (peer 2 closed the socket)");
    CHECK(fake::Calls() ==
          Lines{
              "ncclGroupStart dev=3",
              "ncclBroadcast send=send+0 recv=recv+0 count=3 type=ncclUint8 root=2" + Tail(3),
              "ncclGroupEnd dev=3",
          });
  }
  SECTION("ncclGroupStart: nothing issued, no ncclGroupEnd") {
    fake::FailCall("ncclGroupStart", ncclInvalidUsage);
    const absl::Status status =
        comm->Allgatherv(send.data(), recv.data(), Sizes{1, 2, 3, 4}, kStream);
    CHECK(absl::IsInvalidArgument(status));
    CHECK(status.message() == who +
                                  "ncclGroupStart failed: " + fake::ErrorString(ncclInvalidUsage) +
                                  " (peer 2 closed the socket)");
    CHECK(fake::Calls() == Lines{"ncclGroupStart dev=3"});
  }
  // The failure was reported against the communicator, which stays usable.
  fake::ClearCalls();
  CHECK(comm->Broadcast(recv.data(), 1, 0, kStream).ok());
  CHECK(fake::Calls().size() == 1);
}

TEST_CASE("NCCL errors map onto Status codes and name the call and NCCL's strings", "[nccl_fake]") {
  const auto [result, code] = GENERATE(table<ncclResult_t, absl::StatusCode>({
      {ncclUnhandledCudaError, absl::StatusCode::kInternal},
      {ncclSystemError, absl::StatusCode::kUnavailable},
      {ncclInternalError, absl::StatusCode::kUnavailable},
      {ncclInvalidArgument, absl::StatusCode::kInvalidArgument},
      {ncclInvalidUsage, absl::StatusCode::kInvalidArgument},
      {ncclRemoteError, absl::StatusCode::kUnavailable},
      {ncclInProgress, absl::StatusCode::kInternal},
  }));
  const auto [last, suffix] = GENERATE(table<const char*, std::string>({
      {"peer 3 hung up", " (peer 3 hung up)"},
      {"", ""},
      {nullptr, ""},
  }));
  CAPTURE(result, suffix);
  auto comm = Join(3, 1, 3);
  fake::SetLastError(last);
  fake::FailCall("ncclAllReduce", result);
  Buffer send("send", 12);
  Buffer recv("recv", 12);
  const absl::Status status =
      comm->Allreduce(send.data(), recv.data(), 3, DataType::kFloat32, ReduceOp::kMin, kStream);
  CHECK(status.code() == code);
  CHECK(status.message() ==
        "NCCL rank 1 of 3 on GPU 3: ncclAllReduce failed: " + fake::ErrorString(result) + suffix);
  CHECK(fake::LastErrorQueries() == Lines{"1"});
}

TEST_CASE("A collective whose device cannot be made current fails before NCCL", "[nccl_fake]") {
  // From device 1 the failed switch is the only cudaSetDevice; from 0, restoring 0 fails too.
  const int caller = GENERATE(0, 1);
  CAPTURE(caller);
  auto comm = Join(2, 0, 1);
  Buffer buffer("buffer", 8);
  REQUIRE(cudaSetDevice(caller) == cudaSuccess);
  fake::FailCudaSetDevice(cudaErrorInvalidDevice);
  const absl::Status status = comm->Broadcast(buffer.data(), 8, 0, kStream);
  CHECK(absl::IsFailedPrecondition(status));
  CHECK(status.message() == "NCCL rank 0 of 2 on GPU 1: cudaSetDevice failed: " +
                                fake::CudaErrorString(cudaErrorInvalidDevice));
  CHECK(fake::Calls().empty());
  CHECK(fake::PendingCudaError() == cudaSuccess);
  fake::FailCudaSetDevice(cudaSuccess);
  CHECK(comm->Broadcast(buffer.data(), 8, 0, kStream).ok());
  CHECK(fake::Calls().size() == 1);
}

TEST_CASE("A collective still runs when the current device cannot be read", "[nccl_fake]") {
  auto comm = Join(2, 0, 1);
  Buffer buffer("buffer", 8);
  fake::FailCudaGetDevice(cudaErrorNoDevice);
  REQUIRE(comm->Broadcast(buffer.data(), 8, 0, kStream).ok());
  CHECK(fake::Calls() ==
        Lines{"ncclBroadcast send=buffer+0 recv=buffer+0 count=8 type=ncclUint8 root=0" + Tail(1)});
  // Nothing to restore: device 1 stays current; the read's error was consumed.
  CHECK(fake::CudaCalls() == Lines{"cudaGetDevice", "cudaGetLastError", "cudaSetDevice(1)"});
  CHECK(fake::PendingCudaError() == cudaSuccess);
}

TEST_CASE("AsyncError reports ncclCommGetAsyncError", "[nccl_fake]") {
  const auto [async, ok] = GENERATE(table<ncclResult_t, bool>({
      {ncclSuccess, true},
      {ncclInProgress, true},
      {ncclRemoteError, false},
      {ncclSystemError, false},
      {ncclInvalidUsage, false},
      {ncclUnhandledCudaError, false},
  }));
  CAPTURE(async);
  auto comm = Join(2, 1, 0);
  fake::SetAsyncError(async);
  const absl::Status status = comm->AsyncError();
  if (ok) {
    CHECK(status.ok());
  } else {
    CHECK(absl::IsUnavailable(status));
    CHECK(status.message() == "NCCL rank 1 of 2 on GPU 0: an asynchronous NCCL operation failed: " +
                                  fake::ErrorString(async) + " (peer 2 closed the socket)");
  }
  CHECK(fake::Calls() == Lines{"ncclCommGetAsyncError comm=1 dev=0"});
}

TEST_CASE("AsyncError fails when ncclCommGetAsyncError does", "[nccl_fake]") {
  auto comm = Join(2, 1, 0);
  fake::FailCall("ncclCommGetAsyncError", ncclInvalidArgument);
  const absl::Status status = comm->AsyncError();
  CHECK(absl::IsUnavailable(status));
  CHECK(status.message() == "NCCL rank 1 of 2 on GPU 0: ncclCommGetAsyncError failed: " +
                                fake::ErrorString(ncclInvalidArgument) +
                                " (peer 2 closed the socket)");
}

TEST_CASE("Abort aborts once on its device; afterwards nothing reaches NCCL", "[nccl_fake]") {
  auto comm = Join(2, 0, 4);
  comm->Abort();
  CHECK(fake::Calls() == Lines{"ncclCommAbort comm=1 dev=4"});
  CHECK(fake::CurrentDevice() == 0);
  comm->Abort();
  std::thread other([&] { comm->Abort(); });
  other.join();
  CHECK(fake::Calls() == Lines{"ncclCommAbort comm=1 dev=4"});

  fake::ClearCalls();
  Buffer send("send", 16);
  Buffer recv("recv", 16);
  const Sizes two = {2, 2};
  const Sizes offsets = {0, 2};
  const std::vector<absl::Status> statuses = {
      comm->Allreduce(send.data(), recv.data(), 4, DataType::kFloat32, ReduceOp::kSum, kStream),
      comm->Allgatherv(send.data(), recv.data(), two, kStream),
      comm->Broadcast(recv.data(), 4, 1, kStream),
      comm->Alltoallv(send.data(), two, offsets, recv.data(), two, offsets, kStream),
      comm->ReduceScatter(send.data(), recv.data(), two, DataType::kInt32, ReduceOp::kMax, kStream),
      comm->AsyncError(),
  };
  for (const absl::Status& status : statuses) {
    CHECK(absl::IsUnavailable(status));
    CHECK(status.message() == "NCCL rank 0 of 2 on GPU 4: the communicator was aborted");
  }
  comm.reset();  // no ncclCommDestroy of an aborted communicator
  CHECK(fake::Calls().empty());
  CHECK(fake::CudaCalls().empty());
}

TEST_CASE("Abort from another thread makes the communicator's device current there",
          "[nccl_fake]") {
  auto comm = Join(2, 1, 6);
  int device_after = -1;
  std::thread other([&] {
    comm->Abort();
    device_after = fake::CurrentDevice();
  });
  other.join();
  CHECK(fake::Calls() == Lines{"ncclCommAbort comm=1 dev=6"});
  CHECK(device_after == 0);  // that thread's device back
}

// Note [Abort versus enqueue] (docs/nccl_communicator.md), made deterministic: the enqueue
// blocks inside ncclAllReduce until the test releases it.
TEST_CASE("Abort waits for an enqueue in progress; AsyncError does not", "[nccl_fake]") {
  auto comm = Join(2, 0, 1);
  Buffer send("send", 16);
  Buffer recv("recv", 16);
  std::atomic<bool> inside{false};
  std::atomic<bool> release{false};
  fake::SetHook("ncclAllReduce", [&] {
    inside.store(true);
    while (!release.load()) std::this_thread::yield();
  });
  absl::Status enqueued = absl::UnknownError("not run");
  std::thread enqueuer([&] {
    enqueued =
        comm->Allreduce(send.data(), recv.data(), 4, DataType::kFloat32, ReduceOp::kSum, kStream);
  });
  while (!inside.load()) std::this_thread::yield();
  CHECK(comm->AsyncError().ok());  // answers while the enqueue holds the communicator

  std::thread aborter([&] { comm->Abort(); });
  // Abort marks the communicator before it waits for the enqueue, so AsyncError turns
  // Unavailable while the enqueue is still inside NCCL...
  absl::Status async;
  do {
    async = comm->AsyncError();
    if (async.ok()) std::this_thread::yield();
  } while (async.ok());
  CHECK(absl::IsUnavailable(async));
  // ... but ncclCommAbort has not run: the enqueue still uses the communicator.
  const Lines before = fake::Calls();
  CHECK(std::count_if(before.begin(), before.end(), [](const std::string& call) {
          return call.rfind("ncclCommAbort", 0) == 0;
        }) == 0);

  release.store(true);
  enqueuer.join();
  aborter.join();
  CHECK(enqueued.ok());
  const Lines calls = fake::Calls();
  REQUIRE(calls.size() >= 3);
  CHECK(calls.front() ==
        "ncclAllReduce send=send+0 recv=recv+0 count=4 type=ncclFloat32 op=ncclSum" + Tail(1));
  // Not "(while ... in flight)": the abort came after the enqueue returned.
  CHECK(calls.back() == "ncclCommAbort comm=1 dev=1");
  // In between only the AsyncError polls, from this thread.
  CHECK(std::count(calls.begin() + 1, calls.end() - 1, "ncclCommGetAsyncError comm=1 dev=0") ==
        static_cast<std::ptrdiff_t>(calls.size() - 2));
}

}  // namespace
}  // namespace chorus::ops::gpu
