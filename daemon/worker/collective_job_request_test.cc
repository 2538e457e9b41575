// How a CollectiveRequest becomes a CollectiveJob: every field a client sends is checked
// before anything reaches the executor, and the error names the field.
#include "daemon/worker/collective_job_request.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "daemon/shm/arrival_marks.h"
#include "wire/collective_request.h"

namespace ringsync {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

CollectiveSpec Floats(CollectiveKind kind, uint64_t count) {
  CollectiveSpec spec;
  spec.kind = kind;
  spec.name = "grad/fc1";
  spec.dtype = DType::kFloat32;
  spec.count = count;
  return spec;
}

v1::CollectiveRequest Request(const CollectiveSpec& spec) {
  v1::CollectiveRequest request;
  SetRequestSpec(spec, &request);
  request.set_client_sequence(1);
  request.set_inline_data(std::string(spec.count * DTypeSize(spec.dtype), '\x01'));
  return request;
}

// Why the request is refused ("" when it is not).
std::string Refusal(CollectiveKind kind, const v1::CollectiveRequest& request) {
  return std::string(JobFromRequest(kind, request, JobRequestLimits{}).status().message());
}

TEST(JobFromRequest, TakesTheSpecDataSequenceAndDeadline) {
  v1::CollectiveRequest request = Request(Floats(CollectiveKind::kAllReduce, 4));
  request.set_client_sequence(7);
  request.set_timeout_ms(1500);
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      JobFromRequest(CollectiveKind::kAllReduce, request, JobRequestLimits{});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)->spec, Floats(CollectiveKind::kAllReduce, 4));
  EXPECT_EQ((*job)->client_sequence, 7u);
  EXPECT_EQ((*job)->timeout, absl::Milliseconds(1500));
  EXPECT_FALSE((*job)->deadline.Passed());
  EXPECT_LE((*job)->deadline.Left(), absl::Milliseconds(1500)) << "counted from acceptance";
  EXPECT_EQ((*job)->inline_data.size(), 16u);
  EXPECT_FALSE((*job)->is_shared);

  request.set_timeout_ms(0);
  JobRequestLimits limits;
  limits.default_timeout = absl::Seconds(9);
  job = JobFromRequest(CollectiveKind::kAllReduce, request, limits);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)->timeout, absl::Seconds(9)) << "0: the worker's default";
}

TEST(JobFromRequest, AnAllGathersInlineBufferGrowsToTheRingWithItsInputFirst) {
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job = JobFromRequest(
      CollectiveKind::kAllGather, Request(Floats(CollectiveKind::kAllGather, 2)),
      JobRequestLimits{});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)->ResultBuffer(3).size(), 24u) << "3 ranks x 2 float32";
  EXPECT_EQ((*job)->inline_data[0], std::byte{1});
}

TEST(JobFromRequest, AnUnevenAllToAllHoldsItsInputThenItsResult) {
  CollectiveSpec spec = Floats(CollectiveKind::kAllToAll, 3);
  spec.send_counts = {1, 2, 0};
  spec.receive_counts = {4, 0, 1};
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      JobFromRequest(CollectiveKind::kAllToAll, Request(spec), JobRequestLimits{});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)->inline_data.size(), 12u) << "the request carries the input only";
  EXPECT_EQ((*job)->ResultBuffer(3).size(), 32u) << "3 + 5 float32: the result follows";
  EXPECT_EQ((*job)->inline_data[0], std::byte{1});

  JobRequestLimits small;
  small.max_inline_bytes = 16;
  EXPECT_THAT(std::string(JobFromRequest(CollectiveKind::kAllToAll, Request(spec), small)
                              .status()
                              .message()),
              HasSubstr("result of 20 bytes is answered inline, so it must fit the worker's "
                        "--max_inline_bytes (16)"));
  v1::CollectiveRequest shared = Request(spec);
  shared.mutable_shared()->set_path("/dev/shm/ringsync-no-such-file-for-this-test");
  shared.mutable_shared()->set_size_bytes(32);
  EXPECT_TRUE(CheckedJobFromRequest(CollectiveKind::kAllToAll, shared, JobRequestLimits{}).ok())
      << "a region of the input and the result";
  shared.mutable_shared()->set_size_bytes(12);
  EXPECT_EQ(CheckedJobFromRequest(CollectiveKind::kAllToAll, shared, JobRequestLimits{})
                .status()
                .message(),
            "invalid shared.size_bytes: 12 bytes for 3 x float32 and a result of 20 bytes after "
            "it");
}

