#include "daemon/worker/collective_job_request.h"

#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/shm/arrival_marks.h"
#include "wire/collective_request.h"

namespace ringsync {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("invalid ", field, ": ", why));
}

// The request's timeout_ms, when it is within the limits' bound.
std::optional<absl::Duration> RequestedTimeout(const v1::CollectiveRequest& request,
                                               const JobRequestLimits& limits) {
  const absl::Duration timeout = absl::Milliseconds(request.timeout_ms());
  if (timeout < absl::ZeroDuration() || timeout > limits.max_timeout) return std::nullopt;
  return timeout;
}

// How long the job may take: its requested timeout, or the worker's default for 0 (or for
// a timeout out of bounds, which only a refused request may carry).
absl::Duration TimeoutOf(const v1::CollectiveRequest& request, const JobRequestLimits& limits) {
  const absl::Duration timeout =
      RequestedTimeout(request, limits).value_or(absl::ZeroDuration());
  return timeout > absl::ZeroDuration() ? timeout : limits.default_timeout;
}

// The job's deadline starts now, when the worker accepts the request.
void StartClock(const v1::CollectiveRequest& request, const JobRequestLimits& limits,
                CollectiveJob& job) {
  job.timeout = TimeoutOf(request, limits);
  job.deadline = SteadyDeadline(job.timeout);
  job.queued = SteadyStopwatch();
}

// The data the request carries for `spec`: inline bytes copied into the job, or a shared
// region whose size is checked (opened later, by OpenShared). An all-gather's region holds
// every rank's slot, so it may be larger than the input. A scatter's rank other than the
// root may carry no inline bytes (input_left_out): the worker makes the ring's room.
absl::Status CheckData(const v1::CollectiveRequest& request, const JobRequestLimits& limits,
                       CollectiveJob& job) {
  const CollectiveSpec& spec = job.spec;
  const CollectiveKindTraits traits = TraitsOf(spec.kind);
  const uint64_t bytes = spec.count * DTypeSize(spec.dtype);  // no overflow: count <= 2^40
  // An uneven all-to-all's region holds its input and then its result (the ring checks
  // that its splits are one per rank when it runs); ValidateSpec bounded their sums.
  const uint64_t result_bytes =
      HasUnevenBlocks(spec)
          ? ResultElements(spec, static_cast<int>(spec.receive_counts.size())).value_or(0) *
                DTypeSize(spec.dtype)
          : 0;
  const uint64_t room = bytes + result_bytes;
  const std::string and_result =
      result_bytes == 0 ? "" : absl::StrCat(" and a result of ", result_bytes, " bytes after it");
  switch (request.data_case()) {
    case v1::CollectiveRequest::kInlineData:
      if (request.input_left_out() && spec.kind == CollectiveKind::kScatter) {
        if (!request.inline_data().empty() || bytes > limits.max_inline_bytes) {
          return Invalid("inline_data", absl::StrCat(
              "a scatter that leaves its input out carries none, and its ", bytes,
              " bytes must fit the worker's --max_inline_bytes (", limits.max_inline_bytes,
              "); it carries ", request.inline_data().size()));
        }
        job.inline_data.resize(bytes);
        return absl::OkStatus();
      }
      if (request.inline_data().size() != bytes) {
        return Invalid("inline_data", absl::StrCat(request.inline_data().size(), " bytes for ",
                                                   spec.count, " x ", DTypeName(spec.dtype),
                                                   " (", bytes, " expected)"));
      }
      if (result_bytes > limits.max_inline_bytes) {
        return Invalid("inline_data", absl::StrCat(
            "an uneven all-to-all's result of ", result_bytes, " bytes is answered inline, so "
            "it must fit the worker's --max_inline_bytes (", limits.max_inline_bytes, ")"));
      }
      job.inline_data.resize(bytes);
      if (bytes > 0) std::memcpy(job.inline_data.data(), request.inline_data().data(), bytes);
      return absl::OkStatus();
    case v1::CollectiveRequest::kShared: {
      const v1::SharedTensor& shared = request.shared();
      if (!traits.carries_data) {
        return Invalid("shared", absl::StrCat("a ", CollectiveKindName(spec.kind),
                                              " carries no data"));
      }
      const bool size_ok =
          traits.gathers ? shared.size_bytes() >= bytes : shared.size_bytes() == room;
      if (!size_ok) {
        return Invalid("shared.size_bytes", absl::StrCat(shared.size_bytes(), " bytes for ",
                                                         spec.count, " x ", DTypeName(spec.dtype),
                                                         and_result));
      }
      return absl::OkStatus();
    }
    case v1::CollectiveRequest::kRegistered: {
      // Run in place: the range is the result. An all-reduce's or a broadcast's is the
      // tensor; an all-gather's holds every rank's slot, its input in the first, so a
      // whole number of inputs (the ring checks it is the ring's size when it runs).
      const uint64_t size = request.registered().size_bytes();
      if (!traits.carries_data) {
        return Invalid("registered", absl::StrCat("a ", CollectiveKindName(spec.kind),
                                                  " carries no data"));
      }
      if (traits.gathers) {
        if (bytes == 0 ? size != 0 : size < bytes || size % bytes != 0) {
          return Invalid("registered.size_bytes",
                         absl::StrCat(size, " bytes for an all-gather of ", spec.count, " x ",
                                      DTypeName(spec.dtype),
                                      " (a whole number of inputs: one slot per rank)"));
        }
        return absl::OkStatus();
      }
      if (size != room) {
        return Invalid("registered.size_bytes",
                       absl::StrCat(request.registered().size_bytes(), " bytes for ", spec.count,
                                    " x ", DTypeName(spec.dtype), and_result));
      }
      return absl::OkStatus();
    }
    case v1::CollectiveRequest::DATA_NOT_SET:
      if (bytes != 0) return Invalid("data", "neither inline_data nor shared is set");
      return absl::OkStatus();
  }
  return Invalid("data", "unknown kind of data");
}

