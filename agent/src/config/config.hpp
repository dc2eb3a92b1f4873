// The validated configuration. Each setting is a row of the host's schema (config/schema.hpp),
// which holds its default; config/kiwi-agent.toml, embedded in the binary at build time, sets
// the same values (a test holds it to the rows) and the default [[sensor]] and [[route]] lists.
// A user's file is read on top of it: every scalar it sets overrides the default; a [[sensor]]
// (or [[route]]) list in the user's file replaces the default list whole.
#pragma once

#include <kiwi/plugin.hpp>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/duration.hpp"

namespace kiwi::agent {

// A place in a config file, for messages: "kiwi.toml:12:3".
struct SourcePos {
  std::string file;
  std::uint32_t line = 0;
  std::uint32_t column = 0;
  std::string str() const;
};

// Bad configuration. what() is "<file>:<line>:<col>: <key>: <problem>"; exit code 2.
struct ConfigError : std::runtime_error {
  ConfigError(const SourcePos& pos, const std::string& key, const std::string& problem);
  explicit ConfigError(const std::string& message) : std::runtime_error(message) {}
};

struct BindAddress {
  std::string host;  // numeric IPv4 or IPv6 literal (without brackets)
  std::uint16_t port = 0;
  bool ipv6 = false;
  std::string str() const;  // "127.0.0.1:8095" or "[::1]:8095"
  bool operator==(const BindAddress&) const = default;
};

// [http.auth]: on when basic_users or bearer_tokens_file is set.
struct HttpAuth {
  std::map<std::string, std::string> basic_users;  // user name -> bcrypt hash (validated)
  std::string bearer_tokens_file;                  // "" when none
  std::vector<std::string> bearer_token_hashes;    // SHA-256 hex (lower case), read from the file
  std::vector<std::string> public_paths;           // exact paths, or prefixes ending in "/*"
  bool enabled() const { return !basic_users.empty() || !bearer_tokens_file.empty(); }
  bool operator==(const HttpAuth& o) const {
    return basic_users == o.basic_users && bearer_tokens_file == o.bearer_tokens_file &&
           bearer_token_hashes == o.bearer_token_hashes && public_paths == o.public_paths;
  }
};

// [http.tls]: HTTPS on the [http] bind address when cert_file and key_file are set (both or
// neither). The files are read with the config, at start and at every reload, so a reload after
// the certificate is renewed in place serves the new one.
struct HttpTls {
  std::string cert_file, key_file;  // PEM; "" when off
  std::string cert_pem, key_pem;    // their contents
  bool enabled() const { return !cert_file.empty(); }
  bool operator==(const HttpTls& o) const {
    return cert_file == o.cert_file && key_file == o.key_file && cert_pem == o.cert_pem &&
           key_pem == o.key_pem;
  }
};

// An entry's options table as written, with the place of each key: opaque outside the config layer
// (read it with validate_options(), config/options.hpp). It lives in a document the Config keeps.
struct OptionTable;

// One [[sensor]], [[route]] or [[remote_write]] entry.
struct PluginEntry {
  std::string plugin;              // name ("cpu") or path ("./x.so"), as written
  std::string name;                // sensor instance name (defaults to the plugin name)
  std::string path;                // route path ("/api/current", "/assets/*")
  std::optional<Millis> interval;  // sensor interval override
  // How long one sample() may take before the sensor is reported `error` ("timed out after
  // ..."); nullopt: the sensor's interval.
  std::optional<Millis> timeout;
  // [[sensor]] only: labels added to every metric it emits (a static label per instance, as
  // Telegraf's tags), so that two instances of a plugin, or a board's rooms, can be told apart.
  std::map<std::string, std::string> labels;
  // The entry's options, validated later against the plugin's option table. Points into
  // Config::documents (toml++ drops source positions on copy, and errors need them).
  const OptionTable* options = nullptr;
  SourcePos pos;         // the entry itself
  SourcePos plugin_pos;  // its plugin/handler key, for loader errors
  // [[remote_write]] only: series globs to send (empty: all), samples per request at most.
  std::vector<std::string> series;
  std::size_t max_samples = 0;  // the schema's default when read from a file
  // [[notify]] only: the alert names (`*` globs) it is told of (empty: all), the least severity,
  // and how often a firing alert is sent again (nullopt: the kind's default, docs/alerts.md).
  std::vector<std::string> alerts;
  std::string min_severity;
  std::optional<Millis> repeat_interval;
  // [[remote_write]] and [[notify]]: `options` is the entry's own table, its plugin's options
  // given flat beside the agent's keys ([[notify]]'s shape; for [[remote_write]] the shape before
  // options = {...}, still read, with a warning).
  bool options_flat = false;
  // The table it was written in ("sensor", "remote_write", "mqtt", ...): outputs of two tables
  // share Config::outputs.
  std::string table;
};

// One [[alert]] rule (docs/alerts.md). The rule engine (alert/) evaluates it; the summary
// template is checked when read (config/alert_rule.hpp).
struct AlertRule {
  std::string name;                           // unique; the `alertname`
  std::string metric;                         // a series name, `*` globs; "" for a status rule
  std::map<std::string, std::string> labels;  // label -> value glob; every one must match
  std::string sensor;                         // a report name glob; "" for any
  std::optional<double> above, below;         // exactly one, for a metric rule
  // Compared with this series of the same report and labels where it exists (plus
  // threshold_offset), else with `above` / `below`.
  std::string threshold_series;
  double threshold_offset = 0;
  bool rate = false;   // the per-second rate of a counter, not its value
  std::string status;  // "failing", "no_data" or "stale": a sensor's status; "" a metric rule
  Millis hold_for{0};  // `for`: how long the condition holds before it fires
  Millis keep_firing_for{0};
  // How far back past the threshold a firing value must go to resolve; nullopt: 5 % of the
  // threshold's magnitude (docs/alerts.md).
  std::optional<double> hysteresis;
  std::string severity = "warning";  // info, warning, critical
  std::string summary;               // a template; "" for the default one
  SourcePos pos;
  bool operator==(const AlertRule& o) const {
    return name == o.name && metric == o.metric && labels == o.labels && sensor == o.sensor &&
           above == o.above && below == o.below && threshold_series == o.threshold_series &&
           threshold_offset == o.threshold_offset && rate == o.rate && status == o.status &&
           hold_for == o.hold_for && keep_firing_for == o.keep_firing_for &&
           hysteresis == o.hysteresis && severity == o.severity && summary == o.summary;
  }
};

// One [[peer]]: another agent whose board the fleet view (handlers/fleet, handlers/peer) shows.
// The credentials stay files here: the plugins that fetch read them (docs/fleet.md).
struct Peer {
  std::string name;  // unique; the row's name and /peer/<name>/
  std::string url;   // http:// or https://, scheme and authority (and a path), no trailing '/'
  Millis timeout{0};
  std::string bearer_token_file;                  // "" none
  std::map<std::string, std::string> basic_auth;  // username, password_file; empty: none
  std::string ca_file;                            // https: the CAs to trust; "" the system's
  SourcePos pos;
  bool operator==(const Peer& o) const {
    return name == o.name && url == o.url && timeout == o.timeout &&
           bearer_token_file == o.bearer_token_file && basic_auth == o.basic_auth &&
           ca_file == o.ca_file;
  }
};

// The members are set from the schema's rows (their defaults, then the files); the values below
// are only what a Config holds before that.
struct Config {
  std::string source;  // file path, or "<built-in default>"
  struct Agent {
    std::string data_dir;
    std::string plugin_dir;          // "$ORIGIN" already replaced by the executable's directory
    SourcePos plugin_dir_pos;        // where it was set, for "plugin not found" messages
    std::string builtin_plugin_dir;  // the built-in plugin_dir: searched after plugin_dir
    std::string procfs;
    std::string sysfs;
    LogLevel log_level = LogLevel::info;
    std::vector<std::string> include;  // globs of files with more [[sensor]]/[[route]] entries
  } agent;
  struct Http {
    BindAddress bind;
    int threads = 0;  // 0: "auto" (resolved by HttpServer)
    Millis keep_alive{0};
    int max_connections = 0;
    std::vector<std::string> cors_origins;
    HttpAuth auth;
    HttpTls tls;
  } http;
  struct Collector {
    Millis interval{0};
    Millis retention{0};         // raw samples
    Millis minute_retention{0};  // minute summaries
    Millis hour_retention{0};    // hour summaries
    Millis stale_after{0};       // 0 until read: then 3 x interval unless set
    Millis commit_interval{0};
    std::int64_t max_series_per_sensor = 0;
    std::string snapshot_path;  // empty: no snapshot file
  } collector;
  std::vector<PluginEntry> sensors;
  std::vector<PluginEntry> routes;
  std::vector<PluginEntry> outputs;  // [[remote_write]] and [[mqtt]]; none by default
  // [[alert]]: the built-in rules (config/kiwi-agent.toml), then the user's; a user's rule of a
  // built-in rule's name replaces it in place.
  std::vector<AlertRule> alert_rules;
  struct Alerts {
    std::vector<std::string> disable;  // rule names not evaluated
  } alerts;
  std::vector<PluginEntry> notifiers;                  // [[notify]]; none by default
  std::vector<Peer> peers;                             // [[peer]]; none by default
  std::vector<std::shared_ptr<const void>> documents;  // the parsed files: keep `options` alive
  // Where each setting was last set ("agent.data_dir" -> kiwi.toml:3:12; a table such as
  // "http.tls" -> where it starts). What the built-in default sets is at "<built-in default>:..";
  // a key no file sets (stale_after, usually) is not in it.
  std::map<std::string, SourcePos, std::less<>> set_at;
  // What the user should hear though the configuration loads ("kiwi.toml:12:1: remote_write:
  // options given flat ..."), one line each, without the place's prefix repeated.
  std::vector<std::string> warnings;

