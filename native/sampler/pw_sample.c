/* pinwise-sample: who talks to whom, measured outside the program at its own speed.
 *
 *   pinwise-sample --out FILE [options] -- PROGRAM ARGS...     start PROGRAM and sample it
 *   pinwise-sample --out FILE --pid PID [options]              attach to a running process
 *
 * `pinwise trace --backend sample` runs it; its output is read by pinwise.sample. The method is
 * ComDetective's (Sasongko et al., SC'19) without a PMU:
 *
 * 1. Address samples. Every thread of the program is sampled on the software clock (cpu-clock,
 *    every --period-us of CPU time it runs, user mode only), each sample with the instruction
 *    pointer and the general registers. The decoder (decode.c) computes the address the sampled
 *    instruction (or the one just before it) touches. Stack, thread-local and read-only
 *    addresses are skipped and counted.
 * 2. Watchpoints. A sample of thread A at address X is offered to one other thread B (point 3
 *    says which): B gets a hardware watchpoint on X's 8-byte word (perf's PERF_TYPE_BREAKPOINT, opened
 *    from this process on B's thread id: read/write when A wrote X or --sharing any, write-only
 *    otherwise). If B touches the word within --window-ms, the watchpoint traps once and
 *    disables itself (PERF_EVENT_IOC_REFRESH 1): one A<->B communication event on X's line.
 *    A thread has 4 debug registers: a new offer takes a free one, or replaces an armed one with
 *    reservoir sampling (the k-th offer since the thread's watchpoints filled wins one of them
 *    with probability 4/k), so every sample has the same chance to be watched. A token bucket
 *    bounds the watchpoints armed per second (--arms-per-s) and so the traps.
 * 3. The estimate. The watched samples of A are a random subset of A's samples, whichever thread
 *    they are offered to, so the share of A's samples that B touched within the window is
 *    estimated by hits(A,B) / armed(A,B), and the events by A's address samples times that share:
 *    M[A][B] = M[B][A] = N(A) hits(A,B) / armed(A,B) + N(B) hits(B,A) / armed(B,A), as the Valgrind
 *    tracer adds an event to both. Because the estimate divides by the arms each pair got, where
 *    the offers go changes only its variance: they go to a thread drawn from a mixture (uniform,
 *    by the hits A's samples had with each lately, by the bulletin board of recent samples on the same
 *    line), and samples on lines or of instructions whose watchpoints never trapped are watched
 *    less often; each hit weighs 1 / its chance (Horvitz-Thompson, importance sampling). Hits are
 *    also kept per time block, for a bootstrap of how sure the pattern is, and per line for the
 *    lines that carried the events (spin-waits, false sharing).
 *
 * Threads are numbered in creation order, main = 0, as pinwise run and the Valgrind tracer
 * number them. Started programs are followed with per-CPU inherited events (every thread and
 * child process from exec on, creation order from the kernel's fork records); on attach, each
 * existing thread gets its own events, numbered by start time, and new threads are opened as
 * their fork records arrive. Samples of child processes are counted, not measured.
 *
 * With --stream FILE (replaced), a window record is appended every --interval-ms while it runs (emit_window):
 * what `pinwise run --adapt` places the threads by. Until two intervals have passed the windows
 * are a quarter of the interval (never under 10 ms), so that a program is placed soon after it
 * starts, not a whole interval later: a contending pair runs half as fast until then. With
 * --notify-fd N a byte is written to descriptor N (a pipe: never waited on) after each record,
 * so that the reader wakes when one is there instead of polling the file; with --notify-idle-ms M,
 * only after a record that holds watchpoint hits (or, while the reader says the placement holds,
 * meetings) or a thread born or ended since the last byte, or M ms after the last byte (a reader
 * that has nothing to judge in the others is not woken: each wake-up of pinwise's takes CPU time
 * from the program on a machine it fills). With --control-fd N
 * the reader steers the watchpoints' budget (--traps-per-s) through descriptor N (a pipe it writes):
 * a byte 's' (steady: its placement holds) arms at STEADY_SHARE of it, a byte 'w' (watch) at all
 * of it, a byte 'b' (burst: the placement looks stale) at BURST_SHARE times it for BURST_NS and then
 * at all of it, from the next offer on; each watchpoint costs the program (module comment of arm_rate).
 * A byte 'q' (quit: the reader stopped adapting, pinwise.adapt.limits.MAX_THREADS_FOLLOWED) ends the
 * sampling and the stream as --duration does: every event closed, the program left to finish.
 *
 * Output (--out FILE, written at the end through FILE.tmp): key value lines, "matrix-sparse N" and
 * N "a b value" lines (the entries that are not 0, a < b: a program that made thousands of threads
 * in rounds has a few per thread, where a T x T table would have millions of zeros), "hot-lines K"
 * records as the Valgrind tool writes them (pw_main.c), "blocks N NS FIRST" (FIRST: ns from the start
 * of sampling to the first block's, which begins at the first event) and N "block a b hits ..." lines. Every count per pair of threads is kept only for the pairs that have one (tally.c).
 * --status FILE is rewritten every second while it runs.
 *
 * Exit status: 0 (the result is written), 2 usage, 3 perf_event_open refused, 4 no such process,
 * 5 any other failure; one line on stderr (or in --error-file) says why.
 *
 * Limitations: a watchpoint covers 8 bytes of the 64-byte line (sharing of other words of the
 * line is seen only when one of them is sampled); a thread that a debugger or the program itself
 * gives debug registers gets fewer watchpoints; samples landing in the kernel are not taken. The
 * clock samples an instruction in proportion to the time it takes, where a PMU's memory samples
 * (ComDetective's) count accesses: an access to a line another core wrote last takes longer, and
 * is sampled more often, than one to a line written on the same CPU, so threads that share a CPU
 * are seen to talk less than threads apart (4 threads on 2 CPUs, all-to-all: 0.22-0.34 of the
 * events, every watched shared word trapping in both).
 */
#define _GNU_SOURCE
#include "decode.h"
#include "tally.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 4                  /* debug registers per thread */
#define RING_PAGES 16            /* data pages of each sampling buffer */
#define POLL_MS 5                /* how often the buffers are read */
#define QUIET_POLL_MS 20         /* ... while quiet (quiet_poll_ms) */
#define MAX_CPUS 4096
#define HOT_LINES 32
/* Per-task mode only (an unprivileged user; system-wide mode carries no event on the program's
   threads between watchpoints, and a watchpoint's debug registers cost little per switch):
   a thread scheduled in more often than this per second (a yielding spin-wait) gets no watchpoint.
   The first event opened on one thread of a process unclones that thread's perf context from its
   siblings' for good, and each of its context switches then reloads its sampling events (timer
   reprogramming: VM exits in a guest) instead of swapping a pointer: a yielding spin barrier whose
   threads switched 15,000 times a second ran 6x slower after 50 watchpoints, long closed. So a
   thread is watched only once its own rate is known to be low, or, before its first readings,
   while every thread of the process measured so far switches at most half as often (a new worker
   of a pool that sleeps in its queue is watched at once; one of a spinning team waits to be
   measured); and no thread is watched in the first TEAM_SETTLE_NS after the process has a second
   thread, while the team's rates are not known yet. A thread not watched has its sharing seen
   only from its own samples, and the output names it. */
#define TEAM_SETTLE_NS 300000000ULL
#define SWITCH_LIMIT 2000.0     /* --switch-limit changes it (for measurements) */
#define SWITCHES_EVERY_NS 100000000ULL
/* System-wide mode: a watchpoint armed on a thread costs it about this much at each of its context
   switches while armed (its debug registers and task context reloaded: measured 3.3 us a switch
   in this KVM guest, a yielding spin barrier 1.8x slower when armed all the time). A thread is
   armed at most so often that this stays under ARMED_COST_SHARE of its time: a thread that
   switches 50,000 times a second gets 3 watchpoints a second, one that switches 200 times
   gets the whole budget. */
#define ARMED_SWITCH_COST_NS 3300.0
#define ARMED_COST_SHARE 0.01
#define LINES_KEPT 4096
/* Quiet sampling (--quiet-period-us, what pinwise run --adapt asks for): the clock samples cost the
   program most of what the sampler costs it (their interrupts: 2 % of a private-work program at
   1 ms, measured on a 2-CPU KVM guest, 0.4 % at 4 ms), and a program whose threads share nothing
   needs none of them. From START_BASE_NS on, and after QUIET_AFTER_NS without a trap, the sampling
   events take the quiet period (PERF_EVENT_IOC_PERIOD); the first trap gives them the base
   period. Every sample counts as the period then in force over the base period samples, so the
   counts and the matrix stay in the base period's units. A spell that stays quiet goes deeper: the
   period doubles after each further QUIET_AFTER_NS without a trap, up to QUIET_DEEPEST times the
   quiet period (a program that shares nothing pays for a quarter of the samples; one that starts
   sharing later is seen then within a few of the slowest periods). Events that threads inherit in
   per-task mode would keep the period they were made with (the ioctl reaches only the event
   given): there the sampler samples at the base period throughout, and says so. */
#define QUIET_AFTER_NS 100000000ULL
#define QUIET_DEEPEST 4
/* ... except the first START_BASE_NS, at the base period whatever traps: a program is placed from
   its first traps, and at the quiet period a contending pair's first came 0.02-0.06 s after the
   sampler started on a 2-CPU KVM guest (a program that shares nothing pays 30 ms of base-period
   samples more, once). */
#define START_BASE_NS 30000000ULL
/* Rationed sampling (with --quiet-period-us and --traps-per-s): once the watchpoints are rationed
   so hard that the quiet period's samples would still offer RATIONED_MARGIN times what the budget
   arms, most samples are taken only to be turned down, and the clock takes the quiet period while
   traps come too (a pinned contending pair on a 2-CPU KVM guest paid 3.4 % for the sampler at the
   1 ms period, 1.3 % at 4 ms with the same 100 traps a second). The offers that reach the bucket
   are counted in base periods over the last RECENT_NS to 2 RECENT_NS, so the rate the verdict rests
   on does not change with the period it brings; it lapses when the offers fall (a phase of private
   work), and the base period comes back. */
#define RATIONED_MARGIN 2.0

enum { EXIT_USAGE = 2, EXIT_REFUSED = 3, EXIT_NO_PROCESS = 4, EXIT_FAILED = 5 };

struct options {
    const char *out, *status, *error_file, *stream;
    uint64_t interval_ns;     /* --stream: one window record every interval */
    int notify_fd;            /* --notify-fd: a byte written after each window record, or -1 */
    int control_fd;           /* --control-fd: 's', 'w' and 'b' bytes read from it (steady_now), or -1 */
    uint64_t notify_idle_ns;  /* --notify-idle-ms: records without hits or new threads wake no sooner */
    char *setenv[64];         /* NAME=VALUE for the program only (--setenv) */
    int nsetenv;
    pid_t pid;
    char **argv;
    uint64_t period_ns, window_ns, duration_ns, block_ns;
    uint64_t quiet_period_ns; /* --quiet-period-us: sample this slowly while no watchpoint traps (0: never) */
    double arms_per_s;
    double traps_per_s;       /* --traps-per-s: arm no faster than gives about this many traps (0: off) */
    double traps_per_thread;  /* --traps-per-thread: ... nor than this many for each live thread (0: off) */
    int sharing_any, readonly, stack, watch, blocks;
    double switch_limit;
    int per_task;             /* --per-task: never system-wide (what an unprivileged user gets) */
    unsigned long long seed;
};

