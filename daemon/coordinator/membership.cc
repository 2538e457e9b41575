#include "daemon/coordinator/membership.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/coordinator/request_validation.h"
#include "daemon/coordinator/ring_settings.h"

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

// "4" for a fixed-size ring, "2..4" for an elastic one.
std::string SizeRange(const Membership::Options& options) {
  if (options.min_world_size == options.max_world_size) {
    return absl::StrCat(options.max_world_size);
  }
  return absl::StrCat(options.min_world_size, "..", options.max_world_size);
}

std::string ListIds(const std::vector<std::string>& ids) {
  std::vector<std::string> listed;
  for (const std::string& id : ids) {
    if (listed.size() == kMaxListedWorkers) {
      listed.push_back("...");
      break;
    }
    listed.push_back(id);
  }
  return absl::StrJoin(listed, ", ");
}

// The same ring: generation and every member's rank, id, address and incarnation.
bool SameView(const View& a, const View& b) {
  return a.generation == b.generation && a.members == b.members;
}

}  // namespace

Membership::Membership(Options options) : options_(options) {
  view_.dissolved_reason =
      absl::StrCat("ring not formed yet: waiting for ", SizeRange(options_), " workers to join");
}

absl::Status Membership::ValidateJoin(const JoinInfo& info) const {
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
  if (absl::Status s = ValidateIncarnation(info.worker_id, info.incarnation); !s.ok()) return s;
  if (absl::Status s = ValidateRingSettings(info.worker_id, info.ring_settings); !s.ok()) return s;
  if (info.last_generation > kMaxGeneration || info.current_view.generation > kMaxGeneration) {
    return absl::InvalidArgumentError(absl::StrCat(
        "last_generation ", std::max(info.last_generation, info.current_view.generation),
        " of worker '", info.worker_id, "' is implausible (more than 2^62)"));
  }
  const View& reported = info.current_view;
  if (reported.members.size() > static_cast<size_t>(kMaxWorldSize)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker '", info.worker_id, "' reports a view of ", reported.members.size(),
        " members; a ring has at most ", kMaxWorldSize));
  }
  for (size_t rank = 0; rank < reported.members.size(); ++rank) {
    const ViewMember& m = reported.members[rank];
    absl::Status s = m.rank == static_cast<int>(rank)
                         ? ValidateWorkerId(m.worker_id)
                         : absl::InvalidArgumentError(absl::StrCat("its rank is ", m.rank));
    if (s.ok()) s = ValidateHostPort("peer_address", m.peer_address, /*reachable=*/true);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("worker '", info.worker_id,
                                                     "' reports a view whose member at index ",
                                                     rank, " is invalid: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status Membership::ReplaceOrRefuse(WorkerMap::iterator live, const JoinInfo& info,
                                         absl::Time now) {
  const Worker& old = live->second;
  const absl::Duration silent = now - old.last_seen;
  // A restarted process's old session stops heartbeating; a second live daemon with the
  // same id keeps it up. One missed beat more than the schedule tells them apart.
  const absl::Duration quiet = 2 * options_.heartbeat_interval;
  const std::string heard =
      absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1)));
  if (info.incarnation != old.info.incarnation && silent > quiet) {
    Remove(live, MembershipEvent::Kind::kLost,
           absl::StrCat("was replaced by its restarted process (incarnation ",
                        old.info.incarnation, " -> ", info.incarnation,
                        "; the old one was last heard ", heard, " ago)"),
           "restarted");
    return absl::OkStatus();
  }
  if (info.incarnation != old.info.incarnation) {
    return absl::AlreadyExistsError(absl::StrCat(
        "worker id '", info.worker_id, "' is already live as incarnation ",
        old.info.incarnation, " (peer address ", old.info.peer_address, ", last heard ", heard,
        " ago), and another process (incarnation ", info.incarnation, ", peer address ",
        info.peer_address, ") asks to join with it: give every worker a unique --worker_id. "
        "A restarted worker replaces its old session once that one misses heartbeats for ",
        absl::FormatDuration(quiet), ", or after its session expires (heartbeat timeout ",
        absl::FormatDuration(options_.heartbeat_timeout), ")"));
  }
  return absl::AlreadyExistsError(absl::StrCat(
      "worker id '", info.worker_id, "' is already live (joined with peer address ",
      old.info.peer_address, ", incarnation ", old.info.incarnation, ", last heard ", heard,
      " ago); give every worker a unique --worker_id, or, if that process is gone, retry "
      "after its session expires (heartbeat timeout ",
      absl::FormatDuration(options_.heartbeat_timeout), ")"));
}

