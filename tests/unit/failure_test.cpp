// How a job reports failures on several ranks (comm/failure_reports.h, comm/agreement.h):
// the summary line, the report's wire format, and agreed setup failures that differ.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/failure_reports.h"
#include "ppstage/core/error.h"
#include "support/local_ranks.h"

namespace ppstage {
namespace {

using test::runRanks;

TEST(FailureReports, TheSummaryNamesEveryFailedRankAndTheEarliestCause) {
  const std::vector<FailureReport> reports = {
      {3, 1, 100.5, "timed out after 5 s: rank 3 waiting to receive ... from rank 1"},
      {1, 2, 100.25, "stage 1, micro-batch 0, step 1: forward fails: boom"},
      {2, 1, 100.75, "timed out"}};
  EXPECT_EQ(failureSummary(reports, 4),
            "ranks 1, 2 and 3 of 4 failed; the first: [rank 1] stage 1, micro-batch 0, step 1: "
            "forward fails: boom");
  EXPECT_EQ(firstFailure(reports).exit_code, 2);
  EXPECT_EQ(failureSummary({reports[0], reports[1]}, 4).substr(0, 27),
            "ranks 1 and 3 of 4 failed; ");
  EXPECT_EQ(failureSummary({reports[1]}, 2),
            "rank 1 of 2 failed: [rank 1] stage 1, micro-batch 0, step 1: forward fails: boom");
  // The same time: the lower rank is the first.
  EXPECT_EQ(firstFailure({{5, 1, 7.0, "b"}, {4, 2, 7.0, "a"}}).rank, 4);
}

TEST(FailureReports, AReportReadsBackFromItsBytes) {
  const FailureReport sent{7, 2, 1764770000.123456, "two\nlines, and % and \xff bytes"};
  const FailureReport got = decodeFailureReport(encodeFailureReport(sent));
  EXPECT_EQ(got.rank, sent.rank);
  EXPECT_EQ(got.exit_code, sent.exit_code);
  EXPECT_DOUBLE_EQ(got.time_s, sent.time_s);
  EXPECT_EQ(got.message, sent.message);
  EXPECT_THROW(decodeFailureReport("hello"), Error);
  EXPECT_THROW(decodeFailureReport("ppstage-failure-1\n1\n"), Error);
}

TEST(FailureReports, AReportIsDatedByTheSystemClockWhenMade) {
  const auto seconds = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const double before = seconds();
  const FailureReport report = failureReportNow(3, 4, "disk full");
  const double after = seconds();
  EXPECT_EQ(report.rank, 3);
  EXPECT_EQ(report.exit_code, 4);
  EXPECT_EQ(report.message, "disk full");
  EXPECT_GE(report.time_s, before);
  EXPECT_LE(report.time_s, after);
}

// Each rank's JobError: what it prints (empty: nothing), the summary, the exit code.
struct Outcome {
  std::string line, summary;
  int exit_code = 0;
};

std::vector<Outcome> agreedOutcomes(int size, const std::function<void(int)>& setup) {
  std::vector<Outcome> outcomes(static_cast<size_t>(size));
  runRanks(size, [&](int rank, Communicator& comm) {
    try {
      runAgreed(comm, [&] { setup(rank); });
    } catch (const JobError& e) {
      Outcome& o = outcomes[static_cast<size_t>(rank)];
      o.line = e.reportsHere() ? e.what() : "";
      o.summary = e.summary();
      o.exit_code = e.exitCode();
    }
  });
  return outcomes;
}

TEST(Agreement, RanksThatFailDifferentlyEachPrintTheirOwnAndRankZeroSumsUp) {
  const std::vector<Outcome> outcomes = agreedOutcomes(4, [](int rank) {
    if (rank == 1) throw Error("rank 1 cannot open the data file");
    if (rank == 3) throw std::runtime_error("out of memory\nat line 2");
  });
  EXPECT_EQ(outcomes[0].line, "");
  EXPECT_EQ(outcomes[0].summary,
            "ranks 1 and 3 of 4 failed; the first: [rank 1] rank 1 cannot open the data file");
  EXPECT_EQ(outcomes[1].line, "[rank 1] rank 1 cannot open the data file");
  EXPECT_EQ(outcomes[2].line, "");
  EXPECT_EQ(outcomes[3].line, "[rank 3] out of memory");
  for (int r = 1; r < 4; ++r) EXPECT_EQ(outcomes[static_cast<size_t>(r)].summary, "");
  for (const Outcome& o : outcomes) EXPECT_EQ(o.exit_code, 2);  // the lowest failed rank's
}

TEST(Agreement, RanksThatFailAlikeGetOneLine) {
  const std::vector<Outcome> outcomes =
      agreedOutcomes(3, [](int) { throw Error("--train.steps must be positive"); });
  EXPECT_EQ(outcomes[0].line, "--train.steps must be positive");
  EXPECT_EQ(outcomes[0].summary, "");
  EXPECT_EQ(outcomes[1].line, "");
  EXPECT_EQ(outcomes[2].line, "");
}

}  // namespace
}  // namespace ppstage