struct ring {
    int fd;
    struct perf_event_mmap_page *page;
    size_t data_size;
};

struct slot {
    int fd;                   /* an armed watchpoint, or -1 */
    int owner;                /* the thread whose sample it watches */
    double weight;            /* 1 / the chance that the sample was watched in this thread (module comment) */
    uint64_t word, armed_ns;  /* the 8-byte word, and when the sample was taken */
    uint64_t code;            /* the sampled instruction */
};

/* Watch records of lines and of instructions: how often a watchpoint on a sample of the line (or of
   the instruction) was armed, and trapped. */
#define RECORDS 65536
struct record {
    uint64_t key;             /* the line, or the instruction's address */
    uint32_t arms, traps;
};

/* The bulletin board (ComDetective's): the last POSTERS threads whose samples fell on a line, the
   newest first. Four, not two: with two, the threads of a line that run at the same moment (on
   other CPUs) push out those that take turns with them on one CPU, and the meetings (below) would
   favour threads apart as the watchpoints do. */
#define BOARD 65536
#define POSTERS 4
struct posting {
    uint64_t line;
    int thread[POSTERS];
    uint64_t time[POSTERS];
};

struct thread {
    pid_t tid;
    int creator;
    uint64_t born_ns, ended_ns;
    int alive;
    struct ring ring;         /* attach mode: its own sampling buffer */
    struct slot slot[SLOTS];
    int nslots;               /* debug registers it may use (fewer when another user took some) */
    uint64_t offers_full;     /* offers since its watchpoints were all armed (the reservoir's k) */
    uint64_t samples, accesses, together, reads, writes;
    uint64_t eligible;        /* address samples that entered offer(): the estimate's denominator */
    uint64_t streamed_accesses, streamed_eligible;  /* at the last window record (--stream) */
    uint64_t slices, slices_ns;  /* times it was scheduled in (schedstat), and when that was read */
    double switch_rate;       /* context switches per second over the last reading, -1 before two */
    uint64_t next_arm_ns;     /* system-wide mode: not armed again before (ARMED_COST_SHARE) */
};

static struct options opt;
static struct thread *threads;
static int nthreads, cap_threads;
static int *alive;            /* indices of the live threads of the process */
static int nalive;
static struct ring rings[MAX_CPUS];  /* launch mode: one per CPU */
static int nrings;
static pid_t target;
/* Sampling mode: 1, per-CPU events that see every process (root or CAP_PERFMON, or
   kernel.perf_event_paranoid <= 0), samples of other processes dropped; 0, events on the
   program's threads (inherited per CPU when started, per thread when attached). */
static int system_wide;
static pid_t children_pids[256];  /* the program's descendant processes (system-wide mode) */
static int nchildren;
static uint64_t other_samples;
static struct pw_decoder *decoder;
static struct pw_pairs offered, armed, hits;
/* With --stream (pinwise run --adapt), the hits of the last few hundred ms (halved every
   LATELY_HALF_NS): what offers by hits are drawn by, so that partners a phase change made get the
   watchpoints within a few tenths of a second, not once their hits outweigh those of the whole run
   before it (the two-phase program on 2 CPUs: a new pair armed no watchpoint for 0.15 s after the
   change). Each arm's weight is the chance it had then, so the estimate stays unbiased whatever the
   draw. A trace of the whole run keeps the whole run's hits (they spread its arms as its matrix). */
static struct pw_pairs lately;
#define LATELY_HALF_NS 100000000ULL
static struct pw_pairs streamed_offered, streamed_armed, streamed_hits;  /* at the last window record */
/* With --stream, per ordered pair, the address samples of a that fell on a line b's samples fell on
   within ten windows (the bulletin board's meetings, weighed as the samples are): no watchpoint is
   needed to count them, so they come at the clock's rate, where the watched samples come at the
   traps' budget; a phase change shows in them within a window or two (pinwise.adapt's check on
   whether the placement still fits). Not an estimate of the events: a meeting needs both threads
   sampled on the line. */
static struct pw_pairs meets, streamed_meets;
static FILE *stream;
static struct pw_blocks blocks;
static struct pw_lines lines;
static struct posting board[BOARD];
static struct record records[RECORDS], codes[RECORDS];
static uint64_t passed_over;
static double busiest_switch_rate = -1;  /* the most any measured thread of the process switched */
static uint64_t team_since;                /* when the process first had two live threads */
static uint64_t skipped[PW_SKIP_KINDS], samples_total, samples_unknown, child_samples, lost, arms, traps,
                replaced, expired, budget_skips, arm_failures, switch_skips, no_partner, child_processes, execs, start_ns;
