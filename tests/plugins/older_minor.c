/* A plugin built against ABI 1.0, before kiwi_metric_spec gained `rate` (1.1) and
 * kiwi_option_spec `choices` (1.3): its rows are the 1.0 size, and it says so in metric_spec_size
 * and option_spec_size. The agent must load it, step through the rows by that size and never read
 * a `rate` or `choices` the rows do not have. */
#include <kiwi/plugin.h>
#include <stdlib.h>

#define S(literal) \
  { literal, sizeof(literal) - 1 }

/* kiwi_metric_spec as ABI 1.0 declared it. */
typedef struct metric_spec_1_0 {
  kiwi_str name;
  uint32_t unit;
  uint32_t kind;
  kiwi_str labels;
  kiwi_str help;
} metric_spec_1_0;

/* kiwi_option_spec as ABI 1.0 declared it. */
typedef struct option_spec_1_0 {
  kiwi_str key;
  uint32_t type;
  kiwi_str default_toml;
  kiwi_str description;
  uint32_t has_range;
  double min;
  double max;
} option_spec_1_0;

static const option_spec_1_0 options[] = {
    {S("level"), KIWI_OPTION_STRING, S("\"low\""), S("any string"), 0, 0, 0},
    {S("limit"), KIWI_OPTION_INTEGER, S("3"), S("1..9"), 1, 1, 9},
};

static const metric_spec_1_0 metrics[] = {
    {S("old_samples_total"), KIWI_UNIT_COUNT, KIWI_COUNTER, S(""), S("samples taken")},
    {S("old_value_bytes"), KIWI_UNIT_BYTES, KIWI_GAUGE, S(""), S("a constant")},
};

typedef struct sensor {
  double samples;
} sensor;

static void *create(const kiwi_sensor_context *c, const kiwi_refusal *refusal) {
  (void)c;
  (void)refusal;
  return calloc(1, sizeof(sensor));
}

static uint32_t sample(void *instance, const kiwi_sink *sink) {
  sensor *s = instance;
  s->samples += 1;
  /* Rows of the 1.0 size, passed as the 1.1 type the header now declares. */
  sink->emit(sink->ctx, (const kiwi_metric_spec *)(const void *)&metrics[0], NULL, 0, s->samples);
  sink->emit(sink->ctx, (const kiwi_metric_spec *)(const void *)&metrics[1], NULL, 0, 512);
  return KIWI_SAMPLE_OK;
}

static void destroy(void *instance) {
  free(instance);
}

static const kiwi_plugin descriptor = {
    .abi_major = KIWI_ABI_MAJOR,
    .abi_minor = 0,
    .size = sizeof(kiwi_plugin),
    .kind = KIWI_KIND_SENSOR,
    .name = S("older_minor"),
    .description = S("built against ABI 1.0"),
    .options = (const kiwi_option_spec *)(const void *)options,
    .option_count = 2,
    .option_spec_size = sizeof(option_spec_1_0),
    .metrics = (const kiwi_metric_spec *)(const void *)metrics,
    .metric_count = 2,
    .metric_spec_size = sizeof(metric_spec_1_0),
    .sensor_create = create,
    .sensor_sample = sample,
    .destroy = destroy,
};

KIWI_PLUGIN_EXPORT const kiwi_plugin *kiwi_plugin_v1(void) {
  return &descriptor;
}
