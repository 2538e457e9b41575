#include "daemon/shm/slot_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/shm/shared_futex.h"

namespace ringsync {
namespace {

constexpr uint64_t kMagic = 0x31544f4c53535200;  // "\0RSSLOT1"
constexpr uint64_t kHeaderBytes = 64;
constexpr uint64_t kStateStride = 64;  // one cache line per slot's state word
constexpr uint64_t kPage = 4096;
constexpr size_t kTokenHexDigits = 32;
constexpr absl::string_view kNamePrefix = "ringsync-peer-";
// How long one futex wait sleeps before the limit and the stream are looked at again.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(5);

enum SlotState : uint32_t { kFree = 0, kFull = 1, kTaken = 2 };

struct Header {
  uint64_t magic;
  uint32_t slot_count;
  uint32_t reserved;
  uint64_t slot_bytes;
  char token[kTokenHexDigits];
  uint64_t mailbox_capacity;
};
static_assert(sizeof(Header) <= kHeaderBytes);

std::atomic<uint32_t>* StateWord(std::byte* base, uint32_t slot) {
  return reinterpret_cast<std::atomic<uint32_t>*>(base + kHeaderBytes + kStateStride * slot);
}

absl::Status Invalid(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("shared-memory slot ring: ", why));
}

std::string RandomToken() {
  absl::BitGen random;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(random),
                         absl::Uniform<uint64_t>(random));
}

bool IsToken(absl::string_view token) {
  if (token.size() != kTokenHexDigits) return false;
  for (char c : token) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c)) || absl::ascii_isupper(c)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<SlotRingGeometry> SlotRingGeometry::Of(uint32_t slot_count, uint64_t slot_bytes,
                                                      uint64_t mailbox_capacity) {
  if (slot_count < 1 || slot_count > kMaxSlots) {
    return Invalid(absl::StrCat(slot_count, " slots: 1..", kMaxSlots, " allowed"));
  }
  if (slot_bytes < kMinSlotBytes || slot_bytes > kMaxSlotBytes) {
    return Invalid(absl::StrCat("slots of ", slot_bytes, " bytes: ", kMinSlotBytes, "..",
                                kMaxSlotBytes, " allowed"));
  }
  SlotRingGeometry g;
  g.slot_count = slot_count;
  g.slot_bytes = slot_bytes;
  g.data_offset = (kHeaderBytes + kStateStride * slot_count + kPage - 1) / kPage * kPage;
  g.region_bytes = g.data_offset + slot_bytes * slot_count;  // <= 4 GiB + 8 KiB: no overflow
  if (mailbox_capacity != 0) {
    if (absl::Status s = FrameMailboxLayout::CheckCapacity(mailbox_capacity); !s.ok()) {
      return Invalid(s.message());
    }
    g.mailbox_offset = (g.region_bytes + kPage - 1) / kPage * kPage;
    g.mailbox_capacity = mailbox_capacity;
    g.region_bytes = g.mailbox_offset + FrameMailboxLayout::AreaBytes(mailbox_capacity);
  }
  return g;
}

SlotRingWriter::SlotRingWriter(int fd, std::byte* base, SlotRingGeometry geometry,
                               SlotRingOffer offer)
    : fd_(fd), base_(base), geometry_(geometry), offer_(std::move(offer)) {
  if (geometry_.mailbox_capacity != 0) {
    mailbox_ = std::make_unique<FrameMailboxWriter>(
        absl::MakeSpan(base_ + geometry_.mailbox_offset,
                       FrameMailboxLayout::AreaBytes(geometry_.mailbox_capacity)),
        geometry_.mailbox_capacity);
  }
}

absl::StatusOr<std::unique_ptr<SlotRingWriter>> SlotRingWriter::Create(uint32_t slot_count,
                                                                       uint64_t slot_bytes,
                                                                       uint64_t mailbox_capacity) {
  absl::StatusOr<SlotRingGeometry> geometry =
      SlotRingGeometry::Of(slot_count, slot_bytes, mailbox_capacity);
  if (!geometry.ok()) return geometry.status();
  const std::string token = RandomToken();
  const std::string name = absl::StrCat(kNamePrefix, token);
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return absl::ResourceExhaustedError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  const off_t size = static_cast<off_t>(geometry->region_bytes);
  auto fail = [fd](absl::string_view what) {
    const int error = errno;
    ::close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("shared-memory slot ring: ", what, ": ", std::strerror(error)));
  };
  if (::ftruncate(fd, size) != 0) return fail("ftruncate");
  if (const int error = ::posix_fallocate(fd, 0, size); error != 0) {
    errno = error;
    return fail("fallocate");
  }
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return fail("seal");
  void* data = ::mmap(nullptr, geometry->region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return fail("mmap");
  auto* base = static_cast<std::byte*>(data);
  Header header{};
  header.magic = kMagic;
  header.slot_count = slot_count;
  header.slot_bytes = slot_bytes;
  header.mailbox_capacity = mailbox_capacity;
  std::memcpy(header.token, token.data(), kTokenHexDigits);
  std::memcpy(base, &header, sizeof(header));  // state words start zero: every slot free
  SlotRingOffer offer;
  offer.pid = ::getpid();
  offer.fd = fd;
  offer.region_bytes = geometry->region_bytes;
  offer.slot_count = slot_count;
  offer.slot_bytes = slot_bytes;
  offer.mailbox_capacity = mailbox_capacity;
  offer.token = token;
  return std::unique_ptr<SlotRingWriter>(new SlotRingWriter(fd, base, *geometry, std::move(offer)));
}

SlotRingWriter::~SlotRingWriter() {
  ::munmap(base_, geometry_.region_bytes);
  ::close(fd_);
}

