// See include/ppstage/comm/nccl_communicator.h. Built only with PPSTAGE_WITH_NCCL.
//
// Stream discipline: before an operation, an event recorded on the caller's current stream
// makes the communication stream wait for the tensor to be ready; the operation's own
// event, recorded on the communication stream after it, is what Work waits on. Tensors
// used on the communication stream are recorded with the caching allocator so that their
// memory is not reused while NCCL still reads or writes it.
#include "ppstage/comm/nccl_communicator.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "flat_buffers.h"
#include "ppstage/core/all_reduce_buckets.h"
#include "ppstage/core/error.h"

namespace ppstage {

namespace {

// A CUDA stream of the communicator's own. Not one of c10's pool, which hands out 32 streams
// round robin: two channels (comm/peer_channels.h) on one pooled stream would queue behind
// each other, which is the hang channels exist to avoid.
cudaStream_t ownStream(int device) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  cudaStream_t stream = nullptr;
  C10_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

}  // namespace

struct NcclCommunicator::Impl {
  Impl(std::unique_ptr<Communicator> bootstrap, int device)
      : bootstrap(std::move(bootstrap)),
        device(device),
        raw_stream(ownStream(device)),
        stream(
            c10::cuda::getStreamFromExternal(raw_stream, static_cast<c10::DeviceIndex>(device))) {}
  ~Impl() {
    if (comm != nullptr) ncclCommDestroy(comm);
    cudaStreamDestroy(raw_stream);
  }

  std::unique_ptr<Communicator> bootstrap;  // MPI: unique id, bytes, splits
  int device;
  cudaStream_t raw_stream;
  c10::cuda::CUDAStream stream;  // every NCCL call runs here
  ncclComm_t comm = nullptr;
  std::mutex mutex;
};

namespace {

using Clock = std::chrono::steady_clock;
using Impl = NcclCommunicator::Impl;

void checkNccl(ncclResult_t result, const char* call) {
  if (result != ncclSuccess) {
    throw CommError(detail::concat(call, " failed: ", ncclGetErrorString(result)));
  }
}

ncclDataType_t ncclType(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    default: break;
  }
  PPSTAGE_FAIL("NCCL all-reduce of ", c10::toString(dtype), " tensors is not supported");
}

// The communication stream waits for what the current stream has queued so far.
void orderAfterCurrentStream(const Impl& impl) {
  at::cuda::CUDAEvent ready;
  ready.record(c10::cuda::getCurrentCUDAStream(impl.device));
  ready.block(impl.stream);
}

void keepAliveOnStream(const at::Tensor& t, const Impl& impl) {
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), impl.stream);
}

// Polls `event` until done or `timeout`; on timeout aborts the NCCL communicator (the
// pending operation can never finish) and throws naming `what`.
template <typename Describe>
void waitEvent(Impl& impl, at::cuda::CUDAEvent& event, std::chrono::milliseconds timeout,
               const Describe& what) {
  const auto deadline = Clock::now() + timeout;
  while (!event.query()) {
    if (Clock::now() > deadline) {
      ncclCommAbort(impl.comm);
      impl.comm = nullptr;
      throw timeoutError(timeout, detail::concat("rank ", impl.bootstrap->rank(), " ", what()));
    }
    std::this_thread::yield();
  }
}

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<Impl> impl, std::shared_ptr<at::cuda::CUDAEvent> done, at::Tensor buffer,
           at::Tensor destination, int peer, MessageTag tag)
      : impl_(std::move(impl)),
        done_(std::move(done)),
        buffer_(std::move(buffer)),
        destination_(std::move(destination)),
        peer_(peer),
        tag_(tag) {}

  bool isCompleted() override { return finished_ || done_->query(); }

  void wait(std::chrono::milliseconds timeout) override {
    if (finished_) return;
    waitEvent(*impl_, *done_, timeout, [this] {
      return destination_.defined()
                 ? detail::concat("waiting to receive ", tag_.describe(), " from rank ", peer_)
                 : detail::concat("sending ", tag_.describe(), " to rank ", peer_);
    });
    finished_ = true;
    // Work queued later on the current stream sees the data.
    done_->block(c10::cuda::getCurrentCUDAStream(impl_->device));
    if (destination_.defined() && !destination_.is_same(buffer_)) destination_.copy_(buffer_);
  }

 private:
  std::shared_ptr<Impl> impl_;
  std::shared_ptr<at::cuda::CUDAEvent> done_;
  at::Tensor buffer_;
  at::Tensor destination_;
  int peer_;
  MessageTag tag_;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(std::unique_ptr<Communicator> bootstrap,
                                                           int device, CommOptions options) {
  auto impl = std::make_shared<Impl>(std::move(bootstrap), device);
  ncclUniqueId id;
  std::string bytes;
  if (impl->bootstrap->rank() == 0) {
    checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    bytes.assign(reinterpret_cast<const char*>(&id), sizeof id);
  }
  impl->bootstrap->broadcast(bytes, 0);
  PPSTAGE_INTERNAL_ASSERT(bytes.size() == sizeof id, "NCCL unique id of ", bytes.size(), " bytes");
  std::memcpy(&id, bytes.data(), sizeof id);
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  checkNccl(ncclCommInitRank(&impl->comm, impl->bootstrap->size(), id, impl->bootstrap->rank()),
            "ncclCommInitRank");
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl), options));
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<Impl> impl, CommOptions options)
    : Communicator(options), impl_(std::move(impl)) {}

NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::rank() const { return impl_->bootstrap->rank(); }
int NcclCommunicator::size() const { return impl_->bootstrap->size(); }

std::vector<std::shared_ptr<Work>> NcclCommunicator::batch(const std::vector<P2pOp>& ops) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  PPSTAGE_CHECK(impl_->comm != nullptr, "the NCCL communicator was aborted");
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(impl_->device));
  // Contiguous buffers first (a send's packing copy runs on the current stream), then the
  // communication stream waits for all of it: recording the event before the packing
  // would let NCCL read the buffer before its bytes are written.
  std::vector<at::Tensor> buffers;
  for (const P2pOp& op : ops) {
    PPSTAGE_CHECK(op.tensor.is_cuda() && op.tensor.get_device() == impl_->device,
                  "NCCL sends tensors on cuda:", impl_->device, "; got one on ",
                  op.tensor.device());
    const bool send = op.kind == P2pOp::Kind::kSend;
    if (op.tensor.is_contiguous()) {
      buffers.push_back(op.tensor);
    } else {
      buffers.push_back(send ? op.tensor.contiguous()
                             : at::empty_like(op.tensor, at::MemoryFormat::Contiguous));
    }
  }
  orderAfterCurrentStream(*impl_);
  checkNccl(ncclGroupStart(), "ncclGroupStart");
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2pOp& op = ops[i];
    const bool send = op.kind == P2pOp::Kind::kSend;
    const at::Tensor& buffer = buffers[i];
    const size_t bytes = buffer.numel() * buffer.element_size();
    const ncclResult_t result =
        send ? ncclSend(buffer.data_ptr(), bytes, ncclUint8, op.peer, impl_->comm, impl_->stream)
             : ncclRecv(buffer.data_ptr(), bytes, ncclUint8, op.peer, impl_->comm, impl_->stream);
    if (result != ncclSuccess) {
      ncclGroupEnd();
      checkNccl(result, send ? "ncclSend" : "ncclRecv");
    }
    keepAliveOnStream(buffer, *impl_);
  }
  checkNccl(ncclGroupEnd(), "ncclGroupEnd");
  auto done = std::make_shared<at::cuda::CUDAEvent>();
  done->record(impl_->stream);
  std::vector<std::shared_ptr<Work>> works;
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool send = ops[i].kind == P2pOp::Kind::kSend;
    works.push_back(std::make_shared<NcclWork>(
        impl_, done, buffers[i], send ? at::Tensor() : ops[i].tensor, ops[i].peer, ops[i].tag));
  }
  return works;
}

std::shared_ptr<Work> NcclCommunicator::send(const at::Tensor& tensor, int dst, MessageTag tag) {
  return batch({P2pOp{P2pOp::Kind::kSend, tensor, dst, tag}}).front();
}

std::shared_ptr<Work> NcclCommunicator::recv(const at::Tensor& tensor, int src, MessageTag tag) {
  return batch({P2pOp{P2pOp::Kind::kRecv, tensor, src, tag}}).front();
}

void NcclCommunicator::allReduceSum(const std::vector<at::Tensor>& tensors) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(impl_->device));
  // In the planner's buckets (core/all_reduce_buckets.h); bf16 and fp16 summed in fp32, as
  // MPI sums them.
  for (std::vector<at::Tensor>& bucket : bucketsByDtype(tensors, kAllReduceBucketBytes)) {
    FlatBuffer flat = flatten(std::move(bucket));
    const at::ScalarType dtype = flat.buffer.scalar_type();
    if (dtype == at::kBFloat16 || dtype == at::kHalf) flat.buffer = flat.buffer.to(at::kFloat);
    const at::Tensor& buffer = flat.buffer;
    at::cuda::CUDAEvent done;
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      PPSTAGE_CHECK(impl_->comm != nullptr, "the NCCL communicator was aborted");
      orderAfterCurrentStream(*impl_);
      checkNccl(ncclAllReduce(buffer.data_ptr(), buffer.data_ptr(), buffer.numel(),
                              ncclType(buffer.scalar_type()), ncclSum, impl_->comm, impl_->stream),
                "ncclAllReduce");
      keepAliveOnStream(buffer, *impl_);
      done.record(impl_->stream);
    }
    waitEvent(*impl_, done, options().timeout, [&] {
      return detail::concat("in an all-reduce of ", flat.tensors.size(), " tensors");
    });
    done.block(c10::cuda::getCurrentCUDAStream(impl_->device));
    unflatten(flat);
  }
}

void NcclCommunicator::broadcast(std::string& bytes, int root) {
  impl_->bootstrap->broadcast(bytes, root);
}

void NcclCommunicator::barrier() {
  at::Tensor one = at::ones({1}, at::device(at::Device(at::kCUDA, impl_->device)));
  allReduceSum({one});
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  return create(impl_->bootstrap->split(color, key), impl_->device, options());
}

void NcclCommunicator::abort(int exit_code) {
  if (impl_->comm != nullptr) ncclCommAbort(impl_->comm);
  impl_->comm = nullptr;
  impl_->bootstrap->abort(exit_code);
  std::abort();  // not reached: every Communicator::abort ends the process or throws
}

}  // namespace ppstage
