// Text helpers of ppstage_core (core/text.h).
#include "ppstage/core/text.h"

#include <gtest/gtest.h>

namespace ppstage {
namespace {

TEST(PrintableText, KeepsPrintableAsciiAndValidUtf8) {
  EXPECT_EQ(printableText("--config 'a b.ini': line 3"), "--config 'a b.ini': line 3");
  EXPECT_EQ(printableText("données/模型.pt 🙂"), "données/模型.pt 🙂");
}

TEST(PrintableText, EscapesControlCharacters) {
  EXPECT_EQ(printableText(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printableText("bad\x1b[2Jname\x07.pt"), "bad\\x1b[2Jname\\x07.pt");
  EXPECT_EQ(printableText("tab\there\x7f"), "tab\\x09here\\x7f");
  EXPECT_EQ(printableText("\xc2\x85"), "\\xc2\\x85");  // U+0085, a C1 control character
  EXPECT_EQ(printableText("a\xe2\x80\xae"
                          "b"),
            "a\\xe2\\x80\\xaeb");                               // U+202E, a bidi override
  EXPECT_EQ(printableText("\xe2\x81\xa6"), "\\xe2\\x81\\xa6");  // U+2066, a bidi isolate
  EXPECT_EQ(printableText("\xe2\x80\xa8"), "\\xe2\\x80\\xa8");  // U+2028, a line separator
  EXPECT_EQ(printableText("\xe2\x80\x94"), "\xe2\x80\x94");     // U+2014, a dash, stays
}

TEST(PrintableText, EscapesBytesThatAreNotUtf8) {
  EXPECT_EQ(printableText("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printableText("\xe6\xa8"), "\\xe6\\xa8");                    // a sequence cut short
  EXPECT_EQ(printableText("\xc3"), "\\xc3");                             // at the end of the text
  EXPECT_EQ(printableText("\xc0\xaf"), "\\xc0\\xaf");                    // an overlong '/'
  EXPECT_EQ(printableText("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(printableText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
}

// "Did you mean": the nearest name within 2 edits (3 for long names), a swap of neighbours
// one edit; none when every name is further.
TEST(ClosestName, FindsTheNameAMisspellingMeant) {
  const std::vector<std::string> names = {"train.steps", "train.seed", "model.layers",
                                          "output.log_every", "data.path"};
  EXPECT_EQ(closestName("train.step", names), "train.steps");
  EXPECT_EQ(closestName("train.stpes", names), "train.steps");
  EXPECT_EQ(closestName("model.layres", names), "model.layers");
  EXPECT_EQ(closestName("output.logevery", names), "output.log_every");
  EXPECT_EQ(closestName("data.paths", names), "data.path");
  EXPECT_EQ(closestName("no.such_option", names), "");
  EXPECT_EQ(closestName("train.lr", names), "");
  EXPECT_EQ(closestName("", {}), "");
}

}  // namespace
}  // namespace ppstage
