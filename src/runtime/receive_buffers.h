// Receive buffers allocated once and reused across steps: one pool per (stage, RECV_F or
// RECV_B) of a rank's action list, holding the most buffers that list keeps at once
// (receiveBuffersHeld, schedule/early_receives.h; for activations, the stage's peak
// in-flight count plus the receives posted ahead). Where micro-batches differ in length,
// a buffer is flat, sized for the longest, and each micro-batch receives into a view of
// its length (viewsAt): one pool serves every length.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <utility>
#include <vector>

#include "ppstage/comm/boundary_spec.h"
#include "ppstage/schedule/early_receives.h"

namespace ppstage {

class ReceiveBuffers {
 public:
  // Allocates every pool `actions` receives into. `specs` holds each pool's boundary: a
  // stage's input spec for RECV_F, its output spec for RECV_B (whose buffers exist only
  // for the tensors that get a gradient; the others' slots stay undefined).
  // `max_length`: the longest micro-batch where lengths vary; 0 where they do not. The
  // buffers are on `device`.
  ReceiveBuffers(const ActionList& actions, const std::map<ReceivePool, BoundarySpec>& specs,
                 int64_t microbatch_size, int64_t max_length = 0, at::Device device = at::kCPU);

  // A free buffer of `pool`, one tensor per boundary tensor; a new one when none is free.
  std::vector<at::Tensor> take(const ReceivePool& pool);
  // Gives `buffers` back to `pool` once the micro-batch that received into them is done.
  // Where something else still holds their memory (an alias autograd, a send or another
  // stage keeps), they wait for reclaim().
  void giveBack(const ReceivePool& pool, std::vector<at::Tensor> buffers);
  // At the end of a step, after its sends: the buffers given back while still in use are
  // free again where nothing holds them any more; the rest are dropped (the pool allocates
  // afresh).
  void reclaim();

  // Buffers allocated so far: the pools' sizes, plus every one allocated afresh.
  int64_t allocated() const { return allocated_; }

  // What a micro-batch of `length` tokens receives into: views of `buffers` (taken from
  // `pool`) in its shapes; `buffers` themselves where lengths do not vary.
  std::vector<at::Tensor> viewsAt(const ReceivePool& pool, const std::vector<at::Tensor>& buffers,
                                  int64_t length);

 private:
  struct Pool {
    BoundarySpec spec;
    bool gradients = false;  // RECV_B: only the tensors that require grad
    std::vector<std::vector<at::Tensor>> free;
    std::vector<std::vector<at::Tensor>> held;  // given back while still in use
  };
  Pool& pool(const ReceivePool& key);
  std::vector<at::Tensor> allocate(const Pool& pool);

  std::map<ReceivePool, Pool> pools_;
  int64_t microbatch_size_;
  int64_t max_length_;
  at::Device device_;
  int64_t allocated_ = 0;
};

}  // namespace ppstage
