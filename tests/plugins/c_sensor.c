/* A sensor plugin in C99 against kiwi/plugin.h alone: what docs/plugins.md calls a C sensor, with
 * an option of every type, a declared metric table emitted through its rows, a metric made for
 * the occasion, labels, a note, no_data and an error chosen by option, a refusal, and the log.
 * The unit and integration tests check each against what the agent reports. */
#include <kiwi/plugin.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S(literal) \
  { literal, sizeof(literal) - 1 }

/* Designated initializers, as for the metric rows below: `choices` (1.3) starts empty where a
 * row does not set it. */
#define OPTION(k, t, d, text) .key = S(k), .type = t, .default_toml = S(d), .description = S(text)
static const kiwi_option_spec options[] = {
    {OPTION("mode", KIWI_OPTION_STRING, "\"ok\"", "what each sample does"),
     .choices = S("ok,no_data,error,refuse,keep_loaded")},
    {OPTION("scale", KIWI_OPTION_NUMBER, "1.0", "factor on the value"), .has_range = 1,
     .max = 1000},
    {OPTION("count", KIWI_OPTION_INTEGER, "2", "how many labelled values"), .has_range = 1,
     .max = 16},
    {OPTION("loud", KIWI_OPTION_BOOLEAN, "false", "log every sample")},
    {OPTION("names", KIWI_OPTION_STRING_LIST, "[\"a\", \"b\"]", "label values")},
    {OPTION("period", KIWI_OPTION_DURATION, "\"1500ms\"", "reported as c_period_seconds")},
    {OPTION("buffer", KIWI_OPTION_SIZE, "\"2KiB\"", "reported as c_buffer_bytes")},
};

/* Designated initializers: a member a later minor version adds (as `rate` was in 1.1) starts
 * empty, and the file still builds with -Wextra -Werror. */
static const kiwi_metric_spec metrics[] = {
    {.name = S("c_value"),
     .unit = KIWI_UNIT_NONE,
     .kind = KIWI_GAUGE,
     .labels = S(""),
     .help = S("scale times the sample number")},
    {.name = S("c_labelled_ratio"),
     .unit = KIWI_UNIT_RATIO,
     .kind = KIWI_GAUGE,
     .labels = S("name"),
     .help = S("one per names entry")},
    {.name = S("c_samples_total"),
     .unit = KIWI_UNIT_COUNT,
     .kind = KIWI_COUNTER,
     .labels = S(""),
     .help = S("samples taken"),
     .rate = S("c_samples_per_second")},
    {.name = S("c_period_seconds"),
     .unit = KIWI_UNIT_SECONDS,
     .kind = KIWI_GAUGE,
     .labels = S(""),
     .help = S("the period option")},
    {.name = S("c_buffer_bytes"),
     .unit = KIWI_UNIT_BYTES,
     .kind = KIWI_GAUGE,
     .labels = S(""),
     .help = S("the buffer option")},
    {.name = S("c_deadline_seconds"),
     .unit = KIWI_UNIT_SECONDS,
     .kind = KIWI_GAUGE,
     .labels = S(""),
     .help = S("time left until the deadline")},
    /* Derived by the agent from c_samples_total (its `rate`), never emitted by the plugin. */
    {.name = S("c_samples_per_second"),
     .unit = KIWI_UNIT_PER_SECOND,
     .kind = KIWI_GAUGE,
     .labels = S(""),
     .help = S("samples taken per second")},
};

typedef struct sensor {
  const kiwi_host *host;
  char mode[16];
  double scale;
  int64_t count, period_ms, buffer;
  int loud;
  kiwi_str names[16];
  size_t name_count;
  char *name_storage;
  uint64_t samples;
} sensor;

static int is(kiwi_str s, const char *text) {
  return s.size == strlen(text) && memcmp(s.data, text, s.size) == 0;
}

static const kiwi_option_value *option(const kiwi_sensor_context *c, const char *key) {
  for (size_t i = 0; i < c->option_count; ++i)
    if (is(c->options[i].key, key)) return &c->options[i];
  return NULL;
}

