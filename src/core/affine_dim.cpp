// See include/ppstage/core/affine_dim.h.
#include "ppstage/core/affine_dim.h"

#include <stdexcept>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

// "16b", "-L", "3": one term of a dim's text (a zero coefficient gives no term).
void addTerm(std::string& text, int64_t coefficient, const char* variable) {
  if (coefficient == 0) return;
  if (!text.empty() && coefficient > 0) text += '+';
  if (*variable == '\0' || (coefficient != 1 && coefficient != -1)) {
    text += std::to_string(coefficient);
  } else if (coefficient == -1) {
    text += '-';
  }
  text += variable;
}

// The coefficient of one term's text ("16", "-", "+", ""), for the dim `text`.
int64_t coefficientOf(const std::string& number, const std::string& text) {
  if (number == "-") return -1;
  if (number.empty() || number == "+") return 1;
  size_t used = 0;
  int64_t coefficient = 0;
  try {
    coefficient = std::stoll(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  PPSTAGE_CHECK(used == number.size(), "malformed dimension '", text, "'");
  return coefficient;
}

}  // namespace

std::string affineDimText(const AffineDim& dim) {
  std::string text;
  addTerm(text, dim.per_sample, "b");
  addTerm(text, dim.per_sample_token, "bL");
  addTerm(text, dim.per_token, "L");
  addTerm(text, dim.fixed, "");
  return text.empty() ? "0" : text;
}

AffineDim parseAffineDim(const std::string& text) {
  AffineDim d;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find_first_of("+-", pos + 1);
    const std::string term = text.substr(pos, end == std::string::npos ? end : end - pos);
    pos = end == std::string::npos ? text.size() : end;
    const size_t variable = term.find_first_of("bL");
    const std::string number = term.substr(0, variable);
    PPSTAGE_CHECK(variable != std::string::npos || (number != "+" && number != "-"),
                  "malformed dimension '", text, "': a sign with no term after it");
    const int64_t coefficient = coefficientOf(number, text);
    const std::string name = variable == std::string::npos ? "" : term.substr(variable);
    int64_t* sum = &d.fixed;
    if (name == "b") {
      sum = &d.per_sample;
    } else if (name == "L") {
      sum = &d.per_token;
    } else {
      PPSTAGE_CHECK(name.empty() || name == "bL", "malformed dimension '", text, "'");
      if (!name.empty()) sum = &d.per_sample_token;
    }
    // Both at most kMaxAffineCoefficient in size: the sum cannot overflow.
    const auto inRange = [](int64_t c) {
      return c >= -kMaxAffineCoefficient && c <= kMaxAffineCoefficient;
    };
    PPSTAGE_CHECK(inRange(coefficient), "dimension '", text, "' has a coefficient beyond ",
                  kMaxAffineCoefficient);
    *sum += coefficient;
    PPSTAGE_CHECK(inRange(*sum), "dimension '", text, "' has a coefficient beyond ",
                  kMaxAffineCoefficient);
  }
  return d;
}

}  // namespace ppstage
