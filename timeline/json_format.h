// File: timeline/json_format.h
//
// The text of a chorus timeline file (docs/timeline.md, "Format"): the header, one line per
// event, the marks the writer adds itself, and the trailer. Every piece but the header starts
// with ",\n", so the file is a JSON array whichever piece it ends with, once "]" is added.
//
// Thread-safety: pure functions.
#ifndef CHORUS_TIMELINE_JSON_FORMAT_H_
#define CHORUS_TIMELINE_JSON_FORMAT_H_

#include <cstdint>
#include <string>

#include "timeline/trace_event.h"
#include "timeline/trace_writer.h"

namespace chorus::timeline {

inline constexpr int kFormatVersion = 1;

// "[" and the metadata events: chorus_trace, process_name, process_sort_index, the rank row.
std::string FormatHeader(const TraceWriter::Options& options);
// Appends ",\n" and `event` as one JSON object with "pid": rank.
void AppendEventLine(int32_t rank, const Event& event, std::string* out);
std::string FormatDroppedMark(int32_t rank, int64_t ts_ns, int64_t dropped_total);
std::string FormatTruncatedMark(int32_t rank, int64_t ts_ns, int64_t max_bytes);
// The chorus_trace_end metadata event and the closing "]".
std::string FormatTrailer(int32_t rank, int64_t events, int64_t dropped, bool truncated);

// `text` as a JSON string literal, quotes included (UTF-8 passes through; control characters
// and invalid bytes are escaped so that the file stays valid JSON).
void AppendJsonString(const std::string& text, std::string* out);

}  // namespace chorus::timeline

#endif  // CHORUS_TIMELINE_JSON_FORMAT_H_
