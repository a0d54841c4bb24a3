// A figure kept per kind of action, in one of two index spaces:
//   - the compute kinds F, B, I, W (ComputeKinds): seconds and counts of compute;
//   - the transfer kinds SEND_F, RECV_F, SEND_B, RECV_B (TransferKinds): seconds waited.
// A PerKind is indexed by the ActionKind itself (`costs[ActionKind::kBackward]`) and knows
// the kinds it holds, in order (`kinds()`, and their names through kindName), so a new kind
// is one line in its space and nothing counts slots by hand. Indexing it with a kind of the
// other space is our bug, caught by an internal assertion.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>

#include "ppstage/core/error.h"
#include "ppstage/schedule/action.h"

namespace ppstage {

struct ComputeKinds {
  static constexpr std::array<ActionKind, 4> kKinds = {ActionKind::kForward, ActionKind::kBackward,
                                                       ActionKind::kBackwardInput,
                                                       ActionKind::kBackwardWeight};
};

struct TransferKinds {
  static constexpr std::array<ActionKind, 4> kKinds = {
      ActionKind::kSendForward, ActionKind::kRecvForward, ActionKind::kSendBackward,
      ActionKind::kRecvBackward};
};

template <typename T, typename Space>
class PerKind {
 public:
  static constexpr size_t kSize = Space::kKinds.size();
  static constexpr const std::array<ActionKind, kSize>& kinds() { return Space::kKinds; }

  PerKind() = default;
  // One value per kind, in kinds() order: PerCompute<double>{f, b, i, w}.
  PerKind(std::initializer_list<T> values) {
    PPSTAGE_INTERNAL_ASSERT(values.size() == kSize, values.size(), " values for ", kSize, " kinds");
    std::copy(values.begin(), values.end(), values_.begin());
  }

  T& operator[](ActionKind kind) { return values_[indexOf(kind)]; }
  const T& operator[](ActionKind kind) const { return values_[indexOf(kind)]; }

  // The values in kinds() order.
  T* begin() { return values_.data(); }
  T* end() { return values_.data() + kSize; }
  const T* begin() const { return values_.data(); }
  const T* end() const { return values_.data() + kSize; }

  bool operator==(const PerKind& other) const { return values_ == other.values_; }

 private:
  static size_t indexOf(ActionKind kind) {
    for (size_t i = 0; i < kSize; ++i) {
      if (Space::kKinds[i] == kind) return i;
    }
    PPSTAGE_INTERNAL_FAIL("the action kind ", kindName(kind), " is not one of this figure's");
  }

  std::array<T, kSize> values_{};
};

// Per compute kind: F, B, I, W.
template <typename T>
using PerCompute = PerKind<T, ComputeKinds>;
// Per transfer kind: SEND_F, RECV_F, SEND_B, RECV_B.
template <typename T>
using PerTransfer = PerKind<T, TransferKinds>;

}  // namespace ppstage
