/* A route handler in C99 against kiwi/plugin.h alone: it reads the agent's data through kiwi_data
 * (the snapshot's sequence and sensor count, the number of plugins in the stats), echoes a query
 * parameter, a header (found case-insensitively) and the body, sets the status and headers, takes
 * the methods its options list, answers from static storage or from a malloc'd body the agent
 * frees through release(), fails on request, and refuses an empty greeting. The integration tests
 * check each through the real agent. Thread-safe: the instance is read-only after create.
 *
 * At .../history it lists a history query's answer (series=<one pattern>&step=S&band=1): a line
 * per series, its key and values, and its min and max when it reads a band. Built with
 * KIWI_TEST_ABI_1_6 (test-c_handler_1_6.so) it is a plugin of ABI 1.6 as such a plugin was
 * built: its descriptor says 1.6, it steps through the rows by 1.6's size, knows no band, and
 * leaves garbage where 1.7's `band` is (1.6's tail padding). */
#include <kiwi/plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(literal) \
  { literal, sizeof(literal) - 1 }

static const kiwi_option_spec options[] = {
    {.key = S("greeting"),
     .type = KIWI_OPTION_STRING,
     .default_toml = S("\"hello\""),
     .description = S("what each answer starts with; not empty")},
    {.key = S("methods"),
     .type = KIWI_OPTION_STRING,
     .default_toml = S("\"GET, HEAD\""),
     .description = S("the methods the route takes")},
};

typedef struct handler {
  const kiwi_host *host;
  const kiwi_data *data;
  char greeting[64];
  char methods[64];
  size_t greeting_size, methods_size;
} handler;

static int is(kiwi_str s, const char *text) {
  return s.size == strlen(text) && (s.size == 0 || memcmp(s.data, text, s.size) == 0);
}

static int same_ci(kiwi_str s, const char *text) {
  size_t n = strlen(text), i;
  if (s.size != n) return 0;
  for (i = 0; i < n; ++i) {
    char a = s.data[i], b = text[i];
    if (a >= 'A' && a <= 'Z') a = (char)(a + 32);
    if (b >= 'A' && b <= 'Z') b = (char)(b + 32);
    if (a != b) return 0;
  }
  return 1;
}

static const kiwi_option_value *option(const kiwi_handler_context *c, const char *key) {
  size_t i;
  for (i = 0; i < c->option_count; ++i)
    if (is(c->options[i].key, key)) return &c->options[i];
  return NULL;
}

static void refuse(const kiwi_refusal *refusal, const char *why) {
  kiwi_str s;
  s.data = why;
  s.size = strlen(why);
  refusal->refuse(refusal->ctx, s);
}

static void *create(const kiwi_handler_context *c, const kiwi_refusal *refusal) {
  const kiwi_option_value *greeting = option(c, "greeting"), *methods = option(c, "methods");
  handler *h;
  kiwi_str line = S("a C handler, created");
  if (!greeting || greeting->string.size == 0) {
    refuse(refusal, "greeting is empty; say something");
    return NULL;
  }
  if (greeting->string.size >= sizeof h->greeting || methods->string.size >= sizeof h->methods) {
    refuse(refusal, "greeting or methods longer than 63 bytes");
    return NULL;
  }
  h = calloc(1, sizeof *h);
  if (!h) {
    refuse(refusal, "out of memory");
    return NULL;
  }
  h->host = c->host;
  h->data = c->data;
  /* The option rows are the agent's and valid during create only: copy what is kept. */
  memcpy(h->greeting, greeting->string.data, greeting->string.size);
  h->greeting_size = greeting->string.size;
  if (methods->string.size) memcpy(h->methods, methods->string.data, methods->string.size);
  h->methods_size = methods->string.size;
  c->host->log(c->host->ctx, KIWI_LOG_INFO, line);
  return h;
}

static kiwi_str find(const kiwi_param *params, size_t count, const char *name, int ci, int *found) {
  size_t i;
  kiwi_str none = S("-");
  for (i = 0; i < count; ++i)
    if (ci ? same_ci(params[i].name, name) : is(params[i].name, name)) {
      *found = 1;
      return params[i].value;
    }
  *found = 0;
  return none;
}

static void release(void *owner) {
  free(owner);
}

#ifdef KIWI_TEST_ABI_1_6
#define C_HANDLER_NAME "c_handler_1_6"
#define C_HANDLER_MINOR 6
#else
#define C_HANDLER_NAME "c_handler"
#define C_HANDLER_MINOR KIWI_ABI_MINOR
#endif

