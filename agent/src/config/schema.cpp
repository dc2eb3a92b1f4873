#include "config/schema.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <kiwi/json.hpp>
#include <kiwi/prometheus.hpp>
#include <sstream>

#include "base/duration.hpp"
#include "base/log.hpp"
#include "config/alert_rule.hpp"
#include "config/option_reader.hpp"
#include "config/options.hpp"
#include "config/toml_table.hpp"

namespace kiwi::agent {

namespace {

using kiwi::OptionType;

// ---- Where a row's value goes --------------------------------------------------------------

template <class C, class T>
C owner_of(T C::*);

// The member at `First`, then `Rest...` within it, of `root`.
template <auto First, auto... Rest, class Root>
constexpr auto& member(Root& root) {
  if constexpr (sizeof...(Rest) == 0)
    return root.*First;
  else
    return member<Rest...>(root.*First);
}

void store_as(Millis& out, const OptionValue& v) {
  out = v.duration;
}
void store_as(std::optional<Millis>& out, const OptionValue& v) {
  out = v.duration;
}
void store_as(int& out, const OptionValue& v) {
  out = static_cast<int>(v.integer);  // a word of the row's choices ("auto") is 0
}
void store_as(std::int64_t& out, const OptionValue& v) {
  out = v.integer;
}
void store_as(std::size_t& out, const OptionValue& v) {
  out = static_cast<std::size_t>(v.integer);
}
void store_as(std::string& out, const OptionValue& v) {
  out = v.string;
}
void store_as(std::vector<std::string>& out, const OptionValue& v) {
  out = v.string_list;
}
void store_as(std::map<std::string, std::string>& out, const OptionValue& v) {
  out.clear();
  for (auto& [key, value] : v.table) out[key] = value;
}
void store_as(double& out, const OptionValue& v) {
  out = v.number;
}
void store_as(std::optional<double>& out, const OptionValue& v) {
  out = v.number;
}
void store_as(bool& out, const OptionValue& v) {
  out = v.boolean;
}
void store_as(LogLevel& out, const OptionValue& v) {
  out = parse_log_level(v.string).value();  // one of the row's choices
}
void store_as(BindAddress& out, const OptionValue& v) {
  out = parse_bind(v.string).value();  // checked by the row
}

std::string text_of(const HostOption&, const Millis& d) {
  return format_duration(d);
}
std::string text_of(const HostOption&, const std::optional<Millis>& d) {
  return d ? format_duration(*d) : "";
}
std::string text_of(const HostOption& row, const int& n) {
  return n == 0 && !row.spec.choices.empty() ? std::string(option_choices(row.spec).front())
                                             : std::to_string(n);
}
std::string text_of(const HostOption&, const std::int64_t& n) {
  return std::to_string(n);
}
std::string text_of(const HostOption&, const std::size_t& n) {
  return std::to_string(n);
}
std::string text_of(const HostOption&, const std::string& s) {
  return s;
}
std::string text_of(const HostOption&, const std::vector<std::string>& list) {
  std::string out = "[";
  for (auto& s : list) out += (out.size() > 1 ? ", " : "") + s;
  return out + "]";
}
std::string text_of(const HostOption&, const std::map<std::string, std::string>& table) {
  std::string out = "{";
  for (auto& [key, value] : table) out += (out.size() > 1 ? ", " : "") + key;
  return out + "}";
}
std::string number_text(double d) {
  std::ostringstream out;
  out.precision(17);
  out << d;
  std::string text = out.str();
  if (text == "inf" || text == "-inf" || text == "nan") return text;
  if (text.find_first_of(".e") == std::string::npos) text += ".0";  // a TOML float
  return text;
}
std::string text_of(const HostOption&, const double& d) {
  return number_text(d);
}
std::string text_of(const HostOption&, const std::optional<double>& d) {
  return d ? number_text(*d) : "";
}
std::string text_of(const HostOption&, const bool& b) {
  return b ? "true" : "false";
}
std::string text_of(const HostOption&, const LogLevel& level) {
  return std::string(to_string(level));
}
std::string text_of(const HostOption&, const BindAddress& b) {
  return b.str();
}

std::string toml_string(std::string_view s) {
  std::string out;
  append_json_string(out, s);  // a JSON string is a TOML basic string
  return out;
}
std::string toml_of(const HostOption&, const Millis& d) {
  return toml_string(format_duration(d));
}
std::string toml_of(const HostOption&, const std::optional<Millis>& d) {
  return d ? toml_string(format_duration(*d)) : "";
}
std::string toml_of(const HostOption& row, const int& n) {
  return n == 0 && !row.spec.choices.empty() ? toml_string(option_choices(row.spec).front())
                                             : std::to_string(n);
}
std::string toml_of(const HostOption&, const std::int64_t& n) {
  return std::to_string(n);
}
std::string toml_of(const HostOption&, const std::size_t& n) {
  return std::to_string(n);
}
std::string toml_of(const HostOption&, const std::string& s) {
  return toml_string(s);
}
std::string toml_of(const HostOption&, const std::vector<std::string>& list) {
  std::string out = "[";
  for (auto& s : list) out += (out.size() > 1 ? ", " : "") + toml_string(s);
  return out + "]";
}
std::string toml_of(const HostOption&, const std::map<std::string, std::string>& table) {
  std::string out = "{";
  for (auto& [key, value] : table)
    out += (out.size() > 1 ? ", " : " ") + toml_string(key) + " = " + toml_string(value);
  return out + (table.empty() ? "}" : " }");
}
std::string toml_of(const HostOption& row, const double& d) {
  return text_of(row, d);
}
std::string toml_of(const HostOption& row, const std::optional<double>& d) {
  return text_of(row, d);
}
std::string toml_of(const HostOption& row, const bool& b) {
  return text_of(row, b);
}
std::string toml_of(const HostOption&, const LogLevel& level) {
  return toml_string(to_string(level));
}
std::string toml_of(const HostOption&, const BindAddress& b) {
  return toml_string(b.str());
}

template <auto First, auto... Rest>
constexpr HostField host_field() {
  using Root = decltype(owner_of(First));
  return {
      [](void* root, const OptionValue& v) {
        store_as(member<First, Rest...>(*static_cast<Root*>(root)), v);
      },
      [](const void* a, const void* b) {
        return member<First, Rest...>(*static_cast<const Root*>(a)) ==
               member<First, Rest...>(*static_cast<const Root*>(b));
      },
      [](const HostOption& row, const void* root) {
        return text_of(row, member<First, Rest...>(*static_cast<const Root*>(root)));
      },
      [](const HostOption& row, const void* root) {
        return toml_of(row, member<First, Rest...>(*static_cast<const Root*>(root)));
      },
  };
}

// ---- Checks no type says enough about --------------------------------------------------------

std::string in_quotes(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

std::optional<std::string> check_bind(std::string_view value, std::string_view) {
  if (parse_bind(value)) return std::nullopt;
  return in_quotes(value) +
         " is not an address; use \"host:port\" with a numeric IP, e.g. \"127.0.0.1:8095\", "
         "\"0.0.0.0:8095\" or \"[::1]:8095\"";
}

// Exact origins ("https://grafana.example:3000"); "*" is refused: no wildcard fallback.
std::optional<std::string> check_origin(std::string_view o, std::string_view) {
  if (o != "*" && (o.starts_with("http://") || o.starts_with("https://")) && !o.ends_with("/"))
    return std::nullopt;
  return in_quotes(o) +
         " is not an origin; use scheme://host[:port] exactly as the browser sends it (no "
         "wildcard, no path)";
}

// An absolute path, or a prefix ending in "/*" (a route, or a path [http.auth] leaves open).
bool is_path_pattern(std::string_view p) {
  const auto star = p.find('*');
  return p.starts_with('/') &&
         (star == std::string_view::npos || (star == p.size() - 1 && p.ends_with("/*")));
}
std::optional<std::string> check_route_path(std::string_view p, std::string_view) {
  if (is_path_pattern(p)) return std::nullopt;
  return in_quotes(p) +
         " is not a route path; use an absolute path such as \"/api/current\", or a prefix "
         "ending in \"/*\"";
}
std::optional<std::string> check_public_path(std::string_view p, std::string_view) {
  if (is_path_pattern(p)) return std::nullopt;
  return in_quotes(p) +
         " is not a path; use an absolute path such as \"/api/health\", or a prefix ending in "
         "\"/*\"";
}

// Why `name` cannot name a sensor or an output (it names series and the output's cursor, and
// appears in URLs and logs); nullopt if it can.
std::optional<std::string> check_name(std::string_view name, std::string_view) {
  bool ok = !name.empty();
  for (char c : name)
    ok &= std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  if (ok) return std::nullopt;
  return in_quotes(name) + " is not a valid name; use letters, digits, '_', '-' or '.'";
}

// A peer's name is a path segment too (/peer/<name>/): not "." or "..", which browsers resolve.
std::optional<std::string> check_peer_name(std::string_view name, std::string_view entry) {
  if (name.find_first_not_of('.') == std::string_view::npos && !name.empty())
    return in_quotes(name) + " cannot name a peer (it is a path segment of /peer/<name>/)";
  return check_name(name, entry);
}
// A peer's url: http:// or https://, a host, no query or fragment (paths are appended to it).
std::optional<std::string> check_peer_url(std::string_view url, std::string_view) {
  std::string_view rest = url;
  if (rest.starts_with("http://"))
    rest.remove_prefix(7);
  else if (rest.starts_with("https://"))
    rest.remove_prefix(8);
  else
    return in_quotes(url) + " is not an http:// or https:// URL, e.g. \"http://barn.local:8095\"";
  const std::string_view authority = rest.substr(0, rest.find('/'));
  if (authority.empty() || authority.find('@') != std::string_view::npos)
    return in_quotes(url) +
           " names no host (or holds a user name: give credentials in basic_auth or "
           "bearer_token_file, which stay out of logs)";
  if (rest.find_first_of("?# \t") != std::string_view::npos)
    return in_quotes(url) + " has a query, a fragment or a blank; give the agent's address only";
  return std::nullopt;
}
std::optional<std::string> check_basic_auth_key(std::string_view key, std::string_view) {
  if (key == "username" || key == "password_file") return std::nullopt;
  return in_quotes(key) + " is not a key of basic_auth; accepted: username, password_file";
}

std::optional<std::string> check_alert_status(std::string_view s, std::string_view) {
  if (s.empty() || s == "failing" || s == "no_data" || s == "stale") return std::nullopt;
  return in_quotes(s) +
         " is not a sensor status; accepted: \"failing\" (its sample fails), \"no_data\" (it "
         "finds nothing to read), \"stale\" (no reading for collector.stale_after)";
}
std::optional<std::string> check_template(std::string_view text, std::string_view) {
  auto parsed = parse_template(text);
  if (auto* why = std::get_if<std::string>(&parsed)) return *why;
  return std::nullopt;
}
std::optional<std::string> check_snapshot_file(std::string_view p, std::string_view) {
  std::error_code ec;
  if (p.empty() || (!p.ends_with('/') && !std::filesystem::is_directory(p, ec)))
    return std::nullopt;
  return in_quotes(p) +
         " is a directory; name a file in it, e.g. \"/run/kiwi-agent/current.json\", or \"\" "
         "for no snapshot file";
}

// [http.auth]. A hash that is not bcrypt's, or a tokens file with a line that is not a SHA-256
// hash, is an error here, not a login that never works.
std::optional<std::string> check_label_name(std::string_view name, std::string_view) {
  if (prometheus::is_sensor_label_name(name)) return std::nullopt;
  return in_quotes(name) +
         " is not a valid label name (letters, digits and '_', not starting with a digit or "
         "\"__\")";
}
std::optional<std::string> check_user(std::string_view user, std::string_view) {
  if (!user.empty() && user.find(':') == std::string_view::npos) return std::nullopt;
  return "a user name must not be empty nor contain ':'";
}
std::optional<std::string> check_bcrypt(std::string_view hash, std::string_view user) {
  if (is_bcrypt_hash(hash)) return std::nullopt;
  return "is not a bcrypt hash (\"$2b$\" or \"$2y$\", a cost 04..31, 60 characters in all); make "
         "one with `mkpasswd -m bcrypt` (package whois) or `htpasswd -nBC 10 " +
         std::string(user) + "` and paste the part after the ':'";
}

// The SHA-256 hashes in a bearer tokens file: one per line, 64 hex digits (`sha256sum` output:
// what follows the hash on the line is ignored); blank lines and lines starting with '#' skipped.
std::optional<std::string> load_tokens(Config& cfg, const std::string& file) {
  auto& out = cfg.http.auth.bearer_token_hashes;
  out.clear();
  if (file.empty()) return std::nullopt;
  auto text = read_text(file);
  if (!text) return "cannot read " + in_quotes(file) + ": " + std::strerror(errno);
  std::istringstream lines(*text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::string hash = line.substr(first, line.find_first_of(" \t\r", first) - first);
    bool ok = hash.size() == 64;
    for (auto& c : hash) {
      ok &= std::isxdigit(static_cast<unsigned char>(c)) != 0;
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (!ok)
      return file + ":" + std::to_string(number) +
             ": not a SHA-256 hash (64 hex digits); add a token with `printf %s \"$TOKEN\" | "
             "sha256sum >> " +
             file + "`";
    out.push_back(std::move(hash));
  }
  return std::nullopt;
}

// [http.tls]: each file read now and looking like PEM of its kind ("" is none); whether the key
// matches the certificate, GnuTLS says when the server starts (HttpServer).
std::optional<std::string> read_pem(const std::string& file, std::string& text,
                                    std::string_view marker, const char* what) {
  text.clear();
  if (file.empty()) return std::nullopt;  // off, as the built-in default has it
  auto content = read_text(file);
  if (!content) return "cannot read " + in_quotes(file) + ": " + std::strerror(errno);
  if (content->find(marker) == std::string::npos)
    return in_quotes(file) + " is not a PEM " + what + " (no \"" + std::string(marker) + "\" line)";
  text = std::move(*content);
  return std::nullopt;
}
std::optional<std::string> load_cert(Config& cfg, const std::string& file) {
  return read_pem(file, cfg.http.tls.cert_pem, "-----BEGIN CERTIFICATE-----", "certificate");
}
std::optional<std::string> load_key(Config& cfg, const std::string& file) {
  return read_pem(file, cfg.http.tls.key_pem, "PRIVATE KEY-----", "private key");
}

// Both files or neither.
void finish_tls(const Config& cfg, const SourcePos& table) {
  const HttpTls& t = cfg.http.tls;
  if (t.cert_file.empty() != t.key_file.empty())
    throw ConfigError(table, "http.tls",
                      std::string("needs both cert_file and key_file; ") +
                          (t.cert_file.empty() ? "cert_file" : "key_file") + " is missing");
}

// The reload's notes: the credentials and the certificate are not shown, only what changed.
std::string note_auth(const Config& was, const Config& now) {
  const HttpAuth& a = now.http.auth;
  if (was.http.auth == a) return "";
  return std::string("http.auth changed (") +
         (a.enabled() ? "on: " + std::to_string(a.basic_users.size()) + " users, " +
                            std::to_string(a.bearer_token_hashes.size()) + " bearer tokens"
                      : "off") +
         ")";
}
std::string note_tls(const Config& was, const Config& now) {
  const HttpTls& a = was.http.tls;
  const HttpTls& b = now.http.tls;
  if (a == b) return "";
  return std::string("http.tls changed (") +
         (!b.enabled()                                             ? "off"
          : a.cert_file == b.cert_file && a.key_file == b.key_file ? "certificate or key renewed"
                                                                   : "on: " + b.cert_file) +
         ")";
}

// ---- The rows --------------------------------------------------------------------------------

using Agent = Config::Agent;
using Http = Config::Http;
using Collector = Config::Collector;

constexpr HostOption kAgent[] = {
    {.spec = {"data_dir", OptionType::string, "\"kiwi-data\"",
              "the history database (kiwi.db) lives here"},
     .field = host_field<&Config::agent, &Agent::data_dir>(),
     .text = HostText::path,
     .restart_only = true},
    {.spec = {"plugin_dir", OptionType::string, "\"$ORIGIN/" KIWI_PLUGIN_DIR_FROM_BINDIR "\"",
              "where plugins named without a path are found"},
     .field = host_field<&Config::agent, &Agent::plugin_dir>(),
     .text = HostText::path},
    {.spec = {"procfs", OptionType::string, "\"/proc\"", "the procfs root sensors read"},
     .field = host_field<&Config::agent, &Agent::procfs>(),
     .text = HostText::path,
     .restart_only = true},
    {.spec = {"sysfs", OptionType::string, "\"/sys\"", "the sysfs root sensors read"},
     .field = host_field<&Config::agent, &Agent::sysfs>(),
     .text = HostText::path,
     .restart_only = true},
    {.spec = {"include", OptionType::string_list, "[]",
              "globs (relative to the file) of drop-in files of [[sensor]] and [[route]] entries"},
     .field = host_field<&Config::agent, &Agent::include>(),
     .wrong_type = "{} is not a list of globs, e.g. [\"conf.d/*.toml\"]"},
    {.spec = {"log_level", OptionType::string, "\"info\"", "the least severe level logged", false,
              0, 0, "error,warn,info,debug"},
     .field = host_field<&Config::agent, &Agent::log_level>(),
     .noun = "a log level"},
};

constexpr HostOption kHttp[] = {
    {.spec = {"bind", OptionType::string, "\"127.0.0.1:8095\"",
              "\"host:port\" to listen on, a numeric IP"},
     .field = host_field<&Config::http, &Http::bind>(),
     .check = check_bind},
    {.spec = {"threads", OptionType::integer, "\"auto\"",
              "worker threads serving requests; \"auto\": one per CPU the agent may run on, at "
              "most 4",
              true, 1, 256, "auto"},
     .field = host_field<&Config::http, &Http::threads>(),
     .noun = "a thread count"},
    {.spec = {"keep_alive", OptionType::duration, "\"5s\"",
              "idle time before a kept-alive connection is closed", true, 1000, 3'600'000},
     .field = host_field<&Config::http, &Http::keep_alive>()},
    {.spec = {"max_connections", OptionType::integer, "256", "simultaneous connections", true, 1,
              65536},
     .field = host_field<&Config::http, &Http::max_connections>()},
    {.spec = {"cors_origins", OptionType::string_list, "[]",
              "origins allowed to read the API from a browser, exactly; no wildcard"},
     .field = host_field<&Config::http, &Http::cors_origins>(),
     .wrong_type = "{} is not a list of origins, e.g. [\"http://192.168.1.10:3000\"]",
     .check = check_origin},
};

constexpr HostOption kAuth[] = {
    {.spec = {"basic_users", OptionType::string_table, "{}",
              "HTTP Basic: { name = \"bcrypt hash\" }"},
     .field = host_field<&Config::http, &Http::auth, &HttpAuth::basic_users>(),
     .wrong_type = "{} is not a table of users, e.g. { prometheus = \"$2b$10$...\" }",
     .check = check_bcrypt,
     .check_key = check_user},
    {.spec = {"bearer_tokens_file", OptionType::string, "\"\"",
              "a file of the accepted bearer tokens' SHA-256 hashes, one a line"},
     .field = host_field<&Config::http, &Http::auth, &HttpAuth::bearer_tokens_file>(),
     .text = HostText::path_or_empty,
     .load = load_tokens},
    {.spec = {"public_paths", OptionType::string_list, "[\"/api/health\"]",
              "open without credentials: exact paths, or prefixes ending in \"/*\""},
     .field = host_field<&Config::http, &Http::auth, &HttpAuth::public_paths>(),
     .wrong_type = "{} is not a list of paths, e.g. [\"/api/health\"]",
     .check = check_public_path},
};

constexpr HostOption kTls[] = {
    {.spec = {"cert_file", OptionType::string, "\"\"",
              "HTTPS with key_file: the PEM certificate (chain)"},
     .field = host_field<&Config::http, &Http::tls, &HttpTls::cert_file>(),
     .text = HostText::path_or_empty,
     .load = load_cert},
    {.spec = {"key_file", OptionType::string, "\"\"", "its PEM private key"},
     .field = host_field<&Config::http, &Http::tls, &HttpTls::key_file>(),
     .text = HostText::path_or_empty,
     .load = load_key},
};

constexpr HostOption kCollector[] = {
    {.spec = {"interval", OptionType::duration, "\"1s\"", "the sampling period", true, 100,
              3'600'000},
     .field = host_field<&Config::collector, &Collector::interval>()},
    {.spec = {"retention", OptionType::duration, "\"24h\"", "history kept in the database", true,
              60'000, 3660.0 * 86'400'000},
     .field = host_field<&Config::collector, &Collector::retention>()},
    {.spec = {"minute_retention", OptionType::duration, "\"30d\"",
              "minute summaries (mean, min, max, last, count) kept", true, 60'000,
              3660.0 * 86'400'000},
     .field = host_field<&Config::collector, &Collector::minute_retention>()},
    {.spec = {"hour_retention", OptionType::duration, "\"365d\"", "hour summaries kept", true,
              3'600'000, 3660.0 * 86'400'000},
     .field = host_field<&Config::collector, &Collector::hour_retention>()},
    {.spec = {"stale_after", OptionType::duration, "",
              "/api/current says stale after this long without a new sample", true, 100,
              86'400'000},
     .field = host_field<&Config::collector, &Collector::stale_after>(),
     .default_text = "3 x interval"},
    {.spec = {"commit_interval", OptionType::duration, "\"5m\"",
              "history reaches the disk this often", true, 100, 300'000},
     .field = host_field<&Config::collector, &Collector::commit_interval>()},
    {.spec = {"max_series_per_sensor", OptionType::integer, "5000",
              "distinct series one sensor may add to history per run", true, 1, 1'000'000},
     .field = host_field<&Config::collector, &Collector::max_series_per_sensor>()},
    {.spec = {"snapshot_path", OptionType::string, "\"/run/kiwi-agent/current.json\"",
              "the latest sample as JSON for scripts; \"\" for none"},
     .field = host_field<&Config::collector, &Collector::snapshot_path>(),
     .text = HostText::path_or_empty,
     .restart_only = true,
     .check = check_snapshot_file},
};

constexpr HostOption kAlertsSection[] = {
    {.spec = {"disable", OptionType::string_list, "[]",
              "[[alert]] rules not evaluated, by name (the built-in ones included)"},
     .field = host_field<&Config::alerts, &Config::Alerts::disable>(),
     .wrong_type = "{} is not a list of rule names, e.g. [\"memory_low\"]",
     .check = check_name},
};

constexpr HostSection kSections[] = {
    {"agent", kAgent},
    {"http", kHttp},
    {"http.auth", kAuth, nullptr, note_auth},
    {"http.tls", kTls, finish_tls, note_tls},
    {"collector", kCollector},
    {"alerts", kAlertsSection},
};

constexpr HostOption kOptions = {
    .spec = {"options", OptionType::string_table, "{}", "the plugin's options (see its README)"},
    .field = {},  // none: the table is kept as written for the plugin (plugin_options)
    .wrong_type = "must be a table",
    .plugin_options = true};

constexpr HostOption kSensor[] = {
    {.spec = {"plugin", OptionType::string, "",
              "a plugin name (<plugin_dir>/kiwi-sensor-<name>.so) or a path to a .so"},
     .field = host_field<&PluginEntry::plugin>(),
     .text = HostText::non_empty,
     .missing = "missing; name a plugin, e.g. plugin = \"cpu\""},
    {.spec = {"name", OptionType::string, "", "the instance's name, unique"},
     .field = host_field<&PluginEntry::name>(),
     .default_text = "the plugin's name",
     .check = check_name},
    {.spec = {"interval", OptionType::duration, "",
              "sample every this long, a multiple of collector.interval", true, 100, 86'400'000},
     .field = host_field<&PluginEntry::interval>(),
     .default_text = "collector.interval"},
    {.spec = {"timeout", OptionType::duration, "",
              "how long one sample() may take before the sensor is reported `error`", true, 10,
              3'600'000},
     .field = host_field<&PluginEntry::timeout>(),
     .default_text = "the sensor's interval"},
    {.spec = {"labels", OptionType::string_table, "{}",
              "labels added to every metric of this sensor, e.g. { room = \"lab\" }; one the "
              "sensor emits with such a name becomes exported_<name>"},
     .field = host_field<&PluginEntry::labels>(),
     .wrong_type = "{} is not a table of labels, e.g. { room = \"lab\" }",
     .check_key = check_label_name},
    kOptions,
};

constexpr HostOption kRoute[] = {
    {.spec = {"path", OptionType::string, "", "an exact path, or a prefix ending in \"/*\""},
     .field = host_field<&PluginEntry::path>(),
     .missing = "missing; e.g. path = \"/api/current\"",
     .check = check_route_path},
    {.spec = {"handler", OptionType::string, "",
              "a handler name (<plugin_dir>/kiwi-handler-<name>.so) or a path to a .so"},
     .field = host_field<&PluginEntry::plugin>(),
     .text = HostText::non_empty,
     .missing = "missing; name a plugin, e.g. handler = \"cpu\""},
    kOptions,
};

// The rows every output entry ([[remote_write]], [[mqtt]]) shares.
constexpr HostOption kOutputInterval = {
    .spec = {"interval", OptionType::duration, "\"10s\"", "one batch per interval while live", true,
             1000, 3'600'000},
    .field = host_field<&PluginEntry::interval>()};
constexpr HostOption kOutputMaxSamples = {
    .spec = {"max_samples", OptionType::integer, "10000", "samples per batch at most", true, 100,
             1'000'000},
    .field = host_field<&PluginEntry::max_samples>()};

constexpr HostOption kRemoteWrite[] = {
    {.spec = {"plugin", OptionType::string, "\"remote_write\"",
              "an output plugin name (<plugin_dir>/kiwi-output-<name>.so) or a path to a .so"},
     .field = host_field<&PluginEntry::plugin>(),
     .text = HostText::non_empty},
    {.spec = {"name", OptionType::string, "\"remote_write\"",
              "unique among the outputs; names the cursor kept in the database"},
     .field = host_field<&PluginEntry::name>(),
     .check = check_name},
    kOutputInterval,
    {.spec = {"series", OptionType::string_list, "[]",
              "series names or keys, `*` globs, to send; [] for all"},
     .field = host_field<&PluginEntry::series>(),
     .wrong_type = "must be a list of series globs, e.g. [\"cpu_*\"]"},
    kOutputMaxSamples,
    kOptions,
};

// [[mqtt]]: an output like [[remote_write]] (the same runner and cursor), its own plugin and, by
// default, only the gauges the dashboard's cards show (a Home Assistant device of a few sensors,
// not hundreds: plugins/mqtt/README.md).
constexpr HostOption kMqtt[] = {
    {.spec = {"plugin", OptionType::string, "\"mqtt\"",
              "an output plugin name (<plugin_dir>/kiwi-output-<name>.so) or a path to a .so"},
     .field = host_field<&PluginEntry::plugin>(),
     .text = HostText::non_empty},
    {.spec = {"name", OptionType::string, "\"mqtt\"",
              "unique among the outputs; names the cursor kept in the database"},
     .field = host_field<&PluginEntry::name>(),
     .check = check_name},
    kOutputInterval,
    {.spec = {"series", OptionType::string_list,
              "[\"cpu_usage_ratio\", \"thermal_celsius\", \"memory_used_ratio\", "
              "\"storage_used_ratio\", \"power_under_voltage_alarm\"]",
              "series names or keys, `*` globs, to publish; [] for all"},
     .field = host_field<&PluginEntry::series>(),
     .wrong_type = "must be a list of series globs, e.g. [\"cpu_*\"]"},
    kOutputMaxSamples,
    kOptions,
};

constexpr HostOption kNotify[] = {
    {.spec =
         {"kind", OptionType::string, "",
          "\"alertmanager\", \"webhook\", \"ntfy\" (<plugin_dir>/kiwi-notifier-<kind>.so), or a "
          "path to a notifier plugin's .so"},
     .field = host_field<&PluginEntry::plugin>(),
     .text = HostText::non_empty,
     .missing = "missing; e.g. kind = \"ntfy\" (or \"alertmanager\", \"webhook\")"},
    {.spec = {"name", OptionType::string, "", "unique; names its queue in the database"},
     .field = host_field<&PluginEntry::name>(),
     .default_text = "the kind",
     .check = check_name},
    {.spec = {"alerts", OptionType::string_list, "[]",
              "the rules (names, `*` globs) it is told of; [] for all"},
     .field = host_field<&PluginEntry::alerts>(),
     .wrong_type = "{} is not a list of rule names, e.g. [\"soc_hot\", \"*_full\"]"},
    {.spec = {"min_severity", OptionType::string, "\"info\"",
              "the least severe alert it is told of", false, 0, 0, "info,warning,critical"},
     .field = host_field<&PluginEntry::min_severity>(),
     .noun = "a severity"},
    {.spec = {"repeat_interval", OptionType::duration, "",
              "a firing alert is sent again this often while it fires", true, 10'000,
              7.0 * 86'400'000},
     .field = host_field<&PluginEntry::repeat_interval>(),
     .default_text = "1m for alertmanager (as Prometheus re-sends), else 4h"},
    kOptions,
};

constexpr HostEntry kEntries[] = {
    {"sensor", "plugin", kSensor},
    {"route", "handler", kRoute},
    {"remote_write", "plugin", kRemoteWrite},
    {"mqtt", "plugin", kMqtt},
    {"notify", "kind", kNotify},
};

constexpr HostOption kAlertRule[] = {
    {.spec = {"name", OptionType::string, "", "unique: the alert's `alertname`"},
     .field = host_field<&AlertRule::name>(),
     .missing = "missing; name the rule, e.g. name = \"soc_hot\"",
     .check = check_name},
    {.spec = {"metric", OptionType::string, "\"\"",
              "the series name it watches, `*` globs (or `status` for a sensor's status)"},
     .field = host_field<&AlertRule::metric>()},
    {.spec = {"labels", OptionType::string_table, "{}",
              "label matchers, `*` globs: every one must match, e.g. { mount = \"/\" }"},
     .field = host_field<&AlertRule::labels>(),
     .wrong_type = "{} is not a table of label globs, e.g. { zone = \"soc*\" }",
     .check_key = check_label_name},
    {.spec = {"sensor", OptionType::string, "\"\"",
              "only the reports of these sensors ([[sensor]] names, `*` globs); \"\" for all"},
     .field = host_field<&AlertRule::sensor>()},
    {.spec = {"above", OptionType::number, "", "fires while the value is above this"},
     .field = host_field<&AlertRule::above>()},
    {.spec = {"below", OptionType::number, "", "fires while the value is below this"},
     .field = host_field<&AlertRule::below>()},
    {.spec = {"threshold_series", OptionType::string, "\"\"",
              "compare with this series of the same sensor and labels where it exists (plus "
              "threshold_offset), else with above/below"},
     .field = host_field<&AlertRule::threshold_series>()},
    {.spec = {"threshold_offset", OptionType::number, "0.0",
              "added to threshold_series, e.g. -5.0: within 5 degrees of the critical trip"},
     .field = host_field<&AlertRule::threshold_offset>()},
    {.spec = {"rate", OptionType::boolean, "false",
              "compare the per-second rate of a counter, not its value"},
     .field = host_field<&AlertRule::rate>()},
    {.spec = {"status", OptionType::string, "\"\"",
              "a sensor-status rule: \"failing\", \"no_data\" or \"stale\" (no metric)"},
     .field = host_field<&AlertRule::status>(),
     .check = check_alert_status},
    {.spec = {"for", OptionType::duration, "\"0s\"",
              "how long the condition must hold before the alert fires", true, 0, 7.0 * 86'400'000},
     .field = host_field<&AlertRule::hold_for>()},
    {.spec = {"keep_firing_for", OptionType::duration, "\"0s\"",
              "how long a firing alert stays firing after the condition clears", true, 0,
              7.0 * 86'400'000},
     .field = host_field<&AlertRule::keep_firing_for>()},
    {.spec = {"hysteresis", OptionType::number, "",
              "how far back past the threshold a firing value must go to resolve", true, 0, 1e300},
     .field = host_field<&AlertRule::hysteresis>(),
     .default_text = "5 % of the threshold's magnitude"},
    {.spec = {"severity", OptionType::string, "\"warning\"", "info, warning or critical", false, 0,
              0, "info,warning,critical"},
     .field = host_field<&AlertRule::severity>(),
     .noun = "a severity"},
    {.spec = {"summary", OptionType::string, "\"\"",
              "one line with {{value}}, {{threshold}}, {{labels.<label>}}, {{series}}, "
              "{{sensor}}, {{name}}, {{severity}}"},
     .field = host_field<&AlertRule::summary>(),
     .default_text = "\"<name>: {{series}} is {{value}} above {{threshold}}\"",
     .check = check_template},
};

constexpr HostEntry kAlertEntry = {"alert", "name", kAlertRule};

constexpr HostOption kPeer[] = {
    {.spec = {"name", OptionType::string, "",
              "unique: the board's name in the fleet and in /peer/<name>/"},
     .field = host_field<&Peer::name>(),
     .missing = "missing; name the board, e.g. name = \"barn\"",
     .check = check_peer_name},
    {.spec = {"url", OptionType::string, "", "the peer agent's address, http:// or https://"},
     .field = host_field<&Peer::url>(),
     .missing = "missing; e.g. url = \"http://barn.local:8095\"",
     .check = check_peer_url},
    {.spec = {"timeout", OptionType::duration, "\"2s\"",
              "how long one request to the peer may take (connect and answer)", true, 100, 60'000},
     .field = host_field<&Peer::timeout>()},
    {.spec = {"bearer_token_file", OptionType::string, "\"\"",
              "a file whose first line is the peer's bearer token (\"\": none)"},
     .field = host_field<&Peer::bearer_token_file>(),
     .text = HostText::path_or_empty},
    {.spec = {"basic_auth", OptionType::string_table, "{}",
              "{ username = \"...\", password_file = \"...\" }: the peer's Basic "
              "authentication, the password the file's first line"},
     .field = host_field<&Peer::basic_auth>(),
     .wrong_type = "{} is not a table, e.g. { username = \"kiwi\", password_file = "
                   "\"/etc/kiwi-agent/barn.pass\" }",
     .check_key = check_basic_auth_key},
    {.spec = {"ca_file", OptionType::string, "\"\"",
              "https: a PEM file of the CAs to trust for this peer (\"\": the system's)"},
     .field = host_field<&Peer::ca_file>(),
     .text = HostText::path_or_empty},
};

constexpr HostEntry kPeerEntry = {"peer", "name", kPeer};

}  // namespace

std::span<const HostSection> host_sections() {
  return kSections;
}

std::span<const HostEntry> host_entries() {
  return kEntries;
}

const HostEntry& host_alert_rule() {
  return kAlertEntry;
}

const HostEntry& host_peer() {
  return kPeerEntry;
}

const HostEntry& host_entry(std::string_view kind) {
  for (auto& e : kEntries)
    if (e.kind == kind) return e;
  throw std::logic_error("no entry kind " + std::string(kind));
}

std::vector<std::string> setting_changes(const Config& was, const Config& now) {
  std::vector<std::string> out;
  for (auto& section : kSections) {
    if (section.note) {
      if (auto note = section.note(was, now); !note.empty()) out.push_back(std::move(note));
      continue;
    }
    for (auto& row : section.rows) {
      if (row.restart_only || row.field.equal(&was, &now)) continue;
      auto show = [&](const Config& c) {
        auto text = row.field.text(row, &c);
        return text.empty() ? "\"\"" : text;
      };
      out.push_back(std::string(section.name) + "." + std::string(row.spec.key) + " " + show(was) +
                    " -> " + show(now));
    }
  }
  return out;
}

void check_reloadable(const Config& running, const Config& next) {
  for (auto& section : kSections)
    for (auto& row : section.rows) {
      if (!row.restart_only || row.field.equal(&running, &next)) continue;
      const std::string key = std::string(section.name) + "." + std::string(row.spec.key);
      // Not set in `next`'s file: it went back to the built-in default; the file is the place
      // to look.
      const SourcePos at = next.where(key);
      const bool defaulted = at.file.empty() || at.file == "<built-in default>";
      throw ConfigError(defaulted ? SourcePos{next.source} : at, key,
                        "changed from \"" + row.field.text(row, &running) + "\" to " +
                            (defaulted ? "the default " : "") + "\"" + row.field.text(row, &next) +
                            "\"; that takes a restart (the running configuration stays)");
    }
}

namespace {

// `t` and every table in it written inline ({ ... }).
void make_inline(toml::table& t) {
  t.is_inline(true);
  for (auto&& [key, node] : t)
    if (auto* sub = node.as_table()) make_inline(*sub);
}

}  // namespace

std::string render_toml(const Config& cfg) {
  std::ostringstream out;
  out << "# The configuration kiwi-agent runs on, from " << cfg.source
      << ": every setting, defaults\n# included, and the entries of the files it includes.\n";
  for (auto& section : kSections) {
    out << "\n[" << section.name << "]\n";
    for (auto& row : section.rows) {
      // Its entries are below already: the file loaded again includes nothing more.
      if (section.name == "agent" && row.spec.key == "include") {
        out << "include = []\n";
        continue;
      }
      if (auto value = row.field.toml(row, &cfg); !value.empty())
        out << row.spec.key << " = " << value << "\n";
    }
  }
  const std::pair<const std::vector<PluginEntry>*, std::string_view> lists[] = {
      {&cfg.sensors, "sensor"},
      {&cfg.routes, "route"},
      {&cfg.outputs, "remote_write"},
      {&cfg.notifiers, "notify"}};
  for (auto& [entries, list_kind] : lists)
    for (const PluginEntry& e : *entries) {
      // An output is written as the table it came from ([[remote_write]] or [[mqtt]]).
      const std::string_view kind = e.table.empty() ? list_kind : std::string_view(e.table);
      out << "\n[[" << kind << "]]\n";
      for (auto& row : host_entry(kind).rows) {
        if (row.plugin_options) {
          if (!e.options || toml_table(*e.options).empty()) continue;
          // Inline, tables in it too, so that it stays the entry's whatever follows.
          toml::table options = toml_table(*e.options);
          if (e.options_flat) {  // as written: the plugin's keys beside the agent's
            for (auto& r : host_entry(kind).rows) options.erase(r.spec.key);
            for (auto&& [key, node] : options)
              if (auto* sub = node.as_table()) make_inline(*sub);
            out << options << "\n";
            continue;
          }
          make_inline(options);
          out << "options = " << options << "\n";
          continue;
        }
        if (auto value = row.field.toml(row, &e); !value.empty())
          out << row.spec.key << " = " << value << "\n";
      }
    }
  // A rule's keys that differ from their defaults (an AlertRule's members start at its rows'
  // defaults): a status rule's file has no `rate = false`, which it refuses.
  const AlertRule defaults;
  for (const AlertRule& rule : cfg.alert_rules) {
    out << "\n[[alert]]\n";
    for (auto& row : kAlertRule)
      if (!row.field.equal(&rule, &defaults))
        if (auto value = row.field.toml(row, &rule); !value.empty())
          out << row.spec.key << " = " << value << "\n";
  }
  for (const Peer& peer : cfg.peers) {
    out << "\n[[peer]]\n";
    for (auto& row : kPeer)
      if (auto value = row.field.toml(row, &peer); !value.empty())
        out << row.spec.key << " = " << value << "\n";
  }
  return out.str();
}

}  // namespace kiwi::agent