TEST(JobFromRequest, NamesTheFieldOfEveryBadRequest) {
  const CollectiveSpec spec = Floats(CollectiveKind::kAllReduce, 4);
  v1::CollectiveRequest request = Request(spec);
  request.set_inline_data("short");
  EXPECT_EQ(Refusal(CollectiveKind::kAllReduce, request),
            "invalid inline_data: 5 bytes for 4 x float32 (16 expected)");

  request = Request(spec);
  request.clear_inline_data();
  EXPECT_THAT(Refusal(CollectiveKind::kAllReduce, request),
              StartsWith("invalid data: neither inline_data nor shared"));

  request = Request(spec);
  request.set_client_sequence(0);
  EXPECT_THAT(Refusal(CollectiveKind::kAllReduce, request),
              StartsWith("invalid client_sequence"));

  request = Request(spec);
  request.set_timeout_ms(-1);
  EXPECT_THAT(Refusal(CollectiveKind::kAllReduce, request),
              StartsWith("invalid timeout_ms"));
  request.set_timeout_ms(int64_t{25} * 3600 * 1000);
  EXPECT_THAT(Refusal(CollectiveKind::kAllReduce, request), HasSubstr("24h"));

  request = Request(spec);
  request.mutable_spec()->set_name("");
  EXPECT_THAT(Refusal(CollectiveKind::kAllReduce, request),
              StartsWith("invalid spec: name is empty"));

  request = Request(spec);
  EXPECT_THAT(Refusal(CollectiveKind::kBroadcast, request),
              StartsWith("invalid spec: spec.kind is allreduce but the request came by the "
                         "broadcast RPC"));

  request = Request(spec);
  request.set_refused_by_client("collective 'grad/fc1' (...): name is 1025 bytes long");
  EXPECT_EQ(Refusal(CollectiveKind::kAllReduce, request),
            "its training process refused its own call: collective 'grad/fc1' (...): name is "
            "1025 bytes long");

  request = Request(Floats(CollectiveKind::kBarrier, 0));
  request.mutable_shared()->set_path("/dev/shm/ringsync-1-x");
  EXPECT_EQ(Refusal(CollectiveKind::kBarrier, request),
            "invalid shared: a barrier carries no data");
}

TEST(RefusedJob, HoldsTheRequestsTurnAndItsReason) {
  v1::CollectiveRequest request = Request(Floats(CollectiveKind::kAllReduce, 4));
  request.mutable_spec()->set_name(std::string(2000, 'n'));
  request.set_client_sequence(9);
  const absl::Status why = absl::InvalidArgumentError("invalid spec: name is 2000 bytes long");
  JobRequestLimits limits;
  limits.default_timeout = absl::Seconds(7);
  std::shared_ptr<CollectiveJob> job =
      RefusedJob(CollectiveKind::kAllReduce, request, why, limits);
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->refusal, why);
  EXPECT_EQ(job->client_sequence, 9u);
  EXPECT_EQ(job->timeout, absl::Seconds(7));
  EXPECT_EQ(job->spec.name, std::string(64, 'n') + "...") << "shown cut in messages";

  request.set_client_sequence(0);
  EXPECT_EQ(RefusedJob(CollectiveKind::kAllReduce, request, why, limits), nullptr)
      << "without a turn to take, only the RPC is refused";
}

TEST(JobFromRequest, OpensASharedRegionOnlyFromTheAllowedFolderForAClientOnTheSocket) {
  std::string pattern = "/dev/shm/ringsync-job-test-XXXXXX";
  const std::string dir = mkdtemp(pattern.data());
  const std::string path = dir + "/ringsync-1-0-grad";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_EQ(posix_fallocate(fd, 0, 64), 0);
  close(fd);
  JobRequestLimits limits;
  limits.shm_dir = dir;

  v1::CollectiveRequest request = Request(Floats(CollectiveKind::kAllGather, 4));
  request.mutable_shared()->set_path(path);
  request.mutable_shared()->set_size_bytes(64);
  EXPECT_THAT(std::string(
                  JobFromRequest(CollectiveKind::kAllGather, request, limits).status().message()),
              StartsWith("invalid shared: shared-memory tensors are accepted only from a client "
                         "on the worker's unix socket"))
      << "no shared_owner: the client is on TCP";
  EXPECT_TRUE(std::filesystem::exists(path)) << "a refused file is left alone";

  limits.shared_owner = PeerCredentials{.pid = 1, .uid = getuid(), .gid = getgid()};
  request.mutable_shared()->set_size_bytes(8);
  EXPECT_EQ(JobFromRequest(CollectiveKind::kAllGather, request, limits).status().message(),
            "invalid shared.size_bytes: 8 bytes for 4 x float32");

  request.mutable_shared()->set_size_bytes(64);  // an all-gather's region holds every slot
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      JobFromRequest(CollectiveKind::kAllGather, request, limits);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE((*job)->is_shared);
  EXPECT_EQ((*job)->data_bytes(), 64u);
  EXPECT_TRUE((*job)->bytes().empty()) << "read only when the collective starts";

  limits.shm_dir = "/tmp";
  EXPECT_FALSE(JobFromRequest(CollectiveKind::kAllGather, request, limits).ok())
      << "a file outside the allowed folder is never opened";
  std::filesystem::remove_all(dir);
}