/* A growing text; `failed` once out of memory. */
typedef struct text {
  char *data;
  size_t size, capacity;
  int failed;
} text;

static void add(text *t, const char *bytes, size_t n) {
  if (t->failed) return;
  if (t->size + n > t->capacity) {
    size_t grown = (t->capacity + n) * 2;
    char *more = realloc(t->data, grown);
    if (!more) {
      t->failed = 1;
      return;
    }
    t->data = more;
    t->capacity = grown;
  }
  if (n) memcpy(t->data + t->size, bytes, n);
  t->size += n;
}

static void add_cstr(text *t, const char *s) {
  add(t, s, strlen(s));
}

/* A space and a number (shortest round trip is not C99's: 17 digits), or " null" for NaN. */
static void add_number(text *t, double v) {
  char digits[40];
  if (v != v)
    snprintf(digits, sizeof digits, " null");
  else
    snprintf(digits, sizeof digits, " %.17g", v);
  add_cstr(t, digits);
}

static int history(const handler *h, const kiwi_request *req, const kiwi_response *res) {
  kiwi_history_query q;
  const kiwi_history_result *r;
  void *ticket = NULL;
  kiwi_str pattern, step, band;
  int has_pattern, has_step, has_band;
  size_t i, j, row_size;
  char digits[32] = {0};
  text t = {NULL, 0, 0, 0};
  kiwi_body body;
  kiwi_str type = S("Content-Type"), plain = S("text/plain; charset=utf-8");
  pattern = find(req->query, req->query_count, "series", 0, &has_pattern);
  step = find(req->query, req->query_count, "step", 0, &has_step);
  band = find(req->query, req->query_count, "band", 0, &has_band);
  memset(&q, 0xee, sizeof q); /* what a 1.6 plugin's stack may hold in the padding */
  q.size = sizeof q;
  q.limit = 10000;
  q.has_since = 0;
  q.has_until = 0;
  q.patterns = has_pattern ? &pattern : NULL;
  q.pattern_count = has_pattern ? 1 : 0;
  if (has_step && step.size < sizeof digits) memcpy(digits, step.data, step.size);
  q.step = atof(digits);
  q.aggregate = KIWI_AGGREGATE_MEAN;
#ifdef KIWI_TEST_ABI_1_6
  (void)band;
  (void)has_band;
  row_size = KIWI_HISTORY_SERIES_SIZE_1_0; /* its sizeof(kiwi_history_series) */
#else
  q.band = has_band && is(band, "1");
#endif
  r = h->data->history(h->data->ctx, &q, &ticket, NULL);
  if (!r) return 1;
#ifndef KIWI_TEST_ABI_1_6
  row_size = KIWI_HAS_MEMBER(r, kiwi_history_result, series_size) ? r->series_size
                                                                  : KIWI_HISTORY_SERIES_SIZE_1_0;
#endif
  snprintf(digits, sizeof digits, "timestamps=%lu\n", (unsigned long)r->timestamp_count);
  add_cstr(&t, digits);
  for (i = 0; i < r->series_count; ++i) {
    const kiwi_history_series *s =
        (const kiwi_history_series *)((const unsigned char *)r->series + i * row_size);
    add(&t, s->key.data, s->key.size);
    add_cstr(&t, " values");
    for (j = 0; j < r->timestamp_count; ++j) add_number(&t, s->values[j]);
#ifndef KIWI_TEST_ABI_1_6
    if (row_size >= offsetof(kiwi_history_series, max) + sizeof s->max && s->min && s->max) {
      add_cstr(&t, " min");
      for (j = 0; j < r->timestamp_count; ++j) add_number(&t, s->min[j]);
      add_cstr(&t, " max");
      for (j = 0; j < r->timestamp_count; ++j) add_number(&t, s->max[j]);
    }
#endif
    add_cstr(&t, "\n");
  }
  h->data->release(h->data->ctx, ticket);
  if (t.failed) {
    free(t.data);
    return 1;
  }
  body.data = t.data;
  body.size = t.size;
  body.owner = t.data;
  body.release = release;
  res->header(res->ctx, type, plain);
  res->body(res->ctx, body);
  return 0;
}

