// The C ABI over the process-wide C++ API. Every entry point catches everything: no exception
// crosses into C.
#include "chorus/c_api.h"

#include <algorithm>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "chorus/chorus.h"
#include "runtime/elastic/membership_watcher.h"

struct chorus_result {
  chorus::OpResult result;
  std::string message;
};

namespace {

thread_local std::string t_last_error;
thread_local std::string t_adopted_env;

int Report(const absl::Status& status) {
  if (status.ok()) return 0;
  t_last_error = std::string(status.message());
  return static_cast<int>(status.code());
}

template <typename F>
int Guard(F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Report(absl::InternalError(absl::StrCat("chorus internal error: ", e.what())));
  } catch (...) {
    return Report(absl::InternalError("chorus internal error: unknown exception"));
  }
}

void FillView(const chorus_tensor_t& t, chorus::TensorView& v) {
  v.data = t.data;
  v.dtype = static_cast<chorus::DataType>(t.dtype);
  v.shape.clear();
  if (t.shape != nullptr && t.ndim > 0) v.shape.assign(t.shape, t.shape + t.ndim);
  v.device = t.device;
}

// Sets every field of `r` from `op`, assigning into r's strings and vectors (so a reused `r`
// allocates only when a field outgrows its buffer).
void FillRequest(const chorus_op_t& op, chorus::OpRequest& r) {
  r.type = static_cast<chorus::OpType>(op.type);
  r.name.clear();
  if (op.name != nullptr) r.name.assign(op.name);
  FillView(op.input, r.input);
  FillView(op.output, r.output);
  r.reduce_op = static_cast<chorus::ReduceOp>(op.reduce_op);
  r.prescale_factor = op.prescale_factor;
  r.postscale_factor = op.postscale_factor;
  r.root_rank = op.root_rank;
  r.process_set_id = op.process_set_id;
  r.stream = op.stream;
  r.wire_dtype.reset();
  if (op.wire_dtype >= 0) r.wire_dtype = static_cast<chorus::DataType>(op.wire_dtype);
  r.splits.clear();
  if (op.splits != nullptr && op.num_splits > 0) {
    r.splits.assign(op.splits, op.splits + op.num_splits);
  }
  r.process_set_ranks.clear();
  if (op.process_set_ranks != nullptr && op.num_process_set_ranks > 0) {
    r.process_set_ranks.assign(op.process_set_ranks,
                               op.process_set_ranks + op.num_process_set_ranks);
  }
}

chorus::OpRequest ToRequest(const chorus_op_t& op) {
  chorus::OpRequest r;
  FillRequest(op, r);
  return r;
}

}  // namespace

