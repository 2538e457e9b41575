// Fuzzes the worker's checks of a client's CollectiveRequest (CheckedJobFromRequest, the
// part of JobFromRequest that opens no file: a fuzzer must not map files a fuzzed request
// names) and RefusedJob, which stands in for a request the worker refuses.
//
// Input: one byte choosing the RPC (all-reduce, broadcast, all-gather, barrier,
// reduce-scatter, scatter, gather, all-to-all), then a
// serialized ringsync.v1.CollectiveRequest. Properties of an accepted request: its spec
// passes ValidateSpec and has the RPC's kind, the inline data is exactly count elements,
// the deadline lies within the allowed timeout, and the spec survives the way the SDK
// writes it (SetRequestSpec). A refusal's message and stand-in job stay bounded.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "core/collective.h"
#include "daemon/worker/collective_job_request.h"
#include "fuzz/fuzz_check.h"
#include "ringsync/v1/worker.pb.h"
#include "wire/collective_request.h"

namespace ringsync {
namespace {

// A refusal goes back to the client and into the worker's log: it quotes at most the
// 4 KiB of refused_by_client and a name of kMaxCollectiveNameBytes, plus its own words.
constexpr size_t kMaxRefusalBytes = 8192;

void CheckAccepted(CollectiveKind rpc_kind, const CollectiveJob& job,
                   const JobRequestLimits& limits) {
  FUZZ_CHECK(ValidateSpec(job.spec).ok());
  FUZZ_CHECK(job.spec.kind == rpc_kind);
  FUZZ_CHECK(job.client_sequence != 0);
  FUZZ_CHECK(!job.output_left_out || job.spec.kind == CollectiveKind::kGather);
  FUZZ_CHECK(!job.is_shared);  // nothing is mapped before the caller maps it
  FUZZ_CHECK(job.inline_data.empty() ||
             job.inline_data.size() == job.spec.count * DTypeSize(job.spec.dtype));
  FUZZ_CHECK(job.timeout > absl::ZeroDuration() && job.timeout <= limits.max_timeout);
  v1::CollectiveRequest rewritten;
  SetRequestSpec(job.spec, &rewritten);
  absl::StatusOr<CollectiveSpec> again = SpecOfRequest(rpc_kind, rewritten);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->name == job.spec.name && again->count == job.spec.count &&
             again->dtype == job.spec.dtype && again->root == job.spec.root);
}

void CheckRefused(CollectiveKind rpc_kind, const v1::CollectiveRequest& request,
                  const absl::Status& why, const JobRequestLimits& limits) {
  FUZZ_CHECK(why.code() == absl::StatusCode::kInvalidArgument);
  FUZZ_CHECK(why.message().size() <= kMaxRefusalBytes);
  std::shared_ptr<CollectiveJob> stand_in = RefusedJob(rpc_kind, request, why, limits);
  if (request.client_sequence() == 0) {
    FUZZ_CHECK(stand_in == nullptr);
    return;
  }
  FUZZ_CHECK(stand_in != nullptr && !stand_in->refusal.ok());
  FUZZ_CHECK(stand_in->spec.name.size() <= kMaxCollectiveNameBytes);
  FUZZ_CHECK(stand_in->timeout > absl::ZeroDuration() && stand_in->timeout <= limits.max_timeout);
  FUZZ_CHECK(stand_in->bytes().empty());
}

}  // namespace
}  // namespace ringsync

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringsync;
  if (size < 1) return 0;
  const auto rpc_kind = static_cast<CollectiveKind>(data[0] % 8 + 1);
  v1::CollectiveRequest request;
  if (!request.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  const JobRequestLimits limits;
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      CheckedJobFromRequest(rpc_kind, request, limits);
  if (job.ok()) {
    CheckAccepted(rpc_kind, **job, limits);
  } else {
    CheckRefused(rpc_kind, request, job.status(), limits);
  }
  return 0;
}
