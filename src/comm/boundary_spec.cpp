// See include/ppstage/comm/boundary_spec.h.
#include "ppstage/comm/boundary_spec.h"

#include <ATen/ATen.h>

#include <cstring>
#include <sstream>

#include "ppstage/comm/communicator.h"
#include "ppstage/core/error.h"

namespace ppstage {
namespace {

constexpr const char* kMagic = "ppstage-boundary";
constexpr int kVersion = 2;

at::ScalarType parseDtype(const std::string& text) {
  for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions); ++i) {
    const auto dtype = static_cast<at::ScalarType>(i);
    if (text == c10::toString(dtype)) return dtype;
  }
  PPSTAGE_FAIL("unknown dtype '", text, "' in a boundary description");
}

// Posts `text` to `peer`: its length, then its bytes. The works keep the tensors alive.
std::vector<std::shared_ptr<Work>> postText(Communicator& comm, int peer, int stage,
                                            const std::string& text) {
  const at::Tensor length = at::tensor({static_cast<int64_t>(text.size())}, at::kLong);
  const at::Tensor bytes = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::memcpy(bytes.data_ptr(), text.data(), text.size());
  return {comm.send(length, peer, MessageTag{MessageKind::kMetadata, stage, 0, 0}),
          comm.send(bytes, peer, MessageTag{MessageKind::kMetadata, stage, 0, 1})};
}

std::string recvText(Communicator& comm, int peer, int stage) {
  const at::Tensor length = at::empty({1}, at::kLong);
  comm.recvSync(length, peer, MessageTag{MessageKind::kMetadata, stage, 0, 0});
  const int64_t n = length.item<int64_t>();
  PPSTAGE_CHECK(n >= 0 && n < (1 << 24), "rank ", peer, " sent a boundary description of ", n,
                " bytes");
  const at::Tensor bytes = at::empty({n}, at::kByte);
  comm.recvSync(bytes, peer, MessageTag{MessageKind::kMetadata, stage, 0, 1});
  return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(n));
}

}  // namespace

std::vector<int64_t> TensorSpec::sizes(int64_t batch, int64_t length) const {
  std::vector<int64_t> out;
  for (const AffineDim& d : dims) {
    PPSTAGE_INTERNAL_ASSERT(length > 0 || !d.followsLength(), "the sizes of '", name,
                            "', which follow the sequence length, without one");
    out.push_back(d.at(batch, length));
  }
  return out;
}

bool TensorSpec::followsLength() const {
  for (const AffineDim& d : dims) {
    if (d.followsLength()) return true;
  }
  return false;
}

std::string TensorSpec::describe() const {
  std::string text = name + " [";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + affineDimText(dims[i]);
  return text + "] " + c10::toString(dtype) + (requires_grad ? " grad" : "");
}

std::string BoundarySpec::describe() const {
  std::string text = detail::concat(tensors.size(), tensors.size() == 1 ? " tensor" : " tensors");
  for (size_t i = 0; i < tensors.size(); ++i) text += (i ? ", " : ": ") + tensors[i].describe();
  return text;
}

std::string BoundarySpec::serialize() const {
  std::ostringstream out;
  out << kMagic << ' ' << kVersion << ' ' << stage << ' ' << tensors.size() << '\n';
  for (const TensorSpec& t : tensors) {
    out << t.name << '\t' << c10::toString(t.dtype) << '\t' << (t.requires_grad ? 1 : 0) << '\t'
        << t.dims.size();
    for (const AffineDim& d : t.dims) out << '\t' << affineDimText(d);
    out << '\n';
  }
  return out.str();
}

BoundarySpec BoundarySpec::deserialize(const std::string& text) {
  std::istringstream in(text);
  std::string magic;
  int version = 0;
  size_t count = 0;
  BoundarySpec spec;
  in >> magic >> version >> spec.stage >> count;
  PPSTAGE_CHECK(in && magic == kMagic && version == kVersion, "not a version-", kVersion,
                " boundary description: '", text.substr(0, 40), "'");
  in.ignore(1, '\n');
  for (size_t i = 0; i < count; ++i) {
    std::string line;
    PPSTAGE_CHECK(std::getline(in, line), "boundary description ends after ", i, " of ", count,
                  " tensors");
    std::istringstream fields(line);
    TensorSpec t;
    std::string dtype;
    int grad = 0;
    size_t rank = 0;
    std::getline(fields, t.name, '\t');
    fields >> dtype >> grad >> rank;
    PPSTAGE_CHECK(static_cast<bool>(fields), "malformed tensor line in a boundary description: '",
                  line, "'");
    t.dtype = parseDtype(dtype);
    t.requires_grad = grad != 0;
    for (size_t d = 0; d < rank; ++d) {
      std::string dim;
      PPSTAGE_CHECK(static_cast<bool>(fields >> dim), "tensor line of a boundary description ",
                    "ends after ", d, " of its ", rank, " dims: '", line, "'");
      t.dims.push_back(parseAffineDim(dim));
    }
    spec.tensors.push_back(std::move(t));
  }
  return spec;
}

void exchangeBoundarySpec(Communicator& comm, int peer, const BoundarySpec& mine,
                          bool sender_side) {
  // Post our description first, then read the peer's: both ranks do the same, and posted
  // sends need no matching receive to be in flight, so neither waits on the other.
  const auto works = postText(comm, peer, mine.stage, mine.serialize());
  const BoundarySpec theirs = BoundarySpec::deserialize(recvText(comm, peer, mine.stage));
  for (const auto& work : works) work->wait(comm.options().timeout);
  if (theirs == mine) return;
  const int me = comm.rank();
  const BoundarySpec& sent = sender_side ? mine : theirs;
  const BoundarySpec& expected = sender_side ? theirs : mine;
  const int sender = sender_side ? me : peer;
  const int receiver = sender_side ? peer : me;
  PPSTAGE_FAIL("the boundary between stage ", mine.stage - 1, " (rank ", sender, ") and stage ",
               mine.stage, " (rank ", receiver, ") does not match: stage ", mine.stage - 1,
               " sends ", sent.describe(), "; stage ", mine.stage, " expects ",
               expected.describe());
}

std::vector<at::Tensor> allocateReceiveBuffers(const BoundarySpec& spec, int64_t batch,
                                               int64_t length) {
  std::vector<at::Tensor> buffers;
  for (const TensorSpec& t : spec.tensors) {
    buffers.push_back(at::empty(t.sizes(batch, length), t.dtype));
  }
  return buffers;
}

}  // namespace ppstage
