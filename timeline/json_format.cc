#include "timeline/json_format.h"

#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace chorus::timeline {
namespace {

// Nanoseconds as microseconds with three decimals, exactly.
void AppendMicros(int64_t ns, std::string* out) {
  if (ns < 0) {
    out->push_back('-');
    ns = -ns;
  }
  absl::StrAppend(out, ns / 1000, ".", absl::Dec(ns % 1000, absl::kZeroPad3));
}

// Length of the valid UTF-8 sequence starting at s[i], or 0.
size_t Utf8Length(const std::string& s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

void AppendArgs(const EventArgs& args, std::string* out) {
  std::visit(
      [out](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, OpArgs>) {
          absl::StrAppend(out, ",\"args\":{\"dtype\":\"", DataTypeName(a.dtype), "\",\"shape\":[",
                          absl::StrJoin(a.shape, ","), "],\"bytes\":", a.bytes,
                          ",\"batch_id\":", a.batch_id, ",\"batch_size\":", a.batch_size,
                          ",\"process_set\":", a.process_set, "}");
        } else if constexpr (std::is_same_v<T, NegotiateArgs>) {
          absl::StrAppend(out, ",\"args\":{\"cached\":", a.cached ? "true" : "false", "}");
        } else if constexpr (std::is_same_v<T, RankArgs>) {
          absl::StrAppend(out, ",\"args\":{\"rank\":", a.rank, "}");
        } else if constexpr (std::is_same_v<T, CycleArgs>) {
          absl::StrAppend(out, ",\"args\":{\"cycle\":", a.cycle, "}");
        } else if constexpr (std::is_same_v<T, ChunkArgs>) {
          absl::StrAppend(out, ",\"args\":{\"chunks\":", a.chunks, "}");
        } else if constexpr (std::is_same_v<T, ThreadNameArgs>) {
          out->append(",\"args\":{\"name\":");
          AppendJsonString(a.name, out);
          out->append("}");
        }
      },
      args);
}

// ,\n{"name":NAME,"ph":PH,"pid":RANK,"tid":TID  (the caller closes the object)
void AppendPrefix(int32_t rank, const char* name, const char* ph, int32_t tid, std::string* out) {
  out->append(",\n{\"name\":");
  AppendJsonString(name, out);
  absl::StrAppend(out, ",\"ph\":\"", ph, "\",\"pid\":", rank, ",\"tid\":", tid);
}

std::string ProcessMark(int32_t rank, const char* name, int64_t ts_ns, const std::string& args) {
  std::string out;
  AppendPrefix(rank, name, "i", 0, &out);
  out.append(",\"s\":\"p\",\"ts\":");
  AppendMicros(ts_ns, &out);
  absl::StrAppend(&out, ",\"args\":{", args, "}}");
  return out;
}

}  // namespace

void AppendJsonString(const std::string& text, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      absl::StrAppend(out, "\\u", absl::Hex(c, absl::kZeroPad4));
    } else if (c >= 0x80) {
      const size_t n = Utf8Length(text, i);
      if (n == 0) {
        absl::StrAppend(out, "\\u", absl::Hex(c, absl::kZeroPad4));  // as Latin-1
      } else {
        out->append(text, i, n);
        i += n;
        continue;
      }
    } else {
      out->push_back(static_cast<char>(c));
    }
    ++i;
  }
  out->push_back('"');
}

std::string FormatHeader(const TraceWriter::Options& o) {
  std::string out = "[\n{\"name\":\"chorus_trace\",\"ph\":\"M\",";
  absl::StrAppend(&out, "\"pid\":", o.rank, ",\"tid\":0,\"args\":{\"format\":\"chorus-timeline\"",
                  ",\"version\":", kFormatVersion, ",\"rank\":", o.rank, ",\"size\":", o.size,
                  ",\"hostname\":");
  AppendJsonString(o.hostname, &out);
  absl::StrAppend(&out, ",\"epoch_unix_us\":", absl::ToUnixMicros(o.start),
                  ",\"clock_offset_us\":", absl::StrFormat("%.3f", o.clock_offset_us), "}}");
  AppendPrefix(o.rank, "process_name", "M", 0, &out);
  absl::StrAppend(&out, ",\"args\":{\"name\":\"rank ", o.rank, "\"}}");
  AppendPrefix(o.rank, "process_sort_index", "M", 0, &out);
  absl::StrAppend(&out, ",\"args\":{\"sort_index\":", o.rank, "}}");
  AppendPrefix(o.rank, "thread_name", "M", 0, &out);
  out.append(",\"args\":{\"name\":\"cycles\"}}");
  return out;
}

void AppendEventLine(int32_t rank, const Event& e, std::string* out) {
  switch (e.kind) {
    case Event::Kind::kSpan:
      AppendPrefix(rank, e.name, "X", e.tid, out);
      out->append(",\"ts\":");
      AppendMicros(e.ts_ns, out);
      out->append(",\"dur\":");
      AppendMicros(e.dur_ns, out);
      break;
    case Event::Kind::kTensorMark:
    case Event::Kind::kProcessMark:
      AppendPrefix(rank, e.name, "i", e.tid, out);
      out->append(e.kind == Event::Kind::kTensorMark ? ",\"s\":\"t\"" : ",\"s\":\"p\"");
      out->append(",\"ts\":");
      AppendMicros(e.ts_ns, out);
      break;
    case Event::Kind::kThreadName:
      AppendPrefix(rank, "thread_name", "M", e.tid, out);
      break;
  }
  AppendArgs(e.args, out);
  out->push_back('}');
}

std::string FormatDroppedMark(int32_t rank, int64_t ts_ns, int64_t dropped_total) {
  return ProcessMark(rank, "DROPPED_EVENTS", ts_ns,
                     absl::StrCat("\"dropped_events\":", dropped_total));
}

std::string FormatTruncatedMark(int32_t rank, int64_t ts_ns, int64_t max_bytes) {
  return ProcessMark(rank, "TRACE_TRUNCATED", ts_ns, absl::StrCat("\"max_bytes\":", max_bytes));
}

std::string FormatTrailer(int32_t rank, int64_t events, int64_t dropped, bool truncated) {
  std::string out;
  AppendPrefix(rank, "chorus_trace_end", "M", 0, &out);
  absl::StrAppend(&out, ",\"args\":{\"events\":", events, ",\"dropped_events\":", dropped,
                  ",\"truncated\":", truncated ? "true" : "false", "}}\n]\n");
  return out;
}

}  // namespace chorus::timeline
