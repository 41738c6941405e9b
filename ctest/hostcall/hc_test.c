#define _GNU_SOURCE
#include "hc_test.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef HC_NO_HSA
#include "hsa_sim.h"
#endif

extern char** environ;

DROPIN_CHECK_DEFINE_FAILURES;

uint64_t hc_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t hc_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void hc_sleep_ms(uint32_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void hc_snapshot_words(const void* src, void* dst, size_t size) {
  const _Atomic uint64_t* from = (const _Atomic uint64_t*)src;
  uint64_t* to = dst;
  for (size_t i = 0; i < size / 8; ++i) {
    /* Relaxed: a snapshot for comparison; no other data rides on it. */
    to[i] = atomic_load_explicit(&from[i], memory_order_relaxed);
  }
}

uint64_t hc_served_by(void) {
  char name[32] = {0};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  if (strcmp(name, "amdgpu-hostcall") == 0) return HC_SERVED_BY_MAIN;
  if (strcmp(name, "amdgpu-hc-slow") == 0) return HC_SERVED_BY_HELPER;
  return 0;
}

/* Whether thread `tid` (a /proc/self/task entry) is named `comm`, or like
 * either listener thread when `comm` is NULL. */
static bool task_named(const char* tid, const char* comm) {
  char path[300], name[32] = {0};
  snprintf(path, sizeof(path), "/proc/self/task/%s/comm", tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return false;
  bool read = fgets(name, sizeof(name), f) != NULL;
  fclose(f);
  if (!read) return false;
  name[strcspn(name, "\n")] = '\0';
  if (comm != NULL) return strcmp(name, comm) == 0;
  return strcmp(name, "amdgpu-hostcall") == 0 || strcmp(name, "amdgpu-hc-slow") == 0;
}

/* Calls `visit(tid, arg)` for each thread of this process that `task_named`
 * accepts, until it returns false; false if the threads cannot be listed. */
static bool for_each_named_task(const char* comm, bool (*visit)(const char* tid, void* arg), void* arg) {
  DIR* dir = opendir("/proc/self/task");
  if (dir == NULL) return false;
  struct dirent* e;
  while ((e = readdir(dir)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    if (task_named(e->d_name, comm) && !visit(e->d_name, arg)) break;
  }
  closedir(dir);
  return true;
}

static bool count_task(const char* tid, void* count) {
  (void)tid;
  ++*(int*)count;
  return true;
}

int hc_listener_threads(void) {
  int count = 0;
  return for_each_named_task(NULL, count_task, &count) ? count : -1;
}

static bool read_voluntary_switches(const char* tid, void* switches) {
  char path[300], line[128];
  snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return true;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (sscanf(line, "voluntary_ctxt_switches: %ld", (long*)switches) == 1) break;
  }
  fclose(f);
  return false;
}

/* Clears *asleep when thread `tid` is not sleeping (state S). */
static bool check_asleep(const char* tid, void* asleep) {
  char path[300], stat[512] = "";
  snprintf(path, sizeof(path), "/proc/self/task/%s/stat", tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return true;
  bool got = fgets(stat, sizeof(stat), f) != NULL;
  fclose(f);
  const char* state = got ? strrchr(stat, ')') : NULL;
  if (state != NULL && state[1] == ' ' && state[2] != 'S') {
    *(bool*)asleep = false;
    return false;
  }
  return true;
}

bool hc_listeners_asleep(void) {
  bool asleep = true;
  for_each_named_task(NULL, check_asleep, &asleep);
  return asleep;
}

long hc_thread_sleeps(const char* comm) {
  long switches = -1;
  for_each_named_task(comm, read_voluntary_switches, &switches);
  return switches;
}

#ifndef HC_NO_HSA
int hc_call_ok(void* buffer, uint64_t salt) {
  return device_sim_fc_checked_call(buffer, ~0ull, salt, HC_CALL_TIMEOUT_NS);
}

int hc_run_waves(void* buffer, uint32_t waves, uint32_t calls, uint64_t seed, uint64_t timeout_ns,
                 device_sim_waves_result_t* result) {
  void* buffers[1] = {buffer};
  device_sim_waves_config_t config = device_sim_waves_config(buffers, 1, waves, calls, seed, timeout_ns);
  config.check_inactive_lanes = true;
  return device_sim_run_waves(&config, result);
}

void hc_hsa_init(void) {
  hsa_status_t status = hsa_init();
  if (status != HSA_STATUS_SUCCESS) {
    fprintf(stderr, "hsa_init failed: 0x%x\n", (unsigned)status);
    exit(1);
  }
}

static hsa_status_t first_gpu(hsa_agent_t agent, void* data) {
  hsa_device_type_t type;
  if (hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) == HSA_STATUS_SUCCESS &&
      type == HSA_DEVICE_TYPE_GPU) {
    *(uint64_t*)data = agent.handle;
    return HSA_STATUS_INFO_BREAK;
  }
  return HSA_STATUS_SUCCESS;
}

typedef struct {
  uint64_t vram;
  uint64_t group;
} gpu_pools_t;

static hsa_status_t gpu_pools(hsa_amd_memory_pool_t pool, void* data) {
  gpu_pools_t* found = data;
  uint32_t segment = 0, flags = 0;
  hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment);
  hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
  if (segment == HSA_AMD_SEGMENT_GLOBAL && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED) &&
      found->vram == 0) {
    found->vram = pool.handle;
  }
  if (segment == HSA_AMD_SEGMENT_GROUP) found->group = pool.handle;
  return HSA_STATUS_SUCCESS;
}

