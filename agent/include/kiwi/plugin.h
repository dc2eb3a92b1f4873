/* kiwi-agent plugin ABI: the boundary between the agent and a plugin's shared object, in C.
 *
 * A plugin is a shared object that exports one function,
 *
 *     KIWI_PLUGIN_EXPORT const kiwi_plugin *kiwi_plugin_v1(void);
 *
 * returning a descriptor in static storage: what the plugin is (kind, name, description), its
 * option and metric tables, and the functions the agent calls. Nothing but the types below
 * crosses the boundary: plain C structs, fixed-width integers, doubles, function pointers, and
 * strings as pointer + length (kiwi_str, not NUL-terminated, UTF-8). No C++ type, allocator or
 * exception does, so a plugin may be written in C, built by another compiler, or against another
 * minor version of this header, and the agent (built with another libstdc++) loads it.
 *
 * The C++ SDK (kiwi/sensor.hpp, kiwi/handler.hpp) is a header-only wrapper over this file: a C++
 * plugin gets its descriptor from KIWI_SENSOR_PLUGIN / KIWI_HANDLER_PLUGIN. The agent's own
 * plugins go through the same path.
 *
 * Versions (docs/plugins.md "ABI rules"):
 *   - KIWI_ABI_MAJOR changes when something here changes incompatibly (a member removed, moved or
 *     retyped, a meaning changed). The agent refuses a plugin of another major version, naming the
 *     file, the version it loads and the one it found.
 *   - KIWI_ABI_MINOR grows when members are added, always at the end of a struct, and each struct
 *     that grows carries its `size`. Either side reads a member of a struct the other side made
 *     only if that struct's `size` covers it (KIWI_HAS_MEMBER), so an agent loads a plugin built
 *     for an older or a newer minor version, and arrays of rows (options, metrics) are stepped
 *     through by the row size the plugin states.
 *
 * Ownership: everything the agent passes in is borrowed and valid only during the call, unless a
 * comment says otherwise. Strings a plugin passes to a callback are copied before it returns.
 * What a plugin returns from kiwi_plugin_v1() (the descriptor and its tables) must stay valid
 * while the shared object is loaded; the agent keeps it loaded while any instance, or any body a
 * handler returned, is alive.
 *
 * Threading: see each function. Callbacks the agent hands out (log, emit, ...) may be called only
 * during the call they were passed to, except kiwi_host, which is valid until destroy().
 */
#ifndef KIWI_PLUGIN_H
#define KIWI_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KIWI_ABI_MAJOR 1
#define KIWI_ABI_MINOR 8

#define KIWI_PLUGIN_EXPORT __attribute__((visibility("default")))

/* Whether a struct `s` of declared size `s->size` has `member` (for the other side's structs). */
#define KIWI_HAS_MEMBER(s, type, member) \
  ((s)->size >= offsetof(type, member) + sizeof(((type *)0)->member))

/* A string: `size` bytes at `data` (data may be NULL when size is 0). */
typedef struct kiwi_str {
  const char *data;
  size_t size;
} kiwi_str;

/* ---- What a plugin declares ------------------------------------------------------------------ */

/* KIWI_KIND_OUTPUT: since ABI 1.1 (an output plugin sends history somewhere: remote write).
 * KIWI_KIND_NOTIFIER: since ABI 1.6 (a notifier sends alerts somewhere: Alertmanager, ntfy). */
enum { KIWI_KIND_SENSOR = 1, KIWI_KIND_HANDLER = 2, KIWI_KIND_OUTPUT = 3, KIWI_KIND_NOTIFIER = 4 };

/* Option types. The agent parses the TOML value, checks its type and range and fills in the
 * default, so a plugin reads its options without validation of its own.
 *   DURATION  a TOML string in the config's syntax ("500ms", "10s", "2m", "1h30m"); milliseconds
 *   SIZE      a TOML integer of bytes, or a string "512", "64KiB", "1MiB", "10kB"; bytes
 *   STRING_TABLE  (since ABI 1.1) a TOML table of strings, { "X-Scope" = "a", b = "c" }; given as
 *             `strings` holding key, value, key, value, ... in the table's order (string_count is
 *             twice the number of entries). An agent of ABI 1.0 refuses a plugin declaring one. */
enum {
  KIWI_OPTION_BOOLEAN = 0,
  KIWI_OPTION_INTEGER = 1,
  KIWI_OPTION_NUMBER = 2,
  KIWI_OPTION_STRING = 3,
  KIWI_OPTION_STRING_LIST = 4,
  KIWI_OPTION_DURATION = 5,
  KIWI_OPTION_SIZE = 6,
  KIWI_OPTION_STRING_TABLE = 7
};

/* One row of the option table. It drives validation (an unknown key, a wrong type or a value out
 * of range is an error naming file:line:col), the default, and `kiwi-agent --describe-plugin`. */
typedef struct kiwi_option_spec {
  kiwi_str key;
  uint32_t type;
  kiwi_str default_toml; /* the default as a TOML literal: "true", "30", "\"10s\"", "[\"lo\"]" */
  kiwi_str description;  /* one line: what it does, in which unit */
  /* An inclusive range for INTEGER, NUMBER, DURATION (milliseconds) and SIZE (bytes), checked
   * when has_range is non-zero. */
  uint32_t has_range;
  double min;
  double max;
  /* ABI 1.3. A closed set of words, comma-separated without spaces: "prometheus,json" ("" for
   * none). On a STRING row the value must be one of them (an enum): anything else is the user's
   * error, at file:line:col, listing them. On an INTEGER row they are accepted besides numbers in
   * range ("auto"): the value's `string` is then the word and its `integer` 0. Read only when the
   * plugin's option_spec_size covers it: an agent older than 1.3 takes any string for the row. */
  kiwi_str choices;
} kiwi_option_spec;

