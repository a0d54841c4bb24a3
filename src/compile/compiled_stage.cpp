// See include/ppstage/compile/compiled_stage.h.
#include "ppstage/compile/compiled_stage.h"

#include <torch/csrc/jit/ir/ir.h>

#include "ppstage/core/error.h"

namespace ppstage {

CompileMode parseCompileMode(const std::string& text) {
  if (text == "none") return CompileMode::kNone;
  if (text == "stage") return CompileMode::kStage;
  throw Error(detail::concat("--compile.mode must be none or stage; got '", text, "'"));
}

const char* toString(CompileMode mode) {
  return mode == CompileMode::kStage ? "stage" : "none";
}

CompiledStage::CompiledStage(const std::shared_ptr<torch::jit::Graph>& graph, CompileMode mode,
                             const std::string& name)
    : mode_(mode), runner_(graph->copy(), name, /*profiling=*/mode == CompileMode::kStage) {}

}  // namespace ppstage
