// Options that take one of a few names (--compile.mode none|stage|block), as enums.
//
// Each such enum names its values once, in a specialization of Choices next to the enum:
//
//   template <>
//   struct Choices<Placement> {
//     static constexpr const char* kOption = "pipeline.placement";
//     static constexpr std::pair<Placement, const char*> kNames[] = {
//         {Placement::kLoop, "loop"}, {Placement::kV, "v"}};
//   };
//
// The option validators (src/config/options.cpp) parse the text once with parseChoice;
// everything downstream compares enums and prints them with toString.
#pragma once

#include <iterator>
#include <string>
#include <utility>

#include "ppstage/core/error.h"

namespace ppstage {

template <typename Enum>
struct Choices;  // kOption, the option's name; kNames, {value, name} in the order errors list

// The name of `value` ("stage").
template <typename Enum, typename = decltype(Choices<Enum>::kNames)>
const char* toString(Enum value) {
  for (const auto& [choice, name] : Choices<Enum>::kNames) {
    if (choice == value) return name;
  }
  PPSTAGE_INTERNAL_FAIL("a value of --", Choices<Enum>::kOption, " has no name");
}

// The value named `text`. Throws ppstage::Error naming the option and every allowed name,
// `also` (an extra word the caller accepts, such as "auto") last:
// "--compile.mode must be none, stage or block; got 'fast'".
template <typename Enum>
Enum parseChoice(const std::string& text, const char* also = nullptr) {
  std::string allowed;
  const auto& names = Choices<Enum>::kNames;
  const size_t count = std::size(names) + (also != nullptr ? 1 : 0);
  size_t listed = 0;
  for (const auto& [choice, name] : names) {
    if (text == name) return choice;
    allowed += (listed == 0 ? "" : listed + 1 == count ? " or " : ", ") + std::string(name);
    ++listed;
  }
  if (also != nullptr) allowed += (listed == 0 ? "" : " or ") + std::string(also);
  PPSTAGE_FAIL("--", Choices<Enum>::kOption, " must be ", allowed, "; got '", text, "'");
}

}  // namespace ppstage
