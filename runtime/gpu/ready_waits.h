// File: runtime/gpu/ready_waits.h
//
// Which ready events a GPU launch waits on. Every GPU submission records an event on the stream
// that produces its tensor (the framework's); a batch's launch must not read a tensor before its
// event. Events recorded on one stream complete in the order they were recorded, so when one
// event of a stream was recorded after every other event of that stream in the batch, waiting
// on it alone covers them all: one cudaStreamWaitEvent per stream and batch instead of one per
// tensor.
//
// "Recorded after" must be known, not guessed: submitting threads take a number from a counter
// just before they record (`begin`) and another just after (`end`). An event whose `begin`
// exceeds the `end` of every other event of its stream was recorded after all of them returned.
// When submitters on one stream overlap (two threads recording at once), no such event may
// exist, and the launch waits on every event of that stream.
//
// Thread-safety: a pure function.
#ifndef CHORUS_RUNTIME_GPU_READY_WAITS_H_
#define CHORUS_RUNTIME_GPU_READY_WAITS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace chorus::runtime {

// One recorded ready event: its stream and its numbers from the recording counter.
struct ReadyMark {
  const void* stream = nullptr;
  uint64_t begin = 0;  // taken just before the record
  uint64_t end = 0;    // taken just after it returned
};

// The indices into `marks` of the events to wait on, in increasing order, into `*waits`
// (cleared first; its capacity is reused). Per stream: the last recorded event alone when its
// `begin` exceeds the `end` of every other mark of that stream, else every mark of the stream.
void ChooseReadyWaits(absl::Span<const ReadyMark> marks, std::vector<size_t>* waits);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_GPU_READY_WAITS_H_