static double tokens;
static uint64_t tokens_at;
static uint64_t rng_state;
static long page_size;
static uint64_t period_now_ns;     /* the sampling period in force */
static struct { uint64_t at_ns, period_ns; } periods[16];  /* the last changes of it, a ring */
static unsigned nperiods;
static uint64_t last_trap_ns;      /* when a trap was last counted, or the start */
static uint64_t quiet_since_ns, quiet_ns, quiet_spells, quiet_deepest_ns;
static int slow_rationed;          /* the period in force is the quiet one because the watchpoints are rationed */
static uint64_t rationed_since_ns, rationed_ns, rationed_spells;
static int quiet_off;              /* --quiet-period-us given, but the events are inherited (per-task launch) */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static uint64_t random64(void)
{
    rng_state ^= rng_state << 13;  /* xorshift64 */
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void fail(int status, const char *format, ...) __attribute__((noreturn, format(printf, 2, 3)));

static void cleanup(void);
static int attach_thread(int index);
static void count_hit(int owner, int thread, uint64_t addr, uint64_t time, uint64_t ip, double weight);
static struct record *record_of(struct record *table, uint64_t key);

static void fail(int status, const char *format, ...)
{
    char text[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    FILE *errors = opt.error_file ? fopen(opt.error_file, "we") : NULL;
    fprintf(errors ? errors : stderr, "pinwise-sample: %s\n", text);
    if (errors)
        fclose(errors);
    cleanup();
    exit(status);
}

/* A pair's entry (tally.c), made if new: running out of memory for it ends the sampler as any
   other allocation does. */
static double *pair(struct pw_pairs *p, int a, int b)
{
    double *entry = pw_pair(p, a, b);
    if (entry == NULL)
        fail(EXIT_FAILED, "out of memory for the pairs of %d threads", nthreads);
    return entry;
}

static long perf_open(struct perf_event_attr *attr, pid_t pid, int cpu)
{
    return syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static int read_int(const char *path)
{
    FILE *f = fopen(path, "re");
    int value = -1000;
    if (f) {
        if (fscanf(f, "%d", &value) != 1)
            value = -1000;
        fclose(f);
    }
    return value;
}

/* Why perf_event_open failed, in words a user can act on; exits. */
static void refused(int err, pid_t pid)
{
    int paranoid = read_int("/proc/sys/kernel/perf_event_paranoid");
    if (err == ESRCH)
        fail(EXIT_NO_PROCESS, "process %d exited before it could be sampled", (int)pid);
    if (err == ENOSYS)
        fail(EXIT_REFUSED, "this kernel has no perf_event_open (CONFIG_PERF_EVENTS): trace with --backend valgrind");
    if (err == EACCES || err == EPERM) {
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%d", (int)pid);
        if (geteuid() != 0 && stat(path, &st) == 0 && st.st_uid != geteuid())
            fail(EXIT_REFUSED, "process %d belongs to user %u, not to you: sample it as that user or as root",
                 (int)pid, (unsigned)st.st_uid);
        if (paranoid > 2 && geteuid() != 0)
            fail(EXIT_REFUSED, "perf_event_open is refused: kernel.perf_event_paranoid is %d (2 or less lets a "
                 "user sample their own programs: sysctl kernel.perf_event_paranoid=2, or run as root); or trace "
                 "with --backend valgrind", paranoid);
        fail(EXIT_REFUSED, "perf_event_open is refused (%s) although kernel.perf_event_paranoid is %d: a seccomp "
             "profile or a container forbids it; trace with --backend valgrind", strerror(err), paranoid);
    }
    fail(EXIT_FAILED, "perf_event_open failed: %s", strerror(err));
}

/* -- buffers ------------------------------------------------------------------------------------ */

static int map_ring(struct ring *r, int fd, int pages)
{
    size_t length = (size_t)(pages + 1) * (size_t)page_size;
    void *base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return 0;
    r->fd = fd;
    r->page = base;
    r->data_size = (size_t)pages * (size_t)page_size;
    return 1;
}

static void unmap_ring(struct ring *r)
{
    if (r->page)
        munmap(r->page, r->data_size + (size_t)page_size);
    if (r->fd > 0)
        close(r->fd);
    r->page = NULL;
    r->fd = -1;
}

static struct perf_event_attr clock_attr(int inherit)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = period_now_ns;
    attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER;
    attr.sample_regs_user = PW_REGS_MASK;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.inherit = (unsigned)inherit;
    attr.task = 1;
    attr.comm = 1;
    attr.sample_id_all = 1;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    return attr;
}

/* Records staged from every buffer, processed in time order. */
struct staged {
    uint64_t time;
    uint32_t offset, size;
};
static struct staged *stage;
static size_t nstage, cap_stage;
static unsigned char *stage_bytes;
static size_t stage_used, stage_cap;

static void stage_record(const unsigned char *record, size_t size, uint64_t time)
{
    if (nstage == cap_stage) {
        cap_stage = cap_stage ? cap_stage * 2 : 1024;
        stage = realloc(stage, cap_stage * sizeof *stage);
    }
    if (stage_used + size > stage_cap) {
        stage_cap = (stage_cap + size) * 2;
        stage_bytes = realloc(stage_bytes, stage_cap);
    }
    if (stage == NULL || stage_bytes == NULL)
        fail(EXIT_FAILED, "out of memory");
    memcpy(stage_bytes + stage_used, record, size);
    stage[nstage++] = (struct staged){time, (uint32_t)stage_used, (uint32_t)size};
    stage_used += size;
}

/* The time of a record: samples carry it after ip and tid; others at the end (sample_id_all). */
static uint64_t record_time(const struct perf_event_header *h)
{
    const unsigned char *body = (const unsigned char *)(h + 1);
    uint64_t time = 0;
    if (h->type == PERF_RECORD_SAMPLE)
        memcpy(&time, body + 16, 8);
    else if (h->size >= sizeof *h + 8)
        memcpy(&time, (const unsigned char *)h + h->size - 8, 8);
    return time;
}

static void drain_ring(struct ring *r)
{
    if (r->page == NULL)
        return;
    uint64_t head = __atomic_load_n(&r->page->data_head, __ATOMIC_ACQUIRE), tail = r->page->data_tail;
    const unsigned char *data = (const unsigned char *)r->page + page_size;
    unsigned char copy[65536];
    while (tail < head) {
        struct perf_event_header h;
        size_t at = (size_t)(tail % r->data_size);
        for (size_t i = 0; i < sizeof h; i++)
            ((unsigned char *)&h)[i] = data[(at + i) % r->data_size];
        if (h.size < sizeof h)  /* a u16: it always fits the copy */
            break;
        for (size_t i = 0; i < h.size; i++)
            copy[i] = data[(at + i) % r->data_size];
        stage_record(copy, h.size, record_time((const struct perf_event_header *)copy));
        tail += h.size;
    }
    __atomic_store_n(&r->page->data_tail, head, __ATOMIC_RELEASE);
}

/* -- threads ------------------------------------------------------------------------------------ */

static int thread_of(pid_t tid)
{
    for (int i = nthreads - 1; i >= 0; i--)  /* the newest first: they are sampled most */
        if (threads[i].tid == tid && threads[i].alive)
            return i;
    return -1;
}

/* Each armed watchpoint is a new event, closed when it expires or is replaced: re-arming a
   breakpoint that has trapped and disabled itself (PERF_EVENT_IOC_MODIFY_ATTRIBUTES, then REFRESH)
   leaves a debug register that traps on every access without counting (measured: the program ran
   10x slower). Its count is read when it is closed. No event of its own stays open on a thread
   between two watchpoints: a per-thread event breaks the kernel's cheap switch between threads
   of one process (their inherited sampling contexts are clones), and a program that switches
   threads a million times a second (a yielding spin barrier) then ran 5x slower. */
static void note_outcome(int trapped);

static void settle(int index, struct slot *s)
{
    if (s->fd < 0)
        return;
    uint64_t count = 0;
    int trapped = read(s->fd, &count, sizeof count) == (ssize_t)sizeof count && count > 0;
    /* an arm counts for its line and its instruction once it has an outcome: counted when armed,
       the arms still open at a program's start made its shared line look fruitless (no trap yet
       among a dozen), and a third of its samples were passed over */
    struct record *line = record_of(records, s->word >> 6), *code = record_of(codes, s->code);
    line->arms++;
    code->arms++;
    if (trapped) {
        count_hit(s->owner, index, s->word, s->armed_ns, s->code, s->weight);
        line->traps++;
        code->traps++;
    }
    note_outcome(trapped);
    close(s->fd);
    s->fd = -1;
}

static int add_thread(pid_t tid, int creator, uint64_t born)
{
    if (nthreads == cap_threads) {
        cap_threads = cap_threads ? cap_threads * 2 : 64;
        threads = realloc(threads, (size_t)cap_threads * sizeof *threads);
        alive = realloc(alive, (size_t)cap_threads * sizeof *alive);
        if (threads == NULL || alive == NULL)
            fail(EXIT_FAILED, "out of memory");
    }
    struct thread *t = &threads[nthreads];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    t->creator = creator;
    t->born_ns = born;
    t->alive = 1;
    t->ring.fd = -1;
    t->switch_rate = -1;
    if (opt.watch) {
        for (int k = 0; k < SLOTS; k++)
            t->slot[k].fd = -1;
        t->nslots = SLOTS;
    }
    alive[nalive++] = nthreads;
    return nthreads++;
}

/* How many base periods a sample taken at ``time`` stands for: the period then in force over the
   base period (a cpu-clock sample's own period field keeps the period the event was made with). */
static uint64_t sample_weight(uint64_t time)
{
    for (unsigned k = 0; k < nperiods && k < 16; k++) {
        unsigned i = (nperiods - 1 - k) % 16;
        if (periods[i].at_ns <= time)
            return periods[i].period_ns / opt.period_ns;
    }
    return 1;
}

/* Every sampling event takes ``period`` (quiet sampling, QUIET_AFTER_NS), ``rationed`` when the
   reason is the watchpoints' budget (RATIONED_MARGIN): the seconds of each kind are kept apart. */
static void set_period(uint64_t period, uint64_t now, int rationed)
{
    rationed = rationed && period != opt.period_ns;
    if (period == period_now_ns && rationed == slow_rationed)
        return;
    int was_slow = period_now_ns != opt.period_ns;
    if (was_slow && slow_rationed)
        rationed_ns += now - rationed_since_ns;
    else if (was_slow)
        quiet_ns += now - quiet_since_ns;
    if (rationed) {
        rationed_since_ns = now;
        rationed_spells++;
    } else if (period != opt.period_ns) {
        quiet_since_ns = now;
        if (!was_slow || slow_rationed)
            quiet_spells++;
        if (period > quiet_deepest_ns)
            quiet_deepest_ns = period;
    }
    slow_rationed = rationed;
    if (period == period_now_ns)
        return;
    periods[nperiods % 16].at_ns = now;
    periods[nperiods % 16].period_ns = period;
    nperiods++;
    for (int i = 0; i < nrings; i++)
        if (rings[i].fd >= 0)
            ioctl(rings[i].fd, PERF_EVENT_IOC_PERIOD, &period);
    for (int i = 0; i < nthreads; i++)
        if (threads[i].ring.fd >= 0)
            ioctl(threads[i].ring.fd, PERF_EVENT_IOC_PERIOD, &period);
    period_now_ns = period;
}

static int rationed_now(uint64_t now);

/* The sampling period quiet sampling wants ``now``: the base period for START_BASE_NS, then the
   quiet period until the first trap, else the base period until QUIET_AFTER_NS have passed without one, then the quiet
   period, doubled after each further QUIET_AFTER_NS up to QUIET_DEEPEST times it; the quiet period
   while traps come when the watchpoints are rationed (``*rationed`` says so, RATIONED_MARGIN). */
static uint64_t quiet_period_now(uint64_t now, int *rationed)
{
    /* since the start until the first trap; a trap counted after ``now`` was read: none yet */
    uint64_t since = now > last_trap_ns ? now - last_trap_ns : 0;
    *rationed = 0;
    if (!traps && now - start_ns < START_BASE_NS)
        return opt.period_ns;
    if (since < QUIET_AFTER_NS && traps) {
        *rationed = rationed_now(now);
        return *rationed ? opt.quiet_period_ns : opt.period_ns;
    }
    if (since < QUIET_AFTER_NS)
        return opt.quiet_period_ns;
    uint64_t period = opt.quiet_period_ns;
    for (uint64_t t = 2 * QUIET_AFTER_NS; t <= since && period < QUIET_DEEPEST * opt.quiet_period_ns;
         t += QUIET_AFTER_NS)
        period *= 2;
    return period;
}

/* How long the main loop sleeps: POLL_MS, or QUIET_POLL_MS while the clock samples at the quiet
   period or slower, for want of traps or because the watchpoints are rationed (the samples fill the
   buffers a quarter as fast or slower, and few watchpoints need reading: each wake-up takes a CPU
   from the program on a machine it fills; on 2 CPUs a private-work program paid 2.4 % for the
   sampler, 1.5 % so, a pinned contending pair 2.3 %, 1.2 % so), except in the first two intervals
   of a stream, whose windows are a quarter interval (a program is placed from them). */
static int quiet_poll_ms(uint64_t now)
{
    if (!opt.quiet_period_ns || period_now_ns == opt.period_ns)
        return POLL_MS;
    return opt.stream && now - start_ns < 2 * opt.interval_ns ? POLL_MS : QUIET_POLL_MS;
}

/* The word a slot watched was touched by its thread: one event of the owner with it, weighted. */
static void count_hit(int owner, int thread, uint64_t addr, uint64_t time, uint64_t ip, double weight)
{
    last_trap_ns = now_ns();
    if (opt.quiet_period_ns) {
        int rationed = rationed_now(last_trap_ns);
        set_period(rationed ? opt.quiet_period_ns : opt.period_ns, last_trap_ns, rationed);
    }
    *pair(&hits, owner, thread) += weight;
    *pair(&lately, owner, thread) += weight;
    traps++;
    pw_blocks_add(&blocks, time, owner, thread, weight);
    uint64_t line = addr >> 6;
    struct pw_line *e = pw_lines_find(&lines, line);
    if (e == NULL)
        e = pw_lines_add(&lines, line, addr);
    if (e) {
        e->events += weight;
        *pair(&e->pairs, owner < thread ? owner : thread, owner < thread ? thread : owner) += weight;
        if (!e->read_ip && !e->write_ip)
            e->read_ip = ip;  /* the sampled access that was watched */
    }
}

static void end_thread(int index, uint64_t time)
{
    struct thread *t = &threads[index];
    if (!t->alive)
        return;
    for (int k = 0; k < t->nslots; k++)
        settle(index, &t->slot[k]);
    t->nslots = 0;
    unmap_ring(&t->ring);
    t->alive = 0;
    t->ended_ns = time;
    for (int i = 0; i < nalive; i++)
        if (alive[i] == index) {
            alive[i] = alive[--nalive];
            break;
        }
}

/* -- watchpoints --------------------------------------------------------------------------------- */

/* --traps-per-s (what pinwise run --adapt asks for): each watchpoint costs the program its arming,
   trap and removal (interrupts of the CPU it runs on: a pinned contending pair ran 3.4 % slower
   at 850 arms a second, 1 % at 250, on a 2-CPU KVM guest), and once most of them trap, a quarter
   of them tells as much of who shares with whom. So the token bucket fills at the rate that gives
   about this many traps a second at the share of the last RECENT_NS to 2 RECENT_NS's watchpoints
   that trapped, never above --arms-per-s. Offers the bucket turns down count as offered, as
   always: the estimate (hits / armed per pair) does not change, its variance does. With
   --traps-per-thread N the budget is at most N a second for each live thread of the program (two
   at least): the cost falls on the threads trapped, so 4 threads on 16 CPUs get what 4 threads on
   4 CPUs get, not four times it (all-to-all on 16 cores paid 9 % for 800 traps a second). */
#define RECENT_NS 250000000ULL
/* --control-fd: while the reader says the placement holds ('s'), the budget is this share of
   --traps-per-s (a quarter: on a 2-CPU KVM guest 100 traps a second cost a pinned contending pair
   1.9 %, 200 cost it 3.7 %); 'w' gives it back. The estimate is unchanged (each hit weighs what
   its arm stands for), its variance grows until then. */
#define STEADY_SHARE 0.25
static int steady_now;
static uint64_t steady_since_ns, steady_ns, steady_spells;
/* --control-fd 'b': the reader saw the placement go stale (a phase change in the meetings, which
   come at the clock's rate): BURST_SHARE times the budget for BURST_NS, then the whole of it, so
   that the traps of the new partners that the next judgment rests on come within one of its
   windows rather than three (the two-phase program on a 2-CPU KVM guest moved 0.093 s after its
   phase change with four times the budget, 0.181 s with it: medians of 10 runs). A burst costs
   the program BURST_SHARE x 0.15 s of traps at the whole budget's rate, once a phase. */
#define BURST_SHARE 4.0
#define BURST_NS 150000000ULL
static uint64_t burst_until_ns, burst_spells;
static int quit_asked;  /* --control-fd 'q' */
static double outcomes[2][2];  /* [this slice, the one before][settled, trapped] */
static uint64_t outcomes_at;

static void note_outcome(int trapped)
{
    uint64_t now = now_ns();
    if (now - outcomes_at >= RECENT_NS) {
        int skipped = now - outcomes_at >= 2 * RECENT_NS;
        outcomes[1][0] = skipped ? 0 : outcomes[0][0];
        outcomes[1][1] = skipped ? 0 : outcomes[0][1];
        outcomes[0][0] = outcomes[0][1] = 0;
        outcomes_at = now;
    }
    outcomes[0][0] += 1;
    outcomes[0][1] += trapped;
}

static double arm_rate(void)
{
    double settled = outcomes[0][0] + outcomes[1][0], trapped = outcomes[0][1] + outcomes[1][1];
    double budget = opt.traps_per_s;
    if (opt.traps_per_thread > 0 && opt.traps_per_thread * (nalive > 2 ? nalive : 2) < budget)
        budget = opt.traps_per_thread * (nalive > 2 ? nalive : 2);
    budget *= steady_now ? STEADY_SHARE : burst_until_ns && now_ns() < burst_until_ns ? BURST_SHARE : 1.0;
    if (opt.traps_per_s <= 0 || settled < 20 || trapped <= 0)
        return steady_now ? opt.arms_per_s * STEADY_SHARE : opt.arms_per_s;
    double rate = budget * settled / trapped;
    return rate < opt.arms_per_s ? rate : opt.arms_per_s;
}

/* The offers that reached the bucket, in base periods, [this slice, the one before] (RATIONED_MARGIN). */
static double bucket_offers[2];
static uint64_t bucket_offers_at;

static void note_offer(double periods, uint64_t now)
{
    if (now - bucket_offers_at >= RECENT_NS) {
        bucket_offers[1] = now - bucket_offers_at >= 2 * RECENT_NS ? 0 : bucket_offers[0];
        bucket_offers[0] = 0;
        bucket_offers_at = now;
    }
    bucket_offers[0] += periods;
}

/* Whether the quiet period's samples would still offer RATIONED_MARGIN times what the bucket arms. */
static int rationed_now(uint64_t now)
{
    if (opt.traps_per_s <= 0 || !opt.quiet_period_ns || !bucket_offers_at || now < bucket_offers_at)
        return 0;
    double span = (double)(now - bucket_offers_at) * 1e-9 + (bucket_offers[1] > 0 ? RECENT_NS * 1e-9 : 0);
    if (span < 0.1 || now - bucket_offers_at >= 2 * RECENT_NS)
        return 0;
    double per_s = (bucket_offers[0] + bucket_offers[1]) / span * ((double)opt.period_ns / (double)opt.quiet_period_ns);
    return per_s >= RATIONED_MARGIN * arm_rate();
}

/* The bytes the reader wrote on --control-fd: the last one says whether the placement holds. */
static void read_control(uint64_t now)
{
    char bytes[64];
    ssize_t n;
    while ((n = read(opt.control_fd, bytes, sizeof bytes)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            int steady = bytes[i] == 's' ? 1 : bytes[i] == 'w' || bytes[i] == 'b' ? 0 : steady_now;
            quit_asked |= bytes[i] == 'q';
            if (bytes[i] == 'b') {
                burst_until_ns = now + BURST_NS;
                burst_spells++;
            } else if (bytes[i] == 's') {
                burst_until_ns = 0;
            }
            if (steady && !steady_now) {
                steady_since_ns = now;
                steady_spells++;
            } else if (!steady && steady_now) {
                steady_ns += now - steady_since_ns;
            }
            steady_now = steady;
        }
    }
    if (n == 0) {  /* the reader closed it: the budget stays as it last said */
        close(opt.control_fd);
        opt.control_fd = -1;
    }
}

static void refill_tokens(uint64_t now)
{
    double rate = arm_rate();
    if (!tokens_at)  /* full at the first offer: an empty bucket turned down a program's whole first batch */
        tokens = rate / 10 + 1;
    if (tokens_at) {
        tokens += (double)(now - tokens_at) * 1e-9 * rate;
        if (tokens > rate / 10 + 1)
            tokens = rate / 10 + 1;
    }
    tokens_at = now;
}

/* Watch access ``a`` of thread ``owner`` in thread ``b``'s slot ``s``: a breakpoint on its word that
   traps once (read/write when the sample wrote or --sharing any, else write). 0: it could not. */
static int arm(int b, struct slot *s, int owner, const struct pw_access *a, uint64_t time, double weight)
{
    struct thread *t = &threads[b];
    settle(b, s);
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_BREAKPOINT;
    attr.bp_type = (a->kind == PW_WRITE || opt.sharing_any) ? HW_BREAKPOINT_RW : HW_BREAKPOINT_W;
    /* a wider access (a vector, a string move) is watched at one of its words, drawn uniformly:
       a stencil's vector store covers its boundary cell and three private ones */
    uint64_t first = a->addr & ~7ULL, last = (a->addr + (a->size ? a->size : 1) - 1) & ~7ULL;
    attr.bp_addr = first + 8 * (random64() % ((last - first) / 8 + 1));
    attr.bp_len = HW_BREAKPOINT_LEN_8;
    attr.sample_period = 1;
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    long fd = perf_open(&attr, t->tid, -1);
    if (fd < 0) {
        if (errno == ENOSPC && t->nslots > 1)  /* another user holds a debug register of it */
            t->nslots--;
        arm_failures++;
        return 0;
    }
    if (ioctl((int)fd, PERF_EVENT_IOC_REFRESH, 1) != 0) {
        arm_failures++;
        close((int)fd);
        return 0;
    }
    s->fd = (int)fd;
    s->owner = owner;
    s->weight = weight;
    s->word = attr.bp_addr;
    s->armed_ns = time;
    s->code = a->ip;
    return 1;
}

/* The watch record of a line or of an instruction (a hash table that forgets on collisions). */
static struct record *record_of(struct record *table, uint64_t key)
{
    struct record *r = &table[(key * 0xD6E8FEB86659FD93ULL) >> 48];
    if (r->key != key)
        *r = (struct record){key, 0, 0};
    return r;
}

/* The chance that a sample is watched at all: 1, until the watchpoints on its line, or those on
   samples of its instruction, have trapped nowhere for a while (a thread's private data; a loop
   over a private array of many lines is known by its instruction long before by each line); then
   falling with their fruitless arms, to a floor, so the token budget goes where sharing is. The
   hit of a sample watched with chance p weighs 1/p (Horvitz-Thompson), so the estimate stays that
   of watching every sample. */
static double fruitless_chance(const struct record *r)
{
    if (r->traps > 0 || r->arms < 4)
        return 1.0;
    double chance = 4.0 / r->arms;
    return chance < 0.05 ? 0.05 : chance;
}

static double watch_chance(uint64_t line, uint64_t code)
{
    double by_line = fruitless_chance(record_of(records, line));
    double by_code = fruitless_chance(record_of(codes, code));
    return by_line < by_code ? by_line : by_code;
}

/* The other live threads whose samples fell on ``line`` within ten windows (the board's), into
   out[0..POSTERS-2]; the board then holds a's sample, first. */
static int post(int a, uint64_t line, uint64_t time, int *out)
{
    struct posting *p = &board[(line * 0x9E3779B97F4A7C15ULL) >> 48];
    int n = 0, own = POSTERS - 1;  /* a replaces its own posting, else the oldest */
    if (p->line != line) {
        p->line = line;
        for (int k = 0; k < POSTERS; k++)
            p->thread[k] = -1;
    }
    for (int k = 0; k < POSTERS; k++) {
        if (p->thread[k] == a && own == POSTERS - 1)
            own = k;
        else if (p->thread[k] >= 0 && p->thread[k] != a && threads[p->thread[k]].alive &&
                 time < p->time[k] + opt.window_ns * 10 && n < POSTERS - 1)
            out[n++] = p->thread[k];
    }
    for (int k = own; k > 0; k--) {
        p->thread[k] = p->thread[k - 1];
        p->time[k] = p->time[k - 1];
    }
    p->thread[0] = a;
    p->time[0] = time;
    return n;
}

/* Offer thread a's sampled access to one other live thread. Which one is drawn from a mixture:
   uniformly among the others; by the hits a's samples had with each before; among the threads
   whose samples fell on the same line lately (the bulletin board). The hit is weighted by 1 / the
   chance of the thread drawn (Horvitz-Thompson), so the estimate stays that of uniform offers
   while the watchpoints go where sharing is (module comment, point 3). */
static void offer(int a, const struct pw_access *access, uint64_t time, uint64_t w)
{
    int posted[POSTERS - 1], nposted = post(a, access->addr >> 6, time, posted);
    if (stream)
        for (int k = 0; k < nposted; k++)
            *pair(&meets, a, posted[k]) += (double)w;
    if (nalive < 2 || !opt.watch) {
        no_partner++;
        return;
    }
    threads[a].eligible += w;
    double watched = watch_chance(access->addr >> 6, access->ip);
    if (watched < 1.0 && (double)(random64() >> 11) * 0x1p-53 >= watched) {
        passed_over++;
        return;
    }
    int others = nalive - 1, b = -1;
    double by_hits = nalive <= 1024 ? (nposted ? 1.0 / 3 : 0.5) : 0, by_board = nposted ? 1.0 / 3 : 0;
    double uniform = 1 - by_hits - by_board, total = 0;
    if (by_hits > 0)
        for (int i = 0; i < nalive; i++)
            if (alive[i] != a)
                total += pw_pair_get(&lately, a, alive[i]) + 0.1;
    double x = (double)(random64() >> 11) * 0x1p-53;
    if (x < by_board) {
        b = posted[random64() % (uint64_t)nposted];
    } else if (x < by_board + by_hits) {
        double y = (double)(random64() >> 11) * 0x1p-53 * total;
        for (int i = 0; i < nalive && b < 0; i++)
            if (alive[i] != a && (y -= pw_pair_get(&lately, a, alive[i]) + 0.1) <= 0)
                b = alive[i];
    }
    if (b < 0) {
        int pick = (int)(random64() % (uint64_t)others);
        for (int i = 0, k = 0; i < nalive; i++)
            if (alive[i] != a && k++ == pick) {
                b = alive[i];
                break;
            }
    }
    if (b < 0 || threads[b].nslots == 0) {
        no_partner++;
        return;
    }
    double rate = threads[b].switch_rate;
    if (!team_since)
        team_since = time;
    uint64_t now = now_ns();
    if (system_wide && now < threads[b].next_arm_ns) {
        (*pair(&offered, a, b))++;  /* offered, not armed: counted as the token bucket's skips are */
        switch_skips++;
        return;
    }
    if (!system_wide && (time < team_since + TEAM_SETTLE_NS || busiest_switch_rate > opt.switch_limit ||
        (rate >= 0 ? rate > opt.switch_limit : busiest_switch_rate < 0 || busiest_switch_rate > opt.switch_limit / 2))) {
        (*pair(&offered, a, b))++;  /* offered, never armed: the pair's estimate rests on b's samples */
        switch_skips++;
        return;
    }
    double chance = uniform / others;
    if (by_hits > 0)
        chance += by_hits * (pw_pair_get(&lately, a, b) + 0.1) / total;
    for (int k = 0; k < nposted; k++)
        if (posted[k] == b)
            chance += by_board / nposted;
    (*pair(&offered, a, b))++;
    note_offer((double)w, now);
    refill_tokens(now_ns());
    if (tokens < 1) {
        budget_skips++;
        return;
    }
    struct thread *t = &threads[b];
    struct slot *s = NULL;
    for (int k = 0; k < t->nslots && !s; k++)
        if (t->slot[k].fd < 0)
            s = &t->slot[k];
    if (s == NULL) {
        t->offers_full++;
        if (random64() % t->offers_full >= (uint64_t)t->nslots)
            return;
        s = &t->slot[random64() % (uint64_t)t->nslots];
        replaced++;
    }
    if (arm(b, s, a, access, time, (double)w / (chance * watched))) {
        if (threads[b].switch_rate > 0)  /* the armed time this thread's switching can afford */
            threads[b].next_arm_ns = now + (uint64_t)((double)opt.window_ns * threads[b].switch_rate *
                                                      ARMED_SWITCH_COST_NS * 1e-9 / ARMED_COST_SHARE);
        tokens -= 1;
        arms++;
        (*pair(&armed, a, b))++;
    }
}

/* Each live thread's context switches per second since the last reading (module comment). */
static void read_switches(uint64_t now)
{
    busiest_switch_rate = -1;
    for (int i = 0; i < nalive; i++) {
        struct thread *t = &threads[alive[i]];
        char path[96];
        snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)target, (int)t->tid);
        FILE *f = fopen(path, "re");
        unsigned long long run, wait, slices;
        if (f == NULL)
            continue;
        if (fscanf(f, "%llu %llu %llu", &run, &wait, &slices) == 3) {
            if (t->slices_ns)
                t->switch_rate = (double)(slices - t->slices) * 1e9 / (double)(now - t->slices_ns);
            if (t->switch_rate > busiest_switch_rate)
                busiest_switch_rate = t->switch_rate;
            t->slices = slices;
            t->slices_ns = now;
        }
        fclose(f);
    }
}

