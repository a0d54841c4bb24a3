// What crosses each cut: the BoundarySpec of a stage's inputs and outputs (what neighbours check
// and size receive buffers from) and the bytes of one micro-batch's message.
// Internal to train/: job_setup.cpp assembles the setup from these.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ppstage/comm/boundary_spec.h"
#include "ppstage/train/job_setup.h"

namespace ppstage {

// The sequence length the plan's shapes are for when micro-batches differ in length (the
// example input's dimension 1); 0 when they do not.
int64_t planLength(const Config& config, const ModelSplit& split);

// The BoundarySpec of a stage's inputs (`inputs` true) or outputs, the dims of the plan's
// shapes (with lengths that vary, `plan_length`; else 0): what its neighbours check and
// size receive buffers from. Throws ppstage::Error for a boundary tensor whose
// shape is not an affine function of the batch (it could not be cut into micro-batches)
// or, with lengths that vary, of the sequence length.
BoundarySpec boundarySpecOf(const StageModule& stage, bool inputs, int64_t plan_length);

// Bytes of one micro-batch of `microbatch` samples crossing each cut of `split`: what the
// BoundarySpec of each stage's outputs sizes; with lengths that vary (`plan_length`, the
// longest), at the longest.
std::vector<int64_t> messageBytes(const ModelSplit& split, int64_t microbatch, int64_t plan_length);

}  // namespace ppstage
