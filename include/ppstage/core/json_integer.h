// Integers read from JSON files a user hands over (checkpoint manifests, traces, metrics,
// cost profiles). nlohmann's get<int>() converts a float by a cast, undefined behaviour
// beyond the type's range ("step": 1e300; found by tests/fuzz), and wraps large unsigned
// numbers. These refuse anything that is not an integer in T's range with a
// ppstage::Error naming the file and the field.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "ppstage/core/error.h"

namespace ppstage {

// `value` (the field `what` of `source`; empty when the caller names the file) as a T.
template <typename T = int64_t>
T jsonInteger(const nlohmann::json& value, const std::string& what, const std::string& source) {
  const std::string where = source.empty() ? "" : source + ": ";
  PPSTAGE_CHECK(value.is_number_integer(), where, "'", what, "' is ", value.dump(),
                ", not an integer");
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<T>::max());
  const bool fits =
      value.is_number_unsigned()
          ? value.get<uint64_t>() <= kMax
          : value.get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                (value.get<int64_t>() < 0 || static_cast<uint64_t>(value.get<int64_t>()) <= kMax);
  PPSTAGE_CHECK(fits, where, "'", what, "' is ", value.dump(), ", out of range");
  return static_cast<T>(value.get<int64_t>());
}

// The field `key` of `object` as a T; nlohmann's out_of_range error when it is missing.
template <typename T = int64_t>
T jsonIntegerAt(const nlohmann::json& object, const char* key, const std::string& source) {
  return jsonInteger<T>(object.at(key), key, source);
}

// The same, or `fallback` when `object` has no `key`. T is never taken from `fallback`: a
// literal 0 must not make an int64 field an int.
template <typename T = int64_t>
T jsonIntegerOr(const nlohmann::json& object, const char* key,
                const std::common_type_t<T>& fallback, const std::string& source) {
  return object.contains(key) ? jsonIntegerAt<T>(object, key, source) : fallback;
}

}  // namespace ppstage
