// Capture's last rewrite: every random op draws from a keyed generator (see Note [Keyed
// random ops] in keyed_random.cpp). Private to src/graph (used by capture.cpp).
#pragma once

#include "ppstage/graph/model_graph.h"

namespace ppstage::graph_detail {

// Gives every random op of `model.graph` a generator made from the thread's RandomStream,
// its module call's random key and its index within that call. Appends one random-key input
// (a ModelParameter with random_key set) per module call that has random ops. Throws
// ppstage::Error naming the op and its module for a random op it cannot key.
void keyRandomOps(ModelGraph& model);

}  // namespace ppstage::graph_detail
