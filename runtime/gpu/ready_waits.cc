#include "runtime/gpu/ready_waits.h"

#include <algorithm>

#include "absl/container/inlined_vector.h"

namespace chorus::runtime {

void ChooseReadyWaits(absl::Span<const ReadyMark> marks, std::vector<size_t>* waits) {
  waits->clear();
  // A batch's tensors come from one stream or a few: a linear scan per stream.
  struct Group {
    const void* stream;
    size_t last;      // the mark with the largest begin
    bool covers_all;  // it was recorded after every other mark of the stream returned
  };
  absl::InlinedVector<Group, 4> groups;
  for (size_t i = 0; i < marks.size(); ++i) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& x) { return x.stream == marks[i].stream; });
    if (g == groups.end()) {
      groups.push_back({marks[i].stream, i, true});
    } else if (marks[i].begin > marks[g->last].begin) {
      g->last = i;
    }
  }
  for (size_t i = 0; i < marks.size(); ++i) {
    for (Group& g : groups) {
      if (g.stream == marks[i].stream && i != g.last && marks[i].end >= marks[g.last].begin) {
        g.covers_all = false;
      }
    }
  }
  for (size_t i = 0; i < marks.size(); ++i) {
    for (const Group& g : groups) {
      if (g.stream == marks[i].stream && (!g.covers_all || i == g.last)) waits->push_back(i);
    }
  }
}

}  // namespace chorus::runtime
