// Forward FLOP estimates per graph node, from the shapes seen for the example input.
// Used to balance stages by compute (--pipeline.balance flops) and shown in the plan.
#pragma once

#include "ppstage/graph/value_shapes.h"

namespace torch::jit {
struct Node;
}

namespace ppstage {

// Matrix products count 2*M*N*K, convolutions 2 * output elements * (C_in/groups * kernel),
// every other tensor-producing op one FLOP per output element. Nodes with control-flow
// blocks and values without recorded shapes count 0.
double estimateFlops(const torch::jit::Node* node, const ValueShapes& shapes);

}  // namespace ppstage