absl::StatusOr<uint64_t> Membership::Join(const JoinInfo& info, absl::Time now) {
  Expire(now);
  if (absl::Status s = ValidateJoin(info); !s.ok()) return s;
  for (const auto& [id, live] : workers_) {
    // A restarted process may change its settings: its old session is on its way out.
    if (id == info.worker_id) continue;
    if (absl::Status s = CheckSameRingSettings(info.worker_id, info.ring_settings, id,
                                               live.info.ring_settings);
        !s.ok()) {
      return s;
    }
  }
  if (auto it = workers_.find(info.worker_id); it != workers_.end()) {
    if (absl::Status s = ReplaceOrRefuse(it, info, now); !s.ok()) return s;
  }
  if (live_workers() >= options_.max_world_size) {
    std::vector<std::string> ids;
    for (const auto& [id, worker] : workers_) ids.push_back(id);
    return absl::ResourceExhaustedError(absl::StrCat(
        "the ring is full: ", live_workers(), " of ", options_.max_world_size,
        " workers are live (", ListIds(ids), "), so worker '", info.worker_id,
        "' cannot join; start the coordinator with a larger --world_size or "
        "--max_world_size, or stop a worker first"));
  }

  Worker worker;
  worker.info = info;
  if (adoption_over_) worker.info.current_view = View{};
  worker.session_token = NewToken();
  worker.last_seen = now;
  worker.last_report.worker_id = info.worker_id;
  const uint64_t token = worker.session_token;
  workers_.emplace(info.worker_id, std::move(worker));
  ended_sessions_.erase(info.worker_id);
  generation_floor_ =
      std::max({generation_floor_, info.last_generation, info.current_view.generation});
  if (!first_join_) first_join_ = now;
  last_join_ = now;
  events_.push_back(MembershipEvent{
      MembershipEvent::Kind::kJoined, info.worker_id, token,
      absl::StrCat("worker ", info.worker_id, " joined with peer address ", info.peer_address,
                   ", incarnation ", info.incarnation, " (", live_workers(), " of ",
                   SizeRange(options_), " live)"),
      View{}});
  Reconcile(now);
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
  Remove(*it, MembershipEvent::Kind::kLeft, absl::StrCat("left: ", why), "left");
  Reconcile(now);
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
         "coordinator)",
         "watch_closed");
  Reconcile(now);
}

void Membership::Expire(absl::Time now) {
  std::vector<std::string> overdue;
  for (const auto& [id, worker] : workers_) {
    if (now - worker.last_seen >= options_.heartbeat_timeout) overdue.push_back(id);
  }
  const std::string why =
      absl::StrCat("missed heartbeats for ", absl::FormatDuration(options_.heartbeat_timeout));
  for (const std::string& id : overdue) {
    Remove(workers_.find(id), MembershipEvent::Kind::kLost, why, "heartbeat_timeout");
  }
  Reconcile(now);
}

