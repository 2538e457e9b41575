// Membership: the coordinator's state machine, free of gRPC and of the clock.
//
// Workers join with a unique id and a random per-process incarnation. The ring is
// elastic between `min_world_size` and `max_world_size` live workers:
//  * Formation. The ring forms as soon as max_world_size workers are live, or once at
//    least min_world_size are live and no worker has joined for `formation_grace` — so a
//    cluster starting up forms once instead of once per arrival. Ranks are assigned by
//    sorting worker ids, and a view {generation, members[rank]} is published.
//  * Eviction. A member that leaves, misses heartbeats for `heartbeat_timeout` (its
//    lease) or closes its watch stream is evicted. If the live workers are still at
//    least min_world_size, a new formed view with them is published at once (its
//    change_reason names who was evicted and why); otherwise a dissolved view: no
//    members and a reason naming the worker, its rank and why.
//  * Admission. A worker joining a formed ring of fewer than max_world_size members is
//    admitted by a grown view once no other worker has joined for formation_grace (so
//    several arrivals cost one re-form), or at once when the ring is then full. Joins
//    beyond max_world_size are refused (ResourceExhausted); there are no standbys.
//  * Incarnations. A Join for a live id with a different incarnation is a restarted
//    process when the old session has gone quiet — its heartbeats overdue by more than a
//    heartbeat interval (a closed watch ends a session at once anyway): the old session
//    is evicted without waiting for its lease, and the new one admitted. While the old
//    session still heartbeats, it is a second daemon given the same --worker_id and is
//    refused (AlreadyExists, naming both incarnations), as is the same incarnation twice.
//  * Ring settings. A worker whose flags that must agree across the ring (e.g.
//    --segment_bytes) differ from a live worker's is refused (FailedPrecondition,
//    naming each flag and both values): it would fail every collective of the ring.
//  * Adoption. A restarted coordinator adopts the ring its workers are in: when every
//    member of the newest formed view the joining workers report has rejoined, with the
//    incarnation and address that view names, and every report of that generation is
//    that same view, it is published again unchanged (same generation, same ranks), so
//    the ring goes on undisturbed. When the reports contradict each other, or a member is
//    not back within one lease of the first join, the ring forms as usual instead.
// Generations start at 1 and grow by one per published view; generation 0 is the "not
// formed yet" view before the first publication. A joining worker reports the newest
// generation it has seen; a new view is numbered above it, so a restarted coordinator's
// views are newer than those of the coordinator before it.
//
// Time is an argument of every call (`now`), so tests drive the clock. Every call
// first applies what is due at `now` (expired leases, a formation grace that ran out),
// so the result never depends on how often Expire() happens to run.
//
// Thread-safety: none; the caller serializes all calls (CoordinatorService holds a mutex).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "wire/ring_setting.h"

namespace ringsync {

struct ViewMember {
  int rank = 0;
  std::string worker_id;
  std::string peer_address;
  uint64_t incarnation = 0;  // of the member's process, as it joined
  std::string observed_host;  // the IP its Join came from (RingMember.observed_host)

  friend bool operator==(const ViewMember&, const ViewMember&) = default;
};

// A ring view as published. Formed when `members` is non-empty (index == rank).
struct View {
  uint64_t generation = 0;
  std::vector<ViewMember> members;
  std::string dissolved_reason;  // empty while formed
  // Why this view replaced the one before (evictions, admissions, adoption); for the log
  // and for workers that tell their training loops why the membership changed.
  std::string change_reason;