/* The size of a kiwi_option_spec in ABI 1.0 to 1.2, before `choices`. */
#define KIWI_OPTION_SPEC_SIZE_1_0 offsetof(kiwi_option_spec, choices)

/* Units: base units only, a closed set (the name of each, as the API writes it, in comments).
 * VOLTS, AMPERES, WATTS and RPM are ABI 1.5 (hwmon's voltages, currents, power and fan speeds).
 * A unit this agent does not know (a later minor version's) in a plugin's metric table is refused
 * at load, naming the row, its unit code and the plugin's ABI version; in a row a sensor makes at
 * run time it drops the value and names it in the sensor's status. An agent of ABI 1.4 or older
 * does not check table rows at load: it loads a plugin of 1.5 and drops the values of its rows
 * in a 1.5 unit at each sample, naming them in the sensor's status ("unit code 9 is not a known
 * unit"), while the plugin's other metrics arrive. A handler or output built against an SDK
 * before 1.5 sees the codes 9 to 12 in kiwi_metric_value.unit, kiwi_output_series.unit and
 * kiwi_history_series.unit: the C++ SDK of any version names a code it does not know "" (as
 * none); a C plugin should do the same. */
enum {
  KIWI_UNIT_NONE = 0,             /* "" (a unitless value) */
  KIWI_UNIT_BYTES = 1,            /* "bytes" */
  KIWI_UNIT_SECONDS = 2,          /* "seconds" */
  KIWI_UNIT_CELSIUS = 3,          /* "celsius" */
  KIWI_UNIT_HERTZ = 4,            /* "hertz" */
  KIWI_UNIT_RATIO = 5,            /* "ratio" (0..1) */
  KIWI_UNIT_COUNT = 6,            /* "count" */
  KIWI_UNIT_BYTES_PER_SECOND = 7, /* "bytes_per_second" */
  KIWI_UNIT_PER_SECOND = 8,       /* "per_second" */
  KIWI_UNIT_VOLTS = 9,            /* "volts" (ABI 1.5) */
  KIWI_UNIT_AMPERES = 10,         /* "amperes" (ABI 1.5) */
  KIWI_UNIT_WATTS = 11,           /* "watts" (ABI 1.5) */
  KIWI_UNIT_RPM = 12              /* "rpm": revolutions per minute, a fan's speed (ABI 1.5) */
};

/* Metric kinds. KIWI_HISTOGRAM and KIWI_SUMMARY (ABI 1.4) are Prometheus' histogram and summary:
 * a row of either kind names one series of its family, by the exposition format's names:
 *   histogram  <family>_bucket with a label `le` (the bucket's upper bound, a number or +Inf, its
 *              cumulative count), <family>_sum, <family>_count;
 *   summary    <family> with a label `quantile` (a number in 0..1), <family>_sum, <family>_count.
 * /metrics groups them under one `# TYPE <family> histogram|summary`. An agent before 1.4 drops
 * such a value as an unknown kind (and names it in the sensor's status). */
enum { KIWI_GAUGE = 0, KIWI_COUNTER = 1, KIWI_HISTOGRAM = 2, KIWI_SUMMARY = 3 };

/* One metric a sensor emits, declared once: the row drives /metrics' HELP and TYPE, the plugin's
 * README and its tests, and the sensor emits through the same row (kiwi_sink.emit), so name,
 * unit, kind and help cannot drift apart. */
typedef struct kiwi_metric_spec {
  kiwi_str name;   /* e.g. "cpu_core_usage_ratio": [a-zA-Z_][a-zA-Z0-9_]*, unit as suffix */
  uint32_t unit;   /* KIWI_UNIT_* */
  uint32_t kind;   /* KIWI_GAUGE, KIWI_COUNTER, KIWI_HISTOGRAM or KIWI_SUMMARY (1.4) */
  kiwi_str labels; /* label names, comma-separated: "core" ("" for none) */
  kiwi_str help;   /* one line: what it measures and where it comes from */
  /* ABI 1.1. Counters only: the name of the gauge the agent derives from this counter, its
   * per-second rate between two samples, with the same labels ("" for none). Its unit follows
   * from the counter's: bytes -> bytes_per_second, seconds -> ratio (time busy per second,
   * capped at 1), count or none -> per_second. That gauge must be a row of the plugin's table
   * too. Read only when the plugin's metric_spec_size covers it. */
  kiwi_str rate;
} kiwi_metric_spec;

/* The size of a kiwi_metric_spec in ABI 1.0, before `rate`. */
#define KIWI_METRIC_SPEC_SIZE_1_0 offsetof(kiwi_metric_spec, rate)

/* ---- What the agent provides ----------------------------------------------------------------- */

enum { KIWI_LOG_ERROR = 0, KIWI_LOG_WARN = 1, KIWI_LOG_INFO = 2, KIWI_LOG_DEBUG = 3 };

/* The agent, for one plugin instance: valid from create until destroy returns. */
typedef struct kiwi_host {
  uint32_t size;
  void *ctx;
  /* Writes a line to the agent's log, prefixed with the instance. Thread-safe: any thread, any
   * time during the instance's life (its destroy included). */
  void (*log)(void *ctx, uint32_t level, kiwi_str message);
  /* Keeps the plugin's shared object mapped for the rest of the process, whatever is unloaded
   * later. For an instance that leaves work behind which may still run plugin code after its
   * destroy returns: a thread blocked in the kernel (statvfs on a hard NFS mount whose server is
   * gone) that cannot be interrupted. Thread-safe, idempotent; any time during the instance's
   * life. An agent older than the member does not offer it: call only when
   * size >= offsetof(kiwi_host, keep_loaded) + sizeof(void (*)(void *)). */
  void (*keep_loaded)(void *ctx);
} kiwi_host;