std::vector<WorkerSnapshot> Membership::Workers(absl::Time now) const {
  std::vector<WorkerSnapshot> out;
  out.reserve(workers_.size());
  for (const auto& [id, worker] : workers_) {
    WorkerSnapshot s;
    s.worker_id = id;
    s.rank = worker.rank;
    s.peer_address = worker.info.peer_address;
    s.incarnation = worker.info.incarnation;
    s.http_address = worker.info.http_address;
    s.ready = worker.last_report.ready;
    s.generation = worker.last_report.generation;
    s.since_last_heartbeat = now - worker.last_seen;
    s.collectives_completed = worker.last_report.collectives_completed;
    s.collectives_failed = worker.last_report.collectives_failed;
    s.last_error = worker.last_report.last_error;
    s.ring_settings = worker.info.ring_settings;
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
                        absl::string_view why, absl::string_view label) {
  const std::string& id = it->first;
  const std::string reason = absl::StrCat(Describe(id, it->second.rank), " ", why);
  if (it->second.rank >= 0) pending_removals_.push_back(reason);
  ++counters_.evictions[std::string(label)];
  if (ended_sessions_.size() >= kMaxRememberedEndings) ended_sessions_.clear();
  ended_sessions_[id] = reason;
  events_.push_back(MembershipEvent{kind, id, it->second.session_token, reason, View{}});
  workers_.erase(it);
}

void Membership::Reconcile(absl::Time now) {
  const std::vector<std::string> removed = std::exchange(pending_removals_, {});
  if (!adoption_over_) {
    View adoptable;
    switch (ConsiderAdoption(now, &adoptable)) {
      case Adoption::kAdopt: return Adopt(std::move(adoptable));
      case Adoption::kWait: return;  // nothing is formed yet, so nobody was removed
      case Adoption::kNone: break;
    }
  }
  const int live = live_workers();
  const int members = static_cast<int>(view_.members.size());
  if (view_.formed() && !removed.empty()) {
    if (live >= options_.min_world_size) {
      return PublishFormed(absl::StrCat(absl::StrJoin(removed, "; "), "; re-formed with ",
                                        live, " workers"));
    }
    View dissolved;
    dissolved.generation = NextGeneration();
    dissolved.dissolved_reason = absl::StrJoin(removed, "; ");
    dissolved.change_reason = dissolved.dissolved_reason;
    for (auto& [id, worker] : workers_) worker.rank = -1;
    return Publish(std::move(dissolved),
                   absl::StrCat(" (", live, " live, fewer than the ", options_.min_world_size,
                                " a ring needs)"));
  }
  // Form or grow: once the ring would be full, or arrivals have paused for the grace.
  const bool quiet = now - last_join_ >= options_.formation_grace;
  if (live > members && live >= options_.min_world_size &&
      (live == options_.max_world_size || quiet)) {
    std::vector<std::string> admitted;
    for (const auto& [id, worker] : workers_) {
      if (worker.rank < 0) admitted.push_back(id);
    }
    PublishFormed(absl::StrCat(view_.formed() ? "admitted " : "formed with ", ListIds(admitted),
                               " (", live, " of at most ", options_.max_world_size, " live",
                               live < options_.max_world_size
                                   ? absl::StrCat(", no join for ",
                                                  absl::FormatDuration(options_.formation_grace))
                                   : "",
                               ")"));
  }
}

Membership::Adoption Membership::ConsiderAdoption(absl::Time now, View* view) {
  const auto over = [this] {
    adoption_over_ = true;
    for (auto& [id, worker] : workers_) worker.info.current_view = View{};
    return Adoption::kNone;
  };
  if (view_.generation != 0) return over();  // this coordinator published a view already
  if (first_join_ && now - *first_join_ >= options_.heartbeat_timeout) return over();
  // The candidate: the newest view any worker reports.
  uint64_t newest = 0;
  const View* candidate = nullptr;
  for (const auto& [id, worker] : workers_) {
    newest = std::max({newest, worker.info.last_generation, worker.info.current_view.generation});
    if (worker.info.current_view.formed() &&
        (candidate == nullptr || worker.info.current_view.generation > candidate->generation)) {
      candidate = &worker.info.current_view;
    }
  }
  if (newest == 0) return Adoption::kNone;  // nobody was in a ring (yet): form as usual
  if (candidate == nullptr || candidate->generation != newest) return over();
  const int size = static_cast<int>(candidate->members.size());
  if (size < options_.min_world_size || size > options_.max_world_size) return over();
  // Everyone who was in that generation reports exactly that view.
  for (const auto& [id, worker] : workers_) {
    const View& reported = worker.info.current_view;
    if (reported.generation == newest && !SameView(reported, *candidate)) return over();
  }
  int missing = 0;
  for (const ViewMember& m : candidate->members) {
    auto it = workers_.find(m.worker_id);
    if (it == workers_.end()) {
      ++missing;
      continue;
    }
    const Worker& w = it->second;
    if (w.info.incarnation != m.incarnation || w.info.peer_address != m.peer_address ||
        !SameView(w.info.current_view, *candidate)) {
      return over();  // restarted, moved, or never in it
    }
  }
  if (missing > 0) {
    // A missing member could not join a full coordinator: wait only while it can.
    return live_workers() + missing <= options_.max_world_size ? Adoption::kWait : over();
  }
  *view = *candidate;
  return Adoption::kAdopt;
}

void Membership::Adopt(View view) {
  adoption_over_ = true;
  for (auto& [id, worker] : workers_) worker.info.current_view = View{};
  for (ViewMember& m : view.members) {
    Worker& worker = workers_.find(m.worker_id)->second;
    worker.rank = m.rank;
    m.observed_host = worker.info.observed_host;  // as this coordinator saw it join
  }
  view.dissolved_reason.clear();
  view.change_reason = absl::StrCat("adopted: every member of generation ", view.generation,
                                    " rejoined this coordinator reporting it; the ring goes on");
  ++counters_.views_adopted;
  view_ = std::move(view);
  events_.push_back(MembershipEvent{MembershipEvent::Kind::kViewPublished, "", 0,
                                    absl::StrCat(DescribeView(view_), ": ", view_.change_reason),
                                    view_});
}

void Membership::PublishFormed(std::string change_reason) {
  View formed;
  formed.generation = NextGeneration();
  formed.change_reason = std::move(change_reason);
  int rank = 0;
  for (auto& [id, worker] : workers_) {  // std::map: sorted by worker id
    worker.rank = rank;
    formed.members.push_back(
        ViewMember{rank, id, worker.info.peer_address, worker.info.incarnation,
                   worker.info.observed_host});
    ++rank;
  }
  Publish(std::move(formed));
}

uint64_t Membership::NextGeneration() const {
  return std::max(view_.generation, generation_floor_) + 1;
}

void Membership::Publish(View view, absl::string_view note) {
  view_ = std::move(view);
  ++counters_.membership_changes;
  std::string message = absl::StrCat(DescribeView(view_), note);
  if (view_.formed()) absl::StrAppend(&message, ": ", view_.change_reason);
  events_.push_back(MembershipEvent{MembershipEvent::Kind::kViewPublished, "", 0,
                                    std::move(message), view_});
}

uint64_t Membership::NewToken() {
  // Random, so a stale token of an earlier session (or another coordinator) never
  // matches by accident. Never 0, which is what an unset field reads as.
  return absl::Uniform<uint64_t>(absl::IntervalClosed, random_, 1,
                                 std::numeric_limits<uint64_t>::max());
}

}  // namespace ringsync