extern "C" {

void chorus_op_init(chorus_op_t* op) {
  *op = chorus_op_t{};
  op->input.device = -1;
  op->output.device = -1;
  op->input.dtype = static_cast<int32_t>(chorus::DataType::kFloat32);
  op->output.dtype = op->input.dtype;
  op->prescale_factor = 1.0;
  op->postscale_factor = 1.0;
  op->wire_dtype = -1;
}

int chorus_init(const void* mpi_comm, int32_t num_process_sets, const int32_t* const* process_sets,
                const int32_t* set_sizes) {
  return Guard([&] {
    chorus::InitOptions options;
    options.mpi_comm = mpi_comm;
    for (int32_t i = 0; i < num_process_sets; ++i) {
      options.process_sets.emplace_back(process_sets[i], process_sets[i] + set_sizes[i]);
    }
    return Report(chorus::Init(options));
  });
}

int chorus_shutdown(void) {
  return Guard([] { return Report(chorus::Shutdown()); });
}

int chorus_shutdown_because(const char* cause) {
  return Guard([&] { return Report(chorus::Shutdown(cause != nullptr ? cause : "")); });
}

int chorus_suspend(void) {
  return Guard([] { return Report(chorus::Suspend()); });
}

int chorus_reform(void) {
  return Guard([] { return Report(chorus::Reform()); });
}

int chorus_is_initialized(void) {
  return Guard([] { return chorus::IsInitialized() ? 1 : 0; });
}

int chorus_cuda_built(void) {
  return Guard([] { return chorus::CudaBuilt() ? 1 : 0; });
}

int chorus_nccl_version(void) { return chorus::NcclBuildVersion(); }

const char* chorus_controller_name(void) {
  try {
    absl::StatusOr<std::string> name = chorus::ControllerName();
    if (!name.ok()) return "";
    if (*name == "MPI") return "MPI";
    if (*name == "UCX") return "UCX";
    return "other";
  } catch (...) {
    return "";
  }
}

const char* chorus_metrics_json(void) {
  thread_local std::string json;
  try {
    absl::StatusOr<std::string> metrics = chorus::MetricsJson();
    json = metrics.ok() ? *std::move(metrics) : std::string();
  } catch (...) {
    json.clear();
  }
  return json.c_str();
}

int chorus_start_timeline(const char* path, int mark_cycles) {
  return Guard(
      [&] { return Report(chorus::StartTimeline(path != nullptr ? path : "", mark_cycles != 0)); });
}

int chorus_stop_timeline(void) {
  return Guard([] { return Report(chorus::StopTimeline()); });
}

int chorus_topology(chorus_topology_t* out) {
  return Guard([&] {
    absl::StatusOr<chorus::Topology> t = chorus::GetTopology();
    if (!t.ok()) return Report(t.status());
    *out = chorus_topology_t{t->rank,
                             t->size,
                             t->local_rank,
                             t->local_size,
                             t->cross_rank,
                             t->cross_size,
                             t->is_homogeneous ? 1 : 0};
    return 0;
  });
}

int chorus_enqueue(const chorus_op_t* op, chorus_done_fn done, void* done_arg,
                   chorus_handle_t* out) {
  return Guard([&] {
    chorus::DoneCallback callback;
    if (done != nullptr) {
      callback = [done, done_arg](const chorus::OpResult& r) {
        done(done_arg, static_cast<int>(r.status.code()));
      };
    }
    // Each submitting thread refills one request: its buffers circulate with the runtime's
    // recycled entries, so a steady loop allocates nothing here.
    thread_local chorus::OpRequest request;
    FillRequest(*op, request);
    absl::StatusOr<chorus::Handle> h = chorus::EnqueueFrom(request, std::move(callback));
    if (!h.ok()) return Report(h.status());
    *out = *h;
    return 0;
  });
}

int chorus_register_op(const chorus_op_t* op, int32_t* slot) {
  return Guard([&] {
    absl::StatusOr<chorus::OpSlot> s = chorus::RegisterOp(ToRequest(*op));
    if (!s.ok()) return Report(s.status());
    *slot = *s;
    return 0;
  });
}

int chorus_submit(int32_t slot, void* input, void* output, void* stream, chorus_handle_t* out) {
  return Guard([&] {
    chorus::SubmitArgs args;
    args.input = input;
    args.output = output;
    args.stream = stream;
    absl::StatusOr<chorus::Handle> h = chorus::Submit(slot, args);
    if (!h.ok()) return Report(h.status());
    *out = *h;
    return 0;
  });
}

int chorus_unregister_op(int32_t slot) {
  return Guard([&] { return Report(chorus::UnregisterOp(slot)); });
}

int chorus_enqueue_group(const chorus_op_t* ops, int32_t n, chorus_handle_t* out) {
  return Guard([&] {
    std::vector<chorus::OpRequest> requests;
    for (int32_t i = 0; i < n; ++i) requests.push_back(ToRequest(ops[i]));
    absl::StatusOr<std::vector<chorus::Handle>> hs = chorus::EnqueueGroup(std::move(requests));
    if (!hs.ok()) return Report(hs.status());
    for (size_t i = 0; i < hs->size(); ++i) out[i] = (*hs)[i];
    return 0;
  });
}

int chorus_poll(chorus_handle_t handle, int* done) {
  return Guard([&] {
    absl::StatusOr<bool> d = chorus::Poll(handle);
    if (!d.ok()) return Report(d.status());
    *done = *d ? 1 : 0;
    return 0;
  });
}

int chorus_wait(chorus_handle_t handle) {
  return Guard([&] { return Report(chorus::Wait(handle)); });
}

int chorus_release(chorus_handle_t handle, chorus_result_t** out) {
  return Guard([&] {
    *out = nullptr;
    absl::StatusOr<chorus::OpResult> r = chorus::Release(handle);
    if (!r.ok()) return Report(r.status());
    auto* result = new chorus_result{*std::move(r), ""};
    result->message = std::string(result->result.status.message());
    *out = result;
    return Report(result->result.status);
  });
}

int chorus_release_status(chorus_handle_t handle, int block, int* released) {
  return Guard([&] {
    *released = 0;
    absl::StatusOr<std::optional<chorus::OpResult>> r =
        block != 0 ? absl::StatusOr<std::optional<chorus::OpResult>>(chorus::Release(handle))
                   : chorus::TryRelease(handle);
    if (!r.ok()) return Report(r.status());
    if (!r->has_value()) return 0;
    *released = 1;
    return Report((*r)->status);
  });
}

void chorus_result_free(chorus_result_t* result) { delete result; }

int chorus_result_status(const chorus_result_t* result, const char** message) {
  if (message != nullptr) *message = result->message.c_str();
  return static_cast<int>(result->result.status.code());
}

void chorus_result_output(const chorus_result_t* result, void** data, int64_t* num_bytes,
                          int32_t* ndim, const int64_t** shape) {
  const chorus::OpResult& r = result->result;
  *data = r.output != nullptr ? r.output->data() : nullptr;
  *num_bytes = r.output != nullptr ? static_cast<int64_t>(r.output->size()) : 0;
  *ndim = static_cast<int32_t>(r.output_shape.size());
  *shape = r.output_shape.data();
}

int32_t chorus_result_output_device(const chorus_result_t* result) {
  const chorus::OpResult& r = result->result;
  return r.output != nullptr ? r.output->device() : chorus::kCpuDevice;
}

void chorus_result_received_splits(const chorus_result_t* result, const int64_t** splits,
                                   int32_t* count) {
  *splits = result->result.received_splits.data();
  *count = static_cast<int32_t>(result->result.received_splits.size());
}

int32_t chorus_result_last_joined_rank(const chorus_result_t* result) {
  return result->result.last_joined_rank;
}

int32_t chorus_result_process_set_id(const chorus_result_t* result) {
  return result->result.process_set_id;
}

const char* chorus_last_error(void) { return t_last_error.c_str(); }

}  // extern "C"