/* One validated option: every key of the table, in table order, with the user's value or the
 * default. Only the member for `type` is meaningful (DURATION and SIZE use `integer`). */
typedef struct kiwi_option_value {
  kiwi_str key;
  uint32_t type;
  uint32_t boolean;
  int64_t integer; /* INTEGER; DURATION in milliseconds; SIZE in bytes */
  double number;
  kiwi_str string;
  const kiwi_str *strings; /* STRING_LIST; STRING_TABLE: key, value, key, value, ... */
  size_t string_count;
} kiwi_option_value;

/* Where create() says why it refuses: the message is copied; start-up or the reload then fails
 * with it (exit code 2 at start). */
typedef struct kiwi_refusal {
  void *ctx;
  void (*refuse)(void *ctx, kiwi_str why);
} kiwi_refusal;

/* ---- Sensors --------------------------------------------------------------------------------- */

/* Handed to sensor_create; valid during that call only, except `host`. */
typedef struct kiwi_sensor_context {
  uint32_t size;
  kiwi_str instance_name; /* the [[sensor]] name, unique in the config */
  kiwi_str procfs;        /* e.g. "/proc" or a fixture tree; no trailing slash. Read only here */
  kiwi_str sysfs;         /* e.g. "/sys" */
  const kiwi_option_value *options;
  size_t option_count;
  const kiwi_host *host; /* valid until destroy returns */
} kiwi_sensor_context;

typedef struct kiwi_label {
  kiwi_str name;
  kiwi_str value;
} kiwi_label;

/* Receives one sample; valid during sensor_sample only. */
typedef struct kiwi_sink {
  uint32_t size;
  void *ctx;
  /* One value of `metric`, a row of the plugin's table or one the plugin made for the occasion
   * (a sensor whose metrics are not known in advance, such as exec). Everything is copied before
   * it returns. The agent checks each metric (README "Writing a plugin": names, units, finite
   * values, one series once per sample); one that fails is dropped and named in the status. */
  void (*emit)(void *ctx, const kiwi_metric_spec *metric, const kiwi_label *labels,
               size_t label_count, double value);
  /* The note of an ok sample, or why there is no data, or the error; copied; the last call wins. */
  void (*message)(void *ctx, kiwi_str text);
  /* When this call's time is up, CLOCK_MONOTONIC in nanoseconds (INT64_MAX: none): the sensor's
   * `timeout` after the call began. The agent reports the sensor `error` then and goes on without
   * it; a sensor that waits on something (a child process) gives up a little before. */
  int64_t deadline_ns;
  /* ABI 1.4. The HELP text of a family whose rows the plugin makes at run time (an exec program's
   * `# HELP` lines), which /metrics then shows instead of a generic line. `family` as a HELP line
   * names it (a histogram's family, not its _bucket). Copied; the first text given for a family
   * in a sample is kept. Call only when the sink's size covers it (an older agent has none). */
  void (*help)(void *ctx, kiwi_str family, kiwi_str text);
} kiwi_sink;

enum { KIWI_SAMPLE_OK = 0, KIWI_SAMPLE_NO_DATA = 1, KIWI_SAMPLE_ERROR = 2 };

/* ---- Route handlers -------------------------------------------------------------------------- */

typedef struct kiwi_param {
  kiwi_str name;
  kiwi_str value; /* percent-decoded; empty for `?flag` and `?flag=` */
} kiwi_param;

/* One request; valid during handler_handle only. */
typedef struct kiwi_request {
  uint32_t size;
  kiwi_str method;    /* "GET", "HEAD", or another the handler's `methods` lists */
  kiwi_str path;      /* decoded, without the query string */
  kiwi_str raw_query; /* as sent, undecoded, without '?' */
  const kiwi_param *query;
  size_t query_count;
  const kiwi_param *headers; /* names as sent; compare case-insensitively */
  size_t header_count;
  kiwi_str body;
  kiwi_str protocol;       /* "HTTP/1.1" or "HTTP/1.0" */
  kiwi_str remote_address; /* "127.0.0.1", "::1" */
  kiwi_str local_address;  /* the address the request came in on */
  uint16_t local_port;
  /* ABI 1.4 (KIWI_HAS_MEMBER(request, kiwi_request, remote_user)): who [http.auth] let in.
   * auth_type is the scheme, "Basic" or "Bearer"; remote_user the Basic user name ("" for a bearer
   * token: the tokens file holds hashes, no names). Both "" when the request was not
   * authenticated: no [http.auth], or a path in its public_paths. */
  kiwi_str auth_type;
  kiwi_str remote_user;
} kiwi_request;

/* A response body the handler owns and the agent may keep after handle returns (it serves one
 * body to many clients, and compresses it once, keyed by its identity: the same `data` pointer
 * means the same bytes while the body lives). The agent calls release(owner) exactly once, from
 * any thread, when it no longer needs the bytes; the shared object stays loaded until then. */
typedef struct kiwi_body {
  const char *data;
  size_t size;
  void *owner;
  void (*release)(void *owner); /* NULL: static storage, nothing to release */
} kiwi_body;

