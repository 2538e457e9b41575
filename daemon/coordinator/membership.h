// Membership: the coordinator's state machine, free of gRPC and of the clock.
//
// Workers join with a unique id. When exactly `world_size` live workers are present the
// ring forms: ranks are assigned by sorting worker ids, and a view
// {generation, members[rank]} is published. Any change of membership (a member
// leaves, is lost because it missed heartbeats for `heartbeat_timeout`, or closes its
// watch stream) publishes a dissolved view: no members and a reason naming the worker,
// its rank and why. When the membership is complete again, a new formed view is
// published. Generations start at 1 and grow by one per published view; generation 0
// is the "not formed yet" view before the first publication. A joining worker reports
// the newest generation it has seen; the next view is numbered above it, so a restarted
// coordinator's views are newer than those of the coordinator before it.
//
// Time is an argument of every call (`now`), so tests drive the clock. Every call
// first expires workers whose heartbeats are overdue at `now`, so the result never
// depends on how often Expire() happens to run.
//
// Thread-safety: none; the caller serializes all calls (CoordinatorService holds a mutex).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringsync {

struct ViewMember {
  int rank = 0;
  std::string worker_id;
  std::string peer_address;

  friend bool operator==(const ViewMember&, const ViewMember&) = default;
};

// A ring view as published. Formed when `members` is non-empty (index == rank).
struct View {
  uint64_t generation = 0;
  std::vector<ViewMember> members;
  std::string dissolved_reason;  // empty while formed

  bool formed() const { return !members.empty(); }
};

// What a worker states when it joins (validated by Join).
struct JoinInfo {
  std::string worker_id;
  std::string peer_address;  // HOST:PORT of its Peer service
  std::string http_address;  // optional HOST:PORT of its /metrics endpoint
  uint64_t last_generation = 0;  // the newest generation the worker has seen
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
  bool ready = false;
  uint64_t generation = 0;  // as last reported
  absl::Duration since_last_heartbeat;  // since join when it never sent one
  uint64_t collectives_completed = 0;
  uint64_t collectives_failed = 0;
  std::string last_error;
};

// Something the operator wants to read in the log, or a watcher must be told.
struct MembershipEvent {
  enum class Kind {
    kJoined,         // a worker joined
    kLeft,           // a worker left cleanly; its session ended
    kLost,           // a worker missed heartbeats or closed its watch; its session ended
    kViewPublished,  // `view` is the new current view
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
    int world_size = 1;  // 1..kMaxWorldSize
    absl::Duration heartbeat_timeout = absl::Seconds(5);
  };
  static constexpr int kMaxWorldSize = 1024;

  // REQUIRES: 1 <= options.world_size <= kMaxWorldSize, heartbeat_timeout > 0.
  explicit Membership(Options options);

  // Registers a worker and returns its session token (never 0). Errors:
  // InvalidArgument (bad id or address, an implausible last_generation), AlreadyExists
  // (the id is live), ResourceExhausted (world_size workers are live).
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

  // Drops every worker whose last heartbeat (or join) is `heartbeat_timeout` old.
  void Expire(absl::Time now);

  const View& view() const { return view_; }
  int world_size() const { return options_.world_size; }
  int live_workers() const { return static_cast<int>(workers_.size()); }
  // Live workers sorted by id.
  std::vector<WorkerSnapshot> Workers(absl::Time now) const;

  // Events since the last call, oldest first.
  std::vector<MembershipEvent> TakeEvents();

 private:
  struct Worker {
    JoinInfo info;
    uint64_t session_token = 0;
    int rank = -1;
    absl::Time last_seen;
    HeartbeatReport last_report;
  };
  using WorkerMap = std::map<std::string, Worker, std::less<>>;

  absl::StatusOr<WorkerMap::iterator> FindSession(absl::string_view worker_id,
                                                  uint64_t session_token);
  // Ends `it`'s session; `why` completes "worker w2 (rank 2) <why>".
  void Remove(WorkerMap::iterator it, MembershipEvent::Kind kind, absl::string_view why);
  // Forms or dissolves the ring when the live set calls for it.
  void Reconcile();
  void Publish(View view);
  uint64_t NewToken();

  Options options_;
  WorkerMap workers_;  // sorted by id, which is rank order
  uint64_t NextGeneration() const;
  View view_;
  // The newest generation any joined worker reported: published views number above it.
  uint64_t generation_floor_ = 0;
  // Why the ring must dissolve, gathered while removing members in one call.
  std::vector<std::string> pending_dissolve_reasons_;
  // Why a worker's last session ended, for the "rejoin" message; bounded.
  std::map<std::string, std::string, std::less<>> ended_sessions_;
  std::vector<MembershipEvent> events_;
  absl::BitGen random_;
};

}  // namespace ringsync
