// File: test/nccl_fake/fake_nccl.h
//
// Recording fakes of the NCCL and CUDA runtime symbols ops/nccl/nccl_communicator.cc calls, so
// its mapping onto NCCL is tested without a GPU and with any number of "peers"
// (docs/nccl_communicator.md). A binary links fake_nccl.cc INSTEAD of libnccl and libcudart;
// the real headers are still the ones compiled against.
//
// Thread-safety: every function may be called from any thread; the state is one process-wide
// instance behind a mutex. Hooks run outside that mutex.
#ifndef CHORUS_TEST_NCCL_FAKE_FAKE_NCCL_H_
#define CHORUS_TEST_NCCL_FAKE_FAKE_NCCL_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace chorus::test::fake_nccl {

// Forgets every call, failure, hook, buffer and communicator; the calling thread's current
// device becomes 0, the last-error text "peer 2 closed the socket", the async error ncclSuccess.
// Communicators handed out before must not be used afterwards.
void Reset();

// The recorded NCCL calls, oldest first; ClearCalls forgets them (and the CUDA calls and
// error-string queries) but nothing else. Every NCCL call except ncclGetErrorString and
// ncclGetLastError is one line, the arguments by name:
//   "ncclAllReduce send=0x100 recv=0x200 count=5 type=ncclBfloat16 op=ncclMax comm=1 stream=0x9
//    dev=3"
// (one line, no break). `comm` is the number of the communicator ncclCommInitRank handed out
// (1, 2, ... since Reset; "comm=1(dead)" once it was destroyed or aborted), `dev` the calling
// thread's current device (cudaSetDevice is per thread, as in CUDA). A pointer inside a buffer
// registered with RegisterBuffer prints as "name+offset" ("name+offset(overflow)" when the
// call's extent runs past the buffer's end: count elements, times the communicator's size for
// ncclAllGather's recv and ncclReduceScatter's send, and none for the rooted buffer of
// ncclBroadcast / ncclReduce on a rank other than the root, which NCCL does not touch), any
// other as hex. An ncclCommAbort or ncclCommDestroy issued while another call on the same
// communicator has not returned yet (e.g. one blocked in a hook) ends in "(while 1 other
// call(s) are in flight)". CUDA calls go to CudaCalls(), NCCL error-string queries to
// LastErrorQueries().
std::vector<std::string> Calls();
std::vector<std::string> CudaCalls();
// The `comm` of every ncclGetLastError call, as Calls() prints it ("null" for nullptr).
std::vector<std::string> LastErrorQueries();
void ClearCalls();

// The `occurrence`-th call (1 = the next) to NCCL function `name` (e.g. "ncclBroadcast")
// returns `result` (the call is still recorded). With every = true, that call and all later
// ones to `name` fail.
void FailCall(const std::string& name, ncclResult_t result, int occurrence = 1, bool every = false);
// A failing ncclCommInitRank hands out a communicator (as NCCL does when initialisation fails
// late) only when this is set; default false (it leaves *comm alone).
void SetInitFailureAllocatesComm(bool allocates);
// What ncclCommGetAsyncError reports in *asyncError.
void SetAsyncError(ncclResult_t result);
// What ncclGetLastError returns; nullptr is allowed.
void SetLastError(const char* text);
// Runs `hook` at the start of every call to NCCL function `name`, on the calling thread,
// after recording the call. An empty function removes it.
void SetHook(const std::string& name, std::function<void()> hook);

// cudaSetDevice (and cudaGetDevice) fail with `error` from now on; cudaSuccess makes them work.
// A failure sets the sticky error cudaGetLastError returns and clears.
void FailCudaSetDevice(cudaError_t error);
void FailCudaGetDevice(cudaError_t error);
// The error cudaGetLastError would return now (cudaSuccess once every failure was consumed).
cudaError_t PendingCudaError();
// The calling thread's current device.
int CurrentDevice();

// Pointers into [base, base + bytes) print as "name+offset". Registration ends at Reset.
void RegisterBuffer(const std::string& name, const void* base, size_t bytes);

// The id the last ncclGetUniqueId produced / the last ncclCommInitRank received, as raw bytes.
std::string LastGeneratedId();
std::string LastInitId();

// The strings the fakes return, for building expected messages.
std::string ErrorString(ncclResult_t result);    // ncclGetErrorString
std::string CudaErrorString(cudaError_t error);  // cudaGetErrorString

}  // namespace chorus::test::fake_nccl

#endif  // CHORUS_TEST_NCCL_FAKE_FAKE_NCCL_H_