TEST(CheckedJobFromRequest, ChecksASharedRequestWithoutOpeningItsFile) {
  v1::CollectiveRequest request = Request(Floats(CollectiveKind::kAllReduce, 4));
  request.mutable_shared()->set_path("/dev/shm/ringsync-no-such-file-for-this-test");
  request.mutable_shared()->set_size_bytes(16);
  absl::StatusOr<std::shared_ptr<CollectiveJob>> checked =
      CheckedJobFromRequest(CollectiveKind::kAllReduce, request, JobRequestLimits{});
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_FALSE((*checked)->is_shared);
  EXPECT_TRUE((*checked)->bytes().empty());
  EXPECT_FALSE(JobFromRequest(CollectiveKind::kAllReduce, request, JobRequestLimits{}).ok())
      << "mapping is JobFromRequest's step";

  request.mutable_shared()->set_size_bytes(8);
  EXPECT_EQ(CheckedJobFromRequest(CollectiveKind::kAllReduce, request, JobRequestLimits{})
                .status()
                .message(),
            "invalid shared.size_bytes: 8 bytes for 4 x float32");
}

// A sealed memfd of `bytes`, registered as this process's buffer (as the SDK's are).
struct RegisteredMemfd {
  explicit RegisteredMemfd(uint64_t bytes) : buffers(RegisteredBufferLimits{}) {
    fd = memfd_create("job-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ok = fd >= 0 && posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0 &&
         fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0;
    if (ok) id = buffers.Register(getpid(), getuid(), fd, bytes).value();
  }
  ~RegisteredMemfd() {
    if (fd >= 0) close(fd);
  }
  RegisteredMemfd(const RegisteredMemfd&) = delete;
  RegisteredMemfd& operator=(const RegisteredMemfd&) = delete;

  // A client's limits whose registered buffers are these.
  JobRequestLimits limits() {
    JobRequestLimits limits;
    limits.registered = &buffers;
    return limits;
  }

  int fd = -1;
  bool ok = false;
  RegisteredBuffers buffers;
  uint64_t id = 0;
};

TEST(JobFromRequest, ARegisteredTensorRunsInTheClientsMemoryWithinItsBuffer) {
  RegisteredMemfd memory(64);
  ASSERT_TRUE(memory.ok);
  const uint64_t id = memory.id;

  v1::CollectiveRequest request = Request(Floats(CollectiveKind::kAllReduce, 4));
  request.mutable_registered()->set_buffer_id(id);
  request.mutable_registered()->set_offset(48);
  request.mutable_registered()->set_size_bytes(16);
  EXPECT_THAT(Refusal(CollectiveKind::kAllReduce, request),
              HasSubstr("this client has no registered buffers"))
      << "a client over TCP has none";

  const JobRequestLimits limits = memory.limits();
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      JobFromRequest(CollectiveKind::kAllReduce, request, limits);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE((*job)->is_registered());
  EXPECT_EQ((*job)->data_bytes(), 0u) << "the worker holds no copy";
  EXPECT_EQ((*job)->bytes().size(), 16u);
  EXPECT_EQ((*job)->ResultBuffer(3).data(), (*job)->bytes().data());

  request.mutable_registered()->set_offset(49);
  EXPECT_THAT(std::string(JobFromRequest(CollectiveKind::kAllReduce, request, limits)
                              .status()
                              .message()),
              HasSubstr("exceeds its 64 bytes"));
  request.mutable_registered()->set_offset(0);
  request.mutable_registered()->set_size_bytes(12);
  EXPECT_EQ(JobFromRequest(CollectiveKind::kAllReduce, request, limits).status().message(),
            "invalid registered.size_bytes: 12 bytes for 4 x float32");
  request.mutable_registered()->set_size_bytes(16);
  request.mutable_registered()->set_buffer_id(id + 7);
  EXPECT_FALSE(JobFromRequest(CollectiveKind::kAllReduce, request, limits).ok());
}

TEST(JobFromRequest, OnlyABroadcastOrAScatterInSharedOrRegisteredMemoryMayLeaveItsInputOut) {
  RegisteredMemfd memory(64);
  ASSERT_TRUE(memory.ok);
  const uint64_t id = memory.id;
  const JobRequestLimits limits = memory.limits();

  v1::CollectiveRequest broadcast = Request(Floats(CollectiveKind::kBroadcast, 4));
  broadcast.mutable_registered()->set_buffer_id(id);
  broadcast.mutable_registered()->set_size_bytes(16);
  broadcast.set_input_left_out(true);
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      JobFromRequest(CollectiveKind::kBroadcast, broadcast, limits);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE((*job)->input_left_out);

  v1::CollectiveRequest inline_broadcast = Request(Floats(CollectiveKind::kBroadcast, 4));
  inline_broadcast.set_input_left_out(true);
  EXPECT_THAT(std::string(JobFromRequest(CollectiveKind::kBroadcast, inline_broadcast, limits)
                              .status()
                              .message()),
              HasSubstr("only a broadcast's shared or registered tensor, or a scatter's, may "
                        "leave its input out"))
      << "inline data is the input itself";
  v1::CollectiveRequest scatter = broadcast;  // a scatter's other ranks leave theirs out too
  scatter.mutable_spec()->set_kind(v1::COLLECTIVE_KIND_SCATTER);
  job = JobFromRequest(CollectiveKind::kScatter, scatter, limits);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE((*job)->input_left_out);
  // Inline, a scatter's other rank carries nothing: the worker makes the ring's room.
  v1::CollectiveRequest inline_scatter = Request(Floats(CollectiveKind::kScatter, 4));
  inline_scatter.set_input_left_out(true);
  inline_scatter.set_inline_data("");
  job = JobFromRequest(CollectiveKind::kScatter, inline_scatter, limits);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)->inline_data.size(), 16u);
  inline_scatter.set_inline_data(std::string(16, '\0'));
  EXPECT_FALSE(JobFromRequest(CollectiveKind::kScatter, inline_scatter, limits).ok())
      << "it carries none";
  JobRequestLimits small = limits;
  small.max_inline_bytes = 8;
  inline_scatter.set_inline_data("");
  EXPECT_THAT(std::string(JobFromRequest(CollectiveKind::kScatter, inline_scatter, small)
                              .status()
                              .message()),
              HasSubstr("must fit the worker's --max_inline_bytes (8)"));
  v1::CollectiveRequest allreduce = Request(Floats(CollectiveKind::kAllReduce, 4));
  *allreduce.mutable_registered() = broadcast.registered();
  allreduce.set_input_left_out(true);
  EXPECT_FALSE(JobFromRequest(CollectiveKind::kAllReduce, allreduce, limits).ok());
  v1::CollectiveRequest gather = Request(Floats(CollectiveKind::kGather, 4));
  gather.set_input_left_out(true);
  EXPECT_FALSE(JobFromRequest(CollectiveKind::kGather, gather, limits).ok())
      << "every rank's input goes to the root";
}

