// The shapes of a micro-batch's messages, where micro-batches differ in length
// (ExecutorOptions::max_length): before a stage's activations or gradients for one
// micro-batch, the sender sends one int64 message with every tensor's sizes, and the
// receiver checks them against the receives it posted for that micro-batch's length.
// Private to src/runtime.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "ppstage/comm/boundary_spec.h"
#include "ppstage/comm/message_tag.h"

namespace ppstage {

// The tag of the shapes of (stage, micro-batch)'s activations or gradients (`kind`).
MessageTag shapesTag(MessageKind kind, int stage, int microbatch);

// The sizes of `tensors` (the defined ones), one after another: what is sent.
at::Tensor packShapes(const std::vector<at::Tensor>& tensors, const at::Device& device);

// A buffer for the packed shapes of tensors shaped as `tensors` (the defined ones).
at::Tensor shapesBuffer(const std::vector<at::Tensor>& tensors, const at::Device& device);

// "" when `shapes` (received) are those of `expected` (the defined ones, the receives
// posted); else what differs, naming the tensor (from `spec`) and both shapes.
std::string shapeMismatch(const at::Tensor& shapes, const std::vector<at::Tensor>& expected,
                          const BoundarySpec& spec, MessageKind kind);

}  // namespace ppstage
