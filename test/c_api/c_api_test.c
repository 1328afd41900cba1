/* The C ABI of libchorus.so, from C, across real processes (run under mpirun -np 2 and 3).
 * Links only libchorus.so. Prints "N passed, M failed" and exits non-zero on any failure. */
#include "chorus/c_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_passed = 0, g_failed = 0;
static int g_rank = -1;

#define EXPECT(cond)                                                                            \
  do {                                                                                          \
    if (cond) {                                                                                 \
      ++g_passed;                                                                               \
    } else {                                                                                    \
      ++g_failed;                                                                               \
      fprintf(stderr, "rank %d: %s:%d: EXPECT(%s) failed (last error: %s)\n", g_rank, __FILE__, \
              __LINE__, #cond, chorus_last_error());                                            \
    }                                                                                           \
  } while (0)

enum { kUint8 = 0, kInt32 = 3, kFloat32 = 7 };
enum { kAllreduce = 0, kAllgather = 1, kBroadcast = 2 };
enum { kSum = 0, kAverage = 1, kMax = 3 };
enum { kInvalidArgument = 3, kNotFound = 5, kFailedPrecondition = 9, kAborted = 10 };

static void done_cb(void* arg, int code) { *(int*)arg = code + 100; }

int main(void) {
  /* Before init: FailedPrecondition with a message. */
  chorus_op_t early;
  chorus_op_init(&early);
  early.name = "early";
  chorus_handle_t h = 0;
  EXPECT(chorus_enqueue(&early, NULL, NULL, &h) == kFailedPrecondition);
  EXPECT(strstr(chorus_last_error(), "not initialized") != NULL);
  EXPECT(chorus_is_initialized() == 0);

  EXPECT(chorus_init(NULL, 0, NULL, NULL) == 0);
  EXPECT(chorus_is_initialized() == 1);
  chorus_topology_t topo;
  EXPECT(chorus_topology(&topo) == 0);
  g_rank = topo.rank;
  EXPECT(topo.size >= 1 && topo.rank < topo.size);
  EXPECT(topo.local_size * topo.cross_size == topo.size);

  /* Allreduce (average) out of place, with a callback. */
  float in[5], out[5];
  for (int i = 0; i < 5; ++i) in[i] = (float)(topo.rank + 1) * (float)i;
  int64_t shape5[1] = {5};
  chorus_op_t op;
  chorus_op_init(&op);
  op.type = kAllreduce;
  op.name = "c.allreduce";
  op.input.data = in;
  op.input.dtype = kFloat32;
  op.input.ndim = 1;
  op.input.shape = shape5;
  op.output = op.input;
  op.output.data = out;
  op.reduce_op = kAverage;
  int cb_code = -1;
  EXPECT(chorus_enqueue(&op, done_cb, &cb_code, &h) == 0);
  EXPECT(chorus_wait(h) == 0);
  EXPECT(cb_code == 100);
  const float mean_factor = (float)(topo.size + 1) / 2.0f;
  for (int i = 0; i < 5; ++i) EXPECT(out[i] == mean_factor * (float)i);
  for (int i = 0; i < 5; ++i) EXPECT(in[i] == (float)(topo.rank + 1) * (float)i);
  chorus_result_t* result = NULL;
  EXPECT(chorus_release(h, &result) == 0);
  chorus_result_free(result);
  EXPECT(chorus_wait(h) == kNotFound);

  /* Allgather: rank r gives r + 1 int32 rows of 2; the output comes back in the result. */
  int32_t rows[64];
  for (int i = 0; i < 2 * (topo.rank + 1); ++i) rows[i] = topo.rank * 10 + i;
  int64_t shape_ag[2] = {topo.rank + 1, 2};
  chorus_op_t ag;
  chorus_op_init(&ag);
  ag.type = kAllgather;
  ag.name = "c.allgather";
  ag.input.data = rows;
  ag.input.dtype = kInt32;
  ag.input.ndim = 2;
  ag.input.shape = shape_ag;
  EXPECT(chorus_enqueue(&ag, NULL, NULL, &h) == 0);
  EXPECT(chorus_release(h, &result) == 0);
  void* data = NULL;
  int64_t bytes = 0;
  int32_t ndim = 0;
  const int64_t* shape = NULL;
  chorus_result_output(result, &data, &bytes, &ndim, &shape);
  const int64_t total_rows = (int64_t)topo.size * (topo.size + 1) / 2;
  EXPECT(ndim == 2 && shape[0] == total_rows && shape[1] == 2);
  EXPECT(bytes == total_rows * 2 * 4);
  const int32_t* got = (const int32_t*)data;
  int64_t k = 0;
  for (int r = 0; r < topo.size; ++r) {
    for (int i = 0; i < 2 * (r + 1); ++i) EXPECT(got[k++] == r * 10 + i);
  }
  chorus_result_free(result);

  /* A shape mismatch fails on every rank with a message naming the tensor. */
  int64_t shape_bad[1] = {topo.rank == 0 ? 4 : 3};
  float bad[4] = {1, 2, 3, 4};
  chorus_op_t mm;
  chorus_op_init(&mm);
  mm.type = kAllreduce;
  mm.name = "c.mismatch";
  mm.input.data = bad;
  mm.input.dtype = kFloat32;
  mm.input.ndim = 1;
  mm.input.shape = shape_bad;
  EXPECT(chorus_enqueue(&mm, NULL, NULL, &h) == 0);
  if (topo.size > 1) {
    EXPECT(chorus_release(h, &result) == kInvalidArgument);
    const char* message = NULL;
    EXPECT(chorus_result_status(result, &message) == kInvalidArgument);
    EXPECT(strstr(message, "c.mismatch") != NULL);
    EXPECT(strstr(chorus_last_error(), "c.mismatch") != NULL);
  } else {
    EXPECT(chorus_release(h, &result) == 0);
  }
  chorus_result_free(result);

  /* chorus_release_status: the status alone. An in-place sum: after a successful wait, the
   * non-blocking form releases the handle at once; a failed op (the mismatch again) gives its
   * code and message; an unknown handle is NOT_FOUND with nothing released. */
  float sum_in_place[5];
  for (int i = 0; i < 5; ++i) sum_in_place[i] = (float)(topo.rank + 1) * (float)i;
  chorus_op_t sum_op = op;
  sum_op.name = "c.release_status";
  sum_op.input.data = sum_in_place;
  sum_op.output.data = NULL;
  sum_op.reduce_op = kSum;
  int released = -1;
  EXPECT(chorus_enqueue(&sum_op, NULL, NULL, &h) == 0);
  EXPECT(chorus_wait(h) == 0);
  EXPECT(chorus_release_status(h, 0, &released) == 0);
  EXPECT(released == 1);
  const float sum_factor = (float)topo.size * (float)(topo.size + 1) / 2.0f;
  for (int i = 0; i < 5; ++i) EXPECT(sum_in_place[i] == sum_factor * (float)i);
  EXPECT(chorus_release_status(h, 0, &released) == kNotFound);
  EXPECT(released == 0);
  EXPECT(chorus_release_status(h, 1, &released) == kNotFound);
  EXPECT(released == 0);
  if (topo.size > 1) {
    /* An op in flight stays: rank 0 checks c.pending before it submits c.gate, which the other
     * ranks wait for before they submit c.pending. */
    float pending[5] = {1, 1, 1, 1, 1}, gate[5] = {1, 1, 1, 1, 1};
    chorus_op_t pending_op = sum_op, gate_op = sum_op;
    pending_op.name = "c.pending";
    pending_op.input.data = pending;
    gate_op.name = "c.gate";
    gate_op.input.data = gate;
    chorus_handle_t hp = 0, hg = 0;
    if (topo.rank == 0) {
      EXPECT(chorus_enqueue(&pending_op, NULL, NULL, &hp) == 0);
      released = -1;
      EXPECT(chorus_release_status(hp, 0, &released) == 0);
      EXPECT(released == 0);
      EXPECT(chorus_enqueue(&gate_op, NULL, NULL, &hg) == 0);
      EXPECT(chorus_release_status(hg, 1, &released) == 0 && released == 1);
      EXPECT(chorus_release_status(hp, 1, &released) == 0 && released == 1);
    } else {
      EXPECT(chorus_enqueue(&gate_op, NULL, NULL, &hg) == 0);
      EXPECT(chorus_release_status(hg, 1, &released) == 0 && released == 1);
      EXPECT(chorus_enqueue(&pending_op, NULL, NULL, &hp) == 0);
      EXPECT(chorus_release_status(hp, 1, &released) == 0 && released == 1);
    }
    for (int i = 0; i < 5; ++i) EXPECT(pending[i] == (float)topo.size && gate[i] == pending[i]);
  }
  mm.name = "c.mismatch.status";
  EXPECT(chorus_enqueue(&mm, NULL, NULL, &h) == 0);
  released = -1;
  const int mm_code = chorus_release_status(h, 1, &released);
  EXPECT(released == 1);
  if (topo.size > 1) {
    EXPECT(mm_code == kInvalidArgument);
    EXPECT(strstr(chorus_last_error(), "c.mismatch.status") != NULL);
  } else {
    EXPECT(mm_code == 0);
  }

  /* Local argument errors come back from chorus_enqueue itself. */
  chorus_op_t no_name;
  chorus_op_init(&no_name);
  no_name.input.data = in;
  no_name.input.ndim = 1;
  no_name.input.shape = shape5;
  EXPECT(chorus_enqueue(&no_name, NULL, NULL, &h) == kInvalidArgument);
  chorus_op_t bad_root;
  chorus_op_init(&bad_root);
  bad_root.type = kBroadcast;
  bad_root.name = "c.bad_root";
  bad_root.input = op.input;
  bad_root.root_rank = topo.size;
  EXPECT(chorus_enqueue(&bad_root, NULL, NULL, &h) == kInvalidArgument);
  EXPECT(strstr(chorus_last_error(), "root rank") != NULL);

  /* Suspend and reform (what an elastic reset does; here the world formed again is the same
   * MPI world): the runtime stays initialised, new ops fail until the reform, a handle of the
   * old world stays valid, and the new world computes. */
  for (int i = 0; i < 5; ++i) in[i] = (float)(topo.rank + 1);
  op.reduce_op = kSum;
  EXPECT(chorus_enqueue(&op, NULL, NULL, &h) == 0);
  EXPECT(chorus_wait(h) == 0);
  EXPECT(chorus_suspend() == 0);
  EXPECT(chorus_is_initialized() == 1);
  chorus_handle_t refused = 0;
  EXPECT(chorus_enqueue(&op, NULL, NULL, &refused) == kFailedPrecondition);
  EXPECT(strstr(chorus_last_error(), "suspended") != NULL);
  EXPECT(chorus_reform() == 0);
  EXPECT(chorus_release(h, &result) == 0);
  chorus_result_free(result);
  chorus_topology_t again;
  EXPECT(chorus_topology(&again) == 0);
  EXPECT(again.rank == topo.rank && again.size == topo.size);
  const float rank_sum = (float)(topo.size * (topo.size + 1)) / 2.0f;
  EXPECT(chorus_enqueue(&op, NULL, NULL, &h) == 0);
  EXPECT(chorus_wait(h) == 0);
  for (int i = 0; i < 5; ++i) EXPECT(out[i] == rank_sum);
  EXPECT(chorus_release(h, &result) == 0);
  chorus_result_free(result);

  /* Ranks that shut down giving a cause: rank 0's op that fails because of them (or its
   * enqueue, where the shutdown came first) says it. */
  if (topo.size > 1) {
    if (topo.rank == 0) {
      chorus_op_t alone = op;
      alone.name = "c.left_alone";
      int code = chorus_enqueue(&alone, NULL, NULL, &h);
      if (code == 0) {
        code = chorus_release(h, &result);
        chorus_result_free(result);
      }
      EXPECT(code == kAborted || code == kFailedPrecondition);
      EXPECT(strstr(chorus_last_error(), "chorus was shut down by rank") != NULL);
      EXPECT(strstr(chorus_last_error(), " (bad batch: loss is nan) ") != NULL);
    } else {
      EXPECT(chorus_shutdown_because("bad batch: loss is nan") == 0);
    }
  }
  EXPECT(chorus_shutdown() == 0);
  EXPECT(chorus_is_initialized() == 0);
  EXPECT(chorus_reform() == kFailedPrecondition);
  EXPECT(chorus_suspend() == kFailedPrecondition);
  EXPECT(chorus_shutdown() == 0); /* idempotent */

  printf("rank %d: %d passed, %d failed\n", g_rank, g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
