// `ppstage bench-comm`: MPI point-to-point latency and bandwidth of MpiCommunicator against
// raw MPI_Send/MPI_Recv of the same bytes. Run under `mpirun -np 2`.
#include "commands.h"

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "mpi_job.h"
#include "ppstage/comm/mpi_communicator.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/comm/p2p_benchmark.h"
#include "ppstage/config/options.h"
#include "ppstage/core/error.h"
#include "run_command.h"

namespace ppstage::cli {
namespace {

void printRows(const std::vector<P2pBenchRow>& rows) {
  std::printf("%10s %8s %12s %12s %10s %10s %9s\n", "bytes", "iters", "ours us", "raw us",
              "ours GB/s", "raw GB/s", "ours/raw");
  for (const P2pBenchRow& r : rows) {
    std::printf("%10lld %8d %12.2f %12.2f %10.2f %10.2f %9.3f\n", static_cast<long long>(r.bytes),
                r.iterations, r.ours_s * 1e6, r.raw_s * 1e6, r.bytes / r.ours_s / 1e9,
                r.bytes / r.raw_s / 1e9, r.ours_s / r.raw_s);
  }
}

std::string rowsJson(const std::vector<P2pBenchRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const P2pBenchRow& r : rows) {
    out.push_back({{"bytes", r.bytes},
                   {"iterations", r.iterations},
                   {"ours_latency_us", r.ours_s * 1e6},
                   {"raw_latency_us", r.raw_s * 1e6},
                   {"ours_gb_per_s", r.bytes / r.ours_s / 1e9},
                   {"raw_gb_per_s", r.bytes / r.raw_s / 1e9},
                   {"overhead_ratio", r.ours_s / r.raw_s}});
  }
  return nlohmann::json{{"p2p", out}}.dump(2);
}

}  // namespace

int benchCommMain(int argc, const char* const* argv) {
  P2pBenchOptions bench;
  CommConfig comm_config;
  bool json = false;
  po::options_description options;
  po::options_description section("Benchmark [bench]");
  auto add = section.add_options();
  add("bench.min_bytes", po::value(&bench.min_bytes)->default_value(bench.min_bytes),
      "smallest message; sizes grow 4x at a time");
  add("bench.max_bytes", po::value(&bench.max_bytes)->default_value(bench.max_bytes),
      "largest message");
  add("bench.seconds",
      po::value(&bench.seconds_per_size)
          ->default_value(bench.seconds_per_size, shortestText(bench.seconds_per_size)),
      "time of one block of ping-pongs");
  add("bench.rounds", po::value(&bench.rounds)->default_value(bench.rounds),
      "blocks per method, alternating; the median block of each counts");
  options.add(section);
  addCommOptions(options, comm_config);
  po::options_description output("Output");
  output.add_options()("json", po::bool_switch(&json), "print the rows as JSON");
  options.add(output);
  const char* usage =
      "usage: mpirun -np 2 ppstage bench-comm [options] [--json]\n\n"
      "Ping-pongs messages of growing size between ranks 0 and 1, through ppstage's MPI\n"
      "communicator and through raw MPI_Send/MPI_Recv on the same bytes, in alternating\n"
      "blocks, and prints the median one-way latency, the bandwidth and the ratio of the\n"
      "two times (ours/raw: 1.00 is no overhead).";
  if (!parseOptions(argc, argv, options, usage, std::cout)) return 0;
  validate(comm_config);
  PPSTAGE_CHECK(bench.min_bytes >= 1, "--bench.min_bytes must be at least 1; got ",
                bench.min_bytes);
  PPSTAGE_CHECK(bench.max_bytes >= bench.min_bytes, "--bench.max_bytes must be at least ",
                "--bench.min_bytes (", bench.min_bytes, "); got ", bench.max_bytes);
  PPSTAGE_CHECK(bench.seconds_per_size > 0, "--bench.seconds must be positive; got ",
                bench.seconds_per_size);
  PPSTAGE_CHECK(bench.rounds >= 1, "--bench.rounds must be at least 1; got ", bench.rounds);

  MpiSession mpi;
  return runCommand([&] {
    PPSTAGE_CHECK(mpi.worldSize() >= 2,
                  "bench-comm needs two ranks: mpirun -np 2 ppstage "
                  "bench-comm (this job has ",
                  mpi.worldSize(), ")");
    auto comm = MpiCommunicator::world(commOptionsOf(comm_config));
    const std::vector<P2pBenchRow> rows = runP2pBenchmark(*comm, bench);
    if (mpi.worldRank() == 0) {
      if (json) {
        std::cout << rowsJson(rows) << std::endl;
      } else {
        printRows(rows);
      }
    }
    return 0;
  });
}

}  // namespace ppstage::cli
