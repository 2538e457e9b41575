// Prometheus' text exposition format, version 0.0.4 — what GET /metrics returns:
//
//   # HELP ringsync_collectives_total Collectives this worker finished, by kind, dtype and result.
//   # TYPE ringsync_collectives_total counter
//   ringsync_collectives_total{kind="allreduce",dtype="float32",result="ok"} 12
//
// https://prometheus.io/docs/instrumenting/exposition_formats/
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "daemon/metrics/snapshot.h"

namespace ringsync::metrics {

// The Content-Type of a page in this format.
inline constexpr char kTextFormatContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// Every family as a HELP line, a TYPE line and one line per sample (a family without
// samples keeps its HELP and TYPE lines, so the page documents it before first use).
std::string WriteTextFormat(absl::Span<const FamilySnapshot> families);

// A sample value or bucket bound: integers without exponent ("42"), other values in
// their shortest exact form ("0.25", "0.0001", "1e-05", "1.5e+300"), and "+Inf",
// "-Inf", "NaN".
std::string FormatValue(double value);

// Escapes a label value: backslash, double quote and newline.
std::string EscapeLabelValue(absl::string_view value);
// Escapes HELP text: backslash and newline.
std::string EscapeHelp(absl::string_view help);

}  // namespace ringsync::metrics
