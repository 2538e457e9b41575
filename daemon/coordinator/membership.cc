#include "daemon/coordinator/membership.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/coordinator/request_validation.h"

namespace ringsync {
namespace {

// How many names a message or log line lists before it says "..." instead.
constexpr size_t kMaxListedWorkers = 16;
// How many ended sessions are remembered for the "why must I rejoin" message.
constexpr size_t kMaxRememberedEndings = 4 * Membership::kMaxWorldSize;

std::string Describe(absl::string_view worker_id, int rank) {
  if (rank < 0) return absl::StrCat("worker ", worker_id, " (not in a ring)");
  return absl::StrCat("worker ", worker_id, " (rank ", rank, ")");
}

std::string DescribeView(const View& view) {
  if (!view.formed()) {
    return absl::StrCat("ring dissolved: generation ", view.generation, ": ",
                        view.dissolved_reason);
  }
  std::vector<std::string> listed;
  for (const ViewMember& m : view.members) {
    if (listed.size() == kMaxListedWorkers) {
      listed.push_back("...");
      break;
    }
    listed.push_back(absl::StrCat(m.rank, "=", m.worker_id, "@", m.peer_address));
  }
  return absl::StrCat("ring formed: generation ", view.generation, ", ", view.members.size(),
                      " ranks [", absl::StrJoin(listed, ", "), "]");
}

}  // namespace

Membership::Membership(Options options) : options_(options) {
  view_.dissolved_reason =
      absl::StrCat("ring not formed yet: waiting for ", options_.world_size, " workers to join");
}

absl::StatusOr<uint64_t> Membership::Join(const JoinInfo& info, absl::Time now) {
  Expire(now);
  if (absl::Status s = ValidateWorkerId(info.worker_id); !s.ok()) return s;
  if (absl::Status s = ValidateHostPort("peer_address", info.peer_address, /*reachable=*/true);
      !s.ok()) {
    return s;
  }
  if (!info.http_address.empty()) {
    if (absl::Status s = ValidateHostPort("http_address", info.http_address, /*reachable=*/false);
        !s.ok()) {
      return s;
    }
  }
  if (info.last_generation > kMaxGeneration) {
    return absl::InvalidArgumentError(absl::StrCat(
        "last_generation ", info.last_generation, " of worker '", info.worker_id,
        "' is implausible (more than 2^62)"));
  }
  if (auto it = workers_.find(info.worker_id); it != workers_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "worker id '", info.worker_id, "' is already live (joined with peer address ",
        it->second.info.peer_address, ", last heard ",
        absl::FormatDuration(absl::Trunc(now - it->second.last_seen, absl::Milliseconds(1))),
        " ago); give every worker a unique --worker_id, or, if that process is gone, retry "
        "after its session expires (heartbeat timeout ",
        absl::FormatDuration(options_.heartbeat_timeout), ")"));
  }
  if (live_workers() >= options_.world_size) {
    std::vector<std::string> ids;
    for (const auto& [id, worker] : workers_) {
      if (ids.size() == kMaxListedWorkers) {
        ids.push_back("...");
        break;
      }
      ids.push_back(id);
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "the ring is full: ", live_workers(), " of ", options_.world_size,
        " workers are live (", absl::StrJoin(ids, ", "), "), so worker '", info.worker_id,
        "' cannot join; start the coordinator with a larger --world_size, or stop a worker "
        "first"));
  }

  Worker worker;
  worker.info = info;
  worker.session_token = NewToken();
  worker.last_seen = now;
  worker.last_report.worker_id = info.worker_id;
  const uint64_t token = worker.session_token;
  workers_.emplace(info.worker_id, std::move(worker));
  ended_sessions_.erase(info.worker_id);
  generation_floor_ = std::max(generation_floor_, info.last_generation);
  events_.push_back(MembershipEvent{
      MembershipEvent::Kind::kJoined, info.worker_id, token,
      absl::StrCat("worker ", info.worker_id, " joined with peer address ", info.peer_address,
                   " (", live_workers(), " of ", options_.world_size, " live)"),
      View{}});
  Reconcile();
  return token;
}

absl::StatusOr<uint64_t> Membership::Heartbeat(const HeartbeatReport& report, absl::Time now) {
  Expire(now);
  if (absl::Status s = ValidateWorkerId(report.worker_id); !s.ok()) return s;
  absl::StatusOr<WorkerMap::iterator> it = FindSession(report.worker_id, report.session_token);
  if (!it.ok()) return it.status();
  Worker& worker = (*it)->second;
  worker.last_seen = now;
  worker.last_report = report;
  worker.last_report.last_error = SanitizeText(report.last_error);
  return view_.generation;
}

absl::Status Membership::Leave(absl::string_view worker_id, uint64_t session_token,
                               absl::string_view reason, absl::Time now) {
  Expire(now);
  if (absl::Status s = ValidateWorkerId(worker_id); !s.ok()) return s;
  absl::StatusOr<WorkerMap::iterator> it = FindSession(worker_id, session_token);
  if (!it.ok()) return it.status();
  const std::string why = reason.empty() ? "no reason given" : SanitizeText(reason, 256);
  Remove(*it, MembershipEvent::Kind::kLeft, absl::StrCat("left: ", why));
  Reconcile();
  return absl::OkStatus();
}