/* Watchpoints whose window has passed are closed. With --stream, those that trapped are closed at
   once (a read of each armed one, every POLL_MS): a window record counts an event when it
   happened, not a watch window later, and the debug register is free for the next sample. */
static void expire(uint64_t now)
{
    for (int i = 0; i < nalive; i++) {
        struct thread *t = &threads[alive[i]];
        for (int k = 0; k < t->nslots; k++) {
            struct slot *s = &t->slot[k];
            uint64_t count = 0;
            if (s->fd < 0)
                continue;
            if (now > s->armed_ns + opt.window_ns) {
                settle(alive[i], s);
                expired++;
            } else if (stream && read(s->fd, &count, sizeof count) == (ssize_t)sizeof count && count > 0) {
                settle(alive[i], s);
            }
        }
    }
}

/* -- records ------------------------------------------------------------------------------------- */

static void handle_sample(const unsigned char *body, size_t size)
{
    uint64_t ip, time, abi, values[PW_REGS], regs[PW_REGS] = {0};
    uint32_t pid, tid;
    if (size < 32)
        return;
    memcpy(&ip, body, 8);
    memcpy(&pid, body + 8, 4);
    memcpy(&tid, body + 12, 4);
    memcpy(&time, body + 16, 8);
    memcpy(&abi, body + 24, 8);
    uint64_t w = sample_weight(time);
    if ((pid_t)pid != target) {
        int ours = !system_wide;  /* per-task events see the program and its children only */
        for (int i = 0; i < nchildren && !ours; i++)
            ours = children_pids[i] == (pid_t)pid;
        if (!ours) {
            other_samples++;
            return;
        }
        samples_total += w;
        child_samples += w;
        return;
    }
    samples_total += w;
    int a = thread_of((pid_t)tid);
    if (a < 0) {
        samples_unknown++;
        return;
    }
    struct thread *t = &threads[a];
    t->samples += w;
    if (nalive > 1)
        t->together += w;
    int n = __builtin_popcountll(PW_REGS_MASK);
    if (abi == 0 || size < 32 + 8 * (size_t)n)
        return;
    memcpy(values, body + 32, 8 * (size_t)n);
    for (int bit = 0, k = 0; bit < PW_REGS; bit++)
        if (PW_REGS_MASK & (1ULL << bit))
            regs[bit] = values[k++];
    struct pw_access access;
    pw_decoder_via(decoder, (pid_t)tid);  /* a live thread: the leader may have ended (pthread_exit) */
    enum pw_skip why = pw_decode(decoder, ip, regs, &access);
    skipped[why] += w;
    if (why != PW_OK)
        return;
    t->accesses += w;
    if (access.kind == PW_WRITE)
        t->writes += w;
    else
        t->reads += w;
    struct pw_line *e = pw_lines_find(&lines, access.addr >> 6);
    if (e) {
        *pair(&e->samples, a, access.kind == PW_WRITE) += (double)w;
        if (access.kind == PW_WRITE) {
            e->write_ip = access.ip;
        } else {
            if (!e->read_ip)
                e->read_ip = access.ip;
        }
    }
    if (now_ns() <= time + opt.window_ns)  /* a stale sample would watch a moment long past */
        offer(a, &access, time, w);
}

