/* File: chorus/c_api.h
 *
 * The C ABI of libchorus.so: the only exported symbols. Bindings (Python, ...) use this.
 *
 * Conventions:
 * - Every function returns an int status code: 0 on success, else an absl::StatusCode value
 *   (3 invalid argument, 5 not found, 6 already exists, 9 failed precondition, 10 aborted,
 *   4 deadline exceeded, 12 unimplemented, 13 internal, 14 unavailable; the CHORUS_CODE_*
 *   names below). After a non-zero return, chorus_last_error() gives this thread's message
 *   for it.
 * - Pointers passed in are borrowed for the call only, except tensor data, which must stay
 *   valid until the op completes.
 * - Thread-safe: every function may be called from any thread. chorus_wait and chorus_release
 *   block the calling thread only. Callbacks run on chorus's background thread and must not
 *   block or call chorus_wait.
 * - No C++ exception ever crosses this boundary.
 */
#ifndef CHORUS_C_API_H_
#define CHORUS_C_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CHORUS_EXPORT __attribute__((visibility("default")))

/* Status codes that callers branch on. */
#define CHORUS_CODE_INVALID_ARGUMENT 3
#define CHORUS_CODE_NOT_FOUND 5
#define CHORUS_CODE_ALREADY_EXISTS 6
#define CHORUS_CODE_FAILED_PRECONDITION 9

typedef int64_t chorus_handle_t;

/* A borrowed, contiguous, row-major tensor. dtype: chorus::DataType values; device -1 = host. */
typedef struct {
  void* data;
  int32_t dtype;
  int32_t ndim;
  const int64_t* shape; /* ndim entries */
  int32_t device;
} chorus_tensor_t;

/* One op; see chorus::OpRequest in chorus/chorus.h for the meaning of each field.
 * type: chorus::OpType values; reduce_op: chorus::ReduceOp values. */
typedef struct {
  int32_t type;
  const char* name; /* may be NULL or "" for barrier, join and process-set ops */
  chorus_tensor_t input;
  chorus_tensor_t output; /* allreduce; output.data NULL = in place */
  int32_t reduce_op;
  double prescale_factor;
  double postscale_factor;
  int32_t root_rank; /* broadcast: a world rank belonging to the process set */
  int32_t process_set_id;
  const int64_t* splits;
  int32_t num_splits;
  const int32_t* process_set_ranks;
  int32_t num_process_set_ranks;
  void* stream; /* GPU tensors: the producing cudaStream_t (NULL: the legacy default stream) */
  int32_t wire_dtype; /* allreduce of float32 GPU tensors: float16/bfloat16 reduction; -1: none */
} chorus_op_t;

/* Fills an op with the defaults of chorus::OpRequest (sum, factors 1, set 0, ...). */
CHORUS_EXPORT void chorus_op_init(chorus_op_t* op);

typedef struct {
  int32_t rank, size, local_rank, local_size, cross_rank, cross_size, is_homogeneous;
} chorus_topology_t;

/* Runs when an op completes, on the background thread, with its status code. */
typedef void (*chorus_done_fn)(void* arg, int code);

/* mpi_comm: an MPI_Comm* or NULL for MPI_COMM_WORLD. process_sets: num_process_sets lists of
 * world ranks (set i has set_sizes[i] ranks), created with ids 1, 2, ... Collective. */
CHORUS_EXPORT int chorus_init(const void* mpi_comm, int32_t num_process_sets,
                              const int32_t* const* process_sets, const int32_t* set_sizes);
CHORUS_EXPORT int chorus_shutdown(void);
/* chorus_shutdown, telling the other ranks why this process stops (`cause`: UTF-8 text, e.g.
 * the uncaught exception; NULL or "" for none): their ops that fail because of this shutdown
 * say it, with this rank and its host. */