absl::Status Membership::CheckSession(absl::string_view worker_id, uint64_t session_token,
                                      absl::Time now) {
  Expire(now);
  if (absl::Status s = ValidateWorkerId(worker_id); !s.ok()) return s;
  return FindSession(worker_id, session_token).status();
}

void Membership::WatchClosed(absl::string_view worker_id, uint64_t session_token,
                             absl::Time now) {
  Expire(now);
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.session_token != session_token) return;
  Remove(it, MembershipEvent::Kind::kLost,
         "closed its WatchRing stream (the worker exited or lost its connection to the "
         "coordinator)");
  Reconcile();
}

void Membership::Expire(absl::Time now) {
  std::vector<std::string> overdue;
  for (const auto& [id, worker] : workers_) {
    if (now - worker.last_seen >= options_.heartbeat_timeout) overdue.push_back(id);
  }
  if (overdue.empty()) return;
  const std::string why =
      absl::StrCat("missed heartbeats for ", absl::FormatDuration(options_.heartbeat_timeout));
  for (const std::string& id : overdue) {
    Remove(workers_.find(id), MembershipEvent::Kind::kLost, why);
  }
  Reconcile();
}

std::vector<WorkerSnapshot> Membership::Workers(absl::Time now) const {
  std::vector<WorkerSnapshot> out;
  out.reserve(workers_.size());
  for (const auto& [id, worker] : workers_) {
    WorkerSnapshot s;
    s.worker_id = id;
    s.rank = worker.rank;
    s.peer_address = worker.info.peer_address;
    s.http_address = worker.info.http_address;
    s.ready = worker.last_report.ready;
    s.generation = worker.last_report.generation;
    s.since_last_heartbeat = now - worker.last_seen;
    s.collectives_completed = worker.last_report.collectives_completed;
    s.collectives_failed = worker.last_report.collectives_failed;
    s.last_error = worker.last_report.last_error;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<MembershipEvent> Membership::TakeEvents() { return std::exchange(events_, {}); }

absl::StatusOr<Membership::WorkerMap::iterator> Membership::FindSession(
    absl::string_view worker_id, uint64_t session_token) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    auto ended = ended_sessions_.find(worker_id);
    if (ended != ended_sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("worker ", worker_id,
                                              " has no live session: it ended because ",
                                              ended->second, "; rejoin with Join"));
    }
    return absl::NotFoundError(absl::StrCat(
        "worker ", worker_id,
        " has no live session (it never joined this coordinator, or the coordinator "
        "restarted); rejoin with Join"));
  }
  if (it->second.session_token != session_token) {
    return absl::NotFoundError(absl::StrCat(
        "session token ", session_token, " of worker ", worker_id,
        " is stale: a newer session of that id is live; rejoin with Join, and make sure only "
        "one process uses --worker_id=",
        worker_id));
  }
  return it;
}

void Membership::Remove(WorkerMap::iterator it, MembershipEvent::Kind kind,
                        absl::string_view why) {
  const std::string& id = it->first;
  const std::string reason = absl::StrCat(Describe(id, it->second.rank), " ", why);
  if (it->second.rank >= 0) pending_dissolve_reasons_.push_back(reason);
  if (ended_sessions_.size() >= kMaxRememberedEndings) ended_sessions_.clear();
  ended_sessions_[id] = reason;
  events_.push_back(MembershipEvent{kind, id, it->second.session_token, reason, View{}});
  workers_.erase(it);
}

void Membership::Reconcile() {
  const bool complete = live_workers() == options_.world_size;
  if (view_.formed() && !complete) {
    View dissolved;
    dissolved.generation = NextGeneration();
    dissolved.dissolved_reason = pending_dissolve_reasons_.empty()
                                     ? std::string("membership changed")
                                     : absl::StrJoin(pending_dissolve_reasons_, "; ");
    for (auto& [id, worker] : workers_) worker.rank = -1;
    Publish(std::move(dissolved));
  } else if (!view_.formed() && complete) {
    View formed;
    formed.generation = NextGeneration();
    int rank = 0;
    for (auto& [id, worker] : workers_) {  // std::map: sorted by worker id
      worker.rank = rank;
      formed.members.push_back(ViewMember{rank, id, worker.info.peer_address});
      ++rank;
    }
    Publish(std::move(formed));
  }
  pending_dissolve_reasons_.clear();
}

uint64_t Membership::NextGeneration() const {
  return std::max(view_.generation, generation_floor_) + 1;
}

void Membership::Publish(View view) {
  view_ = std::move(view);
  events_.push_back(MembershipEvent{MembershipEvent::Kind::kViewPublished, "", 0,
                                    DescribeView(view_), view_});
}

uint64_t Membership::NewToken() {
  // Random, so a stale token of an earlier session (or another coordinator) never
  // matches by accident. Never 0, which is what an unset field reads as.
  return absl::Uniform<uint64_t>(absl::IntervalClosed, random_, 1,
                                 std::numeric_limits<uint64_t>::max());
}

}  // namespace ringsync
