// See include/ppstage/comm/p2p_benchmark.h.
#include "ppstage/comm/p2p_benchmark.h"

#include <ATen/ATen.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>

#include "ppstage/comm/mpi_communicator.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"
#include "ppstage/core/statistics.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

constexpr MessageTag kPing = controlTag(ControlChannel::kBenchmark);
constexpr int kRawTag = 77;

// Seconds for `n` ping-pongs through the Communicator.
double oursPingPong(Communicator& comm, const at::Tensor& buffer, int n) {
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    if (comm.rank() == 0) {
      comm.sendSync(buffer, 1, kPing);
      comm.recvSync(buffer, 1, kPing);
    } else {
      comm.recvSync(buffer, 0, kPing);
      comm.sendSync(buffer, 0, kPing);
    }
  }
  return secondsSince(start);
}

// Seconds for `n` ping-pongs of blocking MPI on the same bytes.
double rawPingPong(MPI_Comm comm, int rank, const at::Tensor& buffer, int n) {
  const int bytes = static_cast<int>(buffer.nbytes());
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    if (rank == 0) {
      MPI_Send(buffer.data_ptr(), bytes, MPI_BYTE, 1, kRawTag, comm);
      MPI_Recv(buffer.data_ptr(), bytes, MPI_BYTE, 1, kRawTag, comm, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buffer.data_ptr(), bytes, MPI_BYTE, 0, kRawTag, comm, MPI_STATUS_IGNORE);
      MPI_Send(buffer.data_ptr(), bytes, MPI_BYTE, 0, kRawTag, comm);
    }
  }
  return secondsSince(start);
}

// Rank 0 decides; everyone learns it.
int agree(MPI_Comm comm, int value) {
  MPI_Bcast(&value, 1, MPI_INT, 0, comm);
  return value;
}

}  // namespace

std::vector<P2pBenchRow> runP2pBenchmark(MpiCommunicator& comm, const P2pBenchOptions& options) {
  PPSTAGE_CHECK(comm.size() >= 2, "the point-to-point benchmark needs two ranks (mpirun -np 2)");
  MPI_Comm raw = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw);
  const bool active = comm.rank() < 2;
  std::vector<P2pBenchRow> rows;
  for (int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 4) {
    const at::Tensor buffer = at::full({bytes}, comm.rank() + 1, at::kByte);
    // Calibrate on the raw loop so that each round takes about seconds_per_size.
    double probe = active ? rawPingPong(raw, comm.rank(), buffer, 3) / 3 : 0;
    const int n = agree(
        raw,
        std::clamp(static_cast<int>(options.seconds_per_size / std::max(probe, 1e-7)), 5, 20000));
    P2pBenchRow row{bytes, n, 1e30, 1e30};
    // Short blocks of each method, alternating ABBA so that both see the same noise; the
    // median block of each method counts (robust to a neighbour's burst on a shared host).
    std::vector<double> ours, raws;
    for (int block = 0; block < 2 * options.rounds; ++block) {
      MPI_Barrier(raw);
      if (!active) continue;
      if ((block + block / 2) % 2 == 0) {
        ours.push_back(oursPingPong(comm, buffer, n) / (2.0 * n));
      } else {
        raws.push_back(rawPingPong(raw, comm.rank(), buffer, n) / (2.0 * n));
      }
    }
    if (active) {
      row.ours_s = median(ours);
      row.raw_s = median(raws);
    }
    if (comm.rank() == 0) rows.push_back(row);
  }
  MPI_Comm_free(&raw);
  return rows;
}

}  // namespace ppstage
