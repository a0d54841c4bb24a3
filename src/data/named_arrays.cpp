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
      fields_.push_back({a.name, {a.values.scalar_type(), a.values.sizes().slice(1).vec(), 0}});
    }
  }
  // One pass over the field (a mapped file is read through once).
  std::optional<std::pair<int64_t, int64_t>> valueRange(size_t field,
                                                        int64_t ignored) const override {
    const at::Tensor& values = arrays_.at(field).values;
    if (!at::isIntegralType(values.scalar_type(), /*includeBool=*/false)) return std::nullopt;
    const at::Tensor kept = values.masked_select(values.ne(ignored));
    if (kept.numel() == 0) return std::nullopt;
    return std::make_pair(kept.min().item<int64_t>(), kept.max().item<int64_t>());
  }

  int64_t size() const override { return arrays_.front().values.size(0); }
  const std::vector<SampleField>& fields() const override { return fields_; }
  at::Tensor sample(size_t field, int64_t index) const override {
    return arrays_.at(field).values.select(0, index).clone();
  }
  std::string describe() const override {
    return detail::concat(source_, ": ", size(), " samples of ", fieldsText(fields_));
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
  for (const NamedArray& a : arrays) {  // a size of 0 past the first (found by tests/fuzz)
    PPSTAGE_CHECK(a.values.numel() > 0, source, ": '", a.name, "' has samples of shape ",
                  shapeText(a.values.sizes().slice(1).vec()), ", which hold no values");
  }
  return std::make_unique<ArrayDataset>(std::move(arrays), source);
}

}  // namespace ppstage
