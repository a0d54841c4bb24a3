// See include/ppstage/core/torch_save.h. What LibTorch's torch::jit::pickle_save writes, less
// its type tags (torch.jit._pickle.restore_type_tag calls around every dict and list).
#include "ppstage/core/torch_save.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <vector>

namespace ppstage {
namespace {

// `value` with every tensor in it on the CPU: a file written on a GPU loads anywhere
// (pickled as they are, CUDA tensors would carry a cuda:N location).
c10::IValue onCpu(const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    return t.defined() && !t.is_cpu() ? c10::IValue(t.cpu()) : value;
  }
  if (value.isGenericDict()) {
    const c10::Dict<c10::IValue, c10::IValue> dict = value.toGenericDict();
    c10::Dict<c10::IValue, c10::IValue> out(dict.keyType(), dict.valueType());
    for (const auto& entry : dict) out.insert(entry.key(), onCpu(entry.value()));
    return out;
  }
  if (value.isList()) {
    const c10::List<c10::IValue> list = value.toList();
    c10::impl::GenericList out(list.elementType());
    for (const c10::IValue& element : list) out.push_back(onCpu(element));
    return out;
  }
  if (value.isTuple()) {
    std::vector<c10::IValue> elements;
    for (const c10::IValue& element : value.toTupleRef().elements()) {
      elements.push_back(onCpu(element));
    }
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  return value;
}

}  // namespace

std::string torchSaveBytes(const c10::IValue& given) {
  const c10::IValue value = onCpu(given);
  std::vector<char> pickled;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t size) { pickled.insert(pickled.end(), bytes, bytes + size); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::string archive;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t size) {
    archive.append(static_cast<const char*>(bytes), size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(),
                                     writer);
  writer.writeEndOfFile();
  return archive;
}

}  // namespace ppstage
