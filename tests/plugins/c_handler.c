/* A route handler in C99 against kiwi/plugin.h alone: it reads the agent's data through kiwi_data
 * (the snapshot's sequence and sensor count, the number of plugins in the stats), echoes a query
 * parameter, a header (found case-insensitively) and the body, sets the status and headers, takes
 * the methods its options list, answers from static storage or from a malloc'd body the agent
 * frees through release(), fails on request, and refuses an empty greeting. The integration tests
 * check each through the real agent. Thread-safe: the instance is read-only after create. */
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
    .abi_minor = KIWI_ABI_MINOR,
    .size = sizeof(kiwi_plugin),
    .kind = KIWI_KIND_HANDLER,
    .name = S("c_handler"),
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
