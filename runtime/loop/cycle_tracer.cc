#include "runtime/loop/cycle_tracer.h"

#include <utility>

namespace chorus::runtime {

void CycleTracer::RequestKnown(const std::string& name, int32_t rank, absl::Time at) {
  if (active()) timeline_->RequestKnown(name, rank, at);
}

void CycleTracer::Negotiated(TensorEntry& entry, absl::Time at, bool cached) {
  if (!active()) return;
  timeline_->Negotiated(entry.request.name, entry.request.type, at, cached);
  entry.ready_at = at;
}

void CycleTracer::Start(const Response& response, absl::Span<TensorEntry* const> entries) {
  if (!active()) return;
  started_ = absl::Now();
  traced_.assign(response.names.size(), TracedTensor());
  spans_.clear();
  const int64_t batch_id = timeline_->NextBatchId();
  for (size_t i = 0; i < response.names.size(); ++i) {
    const TensorEntry* entry = entries[i];
    if (entry == nullptr) continue;
    TracedTensor& t = traced_[i];
    t.row = timeline_->Row(response.names[i]);
    t.ready_at = entry->ready_at;
    t.args.dtype = entry->request.dtype;
    t.args.shape.assign(entry->request.shape.begin(), entry->request.shape.end());
    t.args.bytes = NumElements(entry->request.shape) *
                   static_cast<int64_t>(DataTypeSize(entry->request.dtype));
    t.args.batch_id = batch_id;
    t.args.batch_size = static_cast<int32_t>(response.names.size());
    t.args.process_set = response.process_set_id;
  }
}

void CycleTracer::Executed(const Response& response, const ops::CollectiveBackend* backend) {
  if (!active()) return;
  executed_ = absl::Now();
  for (TracedTensor& t : traced_) {
    if (t.row < 0) continue;
    if (t.ready_at == absl::InfinitePast()) t.ready_at = started_;
    timeline_->Span(t.row, "QUEUE", t.ready_at, started_);
  }
  if (spans_.empty()) return;
  const char* collective = timeline::Timeline::CollectiveLabel(
      backend != nullptr ? backend->name() : "UNKNOWN", response.type);
  for (const ExecutionSpan& span : spans_) {
    const int32_t row = traced_[span.index].row;
    if (row < 0) continue;
    switch (span.activity) {
      case ExecutionSpan::Activity::kMemcpyIn:
        timeline_->Span(row, "MEMCPY_IN_FUSION_BUFFER", span.start, span.end);
        break;
      case ExecutionSpan::Activity::kCollective:
        if (span.chunks > 0) {
          timeline_->Span(row, collective, span.start, span.end, timeline::ChunkArgs{span.chunks});
        } else {
          timeline_->Span(row, collective, span.start, span.end);
        }
        break;
      case ExecutionSpan::Activity::kMemcpyOut:
        timeline_->Span(row, "MEMCPY_OUT_FUSION_BUFFER", span.start, span.end);
        break;
    }
  }
}

void CycleTracer::Completed(const Response& response) {
  if (!active()) return;
  const absl::Time done = absl::Now();
  for (TracedTensor& t : traced_) {
    if (t.row < 0) continue;
    timeline_->Span(t.row, "CALLBACK", executed_, done);
    timeline_->Span(t.row, timeline::Timeline::OpLabel(response.type), t.ready_at, done,
                    std::move(t.args));
  }
}

}  // namespace chorus::runtime
