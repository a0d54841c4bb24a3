// Builds TorchScript modules from C++ the way torch.jit.script builds them from Python.
//
// Every instance of one class shares one ClassType and so one compiled forward, exactly as
// scripted instances of one nn.Module class do; that is what lets later passes recognise
// identical blocks. The built-in models (gpt, mlp) are made with it, so they travel the same
// path through capture and splitting as a user's torch.jit.save file.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace ppstage {

class ScriptModuleBuilder {
 public:
  ScriptModuleBuilder();

  // Returns a new instance of `class_name` (e.g. "Block"). `init` registers the instance's
  // parameters, buffers, attributes and submodules; every instance of a class must register
  // the same names with the same types. `methods` is TorchScript source, compiled once, when
  // the first instance of the class is made. Throws c10::Error on bad source.
  torch::jit::Module make(const std::string& class_name,
                          const std::function<void(torch::jit::Module&)>& init,
                          const std::string& methods = "");

 private:
  std::shared_ptr<torch::jit::CompilationUnit> unit_;
  std::map<std::string, c10::ClassTypePtr> classes_;
};

}  // namespace ppstage
