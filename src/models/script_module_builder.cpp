// See include/ppstage/models/script_module_builder.h.
#include "ppstage/models/script_module_builder.h"

namespace ppstage {

ScriptModuleBuilder::ScriptModuleBuilder()
    : unit_(std::make_shared<torch::jit::CompilationUnit>()) {}

torch::jit::Module ScriptModuleBuilder::make(const std::string& class_name,
                                             const std::function<void(torch::jit::Module&)>& init,
                                             const std::string& methods) {
  const auto known = classes_.find(class_name);
  const bool first = known == classes_.end();
  torch::jit::Module module =
      first ? torch::jit::Module(c10::QualifiedName("__torch__.ppstage." + class_name), unit_)
            : torch::jit::Module(unit_, known->second);
  // Python modules carry `training`; Module::train() expects it on every module.
  module.register_attribute("training", c10::BoolType::get(), true);
  init(module);
  // Parameters train, as nn.Parameter's do (register_parameter leaves the flag alone).
  for (const auto& parameter : module.named_parameters(/*recurse=*/false)) {
    parameter.value.requires_grad_(true);
  }
  if (first) {
    if (!methods.empty()) module.define(methods);
    classes_.emplace(class_name, module.type());
  }
  return module;
}

}  // namespace ppstage