CHORUS_EXPORT int chorus_shutdown_because(const char* cause);
/* chorus::Suspend and chorus::Reform (chorus.h, Note [Re-forming in place]): an elastic reset
 * keeps the runtime. Suspend stops the background loop (collective over the current world; new
 * ops fail until Reform); Reform forms the world the environment describes now (an elastic
 * worker: after chorus_elastic_adopt_next) and starts a new loop on it (collective over the new
 * world, whose new processes call chorus_init). A failed Reform shuts chorus down. */
CHORUS_EXPORT int chorus_suspend(void);
CHORUS_EXPORT int chorus_reform(void);
CHORUS_EXPORT int chorus_is_initialized(void);
CHORUS_EXPORT int chorus_topology(chorus_topology_t* out);

/* 1 when this build has the GPU data plane (CUDA and NCCL were found at configure time), else 0.
 * Says nothing about devices being present. */
CHORUS_EXPORT int chorus_cuda_built(void);

/* NCCL_VERSION_CODE of the NCCL headers this build was compiled with (e.g. 22809 for 2.28.9),
 * 0 without the GPU data plane: what horovod.torch's nccl_built() returns. */
CHORUS_EXPORT int chorus_nccl_version(void);

/* The controller's name ("MPI", "UCX"); "" when chorus is not initialized. Static storage. */
CHORUS_EXPORT const char* chorus_controller_name(void);

/* This process's collectives so far, by op, as JSON (chorus::MetricsJson, docs/metrics.md); ""
 * when chorus is not initialized. Valid until this thread's next call of it. */
CHORUS_EXPORT const char* chorus_metrics_json(void);

/* Timelines (docs/timeline.md). start: records into path (per-rank rules apply) from the next
 * background cycle; needs CHORUS_TIMELINE (or HOROVOD_TIMELINE) set, to a path or DYNAMIC
 * (FAILED_PRECONDITION otherwise). stop: returns once the file is complete. Local, not
 * collective. */
CHORUS_EXPORT int chorus_start_timeline(const char* path, int mark_cycles);
CHORUS_EXPORT int chorus_stop_timeline(void);

/* Submits one op; *out receives its handle. done (optional) runs once on completion. */
CHORUS_EXPORT int chorus_enqueue(const chorus_op_t* op, chorus_done_fn done, void* done_arg,
                                 chorus_handle_t* out);
/* Submits n ops as one group; out receives n handles. */
CHORUS_EXPORT int chorus_enqueue_group(const chorus_op_t* ops, int32_t n, chorus_handle_t* out);

/* Registered ops (chorus.h: RegisterOp, Submit, UnregisterOp; Note [Registered ops] in
 * runtime/submit/op_slots.h): an allreduce submitted every step under the same name and parameters.
 * register: checks op as chorus_enqueue does and returns its slot in *slot (op's tensor
 * pointers stand for later submissions'; an output tensor, if set, says the op is not in
 * place). submit: submits the registered op on these tensors (output NULL: in place; must
 * match the registration), *out receives its handle, used as chorus_enqueue's (poll, wait,
 * release); ALREADY_EXISTS while the handle of the slot's last submission is not released,
 * INVALID_ARGUMENT while its op or an enqueue of its name is in flight. unregister:
 * FAILED_PRECONDITION while its op is in flight or its handle unreleased. */
CHORUS_EXPORT int chorus_register_op(const chorus_op_t* op, int32_t* slot);
CHORUS_EXPORT int chorus_submit(int32_t slot, void* input, void* output, void* stream,
                                chorus_handle_t* out);
CHORUS_EXPORT int chorus_unregister_op(int32_t slot);

/* *done = 1 once the op completed (successfully or not), else 0. */
CHORUS_EXPORT int chorus_poll(chorus_handle_t handle, int* done);
/* Blocks until the op completes; returns the op's own status code. */
CHORUS_EXPORT int chorus_wait(chorus_handle_t handle);

/* The result of a completed op, owned by the caller after chorus_release. */
typedef struct chorus_result chorus_result_t;
/* Waits for the op, then hands its result to the caller and forgets the handle. The returned
 * code is the op's status; *out is set even when the op failed. */