  bool formed() const { return !members.empty(); }
};

// What a worker states when it joins (validated by Join).
struct JoinInfo {
  std::string worker_id;
  std::string peer_address;  // HOST:PORT of its Peer service
  std::string http_address;  // optional HOST:PORT of its /metrics endpoint
  uint64_t last_generation = 0;  // the newest generation the worker has seen
  uint64_t incarnation = 0;      // random per process start, never 0
  View current_view;             // the view the worker is in (generation 0: none)
  // The IP address the Join came from, as the coordinator saw it; empty when not IP.
  std::string observed_host;
  // The flags every worker of the ring must set alike (ring_settings.h).
  std::vector<RingSetting> ring_settings;
};

// What a worker reports in each heartbeat.
struct HeartbeatReport {
  std::string worker_id;
  uint64_t session_token = 0;
  uint64_t generation = 0;
  bool ready = false;
  uint64_t collectives_completed = 0;
  uint64_t collectives_failed = 0;
  std::string last_error;
};

// One live worker as GetClusterStatus shows it.
struct WorkerSnapshot {
  std::string worker_id;
  int rank = -1;  // -1 while the ring is not formed
  std::string peer_address;
  std::string http_address;
  uint64_t incarnation = 0;
  bool ready = false;
  uint64_t generation = 0;  // as last reported
  absl::Duration since_last_heartbeat;  // since join when it never sent one
  uint64_t collectives_completed = 0;
  uint64_t collectives_failed = 0;
  std::string last_error;
  std::vector<RingSetting> ring_settings;  // as it joined
};

// Something the operator wants to read in the log, or a watcher must be told.
struct MembershipEvent {
  enum class Kind {
    kJoined,         // a worker joined
    kLeft,           // a worker left cleanly; its session ended
    kLost,           // a worker missed heartbeats or closed its watch; its session ended
    kViewPublished,  // `view` is the new current view (a new generation or an adopted one)
  };
  Kind kind;
  std::string worker_id;       // kJoined, kLeft, kLost
  uint64_t session_token = 0;  // kJoined, kLeft, kLost
  std::string message;         // one log line, e.g. "worker w2 (rank 2) missed heartbeats for 5s"
  View view;                   // kViewPublished
};

class Membership {
 public:
  struct Options {
    int min_world_size = 1;  // 1..max_world_size
    int max_world_size = 1;  // ..kMaxWorldSize
    absl::Duration heartbeat_timeout = absl::Seconds(5);  // the lease
    // How often workers heartbeat: a new incarnation replaces a session whose heartbeats
    // are overdue by more than this.
    absl::Duration heartbeat_interval = absl::Seconds(1);
    absl::Duration formation_grace = absl::Seconds(1);  // >= 0

    // A ring of exactly `world_size` (min = max): no grace, no re-form below it.
    static Options Fixed(int world_size, absl::Duration heartbeat_timeout) {
      Options options;
      options.min_world_size = options.max_world_size = world_size;
      options.heartbeat_timeout = heartbeat_timeout;
      return options;
    }
  };
  static constexpr int kMaxWorldSize = 1024;

  // What the coordinator's /metrics counts.
  struct Counters {
    // Sessions ended, by reason: "heartbeat_timeout", "watch_closed", "left", "restarted".
    std::map<std::string, uint64_t, std::less<>> evictions;
    uint64_t membership_changes = 0;  // views published with a new generation
    uint64_t views_adopted = 0;       // a restarted coordinator took over its workers' ring
  };

  // REQUIRES: 1 <= min_world_size <= max_world_size <= kMaxWorldSize,
  // heartbeat_timeout > 0, heartbeat_interval > 0, formation_grace >= 0.
  explicit Membership(Options options);

  // Registers a worker and returns its session token (never 0). Errors:
  // InvalidArgument (bad id, address, incarnation or reported view, an implausible
  // last_generation, ring settings out of bounds), FailedPrecondition (a ring setting
  // differs from a live worker's, other than its own old session's), AlreadyExists (the
  // id is live and not a restart of it: see the file comment), ResourceExhausted
  // (max_world_size workers are live).
  static constexpr uint64_t kMaxGeneration = uint64_t{1} << 62;
  absl::StatusOr<uint64_t> Join(const JoinInfo& info, absl::Time now);