int chorus_elastic_worker(void) {
  return Guard([] {
    const chorus::runtime::MembershipWatcher* watcher =
        chorus::runtime::MembershipWatcher::Current();
    return watcher != nullptr && watcher->elastic() ? 1 : 0;
  });
}

int chorus_elastic_take_host_updates(int64_t* timestamp_us, int32_t* result) {
  return Guard([&] {
    *timestamp_us = 0;
    *result = 0;
    chorus::runtime::MembershipWatcher* watcher = chorus::runtime::MembershipWatcher::Current();
    if (watcher == nullptr) return 0;
    for (const auto& update : watcher->TakeHostUpdates()) {
      *timestamp_us = std::max(*timestamp_us, update.timestamp_us);
      *result |= (update.removed ? 1 : 0) | (update.added ? 2 : 0);
    }
    return 0;
  });
}

int chorus_elastic_adopt_next(int64_t timeout_ms, int64_t* generation) {
  return Guard([&] {
    chorus::runtime::MembershipWatcher* watcher = chorus::runtime::MembershipWatcher::Current();
    if (watcher == nullptr || !watcher->elastic()) {
      return Report(absl::FailedPreconditionError(
          "not an elastic worker: no chorus init ran with CHORUS_ELASTIC_WORKER_ID and "
          "CHORUS_ELASTIC=1 set"));
    }
    const int64_t after = watcher->adopted();
    absl::StatusOr<std::map<std::string, std::string>> env =
        watcher->Adopt(after, absl::Milliseconds(timeout_ms));
    if (!env.ok()) return Report(env.status());
    *generation = watcher->adopted();
    return 0;
  });
}

const char* chorus_elastic_adopted_env(void) {
  t_adopted_env.clear();
  chorus::runtime::MembershipWatcher* watcher = chorus::runtime::MembershipWatcher::Current();
  if (watcher == nullptr) return "";
  for (const auto& [name, value] : watcher->adopted_variables()) {
    absl::StrAppend(&t_adopted_env, name, "=", value, "\n");
  }
  return t_adopted_env.c_str();
}