CHORUS_EXPORT int chorus_release(chorus_handle_t handle, chorus_result_t** out);
CHORUS_EXPORT void chorus_result_free(chorus_result_t* result);
/* chorus_release for a caller that needs only the op's status (an in-place op, say), without a
 * result object. *released = 1 once the handle is forgotten: the return value is then the op's
 * status code (its message in chorus_last_error()). With block = 0 an op still in flight is
 * left alone: 0 is returned with *released = 0. An unknown handle returns NOT_FOUND with
 * *released = 0. */
CHORUS_EXPORT int chorus_release_status(chorus_handle_t handle, int block, int* released);
/* The op's status code and message (valid until chorus_result_free). */
CHORUS_EXPORT int chorus_result_status(const chorus_result_t* result, const char** message);
/* Output of allgather, alltoall, reducescatter: data (NULL when none), bytes, ndim and shape
 * (valid until chorus_result_free). */
CHORUS_EXPORT void chorus_result_output(const chorus_result_t* result, void** data,
                                        int64_t* num_bytes, int32_t* ndim, const int64_t** shape);
/* Where that output lives: -1 for host memory, else the CUDA device ordinal. */
CHORUS_EXPORT int32_t chorus_result_output_device(const chorus_result_t* result);
/* alltoall: rows received from each rank (count entries). */
CHORUS_EXPORT void chorus_result_received_splits(const chorus_result_t* result,
                                                 const int64_t** splits, int32_t* count);
CHORUS_EXPORT int32_t chorus_result_last_joined_rank(const chorus_result_t* result);
CHORUS_EXPORT int32_t chorus_result_process_set_id(const chorus_result_t* result);

/* Elastic jobs (runtime/elastic/membership_watcher.h). A process is an elastic worker once an
 * init ran with CHORUS_ELASTIC_WORKER_ID and CHORUS_ELASTIC=1 set (chorusrun's elastic mode sets
 * them; a fixed-size MPI-less job's workers get a worker id only, for their heartbeats).
 *
 * 1 when this process is an elastic worker, else 0. */
CHORUS_EXPORT int chorus_elastic_worker(void);
/* Takes the host updates chorusrun announced since the last call (for the generations after the
 * one this worker is in): *timestamp_us the newest one's time (0: none), *result the union of
 * their kinds (1 hosts removed, 2 hosts added). Not an elastic worker: 0 and nothing. */
CHORUS_EXPORT int chorus_elastic_take_host_updates(int64_t* timestamp_us, int32_t* result);
/* After a reset (chorus suspended or shut down): waits up to timeout_ms for a generation newer
 * than the one this worker is in and adopts it: this worker's place in it (CHORUS_RANK, ...,
 * CHORUS_RENDEZVOUS_SCOPE, CHORUS_ELASTIC_GENERATION), which the next chorus_reform (or
 * chorus_init) forms; the process environment is not written (chorus_elastic_adopted_env lists
 * the variables for a binding's own view of it). *generation:
 * the adopted one. A generation on hold (too few workers for --min-np) is waited past. NOT_FOUND:
 * chorusrun released this worker (it should exit with status 0); DEADLINE_EXCEEDED;
 * FAILED_PRECONDITION when this is not an elastic worker. (Forming a world adopts by itself when
 * its generation is replaced meanwhile, and a joining worker's init waits for its place.) */
CHORUS_EXPORT int chorus_elastic_adopt_next(int64_t timeout_ms, int64_t* generation);
/* The variables this worker last adopted (by chorus_elastic_adopt_next or while forming a world),
 * one "NAME=value" per line; "" if none. Valid until this thread's next call of it. Bindings
 * copy them into their own view of the environment (Python's os.environ). */
CHORUS_EXPORT const char* chorus_elastic_adopted_env(void);

/* This thread's message for its last failed call ("" if none). */
CHORUS_EXPORT const char* chorus_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* CHORUS_C_API_H_ */
