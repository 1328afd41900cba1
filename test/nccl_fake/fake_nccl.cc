// The recording NCCL and CUDA runtime fakes of test/nccl_fake/fake_nccl.h.
#include "test/nccl_fake/fake_nccl.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

// Opaque in nccl.h; the fake's communicators.
struct ncclComm {
  int number;
  int nranks;
  int rank;
  bool dead;
  int in_flight;  // calls on it not yet returned (guarded by State::mu)
};

namespace chorus::test::fake_nccl {
namespace {

struct FailRule {
  std::string name;
  ncclResult_t result;
  int skip;  // matching calls to let through before the failing one
  bool every;
};

struct Buffer {
  std::string name;
  uintptr_t base;
  size_t bytes;
};

struct State {
  std::mutex mu;
  std::vector<std::string> calls;
  std::vector<std::string> cuda_calls;
  std::vector<std::string> last_error_queries;
  std::vector<FailRule> rules;
  std::map<std::string, std::function<void()>> hooks;
  std::vector<Buffer> buffers;
  std::deque<ncclComm> comms;  // stable addresses
  bool init_failure_allocates = false;
  ncclResult_t async = ncclSuccess;
  const char* last_error = "peer 2 closed the socket";
  cudaError_t set_device_error = cudaSuccess;
  cudaError_t get_device_error = cudaSuccess;
  std::string generated_id;
  std::string init_id;
  int id_seed = 0;
};

State& S() {
  static State* state = new State;  // never destroyed: calls may come from exiting threads
  return *state;
}

thread_local int current_device = 0;
thread_local cudaError_t pending_cuda_error = cudaSuccess;

std::string Pointer(const State& s, const void* p, size_t extent) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const Buffer& b : s.buffers) {
    if (a >= b.base && a - b.base <= b.bytes) {
      const size_t offset = a - b.base;
      return absl::StrCat(b.name, "+", offset, extent > b.bytes - offset ? "(overflow)" : "");
    }
  }
  return absl::StrCat("0x", absl::Hex(a));
}

std::string Comm(ncclComm_t comm) {
  if (comm == nullptr) return "null";
  return absl::StrCat(comm->number, comm->dead ? "(dead)" : "");
}

size_t Ranks(ncclComm_t comm) { return comm == nullptr ? 1 : static_cast<size_t>(comm->nranks); }

// `extent` when the calling rank is `root` (the only rank whose rooted buffer NCCL uses), else 0.
size_t OnRoot(ncclComm_t comm, int root, size_t extent) {
  return comm != nullptr && comm->rank == root ? extent : 0;
}

std::string Stream(cudaStream_t stream) {
  return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(stream)));
}

const char* TypeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return "ncclInt8";
    case ncclUint8:
      return "ncclUint8";
    case ncclInt32:
      return "ncclInt32";
    case ncclUint32:
      return "ncclUint32";
    case ncclInt64:
      return "ncclInt64";
    case ncclUint64:
      return "ncclUint64";
    case ncclFloat16:
      return "ncclFloat16";
    case ncclFloat32:
      return "ncclFloat32";
    case ncclFloat64:
      return "ncclFloat64";
    case ncclBfloat16:
      return "ncclBfloat16";
    default:
      return "ncclType?";
  }
}

size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 1;
  }
}

const char* OpName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return "ncclSum";
    case ncclProd:
      return "ncclProd";
    case ncclMax:
      return "ncclMax";
    case ncclMin:
      return "ncclMin";
    case ncclAvg:
      return "ncclAvg";
    default:
      return "ncclOp?";
  }
}

// Records `name`'s call on `comm` (may be null; `args` built under the lock from the state) and
// returns its result; then runs `name`'s hook, if any. The call is in flight on `comm` until
// the hook returns; an ncclCommAbort or ncclCommDestroy issued while another call on the same
// communicator is in flight says so in its line.
template <typename Args>
ncclResult_t Record(const std::string& name, ncclComm_t comm, Args&& args) {
  std::function<void()> hook;
  ncclResult_t result = ncclSuccess;
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    std::string line = absl::StrCat(name, args(s), " dev=", current_device);
    if (comm != nullptr && comm->in_flight > 0 &&
        (name == "ncclCommAbort" || name == "ncclCommDestroy")) {
      absl::StrAppend(&line, " (while ", comm->in_flight, " other call(s) are in flight)");
    }
    s.calls.push_back(std::move(line));
    if (comm != nullptr) ++comm->in_flight;
    for (auto it = s.rules.begin(); it != s.rules.end(); ++it) {
      if (it->name != name) continue;
      if (it->skip > 0) {
        --it->skip;
        continue;
      }
      result = it->result;
      if (!it->every) s.rules.erase(it);
      break;
    }
    if (auto h = s.hooks.find(name); h != s.hooks.end()) hook = h->second;
  }
  if (hook) hook();
  if (comm != nullptr) {
    std::lock_guard<std::mutex> lock(s.mu);
    --comm->in_flight;
  }
  return result;
}