static int handle(void *instance, const kiwi_request *req, const kiwi_response *res) {
  const handler *h = instance;
  static const char fixed[] = "static bytes from the plugin's image\n";
  kiwi_str q, x, status;
  int has_q, has_x, has_status, has_fail;
  void *ticket = NULL;
  const kiwi_snapshot *snap;
  const kiwi_stats *stats;
  unsigned long long sequence;
  size_t sensors, plugins, size;
  char *text;
  kiwi_body body;
  kiwi_str name = S("X-C-Handler"), yes = S("yes"), type = S("Content-Type"),
           plain = S("text/plain; charset=utf-8");

  find(req->query, req->query_count, "fail", 0, &has_fail);
  if (has_fail) {
    kiwi_str why = S("asked to fail");
    res->error(res->ctx, why);
    return 1;
  }
  if (req->path.size >= 8 && memcmp(req->path.data + req->path.size - 8, "/history", 8) == 0) {
    if (history(h, req, res) == 0) return 0;
    res->error(res->ctx, (kiwi_str)S("history failed"));
    return 1;
  }
  if (req->path.size >= 7 && memcmp(req->path.data + req->path.size - 7, "/static", 7) == 0) {
    body.data = fixed;
    body.size = sizeof fixed - 1;
    body.owner = NULL;
    body.release = NULL;
    res->header(res->ctx, type, plain);
    res->body(res->ctx, body);
    return 0;
  }

  /* Each view is read and released before the next is acquired. */
  snap = h->data->snapshot(h->data->ctx, &ticket);
  sequence = (unsigned long long)snap->sequence;
  sensors = snap->sensor_count;
  h->data->release(h->data->ctx, ticket);
  stats = h->data->stats(h->data->ctx, &ticket);
  plugins = stats->plugin_count;
  h->data->release(h->data->ctx, ticket);

  q = find(req->query, req->query_count, "q", 0, &has_q);
  x = find(req->headers, req->header_count, "x-kiwi-test", 1, &has_x);
  status = find(req->query, req->query_count, "status", 0, &has_status);
  (void)has_q;
  (void)has_x;

  size =
      h->greeting_size + req->method.size + req->path.size + q.size + x.size + req->body.size + 160;
  text = malloc(size);
  if (!text) {
    kiwi_str why = S("out of memory");
    res->error(res->ctx, why);
    return 1;
  }
  size =
      (size_t)snprintf(text, size,
                       "%.*s %.*s %.*s\nsequence=%llu sensors=%lu plugins=%lu\nq=%.*s\nh=%.*s\n"
                       "body=%.*s\n",
                       (int)h->greeting_size, h->greeting, (int)req->method.size, req->method.data,
                       (int)req->path.size, req->path.data, sequence, (unsigned long)sensors,
                       (unsigned long)plugins, (int)q.size, q.data, (int)x.size, x.data,
                       (int)req->body.size, req->body.size ? req->body.data : "");
  if (has_status) {
    char digits[8] = {0};
    memcpy(digits, status.data, status.size < 7 ? status.size : 7);
    res->status(res->ctx, atoi(digits));
  }
  res->header(res->ctx, type, plain);
  res->header(res->ctx, name, yes);
  body.data = text;
  body.size = size;
  body.owner = text;
  body.release = release;
  res->body(res->ctx, body);
  return 0;
}

static kiwi_str methods(void *instance) {
  const handler *h = instance;
  kiwi_str s;
  s.data = h->methods;
  s.size = h->methods_size; /* "" means the agent's default, GET and HEAD */
  return s;
}

static void destroy(void *instance) {
  free(instance);
}

/* Designated initializers: a member this plugin does not set (the sensor functions) is NULL. */
static const kiwi_plugin descriptor = {
    .abi_major = KIWI_ABI_MAJOR,
    .abi_minor = C_HANDLER_MINOR,
    .size = sizeof(kiwi_plugin),
    .kind = KIWI_KIND_HANDLER,
    .name = S(C_HANDLER_NAME),
    .description = S("a route handler written in C against kiwi/plugin.h (test plugin)"),
    .options = options,
    .option_count = sizeof options / sizeof options[0],
    .option_spec_size = sizeof(kiwi_option_spec),
    .metric_spec_size = sizeof(kiwi_metric_spec),
    .handler_create = create,
    .handler_handle = handle,
    .handler_methods = methods,
    .destroy = destroy,
};

KIWI_PLUGIN_EXPORT const kiwi_plugin *kiwi_plugin_v1(void) {
  return &descriptor;
}