/* ABI 1.4. A response body the handler produces as it goes (a program's output), handed over with
 * kiwi_response.stream instead of a kiwi_body. The agent sends what read() gives as it comes
 * (chunked to an HTTP/1.1 client; to an HTTP/1.0 one it closes the connection at the end), so
 * its memory is bounded by its buffers whatever the body's size, and it is not compressed.
 *
 * read: never blocks. Copies at most `capacity` bytes of the body to `buffer` and returns how
 *   many (> 0); or returns 0 (nothing yet) after setting *wait_fd (a descriptor poll() will report
 *   readable when read() may have more, kept open until the next call or release; -1: none)
 *   and/or *wait_until_ns (CLOCK_MONOTONIC nanoseconds; INT64_MAX: none), at least one of them:
 *   the agent calls read() again once either comes (or the client hangs up), serving its other
 *   connections meanwhile; or KIWI_STREAM_END: the body is complete; or KIWI_STREAM_ERROR: it
 *   cannot be completed (the handler has logged why): the agent ends the response short, without
 *   the last chunk, so the client knows it is incomplete. Calls for one stream never overlap; they
 *   may come from different threads.
 * release: exactly once, from any thread, when the agent is done with the stream: after END or
 *   ERROR, or before (the client went away, a HEAD or 304 answer, the server stops): the handler
 *   then stops producing it (the cgi handler kills its program). Every stream a handler instance
 *   handed out is released before the instance's destroy() is called. */
#define KIWI_STREAM_END (-1)
#define KIWI_STREAM_ERROR (-2)
typedef struct kiwi_stream {
  uint32_t size; /* sizeof(kiwi_stream) */
  void *owner;
  int64_t (*read)(void *owner, char *buffer, size_t capacity, int *wait_fd, int64_t *wait_until_ns);
  void (*release)(void *owner);
} kiwi_stream;

/* Builds the response; valid during handler_handle only. Status 200 and Content-Type
 * application/json unless set. */
typedef struct kiwi_response {
  uint32_t size;
  void *ctx;
  void (*status)(void *ctx, int status);
  /* Adds a header (Content-Type replaces the default; ETag makes the agent answer a matching
   * If-None-Match with 304). Copied. */
  void (*header)(void *ctx, kiwi_str name, kiwi_str value);
  /* Sets the body; the agent takes ownership even if it is never sent (HEAD, 304). */
  void (*body)(void *ctx, kiwi_body body);
  /* Why handle failed (with a non-zero return): the agent answers 500 with it. Copied. */
  void (*error)(void *ctx, kiwi_str message);
  /* ABI 1.4 (KIWI_HAS_MEMBER(response, kiwi_response, stream): an older agent has none). Sets the
   * body to a stream (kiwi_stream above); of body() and stream(), the last call wins and the
   * agent releases the other. The agent takes ownership even if it never reads it. */
  void (*stream)(void *ctx, kiwi_stream stream);
} kiwi_response;

/* ---- Outputs (since ABI 1.1) ----------------------------------------------------------------
 * An output plugin is transport only: the agent reads its history, keeps the cursor of what the
 * receiver acknowledged, schedules, retries with backoff and filters series; the plugin encodes
 * one batch and sends it, and says whether it went through. */

/* Handed to output_create; valid during that call only, except `host`. */
typedef struct kiwi_output_context {
  uint32_t size;
  kiwi_str instance_name; /* the [[remote_write]] name, unique in the config */
  const kiwi_option_value *options;
  size_t option_count;
  const kiwi_host *host;  /* valid until destroy returns */
  kiwi_str host_name;     /* gethostname(), for a default `instance` label */
  kiwi_str agent_version; /* "0.3.0" */
} kiwi_output_context;

/* One value of a series: unix milliseconds and the value in base units. */
typedef struct kiwi_output_point {
  int64_t timestamp_ms;
  double value;
} kiwi_output_point;

/* One series of a batch. `name` is the stored name ("cpu_usage_ratio"), without the "kiwi_"
 * prefix /metrics adds; labels are sorted by name; points oldest first, one per timestamp. */
typedef struct kiwi_output_series {
  uint32_t size;
  kiwi_str name;
  const kiwi_label *labels;
  size_t label_count;
  uint32_t unit; /* KIWI_UNIT_* */
  uint32_t kind; /* KIWI_GAUGE, KIWI_COUNTER, KIWI_HISTOGRAM or KIWI_SUMMARY (1.4) */
  const kiwi_output_point *points;
  size_t point_count;
} kiwi_output_series;

/* What output_write sends: samples of whole ticks, every series oldest first. Valid during the
 * call only. */
typedef struct kiwi_output_batch {
  uint32_t size;
  const kiwi_output_series *series; /* rows of series_size bytes */
  size_t series_count;
  uint32_t series_size;
  size_t sample_count; /* points of all series together */
  int64_t oldest_ms;   /* the batch's first and last tick */
  int64_t newest_ms;
} kiwi_output_batch;

/* output_write's verdict (and notifier_send's, since ABI 1.6). OK: the receiver took it (2xx),
 * the cursor moves past the batch. RETRY: not now (no connection, timeout, 5xx, 429): the agent
 * backs off and sends the same samples again. DROP: the receiver refuses these samples for good
 * (another 4xx): the agent logs the reason, counts the batch and moves past it. */
enum { KIWI_OUTPUT_OK = 0, KIWI_OUTPUT_RETRY = 1, KIWI_OUTPUT_DROP = 2 };

/* Where output_write (and notifier_send) says why (RETRY, DROP; or a note for OK); copied; the
 * last call wins. */
typedef struct kiwi_output_result {
  uint32_t size;
  void *ctx;
  void (*reason)(void *ctx, kiwi_str text);
} kiwi_output_result;

/* ---- Notifiers (since ABI 1.6) --------------------------------------------------------------
 * A notifier plugin is transport only: the agent evaluates the [[alert]] rules, keeps the queue of
 * alert transitions in its database, and decides what to send and when (each transition in order,
 * reminders while an alert fires, retries with backoff); the plugin formats one notification for
 * its receiver, sends it, and says whether it went through, as an output does (KIWI_OUTPUT_*). */