void RecordCuda(std::string call) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.cuda_calls.push_back(std::move(call));
}

std::string Common(ncclComm_t comm, cudaStream_t stream) {
  return absl::StrCat(" comm=", Comm(comm), " stream=", Stream(stream));
}

}  // namespace

void Reset() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.calls.clear();
  s.cuda_calls.clear();
  s.last_error_queries.clear();
  s.rules.clear();
  s.hooks.clear();
  s.buffers.clear();
  s.comms.clear();
  s.init_failure_allocates = false;
  s.async = ncclSuccess;
  s.last_error = "peer 2 closed the socket";
  s.set_device_error = cudaSuccess;
  s.get_device_error = cudaSuccess;
  s.generated_id.clear();
  s.init_id.clear();
  current_device = 0;
  pending_cuda_error = cudaSuccess;
}

std::vector<std::string> Calls() {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().calls;
}

std::vector<std::string> CudaCalls() {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().cuda_calls;
}

std::vector<std::string> LastErrorQueries() {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().last_error_queries;
}

void ClearCalls() {
  std::lock_guard<std::mutex> lock(S().mu);
  S().calls.clear();
  S().cuda_calls.clear();
  S().last_error_queries.clear();
}

void FailCall(const std::string& name, ncclResult_t result, int occurrence, bool every) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().rules.push_back(FailRule{name, result, occurrence - 1, every});
}

void SetInitFailureAllocatesComm(bool allocates) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().init_failure_allocates = allocates;
}

void SetAsyncError(ncclResult_t result) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().async = result;
}

void SetLastError(const char* text) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().last_error = text;
}

void SetHook(const std::string& name, std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (hook) {
    S().hooks[name] = std::move(hook);
  } else {
    S().hooks.erase(name);
  }
}

void FailCudaSetDevice(cudaError_t error) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().set_device_error = error;
}

void FailCudaGetDevice(cudaError_t error) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().get_device_error = error;
}

cudaError_t PendingCudaError() { return pending_cuda_error; }

int CurrentDevice() { return current_device; }

void RegisterBuffer(const std::string& name, const void* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().buffers.push_back(Buffer{name, reinterpret_cast<uintptr_t>(base), bytes});
}

std::string LastGeneratedId() {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().generated_id;
}

std::string LastInitId() {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().init_id;
}

std::string ErrorString(ncclResult_t result) { return absl::StrCat("fake error string #", result); }

std::string CudaErrorString(cudaError_t error) {
  return absl::StrCat("fake CUDA error string #", static_cast<int>(error));
}

}  // namespace chorus::test::fake_nccl

namespace fake = chorus::test::fake_nccl;

extern "C" {

// --- CUDA runtime ---

cudaError_t cudaSetDevice(int device) {
  fake::RecordCuda(absl::StrCat("cudaSetDevice(", device, ")"));
  cudaError_t error;
  {
    std::lock_guard<std::mutex> lock(fake::S().mu);
    error = fake::S().set_device_error;
  }
  if (error != cudaSuccess) {
    fake::pending_cuda_error = error;
    return error;
  }
  fake::current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  fake::RecordCuda("cudaGetDevice");
  cudaError_t error;
  {
    std::lock_guard<std::mutex> lock(fake::S().mu);
    error = fake::S().get_device_error;
  }
  if (error != cudaSuccess) {
    fake::pending_cuda_error = error;
    return error;
  }
  *device = fake::current_device;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  fake::RecordCuda("cudaGetLastError");
  const cudaError_t error = fake::pending_cuda_error;
  fake::pending_cuda_error = cudaSuccess;
  return error;
}

const char* cudaGetErrorString(cudaError_t error) {
  // Stable storage per error code.
  static std::mutex mu;
  static std::map<int, std::string>* strings = new std::map<int, std::string>;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, inserted] = strings->try_emplace(static_cast<int>(error), fake::CudaErrorString(error));
  return it->second.c_str();
}

// --- NCCL: errors ---

const char* ncclGetErrorString(ncclResult_t result) {
  static std::mutex mu;
  static std::map<int, std::string>* strings = new std::map<int, std::string>;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, inserted] = strings->try_emplace(static_cast<int>(result), fake::ErrorString(result));
  return it->second.c_str();
}

const char* ncclGetLastError(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(fake::S().mu);
  fake::S().last_error_queries.push_back(fake::Comm(comm));
  return fake::S().last_error;
}

