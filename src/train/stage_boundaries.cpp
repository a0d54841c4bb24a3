// See stage_boundaries.h.
#include "stage_boundaries.h"

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"

namespace ppstage {

int64_t planLength(const Config& config, const ModelSplit& split) {
  if (config.data.seq_len_policy == SeqLenPolicy::kFixed) return 0;
  const at::Tensor& input = split.example_inputs.at(0);
  PPSTAGE_INTERNAL_ASSERT(input.dim() >= 2, "lengths vary, but the input is ",
                          shapeText(input.sizes().vec()), " (captureForSplit checks it)");
  return input.size(1);
}

BoundarySpec boundarySpecOf(const StageModule& stage, bool inputs, int64_t plan_length) {
  BoundarySpec spec;
  spec.stage = inputs ? stage.index : stage.index + 1;
  for (const BoundaryTensor& t : inputs ? stage.inputs : stage.outputs) {
    const TensorMeta& meta = t.meta;
    PPSTAGE_CHECK(meta.dims.size() == meta.sizes.size(), "the tensor '", t.name,
                  "' crossing into stage ", spec.stage, " has a shape that does not grow ",
                  "linearly with the batch, so it cannot be cut into micro-batches");
    PPSTAGE_CHECK(plan_length == 0 || meta.follows_length, "the tensor '", t.name,
                  "' crossing into stage ", spec.stage, " has a shape ", shapeText(meta.sizes),
                  " that does not follow the sequence length (a size ",
                  "that is its square?), so micro-batches cannot differ in length: move the ",
                  "split point, or use --data.seq_len_policy fixed");
    PPSTAGE_INTERNAL_ASSERT(plan_length != 0 || !meta.follows_length, "'", t.name,
                            "' follows a sequence length that does not vary");
    spec.tensors.push_back(TensorSpec{t.name, meta.dtype, meta.dims, meta.requires_grad});
  }
  return spec;
}

std::vector<int64_t> messageBytes(const ModelSplit& split, int64_t microbatch,
                                  int64_t plan_length) {
  std::vector<int64_t> bytes;
  for (size_t s = 0; s + 1 < split.stages.size(); ++s) {
    int64_t total = 0;
    for (const TensorSpec& t : boundarySpecOf(split.stages[s], false, plan_length).tensors) {
      int64_t numel = 1;
      for (int64_t size : t.sizes(microbatch, plan_length)) numel *= size;
      total += numel * static_cast<int64_t>(c10::elementSize(t.dtype));
    }
    bytes.push_back(total);
  }
  return bytes;
}

}  // namespace ppstage