/* Handed to notifier_create; valid during that call only, except `host`. */
typedef struct kiwi_notifier_context {
  uint32_t size;
  kiwi_str instance_name; /* the [[notify]] name, unique in the config */
  const kiwi_option_value *options;
  size_t option_count;
  const kiwi_host *host;  /* valid until destroy returns */
  kiwi_str host_name;     /* gethostname(), for an `instance` label */
  kiwi_str agent_version; /* "0.3.0" */
} kiwi_notifier_context;

/* One alert instance (a rule and the labels of the series it matched): a transition to firing or
 * to resolved, or, in a reminder (kiwi_notification.repeat), an instance firing now. */
typedef struct kiwi_alert_notice {
  uint32_t size;
  kiwi_str name;            /* the rule's name: Prometheus's `alertname` */
  const kiwi_label *labels; /* the matched series' labels, sorted by name (a status rule: none) */
  size_t label_count;
  kiwi_str sensor;   /* the report the series came from: the [[sensor]] name, or "agent" */
  uint32_t severity; /* KIWI_SEVERITY_* (with the alerts, below) */
  uint32_t firing;   /* 1: firing; 0: resolved */
  kiwi_str summary;  /* the rule's summary, rendered with this instance's labels and value */
  double value;      /* the latest value the rule looked at; NaN: none (stale) */
  double threshold;  /* what it was compared with; NaN: none (a status rule) */
  double starts_at;  /* unix seconds the condition began to hold */
  /* Resolved: unix seconds it resolved. Firing: until when the receiver may hold it as firing
   * without hearing from the agent again (Alertmanager's endsAt); 0: the agent names none. */
  double ends_at;
  uint64_t sequence; /* the transition's number in the agent's event log; 0 in a reminder */
} kiwi_alert_notice;

/* What notifier_send sends; valid during the call only. */
typedef struct kiwi_notification {
  uint32_t size;
  const kiwi_alert_notice *alerts; /* rows of alert_size bytes, oldest transition first */
  size_t alert_count;
  uint32_t alert_size;
  uint32_t repeat;    /* 1: a reminder of what fires now, not a change */
  kiwi_str host;      /* the agent's host name (an `instance` label) */
  kiwi_str agent_url; /* where the agent's dashboard is, as configured ("" when unknown) */
} kiwi_notification;

/* ---- The agent's data a handler may read ------------------------------------------------------
 * Read-only views the agent builds; each is acquired with a ticket and released with it, and
 * stays valid and unchanged until released (a snapshot is immutable once published). Rows of
 * arrays whose struct has a `size` are stepped through by the `*_size` the agent states. */

enum { KIWI_SENSOR_OK = 0, KIWI_SENSOR_NO_DATA = 1, KIWI_SENSOR_ERROR = 2 };

typedef struct kiwi_metric_value {
  kiwi_str name;
  const kiwi_label *labels;
  size_t label_count;
  double value;  /* in base units */
  uint32_t unit; /* KIWI_UNIT_* */
  uint32_t kind; /* KIWI_GAUGE, KIWI_COUNTER, KIWI_HISTOGRAM or KIWI_SUMMARY (1.4) */
} kiwi_metric_value;

/* The HELP text of a family a sensor made at run time (kiwi_sink.help). */
typedef struct kiwi_metric_help {
  kiwi_str family;
  kiwi_str text;
} kiwi_metric_help;

typedef struct kiwi_sensor_report {
  uint32_t size;
  kiwi_str name;   /* [[sensor]] name */
  kiwi_str plugin; /* the plugin's name */
  uint32_t state;  /* KIWI_SENSOR_* */
  kiwi_str message;
  double timestamp;        /* unix seconds of its last reading */
  double duration_seconds; /* how long that reading took */
  uint64_t errors_total;   /* samples that failed since the agent started */
  uint64_t invalid_metrics_total;
  const kiwi_metric_value *metrics;
  size_t metric_count;
  /* Since ABI 1.2: values of series beyond the sensor's series limit, refused since start. */
  uint64_t series_refused_total;
  /* Since ABI 1.4: the HELP texts its latest sample gave (kiwi_sink.help), rows of help_size
   * bytes (the struct may grow). */
  const kiwi_metric_help *help;
  size_t help_count;
  uint32_t help_size;
} kiwi_sensor_report;

/* The latest sample (sequence 0 before the first one). */
typedef struct kiwi_snapshot {
  uint32_t size;
  uint64_t sequence; /* 1 for the first sample */
  double timestamp;  /* unix seconds of the tick */
  double interval_seconds;
  double stale_after_seconds;
  double started_at; /* unix seconds the agent started */
  kiwi_str host;
  kiwi_str agent_version;
  const kiwi_sensor_report *sensors;
  size_t sensor_count;
  uint32_t sensor_report_size;
} kiwi_snapshot;

typedef struct kiwi_plugin_status {
  uint32_t size;
  kiwi_str name; /* sensor instance name, or the route path */
  uint32_t kind; /* KIWI_KIND_* */
  kiwi_str plugin;
  kiwi_str file;
  uint32_t abi_major;
  uint32_t abi_minor;
  const kiwi_metric_spec *metrics; /* the plugin's table, rows of metric_spec_size */
  size_t metric_count;
  uint32_t metric_spec_size;
} kiwi_plugin_status;

typedef struct kiwi_request_count {
  kiwi_str route; /* the route path; "unmatched" for 404s */
  int status;     /* 0: another status */
  uint64_t count;
} kiwi_request_count;