  // set_at's place for `key`; an empty SourcePos when no file sets it.
  SourcePos where(std::string_view key) const;
};

// The embedded text of config/kiwi-agent.toml.
std::string_view default_config_text();

// Reads `path` over the defaults. Throws ConfigError (also for unreadable files).
Config load_config_file(const std::string& path, const std::string& exe_dir);
// The same for text already in memory; `source` names it in messages.
Config load_config_text(std::string_view text, const std::string& source,
                        const std::string& exe_dir);
// The defaults alone.
Config default_config(const std::string& exe_dir);

// For a reload: does `b` ask for the same plugin instance as `a`? Compares the plugin (as
// written), name, path and the options (a missing table equals an empty one). Not the schedule
// (interval, timeout), which a running instance takes over, nor source positions.
bool same_instance(const PluginEntry& a, const PluginEntry& b);

// For a reload: throws ConfigError for the first key of `next` that only a restart can change
// (the schema's restart-only rows: agent.data_dir, agent.procfs, agent.sysfs,
// collector.snapshot_path) and that differs from `running`, at the place `next` sets it
// ("<next's file>:0:0" when it went back to the default).
void check_reloadable(const Config& running, const Config& next);

std::optional<BindAddress> parse_bind(std::string_view text);

// Whether `hash` is a bcrypt hash libxcrypt verifies ([http.auth] basic_users): "$2a$", "$2b$" or
// "$2y$", a two-digit cost 04..31, "$", then 53 characters of bcrypt's base64 (22 of salt, 31 of
// hash).
bool is_bcrypt_hash(std::string_view hash);

// A sensor's name when its entry has none: the plugin as written, without a directory, ".so" and
// "kiwi-sensor-" ("cpu", "/opt/x/kiwi-sensor-gpu.so" -> "gpu", "./my_probe.so" -> "my_probe").
std::string default_sensor_name(std::string_view plugin);

}  // namespace kiwi::agent
