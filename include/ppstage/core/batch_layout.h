// How a step's global batch is cut: into one share per data-parallel replica, and each
// share into the schedule's equal micro-batches.
#pragma once

#include <cstdint>

namespace ppstage {

struct BatchLayout {
  int microbatches = 1;
  int64_t local_batch = 1;      // samples per replica and step
  int64_t microbatch_size = 1;  // samples per micro-batch
};

// The global batch cut into `dp` replicas of `microbatches` equal micro-batches. Throws
// ppstage::Error when it does not divide evenly.
BatchLayout batchLayout(int64_t batch_size, int dp, int microbatches);

}  // namespace ppstage