/* One output ([[remote_write]]) and its backlog (since ABI 1.1). */
typedef struct kiwi_output_status {
  uint32_t size;
  kiwi_str name;   /* [[remote_write]] name */
  kiwi_str plugin; /* the plugin's name */
  kiwi_str state;  /* "starting", "live", "catching_up", "retrying" */
  double interval_seconds;
  double acked_at;          /* unix seconds of the newest sample the receiver took (0: none yet) */
  double seconds_behind;    /* newest stored sample minus acked_at (0 when caught up) */
  uint64_t samples_pending; /* stored samples not yet sent (of the series it sends) */
  uint64_t samples_sent_total;
  uint64_t batches_sent_total;
  uint64_t batches_dropped_total;
  uint64_t samples_dropped_total;
  uint64_t failures_total; /* write attempts answered RETRY */
  kiwi_str last_error;     /* the latest RETRY or DROP reason ("" none) */
  double last_error_at;    /* unix seconds (0: none) */
} kiwi_output_status;

/* ---- Alerts (since ABI 1.6) ----------------------------------------------------------------
 * The [[alert]] rules' instances as the agent's rule engine keeps them, and its notifiers. */

/* An alert instance's state (docs/alerts.md): inactive (its condition does not hold), pending (it
 * holds, not yet for the rule's `for`), firing, resolved (it fired and has cleared). A later minor
 * version may add states: the C++ SDK reads a code it does not know as inactive. */
enum {
  KIWI_ALERT_INACTIVE = 0,
  KIWI_ALERT_PENDING = 1,
  KIWI_ALERT_FIRING = 2,
  KIWI_ALERT_RESOLVED = 3
};

/* A rule's severity. The C++ SDK reads a code it does not know as warning. */
enum { KIWI_SEVERITY_INFO = 0, KIWI_SEVERITY_WARNING = 1, KIWI_SEVERITY_CRITICAL = 2 };

/* One alert instance: a rule and the labels of the series (or the sensor) it matched. */
typedef struct kiwi_alert {
  uint32_t size;
  kiwi_str name;            /* the rule's name (Prometheus' `alertname`) */
  const kiwi_label *labels; /* the matched series' labels, sorted by name (a status rule: none) */
  size_t label_count;
  kiwi_str sensor;   /* the report the series came from: a [[sensor]] name, or "agent" */
  kiwi_str series;   /* the watched series' key (`thermal_celsius{sensor="soc"}`), or the sensor */
  uint32_t state;    /* KIWI_ALERT_* */
  uint32_t severity; /* KIWI_SEVERITY_* */
  kiwi_str summary;  /* the rule's summary, rendered with this instance's labels and value */
  double value;      /* the latest value the rule looked at (NaN: none, e.g. stale) */
  double threshold;  /* what it was compared with (NaN: none, e.g. a status rule) */
  double since;      /* unix seconds it entered its state */
  double active_at;  /* unix seconds its condition began to hold (0: inactive) */
} kiwi_alert;

/* What kiwi_data.alerts hands out: every instance that is not inactive, firing first, then by
 * name and labels. */
typedef struct kiwi_alert_list {
  uint32_t size;
  const kiwi_alert *alerts; /* rows of alert_size bytes */
  size_t count;
  uint32_t alert_size;
} kiwi_alert_list;

/* One notifier ([[notify]]) and its queue. */
typedef struct kiwi_notifier_status {
  uint32_t size;
  kiwi_str name;           /* the [[notify]] name */
  kiwi_str kind;           /* "alertmanager", "webhook", "ntfy", or a plugin's name */
  kiwi_str state;          /* "idle", "sending", "retrying" */
  uint64_t queued;         /* alert transitions waiting to be sent (kept in the database) */
  uint64_t sent_total;     /* notifications the receiver took */
  uint64_t failures_total; /* sends that failed and are retried */
  uint64_t dropped_total;  /* notifications refused for good (a 4xx), skipped */
  double last_sent_at;     /* unix seconds (0: none yet) */
  kiwi_str last_error;     /* the latest failure or refusal ("" none) */
  double last_error_at;    /* unix seconds (0: none) */
} kiwi_notifier_status;

/* The agent's counters and configuration state. */
typedef struct kiwi_stats {
  uint32_t size;
  kiwi_str version;
  double started_at;
  uint64_t ticks;
  uint64_t missed_ticks;
  uint64_t store_write_errors;
  uint64_t store_failing_writes; /* commits failed in a row (0: healthy) */
  kiwi_str store_last_error;
  kiwi_str snapshot_file; /* "" when off */
  uint64_t snapshot_file_errors;
  uint64_t snapshot_file_failing;
  kiwi_str snapshot_file_last_error;
  const kiwi_plugin_status *plugins;
  size_t plugin_count;
  uint32_t plugin_status_size;
  const kiwi_request_count *http_requests;
  size_t http_request_count;
  /* The configuration in force and how the latest reload went. */
  uint64_t config_generation;
  double config_loaded_at;
  kiwi_str config_source;
  kiwi_str reload_status; /* "none", "ok" or "failed" */
  double reload_at;       /* 0: none */
  kiwi_str reload_message;
  uint64_t reloads_ok;
  uint64_t reloads_failed;
  /* Since ABI 1.1 (KIWI_HAS_MEMBER(stats, kiwi_stats, output_status_size)): the outputs. */
  const kiwi_output_status *outputs; /* rows of output_status_size bytes */
  size_t output_count;
  uint32_t output_status_size;
  /* Since ABI 1.2 (KIWI_HAS_MEMBER(stats, kiwi_stats, store_samples_pending)). */
  kiwi_str store_recovered;       /* a damaged history file replaced since start ("" none) */
  uint64_t store_samples_pending; /* samples queued in memory, not yet committed */
  /* Since ABI 1.2 (KIWI_HAS_MEMBER(stats, kiwi_stats, http_auth_rate_limited)): [http.auth]. */
  uint64_t http_auth_failures;     /* requests whose credentials were refused */
  uint64_t http_auth_rate_limited; /* requests refused unchecked: their address was blocked */
  /* Since ABI 1.6 (KIWI_HAS_MEMBER(stats, kiwi_stats, notifier_status_size)): the alert instances
   * firing and pending now, and the notifiers. An older agent has none. */
  uint64_t alerts_firing;
  uint64_t alerts_pending;
  const kiwi_notifier_status *notifiers; /* rows of notifier_status_size bytes */
  size_t notifier_count;
  uint32_t notifier_status_size;
} kiwi_stats;