static void *create(const kiwi_sensor_context *c, const kiwi_refusal *refusal) {
  const kiwi_option_value *mode = option(c, "mode");
  if (!mode || mode->string.size >= sizeof(((sensor *)0)->mode) || is(mode->string, "refuse")) {
    kiwi_str why = S("mode = \"refuse\": refusing as asked");
    refusal->refuse(refusal->ctx, why);
    return NULL;
  }
  sensor *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->host = c->host;
  /* mode = "keep_loaded": asks the agent to keep this library mapped, as a sensor that leaves a
   * thread behind does; an agent older than the member does not offer it. */
  if (is(mode->string, "keep_loaded") &&
      c->host->size >= offsetof(kiwi_host, keep_loaded) + sizeof c->host->keep_loaded)
    c->host->keep_loaded(c->host->ctx);
  memcpy(s->mode, mode->string.data, mode->string.size);
  s->scale = option(c, "scale")->number;
  s->count = option(c, "count")->integer;
  s->loud = option(c, "loud")->boolean != 0;
  s->period_ms = option(c, "period")->integer;
  s->buffer = option(c, "buffer")->integer;
  /* The option rows are the agent's and valid during create only: copy what is kept. */
  const kiwi_option_value *names = option(c, "names");
  size_t total = 0;
  for (size_t i = 0; i < names->string_count && i < 16; ++i) total += names->strings[i].size;
  s->name_storage = malloc(total + 1);
  for (size_t i = 0, at = 0; i < names->string_count && i < 16; ++i) {
    memcpy(s->name_storage + at, names->strings[i].data, names->strings[i].size);
    s->names[i].data = s->name_storage + at;
    s->names[i].size = names->strings[i].size;
    at += names->strings[i].size;
    s->name_count = i + 1;
  }
  char line[96];
  int n = snprintf(line, sizeof line, "created in mode %s for %.*s", s->mode,
                   (int)c->instance_name.size, c->instance_name.data);
  kiwi_str text = {line, (size_t)n};
  s->host->log(s->host->ctx, KIWI_LOG_INFO, text);
  return s;
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static uint32_t sample(void *instance, const kiwi_sink *sink) {
  sensor *s = instance;
  ++s->samples;
  if (strcmp(s->mode, "no_data") == 0) {
    kiwi_str why = S("nothing to measure in mode no_data");
    sink->message(sink->ctx, why);
    return KIWI_SAMPLE_NO_DATA;
  }
  if (strcmp(s->mode, "error") == 0) {
    kiwi_str why = S("failing as mode error asks");
    sink->message(sink->ctx, why);
    return KIWI_SAMPLE_ERROR;
  }
  sink->emit(sink->ctx, &metrics[0], NULL, 0, s->scale * (double)s->samples);
  for (int64_t i = 0; i < s->count && (size_t)i < s->name_count; ++i) {
    kiwi_label label = {S("name"), s->names[i]};
    sink->emit(sink->ctx, &metrics[1], &label, 1, 0.25 * (double)(i + 1));
  }
  sink->emit(sink->ctx, &metrics[2], NULL, 0, (double)s->samples);
  sink->emit(sink->ctx, &metrics[3], NULL, 0, (double)s->period_ms / 1000.0);
  sink->emit(sink->ctx, &metrics[4], NULL, 0, (double)s->buffer);
  if (sink->deadline_ns != INT64_MAX)
    sink->emit(sink->ctx, &metrics[5], NULL, 0, (double)(sink->deadline_ns - now_ns()) / 1e9);
  /* A metric not in the table, made for the occasion (as the exec sensor does). */
  kiwi_metric_spec adhoc = {.name = S("c_adhoc_celsius"),
                            .unit = KIWI_UNIT_CELSIUS,
                            .kind = KIWI_GAUGE,
                            .labels = S(""),
                            .help = S("")};
  sink->emit(sink->ctx, &adhoc, NULL, 0, 21.5);
  if (s->loud) {
    kiwi_str text = S("sampled");
    s->host->log(s->host->ctx, KIWI_LOG_DEBUG, text);
  }
  kiwi_str note = S("written in C");
  sink->message(sink->ctx, note);
  return KIWI_SAMPLE_OK;
}

static void destroy(void *instance) {
  sensor *s = instance;
  free(s->name_storage);
  free(s);
}

static const kiwi_plugin descriptor = {KIWI_ABI_MAJOR,
                                       KIWI_ABI_MINOR,
                                       sizeof(kiwi_plugin),
                                       KIWI_KIND_SENSOR,
                                       S("c_sensor"),
                                       S("a sensor written in C against kiwi/plugin.h"),
                                       options,
                                       sizeof options / sizeof options[0],
                                       sizeof(kiwi_option_spec),
                                       metrics,
                                       sizeof metrics / sizeof metrics[0],
                                       sizeof(kiwi_metric_spec),
                                       create,
                                       sample,
                                       NULL,
                                       NULL,
                                       NULL,
                                       destroy,
                                       NULL,
                                       NULL,
                                       NULL,
                                       NULL};

KIWI_PLUGIN_EXPORT const kiwi_plugin *kiwi_plugin_v1(void) {
  return &descriptor;
}
