// The one shape algebra (core/affine_dim.h): a dimension as a function of the batch b and
// the sequence length L, and its text.
#include "ppstage/core/affine_dim.h"

#include <gtest/gtest.h>

#include <vector>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

TEST(AffineDim, EvaluatesAtABatchAndALength) {
  EXPECT_EQ((AffineDim{1, 0}).at(8), 8);              // a batch dimension
  EXPECT_EQ((AffineDim{16, 0}).at(4), 64);            // a flattened (b * 16) one
  EXPECT_EQ((AffineDim{0, 0, 1}).at(4, 33), 33);      // a sequence dimension
  EXPECT_EQ((AffineDim{0, 0, 0, 1}).at(4, 33), 132);  // a flattened (b * L) one
  EXPECT_EQ((AffineDim{2, 3, 5, 7}).at(4, 10), 8 + 3 + 50 + 280);
  EXPECT_FALSE((AffineDim{16, 3}).followsLength());
  EXPECT_TRUE((AffineDim{0, 0, 0, 1}).followsLength());
}

TEST(AffineDim, TextRoundTrips) {
  const std::vector<std::pair<AffineDim, std::string>> cases = {
      {{1, 0}, "b"},
      {{16, 0}, "16b"},
      {{0, 96}, "96"},
      {{0, 0}, "0"},
      {{0, 0, 1}, "L"},
      {{0, 0, 0, 1}, "bL"},
      {{0, 3, 0, 64}, "64bL+3"},
      {{-1, 2, -1, 0}, "-b-L+2"},
      {{2, -3, 0, -1}, "2b-bL-3"},
  };
  for (const auto& [dim, text] : cases) {
    EXPECT_EQ(affineDimText(dim), text);
    EXPECT_EQ(parseAffineDim(text), dim) << text;
  }
  EXPECT_EQ(parseAffineDim("b+b+L"), (AffineDim{2, 0, 1}));  // terms add up
}

TEST(AffineDim, MalformedTextIsRefusedNamingIt) {
  for (const std::string text : {"b+", "-", "x", "3q", "bb", "1.5b", "Lb"}) {
    try {
      parseAffineDim(text);
      ADD_FAILURE() << "'" << text << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dimension '" + text + "'"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(parseAffineDim("4294967296b"), Error);  // beyond kMaxAffineCoefficient
  EXPECT_THROW(parseAffineDim("2147483648b+2147483648b"), Error);
}

}  // namespace
}  // namespace ppstage
