// The message of the ppstage::Error that `f` throws, or "(no error)".
#pragma once

#include <functional>
#include <string>

#include "ppstage/core/error.h"

namespace ppstage::test {

inline std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace ppstage::test
