// File: base/status_macros.h
//
// Status propagation macros (Debian's Abseil 20220623 has none) and adapters that turn foreign
// error codes into absl::Status carrying the call, file and line.
#ifndef CHORUS_BASE_STATUS_MACROS_H_
#define CHORUS_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CHORUS_STATUS_CONCAT_INNER_(a, b) a##b
#define CHORUS_STATUS_CONCAT_(a, b) CHORUS_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define CHORUS_RETURN_IF_ERROR(expr)                            \
  do {                                                          \
    if (::absl::Status chorus_st_ = (expr); !chorus_st_.ok()) { \
      return chorus_st_;                                        \
    }                                                           \
  } while (0)

// `lhs = value of rexpr` (an absl::StatusOr<T>), or returns its error.
#define CHORUS_ASSIGN_OR_RETURN(lhs, rexpr) \
  CHORUS_ASSIGN_OR_RETURN_IMPL_(CHORUS_STATUS_CONCAT_(chorus_sor_, __LINE__), lhs, rexpr)
#define CHORUS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // CHORUS_BASE_STATUS_MACROS_H_