static void handle_record(const unsigned char *record)
{
    const struct perf_event_header *h = (const void *)record;
    const unsigned char *body = record + sizeof *h;
    uint32_t ids[4];
    uint64_t time;
    switch (h->type) {
    case PERF_RECORD_SAMPLE:
        handle_sample(body, h->size - sizeof *h);
        break;
    case PERF_RECORD_FORK:  /* pid, ppid, tid, ptid, time */
        memcpy(ids, body, 16);
        memcpy(&time, body + 16, 8);
        if ((pid_t)ids[0] == target && (pid_t)ids[2] != target && thread_of((pid_t)ids[2]) < 0) {
            int index = add_thread((pid_t)ids[2], thread_of((pid_t)ids[3]), time);
            if (opt.pid && !attach_thread(index))  /* attached: a new thread's own events */
                end_thread(index, time);
        }
        else if (ids[0] != ids[1] && (pid_t)ids[0] == (pid_t)ids[2]) {  /* a new process */
            int descendant = (pid_t)ids[1] == target;
            for (int i = 0; i < nchildren && !descendant; i++)
                descendant = children_pids[i] == (pid_t)ids[1];
            if (descendant) {
                child_processes++;
                if (nchildren < (int)(sizeof children_pids / sizeof children_pids[0]))
                    children_pids[nchildren++] = (pid_t)ids[0];
            }
        }
        break;
    case PERF_RECORD_EXIT:
        memcpy(ids, body, 16);
        memcpy(&time, body + 16, 8);
        if ((pid_t)ids[0] == target) {
            int index = thread_of((pid_t)ids[2]);
            if (index >= 0)
                end_thread(index, time);
        }
        break;
    case PERF_RECORD_COMM:
        memcpy(ids, body, 8);
        if ((h->misc & PERF_RECORD_MISC_COMM_EXEC) && (pid_t)ids[0] == target) {
            pw_decoder_reset(decoder);  /* a new image: new code, new mappings */
            execs++;
        }
        break;
    case PERF_RECORD_LOST: {
        uint64_t count;
        memcpy(&count, body + 8, 8);
        lost += count;
        break;
    }
    default:
        break;
    }
}

static int by_time(const void *x, const void *y)
{
    const struct staged *a = x, *b = y;
    return a->time < b->time ? -1 : a->time > b->time;
}

static void drain_all(void)
{
    nstage = stage_used = 0;
    for (int i = 0; i < nrings; i++)
        drain_ring(&rings[i]);
    for (int i = 0; i < nthreads; i++)
        drain_ring(&threads[i].ring);
    qsort(stage, nstage, sizeof *stage, by_time);
    for (size_t i = 0; i < nstage; i++)
        handle_record(stage_bytes + stage[i].offset);
}

/* -- starting and attaching ---------------------------------------------------------------------- */

static int online_cpus(int *cpus)
{
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    int n = 0;
    if (f) {
        int lo, hi;
        char sep;
        while (fscanf(f, "%d", &lo) == 1) {
            hi = lo;
            if (fscanf(f, "%c", &sep) == 1 && sep == '-') {
                if (fscanf(f, "%d", &hi) != 1)
                    break;
                if (fscanf(f, "%c", &sep) != 1)
                    sep = '\n';
            }
            for (int c = lo; c <= hi && n < MAX_CPUS; c++)
                cpus[n++] = c;
            if (sep != ',')
                break;
        }
        fclose(f);
    }
    if (n == 0)
        for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && n < MAX_CPUS; c++)
            cpus[n++] = (int)c;
    return n;
}

/* Per-CPU events that see every process: the program's threads then carry no event of pinwise's
   between two watchpoints, so the kernel switches them as cheaply as without pinwise (events on
   its threads, inherited or attached, make every switch of an uncloned context reload them:
   measured 29 us a switch in this KVM guest, a condition-variable ping-pong ran 4x slower).
   0 when the kernel refuses (an unprivileged user): the caller samples the program's threads. */
static int open_system_wide(void)
{
    if (opt.per_task)
        return 0;
    int cpus[MAX_CPUS], ncpus = online_cpus(cpus);
    struct perf_event_attr attr = clock_attr(0);
    for (int i = 0; i < ncpus; i++) {
        long fd = perf_open(&attr, -1, cpus[i]);
        if (fd < 0 || !map_ring(&rings[nrings], (int)fd, RING_PAGES)) {
            if (fd >= 0)
                close((int)fd);
            for (int k = 0; k < nrings; k++)
                unmap_ring(&rings[k]);
            nrings = 0;
            return 0;
        }
        nrings++;
    }
    system_wide = 1;
    return 1;
}

