// The bucket size of MpiCommunicator's all-reduce, which the planner's memory model counts.
#pragma once

#include <cstdint>

namespace ppstage {

// An all-reduce sums its tensors in buckets of at most this many bytes, each copied into
// one flat buffer just before its sum: while a step's gradients are summed, a rank holds one
// bucket's copy (and, around the ring, a receive buffer of a bucket / ranks) beside them.
constexpr int64_t kAllReduceBucketBytes = 16 << 20;

}  // namespace ppstage
