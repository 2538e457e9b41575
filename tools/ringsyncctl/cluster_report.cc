#include "tools/ringsyncctl/cluster_report.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/logging/json_string.h"

namespace ringsync {
namespace {

// Longest LAST ERROR shown in the table.
constexpr size_t kMaxErrorChars = 80;

std::vector<const v1::WorkerStatus*> InRankOrder(const v1::ClusterStatus& status) {
  std::vector<const v1::WorkerStatus*> workers;
  for (const v1::WorkerStatus& w : status.workers()) workers.push_back(&w);
  std::sort(workers.begin(), workers.end(), [](const auto* a, const auto* b) {
    const bool a_in = a->rank() >= 0, b_in = b->rank() >= 0;
    if (a_in != b_in) return a_in;  // ranked workers first
    if (a->rank() != b->rank()) return a->rank() < b->rank();
    return a->worker_id() < b->worker_id();
  });
  return workers;
}

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > kMaxErrorChars) text = absl::StrCat(text.substr(0, kMaxErrorChars - 3), "...");
  return text;
}

// The IP address `worker`'s Join came from, as the current view records it (peers dial it
// when the advertised name does not resolve); empty when the worker is not in the view.
std::string JoinedFrom(const v1::ClusterStatus& status, const v1::WorkerStatus& worker) {
  for (const v1::RingMember& m : status.view().members()) {
    if (m.worker_id() == worker.worker_id()) return m.observed_host();
  }
  return "";
}

// "-" for an older daemon that sent none.
std::string Incarnation(uint64_t incarnation) {
  return incarnation == 0 ? "-" : absl::StrFormat("%016x", incarnation);
}

// "4" for a fixed-size ring, "2..4" for an elastic one.
std::string WorldSize(const v1::ClusterStatus& status) {
  if (status.min_world_size() == 0 || status.min_world_size() == status.world_size()) {
    return absl::StrCat(status.world_size());
  }
  return absl::StrCat(status.min_world_size(), "..", status.world_size());
}

std::string Summary(const std::string& coordinator, const v1::ClusterStatus& status) {
  const v1::RingView& view = status.view();
  const std::string ring =
      view.members_size() > 0
          ? absl::StrCat("ring formed, generation ", view.generation())
          : absl::StrCat("ring NOT formed (generation ", view.generation(), ": ",
                         OrDash(view.dissolved_reason()), ")");
  const auto plural = [](uint64_t n, absl::string_view one, absl::string_view many) {
    return absl::StrCat(n, " ", n == 1 ? one : many);
  };
  std::string out = absl::StrCat(
      "coordinator ", coordinator, ": ", ring, ", ", status.workers_size(), " of ",
      WorldSize(status), " workers joined (", plural(status.joins_total(), "join", "joins"), ", ",
      plural(status.generations_published(), "view", "views"), " published)\n");
  if (!view.change_reason().empty()) absl::StrAppend(&out, "last change: ", view.change_reason(), "\n");
  // The coordinator admits no worker whose settings differ from a live one's, so the
  // first worker that states them speaks for all.
  for (const v1::WorkerStatus* w : InRankOrder(status)) {
    if (w->ring_settings().empty()) continue;
    std::vector<std::string> settings;
    for (const v1::RingSetting& s : w->ring_settings()) {
      settings.push_back(absl::StrCat(s.flag(), "=", s.value()));
    }
    absl::StrAppend(&out, "ring settings: ", absl::StrJoin(settings, " "), "\n");
    break;
  }
  return out;
}

// {"--segment_bytes":"1048576",...}
std::string SettingsJson(const v1::WorkerStatus& worker) {
  std::vector<std::string> settings;
  for (const v1::RingSetting& s : worker.ring_settings()) {
    settings.push_back(absl::StrCat(JsonString(s.flag()), ":", JsonString(s.value())));
  }
  return absl::StrCat("{", absl::StrJoin(settings, ","), "}");
}

}  // namespace

std::string FormatClusterTable(const std::string& coordinator, const v1::ClusterStatus& status) {
  std::vector<std::vector<std::string>> rows = {{"RANK", "WORKER", "INCARNATION", "ADDRESS",
                                                 "JOINED FROM", "HTTP", "READY", "HEARTBEAT",
                                                 "GEN", "DONE", "FAILED", "LAST ERROR"}};
  for (const v1::WorkerStatus* w : InRankOrder(status)) {
    rows.push_back({w->rank() >= 0 ? absl::StrCat(w->rank()) : "-", w->worker_id(),
                    Incarnation(w->incarnation()), w->peer_address(),
                    OrDash(JoinedFrom(status, *w)), OrDash(w->http_address()),
                    w->ready() ? "yes" : "no",
                    absl::StrFormat("%.1fs", static_cast<double>(w->last_heartbeat_age_ms()) / 1000),
                    absl::StrCat(w->generation()), absl::StrCat(w->collectives_completed()),
                    absl::StrCat(w->collectives_failed()), OneLine(OrDash(w->last_error()))});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out = Summary(coordinator, status);
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c + 1 == row.size()) {
        line += row[c];
      } else {
        absl::StrAppend(&line, row[c], std::string(widths[c] - row[c].size() + 2, ' '));
      }
    }
    absl::StrAppend(&out, line, "\n");
  }
  if (status.workers_size() == 0) out += "(no worker has joined)\n";
  return out;
}

std::string FormatClusterJson(const std::string& coordinator, const v1::ClusterStatus& status) {
  const v1::RingView& view = status.view();
  std::vector<std::string> workers;
  for (const v1::WorkerStatus* w : InRankOrder(status)) {
    workers.push_back(absl::StrCat(
        "{\"rank\":", w->rank(), ",\"worker_id\":", JsonString(w->worker_id()),
        ",\"incarnation\":", JsonString(Incarnation(w->incarnation())),
        ",\"peer_address\":", JsonString(w->peer_address()),
        ",\"joined_from\":", JsonString(JoinedFrom(status, *w)),
        ",\"http_address\":", JsonString(w->http_address()),
        ",\"ready\":", w->ready() ? "true" : "false",
        ",\"last_heartbeat_age_seconds\":",
        absl::StrFormat("%.3f", static_cast<double>(w->last_heartbeat_age_ms()) / 1000),
        ",\"generation\":", w->generation(),
        ",\"collectives_completed\":", w->collectives_completed(),
        ",\"collectives_failed\":", w->collectives_failed(),
        ",\"last_error\":", JsonString(w->last_error()),
        ",\"ring_settings\":", SettingsJson(*w), "}"));
  }
  return absl::StrCat("{\"coordinator\":", JsonString(coordinator),
                      ",\"world_size\":", status.world_size(),
                      ",\"generation\":", view.generation(),
                      ",\"formed\":", view.members_size() > 0 ? "true" : "false",
                      ",\"dissolved_reason\":", JsonString(view.dissolved_reason()),
                      ",\"generations_published\":", status.generations_published(),
                      ",\"joins_total\":", status.joins_total(),
                      ",\"min_world_size\":", status.min_world_size(),
                      ",\"max_world_size\":", status.max_world_size(),
                      ",\"change_reason\":", JsonString(view.change_reason()),
                      ",\"membership_changes_total\":", status.membership_changes_total(),
                      ",\"views_adopted_total\":", status.views_adopted_total(),
                      ",\"workers\":[", absl::StrJoin(workers, ","), "]}\n");
}

}  // namespace ringsync