/* Start the program stopped before exec, open its per-CPU inherited events, let it exec. */
static pid_t launch(void)
{
    int go[2], failed[2];
    if (pipe2(go, O_CLOEXEC) != 0 || pipe2(failed, O_CLOEXEC) != 0)
        fail(EXIT_FAILED, "pipe: %s", strerror(errno));
    pid_t child = fork();
    if (child < 0)
        fail(EXIT_FAILED, "fork: %s", strerror(errno));
    if (child == 0) {
        char byte;
        close(go[1]);
        close(failed[0]);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (read(go[0], &byte, 1) != 1)
            _exit(127);
        for (int i = 0; i < opt.nsetenv; i++)  /* the program's own (the preload library), not ours */
            putenv(opt.setenv[i]);
        execvp(opt.argv[0], opt.argv);
        int err = errno;
        if (write(failed[1], &err, sizeof err) < 0)
            _exit(127);
        _exit(127);
    }
    close(go[0]);
    close(failed[1]);
    target = child;
    int cpus[MAX_CPUS], ncpus = open_system_wide() ? 0 : online_cpus(cpus);
    if (!system_wide && opt.quiet_period_ns) {
        /* the threads' inherited events would keep the period they were made with: no quiet sampling */
        opt.quiet_period_ns = 0;
        quiet_off = 1;
        period_now_ns = opt.period_ns;
        nperiods = 0;
        quiet_spells = 0;
    }
    struct perf_event_attr attr = clock_attr(1);
    attr.disabled = 1;
    attr.enable_on_exec = 1;
    for (int i = 0; i < ncpus; i++) {
        long fd = perf_open(&attr, child, cpus[i]);
        if (fd < 0) {
            int err = errno;
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
            refused(err, child);
        }
        if (!map_ring(&rings[nrings], (int)fd, RING_PAGES)) {
            int err = errno;
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
            fail(EXIT_REFUSED, "cannot map the sampling buffers (%s): the locked-memory limit "
                 "(kernel.perf_event_mlock_kb, ulimit -l) is too low; run as root or raise it", strerror(err));
        }
        nrings++;
    }
    decoder = pw_decoder_new(child, opt.readonly, opt.stack);
    if (decoder == NULL)
        fail(EXIT_FAILED, "cannot start the x86 decoder (Capstone)");
    add_thread(child, -1, now_ns());
    if (write(go[1], "x", 1) != 1)
        fail(EXIT_FAILED, "cannot start %s", opt.argv[0]);
    close(go[1]);
    int err = 0;
    if (read(failed[0], &err, sizeof err) == (ssize_t)sizeof err) {
        waitpid(child, NULL, 0);
        fail(EXIT_NO_PROCESS, "cannot run %s: %s", opt.argv[0], strerror(err));
    }
    close(failed[0]);
    pw_decoder_reset(decoder);  /* the exec'd image */
    return child;
}

struct existing {
    pid_t tid;
    unsigned long long start;
};

static int by_start(const void *x, const void *y)
{
    const struct existing *a = x, *b = y;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return a->tid < b->tid ? -1 : a->tid > b->tid;
}

/* Open the sampling events of one existing thread; 0 when it is gone. */
static int attach_thread(int index)
{
    if (system_wide)
        return 1;
    struct perf_event_attr attr = clock_attr(0);
    long fd = perf_open(&attr, threads[index].tid, -1);
    if (fd < 0) {
        if (errno == ESRCH)
            return 0;
        refused(errno, target);
    }
    if (!map_ring(&threads[index].ring, (int)fd, RING_PAGES / 4))
        fail(EXIT_REFUSED, "cannot map the sampling buffers (%s): the locked-memory limit "
             "(kernel.perf_event_mlock_kb, ulimit -l) is too low; run as root or raise it", strerror(errno));
    return 1;
}

/* The threads of the process not yet known, oldest first; each gets its events. */
static void scan_threads(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)target);
    DIR *dir = opendir(path);
    if (dir == NULL)
        return;
    struct existing *found = NULL;
    size_t n = 0, cap = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        pid_t tid = (pid_t)atoi(entry->d_name);
        if (tid <= 0 || thread_of(tid) >= 0)
            continue;
        char stat_path[96], text[1024];
        snprintf(stat_path, sizeof stat_path, "/proc/%d/task/%d/stat", (int)target, (int)tid);
        unsigned long long start = 0;
        char state = '?';
        FILE *f = fopen(stat_path, "re");
        if (f) {
            size_t got = fread(text, 1, sizeof text - 1, f);
            text[got] = '\0';
            fclose(f);
            char *close_paren = strrchr(text, ')');  /* fields after the command name */
            if (close_paren)
                sscanf(close_paren + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
                       "%*d %llu", &state, &start);
        }
        /* A thread that has ended but stays listed (a main thread gone by pthread_exit is a zombie
           until the process ends) is not a new thread: the next scan counted it again. */
        if (state == 'Z' || state == 'X')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            found = realloc(found, cap * sizeof *found);
            if (found == NULL)
                fail(EXIT_FAILED, "out of memory");
        }
        found[n++] = (struct existing){tid, tid == target ? 0 : start};
    }
    closedir(dir);
    qsort(found, n, sizeof *found, by_start);
    for (size_t i = 0; i < n; i++) {
        int index = add_thread(found[i].tid, nthreads ? 0 : -1, now_ns());
        if (!attach_thread(index))
            end_thread(index, now_ns());
    }
    free(found);
}

static void attach(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", (int)opt.pid);
    if (access(path, F_OK) != 0)
        fail(EXIT_NO_PROCESS, "no process %d", (int)opt.pid);
    target = opt.pid;
    decoder = pw_decoder_new(target, opt.readonly, opt.stack);
    if (decoder == NULL)
        fail(EXIT_FAILED, "cannot start the x86 decoder (Capstone)");
    open_system_wide();
    scan_threads();
    if (nthreads == 0)
        fail(EXIT_NO_PROCESS, "process %d exited before it could be sampled", (int)opt.pid);
}

/* -- output -------------------------------------------------------------------------------------- */

static void write_list(FILE *out, const char *key, uint64_t (*value)(const struct thread *))
{
    fprintf(out, "%s", key);
    for (int i = 0; i < nthreads; i++)
        fprintf(out, " %llu", (unsigned long long)value(&threads[i]));
    fprintf(out, "\n");
}

static uint64_t v_samples(const struct thread *t) { return t->samples; }
static uint64_t v_accesses(const struct thread *t) { return t->accesses; }
static uint64_t v_together(const struct thread *t) { return t->together; }
static uint64_t v_reads(const struct thread *t) { return t->reads; }
static uint64_t v_writes(const struct thread *t) { return t->writes; }

static int by_events(const void *x, const void *y)
{
    const struct pw_line *a = *(struct pw_line *const *)x, *b = *(struct pw_line *const *)y;
    return a->events > b->events ? -1 : a->events < b->events;
}

static void write_code(FILE *out, const char *key, uint64_t ip)
{
    char text[512];
    if (ip == 0) {
        fprintf(out, "%s -\n", key);
        return;
    }
    pw_describe(decoder, ip, text, sizeof text);
    fprintf(out, "%s 0x%llx %s\n", key, (unsigned long long)ip, text);
}

static void write_hot_lines(FILE *out)
{
    struct pw_line **order = malloc(sizeof *order * (lines.used ? lines.used : 1));
    if (order == NULL)
        fail(EXIT_FAILED, "out of memory");
    for (size_t i = 0; i < lines.used; i++)
        order[i] = &lines.entry[i];
    qsort(order, lines.used, sizeof *order, by_events);
    size_t n = lines.used < HOT_LINES ? lines.used : HOT_LINES;
    fprintf(out, "hot-lines %zu\n", n);
    for (size_t i = 0; i < n; i++) {
        struct pw_line *e = order[i];
        char where[512];
        pw_describe(decoder, e->address, where, sizeof where);
        fprintf(out, "hot 0x%llx %.0f\nhot-where %s\n", (unsigned long long)e->address, e->events, where);
        write_code(out, "hot-read", e->read_ip);
        write_code(out, "hot-write", e->write_ip);
        for (int written = 0; written < 2; written++) {
            fprintf(out, written ? "\nhot-writes" : "hot-reads");
            for (int t = 0; t < nthreads; t++)
                fprintf(out, " %.0f", pw_pair_get(&e->samples, t, written));
        }
        fprintf(out, "\nhot-pairs");
        for (size_t k = 0; k < e->pairs.slots; k++)
            if (e->pairs.keys[k] && e->pairs.count[k] >= 0.5)
                fprintf(out, " %d %d %.0f", pw_pair_first(&e->pairs, k), pw_pair_second(&e->pairs, k), e->pairs.count[k]);
        fprintf(out, "\n");
    }
    free(order);
}

/* A's address samples that B touched within the window (Horvitz-Thompson): each hit weighs
   1 / the chance that B was drawn for its sample; dividing by the share of B's draws that were
   armed makes up for the token bucket and the reservoir; and a's samples that were offered to
   no one (stale, or no other thread alive) count as the offered ones did. */
static double estimate(int a, int b, double h)
{
    double offers = pw_pair_get(&offered, a, b), arms_ab = pw_pair_get(&armed, a, b);
    double watched = arms_ab / offers;  /* of the draws of b for a's samples, those armed */
    double all = (double)threads[a].eligible;  /* a's samples that could have been watched */
    return all > 0 ? h / watched * (double)threads[a].accesses / all : 0.0;
}

