// dtypeName (include/ppstage/core/text.h): the one text helper that needs LibTorch's
// headers, so it lives in ppstage_lib while the rest of text.h is in ppstage_core.
#include "ppstage/core/text.h"

#include <c10/core/ScalarType.h>

namespace ppstage {

std::string dtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return c10::toString(dtype);
  }
}

}  // namespace ppstage
