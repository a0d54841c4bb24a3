// See include/ppstage/core/batch_layout.h.
#include "ppstage/core/batch_layout.h"

#include "ppstage/core/error.h"

namespace ppstage {

BatchLayout batchLayout(int64_t batch_size, int dp, int microbatches) {
  const int64_t parts = static_cast<int64_t>(dp) * microbatches;
  PPSTAGE_CHECK(batch_size % parts == 0, "--train.batch_size ", batch_size,
                " is not divisible by --train.dp ", dp, " x --pipeline.microbatches ", microbatches,
                " (", parts, "): every micro-batch must have the same size");
  BatchLayout layout;
  layout.microbatches = microbatches;
  layout.local_batch = batch_size / dp;
  layout.microbatch_size = layout.local_batch / microbatches;
  return layout;
}

}  // namespace ppstage
