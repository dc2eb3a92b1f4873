/* The ceiling: the simplest libmicrohttpd server with kiwi-agent's HTTP settings, answering every
 * request with one fixed body held in memory. tools/bench/run.sh measures the agent against it.
 *
 * Same settings as agent/src/http/mhd_workers.cpp: internal polling thread + epoll, a thread pool
 * ("auto" by default, the agent's rule: one per CPU in the affinity mask, at most 4), 16 KiB of
 * memory per connection, 5 s connection timeout, 256 connections, address reuse, and the answer
 * queued on the second access-handler call (answering on the first call counts as an early
 * response in MHD 0.9.75 and closes kept-alive connections). Unlike the agent, one MHD_Response
 * is created at start-up (MHD_RESPMEM_PERSISTENT) and queued for every request.
 *
 * Usage: kiwi-bench-ceiling [--port N] [--threads N|auto] [--body-size BYTES] [--memory-limit
 * BYTES]
 *   --port 0 (default) picks a free port; "listening on http://127.0.0.1:PORT/" goes to stderr.
 *   --body-size 0 (default) answers an empty 200; otherwise a JSON body of exactly BYTES bytes
 *   ({"version":1,"pad":"xxx..."}; shorter sizes are padded with spaces).
 *   --memory-limit sets MHD_OPTION_CONNECTION_MEMORY_LIMIT (default 16384, the agent's
 *   kConnectionMemoryBytes in agent/src/http/http_server.hpp; 0: MHD's own, 32 KiB; above 32 KiB
 * MHD maps each connection's pool with mmap and unmaps it when the connection closes). SIGTERM or
 * SIGINT stops it. Listens on 127.0.0.1 only. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <microhttpd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct MHD_Response *response;
static char first_call_marker;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **state) {
  (void)cls, (void)url, (void)method, (void)version, (void)upload_data;
  if (*state == NULL) { /* first call: headers only */
    *state = &first_call_marker;
    return MHD_YES;
  }
  if (*upload_size != 0) { /* discard any request body */
    *upload_size = 0;
    return MHD_YES;
  }
  return MHD_queue_response(c, MHD_HTTP_OK, response);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode code) {
  (void)cls, (void)c, (void)code;
  *state = NULL;
}

static char *make_body(size_t size) {
  char *body = malloc(size + 1);
  if (!body) return NULL;
  static const char head[] = "{\"version\":1,\"pad\":\"";
  static const char tail[] = "\"}";
  size_t fixed = sizeof head - 1 + sizeof tail - 1;
  if (size >= fixed) {
    memcpy(body, head, sizeof head - 1);
    memset(body + sizeof head - 1, 'x', size - fixed);
    memcpy(body + size - (sizeof tail - 1), tail, sizeof tail - 1);
  } else {
    memset(body, ' ', size);
  }
  body[size] = '\0';
  return body;
}

static unsigned long arg_number(int argc, char **argv, int *i, unsigned long max) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "ceiling: %s needs a value\n", argv[*i]);
    exit(2);
  }
  char *end = NULL;
  unsigned long v = strtoul(argv[++*i], &end, 10);
  if (*end != '\0' || v > max) {
    fprintf(stderr, "ceiling: %s: bad value '%s'\n", argv[*i - 1], argv[*i]);
    exit(2);
  }
  return v;
}

int main(int argc, char **argv) {
  unsigned long port = 0, threads = 0 /* auto */, body_size = 0, memory_limit = 16384;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--port"))
      port = arg_number(argc, argv, &i, 65535);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc && !strcmp(argv[i + 1], "auto"))
      threads = 0, ++i;
    else if (!strcmp(argv[i], "--threads"))
      threads = arg_number(argc, argv, &i, 256);
    else if (!strcmp(argv[i], "--body-size"))
      body_size = arg_number(argc, argv, &i, 64ul << 20);
    else if (!strcmp(argv[i], "--memory-limit"))
      memory_limit = arg_number(argc, argv, &i, 16ul << 20);
    else {
      fprintf(
          stderr,
          "usage: %s [--port N] [--threads N|auto] [--body-size BYTES] [--memory-limit BYTES]\n",
          argv[0]);
      return 2;
    }
  }
  if (threads == 0) { /* auto, as agent/src/http/http_server.cpp auto_worker_threads() */
    cpu_set_t set;
    CPU_ZERO(&set);
    threads = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned long)CPU_COUNT(&set) : 1;
    if (threads > 4) threads = 4;
    if (threads < 1) threads = 1;
  }

  char *body = make_body(body_size);
  if (!body) return 1;
  response = MHD_create_response_from_buffer(body_size, body, MHD_RESPMEM_PERSISTENT);
  if (!response) return 1;
  MHD_add_response_header(response, "Content-Type", "application/json");

  /* Block the stop signals before MHD starts its threads, so only sigwait() below sees them. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);

  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

  /* Options that are only set sometimes: one worker is MHD's own polling thread (a pool of 1
   * draws a warning), as in the agent; memory limit 0 means MHD's default. */
  struct MHD_OptionItem extra[3];
  int n = 0;
  if (threads > 1)
    extra[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL};
  if (memory_limit)
    extra[n++] =
        (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)memory_limit, NULL};
  extra[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

  struct MHD_Daemon *d =
      MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL,
                       NULL, &on_request, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                       MHD_OPTION_CONNECTION_TIMEOUT, 5u, MHD_OPTION_CONNECTION_LIMIT, 256u,
                       MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_NOTIFY_COMPLETED,
                       &on_completed, NULL, MHD_OPTION_ARRAY, extra, MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "ceiling: cannot listen on 127.0.0.1:%lu\n", port);
    return 1;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  fprintf(stderr, "listening on http://127.0.0.1:%u/ (%lu threads, body %lu bytes)\n",
          info ? info->port : 0u, threads, body_size);

  int sig = 0;
  sigwait(&stop, &sig);
  MHD_stop_daemon(d);
  MHD_destroy_response(response);
  free(body);
  return 0;
}