TEST(JobFromRequest, OnlyAGatherMayLeaveItsOutputOutInlineOrNot) {
  const JobRequestLimits limits;
  v1::CollectiveRequest gather = Request(Floats(CollectiveKind::kGather, 4));
  gather.set_output_left_out(true);
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      JobFromRequest(CollectiveKind::kGather, gather, limits);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE((*job)->output_left_out);
  v1::CollectiveRequest allgather = Request(Floats(CollectiveKind::kAllGather, 4));
  allgather.set_output_left_out(true);
  EXPECT_THAT(std::string(
                  JobFromRequest(CollectiveKind::kAllGather, allgather, limits).status().message()),
              HasSubstr("only a gather's may leave its output out"));
}

TEST(JobFromRequest, ARegisteredAllGatherRunsInARangeOfWholeSlotsItsInputFirst) {
  RegisteredMemfd memory(64);
  ASSERT_TRUE(memory.ok);
  const uint64_t id = memory.id;
  const JobRequestLimits limits = memory.limits();

  v1::CollectiveRequest gather = Request(Floats(CollectiveKind::kAllGather, 4));
  gather.mutable_registered()->set_buffer_id(id);
  gather.mutable_registered()->set_offset(16);
  gather.mutable_registered()->set_size_bytes(48);  // three ranks' 16 bytes
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      JobFromRequest(CollectiveKind::kAllGather, gather, limits);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)->data_bytes(), 0u) << "the worker holds no copy";
  EXPECT_EQ((*job)->ResultBuffer(3).size(), 48u) << "the range is the whole result";

  gather.mutable_registered()->set_size_bytes(40);
  EXPECT_EQ(JobFromRequest(CollectiveKind::kAllGather, gather, limits).status().message(),
            "invalid registered.size_bytes: 40 bytes for an all-gather of 4 x float32 (a whole "
            "number of inputs: one slot per rank)");
  gather.mutable_registered()->set_size_bytes(8);
  EXPECT_FALSE(JobFromRequest(CollectiveKind::kAllGather, gather, limits).ok())
      << "smaller than the input";

  v1::CollectiveRequest barrier = Request(Floats(CollectiveKind::kBarrier, 0));
  *barrier.mutable_registered() = gather.registered();
  EXPECT_THAT(std::string(JobFromRequest(CollectiveKind::kBarrier, barrier, limits)
                              .status()
                              .message()),
              HasSubstr("a barrier carries no data"));
}

