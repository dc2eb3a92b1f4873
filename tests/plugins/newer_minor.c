/* A plugin built against a later minor version of ABI 1: its descriptor and its table rows are
 * larger than this agent's (members added at the end, as the minor-version rule allows), and it
 * says so in their sizes. The agent must load it, reading only the members it knows, and step
 * through the rows by the plugin's row sizes. */
#include <kiwi/plugin.h>
#include <stdlib.h>

#define S(literal) \
  { literal, sizeof(literal) - 1 }

typedef struct option_spec_1_7 {
  kiwi_option_spec v1_0; /* what this agent knows of the row (1.3 since `choices`) */
  double future_step;    /* a member this agent does not know */
  kiwi_str future_unit;
} option_spec_1_7;

typedef struct metric_spec_1_7 {
  kiwi_metric_spec v1_0;
  uint64_t future_flags;
} metric_spec_1_7;

typedef struct plugin_1_7 {
  kiwi_plugin v1_0;
  void *(*future_function)(void);
  kiwi_str future_text;
} plugin_1_7;

static const option_spec_1_7 options[] = {
    {{.key = S("first"),
      .type = KIWI_OPTION_INTEGER,
      .default_toml = S("1"),
      .description = S("the first option")},
     0.5,
     S("x")},
    {{.key = S("second"),
      .type = KIWI_OPTION_STRING,
      .default_toml = S("\"two\""),
      .description = S("the second option")},
     0.5,
     S("y")},
};

static const metric_spec_1_7 metrics[] = {
    {{S("future_first"), KIWI_UNIT_NONE, KIWI_GAUGE, S(""), S("the first option"), S("")}, 7},
    {{S("future_second_bytes"), KIWI_UNIT_BYTES, KIWI_GAUGE, S(""), S("length of the second"),
      S("")},
     7},
};

typedef struct sensor {
  double first;
  double second_size;
} sensor;

static void *create(const kiwi_sensor_context *c, const kiwi_refusal *refusal) {
  (void)refusal;
  sensor *s = malloc(sizeof *s);
  if (!s) return NULL;
  s->first = (double)c->options[0].integer;
  s->second_size = (double)c->options[1].string.size;
  return s;
}

static uint32_t sample(void *instance, const kiwi_sink *sink) {
  sensor *s = instance;
  sink->emit(sink->ctx, &metrics[0].v1_0, NULL, 0, s->first);
  sink->emit(sink->ctx, &metrics[1].v1_0, NULL, 0, s->second_size);
  return KIWI_SAMPLE_OK;
}

static void destroy(void *instance) {
  free(instance);
}

static const plugin_1_7 descriptor = {{KIWI_ABI_MAJOR,
                                       KIWI_ABI_MINOR + 7,
                                       sizeof(plugin_1_7),
                                       KIWI_KIND_SENSOR,
                                       S("newer_minor"),
                                       S("built against ABI 1.7"),
                                       &options[0].v1_0,
                                       2,
                                       sizeof(option_spec_1_7),
                                       &metrics[0].v1_0,
                                       2,
                                       sizeof(metric_spec_1_7),
                                       create,
                                       sample,
                                       NULL,
                                       NULL,
                                       NULL,
                                       destroy,
                                       NULL,
                                       NULL,
                                       NULL,
                                       NULL},
                                      NULL,
                                      S("unknown to this agent")};

KIWI_PLUGIN_EXPORT const kiwi_plugin *kiwi_plugin_v1(void) {
  return &descriptor.v1_0;
}