  // Records a heartbeat; returns the current generation. NotFound (saying "rejoin")
  // for an unknown worker or a token that is not its live session.
  absl::StatusOr<uint64_t> Heartbeat(const HeartbeatReport& report, absl::Time now);

  // Ends the session at once; dissolves the ring if the worker was a member.
  absl::Status Leave(absl::string_view worker_id, uint64_t session_token,
                     absl::string_view reason, absl::Time now);

  // OK when (worker_id, session_token) is a live session; NotFound otherwise.
  absl::Status CheckSession(absl::string_view worker_id, uint64_t session_token,
                            absl::Time now);

  // The session's watch stream broke: the worker is treated as dead at once. No effect
  // when the session already ended.
  void WatchClosed(absl::string_view worker_id, uint64_t session_token, absl::Time now);

  // Applies what is due at `now`: drops every worker whose last heartbeat (or join) is
  // `heartbeat_timeout` old, then forms, re-forms or grows the ring if the live workers
  // call for it (a formation grace ran out, an adoption stopped waiting).
  void Expire(absl::Time now);

  const View& view() const { return view_; }
  int min_world_size() const { return options_.min_world_size; }
  int max_world_size() const { return options_.max_world_size; }
  const Counters& counters() const { return counters_; }
  int live_workers() const { return static_cast<int>(workers_.size()); }
  // Live workers sorted by id.
  std::vector<WorkerSnapshot> Workers(absl::Time now) const;

  // Events since the last call, oldest first.
  std::vector<MembershipEvent> TakeEvents();

 private:
  struct Worker {
    JoinInfo info;  // current_view dropped once the adoption is decided
    uint64_t session_token = 0;
    int rank = -1;
    absl::Time last_seen;
    HeartbeatReport last_report;
  };
  using WorkerMap = std::map<std::string, Worker, std::less<>>;

  absl::StatusOr<WorkerMap::iterator> FindSession(absl::string_view worker_id,
                                                  uint64_t session_token);
  // Ends `it`'s session; `why` completes "worker w2 (rank 2) <why>".
  // `label` is the eviction reason counted in Counters::evictions.
  void Remove(WorkerMap::iterator it, MembershipEvent::Kind kind, absl::string_view why,
              absl::string_view label);
  absl::Status ValidateJoin(const JoinInfo& info) const;
  // Refuses a second live session of `info.worker_id`, or evicts the old one of a
  // restarted process (see the file comment).
  absl::Status ReplaceOrRefuse(WorkerMap::iterator live, const JoinInfo& info, absl::Time now);
  // Forms, re-forms, grows, adopts or dissolves the ring when the live set calls for it.
  void Reconcile(absl::Time now);
  enum class Adoption { kNone, kWait, kAdopt };
  // Whether the ring the joined workers report may still be adopted; sets
  // `adoption_over_` once it never can, and fills `*view` with it for kAdopt.
  Adoption ConsiderAdoption(absl::Time now, View* view);
  void Adopt(View view);
  // Publishes a formed view of every live worker, ranked by id.
  void PublishFormed(std::string change_reason);
  void Publish(View view, absl::string_view note = "");
  uint64_t NewToken();

  Options options_;
  WorkerMap workers_;  // sorted by id, which is rank order
  uint64_t NextGeneration() const;
  View view_;
  // The newest generation any joined worker reported: published views number above it.
  uint64_t generation_floor_ = 0;
  // Why members were removed in this call: the next view re-forms or dissolves.
  std::vector<std::string> pending_removals_;
  std::optional<absl::Time> first_join_;  // of this coordinator: starts the adoption window
  absl::Time last_join_;                  // starts the formation grace
  bool adoption_over_ = false;            // adopted, formed otherwise, or contradicted
  Counters counters_;
  // Why a worker's last session ended, for the "rejoin" message; bounded.
  std::map<std::string, std::string, std::less<>> ended_sessions_;
  std::vector<MembershipEvent> events_;
  absl::BitGen random_;
};

}  // namespace ringsync
