// Tensor memory of this process: a counting CPU allocator installed through c10's
// allocator interface (c10::SetAllocator), wrapping the allocator that was there. It counts
// the bytes of every CPU tensor storage allocated after installation, now and at peak;
// storages made before it keep their own deleter and are not counted.
//
// What a rank reports from it: the peak of tensor bytes over a run, and the peak
// activation memory: the peak within a step above what was allocated when the step began
// (parameters, optimizer state, buffers that live across steps), which is what a schedule's
// in-flight micro-batches cost.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace ppstage {

// Installs the counting allocator for CPU tensors (once per process; later calls do
// nothing). Call it before the model is built, so that its tensors are counted.
void installCountingAllocator();

// False until installCountingAllocator() ran: the figures below are then 0.
bool countingAllocatorInstalled();

// Bytes of tensor storage allocated through the counting allocator and not yet freed.
int64_t tensorBytesNow();
// The largest tensorBytesNow() since installation or the last resetTensorBytesPeak().
int64_t tensorBytesPeak();
// Starts the peak over from the bytes allocated now.
void resetTensorBytesPeak();

// The same for the tensors on `device`: the counting allocator's for the CPU; for a GPU the
// CUDA caching allocator's allocated bytes (what live tensors hold; its reserved bytes, the
// cache, are not counted), whose peak the reset starts over for the whole device.
int64_t tensorBytesNow(const c10::Device& device);
int64_t tensorBytesPeak(const c10::Device& device);
void resetTensorBytesPeak(const c10::Device& device);

}  // namespace ppstage
