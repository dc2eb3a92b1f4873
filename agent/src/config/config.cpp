#include "config/config.hpp"

#include <arpa/inet.h>
#include <glob.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <kiwi/model.hpp>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/log.hpp"
#include "config/option_reader.hpp"
#include "config/options.hpp"
#include "config/schema.hpp"
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

std::string in_quotes(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

const HostOption* find_row(std::span<const HostOption> rows, std::string_view key) {
  for (auto& row : rows)
    if (row.spec.key == key) return &row;
  return nullptr;
}

const HostSection* find_section(std::string_view name) {
  for (auto& s : host_sections())
    if (s.name == name) return &s;
  return nullptr;
}

// "bind, threads, ...": the keys of a table, and its sub-tables ("auth, tls" in [http]).
std::string keys_of(std::span<const HostOption> rows, std::string_view section = {}) {
  std::string out;
  for (auto& row : rows) out += (out.empty() ? "" : ", ") + std::string(row.spec.key);
  if (!section.empty())
    for (auto& s : host_sections())
      if (s.name.starts_with(section) && s.name.size() > section.size() &&
          s.name[section.size()] == '.')
        out += ", " + std::string(s.name.substr(section.size() + 1));
  return out;
}

// What the agent's own setting that does not fit is told, at the value (or its item), in the
// words the agent has always used for its own keys: "<value> is not a duration; ... (accepted:
// 100ms to 1h)", "0 is out of range; accepted: 1..256". (A plugin's options are worded by
// validate_options.)
std::string host_problem(const HostOption& row, const Misfit& why) {
  const OptionSpec& spec = row.spec;
  const toml::node& n = *why.node;
  const std::string repr = toml_repr(n);
  const std::string given = n.is_string() ? in_quotes(*n.value<std::string>()) : repr;
  auto integers = [&] {
    return std::to_string(static_cast<std::int64_t>(spec.min)) + ".." +
           std::to_string(static_cast<std::int64_t>(spec.max));
  };
  auto durations = [&] {
    return " (accepted: " + format_duration(Millis(static_cast<std::int64_t>(spec.min))) + " to " +
           format_duration(Millis(static_cast<std::int64_t>(spec.max))) + ")";
  };
  switch (why.kind) {
    case Misfit::Kind::item:
      return repr + " is not a string";
    case Misfit::Kind::form:
      if (spec.type != OptionType::duration)  // a size: no host row has one yet
        return given + " is not a " + std::string(option_type_name(spec.type));
      return given +
             " is not a duration; use a whole number with ms, s, m, h or d, e.g. \"500ms\", "
             "\"1s\", \"24h\"" +
             durations();
    case Misfit::Kind::range:
      if (spec.type == OptionType::duration) return given + " is out of range" + durations();
      return repr + " is out of range; accepted: " +
             (spec.type == OptionType::integer ? integers() : option_range_text(spec));
    case Misfit::Kind::choice: {
      std::string words;
      const auto choices = option_choices(spec);
      if (spec.type == OptionType::integer) {  // "auto" or a number
        for (auto w : choices) words += in_quotes(w) + " or ";
        return repr + " is not " + std::string(row.noun) + "; accepted: " + words + integers();
      }
      for (std::size_t i = 0; i < choices.size(); ++i)
        words += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + std::string(choices[i]);
      return given + " is not " + std::string(row.noun) + "; use " + words;
    }
    case Misfit::Kind::type:
      break;
  }
  if (!row.wrong_type.empty()) {
    std::string text(row.wrong_type);
    if (auto at = text.find("{}"); at != std::string::npos) text.replace(at, 2, repr);
    return text;
  }
  switch (spec.type) {
    case OptionType::integer:
      return repr + " is not an integer; accepted: " + integers();
    case OptionType::duration:
      return repr +
             " is not a duration; write a string such as \"500ms\", \"1s\", \"5m\", \"24h\"" +
             durations();
    case OptionType::string:
      return repr + " is not a string";
    default:
      return repr + " is not a " + std::string(option_type_name(spec.type));
  }
}

// Reads TOML documents into `cfg` through the host's schema: the embedded defaults, then the
// user's file, then the files it includes, each with its own Reader.
class Reader {
 public:
  Reader(Config& cfg, std::string file, std::string exe_dir)
      : cfg_(cfg), file_(std::move(file)), exe_dir_(std::move(exe_dir)) {}

  void read(const toml::table& root) {
    std::vector<std::string_view> top;
    for (auto& s : host_sections())
      if (s.name.find('.') == std::string_view::npos) top.push_back(s.name);
    for (auto& e : host_entries()) top.push_back(e.kind);
    top.push_back(host_alert_rule().kind);
    top.push_back(host_peer().kind);
    for (auto& [key, node] : root)
      if (std::find(top.begin(), top.end(), key.str()) == top.end()) {
        std::string accepted;
        for (auto k : top) {
          if (!accepted.empty()) accepted += ", ";
          accepted += k;
        }
        throw ConfigError(pos_of(file_, key.source()), std::string(key.str()),
                          "unknown key; accepted here: " + accepted);
      }
    for (auto& s : host_sections())
      if (s.name.find('.') == std::string_view::npos)
        if (auto* node = root.get(s.name)) read_section(s, *node);
    // A file's entries replace the earlier file's; [[remote_write]] and [[mqtt]] share a list.
    std::vector<const std::vector<PluginEntry>*> replaced;
    for (auto& e : host_entries())
      if (auto* list = root.get(e.kind)) {
        auto& to = entries_of(e.kind);
        auto read = entries(e, *list);
        if (std::find(replaced.begin(), replaced.end(), &to) == replaced.end()) {
          replaced.push_back(&to);
          to.clear();
        }
        for (auto& entry : read) to.push_back(std::move(entry));
      }
    if (auto* list = root.get(host_alert_rule().kind)) read_alert_rules(*list);
    if (auto* list = root.get(host_peer().kind)) read_peers(*list);
    root_ = &root;
  }

  // An included file: [[sensor]] and [[route]] entries, appended.
  void read_included(const toml::table& root) {
    for (auto& [key, node] : root)
      if (key.str() != "sensor" && key.str() != "route")
        throw ConfigError(pos_of(file_, key.source()), std::string(key.str()),
                          "an included file may hold only [[sensor]] and [[route]] entries; "
                          "set the other keys in the main configuration file");
    for (std::string_view kind : {"sensor", "route"})
      if (auto* list = root.get(kind))
        for (auto& e : entries(host_entry(kind), *list)) entries_of(kind).push_back(std::move(e));
  }

  // The files `[agent] include` names, in order: each glob relative to this file's directory,
  // its matches sorted by name (glob(3)); a glob that matches nothing (a missing conf.d) reads
  // nothing. An included file holds [[sensor]] and [[route]] entries only, appended to the lists.
  void read_includes(std::vector<std::shared_ptr<const void>>& documents) {
    const toml::array* globs = root_ ? (*root_)["agent"]["include"].as_array() : nullptr;
    if (!globs) return;
    const std::filesystem::path dir = std::filesystem::path(file_).parent_path();
    for (auto& item : *globs) {
      const std::string pattern = *item.value<std::string>();
      const SourcePos pos = pos_of(file_, item.source());
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
                          in_quotes(pattern) + ": cannot list " + full +
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

  // The rows' defaults, into `root` (the Config, or an entry), before any file is read.
  void apply_defaults(std::span<const HostOption> rows, std::string_view prefix, void* root) {
    for (auto& row : rows) {
      if (row.spec.default_toml.empty() || row.plugin_options) continue;
      const toml::table doc = toml::parse("v = " + std::string(row.spec.default_toml));
      read_row(row, *doc.get("v"), std::string(prefix) + std::string(row.spec.key), root);
    }
  }

 private:
  [[noreturn]] void fail(const toml::node& n, const std::string& key, const std::string& problem) {
    throw ConfigError(pos_of(file_, n.source()), key, problem);
  }

  std::vector<PluginEntry>& entries_of(std::string_view kind) {
    return kind == "sensor"   ? cfg_.sensors
           : kind == "route"  ? cfg_.routes
           : kind == "notify" ? cfg_.notifiers
                              : cfg_.outputs;  // [[remote_write]] and [[mqtt]]
  }

  // [[alert]] rules, onto those of the files read before: a rule named as an earlier file's
  // (the built-in ones) replaces it in place; two of one name in one file are an error.
  void read_alert_rules(const toml::node& list) {
    const HostEntry& kind = host_alert_rule();
    const toml::array* arr = list.as_array();
    if (!arr || !arr->is_array_of_tables())
      fail(list, "alert", "must be an array of tables ([[alert]])");
    auto& rules = cfg_.alert_rules;
    for (auto& item : *arr) {
      const toml::table& t = *item.as_table();
      auto rule = read_data_entry<AlertRule>(kind, t);
      check_alert_rule(rule, t);
      auto same = std::find_if(rules.begin(), rules.end(),
                               [&](const AlertRule& r) { return r.name == rule.name; });
      if (same == rules.end()) {
        rules.push_back(std::move(rule));
      } else if (same->pos.file != file_) {
        *same = std::move(rule);
      } else {
        throw ConfigError(rule.pos, "alert.name",
                          in_quotes(rule.name) + " names two [[alert]] rules (the other at " +
                              same->pos.str() + "); give each a unique name");
      }
    }
  }

  // One [[alert]] or [[peer]] table into a T through the entry's rows: unknown keys refused,
  // defaults, then the table's keys, a required one missing named at the table.
  template <class T>
  T read_data_entry(const HostEntry& kind, const toml::table& t) {
    const std::string prefix = std::string(kind.kind) + ".";
    T entry;
    entry.pos = pos_of(file_, t.source());
    for (auto& [key, node] : t)
      if (!find_row(kind.rows, key.str()))
        throw ConfigError(pos_of(file_, key.source()), prefix + std::string(key.str()),
                          "unknown key; accepted here: " + keys_of(kind.rows));
    apply_defaults(kind.rows, prefix, &entry);
    for (auto& row : kind.rows) {
      const std::string key = prefix + std::string(row.spec.key);
      if (const toml::node* n = t.get(row.spec.key))
        read_row(row, *n, key, &entry);
      else if (!row.missing.empty())
        throw ConfigError(entry.pos, key, std::string(row.missing));
    }
    return entry;
  }

  // [[peer]] entries: a file that lists them replaces the list (the built-in default has none).
  // Two of one name are an error; a basic_auth gives both of its keys.
  void read_peers(const toml::node& list) {
    const HostEntry& kind = host_peer();
    const toml::array* arr = list.as_array();
    if (!arr || !arr->is_array_of_tables())
      fail(list, "peer", "must be an array of tables ([[peer]])");
    std::vector<Peer> peers;
    for (auto& item : *arr) {
      const toml::table& t = *item.as_table();
      auto peer = read_data_entry<Peer>(kind, t);
      while (peer.url.ends_with('/')) peer.url.pop_back();
      if (!peer.basic_auth.empty() &&
          (!peer.basic_auth.contains("username") || !peer.basic_auth.contains("password_file")))
        fail(*t.get("basic_auth"), "peer.basic_auth",
             "give both username and password_file, e.g. { username = \"kiwi\", password_file = "
             "\"/etc/kiwi-agent/" +
                 peer.name + ".pass\" }");
      if (!peer.bearer_token_file.empty() && !peer.basic_auth.empty())
        throw ConfigError(peer.pos, "peer.bearer_token_file",
                          "give bearer_token_file or basic_auth, not both");
      auto same = std::find_if(peers.begin(), peers.end(),
                               [&](const Peer& p) { return p.name == peer.name; });
      if (same != peers.end())
        throw ConfigError(peer.pos, "peer.name",
                          in_quotes(peer.name) + " names two [[peer]] entries (the other at " +
                              same->pos.str() + "); give each a unique name");
      peers.push_back(std::move(peer));
    }
    cfg_.peers = std::move(peers);
  }

  // What one rule's keys say together: a metric rule compares (above or below), a status rule
  // does not.
  void check_alert_rule(const AlertRule& r, const toml::table& t) {
    auto at = [&](std::string_view key) {
      const toml::node* n = t.get(key);
      return n ? pos_of(file_, n->source()) : r.pos;
    };
    if (!r.status.empty()) {
      for (std::string_view key :
           {"metric", "labels", "above", "below", "threshold_series", "rate", "hysteresis"})
        if (t.contains(key))
          throw ConfigError(at(key), "alert." + std::string(key),
                            "a status rule (status = \"" + r.status +
                                "\") watches a sensor, not a value; leave out " + std::string(key) +
                                " or status");
      return;
    }
    if (r.metric.empty())
      throw ConfigError(r.pos, "alert.metric",
                        "missing; name the series the rule watches, e.g. metric = "
                        "\"thermal_celsius\", or give status = \"failing\" for a sensor's status");
    if (r.above.has_value() == r.below.has_value())
      throw ConfigError(r.above ? at("below") : r.pos, r.above ? "alert.below" : "alert.above",
                        r.above ? "give above or below, not both (one rule, one threshold)"
                                : "missing; give the threshold, e.g. above = 80.0 or below = 0.05");
  }

  // A table of the configuration ([http], or [http.auth] with its full name), key by key.
  void read_section(const HostSection& section, const toml::node& node) {
    const std::string name(section.name);
    const toml::table* t = node.as_table();
    if (!t) fail(node, name, "must be a table ([" + name + "])");
    const SourcePos at = pos_of(file_, node.source());
    cfg_.set_at[name] = at;
    for (auto& [key, value] : *t) {
      const std::string full = name + "." + std::string(key.str());
      if (const HostOption* row = find_row(section.rows, key.str())) {
        read_row(*row, value, full, &cfg_);
        cfg_.set_at[full] = pos_of(file_, value.source());
      } else if (const HostSection* sub = find_section(full)) {
        read_section(*sub, value);
      } else {
        throw ConfigError(
            pos_of(file_, key.source()), full,
            "unknown key; accepted in [" + name + "]: " + keys_of(section.rows, name));
      }
    }
    if (section.finish) section.finish(cfg_, at);
  }

  // One value of a row, into `root` (the Config, or an entry): read as a plugin's option is,
  // then the row's own checks, then what it names is read.
  void read_row(const HostOption& row, const toml::node& n, const std::string& key, void* root) {
    if (row.plugin_options) {  // the plugin's own table, checked when the plugin is loaded
      if (!n.is_table()) fail(n, key, std::string(row.wrong_type));
      static_cast<PluginEntry*>(root)->options = option_table(*n.as_table());
      return;
    }
    Misfit why;
    auto value = read_option_value(row.spec, n, why);
    if (!value) {
      const std::string at_key = why.item_key.empty() ? key : key + "." + why.item_key;
      fail(*why.node, at_key, host_problem(row, why));
    }
    std::string& text = value->string;
    if (text.empty() && (row.text == HostText::non_empty || row.text == HostText::path))
      fail(n, key, "must not be empty");
    // "$ORIGIN" at the start means the directory of the kiwi-agent executable.
    if ((row.text == HostText::path || row.text == HostText::path_or_empty) &&
        text.starts_with("$ORIGIN"))
      text = exe_dir_ + text.substr(7);
    if (row.check || row.check_key) check(row, n, key, *value);
    row.field.store(root, *value);
    if (row.load)
      if (auto problem = row.load(cfg_, text)) fail(n, key, *problem);
  }

  // The row's checks: the string, each item of a list, each key and value of a table.
  void check(const HostOption& row, const toml::node& n, const std::string& key,
             const OptionValue& value) {
    if (const toml::table* t = n.as_table()) {
      for (auto& [entry, item] : *t) {
        const std::string at_key = key + "." + std::string(entry.str());
        if (auto why = row.check_key ? row.check_key(entry.str(), {}) : std::nullopt)
          throw ConfigError(pos_of(file_, entry.source()), at_key, *why);
        if (auto why =
                row.check ? row.check(*item.value<std::string>(), entry.str()) : std::nullopt)
          fail(item, at_key, *why);
      }
    } else if (!row.check) {
      return;
    } else if (const toml::array* a = n.as_array()) {
      for (auto& item : *a)
        if (auto why = row.check(*item.value<std::string>(), {})) fail(item, key, *why);
    } else if (auto why = row.check(value.string, {})) {
      fail(n, key, *why);
    }
  }

  std::vector<PluginEntry> entries(const HostEntry& kind, const toml::node& list) {
    const std::string name(kind.kind);
    const toml::array* arr = list.as_array();
    if (!arr || !arr->is_array_of_tables())
      fail(list, name, "must be an array of tables ([[" + name + "]])");
    std::vector<PluginEntry> out;
    for (auto& item : *arr) out.push_back(entry(kind, *item.as_table()));
    return out;
  }

  // One [[sensor]], [[route]] or [[remote_write]]: the agent's keys, and the plugin's options.
  PluginEntry entry(const HostEntry& kind, const toml::table& t) {
    const std::string name(kind.kind);
    PluginEntry e = entry_defaults(kind.kind);
    e.table = name;
    e.pos = e.plugin_pos = pos_of(file_, t.source());
    // [[remote_write]] without `options`: keys that are not the agent's are the output plugin's
    // options given flat in the table, the shape before options = {...}.
    const bool flat_allowed =
        (kind.kind == "remote_write" || kind.kind == "mqtt" || kind.kind == "notify") &&
        !t.contains("options");
    std::string flat;
    for (auto& [key, node] : t) {
      if (find_row(kind.rows, key.str())) continue;
      if (!flat_allowed)
        throw ConfigError(pos_of(file_, key.source()), name + "." + std::string(key.str()),
                          "unknown key; accepted here: " + keys_of(kind.rows));
      flat += (flat.empty() ? "" : ", ") + std::string(key.str()) + " = ...";
    }
    if (!flat.empty()) {  // still read, the plugin's keys checked against its table at load
      e.options = option_table(t);
      e.options_flat = true;
      if (kind.kind == "remote_write")
        cfg_.warnings.push_back(e.pos.str() + ": " + name +
                                ": options given flat in the table; put them in options = { " +
                                flat + " } (the flat shape still works)");
    }
    for (auto& row : kind.rows) {
      const std::string key = name + "." + std::string(row.spec.key);
      if (const toml::node* n = t.get(row.spec.key)) {
        read_row(row, *n, key, &e);
        if (row.spec.key == kind.plugin_key) e.plugin_pos = pos_of(file_, n->source());
      } else if (!row.missing.empty()) {
        throw ConfigError(e.pos, key, std::string(row.missing));
      }
    }
    if (kind.kind == "sensor" && !t.contains("name")) e.name = default_sensor_name(e.plugin);
    if (kind.kind == "notify" && !t.contains("name")) e.name = default_sensor_name(e.plugin);
    return e;
  }

  Config& cfg_;
  std::string file_;
  std::string exe_dir_;
  const toml::table* root_ = nullptr;  // the document read(), for its [agent] include
};

// Cross-field checks, once all documents are read.
void finish(Config& cfg) {
  auto& c = cfg.collector;
  if (c.stale_after.count() == 0) c.stale_after = 3 * c.interval;  // documented default
  if (c.stale_after < c.interval)
    throw ConfigError(cfg.where("collector.stale_after"), "collector.stale_after",
                      in_quotes(format_duration(c.stale_after)) +
                          " is shorter than collector.interval (" + format_duration(c.interval) +
                          "); use at least the interval");
  if (c.retention < c.interval)
    throw ConfigError(cfg.where("collector.retention"), "collector.retention",
                      in_quotes(format_duration(c.retention)) +
                          " is shorter than collector.interval (" + format_duration(c.interval) +
                          "); keep at least one interval of history");
  // Each tier keeps at least as long as the finer one before it, so a query finds every time in
  // one of them: a shorter value is raised to it (with a warning when a file set it so).
  auto at_least = [&](Millis& v, Millis floor, const char* key, const char* floor_key) {
    if (v >= floor) return;
    const SourcePos at = cfg.where(std::string("collector.") + key);
    if (!at.file.empty() && at.file != kBuiltIn)
      cfg.warnings.push_back(at.str() + ": collector." + key + ": " +
                             in_quotes(format_duration(v)) + " is shorter than collector." +
                             floor_key + "; kept " + format_duration(floor) + " instead");
    v = floor;
  };
  at_least(c.minute_retention, c.retention, "minute_retention", "retention");
  at_least(c.hour_retention, c.minute_retention, "hour_retention", "minute_retention");
  cfg.agent.plugin_dir_pos = cfg.where("agent.plugin_dir");
  std::map<std::string, SourcePos> names;
  for (auto& s : cfg.sensors) {
    if (s.interval && s.interval->count() % c.interval.count() != 0)
      throw ConfigError(s.pos, "sensor.interval",
                        in_quotes(format_duration(*s.interval)) +
                            " is not a multiple of collector.interval (" +
                            format_duration(c.interval) + ")");
    // Its report would be the agent's own in the snapshot, /metrics and the history.
    if (s.name == kAgentReport || s.name == kAlertsReport)
      throw ConfigError(
          s.pos, "sensor.name",
          in_quotes(s.name) +
              " is the name of one of the agent's own reports; give this sensor another name");
    if (auto [at, added] = names.emplace(s.name, s.pos); !added)
      throw ConfigError(s.pos, "sensor.name",
                        in_quotes(s.name) + " is used by two [[sensor]] entries (the other at " +
                            at->second.str() + "); give each a unique name = \"...\"");
  }
  // [[remote_write]] and [[mqtt]] alike: the name keys the output's cursor in the database.
  std::map<std::string, const PluginEntry*> outputs;
  for (auto& o : cfg.outputs)
    if (auto [at, added] = outputs.emplace(o.name, &o); !added)
      throw ConfigError(o.pos, o.table + ".name",
                        in_quotes(o.name) + " is used by two outputs (the other, a [[" +
                            at->second->table + "]], at " + at->second->pos.str() +
                            "); give each a unique name = \"...\"");
  std::map<std::string, SourcePos> notifiers;
  for (auto& n : cfg.notifiers)
    if (auto [at, added] = notifiers.emplace(n.name, n.pos); !added)
      throw ConfigError(n.pos, "notify.name",
                        in_quotes(n.name) + " is used by two [[notify]] entries (the other at " +
                            at->second.str() + "); give each a unique name = \"...\"");
  for (auto& name : cfg.alerts.disable)
    if (std::none_of(cfg.alert_rules.begin(), cfg.alert_rules.end(),
                     [&](const AlertRule& r) { return r.name == name; })) {
      std::string known;
      for (auto& r : cfg.alert_rules) known += (known.empty() ? "" : ", ") + r.name;
      throw ConfigError(cfg.where("alerts.disable"), "alerts.disable",
                        in_quotes(name) + " names no [[alert]] rule; the rules: " + known);
    }
  std::map<std::string, SourcePos> paths;
  for (auto& r : cfg.routes)
    if (auto [at, added] = paths.emplace(r.path, r.pos); !added)
      throw ConfigError(
          r.pos, "route.path",
          in_quotes(r.path) + " is routed twice (the other at " + at->second.str() + ")");
}

// Every row's default, into a Config read from no file (exe_dir "$ORIGIN" leaves it as it is).
void apply_schema_defaults(Config& cfg, const std::string& exe_dir) {
  Reader schema(cfg, "<schema>", exe_dir);
  for (auto& s : host_sections()) schema.apply_defaults(s.rows, std::string(s.name) + ".", &cfg);
}

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
  apply_schema_defaults(cfg, exe_dir);
  // The embedded file sets the same values (a test holds it to the rows), at places a message
  // can name, and the default [[sensor]] and [[route]] lists.
  Reader defaults(cfg, std::string(kBuiltIn), exe_dir);
  auto defaults_doc = parse_toml(default_config_text(), std::string(kBuiltIn));
  cfg.documents.push_back(defaults_doc);
  defaults.read(*defaults_doc);
  cfg.agent.builtin_plugin_dir = cfg.agent.plugin_dir;
  if (with_user) {
    Reader user(cfg, source, exe_dir);
    auto doc = parse_toml(text, source);
    cfg.documents.push_back(doc);
    user.read(*doc);
    user.read_includes(cfg.documents);
  }
  finish(cfg);
  return cfg;
}

}  // namespace

SourcePos Config::where(std::string_view key) const {
  auto it = set_at.find(key);
  return it == set_at.end() ? SourcePos{} : it->second;
}

const Config& schema_defaults() {
  static const Config defaults = [] {
    Config cfg;
    apply_schema_defaults(cfg, "$ORIGIN");
    cfg.collector.stale_after = 3 * cfg.collector.interval;  // as finish() derives it
    return cfg;
  }();
  return defaults;
}

const PluginEntry& entry_defaults(std::string_view kind) {
  static const auto defaults = [] {
    std::map<std::string, PluginEntry, std::less<>> out;
    Config none;
    Reader schema(none, "<schema>", "$ORIGIN");
    for (auto& e : host_entries()) {
      PluginEntry& entry = out[std::string(e.kind)];
      entry.table = e.kind;
      schema.apply_defaults(e.rows, std::string(e.kind) + ".", &entry);
    }
    return out;
  }();
  return defaults.find(kind)->second;
}

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
