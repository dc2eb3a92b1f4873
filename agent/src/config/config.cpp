#include "config/config.hpp"

#include <arpa/inet.h>
#include <glob.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/log.hpp"
#include "config/option_reader.hpp"
#include "kiwi_embedded.hpp"

extern const kiwi_embedded::File kiwi_default_config[];

namespace kiwi::agent {

std::string_view default_config_text() {
  return kiwi_default_config[0].data;
}

std::string SourcePos::str() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

ConfigError::ConfigError(const SourcePos& pos, const std::string& key, const std::string& problem)
    : std::runtime_error(pos.str() + ": " + key + ": " + problem) {}

std::string BindAddress::str() const {
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::optional<BindAddress> parse_bind(std::string_view text) {
  BindAddress out;
  std::string_view host, port;
  if (text.starts_with('[')) {
    auto close = text.find("]:");
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    out.ipv6 = true;
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host == "localhost") host = out.ipv6 ? "::1" : "127.0.0.1";
  out.host = std::string(host);
  unsigned char buf[16];
  if (inet_pton(out.ipv6 ? AF_INET6 : AF_INET, out.host.c_str(), buf) != 1) return std::nullopt;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || port.empty() || value > 65535)
    return std::nullopt;
  out.port = static_cast<std::uint16_t>(value);
  return out;
}

bool is_bcrypt_hash(std::string_view h) {
  if (h.size() != 60 || h[0] != '$' || h[1] != '2' || (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') ||
      h[3] != '$' || h[6] != '$')
    return false;
  if (h[4] < '0' || h[4] > '9' || h[5] < '0' || h[5] > '9') return false;
  const int cost = (h[4] - '0') * 10 + (h[5] - '0');
  if (cost < 4 || cost > 31) return false;
  for (char c : h.substr(7))
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '/') return false;
  return true;
}

namespace {

constexpr std::string_view kBuiltIn = "<built-in default>";

SourcePos pos_of(const std::string& file, const toml::source_region& r) {
  return {file, r.begin.line, r.begin.column};
}

std::shared_ptr<const toml::table> parse_toml(std::string_view text, const std::string& source);

// Why `name` cannot name a sensor or an output (it names series and the output's cursor, and
// appears in URLs and logs); nullopt if it can.
std::optional<std::string> name_problem(std::string_view name) {
  bool ok = !name.empty();
  for (char c : name)
    ok &= std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  if (ok) return std::nullopt;
  return "\"" + std::string(name) + "\" is not a valid name; use letters, digits, '_', '-' or '.'";
}

// The whole of `path`; nullopt (errno set) when it cannot be opened. For the config file and the
// files it includes.
std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Reads one TOML document into `cfg`. Used twice: for the embedded defaults, then the user's file.
class Reader {
 public:
  Reader(Config& cfg, std::string file, std::string exe_dir)
      : cfg_(cfg), file_(std::move(file)), exe_dir_(std::move(exe_dir)) {}