// Opens the shared region of a checked request for `job`, if the client may name one.
absl::Status OpenShared(const v1::SharedTensor& shared, const JobRequestLimits& limits,
                        CollectiveJob& job) {
  if (!limits.shared_owner.has_value()) {
    return Invalid("shared", "shared-memory tensors are accepted only from a client on the "
                             "worker's unix socket; over TCP (--client_listen) tensors "
                             "travel inline");
  }
  const SharedFileRules rules{limits.shm_dir, limits.shared_owner->uid, limits.shared_owner->pid};
  absl::StatusOr<SharedTensor> opened = SharedTensor::Open(
      rules, shared.path(), shared.offset(), shared.size_bytes(), shared.reuse());
  if (!opened.ok()) return opened.status();
  job.is_shared = true;
  job.shared = *std::move(opened);
  return absl::OkStatus();
}

// The marks a registered tensor's client sets as its input lands (daemon/shm/arrival_marks.h),
// checked against the buffer they lie in.
absl::StatusOr<std::shared_ptr<const InputArrival>> ArrivalOf(
    const v1::RegisteredTensor& registered, const CollectiveSpec& spec,
    const std::shared_ptr<SealedMapping>& mapping) {
  // The ring all-reduce and the reduce-scatter (its first steps) await each range where
  // they first read it; the other kinds read all of their input at once.
  if (spec.kind != CollectiveKind::kAllReduce && spec.kind != CollectiveKind::kReduceScatter) {
    return Invalid("registered.arrival", absl::StrCat("a ", CollectiveKindName(spec.kind),
                                                      " reads its input at once (all-reduce "
                                                      "and reduce-scatter only)"));
  }
  const ArrivalLayout layout{registered.offset(), registered.size_bytes(),
                             registered.arrival().block_bytes(),
                             registered.arrival().marks_offset()};
  const absl::Span<std::byte> buffer = mapping->bytes();
  if (absl::Status valid = ValidateArrivalLayout(layout, buffer.size()); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid ", valid.message()));
  }
  return std::make_shared<ArrivalMarks>(buffer.data() + layout.marks_offset, layout, mapping);
}

}  // namespace

