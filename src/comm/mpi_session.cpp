// See include/ppstage/comm/mpi_session.h.
#include "ppstage/comm/mpi_session.h"

#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ppstage/comm/communicator.h"
#include "ppstage/comm/failure_channel.h"
#include "ppstage/core/environment.h"
#include "ppstage/core/error.h"
#include "ppstage/core/host_name.h"

namespace ppstage {

namespace {

// Every world rank's host name, in rank order (MpiSession's, for mpiRankName); empty
// outside a session.
std::vector<std::string>& worldHosts() {
  static std::vector<std::string> hosts;
  return hosts;
}

std::vector<int>& worldHostOfRanks() {
  static std::vector<int> hosts;
  return hosts;
}

// Every world rank's machine id and cores (mpiCpuLayout).
std::vector<std::string>& worldMachines() {
  static std::vector<std::string> machines;
  return machines;
}

std::vector<int>& worldCores() {
  static std::vector<int> cores;
  return cores;
}

// Every world rank's host by the shared-memory split: each rank's host is named by its
// lowest world rank, then numbered in the order of those.
std::vector<int> gatherHostOfRanks(int rank, int size) {
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int first = rank;
  MPI_Allreduce(&rank, &first, 1, MPI_INT, MPI_MIN, local);
  MPI_Comm_free(&local);
  std::vector<int> firsts(static_cast<size_t>(size));
  MPI_Allgather(&first, 1, MPI_INT, firsts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> hosts, seen;
  for (const int f : firsts) {
    auto at = std::find(seen.begin(), seen.end(), f);
    if (at == seen.end()) at = seen.insert(seen.end(), f);
    hosts.push_back(static_cast<int>(at - seen.begin()));
  }
  return hosts;
}

// Every world rank's `text` (its host name, its machine's id): one MPI_Allgather of
// kTextBytes per rank (longer ones are cut there).
std::vector<std::string> gatherWorldText(int size, const std::string& text) {
  constexpr int kTextBytes = 64;
  std::vector<char> mine(kTextBytes, '\0');
  std::copy_n(text.begin(), std::min<size_t>(text.size(), kTextBytes - 1), mine.begin());
  std::vector<char> all(static_cast<size_t>(size) * kTextBytes);
  MPI_Allgather(mine.data(), kTextBytes, MPI_CHAR, all.data(), kTextBytes, MPI_CHAR,
                MPI_COMM_WORLD);
  std::vector<std::string> texts;
  for (int r = 0; r < size; ++r) texts.emplace_back(&all[static_cast<size_t>(r) * kTextBytes]);
  return texts;
}

}  // namespace

// Note [Progress of messages between hosts]
// A rank posts its sends and receives early and computes while they travel
// (runtime/executor.h), entering MPI again only between actions. Over shared memory that
// is enough; over Open MPI's TCP transport a message larger than its eager limit (64 KiB)
// waits for a handshake that only a call into MPI answers, so each one arrived up to an
// action later: gpt-small at pp 2 with one stage per host (hosts made of network
// namespaces) stepped in 1.23-1.40 s where the actions and messages came to 0.78 s. Open
// MPI's TCP progress thread answers them as they come: 0.834 s against 0.775 s predicted.
// So in a job mpirun spread over several hosts (Open MPI says how many of its ranks are
// on this one) ppstage asks for it before MPI starts, unless the user set the parameter
// (environment::requestTcpProgressThreadAcrossHosts); it sleeps in poll() while nothing
// moves. Jobs on one host, which talk over shared memory, are left as they were: the
// thread is off by default in Open MPI, and some versions hung or crashed with it
// (open-mpi/ompi #1793, #5902), which no one-host run need risk.
MpiSession::MpiSession() {
  PPSTAGE_CHECK(!mpiActive(), "MPI is already initialized");
  environment::requestTcpProgressThreadAcrossHosts();
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    throw CommError("MPI_Init_thread failed");
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw CommError(detail::concat("MPI provides thread level ", provided,
                                   ", ppstage needs MPI_THREAD_SERIALIZED (", MPI_THREAD_SERIALIZED,
                                   ")"));
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  worldHosts() = gatherWorldText(size_, thisHostName());
  worldHostOfRanks() = gatherHostOfRanks(rank_, size_);
  worldMachines() = gatherWorldText(size_, thisMachineId());
  int cores = coresOfThisMachine();
  worldCores().assign(static_cast<size_t>(size_), 0);
  MPI_Allgather(&cores, 1, MPI_INT, worldCores().data(), 1, MPI_INT, MPI_COMM_WORLD);
  failure_channel_ = std::make_unique<FailureChannel>();
}

MpiSession::~MpiSession() {
  worldHosts().clear();
  worldHostOfRanks().clear();
  worldMachines().clear();
  worldCores().clear();
  if (!mpiActive()) return;
  failure_channel_.reset();
  MPI_Finalize();
}

bool mpiActive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

int mpiWorldRank() {
  if (!mpiActive()) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

std::string mpiRankName(int rank) {
  const std::vector<std::string>& hosts = worldHosts();
  const std::vector<int>& host_of_rank = worldHostOfRanks();
  const bool several =
      std::any_of(host_of_rank.begin(), host_of_rank.end(), [](int host) { return host != 0; });
  if (!several || rank < 0 || rank >= static_cast<int>(hosts.size())) {
    return detail::concat("rank ", rank);
  }
  return detail::concat("rank ", rank, " (host ", hosts[static_cast<size_t>(rank)], ")");
}

const std::vector<std::string>& mpiHostNames() { return worldHosts(); }

const std::vector<int>& mpiHostOfRanks() { return worldHostOfRanks(); }

CpuLayout mpiCpuLayout(int threads_per_rank) {
  if (worldMachines().empty()) return {};
  return cpuLayoutOf(worldMachines(), worldCores(), threads_per_rank);
}

int mpiWorldSize() {
  if (!mpiActive()) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace ppstage
