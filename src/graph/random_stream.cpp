// See include/ppstage/graph/random_stream.h.
#include "ppstage/graph/random_stream.h"

namespace ppstage {

namespace {

// The calling thread's stream: what keyed random ops (src/graph/keyed_random.cpp) read. One
// per thread, because the stream belongs to the forward running on it.
thread_local RandomStream current_stream;

}  // namespace

RandomStream currentRandomStream() { return current_stream; }

RandomStreamScope::RandomStreamScope(const RandomStream& stream) : previous_(current_stream) {
  current_stream = stream;
}

RandomStreamScope::~RandomStreamScope() { current_stream = previous_; }

}  // namespace ppstage
