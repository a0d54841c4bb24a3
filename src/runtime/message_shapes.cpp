// See message_shapes.h.
#include "message_shapes.h"

#include <ATen/ATen.h>

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"

namespace ppstage {

MessageTag shapesTag(MessageKind kind, int stage, int microbatch) {
  return {MessageKind::kMetadata, stage, microbatch, kind == MessageKind::kActivation ? 2 : 3};
}

// Shapes go where the tensors go, on the data communicator: NCCL moves CUDA tensors only.
// Under host-staged MPI that is a round trip through the GPU; where lengths vary, the
// receiver reads each message's shapes on the host (one sync per message).
at::Tensor packShapes(const std::vector<at::Tensor>& tensors, const at::Device& device) {
  std::vector<int64_t> dims;
  for (const at::Tensor& t : tensors) {
    if (t.defined()) dims.insert(dims.end(), t.sizes().begin(), t.sizes().end());
  }
  return at::tensor(dims, at::kLong).to(device);
}

at::Tensor shapesBuffer(const std::vector<at::Tensor>& tensors, const at::Device& device) {
  int64_t dims = 0;
  for (const at::Tensor& t : tensors) dims += t.defined() ? t.dim() : 0;
  return at::empty({dims}, at::device(device).dtype(at::kLong));
}

std::string shapeMismatch(const at::Tensor& shapes, const std::vector<at::Tensor>& expected,
                          const BoundarySpec& spec, MessageKind kind) {
  const at::Tensor host = shapes.cpu();
  const int64_t* sent = host.data_ptr<int64_t>();
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!expected[i].defined()) continue;
    const std::vector<int64_t> got(sent, sent + expected[i].dim());
    sent += expected[i].dim();
    if (got == expected[i].sizes().vec()) continue;
    return detail::concat(toString(kind), " '", spec.tensors.at(i).name, "' arrives as ",
                          shapeText(got), " but the step expects ",
                          shapeText(expected[i].sizes().vec()));
  }
  return "";
}

}  // namespace ppstage