bool hc_find_gpu_pools(uint64_t* gpu, uint64_t* vram, uint64_t* group) {
  *gpu = 0;
  if (hsa_iterate_agents(first_gpu, gpu) != HSA_STATUS_INFO_BREAK || *gpu == 0) return false;
  gpu_pools_t found = {0, 0};
  hsa_amd_agent_iterate_memory_pools((hsa_agent_t){*gpu}, gpu_pools, &found);
  *vram = found.vram;
  if (group != NULL) *group = found.group;
  return found.vram != 0 && (group == NULL || found.group != 0);
}

static hsa_sim_live_t live_objects(void) {
  hsa_sim_live_t live;
  memset(&live, 0, sizeof(live));
  hsa_sim_get_live(&live);
  return live;
}

uint64_t hc_live_signals(void) { return live_objects().signals; }

uint64_t hc_live_pool_blocks(void) { return live_objects().pool_allocations; }
#endif

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

bool hc_guarded_alloc(hc_guarded_t* out, size_t size, size_t guard_bytes) {
  size_t page = page_size();
  size_t body = (size + page - 1) / page * page;
  size_t guard = (guard_bytes + page - 1) / page * page;
  if (guard == 0) guard = page;
  void* mapping = mmap(NULL, body + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
  if (mapping == MAP_FAILED) return false;
  if (mprotect((char*)mapping + body, guard, PROT_NONE) != 0) {
    munmap(mapping, body + guard);
    return false;
  }
  out->mapping = mapping;
  out->mapping_size = body + guard;
  out->prefix = body - size;
  out->size = size;
  out->buffer = (char*)mapping + out->prefix;
  memset(mapping, 0xA5, out->prefix);
  return true;
}

bool hc_guarded_prefix_intact(const hc_guarded_t* g) {
  const unsigned char* p = (const unsigned char*)g->mapping;
  for (size_t i = 0; i < g->prefix; ++i) {
    if (p[i] != 0xA5) return false;
  }
  return true;
}

void hc_guarded_free(hc_guarded_t* g) {
  if (g->mapping != NULL) munmap(g->mapping, g->mapping_size);
  memset(g, 0, sizeof(*g));
}

int hc_thread_count(void) {
  DIR* dir = opendir("/proc/self/task");
  if (dir == NULL) return -1;
  int count = 0;
  struct dirent* entry;
  while ((entry = readdir(dir)) != NULL) {
    if (entry->d_name[0] != '.') count++;
  }
  closedir(dir);
  return count;
}

int hc_wait_thread_count(int expected, uint32_t timeout_ms) {
  uint64_t end = hc_now_ms() + timeout_ms;
  int count = hc_thread_count();
  while (count != expected && hc_now_ms() < end) {
    hc_sleep_ms(2);
    count = hc_thread_count();
  }
  return count;
}

void hc_child_main(int argc, char** argv, const hc_child_case_t* cases) {
  if (argc < 3 || strcmp(argv[1], "--child") != 0) return;
  for (const hc_child_case_t* c = cases; c->name != NULL; ++c) {
    if (strcmp(c->name, argv[2]) == 0) {
      fflush(NULL);
      exit(c->fn());
    }
  }
  fprintf(stderr, "unknown child case %s\n", argv[2]);
  exit(2);
}

/* Appends a chunk of the child's stderr, keeping what fits. */
static void append_err(hc_child_result_t* result, const char* chunk, size_t n) {
  size_t room = sizeof(result->err) - 1 - result->err_len;
  size_t take = n < room ? n : room;
  memcpy(result->err + result->err_len, chunk, take);
  result->err_len += take;
  result->err[result->err_len] = '\0';
}

/* Reads the child's stderr until EOF, waits for it, kills it at the deadline. */
static void collect(pid_t pid, int fd, uint32_t timeout_ms, uint64_t start,
                    hc_child_result_t* result) {
  uint64_t deadline = start + timeout_ms;
  bool eof = false;
  int status = 0;
  bool reaped = false;
  while (!reaped) {
    uint64_t now = hc_now_ms();
    if (now >= deadline) {
      kill(pid, SIGKILL);
      result->timed_out = true;
      waitpid(pid, &status, 0);
      reaped = true;
      break;
    }
    if (!eof) {
      struct pollfd pfd = {fd, POLLIN, 0};
      int ready = poll(&pfd, 1, (int)((deadline - now) < 20 ? (deadline - now) : 20));
      if (ready > 0) {
        char chunk[4096];
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n > 0) {
          append_err(result, chunk, (size_t)n);
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          eof = true;
        }
      }
    } else {
      /* stderr closed: the child is exiting; look often so reaped_us is close. */
      struct timespec ts = {0, 100 * 1000};
      nanosleep(&ts, NULL);
    }
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      reaped = true;
      result->reaped_us = hc_now_us();
    }
  }
  /* Drain what is left without blocking. */
  for (;;) {
    struct pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, 0) <= 0) break;
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n <= 0) break;
    append_err(result, chunk, (size_t)n);
  }
  close(fd);
  result->elapsed_ms = hc_now_ms() - start;
  if (WIFEXITED(status)) {
    result->exited = true;
    result->exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result->signal = WTERMSIG(status);
  }
}

