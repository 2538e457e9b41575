// A worker's metric in end-to-end tests: its /metrics page fetched now and read with
// SumMetric.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/integration/http_get.h"
#include "tests/integration/metric_page.h"
#include "tools/cluster/local_cluster.h"

namespace ringsync::testing {

// The sum of `family`'s series whose labels contain `labels` on worker `worker`'s page
// (the cluster serves HTTP); NotFound when none.
inline absl::StatusOr<double> WorkerMetric(const LocalCluster& cluster, int worker,
                                           absl::string_view family,
                                           absl::string_view labels = "") {
  return SumMetric(
      HttpGet(cluster.worker_http_address(worker), "/metrics", cluster.http_token()).body, family,
      labels);
}

}  // namespace ringsync::testing
