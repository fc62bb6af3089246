/* pinwise preload library: pins the threads of an unmodified program as they are created.
 *
 * `pinwise run` loads this file with LD_PRELOAD and describes the placement in the environment:
 *
 *   PINWISE_PLAN_BY_RANK  in an MPI rank: one plan per rank of MPI_COMM_WORLD, separated by '|'; the
 *                   rank (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID) picks its own,
 *                   which then stands for PINWISE_PLAN, and the log becomes PINWISE_LOG.rankN.
 *   PINWISE_PLAN    slots separated by ';', each a CPU list: "0;2;1,3". Slot k is for the k-th
 *                   thread of the process in creation order, the main thread being thread 0;
 *                   past the last slot the plan wraps round.
 *   PINWISE_REPEAT_FROM  slot R (default 0): past the last slot the plan starts again at slot R,
 *                   not at 0. Programs that create their workers in rounds (create, join, create
 *                   again) use R = 1, so worker j of every round gets worker j's slot and never
 *                   the main thread's.
 *   PINWISE_SKIP    hex mask (likwid-pin's -s): bit i set means the i-th pthread_create call
 *                   (0-based, the main thread not counted) makes a helper thread that takes no
 *                   slot; it may run on any CPU of the plan.
 *   PINWISE_LOG     file to append one line per thread start and end: where it was asked to run,
 *                   where it ran, and when (CLOCK_MONOTONIC, ns). `pinwise run --verify` reads it
 *                   back. Also one line per pthread_create and pthread_join call, from the calling
 *                   thread: `pinwise trace` reads the creator's to find workers created in rounds.
 *   PINWISE_FOLLOW  "1": the processes the program starts take the plan too. A program exec'd
 *                   (by the program, a shell, time, env...) takes the whole plan from slot 0, as
 *                   the first program did; a forked copy that does not exec is a thread of its
 *                   parent's program: it takes the next slot at once, and its own threads the
 *                   slots after (the counters of one program live in a page shared by its forks).
 *                   Otherwise the other processes get PINWISE_ORIGINAL, the affinity before
 *                   pinning, and with a log are only observed.
 *   PINWISE_ORIGINAL the affinity before pinning, as a CPU list (pinwise run narrows the process
 *                   to the plan's CPUs before it starts it; the first process to load us sets it
 *                   when nobody did).
 *   PINWISE_OBSERVE "1" without a plan: pin nothing, only log where the OS ran each thread.
 *   PINWISE_ADAPT   with PINWISE_OBSERVE, under `pinwise run --adapt`: the file pinwise rewrites (by
 *                   rename) after each move, read at each pthread_create and fork (adapt_start): where
 *                   a new thread starts, so that it does not stay on the one CPU of a creator pinwise
 *                   pinned (pinwise/adapt/newcomers.py says why and documents the file).
 *   PINWISE_MEMPOLICY  the memory policy every thread gets (set_mempolicy(2), raw syscall, no
 *                   libnuma), also in OBSERVE mode (pinwise run --omp): "bind:LIST",
 *                   "interleave:LIST", "preferred:NODE", "local", or "per-thread:N=CPUS/N=CPUS..."
 *                   (each thread bound to the node N whose CPUS hold the CPU it runs on once
 *                   pinned). With a log, each thread's end record carries the policy the kernel
 *                   reports for it (/proc/self/task/TID/numa_maps), as `pinwise run --verify` shows.
 *
 * When the main thread is pinned: a runtime sizes itself from the affinity mask when it loads
 * (OpenBLAS counts its threads, libgomp its default team, libomp its full mask, which it later
 * gives every worker), often before main() and sometimes in a library constructor that runs
 * before ours. So the program starts with the whole plan's CPUs as its mask, and its main thread
 * is narrowed to slot 0 only when it starts its first thread or forks, as likwid-pin does. A
 * program that starts neither keeps the whole plan, and says so in the log (slot -2). Threads
 * created before our constructor ran (from another library's constructor) load the plan first.
 *
 * Rules, because this code lives inside somebody else's program: it never aborts or exits its
 * host; an unusable plan gives one message on stderr and the program runs unpinned; it uses no
 * stdio (only snprintf into stack buffers and write(2)); the pthread_create wrapper allocates one
 * small block per thread, as pthread_create itself does. It holds no descriptor between two log
 * records: each record opens the log, appends one line and closes it, so a host that closes every
 * descriptor and opens its own files never receives our lines on a reused number.
 */
#define _GNU_SOURCE
#include "plan.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*join_fn)(pthread_t, void **);

/* What the library does in this process. */
enum { MODE_OFF, MODE_OBSERVE, MODE_PIN };

/* The threads of execution one program started, for numbering and slots: shared by the copies it
   forks (an anonymous MAP_SHARED page survives fork, not exec), so a forked worker and its
   threads never take a slot its parent hands out too. */