/* Forks with the child's stderr going to a pipe. Returns the pid (0 in the
 * child, -1 on failure) and, in the parent, the pipe's read end and the start
 * time. */
static pid_t fork_with_stderr_pipe(int* read_fd, uint64_t* start) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  fflush(NULL);
  *start = hc_now_ms();
  pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return -1;
  }
  if (pid == 0) {
    close(pipefd[0]);
    dup2(pipefd[1], 2);
    return 0;
  }
  close(pipefd[1]);
  *read_fd = pipefd[0];
  return pid;
}

bool hc_spawn_child(const char* name, const char* const* env, uint32_t timeout_ms,
                    hc_child_result_t* result) {
  memset(result, 0, sizeof(*result));
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) return false;
  exe[len] = '\0';
  int fd = -1;
  uint64_t start = 0;
  pid_t pid = fork_with_stderr_pipe(&fd, &start);
  if (pid < 0) return false;
  if (pid == 0) {
    for (const char* const* e = env; e != NULL && *e != NULL; ++e) {
      putenv((char*)*e);
    }
    char* args[] = {exe, (char*)"--child", (char*)name, NULL};
    execve(exe, args, environ);
    _exit(127);
  }
  collect(pid, fd, timeout_ms, start, result);
  return true;
}

bool hc_fork_child(hc_child_fn fn, uint32_t timeout_ms, hc_child_result_t* result) {
  memset(result, 0, sizeof(*result));
  int fd = -1;
  uint64_t start = 0;
  pid_t pid = fork_with_stderr_pipe(&fd, &start);
  if (pid < 0) return false;
  if (pid == 0) {
    int code = fn();
    fflush(NULL);
    _exit(code);
  }
  collect(pid, fd, timeout_ms, start, result);
  return true;
}

const char* hc_child_describe(const hc_child_result_t* r) {
  static char text[16384 + 256];
  if (r->timed_out) {
    snprintf(text, sizeof(text), "timed out after %llu ms (killed); stderr: %s",
             (unsigned long long)r->elapsed_ms, r->err);
  } else if (r->exited) {
    snprintf(text, sizeof(text), "exited with %d after %llu ms; stderr: %s", r->exit_code,
             (unsigned long long)r->elapsed_ms, r->err);
  } else {
    snprintf(text, sizeof(text), "killed by signal %d (%s) after %llu ms; stderr: %s", r->signal,
             strsignal(r->signal), (unsigned long long)r->elapsed_ms, r->err);
  }
  return text;
}

bool hc_contains(const char* text, const char* needle) {
  size_t n = strlen(needle);
  for (const char* p = text; *p != '\0'; ++p) {
    if (strncasecmp(p, needle, n) == 0) return true;
  }
  return false;
}

int hc_count_occurrences(const char* text, const char* needle) {
  int count = 0;
  for (const char* p = text; (p = strstr(p, needle)) != NULL; ++p) count++;
  return count;
}

static bool line_has_token(const char* line, size_t len, const char* token) {
  size_t n = strlen(token);
  for (size_t i = 0; i + n <= len; ++i) {
    if (memcmp(line + i, token, n) != 0) continue;
    bool left_ok = i == 0 || !isalnum((unsigned char)line[i - 1]);
    bool right_ok = i + n == len || !isalnum((unsigned char)line[i + n]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

int hc_count_lines_with_id(const char* text, const char* needle, uint64_t id) {
  char token[32];
  snprintf(token, sizeof(token), "%llu", (unsigned long long)id);
  int count = 0;
  const char* line = text;
  while (*line != '\0') {
    const char* end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char copy[1024];
    size_t take = len < sizeof(copy) - 1 ? len : sizeof(copy) - 1;
    memcpy(copy, line, take);
    copy[take] = '\0';
    if (hc_contains(copy, needle) && line_has_token(copy, take, token)) count++;
    if (end == NULL) break;
    line = end + 1;
  }
  return count;
}
