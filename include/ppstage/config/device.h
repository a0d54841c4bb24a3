// --train.device and --comm.backend against the machine: the device each rank's tensors
// live on and what carries its pipeline's messages, decided before anything is built.
//
//   RankDevice d = resolveDevice(config.train.device, config.comm.backend, thisHost());
//
// Every refusal is one line that names the option and what to do instead (train prints it
// as `ppstage: error: ...` and exits 2 before the first step):
//   - cuda where no GPU is visible, and cuda:N beyond the GPUs this host shows;
//   - nccl with CPU tensors, or in a ppstage built without NCCL;
//   - NCCL (nccl, or auto with cuda) where two ranks of a host would share a GPU: NCCL
//     refuses that ("Duplicate GPU detected"); --comm.backend mpi stages tensors through
//     host memory instead, which is how several ranks share one GPU.
// Limits: the local rank and the ranks per host come from Open MPI's environment only
// (under another launcher every rank takes cuda:0); and a launcher that shows each rank
// one GPU of its own (CUDA_VISIBLE_DEVICES per task) looks like ranks sharing one, which
// NCCL's check refuses: name the device, cuda:0, and start one rank per visible GPU set.
#pragma once

#include <string>

#include "ppstage/config/config.h"

namespace ppstage {

// What this rank's host shows.
struct DeviceFacts {
  int gpus = 0;               // CUDA devices visible to the process
  std::string no_gpu_reason;  // why none, when gpus is 0
  int local_rank = 0;         // OMPI_COMM_WORLD_LOCAL_RANK; 0 outside mpirun
  int local_ranks = 1;        // OMPI_COMM_WORLD_LOCAL_SIZE; 1 outside mpirun
  bool nccl = false;          // this ppstage was built with NCCL (PPSTAGE_WITH_NCCL)
};

// This process's: the CUDA runtime's device count (core/software_stack.h), Open MPI's
// environment, the build; read once per process.
DeviceFacts thisHost();

// What a rank runs on.
struct RankDevice {
  int cuda_index = -1;                      // -1: the CPU
  CommBackend backend = CommBackend::kMpi;  // mpi or nccl, never auto
  bool cuda() const { return cuda_index >= 0; }
  // "cpu", "cuda:1"
  std::string text() const;
};

// --train.device `device` and --comm.backend `backend` on a host of `facts`. Throws
// ppstage::Error (the lines above); also for a `device` other than cpu, cuda, cuda:N.
RankDevice resolveDevice(const std::string& device, CommBackend backend, const DeviceFacts& facts);

}  // namespace ppstage
