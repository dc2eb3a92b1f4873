/* A complete sensor plugin in C: open file handles against the kernel's limit, from
 * <procfs>/sys/fs/file-nr ("allocated  unused  maximum"). It includes only kiwi/plugin.h, the C ABI
 * every plugin goes through (docs/plugins.md), so any C compiler builds it. */
#include <kiwi/plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(literal) \
  { literal, sizeof(literal) - 1 }

static const kiwi_option_spec options[] = {
    {S("warn_ratio"), KIWI_OPTION_NUMBER, S("0.9"),
     S("log a warning once the open share passes this (0..1)"), 1, 0, 1},
};

/* Designated initializers: a member a later minor version of the ABI adds starts empty, and the
 * file still builds with -Wextra -Werror. */
static const kiwi_metric_spec metrics[] = {
    {.name = S("files_open"),
     .unit = KIWI_UNIT_COUNT,
     .kind = KIWI_GAUGE,
     .labels = S(""),
     .help = S("file handles in use (file-nr)")},
    {.name = S("files_max"),
     .unit = KIWI_UNIT_COUNT,
     .kind = KIWI_GAUGE,
     .labels = S(""),
     .help = S("the kernel's limit (fs.file-max)")},
    {.name = S("files_open_ratio"),
     .unit = KIWI_UNIT_RATIO,
     .kind = KIWI_GAUGE,
     .labels = S(""),
     .help = S("files_open / files_max")},
};

typedef struct sensor {
  const kiwi_host *host;
  char path[4096];
  double warn_ratio;
  int warned;
} sensor;

static void say(const kiwi_sink *sink, const char *text) {
  kiwi_str s = {text, strlen(text)};
  sink->message(sink->ctx, s);
}

/* Once per [[sensor]] entry: copy what is kept; options and strings are the agent's. */
static void *create(const kiwi_sensor_context *ctx, const kiwi_refusal *refusal) {
  sensor *s = calloc(1, sizeof *s);
  if (!s || ctx->procfs.size + sizeof "/sys/fs/file-nr" > sizeof s->path) {
    kiwi_str why = S("procfs path too long");
    refusal->refuse(refusal->ctx, why);
    free(s);
    return NULL;
  }
  s->host = ctx->host;
  memcpy(s->path, ctx->procfs.data, ctx->procfs.size);
  strcpy(s->path + ctx->procfs.size, "/sys/fs/file-nr");
  s->warn_ratio = ctx->options[0].number; /* the table's only option, validated by the agent */
  return s;
}

/* Never called concurrently for one instance; the state lives in it, not in statics. */
static uint32_t sample(void *instance, const kiwi_sink *sink) {
  sensor *s = instance;
  FILE *f = fopen(s->path, "r");
  if (!f) {
    char why[4200];
    snprintf(why, sizeof why, "%s: cannot open", s->path);
    say(sink, why);
    return KIWI_SAMPLE_ERROR;
  }
  unsigned long long allocated = 0, unused = 0, max = 0;
  const int fields = fscanf(f, "%llu %llu %llu", &allocated, &unused, &max);
  fclose(f);
  if (fields != 3 || max == 0) {
    say(sink, "file-nr: not three numbers");
    return KIWI_SAMPLE_ERROR;
  }
  const double open = (double)(allocated - unused), ratio = open / (double)max;
  sink->emit(sink->ctx, &metrics[0], NULL, 0, open);
  sink->emit(sink->ctx, &metrics[1], NULL, 0, (double)max);
  sink->emit(sink->ctx, &metrics[2], NULL, 0, ratio);
  if (ratio > s->warn_ratio && !s->warned) {
    kiwi_str text = S("open files above warn_ratio of the kernel's limit");
    s->host->log(s->host->ctx, KIWI_LOG_WARN, text);
  }
  s->warned = ratio > s->warn_ratio;
  return KIWI_SAMPLE_OK;
}

static void destroy(void *instance) {
  free(instance);
}

static const kiwi_plugin descriptor = {
    .abi_major = KIWI_ABI_MAJOR,
    .abi_minor = KIWI_ABI_MINOR,
    .size = sizeof(kiwi_plugin),
    .kind = KIWI_KIND_SENSOR,
    .name = S("files"),
    .description = S("open file handles against the kernel's limit"),
    .options = options,
    .option_count = sizeof options / sizeof options[0],
    .option_spec_size = sizeof(kiwi_option_spec),
    .metrics = metrics,
    .metric_count = sizeof metrics / sizeof metrics[0],
    .metric_spec_size = sizeof(kiwi_metric_spec),
    .sensor_create = create,
    .sensor_sample = sample,
    .destroy = destroy,
};

KIWI_PLUGIN_EXPORT const kiwi_plugin *kiwi_plugin_v1(void) {
  return &descriptor;
}
