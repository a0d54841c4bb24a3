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
// No tensor has a dimension near this many elements per sample or token. With coefficients
// at most this, their sums cannot overflow, nor DimSpec::at() for b * (L + 1) below 2^31.
constexpr int64_t kMaxCoefficient = int64_t{1} << 31;

// "16b", "-L", "3": one term of a dim's text (a zero coefficient gives no term).
void addTerm(std::string& text, int64_t coefficient, const char* variable) {
  if (coefficient == 0) return;
  if (!text.empty() && coefficient > 0) text += '+';
  if (*variable == '\0' || (coefficient != 1 && coefficient != -1)) {
    text += std::to_string(coefficient);
  } else if (coefficient == -1) {
    text += '-';
  }
  text += variable;
}

std::string dimText(const DimSpec& d) {
  std::string text;
  addTerm(text, d.per_sample, "b");
  addTerm(text, d.per_sample_token, "bL");
  addTerm(text, d.per_token, "L");
  addTerm(text, d.fixed, "");
  return text.empty() ? "0" : text;
}

// The inverse of dimText: signed terms, each a coefficient (or none: 1) and b, bL, L or
// nothing.
DimSpec parseDim(const std::string& text) {
  DimSpec d;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find_first_of("+-", pos + 1);
    const std::string term = text.substr(pos, end == std::string::npos ? end : end - pos);
    pos = end == std::string::npos ? text.size() : end;
    const size_t variable = term.find_first_of("bL");
    const std::string number = term.substr(0, variable);
    PPSTAGE_CHECK(variable != std::string::npos || (number != "+" && number != "-"),
                  "malformed dimension '", text, "': a sign with no term after it");
    int64_t coefficient = 1;
    if (number == "-") {
      coefficient = -1;
    } else if (!number.empty() && number != "+") {
      size_t used = 0;
      try {
        coefficient = std::stoll(number, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      PPSTAGE_CHECK(used == number.size(), "malformed dimension '", text, "'");
    }
    const std::string name = variable == std::string::npos ? "" : term.substr(variable);
    int64_t* sum = &d.fixed;
    if (name == "b") {
      sum = &d.per_sample;
    } else if (name == "L") {
      sum = &d.per_token;
    } else {
      PPSTAGE_CHECK(name.empty() || name == "bL", "malformed dimension '", text, "'");
      if (!name.empty()) sum = &d.per_sample_token;
    }
    // Both at most kMaxCoefficient in size: the sum cannot overflow.
    const auto inRange = [](int64_t c) { return c >= -kMaxCoefficient && c <= kMaxCoefficient; };
    PPSTAGE_CHECK(inRange(coefficient), "dimension '", text, "' has a coefficient beyond ",
                  kMaxCoefficient);
    *sum += coefficient;
    PPSTAGE_CHECK(inRange(*sum), "dimension '", text, "' has a coefficient beyond ",
                  kMaxCoefficient);
  }
  return d;
}

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
  for (const DimSpec& d : dims) {
    PPSTAGE_INTERNAL_ASSERT(length > 0 || !d.followsLength(), "the sizes of '", name,
                            "', which follow the sequence length, without one");
    out.push_back(d.at(batch, length));
  }
  return out;
}

bool TensorSpec::followsLength() const {
  for (const DimSpec& d : dims) {
    if (d.followsLength()) return true;
  }
  return false;
}

std::string TensorSpec::describe() const {
  std::string text = name + " [";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + dimText(dims[i]);
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
    for (const DimSpec& d : t.dims) out << '\t' << dimText(d);
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
      t.dims.push_back(parseDim(dim));
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