// --- NCCL: communicators ---

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::string bytes(NCCL_UNIQUE_ID_BYTES, '\0');
  {
    std::lock_guard<std::mutex> lock(fake::S().mu);
    const int seed = ++fake::S().id_seed;
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + seed);
    fake::S().generated_id = bytes;
  }
  std::memcpy(id->internal, bytes.data(), bytes.size());
  return fake::Record("ncclGetUniqueId", nullptr, [](fake::State&) { return std::string(); });
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  ncclComm* made = nullptr;
  const ncclResult_t result = fake::Record("ncclCommInitRank", nullptr, [&](fake::State& s) {
    s.init_id.assign(commId.internal, NCCL_UNIQUE_ID_BYTES);
    return absl::StrCat(" nranks=", nranks, " rank=", rank);
  });
  {
    std::lock_guard<std::mutex> lock(fake::S().mu);
    if (result == ncclSuccess || fake::S().init_failure_allocates) {
      fake::S().comms.push_back(
          ncclComm{static_cast<int>(fake::S().comms.size()) + 1, nranks, rank, false, 0});
      made = &fake::S().comms.back();
    }
  }
  if (made != nullptr) *comm = made;
  return result;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return fake::Record("ncclCommDestroy", comm, [&](fake::State&) {
    std::string args = absl::StrCat(" comm=", fake::Comm(comm));
    if (comm != nullptr) comm->dead = true;
    return args;
  });
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return fake::Record("ncclCommAbort", comm, [&](fake::State&) {
    std::string args = absl::StrCat(" comm=", fake::Comm(comm));
    if (comm != nullptr) comm->dead = true;
    return args;
  });
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return fake::Record("ncclCommGetAsyncError", comm, [&](fake::State& s) {
    *asyncError = s.async;
    return absl::StrCat(" comm=", fake::Comm(comm));
  });
}

// --- NCCL: groups and collectives ---

ncclResult_t ncclGroupStart() {
  return fake::Record("ncclGroupStart", nullptr, [](fake::State&) { return std::string(); });
}

ncclResult_t ncclGroupEnd() {
  return fake::Record("ncclGroupEnd", nullptr, [](fake::State&) { return std::string(); });
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return fake::Record("ncclAllReduce", comm, [&](fake::State& s) {
    const size_t extent = count * fake::TypeSize(datatype);
    return absl::StrCat(" send=", fake::Pointer(s, sendbuff, extent),
                        " recv=", fake::Pointer(s, recvbuff, extent), " count=", count,
                        " type=", fake::TypeName(datatype), " op=", fake::OpName(op),
                        fake::Common(comm, stream));
  });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return fake::Record("ncclAllGather", comm, [&](fake::State& s) {
    const size_t extent = sendcount * fake::TypeSize(datatype);
    return absl::StrCat(" send=", fake::Pointer(s, sendbuff, extent),
                        " recv=", fake::Pointer(s, recvbuff, extent * fake::Ranks(comm)),
                        " count=", sendcount, " type=", fake::TypeName(datatype),
                        fake::Common(comm, stream));
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return fake::Record("ncclBroadcast", comm, [&](fake::State& s) {
    const size_t extent = count * fake::TypeSize(datatype);
    return absl::StrCat(" send=", fake::Pointer(s, sendbuff, fake::OnRoot(comm, root, extent)),
                        " recv=", fake::Pointer(s, recvbuff, extent), " count=", count,
                        " type=", fake::TypeName(datatype), " root=", root,
                        fake::Common(comm, stream));
  });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return fake::Record("ncclReduce", comm, [&](fake::State& s) {
    const size_t extent = count * fake::TypeSize(datatype);
    return absl::StrCat(" send=", fake::Pointer(s, sendbuff, extent),
                        " recv=", fake::Pointer(s, recvbuff, fake::OnRoot(comm, root, extent)),
                        " count=", count, " type=", fake::TypeName(datatype),
                        " op=", fake::OpName(op), " root=", root, fake::Common(comm, stream));
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return fake::Record("ncclReduceScatter", comm, [&](fake::State& s) {
    const size_t extent = recvcount * fake::TypeSize(datatype);
    return absl::StrCat(" send=", fake::Pointer(s, sendbuff, extent * fake::Ranks(comm)),
                        " recv=", fake::Pointer(s, recvbuff, extent), " count=", recvcount,
                        " type=", fake::TypeName(datatype), " op=", fake::OpName(op),
                        fake::Common(comm, stream));
  });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return fake::Record("ncclSend", comm, [&](fake::State& s) {
    return absl::StrCat(" send=", fake::Pointer(s, sendbuff, count * fake::TypeSize(datatype)),
                        " count=", count, " type=", fake::TypeName(datatype), " peer=", peer,
                        fake::Common(comm, stream));
  });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return fake::Record("ncclRecv", comm, [&](fake::State& s) {
    return absl::StrCat(" recv=", fake::Pointer(s, recvbuff, count * fake::TypeSize(datatype)),
                        " count=", count, " type=", fake::TypeName(datatype), " peer=", peer,
                        fake::Common(comm, stream));
  });
}

}  // extern "C"
