// File: timeline/trace_event.h
//
// One timeline event as the background thread records it and the writer thread formats it
// (docs/timeline.md, "Format"). Cheap to build: names are static or interned C strings, times
// are nanoseconds since the recording started, and only thread_name events carry a string.
//
// Thread-safety: plain values (thread-compatible).
#ifndef CHORUS_TIMELINE_TRACE_EVENT_H_
#define CHORUS_TIMELINE_TRACE_EVENT_H_

#include <cstdint>
#include <string>
#include <variant>

#include "absl/container/inlined_vector.h"

#include "chorus/types.h"

namespace chorus::timeline {

// Arguments of an op span (<OP>).
struct OpArgs {
  DataType dtype = DataType::kFloat32;
  absl::InlinedVector<int64_t, 4> shape;
  int64_t bytes = 0;
  int64_t batch_id = 0;
  int32_t batch_size = 0;
  int32_t process_set = 0;
};
struct NegotiateArgs {
  bool cached = false;
};
struct RankArgs {  // a ready mark
  int32_t rank = 0;
};
struct CycleArgs {  // CYCLE_START
  int64_t cycle = 0;
};
struct ChunkArgs {  // a collective over a large tensor, in pipeline chunks
  int64_t chunks = 0;
};
struct ThreadNameArgs {  // a tensor row's name
  std::string name;
};
using EventArgs = std::variant<std::monostate, OpArgs, NegotiateArgs, RankArgs, CycleArgs,
                               ChunkArgs, ThreadNameArgs>;

struct Event {
  enum class Kind : uint8_t {
    kSpan,         // "ph": "X" (ts, dur)
    kTensorMark,   // "ph": "i", "s": "t"
    kProcessMark,  // "ph": "i", "s": "p"
    kThreadName,   // "ph": "M" thread_name
  };
  Kind kind = Kind::kSpan;
  const char* name = "";  // static or interned (InternName); never freed
  int32_t tid = 0;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  EventArgs args;
};

// A stable C string equal to `name`, valid for the life of the process (for names built at run
// time such as "MPI_ALLREDUCE"). Thread-safe.
const char* InternName(const std::string& name);

}  // namespace chorus::timeline

#endif  // CHORUS_TIMELINE_TRACE_EVENT_H_
