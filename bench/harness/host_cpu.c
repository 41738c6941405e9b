/* hostcall_bench: where the threads run and what CPU they use. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"

/* Where the device-model threads run (chosen once in main, choose_cpus):
 * the bench's main thread, the listener's main thread, its helper, and the
 * device thread each on a core of its own (distinct physical cores where
 * the topology says so), the same for every listener. With fewer than four
 * cores: the listener threads on CPU 0, the device on CPU 1 and the main
 * thread unpinned (it sleeps while a round is measured). -1: unpinned. */
int g_cpu_main = -1, g_cpu_listener = 0, g_cpu_helper = 0, g_cpu_device = 1;
bool g_device_pin = true;
bool g_pin_listener = false;
/* --pin: the library's listener threads run on CPU 0 and the wave threads
 * on the other CPUs in the thread-per-wave mode. Off by default: on a
 * 2-core machine shared with other work, the waves' single core is then
 * easily starved. */
bool g_pin = false;

static int read_int_file(const char* path, int fallback) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return fallback;
  int v = fallback;
  if (fscanf(f, "%d", &v) != 1) v = fallback;
  fclose(f);
  return v;
}

/* The CPUs the process may use, as it started. */
static cpu_set_t g_allowed_cpus;
static bool g_have_allowed_cpus;

/* Threads inherit their creator's CPUs: before the runs whose threads are
 * not pinned (thread per wave, idle), the main thread gives its pin up. */
void unpin_main_thread(void) {
  if (g_have_allowed_cpus) sched_setaffinity(0, sizeof(g_allowed_cpus), &g_allowed_cpus);
}

void choose_cpus(void) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  g_allowed_cpus = allowed;
  g_have_allowed_cpus = true;
  int chosen[4], n = 0, core_of[4], pkg_of[4];
  for (int c = 0; c < CPU_SETSIZE && n < 4; ++c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    char path[96];
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/core_id", c);
    int core = read_int_file(path, c);
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", c);
    int pkg = read_int_file(path, 0);
    bool sibling = false;
    for (int i = 0; i < n; ++i) sibling |= core_of[i] == core && pkg_of[i] == pkg;
    if (sibling) continue;
    core_of[n] = core;
    pkg_of[n] = pkg;
    chosen[n++] = c;
  }
  if (n >= 4) {
    g_cpu_main = chosen[0];
    g_cpu_listener = chosen[1];
    g_cpu_helper = chosen[2];
    g_cpu_device = chosen[3];
  } else if (n >= 2) {
    g_cpu_main = -1;
    g_cpu_listener = g_cpu_helper = chosen[0];
    g_cpu_device = chosen[1];
  }
}

void pin_current_thread_to(int cpu) {
  if (sysconf(_SC_NPROCESSORS_ONLN) <= cpu) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    fprintf(stderr, "hostcall_bench: cannot pin the device thread\n");
  }
}

/* ---- CPU accounting ------------------------------------------------------ */

uint64_t timespec_ns(const struct timespec* ts) {
  return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

/* Busy CPU time of the whole machine (all processes), from /proc/stat. */
uint64_t machine_busy_ns(void) {
  FILE* f = fopen("/proc/stat", "r");
  if (f == NULL) return 0;
  unsigned long long v[8] = {0};
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (n < 5) return 0;
  /* user nice system idle iowait irq softirq steal: busy = all but idle+iowait */
  unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  long hz = sysconf(_SC_CLK_TCK);
  return hz > 0 ? (uint64_t)(busy * (1000000000ull / (unsigned long long)hz)) : 0;
}

uint64_t process_cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

/* CPU time of another thread of this process, in ns: its per-thread CPU
 * clock (Linux encodes the tid in the clock id), else its schedstat. */
static bool thread_cpu_ns(int tid, uint64_t* out) {
  clockid_t clock = (clockid_t)((~(unsigned)tid) << 3) | 6; /* per-thread, scheduler clock */
  struct timespec ts;
  if (clock_gettime(clock, &ts) == 0) {
    *out = timespec_ns(&ts);
    return true;
  }
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return false;
  unsigned long long ns = 0;
  bool ok = fscanf(f, "%llu", &ns) == 1;
  fclose(f);
  *out = ns;
  return ok;
}

/* The library's listener threads (names starting with THREAD_PREFIX). */
void listener_threads(thread_set_t* set) {
  set->count = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == NULL) return;
  struct dirent* e;
  while ((e = readdir(dir)) != NULL && set->count < MAX_TRACKED) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300];
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    FILE* f = fopen(path, "r");
    if (f == NULL) continue;
    char name[32] = {0};
    if (fgets(name, sizeof(name), f) != NULL) {
      name[strcspn(name, "\n")] = '\0';
      if (strncmp(name, THREAD_PREFIX, strlen(THREAD_PREFIX)) == 0) {
        int tid = atoi(e->d_name);
        uint64_t cpu = 0;
        if (thread_cpu_ns(tid, &cpu)) {
          set->tids[set->count] = tid;
          set->cpu[set->count] = cpu;
          /* Thread names are at most 15 characters (TASK_COMM_LEN 16). */
          snprintf(set->names[set->count], sizeof(set->names[0]), "%.*s",
                   (int)sizeof(set->names[0]) - 1, name);
          set->count++;
        }
      }
    }
    fclose(f);
  }
  closedir(dir);
}

/* CPU the listener threads used between two snapshots (a thread that
 * appeared in between counts from 0). */
uint64_t listener_cpu_delta(const thread_set_t* before, const thread_set_t* after) {
  uint64_t total = 0;
  for (int i = 0; i < after->count; ++i) {
    uint64_t start = 0;
    for (int j = 0; j < before->count; ++j) {
      if (before->tids[j] == after->tids[i]) start = before->cpu[j];
    }
    total += after->cpu[i] >= start ? after->cpu[i] - start : 0;
  }
  return total;
}

/* Pins the listener threads in `set` when `pin` (see g_pin and the
 * device-model mode): a main listener thread to g_cpu_listener, a helper
 * (any other listener thread) to g_cpu_helper. */
void pin_listener_threads(const thread_set_t* set, bool pin) {
  if (!pin || sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
  for (int i = 0; i < set->count; ++i) {
    bool main_thread = false;
    for (int m = 0; m < MODE_COUNT; ++m) main_thread |= strcmp(set->names[i], kModeThread[m]) == 0;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(main_thread ? g_cpu_listener : g_cpu_helper, &cpus);
    if (sched_setaffinity((pid_t)set->tids[i], sizeof(cpus), &cpus) != 0) {
      fprintf(stderr, "hostcall_bench: cannot pin listener thread %d\n", set->tids[i]);
    }
  }
}

bool has_thread(const thread_set_t* set, const char* name) {
  for (int i = 0; i < set->count; ++i) {
    if (strcmp(set->names[i], name) == 0) return true;
  }
  return false;
}

void sleep_ms(uint32_t ms) {
  struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The processor's name (/proc/cpuinfo), kept in the JSON: ROCr's poll
 * differs between AMD (MWAITX) and Intel processors. */
const char* cpu_model_name(void) {
  static char name[128];
  if (name[0] != '\0') return name;
  snprintf(name, sizeof(name), "unknown");
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return name;
  char line[256];
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "model name", 10) == 0) {
      const char* colon = strchr(line, ':');
      if (colon != NULL) {
        colon += colon[1] == ' ' ? 2 : 1;
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(colon, "\n\"\\"), colon);
      }
      break;
    }
  }
  fclose(f);
  return name;
}
