/* A notifier plugin in C99 against kiwi/plugin.h alone (ABI 1.6): it writes each notification it
 * is sent to a file, one line per alert with every member of the view, answers as its `answer`
 * option says, and logs. The loader's tests check what arrived against what they sent. */
#include <kiwi/plugin.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(literal) \
  { literal, sizeof(literal) - 1 }

#define OPTION(k, t, d, text) .key = S(k), .type = t, .default_toml = S(d), .description = S(text)
static const kiwi_option_spec options[] = {
    {OPTION("file", KIWI_OPTION_STRING, "\"\"", "where each notification is written (required)")},
    {OPTION("answer", KIWI_OPTION_STRING, "\"ok\"", "the verdict of every send"),
     .choices = S("ok,retry,drop")},
};

typedef struct notifier {
  const kiwi_host *host;
  char file[512];
  uint32_t answer;
} notifier;

static int is(kiwi_str s, const char *text) {
  return s.size == strlen(text) && memcmp(s.data, text, s.size) == 0;
}

static const kiwi_option_value *option(const kiwi_notifier_context *c, const char *key) {
  for (size_t i = 0; i < c->option_count; ++i)
    if (is(c->options[i].key, key)) return &c->options[i];
  return NULL;
}

static void *create(const kiwi_notifier_context *c, const kiwi_refusal *refusal) {
  const kiwi_option_value *file = option(c, "file");
  if (!file || file->string.size == 0 || file->string.size >= sizeof(((notifier *)0)->file)) {
    kiwi_str why = S("file is required");
    refusal->refuse(refusal->ctx, why);
    return NULL;
  }
  notifier *n = calloc(1, sizeof *n);
  if (!n) return NULL;
  n->host = c->host;
  memcpy(n->file, file->string.data, file->string.size);
  const kiwi_str answer = option(c, "answer")->string;
  n->answer = is(answer, "retry")  ? KIWI_OUTPUT_RETRY
              : is(answer, "drop") ? KIWI_OUTPUT_DROP
                                   : KIWI_OUTPUT_OK;
  char line[160];
  int len = snprintf(line, sizeof line, "notifier %.*s on %.*s, agent %.*s",
                     (int)c->instance_name.size, c->instance_name.data, (int)c->host_name.size,
                     c->host_name.data, (int)c->agent_version.size, c->agent_version.data);
  kiwi_str text = {line, (size_t)len};
  c->host->log(c->host->ctx, KIWI_LOG_INFO, text);
  return n;
}

static uint32_t send_one(void *instance, const kiwi_notification *notification,
                         const kiwi_output_result *result) {
  notifier *n = instance;
  FILE *out = fopen(n->file, "a");
  if (!out) {
    kiwi_str why = S("cannot open the file");
    result->reason(result->ctx, why);
    return KIWI_OUTPUT_RETRY;
  }
  fprintf(out, "notification repeat=%u host=%.*s url=%.*s alerts=%zu\n", notification->repeat,
          (int)notification->host.size, notification->host.data, (int)notification->agent_url.size,
          notification->agent_url.data, notification->alert_count);
  for (size_t i = 0; i < notification->alert_count; ++i) {
    /* Rows are stepped through by the size the agent states. */
    const kiwi_alert_notice *a = (const kiwi_alert_notice *)((const char *)notification->alerts +
                                                             i * notification->alert_size);
    fprintf(out,
            "%.*s sensor=%.*s severity=%u firing=%u summary=%.*s value=%g threshold=%g "
            "starts=%.3f ends=%.3f sequence=%llu labels=",
            (int)a->name.size, a->name.data, (int)a->sensor.size, a->sensor.data, a->severity,
            a->firing, (int)a->summary.size, a->summary.data, a->value, a->threshold, a->starts_at,
            a->ends_at, (unsigned long long)a->sequence);
    for (size_t j = 0; j < a->label_count; ++j)
      fprintf(out, "%s%.*s=%.*s", j ? "," : "", (int)a->labels[j].name.size, a->labels[j].name.data,
              (int)a->labels[j].value.size, a->labels[j].value.data);
    fputc('\n', out);
  }
  fclose(out);
  if (n->answer != KIWI_OUTPUT_OK) {
    kiwi_str why = S("answering as the answer option says");
    result->reason(result->ctx, why);
  }
  kiwi_str text = S("sent");
  n->host->log(n->host->ctx, KIWI_LOG_DEBUG, text);
  return n->answer;
}

static void destroy(void *instance) {
  free(instance);
}

static const kiwi_plugin descriptor = {
    .abi_major = KIWI_ABI_MAJOR,
    .abi_minor = KIWI_ABI_MINOR,
    .size = sizeof(kiwi_plugin),
    .kind = KIWI_KIND_NOTIFIER,
    .name = S("c_notifier"),
    .description = S("a notifier written in C against kiwi/plugin.h (test plugin)"),
    .options = options,
    .option_count = sizeof options / sizeof options[0],
    .option_spec_size = sizeof(kiwi_option_spec),
    .metric_spec_size = sizeof(kiwi_metric_spec),
    .destroy = destroy,
    .notifier_create = create,
    .notifier_send = send_one,
};

KIWI_PLUGIN_EXPORT const kiwi_plugin *kiwi_plugin_v1(void) {
  return &descriptor;
}