absl::StatusOr<std::shared_ptr<CollectiveJob>> CheckedJobFromRequest(
    CollectiveKind rpc_kind, const v1::CollectiveRequest& request, const JobRequestLimits& limits) {
  if (!request.refused_by_client().empty()) {
    constexpr size_t kMaxReason = 4096;
    return absl::InvalidArgumentError(absl::StrCat(
        "its training process refused its own call: ",
        absl::string_view(request.refused_by_client()).substr(0, kMaxReason)));
  }
  absl::StatusOr<CollectiveSpec> spec = SpecOfRequest(rpc_kind, request);
  if (!spec.ok()) return Invalid("spec", spec.status().message());
  if (!RequestedTimeout(request, limits).has_value()) {
    return Invalid("timeout_ms",
                   absl::StrCat("must be between 0 (the worker's default) and ",
                                absl::FormatDuration(limits.max_timeout)));
  }
  if (request.client_sequence() == 0) {
    return Invalid("client_sequence", "must count 1, 2, 3, ... per attached client");
  }
  auto job = std::make_shared<CollectiveJob>();
  job->spec = *std::move(spec);
  job->client_sequence = request.client_sequence();
  if (request.has_membership()) job->membership = request.membership();
  StartClock(request, limits, *job);
  if (absl::Status data = CheckData(request, limits, *job); !data.ok()) return data;
  if (request.input_left_out()) {
    const bool inline_data = request.data_case() == v1::CollectiveRequest::kInlineData;
    if (job->spec.kind != CollectiveKind::kScatter &&
        (job->spec.kind != CollectiveKind::kBroadcast || inline_data)) {
      return Invalid("input_left_out", "only a broadcast's shared or registered tensor, or a "
                                       "scatter's, may leave its input out");
    }
    job->input_left_out = true;
  }
  if (request.output_left_out()) {
    if (job->spec.kind != CollectiveKind::kGather) {
      return Invalid("output_left_out", "only a gather's may leave its output out");
    }
    job->output_left_out = true;
  }
  return job;
}

absl::StatusOr<std::shared_ptr<CollectiveJob>> JobFromRequest(CollectiveKind rpc_kind,
                                                              const v1::CollectiveRequest& request,
                                                              const JobRequestLimits& limits) {
  absl::StatusOr<std::shared_ptr<CollectiveJob>> job =
      CheckedJobFromRequest(rpc_kind, request, limits);
  if (job.ok() && request.has_registered()) {
    if (limits.registered == nullptr) {
      return Invalid("registered", "this client has no registered buffers");
    }
    const v1::RegisteredTensor& registered = request.registered();
    absl::StatusOr<RegisteredBuffers::Slice> slice =
        limits.registered->Find(registered.buffer_id(), registered.offset(), registered.size_bytes());
    if (!slice.ok()) return slice.status();
    (*job)->registered = *std::move(slice);
    if (registered.has_arrival()) {
      absl::StatusOr<std::shared_ptr<const InputArrival>> arrival =
          ArrivalOf(registered, (*job)->spec, (*job)->registered.mapping);
      if (!arrival.ok()) return arrival.status();
      (*job)->arrival = *std::move(arrival);
    }
    return job;
  }
  if (!job.ok() || !request.has_shared()) return job;
  if (absl::Status opened = OpenShared(request.shared(), limits, **job); !opened.ok()) return opened;
  return job;
}

std::shared_ptr<CollectiveJob> RefusedJob(CollectiveKind rpc_kind,
                                          const v1::CollectiveRequest& request,
                                          const absl::Status& why, const JobRequestLimits& limits) {
  if (request.client_sequence() == 0) return nullptr;
  auto job = std::make_shared<CollectiveJob>();
  job->refusal = why;
  job->spec.kind = rpc_kind;
  // Only for messages: a name too long to be valid is shown cut.
  constexpr size_t kShownName = 64;
  const std::string& name = request.spec().name();
  job->spec.name = name.size() <= kMaxCollectiveNameBytes ? name : name.substr(0, kShownName) + "...";
  job->spec.dtype = DType::kUInt8;
  job->client_sequence = request.client_sequence();
  if (request.has_membership()) job->membership = request.membership();
  StartClock(request, limits, *job);
  return job;
}

}  // namespace ringsync
