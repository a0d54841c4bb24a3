// The random stream a thread's keyed random ops draw from: (seed, step, micro-batch).
//
// Capture rewrites every random op of a model to draw from a generator of its own, made
// from this stream and the op's identity in the model (module path and index), never from
// the global generator; see Note [Keyed random ops] in src/graph/keyed_random.cpp. The
// runtime sets the stream around each micro-batch's forward; code that runs a model outside
// training (the split probe) gets the default stream, all zeros.
#pragma once

#include <cstdint>

namespace ppstage {

struct RandomStream {
  int64_t seed = 0;        // --train.seed
  int64_t step = 0;        // optimizer step, from 0
  int64_t microbatch = 0;  // global micro-batch: dp rank x micro-batches + local index
  // Where the ops draw: -1, a generator of the key's device (the CPU); N, CUDA device N's
  // (the stages of a rank on a GPU, whose keys stay on the CPU: no sync to read one).
  int cuda_device = -1;
};

// The calling thread's stream.
RandomStream currentRandomStream();

// Sets the calling thread's stream for its lifetime, then restores the previous one.
class RandomStreamScope {
 public:
  explicit RandomStreamScope(const RandomStream& stream);
  ~RandomStreamScope();
  RandomStreamScope(const RandomStreamScope&) = delete;
  RandomStreamScope& operator=(const RandomStreamScope&) = delete;

 private:
  RandomStream previous_;
};

}  // namespace ppstage