static void write_result(int exit_status, int exit_signal, int partial)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", opt.out);
    FILE *out = fopen(tmp, "we");
    if (out == NULL)
        fail(EXIT_FAILED, "cannot write %s: %s", tmp, strerror(errno));
    uint64_t end = now_ns(), functions, instructions, reloads, decodes, untabled;
    pw_decoder_counts(decoder, &functions, &instructions, &reloads, &decodes, &untabled);
    fprintf(out, "pinwise-sample 1\nbackend sample\nclock cpu-clock\npartial %d\nthreads %d\n", partial, nthreads);
    fprintf(out, "period-ns %llu\nwindow-ns %llu\nsharing %s\narms-per-s %.0f\nseconds %.3f\n",
            (unsigned long long)opt.period_ns, (unsigned long long)opt.window_ns, opt.sharing_any ? "any" : "write",
            opt.arms_per_s, (double)(end - start_ns) * 1e-9);
    if (opt.traps_per_s > 0)
        fprintf(out, "traps-per-s %.0f\n", opt.traps_per_s);
    if (opt.traps_per_thread > 0)
        fprintf(out, "traps-per-thread %.0f\n", opt.traps_per_thread);
    struct timespec used;  /* the sampler's own CPU time (its threads, not the program's) */
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
    fprintf(out, "mode %s\nsamples-other %llu\ncpu-seconds %.4f\n", system_wide ? "system-wide" : "per-task",
            (unsigned long long)other_samples, (double)used.tv_sec + (double)used.tv_nsec * 1e-9);
    fprintf(out, "exit-status %d\nexit-signal %d\nsamples %llu\nsamples-child %llu\nchild-processes %llu\nexecs %llu\n"
            "samples-unknown %llu\nlost %llu\n", exit_status, exit_signal, (unsigned long long)samples_total,
            (unsigned long long)child_samples, (unsigned long long)child_processes, (unsigned long long)execs,
            (unsigned long long)samples_unknown, (unsigned long long)lost);
    fprintf(out, "skipped no-access %llu stack %llu tls %llu readonly %llu unmapped %llu no-code %llu\n",
            (unsigned long long)skipped[PW_SKIP_NO_ACCESS], (unsigned long long)skipped[PW_SKIP_STACK],
            (unsigned long long)skipped[PW_SKIP_TLS], (unsigned long long)skipped[PW_SKIP_READONLY],
            (unsigned long long)skipped[PW_SKIP_UNMAPPED], (unsigned long long)skipped[PW_SKIP_NO_CODE]);
    fprintf(out, "watch arms %llu traps %llu replaced %llu expired %llu budget-skips %llu no-partner %llu "
            "failed %llu passed-over %llu switching %llu\n", (unsigned long long)arms, (unsigned long long)traps,
            (unsigned long long)replaced, (unsigned long long)expired, (unsigned long long)budget_skips,
            (unsigned long long)no_partner, (unsigned long long)arm_failures, (unsigned long long)passed_over,
            (unsigned long long)switch_skips);
    if (quiet_off)
        fprintf(out, "quiet off (per-task: the threads' inherited events keep the period they were made with)\n");
    if (opt.quiet_period_ns)
        fprintf(out, "quiet period-ns %llu deepest-ns %llu seconds %.3f spells %llu\n",
                (unsigned long long)opt.quiet_period_ns, (unsigned long long)quiet_deepest_ns,
                (double)(quiet_ns + (period_now_ns != opt.period_ns && !slow_rationed ? end - quiet_since_ns : 0)) * 1e-9,
                (unsigned long long)quiet_spells);
    if (steady_spells)
        fprintf(out, "steady share %.2f seconds %.3f spells %llu\n", STEADY_SHARE,
                (double)(steady_ns + (steady_now ? end - steady_since_ns : 0)) * 1e-9, (unsigned long long)steady_spells);
    if (burst_spells)
        fprintf(out, "burst share %.2f ms %llu spells %llu\n", BURST_SHARE,
                (unsigned long long)(BURST_NS / 1000000), (unsigned long long)burst_spells);
    if (rationed_spells)
        fprintf(out, "rationed period-ns %llu seconds %.3f spells %llu\n", (unsigned long long)opt.quiet_period_ns,
                (double)(rationed_ns + (slow_rationed ? end - rationed_since_ns : 0)) * 1e-9,
                (unsigned long long)rationed_spells);
    fprintf(out, "switch-rates");
    for (int i = 0; i < nthreads; i++)
        fprintf(out, " %.0f", threads[i].switch_rate);
    fprintf(out, "\n");
    fprintf(out, "decoded functions %llu instructions %llu map-reads %llu samples %llu untabled %llu\n",
            (unsigned long long)functions, (unsigned long long)instructions, (unsigned long long)reloads,
            (unsigned long long)decodes, (unsigned long long)untabled);
    write_list(out, "samples-per-thread", v_samples);
    write_list(out, "accv", v_accesses);
    write_list(out, "reads", v_reads);
    write_list(out, "writes", v_writes);
    write_list(out, "load", v_samples);
    write_list(out, "load-together", v_together);
    fprintf(out, "tids");
    for (int i = 0; i < nthreads; i++)
        fprintf(out, " %d", (int)threads[i].tid);
    fprintf(out, "\ncreator -");
    for (int i = 1; i < nthreads; i++)
        fprintf(out, " %d", threads[i].creator < 0 ? 0 : threads[i].creator);
    fprintf(out, "\nlifetime-ns");
    for (int i = 0; i < nthreads; i++)
        fprintf(out, " %llu %llu", (unsigned long long)(threads[i].born_ns > start_ns ? threads[i].born_ns - start_ns : 0),
                (unsigned long long)((threads[i].alive ? end : threads[i].ended_ns) - start_ns));
    fprintf(out, "\npairs-offered");
    for (size_t k = 0; k < offered.slots; k++)
        if (offered.keys[k] && offered.count[k]) {
            int a = pw_pair_first(&offered, k), b = pw_pair_second(&offered, k);
            fprintf(out, " %d %d %.0f %.0f %.6g", a, b, offered.count[k], pw_pair_get(&armed, a, b),
                    pw_pair_get(&hits, a, b));
        }
    /* the matrix's entries that are not 0, each pair once (a < b): A's samples seen by B and B's
       seen by A */
    struct pw_pairs matrix = {0};
    for (size_t k = 0; k < hits.slots; k++) {
        if (!hits.keys[k] || hits.count[k] <= 0)
            continue;
        int from = pw_pair_first(&hits, k), to = pw_pair_second(&hits, k);
        if (from != to && pw_pair_get(&armed, from, to) > 0)
            *pair(&matrix, from < to ? from : to, from < to ? to : from) += estimate(from, to, hits.count[k]);
    }
    fprintf(out, "\nmatrix-sparse %zu\n", matrix.used);
    for (size_t k = 0; k < matrix.slots; k++)
        if (matrix.keys[k])
            fprintf(out, "%d %d %.6g\n", pw_pair_first(&matrix, k), pw_pair_second(&matrix, k), matrix.count[k]);
    pw_pairs_free(&matrix);
    write_hot_lines(out);
    pw_blocks_write(&blocks, out, start_ns);
    if (fflush(out) != 0 || ferror(out)) {
        fclose(out);
        unlink(tmp);
        fail(EXIT_FAILED, "cannot write %s: %s", tmp, strerror(errno));
    }
    fclose(out);
    if (rename(tmp, opt.out) != 0)
        fail(EXIT_FAILED, "cannot write %s: %s", opt.out, strerror(errno));
}

/* One window record on the stream (--stream; pinwise.adapt reads it): what the sampler counted
   since the last record, for the program to be placed as it runs. Per thread: its id, whether it
   lives, its address samples and those that could be watched; per ordered pair with news: draws,
   arms and weighted hits, from which the reader estimates the window's matrix as write_result
   does the whole run's (estimate()). */
static void emit_window(uint64_t now)
{
    /* watchpoint hits in the window: the reader is woken at once; while it said the placement holds
       (a quarter of the budget), meetings too: the few arms then go to the old partners, and a
       phase change stops the hits, so the stale meetings the reader would burst on went unread
       until --notify-idle-ms had passed (0.07-0.13 s on the two-phase program) */
    int news = 0;
    fprintf(stream, "window %llu %d %llu\ntids", (unsigned long long)(now - start_ns), nthreads,
            (unsigned long long)now);  /* since the start, and CLOCK_MONOTONIC */
    for (int i = 0; i < nthreads; i++)
        fprintf(stream, " %d", threads[i].alive ? (int)threads[i].tid : -1);
    fprintf(stream, "\naccv");
    for (int i = 0; i < nthreads; i++) {
        fprintf(stream, " %llu", (unsigned long long)(threads[i].accesses - threads[i].streamed_accesses));
        threads[i].streamed_accesses = threads[i].accesses;
    }
    fprintf(stream, "\neligible");
    for (int i = 0; i < nthreads; i++) {
        fprintf(stream, " %llu", (unsigned long long)(threads[i].eligible - threads[i].streamed_eligible));
        threads[i].streamed_eligible = threads[i].eligible;
    }
    fprintf(stream, "\npairs");
    for (size_t k = 0; k < offered.slots; k++) {  /* an arm or a hit follows an offer: every pair is here */
        if (!offered.keys[k])
            continue;
        int a = pw_pair_first(&offered, k), b = pw_pair_second(&offered, k);
        double o = offered.count[k], m = pw_pair_get(&armed, a, b), h = pw_pair_get(&hits, a, b);
        double so = pw_pair_get(&streamed_offered, a, b), sm = pw_pair_get(&streamed_armed, a, b),
               sh = pw_pair_get(&streamed_hits, a, b);
        if (o == so && h == sh && m == sm)
            continue;
        if (o != so || h != sh)
            fprintf(stream, " %d %d %.0f %.0f %.6g", a, b, o - so, m - sm, h - sh);
        news |= h != sh;
        *pair(&streamed_offered, a, b) = o;
        *pair(&streamed_armed, a, b) = m;
        *pair(&streamed_hits, a, b) = h;
    }
    fprintf(stream, "\nmeets");
    for (size_t k = 0; k < meets.slots; k++) {
        if (!meets.keys[k])
            continue;
        int a = pw_pair_first(&meets, k), b = pw_pair_second(&meets, k);
        double n = meets.count[k], sn = pw_pair_get(&streamed_meets, a, b);
        if (n == sn)
            continue;
        fprintf(stream, " %d %d %.0f", a, b, n - sn);
        news |= steady_now;
        *pair(&streamed_meets, a, b) = n;
    }
    fprintf(stream, "\nperiod-ns %llu\nend\n", (unsigned long long)period_now_ns);
    fflush(stream);
    static uint64_t notified_ns;
    static int notified_threads, notified_alive;
    news |= nthreads != notified_threads || nalive != notified_alive;
    if (opt.notify_fd >= 0 && (news || now - notified_ns >= opt.notify_idle_ns)) {
        if (write(opt.notify_fd, "w", 1) < 0) {
            /* a full pipe: the reader has a wake-up pending already */
        }
        notified_ns = now;
        notified_threads = nthreads;
        notified_alive = nalive;
    }
}

static void write_status(void)
{
    if (!opt.status)
        return;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", opt.status);
    FILE *out = fopen(tmp, "we");
    if (out == NULL)
        return;
    fprintf(out, "threads %d\nalive %d\nsamples %llu\narms %llu\ntraps %llu\nseconds %.1f\n", nthreads, nalive,
            (unsigned long long)samples_total, (unsigned long long)arms, (unsigned long long)traps,
            (double)(now_ns() - start_ns) * 1e-9);
    fclose(out);
    rename(tmp, opt.status);
}

static void cleanup(void)
{
    for (int i = 0; i < nthreads; i++) {
        for (int k = 0; k < threads[i].nslots; k++)
            if (threads[i].slot[k].fd >= 0) {
                close(threads[i].slot[k].fd);
                threads[i].slot[k].fd = -1;
            }
        threads[i].nslots = 0;
        unmap_ring(&threads[i].ring);
    }
    for (int i = 0; i < nrings; i++)
        unmap_ring(&rings[i]);
    nrings = 0;
}

