// The op-kind table (base/op_kind.h): each column holds exactly the kinds the runtime's rules
// were written for, so a row that changes changes a rule on purpose.
#include "base/op_kind.h"

#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "chorus/types.h"

namespace chorus {
namespace {

using Kinds = std::set<OpType>;

template <typename Column>
Kinds Where(Column column) {
  Kinds kinds;
  for (const OpKind& kind : kOpKinds) {
    if (column(kind)) kinds.insert(kind.type);
  }
  return kinds;
}

TEST_CASE("Each column of the op-kind table holds the kinds its rule is for", "[op_kind]") {
  using T = OpType;
  CHECK(Where([](const OpKind& k) { return k.moves_data; }) ==
        Kinds{T::kAllreduce, T::kAllgather, T::kBroadcast, T::kAlltoall, T::kReducescatter});
  CHECK(Where([](const OpKind& k) { return k.reduces; }) ==
        Kinds{T::kAllreduce, T::kReducescatter});
  CHECK(Where([](const OpKind& k) { return k.first_dim_varies; }) ==
        Kinds{T::kAllgather, T::kAlltoall});
  CHECK(Where([](const OpKind& k) { return k.needs_first_dim; }) ==
        Kinds{T::kAllgather, T::kAlltoall, T::kReducescatter});
  CHECK(Where([](const OpKind& k) { return k.fuses; }) == Kinds{T::kAllreduce, T::kAllgather});
  CHECK(Where([](const OpKind& k) { return k.groups; }) ==
        Kinds{T::kAllreduce, T::kAllgather, T::kReducescatter});
  CHECK(Where([](const OpKind& k) { return k.has_root; }) == Kinds{T::kBroadcast});
  CHECK(Where([](const OpKind& k) { return k.global; }) ==
        Kinds{T::kAddProcessSet, T::kRemoveProcessSet});
  CHECK(Where([](const OpKind& k) { return k.proceeds_with_joined_ranks; }) ==
        Kinds{T::kAllreduce});
  // Ops without a tensor are named for their caller; tensor ops must be named.
  CHECK(Where([](const OpKind& k) { return k.default_name != nullptr; }) ==
        Where([](const OpKind& k) { return !k.moves_data; }));
}

TEST_CASE("Op kinds are found by type; names and validity follow the table", "[op_kind]") {
  for (const OpKind& kind : kOpKinds) {
    CHECK(&KindOf(kind.type) == &kind);
    CHECK(std::string(OpTypeName(kind.type)) == kind.name);
    CHECK(IsDataOp(kind.type) == kind.moves_data);
    CHECK(IsValidOpType(static_cast<int32_t>(kind.type)));
  }
  CHECK(std::string(OpTypeName(OpType::kRemoveProcessSet)) == "remove_process_set");
  CHECK_FALSE(IsValidOpType(-1));
  CHECK_FALSE(IsValidOpType(static_cast<int32_t>(std::size(kOpKinds))));
  CHECK(std::string(OpTypeName(static_cast<OpType>(99))) == "unknown");
  CHECK_FALSE(IsDataOp(static_cast<OpType>(99)));
}

}  // namespace
}  // namespace chorus
