// Final parameters on disk, to compare runs (`ppstage compare-runs`): each rank writes the
// parameters of its stages to DIR/params-rank<r>.pt (a pickled Dict[str, Tensor] keyed by
// every model path the tensor has in that stage, so "wte.weight" and its tied
// "lm_head.weight" both appear whichever stages hold them).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace ppstage {

void writeParameterFile(const std::string& dir, int rank,
                        const std::map<std::string, at::Tensor>& params);

// Every params-rank*.pt in `dir`, merged. Throws ppstage::Error when there is none, or
// when two files hold one path with different values.
std::map<std::string, at::Tensor> readParameterFiles(const std::string& dir);

}  // namespace ppstage