enum {
  KIWI_AGGREGATE_MEAN = 0,
  KIWI_AGGREGATE_MAX = 1,
  KIWI_AGGREGATE_MIN = 2,
  KIWI_AGGREGATE_LAST = 3
};

/* A history query; the handler checks its limits, the store trusts them. */
typedef struct kiwi_history_query {
  uint32_t size;
  size_t limit; /* latest N samples (or buckets) within [since, until] */
  uint32_t has_since;
  double since; /* unix seconds, inclusive */
  uint32_t has_until;
  double until;
  const kiwi_str *patterns; /* series names or keys, `*` globs; none: all */
  size_t pattern_count;
  double step;        /* > 0: buckets of `step` seconds */
  uint32_t aggregate; /* KIWI_AGGREGATE_* */
  /* Since ABI 1.7. Non-zero: each series' `min` and `max` as well (the lowest and highest sample
   * of each bucket, whatever the aggregate; without a step a point is one sample, its own min
   * and max). It lies where a query of 1.6 had its tail padding, so a 1.6 query's `size` covers
   * it too: the agent reads it only from a plugin whose descriptor states ABI 1.7 or later. */
  uint32_t band;
} kiwi_history_query;

/* The size of a kiwi_history_query in ABI 1.0 to 1.6 without its tail padding, before `band`: the
 * least `size` the agent takes. */
#define KIWI_HISTORY_QUERY_SIZE_1_0 offsetof(kiwi_history_query, band)

typedef struct kiwi_history_series {
  kiwi_str key; /* `name` or `name{label="value",...}`, unique in a result */
  kiwi_str name;
  const kiwi_label *labels;
  size_t label_count;
  uint32_t unit;
  uint32_t kind;
  const double *values; /* one per timestamp; NaN where the series has no value */
  /* Since ABI 1.7: one per timestamp, each bucket's lowest and highest sample, NaN where `values`
   * is; NULL unless the query asked for a band. Read only when the result's `series_size`
   * covers them. */
  const double *min;
  const double *max;
} kiwi_history_series;

/* The size of a kiwi_history_series in ABI 1.0 to 1.6, before `min`: the rows an agent of those
 * versions hands out, and the rows the agent hands a plugin built for them. */
#define KIWI_HISTORY_SERIES_SIZE_1_0 offsetof(kiwi_history_series, min)

typedef struct kiwi_history_result {
  uint32_t size;
  const double *timestamps; /* unix seconds, oldest first */
  size_t timestamp_count;
  const kiwi_history_series *series; /* rows of series_size bytes */
  size_t series_count;
  /* Since ABI 1.7 (KIWI_HAS_MEMBER(result, kiwi_history_result, series_size)): the size of a row
   * of `series`. An older agent's rows are KIWI_HISTORY_SERIES_SIZE_1_0 bytes. */
  uint32_t series_size;
} kiwi_history_result;

typedef struct kiwi_str_list {
  const kiwi_str *items;
  size_t count;
} kiwi_str_list;

/* Thread-safe, valid until the handler's destroy returns. Every acquire sets *ticket, which the
 * matching release takes; a view is valid until then. */
typedef struct kiwi_data {
  uint32_t size;
  void *ctx;
  const kiwi_snapshot *(*snapshot)(void *ctx, void **ticket); /* never NULL */
  const kiwi_stats *(*stats)(void *ctx, void **ticket);       /* never NULL */
  /* Reads through a read-only store connection of the calling thread. NULL when the store
   * cannot answer (I/O error, corrupt database): the reason went to error->refuse. The rows of
   * the result are of the ABI the plugin's descriptor states (1.0 to 1.6: without min and max). */
  const kiwi_history_result *(*history)(void *ctx, const kiwi_history_query *query, void **ticket,
                                        const kiwi_refusal *error);
  /* Names and keys of every series the store holds (to check `series` patterns). */
  const kiwi_str_list *(*series_names)(void *ctx, void **ticket);
  void (*release)(void *ctx, void *ticket);
  /* Since ABI 1.6: every alert instance that is not inactive (never NULL; none without [[alert]]
   * rules). Call only when KIWI_HAS_MEMBER(data, kiwi_data, alerts): an older agent has none. */
  const kiwi_alert_list *(*alerts)(void *ctx, void **ticket);
} kiwi_data;

/* Handed to handler_create; valid during that call only, except `host` and `data`. */
/* Since ABI 1.8: one [[peer]] entry, another agent whose board a fleet view shows (docs/fleet.md).
 * Credentials are named by file: a plugin that fetches reads them (at create). */
