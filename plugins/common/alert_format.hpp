// What the notifiers say of an alert in the shapes Alertmanager defined, pure functions shared by
// the alertmanager and webhook plugins (and the times and numbers by ntfy): its labels and
// annotations, its fingerprint, RFC 3339 times, and JSON objects of labels.
#pragma once

#include <kiwi/model.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiwi_notify {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Unix seconds as RFC 3339 in UTC, as Go's time.RFC3339Nano writes it (what Alertmanager itself
// sends), cut to the millisecond, never rounded up: 1700000000 -> "2023-11-14T22:13:20Z",
// 1700000000.25 -> "2023-11-14T22:13:20.25Z", 1700000000.9996 -> "2023-11-14T22:13:20.999Z".
std::string rfc3339(double unix_seconds);

// Go's zero time, which Alertmanager's webhook writes as the endsAt of an alert still firing.
inline constexpr std::string_view kZeroTime = "0001-01-01T00:00:00Z";

// A value as /api/alerts writes it (kiwi/json.hpp): 85.2 -> "85.2", 80 -> "80".
std::string number_text(double value);

// A duration in whole seconds, as the config writes them: 3725.4 -> "1h2m5s", 42 -> "42s".
std::string duration_text(double seconds);

// An alert's labels for a receiver, sorted by name: the notice's labels; `sensor` (the report
// the series came from) and `instance` (the agent's host) unless the series has a label of that
// name itself; `alertname` and `severity`, which the rule sets, over any series label of those
// names. Alertmanager tells alerts apart by these.
Labels alert_labels(const kiwi::AlertNotice& notice, std::string_view host);

// Its annotations, sorted by name: `summary` (when not empty), `value` and `threshold` (each when
// not NaN).
Labels alert_annotations(const kiwi::AlertNotice& notice);

// The fingerprint Alertmanager gives an alert of these labels (Prometheus' model: FNV-1a 64 over
// the names and values in name order, each followed by the byte 0xff), as 16 hex digits.
std::string fingerprint(const Labels& labels);

// Appends {"name":"value",...} in the labels' order.
void append_json_object(std::string& out, const Labels& labels);

}  // namespace kiwi_notify