  void read(const toml::table& root) {
    check_keys(root, "", {"agent", "http", "collector", "sensor", "route", "remote_write"});
    section(root, "agent",
            {{"data_dir",
              [&](auto& n, auto& k) {
                cfg_.agent.data_dir = path(n, k, false);
                cfg_.agent.data_dir_pos = user_pos(n);
              }},
             {"plugin_dir",
              [&](auto& n, auto& k) {
                cfg_.agent.plugin_dir = path(n, k, false);
                cfg_.agent.plugin_dir_pos = pos_of(file_, n.source());
              }},
             {"procfs",
              [&](auto& n, auto& k) {
                cfg_.agent.procfs = path(n, k, false);
                cfg_.agent.procfs_pos = user_pos(n);
              }},
             {"sysfs",
              [&](auto& n, auto& k) {
                cfg_.agent.sysfs = path(n, k, false);
                cfg_.agent.sysfs_pos = user_pos(n);
              }},
             {"include",
              [&](auto& n, auto& k) {
                const toml::array* arr = n.as_array();
                if (!arr)
                  fail(n, k, toml_repr(n) + " is not a list of globs, e.g. [\"conf.d/*.toml\"]");
                cfg_.agent.include.clear();
                includes_.clear();
                for (auto& item : *arr) {
                  cfg_.agent.include.push_back(string(item, k));
                  includes_.push_back({cfg_.agent.include.back(), pos_of(file_, item.source())});
                }
              }},
             {"log_level", [&](auto& n, auto& k) {
                auto s = string(n, k);
                auto level = parse_log_level(s);
                if (!level)
                  fail(n, k, quoted(s) + " is not a log level; use error, warn, info or debug");
                cfg_.agent.log_level = *level;
              }}});
    section(root, "http",
            {{"bind",
              [&](auto& n, auto& k) {
                auto s = string(n, k);
                auto bind = parse_bind(s);
                if (!bind)
                  fail(n, k,
                       quoted(s) +
                           " is not an address; use \"host:port\" with a numeric IP, e.g. "
                           "\"127.0.0.1:8095\", \"0.0.0.0:8095\" or \"[::1]:8095\"");
                cfg_.http.bind = *bind;
              }},
             {"threads",
              [&](auto& n, auto& k) {
                if (n.is_string() && *n.template value<std::string>() == "auto")
                  cfg_.http.threads = 0;
                else if (n.is_string())
                  fail(n, k, toml_repr(n) + " is not a thread count; accepted: \"auto\" or 1..256");
                else
                  cfg_.http.threads = integer(n, k, 1, 256);
              }},
             {"keep_alive",
              [&](auto& n, auto& k) {
                cfg_.http.keep_alive = duration(n, k, Millis(1000), Millis(3'600'000));
              }},
             {"max_connections",
              [&](auto& n, auto& k) { cfg_.http.max_connections = integer(n, k, 1, 65536); }},
             {"cors_origins", [&](auto& n, auto& k) { cfg_.http.cors_origins = origins(n, k); }},
             {"auth", [&](auto& n, auto& k) { auth(n, k); }},
             {"tls", [&](auto& n, auto& k) { tls(n, k); }}});
    section(root, "collector",
            {{"interval",
              [&](auto& n, auto& k) {
                cfg_.collector.interval = duration(n, k, Millis(100), Millis(3'600'000));
              }},
             {"retention",
              [&](auto& n, auto& k) {
                cfg_.collector.retention =
                    duration(n, k, Millis(60'000), Millis(366LL * 86'400'000));
                retention_pos_ = pos_of(file_, n.source());
              }},
             {"stale_after",
              [&](auto& n, auto& k) {
                cfg_.collector.stale_after = duration(n, k, Millis(100), Millis(86'400'000));
                stale_after_pos_ = pos_of(file_, n.source());
              }},
             {"commit_interval",
              [&](auto& n, auto& k) {
                cfg_.collector.commit_interval = duration(n, k, Millis(100), Millis(300'000));
              }},
             {"max_series_per_sensor",
              [&](auto& n, auto& k) {
                cfg_.collector.max_series_per_sensor = integer(n, k, 1, 1'000'000);
              }},
             {"snapshot_path", [&](auto& n, auto& k) {
                auto p = path(n, k, true);
                std::error_code ec;
                if (!p.empty() && (p.ends_with('/') || std::filesystem::is_directory(p, ec)))
                  fail(n, k,
                       quoted(p) +
                           " is a directory; name a file in it, e.g. "
                           "\"/run/kiwi-agent/current.json\", or \"\" for no snapshot file");
                cfg_.collector.snapshot_path = std::move(p);
                cfg_.collector.snapshot_path_pos = user_pos(n);
              }}});
    if (auto* list = root.get("sensor")) cfg_.sensors = entries(*list, "sensor");
    if (auto* list = root.get("route")) cfg_.routes = entries(*list, "route");
    if (auto* list = root.get("remote_write")) cfg_.outputs = outputs(*list);
  }

  // An included file: [[sensor]] and [[route]] entries, appended.
  void read_included(const toml::table& root) {
    for (auto& [key, node] : root)
      if (key.str() != "sensor" && key.str() != "route")
        throw ConfigError(pos_of(file_, key.source()), std::string(key.str()),
                          "an included file may hold only [[sensor]] and [[route]] entries; "
                          "set the other keys in the main configuration file");
    if (auto* list = root.get("sensor"))
      for (auto& e : entries(*list, "sensor")) cfg_.sensors.push_back(std::move(e));
    if (auto* list = root.get("route"))
      for (auto& e : entries(*list, "route")) cfg_.routes.push_back(std::move(e));
  }

  // The files `[agent] include` names, in order: each glob relative to this file's directory,
  // its matches sorted by name (glob(3)); a glob that matches nothing (a missing conf.d) reads
  // nothing. An included file holds [[sensor]] and [[route]] entries only, appended to the lists.
  void read_includes(std::vector<std::shared_ptr<const void>>& documents) {
    const std::filesystem::path dir = std::filesystem::path(file_).parent_path();
    for (auto& [pattern, pos] : includes_) {
      const std::string full =
          pattern.starts_with('/') || dir.empty() ? pattern : (dir / pattern).string();
      // A directory that is missing matches nothing; one that cannot be read is an error.
      static thread_local std::string unreadable;
      unreadable.clear();
      auto on_error = [](const char* path, int err) {
        if (err != ENOENT && err != ENOTDIR && unreadable.empty())
          unreadable = std::string(path) + ": " + std::strerror(err);
        return 0;
      };
      glob_t g{};
      const int rc = ::glob(full.c_str(), 0, on_error, &g);
      std::vector<std::string> files(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
      ::globfree(&g);
      if (!unreadable.empty() || (rc != 0 && rc != GLOB_NOMATCH))
        throw ConfigError(pos, "agent.include",
                          quoted(pattern) + ": cannot list " + full +
                              (unreadable.empty() ? "" : " (" + unreadable + ")"));
      for (auto& f : files) {
        std::error_code ec;
        if (std::filesystem::is_directory(f, ec)) continue;
        const auto text = read_text(f);
        if (!text)
          throw ConfigError(pos, "agent.include",
                            f + ": cannot read the included file: " + std::strerror(errno));
        auto doc = parse_toml(*text, f);
        documents.push_back(doc);
        Reader part(cfg_, f, exe_dir_);
        part.read_included(*doc);
      }
    }
  }

  // Cross-field checks, once all documents are read.
  void finish() {
    auto& c = cfg_.collector;
    if (c.stale_after.count() == 0) c.stale_after = 3 * c.interval;  // documented default
    if (c.stale_after < c.interval)
      throw ConfigError(stale_after_pos_, "collector.stale_after",
                        quoted(format_duration(c.stale_after)) +
                            " is shorter than collector.interval (" + format_duration(c.interval) +
                            "); use at least the interval");
    if (c.retention < c.interval)
      throw ConfigError(retention_pos_, "collector.retention",
                        quoted(format_duration(c.retention)) +
                            " is shorter than collector.interval (" + format_duration(c.interval) +
                            "); keep at least one interval of history");
    std::map<std::string, SourcePos> names;
    for (auto& s : cfg_.sensors) {
      if (s.interval && s.interval->count() % c.interval.count() != 0)
        throw ConfigError(s.pos, "sensor.interval",
                          quoted(format_duration(*s.interval)) +
                              " is not a multiple of collector.interval (" +
                              format_duration(c.interval) + ")");
      if (auto [at, added] = names.emplace(s.name, s.pos); !added)
        throw ConfigError(s.pos, "sensor.name",
                          quoted(s.name) + " is used by two [[sensor]] entries (the other at " +
                              at->second.str() + "); give each a unique name = \"...\"");
    }
    std::map<std::string, SourcePos> outputs;
    for (auto& o : cfg_.outputs)
      if (auto [at, added] = outputs.emplace(o.name, o.pos); !added)
        throw ConfigError(o.pos, "remote_write.name",
                          quoted(o.name) +
                              " is used by two [[remote_write]] entries (the other at " +
                              at->second.str() + "); give each a unique name = \"...\"");
    std::map<std::string, SourcePos> paths;
    for (auto& r : cfg_.routes)
      if (auto [at, added] = paths.emplace(r.path, r.pos); !added)
        throw ConfigError(
            r.pos, "route.path",
            quoted(r.path) + " is routed twice (the other at " + at->second.str() + ")");
  }

 private:
  using Apply = std::function<void(const toml::node&, const std::string&)>;
  struct Field {
    std::string_view key;
    Apply apply;
  };

  [[noreturn]] void fail(const toml::node& n, const std::string& key, const std::string& problem) {
    throw ConfigError(pos_of(file_, n.source()), key, problem);
  }
  static std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }
  // Where the user's file set `n`; empty for the built-in default.
  SourcePos user_pos(const toml::node& n) const {
    return file_ == kBuiltIn ? SourcePos{} : pos_of(file_, n.source());
  }

  void check_keys(const toml::table& t, const std::string& prefix,
                  std::initializer_list<std::string_view> known) {
    for (auto& [key, node] : t) {
      bool ok = false;
      std::string accepted;
      for (auto k : known) {
        ok |= key.str() == k;
        accepted += (accepted.empty() ? "" : ", ") + std::string(k);
      }
      if (!ok)
        throw ConfigError(pos_of(file_, key.source()), prefix + std::string(key.str()),
                          "unknown key; accepted here: " + accepted);
    }
  }

  void section(const toml::table& root, const std::string& name, std::vector<Field> fields) {
    const toml::node* node = root.get(name);
    if (!node) return;
    table_fields(*node, name, std::move(fields));
  }

  // The keys of the table `node` ([name], or a sub-table such as [http.auth] with its full name).
  void table_fields(const toml::node& node, const std::string& name, std::vector<Field> fields) {
    const toml::table* t = node.as_table();
    if (!t) fail(node, name, "must be a table ([" + name + "])");
    for (auto& [key, value] : *t) {
      std::string full = name + "." + std::string(key.str());
      // Compared through a plain variable: clang 14 refuses a lambda capturing a structured
      // binding (allowed only from C++20 as clang 16 implements it), and the fuzzers need clang.
      const std::string_view key_text = key.str();
      auto it =
          std::find_if(fields.begin(), fields.end(), [&](auto& f) { return f.key == key_text; });
      if (it == fields.end()) {
        std::string accepted;
        for (auto& f : fields) accepted += (accepted.empty() ? "" : ", ") + std::string(f.key);
        throw ConfigError(pos_of(file_, key.source()), full,
                          "unknown key; accepted in [" + name + "]: " + accepted);
      }
      it->apply(value, full);
    }
  }

  std::string string(const toml::node& n, const std::string& key) {
    if (auto v = n.value<std::string>(); v && n.is_string()) return *v;
    fail(n, key, toml_repr(n) + " is not a string");
  }

  // "$ORIGIN" at the start means the directory of the kiwi-agent executable.
  std::string path(const toml::node& n, const std::string& key, bool allow_empty) {
    std::string s = string(n, key);
    if (s.empty() && !allow_empty) fail(n, key, "must not be empty");
    if (s.starts_with("$ORIGIN")) s = exe_dir_ + s.substr(7);
    return s;
  }

  int integer(const toml::node& n, const std::string& key, std::int64_t lo, std::int64_t hi) {
    auto v = n.value_exact<std::int64_t>();
    if (!v)
      fail(n, key,
           toml_repr(n) + " is not an integer; accepted: " + std::to_string(lo) + ".." +
               std::to_string(hi));
    if (*v < lo || *v > hi)
      fail(n, key,
           std::to_string(*v) + " is out of range; accepted: " + std::to_string(lo) + ".." +
               std::to_string(hi));
    return static_cast<int>(*v);
  }

  Millis duration(const toml::node& n, const std::string& key, Millis lo, Millis hi) {
    const std::string range =
        " (accepted: " + format_duration(lo) + " to " + format_duration(hi) + ")";
    if (!n.is_string())
      fail(n, key,
           toml_repr(n) +
               " is not a duration; write a string such as \"500ms\", \"1s\", \"5m\", \"24h\"" +
               range);
    auto s = *n.value<std::string>();
    auto d = parse_duration(s);
    if (!d)
      fail(n, key,
           quoted(s) +
               " is not a duration; use a whole number with ms, s, m, h or d, e.g. \"500ms\", "
               "\"1s\", \"24h\"" +
               range);
    if (*d < lo || *d > hi) fail(n, key, quoted(s) + " is out of range" + range);
    return *d;
  }

  // Exact origins ("https://grafana.example:3000"); "*" is refused: no wildcard fallback.
  std::vector<std::string> origins(const toml::node& n, const std::string& key) {
    const toml::array* arr = n.as_array();
    if (!arr)
      fail(n, key, toml_repr(n) + " is not a list of origins, e.g. [\"http://192.168.1.10:3000\"]");
    std::vector<std::string> out;
    for (auto& item : *arr) {
      std::string o = string(item, key);
      if (o == "*" || !(o.starts_with("http://") || o.starts_with("https://")) || o.ends_with("/"))
        fail(item, key,
             quoted(o) +
                 " is not an origin; use scheme://host[:port] exactly as the browser sends it (no "
                 "wildcard, no path)");
      out.push_back(std::move(o));
    }
    return out;
  }

  // [http.auth]. A hash that is not bcrypt's, or a tokens file with a line that is not a SHA-256
  // hash, is an error here, not a login that never works.
  void auth(const toml::node& node, const std::string& name) {
    HttpAuth& a = cfg_.http.auth;
    a.pos = pos_of(file_, node.source());
    table_fields(
        node, name,
        {{"basic_users",
          [&](auto& n, auto& k) {
            const toml::table* t = n.as_table();
            if (!t)
              fail(n, k,
                   toml_repr(n) + " is not a table of users, e.g. { prometheus = \"$2b$10$...\" }");
            a.basic_users.clear();
            for (auto& [user, hash_node] : *t) {
              const std::string u(user.str());
              const std::string key = k + "." + u;
              if (u.empty() || u.find(':') != std::string::npos)
                throw ConfigError(pos_of(file_, user.source()), key,
                                  "a user name must not be empty nor contain ':'");
              std::string hash = string(hash_node, key);
              if (!is_bcrypt_hash(hash))
                fail(hash_node, key,
                     "is not a bcrypt hash (\"$2b$\" or \"$2y$\", a cost 04..31, 60 characters in "
                     "all); make one with `mkpasswd -m bcrypt` (package whois) or `htpasswd -nBC "
                     "10 " +
                         u + "` and paste the part after the ':'");
              a.basic_users[u] = std::move(hash);
            }
          }},
         {"bearer_tokens_file",
          [&](auto& n, auto& k) {
            a.bearer_tokens_file = path(n, k, true);
            a.bearer_token_hashes.clear();
            if (!a.bearer_tokens_file.empty())
              a.bearer_token_hashes = token_hashes(n, k, a.bearer_tokens_file);
          }},
         {"public_paths", [&](auto& n, auto& k) {
            const toml::array* arr = n.as_array();
            if (!arr) fail(n, k, toml_repr(n) + " is not a list of paths, e.g. [\"/api/health\"]");
            a.public_paths.clear();
            for (auto& item : *arr) {
              std::string p = string(item, k);
              const auto star = p.find('*');
              if (!p.starts_with('/') ||
                  (star != std::string::npos && (star != p.size() - 1 || !p.ends_with("/*"))))
                fail(item, k,
                     quoted(p) +
                         " is not a path; use an absolute path such as \"/api/health\", or a "
                         "prefix ending in \"/*\"");
              a.public_paths.push_back(std::move(p));
            }
          }}});
  }

  // [http.tls]: both files or neither ("" is none), each read now and looking like PEM of its kind;
  // whether the key matches the certificate, GnuTLS says when the server starts (HttpServer).
  void tls(const toml::node& node, const std::string& name) {
    HttpTls& t = cfg_.http.tls;
    t.pos = pos_of(file_, node.source());
    auto pem = [&](const toml::node& n, const std::string& k, std::string& file, std::string& text,
                   std::string_view marker, const char* what) {
      file = path(n, k, true);
      text.clear();
      if (file.empty()) return;  // off, as the built-in default has it
      auto content = read_text(file);
      if (!content) fail(n, k, "cannot read " + quoted(file) + ": " + std::strerror(errno));
      if (content->find(marker) == std::string::npos)
        fail(n, k,
             quoted(file) + " is not a PEM " + what + " (no \"" + std::string(marker) + "\" line)");
      text = std::move(*content);
    };
    table_fields(node, name,
                 {{"cert_file",
                   [&](auto& n, auto& k) {
                     pem(n, k, t.cert_file, t.cert_pem, "-----BEGIN CERTIFICATE-----",
                         "certificate");
                   }},
                  {"key_file", [&](auto& n, auto& k) {
                     pem(n, k, t.key_file, t.key_pem, "PRIVATE KEY-----", "private key");
                   }}});
    if (t.cert_file.empty() != t.key_file.empty())
      throw ConfigError(t.pos, name,
                        std::string("needs both cert_file and key_file; ") +
                            (t.cert_file.empty() ? "cert_file" : "key_file") + " is missing");
  }

  // The SHA-256 hashes in a bearer tokens file: one per line, 64 hex digits (`sha256sum` output:
  // what follows the hash on the line is ignored); blank lines and lines starting with '#' skipped.
  std::vector<std::string> token_hashes(const toml::node& n, const std::string& key,
                                        const std::string& file) {
    auto text = read_text(file);
    if (!text) fail(n, key, "cannot read " + quoted(file) + ": " + std::strerror(errno));
    std::vector<std::string> out;
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
        fail(n, key,
             file + ":" + std::to_string(number) +
                 ": not a SHA-256 hash (64 hex digits); add a token with `printf %s \"$TOKEN\" | "
                 "sha256sum >> " +
                 file + "`");
      out.push_back(std::move(hash));
    }
    return out;
  }

  std::vector<PluginEntry> entries(const toml::node& list, const std::string& kind) {
    const toml::array* arr = list.as_array();
    if (!arr || !arr->is_array_of_tables())
      fail(list, kind, "must be an array of tables ([[" + kind + "]])");
    std::vector<PluginEntry> out;
    for (auto& item : *arr) {
      const toml::table& t = *item.as_table();
      PluginEntry e;
      e.pos = pos_of(file_, t.source());
      const bool sensor = kind == "sensor";
      const std::string_view plugin_key = sensor ? "plugin" : "handler";
      if (sensor)
        check_keys(t, kind + ".", {"plugin", "name", "interval", "timeout", "options"});
      else
        check_keys(t, kind + ".", {"path", "handler", "options"});
      const toml::node* plugin = t.get(plugin_key);
      if (!plugin)
        throw ConfigError(e.pos, kind + "." + std::string(plugin_key),
                          "missing; name a plugin, e.g. " + std::string(plugin_key) + " = \"cpu\"");
      e.plugin = string(*plugin, kind + "." + std::string(plugin_key));
      if (e.plugin.empty())
        fail(*plugin, kind + "." + std::string(plugin_key), "must not be empty");
      e.plugin_pos = pos_of(file_, plugin->source());
      if (sensor) {
        e.name = e.plugin;
        if (auto* n = t.get("name")) {
          e.name = string(*n, "sensor.name");
          if (auto why = name_problem(e.name)) fail(*n, "sensor.name", *why);
        } else {
          e.name = default_sensor_name(e.plugin);
        }
        if (auto* n = t.get("interval"))
          e.interval = duration(*n, "sensor.interval", Millis(100), Millis(86'400'000));
        if (auto* n = t.get("timeout"))
          e.timeout = duration(*n, "sensor.timeout", Millis(10), Millis(3'600'000));
      } else {
        const toml::node* p = t.get("path");
        if (!p) throw ConfigError(e.pos, "route.path", "missing; e.g. path = \"/api/current\"");
        e.path = string(*p, "route.path");
        auto star = e.path.find('*');
        if (!e.path.starts_with('/') ||
            (star != std::string::npos && (star != e.path.size() - 1 || !e.path.ends_with("/*"))))
          fail(*p, "route.path",
               quoted(e.path) +
                   " is not a route path; use an absolute path such as \"/api/current\", or a "
                   "prefix ending in \"/*\"");
      }
      if (auto* o = t.get("options")) {
        if (!o->is_table()) fail(*o, kind + ".options", "must be a table");
        e.options = option_table(*o->as_table());
      }
      out.push_back(std::move(e));
    }
    return out;
  }

  // [[remote_write]]: the agent's keys (kOutputHostKeys) are read here; the rest of the table
  // is the output plugin's options, checked against its option table when it is loaded.
  std::vector<PluginEntry> outputs(const toml::node& list) {
    const toml::array* arr = list.as_array();
    if (!arr || !arr->is_array_of_tables())
      fail(list, "remote_write", "must be an array of tables ([[remote_write]])");
    std::vector<PluginEntry> out;
    for (auto& item : *arr) {
      const toml::table& t = *item.as_table();
      PluginEntry e;
      e.pos = pos_of(file_, t.source());
      e.plugin = "remote_write";
      e.plugin_pos = e.pos;
      if (auto* p = t.get("plugin")) {
        e.plugin = string(*p, "remote_write.plugin");
        if (e.plugin.empty()) fail(*p, "remote_write.plugin", "must not be empty");
        e.plugin_pos = pos_of(file_, p->source());
      }
      e.name = "remote_write";
      if (auto* n = t.get("name")) {
        e.name = string(*n, "remote_write.name");
        if (auto why = name_problem(e.name)) fail(*n, "remote_write.name", *why);
      }
      e.interval = Millis(10'000);
      if (auto* n = t.get("interval"))
        e.interval = duration(*n, "remote_write.interval", Millis(1000), Millis(3'600'000));
      if (auto* n = t.get("series")) {
        const toml::array* a = n->as_array();
        if (!a) fail(*n, "remote_write.series", "must be a list of series globs, e.g. [\"cpu_*\"]");
        for (auto& g : *a) e.series.push_back(string(g, "remote_write.series"));
      }
      if (auto* n = t.get("max_samples"))
        e.max_samples =
            static_cast<std::size_t>(integer(*n, "remote_write.max_samples", 100, 1'000'000));
      e.options = option_table(t);
      out.push_back(std::move(e));
    }
    return out;
  }

  Config& cfg_;
  std::string file_;
  std::string exe_dir_;
  std::vector<std::pair<std::string, SourcePos>> includes_;  // [agent] include, with places
  SourcePos stale_after_pos_;
  SourcePos retention_pos_{"<built-in default>"};
};

std::shared_ptr<const toml::table> parse_toml(std::string_view text, const std::string& source) {
  try {
    return std::make_shared<const toml::table>(toml::parse(text, source));
  } catch (const toml::parse_error& e) {
    throw ConfigError(pos_of(source, e.source()).str() + ": " + std::string(e.description()));
  }
}

Config load(std::string_view text, const std::string& source, const std::string& exe_dir,
            bool with_user) {
  Config cfg;
  cfg.source = with_user ? source : "<built-in default>";
  Reader defaults(cfg, "<built-in default>", exe_dir);
  auto defaults_doc = parse_toml(default_config_text(), "<built-in default>");
  cfg.documents.push_back(defaults_doc);
  defaults.read(*defaults_doc);
  cfg.agent.builtin_plugin_dir = cfg.agent.plugin_dir;
  Reader user(cfg, source, exe_dir);
  if (with_user) {
    auto doc = parse_toml(text, source);
    cfg.documents.push_back(doc);
    user.read(*doc);
    user.read_includes(cfg.documents);
  }
  (with_user ? user : defaults).finish();
  return cfg;
}

}  // namespace

Config default_config(const std::string& exe_dir) {
  return load({}, {}, exe_dir, false);
}

Config load_config_text(std::string_view text, const std::string& source,
                        const std::string& exe_dir) {
  return load(text, source, exe_dir, true);
}

bool same_instance(const PluginEntry& a, const PluginEntry& b) {
  static const toml::table none;
  return a.plugin == b.plugin && a.name == b.name && a.path == b.path &&
         (a.options ? toml_table(*a.options) : none) == (b.options ? toml_table(*b.options) : none);
}

void check_reloadable(const Config& running, const Config& next) {
  struct Key {
    std::string_view name;
    const std::string& was;
    const std::string& now;
    const SourcePos& pos;
  };
  const Key keys[] = {
      {"agent.data_dir", running.agent.data_dir, next.agent.data_dir, next.agent.data_dir_pos},
      {"agent.procfs", running.agent.procfs, next.agent.procfs, next.agent.procfs_pos},
      {"agent.sysfs", running.agent.sysfs, next.agent.sysfs, next.agent.sysfs_pos},
      {"collector.snapshot_path", running.collector.snapshot_path, next.collector.snapshot_path,
       next.collector.snapshot_path_pos},
  };
  for (auto& k : keys) {
    if (k.was == k.now) continue;
    // Not set in `next`: it went back to the built-in default; the file is the place to look.
    const bool defaulted = k.pos.file.empty();
    throw ConfigError(defaulted ? SourcePos{next.source} : k.pos, std::string(k.name),
                      "changed from \"" + k.was + "\" to " + (defaulted ? "the default " : "") +
                          "\"" + k.now +
                          "\"; that takes a restart (the running configuration stays)");
  }
}

std::string default_sensor_name(std::string_view plugin) {
  std::string_view name = plugin.substr(plugin.rfind('/') + 1);  // npos + 1 == 0
  if (name.ends_with(".so")) name.remove_suffix(3);
  if (name.starts_with("kiwi-sensor-")) name.remove_prefix(12);
  std::string out;
  for (char c : name)
    out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_');
  return out.empty() ? "sensor" : out;
}

Config load_config_file(const std::string& path, const std::string& exe_dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(
        path +
        ": is a directory; give the path of a TOML file, e.g. /etc/kiwi-agent/kiwi-agent.toml");
  const auto text = read_text(path);
  if (!text) throw ConfigError(path + ": cannot read the config file: " + std::strerror(errno));
  return load_config_text(*text, path, exe_dir);
}

}  // namespace kiwi::agent
