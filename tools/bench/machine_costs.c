/* What a few events cost on this machine, the unit prices behind an idle agent's CPU figure
 * (docs/benchmarks.md, "Footprint: where kiwi-agent's time and memory go"):
 *   - a system call (getppid: the kernel's entry and exit alone);
 *   - a thread woken from sleep to read one byte from a pipe, once every 100 ms, with the writer on
 *     the same CPU and on another one: the sleeper's own run time per wakeup (schedstat), which
 *     is what the footprint benchmark counts of an agent's threads.
 * Build and run: cc -O2 -o /tmp/machine_costs tools/bench/machine_costs.c -lpthread &&
 * /tmp/machine_costs   (needs 2 CPUs; about 12 s) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int pipe_fds[2];
static pid_t sleeper_tid;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    perror("sched_setaffinity (needs CPUs 0 and 1)");
    exit(1);
  }
}

static long long run_time_ns(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tid);
  FILE *f = fopen(path, "r");
  long long ns = 0;
  if (!f || fscanf(f, "%lld", &ns) != 1) {
    perror(path);
    exit(1);
  }
  fclose(f);
  return ns;
}

static void *sleeper(void *arg) {
  (void)arg;
  pin(0);
  sleeper_tid = (pid_t)syscall(SYS_gettid);
  char c;
  while (read(pipe_fds[0], &c, 1) == 1 && c != 'q') {
  }
  return NULL;
}

/* The sleeper's run time per wakeup, the writer on `writer_cpu`. */
static double wakeup_us(int writer_cpu) {
  if (pipe(pipe_fds) != 0) {
    perror("pipe");
    exit(1);
  }
  pthread_t t;
  pthread_create(&t, NULL, sleeper, NULL);
  pin(writer_cpu);
  usleep(200000);
  const int n = 50;
  const long long before = run_time_ns(sleeper_tid);
  for (int i = 0; i < n; ++i) {
    usleep(100000);
    if (write(pipe_fds[1], "x", 1) != 1) exit(1);
  }
  usleep(100000);
  const long long after = run_time_ns(sleeper_tid);
  if (write(pipe_fds[1], "q", 1) != 1) exit(1);
  pthread_join(t, NULL);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  return (double)(after - before) / 1e3 / n;
}

int main(void) {
  const int calls = 200000;
  double t0 = now_s();
  for (int i = 0; i < calls; ++i) syscall(SYS_getppid);
  printf("system call (getppid): %.2f us\n", (now_s() - t0) / calls * 1e6);
  printf("thread woken from sleep, writer on the same CPU: %.1f us of its run time\n",
         wakeup_us(0));
  printf("thread woken from sleep, writer on another CPU: %.1f us of its run time\n", wakeup_us(1));
  return 0;
}