struct counters {
    atomic_uint created;           /* pthread_create calls: the skip mask counts these */
    atomic_uint started;           /* threads of execution started (threads and forks); main = 0 */
    atomic_uint next_slot;         /* next slot to hand out; the main thread holds slot 0 */
};

static create_fn real_create;
static join_fn real_join;
/* The last TRACKED threads created, for naming a joined thread in the log: created thread k's
   pthread_t at k % TRACKED, beside k (a program that made more has its older entries replaced;
   a thread joined after TRACKED newer ones were created gets no join record, never another's). */
#define TRACKED 4096
static struct {
    pthread_t id;
    unsigned index;
} created_ids[TRACKED];
static struct pinwise_plan plan;
static int mode;                   /* MODE_OFF until a plan (or PINWISE_OBSERVE) is loaded */
static int follow;                 /* pin the programs started from here too */
static int followed;               /* this process is the one pinwise started, or one it follows */
static char log_path[4096];        /* PINWISE_LOG made absolute; empty: no log */
static char adapt_path[4096];      /* PINWISE_ADAPT; empty: not under `pinwise run --adapt` */
static atomic_uint adapt_made;     /* threads this process made: the sampler's numbers, which count no
                                      forked process (the shared `started` does) */
static uint64_t skip_mask;
static unsigned repeat_from;       /* PINWISE_REPEAT_FROM: where the plan starts again past its end */
static struct counters own_counters, *counters = &own_counters;
static atomic_int main_pinned;     /* the main thread has its slot (it started a thread, or forked) */
static __thread int fork_slot;     /* the slot and number the forking thread reserved for its child */
static __thread unsigned fork_index;
static __thread int fork_unpin;    /* under --adapt: the forked child gets `original` back */
static pthread_key_t exit_key;
static int exit_key_ready;
static cpu_set_t original;         /* the affinity before pinning: for processes we do not follow */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static void load(void);

/* Memory policy (PINWISE_MEMPOLICY): the modes of <linux/mempolicy.h>, without its header. */
enum { MEM_NONE = -1, MEM_PREFERRED = 1, MEM_BIND = 2, MEM_INTERLEAVE = 3, MEM_LOCAL = 4, MEM_PER_THREAD = 100 };
#define MEM_MAX_NODES 1024
#define MEM_WORDS (MEM_MAX_NODES / (8 * sizeof(unsigned long)))
static int mem_mode = MEM_NONE;
static unsigned long mem_mask[MEM_WORDS];
static int mem_nnodes;             /* per-thread: node and CPUs of each NUMA node */
static int mem_node[64];
static cpu_set_t mem_cpus[64];
static void read_memory_policy(pid_t tid, char *out, size_t len);

/* What a new thread needs before it runs user code. */
struct start {
    void *(*routine)(void *);
    void *arg;
    int slot;                      /* -1: a skipped helper thread */
    unsigned index;                /* creation order, main thread = 0 */
    int adapt;                     /* under --adapt: start on `where` if it still has `inherited` */
    cpu_set_t where, inherited;
};

static pid_t current_tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

/* Append one record to the log: open, write, close, so no descriptor of ours outlives the call. */
static void append_log(const char *line, size_t len)
{
    if (!log_path[0])
        return;
    int fd;
    do
        fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return;
    write_all(fd, line, len); /* one write of one short line: O_APPEND keeps concurrent records whole */
    close(fd);
}

/* One message on stderr, once per process: the host's own output stays readable. */
static void warn_once(const char *fmt, ...)
{
    static atomic_int warned;
    if (atomic_exchange(&warned, 1))
        return;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "pinwise: ");
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    write_all(2, buf, (size_t)n);
    if (log_path[0]) {
        char line[600];
        int m = snprintf(line, sizeof line, "error %d %.*s", (int)getpid(), n - 9, buf + 9);
        append_log(line, (size_t)m);
    }
}

static long long now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

/* start PID TID INDEX SLOT ERRNO CPU REQUESTED NS: thread TID (creation order INDEX) has slot SLOT
   (-1: a skipped helper, -2: the main thread of a program that started no thread, left on the
   whole plan) and ran on CPU right after */
static void log_start(pid_t tid, int cpu, unsigned index, int slot, int error)
{
    if (!log_path[0])
        return;
    char cpus[256];
    pinwise_cpulist_format(slot >= 0 ? &plan.slots[slot] : &plan.all, cpus, sizeof cpus);
    char line[384];
    int n = snprintf(line, sizeof line, "start %d %d %u %d %d %d %s %lld\n", (int)getpid(), (int)tid, index, slot,
                     error, cpu, cpus, now_ns());
    append_log(line, (size_t)n);
}

/* end PID TID CPU NS [MEMPOLICY]: the CPU the thread last ran on, when it ended, and (with a
   memory policy asked for) the policy the kernel reports for it */