absl::StatusOr<uint32_t> SlotRingWriter::Put(absl::Span<const std::byte> payload,
                                             const WaitLimit& limit,
                                             const std::function<bool()>& gone) {
  if (payload.size() > geometry_.slot_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a payload of ", payload.size(),
                                                   " bytes does not fit a slot of ",
                                                   geometry_.slot_bytes));
  }
  const uint32_t slot = next_;
  std::atomic<uint32_t>* state = StateWord(base_, slot);
  while (true) {
    const uint32_t now = state->load(std::memory_order_acquire);
    if (now == kFree) break;
    if (limit.IsCancelled()) return absl::CancelledError("waiting for a free shared-memory slot");
    if (gone()) return absl::UnavailableError("the receiver's stream ended");
    const absl::Duration left = limit.deadline.Left();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("waiting for the receiver to free a shared-memory slot");
    }
    SharedFutexWait(state, now, std::min(left, kWaitSlice));
  }
  std::memcpy(base_ + geometry_.data_offset + geometry_.slot_bytes * slot, payload.data(),
              payload.size());
  state->store(kFull, std::memory_order_release);
  next_ = (next_ + 1) % geometry_.slot_count;
  return slot;
}

void SlotRingWriter::Unput(uint32_t slot) {
  if (slot >= geometry_.slot_count) return;
  uint32_t expected = kFull;
  StateWord(base_, slot)->compare_exchange_strong(expected, kFree, std::memory_order_release);
}

absl::StatusOr<std::shared_ptr<SlotRingReader>> SlotRingReader::Attach(const SlotRingOffer& offer,
                                                                       uid_t uid) {
  if (offer.pid <= 0 || offer.pid > std::numeric_limits<pid_t>::max() || offer.fd < 0 ||
      offer.fd > std::numeric_limits<int>::max()) {
    return Invalid(absl::StrCat("pid ", offer.pid, " fd ", offer.fd, " out of range"));
  }
  if (!IsToken(offer.token)) return Invalid("the token must be 32 lowercase hex digits");
  if (offer.slot_count > SlotRingGeometry::kMaxSlots) return Invalid("too many slots");
  absl::StatusOr<SlotRingGeometry> geometry =
      SlotRingGeometry::Of(offer.slot_count, offer.slot_bytes, offer.mailbox_capacity);
  if (!geometry.ok()) return geometry.status();
  if (offer.region_bytes != geometry->region_bytes) {
    return Invalid(absl::StrCat("region of ", offer.region_bytes, " bytes; its geometry needs ",
                                geometry->region_bytes));
  }
  // The descriptor must be the sender's own ring: its memfd carries the token in its name.
  const std::string path = absl::StrCat("/proc/", offer.pid, "/fd/", offer.fd);
  char target[256] = {};
  const ssize_t length = ::readlink(path.c_str(), target, sizeof(target) - 1);
  const std::string expected = absl::StrCat("/memfd:", kNamePrefix, offer.token, " (deleted)");
  if (length < 0 || absl::string_view(target, static_cast<size_t>(length)) != expected) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared-memory slot ring: ", path, " is not the sender's ring (",
        length < 0 ? std::strerror(errno) : "another file", ")"));
  }
  absl::StatusOr<std::shared_ptr<SealedMapping>> mapping =
      SealedMapping::Map(path, uid, offer.region_bytes);
  if (!mapping.ok()) return mapping.status();
  Header header{};
  std::memcpy(&header, (*mapping)->bytes().data(), sizeof(header));
  if (header.magic != kMagic || header.slot_count != offer.slot_count ||
      header.slot_bytes != offer.slot_bytes || header.mailbox_capacity != offer.mailbox_capacity ||
      absl::string_view(header.token, kTokenHexDigits) != offer.token) {
    return Invalid("the region's header does not match the offer");
  }
  return std::shared_ptr<SlotRingReader>(new SlotRingReader(*std::move(mapping), *geometry));
}

SlotRingReader::SlotRingReader(std::shared_ptr<SealedMapping> mapping, SlotRingGeometry geometry)
    : mapping_(std::move(mapping)), geometry_(geometry) {
  if (geometry_.mailbox_capacity != 0) {
    mailbox_ = std::make_unique<FrameMailboxReader>(
        mapping_->bytes().subspan(geometry_.mailbox_offset,
                                  FrameMailboxLayout::AreaBytes(geometry_.mailbox_capacity)),
        geometry_.mailbox_capacity);
  }
}

absl::StatusOr<SlotRingReader::Payload> SlotRingReader::Take(uint64_t slot, uint64_t bytes) {
  if (slot >= geometry_.slot_count || bytes > geometry_.slot_bytes) {
    return Invalid(absl::StrCat("slot ", slot, " with ", bytes, " bytes is outside ",
                                geometry_.slot_count, " slots of ", geometry_.slot_bytes));
  }
  std::byte* base = mapping_->bytes().data();
  const auto index = static_cast<uint32_t>(slot);
  uint32_t expected = kFull;
  if (!StateWord(base, index)->compare_exchange_strong(expected, kTaken, std::memory_order_acquire)) {
    return Invalid(absl::StrCat("slot ", slot, " was named but not filled"));
  }
  Payload payload;
  payload.bytes = absl::Span<const std::byte>(
      base + geometry_.data_offset + geometry_.slot_bytes * index, bytes);
  std::shared_ptr<SlotRingReader> self = shared_from_this();
  payload.storage = std::shared_ptr<const void>(
      payload.bytes.data(), [self = std::move(self), index](const void*) { self->Free(index); });
  return payload;
}

void SlotRingReader::Free(uint32_t slot) {
  std::atomic<uint32_t>* state = StateWord(mapping_->bytes().data(), slot);
  state->store(kFree, std::memory_order_release);
  SharedFutexWake(state);
}

}  // namespace ringsync
