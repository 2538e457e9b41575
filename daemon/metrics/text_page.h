// The page GET /metrics returns: what a daemon's collectables report at this moment —
// its prometheus::Registry (counters, gauges, histograms it updates as things happen)
// and the collectors that read values at scrape time (process_*, the ring's state, the
// coordinator's membership) — in Prometheus' text exposition format 0.0.4, written by
// prometheus-cpp's TextSerializer:
//
//   std::string page = metrics::TextPage({&registry, &process, &worker_metrics});
//
// Families appear in the order of the collectables; within a registry prometheus-cpp
// groups them by type, orders labels by name and series as it stores them. Prometheus
// reads a page the same whatever that order. A registry family without any series yet is
// left out (a collectable's empty family keeps its HELP and TYPE lines).
//
// Thread-safety: as safe as the collectables' Collect(); a prometheus::Registry and the
// collectors in this project may be scraped from several threads at once.
#pragma once

#include <string>

#include "absl/types/span.h"
#include "prometheus/collectable.h"

namespace ringsync::metrics {

// REQUIRES: no two collectables report a family of the same name.
std::string TextPage(absl::Span<const prometheus::Collectable* const> collectables);

}  // namespace ringsync::metrics