static void log_end(pid_t tid, int cpu)
{
    if (!log_path[0])
        return;
    char line[256], policy[96] = "";
    if (mem_mode != MEM_NONE) {
        policy[0] = ' ';
        read_memory_policy(tid, policy + 1, sizeof policy - 1);
    }
    int n = snprintf(line, sizeof line, "end %d %d %d %lld%s\n", (int)getpid(), (int)tid, cpu, now_ns(), policy);
    append_log(line, (size_t)n);
}

/* create|join PID TID INDEX NS: the calling thread created (joined) thread INDEX. A thread's own
   records are in its program order, so the creator's show its rounds: create 4, join 4, ... */
static void log_spawn(const char *kind, unsigned index)
{
    if (!log_path[0])
        return;
    char line[128];
    int n = snprintf(line, sizeof line, "%s %d %d %u %lld\n", kind, (int)getpid(), (int)current_tid(), index,
                     now_ns());
    append_log(line, (size_t)n);
}

/* The first len - 1 bytes of a /proc file, NUL-terminated, with one read(2). Returns 0, or -1. */
static int read_head(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

/* Set the calling thread's memory policy as PINWISE_MEMPOLICY asks (after it is pinned). */
static void apply_memory_policy(void)
{
    if (mem_mode == MEM_NONE)
        return;
    int mode = mem_mode;
    unsigned long one[MEM_WORDS];
    const unsigned long *mask = mem_mask;
    if (mode == MEM_PER_THREAD) {
        int cpu = sched_getcpu(), node = -1;
        for (int i = 0; i < mem_nnodes && cpu >= 0; i++)
            if (CPU_ISSET(cpu, &mem_cpus[i]))
                node = mem_node[i];
        if (node < 0) {
            warn_once("CPU %d is in no NUMA node of the memory plan; its thread keeps the default memory policy", cpu);
            return;
        }
        memset(one, 0, sizeof one);
        one[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
        mask = one;
        mode = MEM_BIND;
    }
    long rc = mode == MEM_LOCAL ? syscall(SYS_set_mempolicy, mode, NULL, 0UL)
                                : syscall(SYS_set_mempolicy, mode, mask, (unsigned long)MEM_MAX_NODES + 1);
    if (rc != 0)
        warn_once("cannot set the memory policy (%s); threads keep the default policy", strerror(errno));
}

/* The memory policy the kernel reports for thread TID: the second word of the first line of its
   numa_maps ("bind:0", "interleave:0-1", "prefer:0", "local", "default"), or "-". */
static void read_memory_policy(pid_t tid, char *out, size_t len)
{
    char path[64], buf[512];
    snprintf(out, len, "-");
    snprintf(path, sizeof path, "/proc/self/task/%d/numa_maps", (int)tid);
    if (read_head(path, buf, sizeof buf) != 0)
        return;
    char *word = strchr(buf, ' ');
    if (word == NULL)
        return;
    word++;
    size_t k = strcspn(word, " \n");
    if (k > 0 && k < len)
        snprintf(out, len, "%.*s", (int)k, word);
}

/* Read PINWISE_MEMPOLICY. Returns 0, or -1 after one message (the program then runs unpinned). */
static int parse_memory_policy(const char *text)
{
    cpu_set_t set;
    const char *colon = strchr(text, ':');
    const char *rest = colon ? colon + 1 : "";
    size_t head = colon ? (size_t)(colon - text) : strlen(text);
    if (head == 5 && strncmp(text, "local", 5) == 0 && !colon) {
        mem_mode = MEM_LOCAL;
        return 0;
    }
    if (head == 10 && strncmp(text, "per-thread", 10) == 0) {
        for (const char *item = rest; *item && mem_nnodes < 64;) {
            const char *stop = strchr(item, '/');
            const char *end = stop ? stop : item + strlen(item);
            char *equal;
            long node = strtol(item, &equal, 10);
            if (equal == item || *equal != '=' || node < 0 || node >= MEM_MAX_NODES ||
                pinwise_cpulist_parse(equal + 1, end, &mem_cpus[mem_nnodes]) != 0)
                goto bad;
            mem_node[mem_nnodes++] = (int)node;
            item = stop ? stop + 1 : end;
        }
        if (mem_nnodes == 0)
            goto bad;
        mem_mode = MEM_PER_THREAD;
        return 0;
    }
    int mode = (head == 4 && strncmp(text, "bind", 4) == 0) ? MEM_BIND
             : (head == 10 && strncmp(text, "interleave", 10) == 0) ? MEM_INTERLEAVE
             : (head == 9 && strncmp(text, "preferred", 9) == 0) ? MEM_PREFERRED : MEM_NONE;
    if (mode == MEM_NONE || pinwise_cpulist_parse(rest, rest + strlen(rest), &set) != 0 || CPU_COUNT(&set) == 0)
        goto bad;
    for (int node = 0; node < CPU_SETSIZE; node++) {
        if (!CPU_ISSET(node, &set))
            continue;
        if (node >= MEM_MAX_NODES || (mode == MEM_PREFERRED && CPU_COUNT(&set) != 1))
            goto bad;
        mem_mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    }
    mem_mode = mode;
    return 0;
bad:
    warn_once("unusable PINWISE_MEMPOLICY=%s (want bind:LIST, interleave:LIST, preferred:NODE, local or "
              "per-thread:N=CPUS/...); the program runs unpinned", text);
    return -1;
}

static int pin_calling_thread(int slot)
{
    const cpu_set_t *set = slot >= 0 ? &plan.slots[slot] : &plan.all;
    if (mode != MODE_PIN) {
        apply_memory_policy();
        return 0;
    }
    if (sched_setaffinity(0, sizeof(cpu_set_t), set) != 0) {
        int error = errno;
        char cpus[128];
        pinwise_cpulist_format(set, cpus, sizeof cpus);
        warn_once("cannot pin thread to CPUs %s (%s); it runs where the OS puts it", cpus, strerror(error));
        apply_memory_policy();
        return error;
    }
    apply_memory_policy();
    return 0;
}

/* Field 39 of /proc/self/task/TID/stat: the CPU thread TID last ran on, or -1. */
static int last_cpu_of(pid_t tid)
{
    char path[64], stat[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    if (read_head(path, stat, sizeof stat) != 0)
        return -1;
    /* Fields counted after the ')' that closes the command name, which may hold spaces. */
    int field = 2;
    for (char *p = strrchr(stat, ')'); p && *p; p++)
        if (*p == ' ' && ++field == 39)
            return atoi(p + 1);
    return -1;
}

/* process PID PPID HOW FOLLOWED NAME: this process loaded the library, as a new program (HOW
   exec) or as a forked copy of its parent (fork); FOLLOWED 1 when the plan is for it (it is the
   program pinwise started, or one it follows), 0 when it is only observed. NAME (its comm,
   spaces kept) ends the line. */
static void log_process(const char *how)
{
    if (!log_path[0])
        return;
    char name[64] = "?", line[160];
    if (read_head("/proc/self/comm", name, sizeof name) == 0)
        name[strcspn(name, "\n")] = '\0';
    int n = snprintf(line, sizeof line, "process %d %d %s %d %s\n", (int)getpid(), (int)getppid(), how, followed,
                     name);
    append_log(line, (size_t)n);
}

/* The unsigned number at *p (below end), stepping past it; -1 when there is none. */
static long next_number(const char **p, const char *end)
{
    while (*p < end && **p == ' ')
        (*p)++;
    if (*p >= end || **p < '0' || **p > '9')
        return -1;
    long value = 0;
    for (; *p < end && **p >= '0' && **p <= '9' && value < 1000000000L; (*p)++)
        value = value * 10 + (**p - '0');
    return value;
}

/* PINWISE_ADAPT's file, as pinwise wrote it (format in adapt_start): whether thread SELF is among
   the pinned, and the slots line's FIRST, COUNT and LIST (list NULL when there is none). */
struct adapt_file {
    int self_pinned;
    long first, count;
    const char *list, *list_end;
};

static void read_adapt_file(const char *text, const char *end, long self, struct adapt_file *file)
{
    *file = (struct adapt_file){0, -1, -1, NULL, NULL};
    for (const char *line = text; line < end;) {
        const char *stop = memchr(line, '\n', (size_t)(end - line));
        if (stop == NULL)
            stop = end;
        const char *p = line;
        if (stop - line > 7 && memcmp(line, "pinned ", 7) == 0) {
            p += 7;
            for (long tid; !file->self_pinned && (tid = next_number(&p, stop)) >= 0;)
                file->self_pinned = tid == self;
        } else if (stop - line > 6 && memcmp(line, "slots ", 6) == 0) {
            p += 6;
            file->first = next_number(&p, stop);
            file->count = next_number(&p, stop);
            if (p < stop && *p == ' ' && file->first >= 0 && file->count > 0)
                file->list = p + 1, file->list_end = stop;
        }
        line = stop + 1;
    }
}

/* The J-th CPU list of "0;1;-;2,3" into *set; 0, or -1 for "-" (every allowed CPU) or none. */
static int slot_field(const char *list, const char *list_end, unsigned long j, cpu_set_t *set)
{
    const char *field = list;
    for (; j > 0 && field != NULL; j--) {
        field = memchr(field, ';', (size_t)(list_end - field));
        field = field != NULL ? field + 1 : NULL;
    }
    if (field == NULL)
        return -1;
    const char *field_end = memchr(field, ';', (size_t)(list_end - field));
    if (field_end == NULL)
        field_end = list_end;
    if ((field_end - field == 1 && *field == '-') || pinwise_cpulist_parse(field, field_end, set) != 0 ||
        CPU_COUNT(set) == 0)
        return -1;
    return 0;
}

/* Under `pinwise run --adapt`: whether the thread of creation order INDEX the calling thread is
   making (or, with FORKED, the process it forks) should start elsewhere than on the caller's
   affinity, which it would inherit (written to *inherited), and where (*where). The file
   (PINWISE_ADAPT, replaced whole by pinwise; pinwise/adapt/newcomers.py):
       pinned TID...            threads pinwise pinned
       slots FIRST COUNT LIST   thread FIRST + j starts on the j-th of COUNT CPU lists ("0;1;-", "-":
                                every allowed CPU), a later one on the ((INDEX - FIRST) % COUNT)-th
   A caller the program (or its user) pinned, neither pinwise nor on every allowed CPU, keeps its
   threads; a thread with no slot starts on every allowed CPU when pinwise pinned its creator, and
   a forked process gets them back then (--adapt places threads, not processes). No file (no move
   yet), nothing changes. The file is mapped, not read into a buffer: no allocation, any size.
   (A process started with posix_spawn or vfork passes no fork handler, and keeps its creator's.) */
static int adapt_start(unsigned index, int forked, cpu_set_t *where, cpu_set_t *inherited)
{
    if (!adapt_path[0] || sched_getaffinity(0, sizeof *inherited, inherited) != 0)
        return 0;
    int fd = open(adapt_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat info;
    const char *text = MAP_FAILED;
    if (fstat(fd, &info) == 0 && info.st_size > 0)
        text = mmap(NULL, (size_t)info.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (text == MAP_FAILED)
        return 0;
    struct adapt_file file;
    read_adapt_file(text, text + info.st_size, (long)current_tid(), &file);
    cpu_set_t common;
    CPU_AND(&common, inherited, &original);
    int elsewhere = 0;
    if (file.self_pinned || CPU_EQUAL(&common, &original)) { /* pinwise's, or the OS's to place */
        if (!forked && file.list != NULL && index >= (unsigned long)file.first &&
            slot_field(file.list, file.list_end, (index - (unsigned long)file.first) % (unsigned long)file.count,
                       where) == 0)
            elsewhere = !CPU_EQUAL(where, inherited);
        else if (file.self_pinned) {
            *where = original;
            elsewhere = !CPU_EQUAL(where, inherited);
        }
    }
    munmap((void *)text, (size_t)info.st_size);
    return elsewhere;
}

/* The next slot of this program's plan: past the last one it starts again at slot repeat_from. */
static int take_slot(void)
{
    unsigned next = atomic_fetch_add(&counters->next_slot, 1), n = (unsigned)plan.nslots;
    return (int)(next < n ? next : repeat_from + (next - repeat_from) % (n - repeat_from));
}

/* Give the main thread slot 0, once: the program is starting its first thread or fork, so its
   runtimes have sized themselves from the whole plan. The caller is the main thread, except in a
   program that makes threads without pthread_create (they never pass here) and then calls it. */
static void pin_main_thread(void)
{
    if (mode != MODE_PIN || atomic_exchange(&main_pinned, 1))
        return;
    pid_t main_tid = getpid();
    if (current_tid() == main_tid) {
        int error = pin_calling_thread(0);
        log_start(main_tid, sched_getcpu(), 0, 0, error);
        return;
    }
    int error = sched_setaffinity(main_tid, sizeof(cpu_set_t), &plan.slots[0]) == 0 ? 0 : errno;
    log_start(main_tid, last_cpu_of(main_tid), 0, 0, error);
}

static void thread_ended(void *value)
{
    (void)value;
    log_end(current_tid(), sched_getcpu());
}

static void *trampoline(void *p)
{
    struct start start = *(struct start *)p;
    free(p);
    int error = pin_calling_thread(start.slot);
    cpu_set_t now;
    if (start.adapt && sched_getaffinity(0, sizeof now, &now) == 0 && CPU_EQUAL(&now, &start.inherited))
        sched_setaffinity(0, sizeof start.where, &start.where); /* not one the program set at creation */
    if (exit_key_ready)
        pthread_setspecific(exit_key, (void *)1);
    log_start(current_tid(), sched_getcpu(), start.index, start.slot, error);
    return start.routine(start.arg);
}

__attribute__((visibility("default"))) int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                                                          void *(*routine)(void *), void *arg)
{
    /* A library constructor that runs before ours may start threads: load the plan first. */
    pthread_once(&load_once, load);
    if (real_create == NULL)
        real_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (real_create == NULL) /* cannot happen with a working libc; never crash the host */
        return EAGAIN;
    if (mode == MODE_OFF)
        return real_create(thread, attr, routine, arg);
    pin_main_thread();
    unsigned call = atomic_fetch_add(&counters->created, 1);
    int slot = call < 64 && ((skip_mask >> call) & 1) ? -1 : take_slot();
    struct start *start = malloc(sizeof *start);
    if (start == NULL)
        return real_create(thread, attr, routine, arg);
    start->routine = routine;
    start->arg = arg;
    start->slot = slot;
    unsigned index = start->index = atomic_fetch_add(&counters->started, 1);
    start->adapt = mode == MODE_OBSERVE && adapt_path[0] &&
                   adapt_start(1 + atomic_fetch_add(&adapt_made, 1), 0, &start->where, &start->inherited);
    int rc = real_create(thread, attr, trampoline, start); /* from here the new thread owns start */
    if (rc != 0) {
        free(start);
        return rc;
    }
    created_ids[index % TRACKED].id = *thread;
    created_ids[index % TRACKED].index = index;
    log_spawn("create", index);
    return 0;
}

__attribute__((visibility("default"))) int pthread_join(pthread_t thread, void **value)
{
    if (real_join == NULL)
        real_join = (join_fn)dlsym(RTLD_NEXT, "pthread_join");
    if (real_join == NULL) /* cannot happen with a working libc; never crash the host */
        return EINVAL;
    int rc = real_join(thread, value);
    if (rc != 0 || mode == MODE_OFF || !log_path[0])
        return rc;
    /* The newest thread with this pthread_t: an id is reused only after its last owner ended. */
    unsigned top = atomic_load(&counters->started);
    for (unsigned k = top - 1; k >= 1 && top - k <= TRACKED; k--) {
        if (created_ids[k % TRACKED].index == k && pthread_equal(created_ids[k % TRACKED].id, thread)) {
            log_spawn("join", k);
            break;
        }
    }
    return rc;
}

/* exec PID NAME before this process execs program NAME (its file name), and noexec PID when the
   exec failed: a program that then logs no `process` record under PID did not load the library
   (statically linked, set-user-ID, or started without LD_PRELOAD), and its threads went unseen. */
typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
/* Looked up when the library loads: a vfork child, which shares its parent's memory, must not. */
static execve_fn real_execve;
static execv_fn real_execv, real_execvp;

static void log_exec(const char *kind, const char *path)
{
    if (mode == MODE_OFF || !log_path[0])
        return;
    const char *name = path != NULL ? strrchr(path, '/') : NULL;
    name = name != NULL ? name + 1 : path != NULL ? path : "?";
    char line[160];
    int n = snprintf(line, sizeof line, "%s %d ", kind, (int)getpid());
    for (; *name && n < (int)sizeof line - 2; name++) /* one word: blanks become '_' */
        line[n++] = *name == ' ' || *name == '\n' || *name == '\t' ? '_' : *name;
    line[n++] = '\n';
    append_log(line, (size_t)n);
}

__attribute__((visibility("default"))) int execve(const char *path, char *const argv[], char *const envp[])
{
    if (real_execve == NULL) /* called from a library constructor that runs before ours */
        pthread_once(&load_once, load);
    if (real_execve == NULL) { /* cannot happen with a working libc; never crash the host */
        errno = ENOSYS;
        return -1;
    }
    log_exec("exec", path);
    int rc = real_execve(path, argv, envp);
    int error = errno;
    log_exec("noexec", path);
    errno = error;
    return rc;
}

/* execv and execvp reach execve inside libc, where ours is not called: each is wrapped too. */
static int wrapped_execv(execv_fn *which, const char *path, char *const argv[])
{
    if (*which == NULL) /* called from a library constructor that runs before ours */
        pthread_once(&load_once, load);
    execv_fn real = *which;
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    log_exec("exec", path);
    int rc = real(path, argv);
    int error = errno;
    log_exec("noexec", path);
    errno = error;
    return rc;
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[])
{
    return wrapped_execv(&real_execv, path, argv);
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[])
{
    return wrapped_execv(&real_execvp, file, argv);
}

/* Threads still alive at exit (the main thread among them): read where they last ran. */
static void log_live_threads(void)
{
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL)
        return;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
            continue;
        pid_t tid = (pid_t)atoi(entry->d_name);
        log_end(tid, last_cpu_of(tid));
    }
    closedir(dir);
}

/* A new program (the first, or one exec'd): its counters, and the plan from slot 0. Pinned, it
   keeps the whole plan's CPUs until its main thread starts a thread or forks. */
static void start_program(void)
{
    void *page = mmap(NULL, sizeof(struct counters), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page != MAP_FAILED)
        counters = page; /* else forked copies count on their own, as threads of a new program would */
    atomic_store(&counters->created, 0);
    atomic_store(&counters->started, 1);
    atomic_store(&counters->next_slot, 1);
    log_process("exec");
    if (mode != MODE_PIN) {
        atomic_store(&main_pinned, 1);
        apply_memory_policy();
        log_start(current_tid(), sched_getcpu(), 0, 0, 0);
        return;
    }
    atomic_store(&main_pinned, 0);
    if (sched_setaffinity(0, sizeof(cpu_set_t), &plan.all) != 0) {
        char cpus[128];
        pinwise_cpulist_format(&plan.all, cpus, sizeof cpus);
        warn_once("cannot give the program the plan's CPUs %s (%s)", cpus, strerror(errno));
    }
    if (mem_mode != MEM_PER_THREAD) /* per thread: once the thread is on its slot's CPU */
        apply_memory_policy();
}

/* Before fork, in the forking thread: the child is a thread of execution of this program, so the
   main thread gets its slot now (as when it starts a thread), and the child the next one. */
static void before_fork(void)
{
    if (mode == MODE_OFF)
        return;
    pin_main_thread();
    fork_slot = take_slot();
    fork_index = atomic_fetch_add(&counters->started, 1);
    cpu_set_t where, inherited;
    fork_unpin = mode == MODE_OBSERVE && adapt_start(fork_index, 1, &where, &inherited);
}

static void after_fork_in_child(void)
{
    if (mode == MODE_OFF)
        return;
    if (!follow)
        followed = 0;
    if (mode == MODE_PIN && !follow) {
        mode = log_path[0] ? MODE_OBSERVE : MODE_OFF;
        sched_setaffinity(0, sizeof(cpu_set_t), &original);
        plan.all = original; /* what an observed thread was "asked": the affinity it has */
        plan.slots = &plan.all;
        plan.nslots = 1;
        repeat_from = 0;
        fork_slot = 0;
    }
    atomic_store(&main_pinned, 1);
    log_process("fork");
    if (fork_unpin)
        sched_setaffinity(0, sizeof(cpu_set_t), &original);
    adapt_path[0] = '\0'; /* a forked process's threads are not placed either */
    if (mode == MODE_OFF)
        return;
    int error = pin_calling_thread(fork_slot);
    log_start(current_tid(), sched_getcpu(), fork_index, fork_slot, error);
}

/* An MPI rank's own plan out of PINWISE_PLAN_BY_RANK ("plan of rank 0|plan of rank 1|..."),
   the rank read from the launcher's variables; NULL when this process is no rank of it. */
static const char *plan_of_rank(const char *by_rank, char *out, size_t size, long *rank_out)
{
    static const char *const rank_variables[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    const char *rank_text = NULL;
    for (size_t i = 0; i < sizeof rank_variables / sizeof *rank_variables && rank_text == NULL; i++)
        rank_text = getenv(rank_variables[i]);
    if (rank_text == NULL)
        return NULL;
    char *end = NULL;
    long rank = strtol(rank_text, &end, 10);
    if (end == rank_text || rank < 0)
        return NULL;
    const char *field = by_rank;
    for (long r = 0; r < rank && field != NULL; r++) {
        field = strchr(field, '|');
        if (field != NULL)
            field++;
    }
    if (field == NULL)
        return NULL;
    size_t len = strcspn(field, "|");
    if (len == 0 || len >= size)
        return NULL;
    memcpy(out, field, len);
    out[len] = '\0';
    *rank_out = rank;
    return out;
}

/* PINWISE_LOG, made absolute now: the host may change its working directory before its threads
   start. An MPI rank logs to LOG.rankN. */
static void read_log_path(long rank)
{
    const char *log_text = getenv("PINWISE_LOG");
    if (log_text == NULL || !*log_text)
        return;
    size_t used = 0, len = strlen(log_text);
    if (log_text[0] != '/' && getcwd(log_path, sizeof log_path) != NULL) {
        used = strlen(log_path);
        log_path[used++] = '/';
    }
    if (used + len < sizeof log_path && (used > 0 || log_text[0] == '/'))
        memcpy(log_path + used, log_text, len + 1);
    else
        log_path[0] = '\0'; /* a path longer than PATH_MAX: no log rather than a wrong file */
    if (rank >= 0 && log_path[0]) {
        size_t at = strlen(log_path);
        if ((size_t)snprintf(log_path + at, sizeof log_path - at, ".rank%ld", rank) >= sizeof log_path - at)
            log_path[0] = '\0';
    }
}

/* PINWISE_REPEAT_FROM and PINWISE_SKIP. Returns 0, or -1 after one message. */
static int read_plan_options(void)
{
    const char *repeat_text = getenv("PINWISE_REPEAT_FROM");
    if (repeat_text != NULL && *repeat_text) {
        char *end;
        errno = 0;
        unsigned long value = strtoul(repeat_text, &end, 10);
        if (errno != 0 || *end != '\0' || value >= (unsigned long)plan.nslots) {
            warn_once("unusable PINWISE_REPEAT_FROM=%s (want a slot below %d); the program runs unpinned", repeat_text,
                      plan.nslots);
            return -1;
        }
        repeat_from = (unsigned)value;
    }
    const char *skip_text = getenv("PINWISE_SKIP");
    if (skip_text != NULL && *skip_text) {
        char *end;
        errno = 0;
        skip_mask = strtoull(skip_text, &end, 16);
        if (errno != 0 || *end != '\0') {
            warn_once("unusable skip mask PINWISE_SKIP=%s (want hex, at most 64 bits); the program runs unpinned",
                      skip_text);
            return -1;
        }
    }
    return 0;
}

/* The functions we wrap, as the next object in the search order defines them. */
static void find_real_functions(void)
{
    real_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    real_execve = (execve_fn)dlsym(RTLD_NEXT, "execve");
    real_execv = (execv_fn)dlsym(RTLD_NEXT, "execv");
    real_execvp = (execv_fn)dlsym(RTLD_NEXT, "execvp");
}

/* The first process to load us owns the plan; without PINWISE_FOLLOW the programs started
   from it get the original affinity back, and are only observed. Sets `original` and `followed`. */
static void claim_or_inherit_plan(void)
{
    char own_pid[24];
    snprintf(own_pid, sizeof own_pid, "%d", (int)getpid());
    const char *owner = getenv("PINWISE_OWNER");
    const char *original_text = getenv("PINWISE_ORIGINAL");
    if (original_text == NULL ||
        pinwise_cpulist_parse(original_text, original_text + strlen(original_text), &original) != 0)
        sched_getaffinity(0, sizeof(cpu_set_t), &original);
    if (owner == NULL) {
        char cpus[1024];
        pinwise_cpulist_format(&original, cpus, sizeof cpus);
        setenv("PINWISE_OWNER", own_pid, 1);
        setenv("PINWISE_ORIGINAL", cpus, 1);
    }
    followed = owner == NULL || strcmp(owner, own_pid) == 0 || follow;
}

/* The plan this process pins by (`text`), or, observing, the whole original affinity as one
   slot; 0 when there is one, -1 (said once) when the program runs unpinned. */
static int take_plan(const char *text, int observe)
{
    const char *memory_text = getenv("PINWISE_MEMPOLICY");
    if (followed && memory_text != NULL && *memory_text && parse_memory_policy(memory_text) != 0)
        return -1;
    char err[160];
    if (observe) { /* no plan: record where the OS puts each thread (policy "os") */
        plan.slots = &plan.all;
        plan.nslots = 1;
        plan.all = original;
    } else if (pinwise_plan_parse(text, &plan, err, sizeof err) != 0) {
        warn_once("unusable plan: %s; the program runs unpinned", err);
        return -1;
    } else if (read_plan_options() != 0) {
        return -1;
    }
    return 0;
}

/* Read the environment once per program image: from our constructor, or earlier from the first
   pthread_create if another library's constructor starts threads before ours runs. */
static void load(void)
{
    find_real_functions();
    const char *text = getenv("PINWISE_PLAN");
    static char rank_plan[8192];
    long rank = -1;
    const char *by_rank = getenv("PINWISE_PLAN_BY_RANK");
    if (by_rank != NULL)
        text = plan_of_rank(by_rank, rank_plan, sizeof rank_plan, &rank);
    const char *observe_text = getenv("PINWISE_OBSERVE");
    int observe = observe_text != NULL && strcmp(observe_text, "1") == 0;
    if (text == NULL && !observe)
        return;
    const char *follow_text = getenv("PINWISE_FOLLOW");
    follow = follow_text != NULL && strcmp(follow_text, "1") == 0;
    claim_or_inherit_plan();
    read_log_path(rank);
    /* only the program pinwise started: the threads of the processes it starts are not placed */
    const char *adapt_text = getenv("PINWISE_ADAPT"), *owner = getenv("PINWISE_OWNER");
    if (observe && adapt_text != NULL && adapt_text[0] == '/' && strlen(adapt_text) < sizeof adapt_path &&
        owner != NULL && atoi(owner) == (int)getpid())
        memcpy(adapt_path, adapt_text, strlen(adapt_text) + 1);
    if (!followed) {
        sched_setaffinity(0, sizeof(cpu_set_t), &original);
        if (!log_path[0])
            return;
        observe = 1;
    }
    if (take_plan(text, observe) != 0)
        return;
    mode = observe ? MODE_OBSERVE : MODE_PIN;
    exit_key_ready = pthread_key_create(&exit_key, thread_ended) == 0;
    pthread_atfork(before_fork, NULL, after_fork_in_child);
    start_program();
}

__attribute__((constructor)) static void pinwise_init(void)
{
    pthread_once(&load_once, load);
}

/* At exit: where the live threads last ran, and the main thread of a program that started no
   thread, left on the whole plan (slot -2). */
__attribute__((destructor)) static void pinwise_fini(void)
{
    if (mode == MODE_OFF)
        return;
    if (mode == MODE_PIN && !atomic_exchange(&main_pinned, 1))
        log_start(getpid(), last_cpu_of(getpid()), 0, -2, 0);
    log_live_threads();
}