/* -- the command line and the loop --------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: pinwise-sample --out FILE [--status FILE] [--error-file FILE] "
                    "[--stream FILE [--interval-ms N] [--notify-fd N [--notify-idle-ms N]] [--control-fd N]] "
                    "[--setenv NAME=VALUE] "
                    "[--period-us N] [--window-ms N] [--quiet-period-us N] [--arms-per-s N] [--traps-per-s N] "
                    "[--traps-per-thread N] "
                    "[--sharing write|any] [--readonly] [--stack] [--no-watch] [--per-task] [--duration-ms N] "
                    "[--blocks N] [--seed N] (--pid PID | -- PROGRAM ARGS...)\n");
    exit(EXIT_USAGE);
}

static unsigned long long number(const char *text, const char *name, unsigned long long lo, unsigned long long hi)
{
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || *end || value < lo || value > hi) {
        fprintf(stderr, "pinwise-sample: %s must be a whole number from %llu to %llu, not '%s'\n", name, lo, hi, text);
        exit(EXIT_USAGE);
    }
    return value;
}

static void parse(int argc, char **argv)
{
    opt.period_ns = 1000000;
    opt.window_ns = 20000000;
    opt.arms_per_s = 1000;
    opt.switch_limit = SWITCH_LIMIT;
    opt.interval_ns = 200000000;
    opt.notify_fd = -1;
    opt.control_fd = -1;
    opt.watch = 1;
    opt.blocks = 32;
    opt.block_ns = 50000000;
    opt.seed = 0x9E3779B97F4A7C15ULL ^ (unsigned long long)getpid();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "--setenv=", 9)) {  /* NAME=VALUE in one argument */
            if (opt.nsetenv == 64 || !strchr(a + 9, '='))
                usage();
            opt.setenv[opt.nsetenv++] = argv[i] + 9;
            continue;
        }
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) {
            if (i + 1 >= argc)
                usage();
            opt.argv = &argv[i + 1];
            break;
        } else if (!strcmp(a, "--readonly")) {
            opt.readonly = 1;
        } else if (!strcmp(a, "--stack")) {
            opt.stack = 1;
        } else if (!strcmp(a, "--no-watch")) {
            opt.watch = 0;
        } else if (!strcmp(a, "--per-task")) {
            opt.per_task = 1;
        } else if (value == NULL) {
            usage();
        } else if (!strcmp(a, "--out")) {
            opt.out = argv[++i];
        } else if (!strcmp(a, "--status")) {
            opt.status = argv[++i];
        } else if (!strcmp(a, "--error-file")) {
            opt.error_file = argv[++i];
        } else if (!strcmp(a, "--stream")) {
            opt.stream = argv[++i];
        } else if (!strcmp(a, "--notify-fd")) {
            opt.notify_fd = (int)number(argv[++i], "--notify-fd", 3, 65535);
            if (fcntl(opt.notify_fd, F_SETFD, FD_CLOEXEC) != 0 || fcntl(opt.notify_fd, F_SETFL, O_NONBLOCK) != 0)
                fail(EXIT_USAGE, "--notify-fd %d: no such descriptor", opt.notify_fd);
        } else if (!strcmp(a, "--control-fd")) {
            opt.control_fd = (int)number(argv[++i], "--control-fd", 3, 65535);
            if (fcntl(opt.control_fd, F_SETFD, FD_CLOEXEC) != 0 || fcntl(opt.control_fd, F_SETFL, O_NONBLOCK) != 0)
                fail(EXIT_USAGE, "--control-fd %d: no such descriptor", opt.control_fd);
        } else if (!strcmp(a, "--notify-idle-ms")) {
            opt.notify_idle_ns = number(argv[++i], "--notify-idle-ms", 0, 600000) * 1000000;
        } else if (!strcmp(a, "--interval-ms")) {
            opt.interval_ns = number(argv[++i], "--interval-ms", 10, 600000) * 1000000;
        } else if (!strcmp(a, "--setenv")) {
            if (opt.nsetenv == 64 || !strchr(argv[i + 1], '='))
                usage();
            opt.setenv[opt.nsetenv++] = argv[++i];
        } else if (!strcmp(a, "--pid")) {
            opt.pid = (pid_t)number(argv[++i], "--pid", 1, 1u << 30);
        } else if (!strcmp(a, "--period-us")) {
            opt.period_ns = number(argv[++i], "--period-us", 10, 10000000) * 1000;
        } else if (!strcmp(a, "--quiet-period-us")) {
            opt.quiet_period_ns = number(argv[++i], "--quiet-period-us", 10, 10000000) * 1000;
        } else if (!strcmp(a, "--window-ms")) {
            opt.window_ns = number(argv[++i], "--window-ms", 1, 100000) * 1000000;
        } else if (!strcmp(a, "--traps-per-s")) {
            opt.traps_per_s = (double)number(argv[++i], "--traps-per-s", 0, 1000000);
        } else if (!strcmp(a, "--traps-per-thread")) {
            opt.traps_per_thread = (double)number(argv[++i], "--traps-per-thread", 0, 1000000);
        } else if (!strcmp(a, "--arms-per-s")) {
            opt.arms_per_s = (double)number(argv[++i], "--arms-per-s", 1, 1000000);
        } else if (!strcmp(a, "--duration-ms")) {
            opt.duration_ns = number(argv[++i], "--duration-ms", 1, 1ULL << 40) * 1000000;
        } else if (!strcmp(a, "--blocks")) {
            opt.blocks = (int)number(argv[++i], "--blocks", 2, 4096) & ~1;
        } else if (!strcmp(a, "--switch-limit")) {
            opt.switch_limit = (double)number(argv[++i], "--switch-limit", 0, 100000000);
        } else if (!strcmp(a, "--seed")) {
            opt.seed = number(argv[++i], "--seed", 0, ~0ULL);
        } else if (!strcmp(a, "--sharing")) {
            value = argv[++i];
            if (strcmp(value, "write") && strcmp(value, "any"))
                usage();
            opt.sharing_any = !strcmp(value, "any");
        } else {
            usage();
        }
    }
    if (opt.out == NULL || (opt.pid == 0) == (opt.argv == NULL))
        usage();
    if (opt.quiet_period_ns && (opt.quiet_period_ns <= opt.period_ns || opt.quiet_period_ns % opt.period_ns))
        fail(EXIT_USAGE, "--quiet-period-us must be a multiple of --period-us, and longer");
    period_now_ns = opt.period_ns;
    rng_state = opt.seed ? opt.seed : 1;
}

/* The length of the stream window that follows ``n`` windows ``elapsed`` ns after the start (0:
   the empty record at the start, at once): a quarter of the interval until two intervals have
   passed, then the interval (at least 10 ms, as --interval-ms is). */
static uint64_t window_length(uint64_t n, uint64_t elapsed, uint64_t interval_ns)
{
    if (n == 0)
        return 0;
    uint64_t length = elapsed < 2 * interval_ns ? interval_ns / 4 : interval_ns;
    return length < 10000000ULL ? 10000000ULL : length;
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    page_size = sysconf(_SC_PAGESIZE);
    if (!pw_blocks_init(&blocks, opt.blocks, opt.block_ns) || !pw_lines_init(&lines, LINES_KEPT))
        fail(EXIT_FAILED, "out of memory");
    if (opt.stream && (stream = fopen(opt.stream, "we")) == NULL)  /* a stream of this run alone */
        fail(EXIT_FAILED, "cannot write %s: %s", opt.stream, strerror(errno));
    /* Stop signals arrive on a descriptor: the loop finishes its work and writes the result. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    start_ns = last_trap_ns = now_ns();
    pid_t child = opt.argv ? launch() : (attach(), 0);
    int pidfd = child ? -1 : (int)syscall(SYS_pidfd_open, target, 0);
    int exit_status = -1, exit_signal = 0, stopped = 0, ended = 0;
    uint64_t last_status = 0;
    if (opt.watch)
        read_switches(now_ns());  /* the first reading: rates follow from the next */
    while (!ended) {
        /* the control pipe wakes the loop too: a 'w' (the placement looks stale) arms at once */
        struct pollfd fds[3] = {{sfd, POLLIN, 0}, {pidfd >= 0 ? pidfd : -1, POLLIN, 0}, {opt.control_fd, POLLIN, 0}};
        int ready = poll(fds, 3, quiet_poll_ms(now_ns()));
        if (ready > 0 && opt.control_fd >= 0 && (fds[2].revents & (POLLIN | POLLHUP)))
            read_control(now_ns());
        if (ready > 0 && (fds[0].revents & POLLIN)) {
            struct signalfd_siginfo info;
            while (read(sfd, &info, sizeof info) == (ssize_t)sizeof info) {
                if (info.ssi_signo == SIGCHLD)
                    continue;
                stopped = 1;
                /* the program gets the signal too, and ends in its own time; pinwise sends it to
                   the whole process group, the program's included, so from pinwise it is not sent
                   again (a program whose second Ctrl-C means "quit now" took that path) */
                if (child && info.ssi_pid != (uint32_t)getppid())
                    kill(child, (int)info.ssi_signo);
            }
        }
        drain_all();
        uint64_t now = now_ns();
        expire(now);
        static uint64_t lately_at;
        if (stream && now - lately_at >= LATELY_HALF_NS) {
            for (size_t k = 0; k < lately.slots; k++)
                lately.count[k] *= 0.5;
            lately_at = now;
        }
        if (opt.quiet_period_ns && opt.watch) {  /* a trap gives the base period at once (count_hit) */
            int rationed;
            uint64_t period = quiet_period_now(now, &rationed);
            set_period(period, now, rationed);
        }
        if (child) {
            int status;
            if (waitpid(child, &status, WNOHANG) == child) {
                /* the status a shell gives (128 + N), and the signal apart: a program may exit(139) */
                exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                exit_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
                drain_all();
                ended = 1;
            }
        } else if (pidfd >= 0 ? (fds[1].revents & POLLIN) != 0 : kill(target, 0) != 0) {
            drain_all();
            ended = 1;
        }
        static uint64_t last_switches;
        if (opt.watch && now - last_switches > SWITCHES_EVERY_NS) {
            read_switches(now);
            last_switches = now;
        }
        if (!child && !ended) {
            static uint64_t last_scan;
            if (now - last_scan > 100000000ULL) {  /* threads whose fork record we could not see */
                scan_threads();
                last_scan = now;
            }
        }
        if (stopped && !child)
            break;
        if ((opt.duration_ns && now - start_ns >= opt.duration_ns) || quit_asked) {
            if (!child)
                break;
            cleanup();  /* detach, and let the program finish on its own */
            opt.duration_ns = 0;
            opt.watch = 0;
            quit_asked = 0;
            if (stream) {  /* no window more: the reader reads none */
                fclose(stream);
                stream = NULL;
            }
        }
        if (now - last_status > 1000000000ULL) {
            write_status();
            last_status = now;
        }
        static uint64_t last_window, windows;
        if (stream && now - last_window >= window_length(windows, now - start_ns, opt.interval_ns)) {
            emit_window(now);
            last_window = now;
            windows++;
        }
    }
    for (int i = 0; i < nthreads; i++)  /* every watchpoint still armed: counted, closed */
        for (int k = 0; k < threads[i].nslots; k++)
            settle(i, &threads[i].slot[k]);
    cleanup();
    /* a started program stopped, or failing, leaves a partial matrix; an attach that a signal ends
       (Ctrl-C is how one without --duration ends) has seen all it was asked to */
    write_result(exit_status, exit_signal, child && (stopped || exit_status != 0));
    pw_decoder_free(decoder);
    return 0;
}
