// Every environment variable ppstage reads, declared here once with what it means: the
// knobs a launcher or a test sets, not configuration (that is --flags and config files).
#pragma once

#include <optional>

namespace ppstage::environment {

// OMPI_COMM_WORLD_SIZE: set by Open MPI's mpirun in every rank it starts. Ranks started
// so get pseudo-terminals and see a Ctrl-C as SIGTERM.
bool underOpenMpi();

// OMPI_COMM_WORLD_SIZE's value: how many ranks mpirun started in all; empty outside mpirun.
std::optional<int> worldRanks();

// OMPI_COMM_WORLD_LOCAL_SIZE: how many ranks mpirun started on this host (they share its
// cores); at least 1 when set, empty outside mpirun.
std::optional<int> localRanks();

// OMPI_MCA_btl_tcp_progress_thread: Open MPI's thread that moves TCP messages while a rank
// computes. Set to 1, where the user did not set it, by a rank of a job mpirun spread over
// several hosts (fewer local ranks than ranks), before MPI starts (comm/mpi_session.cpp,
// Note [Progress of messages between hosts]). Returns whether it is set to 1.
bool requestTcpProgressThreadAcrossHosts();

// OMPI_COMM_WORLD_LOCAL_RANK: this rank's index among them (0 to localRanks() - 1), the
// GPU --train.device cuda gives it; empty outside mpirun.
std::optional<int> localRank();

// PPSTAGE_CHECKPOINT_FAULT (testing aid): "kill:<steps>:<rank>" makes that rank kill
// itself in the middle of the checkpoint written after <steps> steps (train/checkpointer).
// Null when unset. Read once.
const char* checkpointFault();

}  // namespace ppstage::environment