typedef struct kiwi_peer {
  kiwi_str name;              /* unique among the peers; [A-Za-z0-9_.-]+ */
  kiwi_str url;               /* http:// or https://, without a trailing '/' */
  uint32_t timeout_ms;        /* one request's limit (connect and answer) */
  kiwi_str bearer_token_file; /* "" none */
  kiwi_str username;          /* Basic authentication ("" none), its password in password_file */
  kiwi_str password_file;
  kiwi_str ca_file; /* https: the CAs to trust ("" the system's) */
} kiwi_peer;

typedef struct kiwi_handler_context {
  uint32_t size;
  kiwi_str route_path; /* as configured, e.g. "/api/current" or a prefix ending in a star */
  const kiwi_option_value *options;
  size_t option_count;
  const kiwi_host *host;
  const kiwi_data *data; /* valid until destroy returns; thread-safe */
  kiwi_str agent_version;
  /* Since ABI 1.8 (KIWI_HAS_MEMBER(ctx, kiwi_handler_context, peer_size)): this board's name
   * (gethostname), and the [[peer]] entries in the order of the configuration, rows of
   * `peer_size` bytes. A reload that changes the peers creates the handlers again. */
  kiwi_str host_name;
  const kiwi_peer *peers;
  size_t peer_count;
  uint32_t peer_size; /* sizeof(kiwi_peer) */
} kiwi_handler_context;

/* ---- The descriptor -------------------------------------------------------------------------- */

typedef struct kiwi_plugin {
  uint32_t abi_major;   /* KIWI_ABI_MAJOR */
  uint32_t abi_minor;   /* KIWI_ABI_MINOR */
  uint32_t size;        /* sizeof(kiwi_plugin) */
  uint32_t kind;        /* KIWI_KIND_SENSOR, _HANDLER, _OUTPUT (1.1) or _NOTIFIER (1.6) */
  kiwi_str name;        /* default lookup name: "cpu" -> kiwi-sensor-cpu.so */
  kiwi_str description; /* one line */
  const kiwi_option_spec *options;
  size_t option_count;
  uint32_t option_spec_size;       /* sizeof(kiwi_option_spec) */
  const kiwi_metric_spec *metrics; /* sensors: everything they may emit (maybe none) */
  size_t metric_count;
  uint32_t metric_spec_size; /* sizeof(kiwi_metric_spec) */

  /* Sensors. create: once per [[sensor]] entry, on the agent's main thread, before sampling;
   * returns the instance, or NULL after refusal->refuse(). sample: at most one call at a time
   * per instance, possibly from different threads over its life; emits through `sink` and
   * returns KIWI_SAMPLE_*. Keep state between samples in the instance, never in statics. */
  void *(*sensor_create)(const kiwi_sensor_context *ctx, const kiwi_refusal *refusal);
  uint32_t (*sensor_sample)(void *instance, const kiwi_sink *sink);

  /* Handlers. create: once per [[route]] entry on the main thread. handle: CONCURRENTLY from the
   * HTTP worker threads (thread-safe!); returns 0, or non-zero for a 500 with the message given
   * to response->error (what was set before is dropped). methods: the methods the instance's
   * handle takes, as an Allow header lists them, valid while the instance lives; NULL (or an
   * empty result): "GET, HEAD". The agent answers any other method with 405. */
  void *(*handler_create)(const kiwi_handler_context *ctx, const kiwi_refusal *refusal);
  int (*handler_handle)(void *instance, const kiwi_request *request, const kiwi_response *response);
  kiwi_str (*handler_methods)(void *instance);

  /* Every kind: the instance goes; called once, after its last call, before the shared object is
   * unloaded. The host's log may still be used. */
  void (*destroy)(void *instance);

  /* Outputs (since ABI 1.1; a sensor or handler of 1.1 leaves them NULL). create: once per
   * [[remote_write]] entry, on the main thread; returns the instance, or NULL after
   * refusal->refuse(). write: from the output's own thread, at most one call at a time per
   * instance; sends `batch` and returns KIWI_OUTPUT_*, with the reason given to result->reason.
   * It may block (a network call) but should return within its own timeout: a reload or stop
   * waits for the call in progress. */
  void *(*output_create)(const kiwi_output_context *ctx, const kiwi_refusal *refusal);
  uint32_t (*output_write)(void *instance, const kiwi_output_batch *batch,
                           const kiwi_output_result *result);

  /* Notifiers (since ABI 1.6; a plugin of another kind leaves them NULL). create: once per
   * [[notify]] entry, on the agent's main thread (at start and at each reload that builds it
   * anew); returns the instance, or NULL after refusal->refuse(). send: from the notifier's own
   * thread, at most one call at a time per instance (possibly from another thread after a
   * reload); sends `notification` and returns KIWI_OUTPUT_OK (the receiver took it: 2xx),
   * KIWI_OUTPUT_RETRY (not now: no connection, a timeout, 5xx, 429; the agent sends the same
   * notification again after a backoff) or KIWI_OUTPUT_DROP (refused for good: another 4xx; the
   * agent logs the reason, counts it and goes on with the next), with the reason given to
   * result->reason (no credential in it: the agent logs it and shows it in /api/health). It may
   * block (a network call) but should return within its own timeout: a reload or stop waits for
   * the call in progress. The same transition may be sent again after a RETRY, or after a
   * restart that came before the agent recorded an OK. */
  void *(*notifier_create)(const kiwi_notifier_context *ctx, const kiwi_refusal *refusal);
  uint32_t (*notifier_send)(void *instance, const kiwi_notification *notification,
                            const kiwi_output_result *result);
} kiwi_plugin;

/* The one symbol a plugin exports. */
typedef const kiwi_plugin *(*kiwi_plugin_entry)(void);
#define KIWI_PLUGIN_ENTRY "kiwi_plugin_v1"

#ifdef __cplusplus
}
#endif

#endif /* KIWI_PLUGIN_H */
