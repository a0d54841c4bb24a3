// See named_arrays.h.
#include "named_arrays.h"

#include <ATen/ATen.h>

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"

namespace ppstage {
namespace {

class ArrayDataset : public Dataset {
 public:
  ArrayDataset(std::vector<NamedArray> arrays, std::string source)
      : arrays_(std::move(arrays)), source_(std::move(source)) {
    for (const NamedArray& a : arrays_) {
      SampleShape sample{a.values.scalar_type(), a.values.sizes().slice(1).vec(), 0};
      if (at::isIntegralType(sample.dtype, /*includeBool=*/false) && a.values.numel() > 0) {
        sample.token_bound = a.values.max().item<int64_t>() + 1;
        sample.lowest = a.values.min().item<int64_t>();
      }
      fields_.push_back({a.name, std::move(sample)});
    }
  }

  int64_t size() const override { return arrays_.front().values.size(0); }
  const std::vector<SampleField>& fields() const override { return fields_; }
  at::Tensor sample(size_t field, int64_t index) const override {
    return arrays_.at(field).values.select(0, index).clone();
  }
  std::string describe() const override {
    std::vector<std::string> parts;
    for (const SampleField& f : fields_) {
      parts.push_back(f.name + " " + dtypeName(f.sample.dtype) + " " + shapeText(f.sample.shape));
    }
    return detail::concat(source_, ": ", size(), " samples of ", joinText(parts, ", "));
  }

 private:
  std::vector<NamedArray> arrays_;
  std::string source_;
  std::vector<SampleField> fields_;
};

}  // namespace

std::unique_ptr<Dataset> arrayDataset(std::vector<NamedArray> arrays, const std::string& source) {
  PPSTAGE_CHECK(!arrays.empty(), source, " holds no tensors");
  const NamedArray& first = arrays.front();
  for (const NamedArray& a : arrays) {
    PPSTAGE_CHECK(a.values.dim() >= 1, source, ": '", a.name, "' is a scalar; every tensor ",
                  "needs the samples along its first dimension");
    PPSTAGE_CHECK(a.values.size(0) == first.values.size(0), source,
                  ": the tensors' first dimensions differ ('", first.name, "' has ",
                  first.values.size(0), " samples, '", a.name, "' ", a.values.size(0),
                  "); every tensor needs one entry per sample");
  }
  PPSTAGE_CHECK(first.values.size(0) > 0, source, " holds no samples");
  return std::make_unique<ArrayDataset>(std::move(arrays), source);
}

}  // namespace ppstage