TEST(JobFromRequest, ARegisteredAllReduceOrReduceScatterMayNameArrivalMarksTheWorkerChecks) {
  constexpr uint64_t kTensor = 256 << 10;  // 65,536 floats: one block
  const uint64_t buffer_bytes = ArrivalBufferBytes(kTensor);
  RegisteredMemfd memory(buffer_bytes);
  ASSERT_TRUE(memory.ok);
  const uint64_t id = memory.id;
  const JobRequestLimits limits = memory.limits();

  const ArrivalLayout layout = ClientArrivalLayout(kTensor);
  v1::CollectiveRequest request = Request(Floats(CollectiveKind::kAllReduce, kTensor / 4));
  request.mutable_registered()->set_buffer_id(id);
  request.mutable_registered()->set_size_bytes(kTensor);
  request.mutable_registered()->mutable_arrival()->set_block_bytes(layout.block_bytes);
  request.mutable_registered()->mutable_arrival()->set_marks_offset(layout.marks_offset);
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      JobFromRequest(CollectiveKind::kAllReduce, request, limits);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_NE((*job)->arrival, nullptr);
  // Nothing marked yet (the memfd is zeroed): the first block is awaited, not read.
  const WaitLimit now{SteadyDeadline(absl::ZeroDuration())};
  EXPECT_TRUE(absl::IsDeadlineExceeded((*job)->arrival->AwaitBytes(0, 4, now)));

  v1::CollectiveRequest inside = request;
  inside.mutable_registered()->mutable_arrival()->set_marks_offset(1024);
  EXPECT_THAT(std::string(JobFromRequest(CollectiveKind::kAllReduce, inside, limits)
                              .status()
                              .message()),
              HasSubstr("invalid registered.arrival.marks_offset: the marks [1024, 1036) "
                        "overlap the tensor"));
  v1::CollectiveRequest tiny = request;
  tiny.mutable_registered()->mutable_arrival()->set_block_bytes(512);
  EXPECT_THAT(std::string(JobFromRequest(CollectiveKind::kAllReduce, tiny, limits)
                              .status()
                              .message()),
              HasSubstr("invalid registered.arrival.block_bytes: 512 is below the least"));

  // A reduce-scatter reads its input as the all-reduce's first steps do.
  v1::CollectiveRequest scatter = Request(Floats(CollectiveKind::kReduceScatter, kTensor / 4));
  *scatter.mutable_registered() = request.registered();
  absl::StatusOr<std::shared_ptr<CollectiveJob>> scatter_job =
      JobFromRequest(CollectiveKind::kReduceScatter, scatter, limits);
  ASSERT_TRUE(scatter_job.ok()) << scatter_job.status();
  EXPECT_NE((*scatter_job)->arrival, nullptr);

  v1::CollectiveRequest broadcast = Request(Floats(CollectiveKind::kBroadcast, kTensor / 4));
  *broadcast.mutable_registered() = request.registered();
  EXPECT_THAT(std::string(JobFromRequest(CollectiveKind::kBroadcast, broadcast, limits)
                              .status()
                              .message()),
              HasSubstr("invalid registered.arrival: a broadcast reads its input at once"));
}

}  // namespace
}  // namespace ringsync
