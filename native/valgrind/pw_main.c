/*--------------------------------------------------------------------*/
/*--- pinwise: a Valgrind tool that measures which threads share   ---*/
/*--- data, for thread mapping.                        pw_main.c  ---*/
/*--------------------------------------------------------------------*/

/* Shaped after Lackey (lackey/lk_main.c): one instrumentation pass over each superblock, and a
   fini that writes the result. Unlike Lackey it calls no helper for most accesses: an inline
   lookup in a cache of lines finds the ones whose events are already known (see "The fast path").

   What it measures (Diener et al., "Communication-aware mapping policies"; SPEC.md capability 3):
   memory is seen at the granularity of 64-byte lines. For each line the tool remembers which
   threads touched it in the current time window. An access by thread t to a line that another
   thread u touched earlier in the same window is a communication event: C[t][u] += 1. The matrix
   written out is M = C + C^T, so each event adds one to M[t][u] and to M[u][t]. Windows close
   after --pw-window accesses per live thread (Valgrind serialises threads, so a window must hold
   a time slice of each of them) or after --pw-window-ms milliseconds.

   With --pw-model=mazouz the window never closes and each line remembers, per thread, how many
   accesses it made; at the end alpha[i][j] sums, over every line touched by both i and j, the
   accesses of i and j to it (Mazouz et al. 3.2, the affinity graph's gain function).

   Per thread it also counts memory accesses (AccV) and executed guest instructions (load).
   Threads are numbered in creation order, the main thread 0: the numbering the preload library
   uses for pinning. Sharing that is not communication is skipped unless --pw-readonly=yes: lines
   of mappings that are read-only when accessed (constants, code, and data the loader protects
   after relocating it, RELRO: the tool follows mmap, mprotect, brk and mremap, so a page's state
   is the one of its current protection, not of its first touch), and the loader's tables of every
   object, the GOT and the PLT's GOT, which every thread reads at each call into a shared library.

   --pw-sharing=any counts every access to a line another thread touched in the window (the
   paper's definition); --pw-sharing=write only pairs of accesses of which at least one is a write
   (each line remembers which of its sharers wrote it in the window): data that threads only read
   together is not communication then.

   Hot lines: each line counts its events; the lines carrying the most (at least 1/64 of all events
   so far, HOT_LINES at most) get a record from then on: accesses by thread and kind, events by
   pair of threads, an instruction that reads and one that writes it. They name the variable behind
   false sharing and spin-waits, and let the analysis take a spin-waited line out of the matrix.

   Limitations: what the matrix does not see, or sees approximately.
   - Data accesses only: instruction fetches are not traced. Accesses addressed from the stack
     pointer (SP plus a constant, within the superblock) are skipped unless --pw-stack=yes; a stack
     variable reached through another register (a frame pointer, a pointer handed to another
     thread) is traced like any other memory.
   - One line is 64 bytes (LINE_SHIFT), whatever the machine's line size.
   - "Together" means in the same window, not at the same time: Valgrind runs one thread at a time,
     so a window is a span of accesses (--pw-window per live thread) or of milliseconds, and two
     threads that touch a line a window apart make no event however close they ran natively.
   - A line remembers SHARERS (8) threads per window: a ninth evicts the oldest, whose later events
     with the line in that window are lost; with --pw-model=mazouz a line counts the accesses of its
     first 8 threads only.
   - Lines past --pw-max-lines are not tracked (their accesses are counted as dropped); a line's own
     event count stops at 2^32 - 1 (it only decides when the line becomes hot); pairs of a hot line
     are kept up to HOT_PAIR_THREADS threads, the other sharing model's matrix up to OTHER_THREADS.
   - Threads past MAX_THREADS get no number of their own. pinwise keeps the matrix of the program's
     first process: copies it forks and programs it execs are not in it (docs/trace.md).

   Output (--pw-out=FILE), plain text, rewritten every --pw-dump-ms while running (marked partial)
   and at exit:
      pinwise-trace 1
      model diener|mazouz
      partial 0|1
      threads T
      window N | window-ms N
      accesses TOTAL
      lines TOUCHED DROPPED       (lines touched; accesses to lines past --pw-max-lines)
      table-bytes B               (what the lines and the matrix take; grows with the program)
      cache-bytes B               (the line cache, sites and page slots: fixed, mapped as used)
      page-sites S                (instructions that watched pages: see "Private pages")
      accv a0 a1 ...
      load i0 i1 ...
      load-together i0 i1 ...     (instructions executed while another thread was alive: a creator
                                   that only starts and joins its workers has few)
      creator - c1 c2 ...         (the thread that created each thread; main has none)
      lifetime b0 e0 b1 e1 ...    (each thread's start and end on the clock of total accesses;
                                   a thread still alive ends at the dump)
      sharing any|write
      matrix
      T rows of T numbers
      other-sharing write|any     (the same matrix under the other sharing model, counted beside it,
      T rows of T numbers          up to 1,024 threads; none past them, nor with --pw-model=mazouz)
      hot-lines K                 (then K records, hottest first, each of these lines:)
      hot ADDRESS EVENTS BEFORE   (an accessed byte of the line; the line's events in the whole run;
                                   its accesses before it became hot, to 11 significant bits)
      hot-where TEXT              (the data symbol and offset, or the mapping, of ADDRESS)
      hot-read TEXT               (an instruction reading it: address, function, file:line; or -)
      hot-write TEXT              (an instruction writing it; or -)
      hot-reads r0 r1 ...         (reads per thread since the line became hot)
      hot-writes w0 w1 ...
      hot-pairs i j n ...         (events per pair i < j since then; only up to 256 threads)
      blocks N LEN                (time blocks, --pw-model=diener and up to BLOCK_THREADS threads:
      N lines block a b n ...      LEN accesses each, the last one cut short by the end; the events
                                   of each pair i < j that had any in it, for pinwise.phases)
*/

#include "pub_tool_basics.h"
#include "pub_tool_clreq.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_debuginfo.h"
#include "pub_tool_threadstate.h"
#include "pw_tool_common.h"

#define PW_VERSION "1"
#define LINE_SHIFT 6
#define SHARERS 8          /* threads remembered per line */
#define MAX_THREADS 65535  /* thread indices are UShort */
#define HOT_LINES 32       /* lines with a record of their own */
#define HOT_PAIR_THREADS 256  /* hot lines keep events by pair up to this many threads */

/*------------------------------------------------------------*/
/*--- Command line options                                 ---*/
/*------------------------------------------------------------*/

static const HChar* clo_out = "pinwise-trace.txt";
static Long clo_window = 1000000;      /* accesses per window; 0 = time windows */
static Long clo_window_ms = 0;         /* milliseconds per window when > 0 */
static Bool clo_mazouz = False;
static Bool clo_readonly = False;
static Bool clo_write_sharing = False; /* --pw-sharing=write */
static Long clo_max_lines = 1 << 24;   /* lines tracked at most (memory bound) */
static Long clo_dump_ms = 2000;
static Bool clo_stack = False;         /* also trace accesses addressed from the stack pointer */
/* Debugging options: a smaller line cache and fewer stamps than the defaults. The matrix must not
   change with them (the tests check that); only the speed does. */
#define CACHE_BITS 19                  /* line cache slots at most: 2^19 of 16 + 16 bytes */
#define KEY_SHIFT 41                   /* lines of 47-bit user addresses fit below the stamp */
#define MAX_STAMP ((1LL << (64 - KEY_SHIFT)) - 2)
static Long clo_cache_bits = CACHE_BITS;
static Long clo_max_stamp = MAX_STAMP;
#define SETTLE_EVERY (1LL << 31)        /* accesses: no half of a pending count reaches 2^32 (see line_cache) */
static Long clo_settle_every = SETTLE_EVERY;
enum { PAGE_MODE_AUTO, PAGE_MODE_ALWAYS, PAGE_MODE_NEVER };
static Int clo_page_mode = PAGE_MODE_AUTO;  /* which lookups watch pages instead of lines (see "Private pages") */

static Bool pw_process_cmd_line_option(const HChar* arg)
{
   const HChar* model = NULL;
   const HChar* sharing = NULL;
   const HChar* page_mode = NULL;
   if VG_STR_CLO(arg, "--pw-out", clo_out) {}
   else if VG_BINT_CLO(arg, "--pw-window", clo_window, 1, 1000000000000LL) {}
   else if VG_BINT_CLO(arg, "--pw-window-ms", clo_window_ms, 0, 100000000) {}
   else if VG_BOOL_CLO(arg, "--pw-readonly", clo_readonly) {}
   else if VG_BOOL_CLO(arg, "--pw-stack", clo_stack) {}
   else if VG_BINT_CLO(arg, "--pw-max-lines", clo_max_lines, 1024, 1LL << 34) {}
   else if VG_BINT_CLO(arg, "--pw-dump-ms", clo_dump_ms, 0, 100000000) {}
   else if VG_BINT_CLO(arg, "--pw-cache-bits", clo_cache_bits, 1, CACHE_BITS) {}
   else if VG_BINT_CLO(arg, "--pw-max-stamp", clo_max_stamp, 2, MAX_STAMP) {}
   else if VG_BINT_CLO(arg, "--pw-settle-every", clo_settle_every, 1, SETTLE_EVERY) {}
   else if VG_STR_CLO(arg, "--pw-page-mode", page_mode) {
      if (VG_(strcmp)(page_mode, "auto") == 0) clo_page_mode = PAGE_MODE_AUTO;
      else if (VG_(strcmp)(page_mode, "always") == 0) clo_page_mode = PAGE_MODE_ALWAYS;
      else if (VG_(strcmp)(page_mode, "never") == 0) clo_page_mode = PAGE_MODE_NEVER;
      else VG_(fmsg_bad_option)(arg, "--pw-page-mode must be auto, always or never\n");
   }
   else if VG_STR_CLO(arg, "--pw-sharing", sharing) {
      if (VG_(strcmp)(sharing, "write") == 0) clo_write_sharing = True;
      else if (VG_(strcmp)(sharing, "any") == 0) clo_write_sharing = False;
      else VG_(fmsg_bad_option)(arg, "--pw-sharing must be any or write\n");
   }
   else if VG_STR_CLO(arg, "--pw-model", model) {
      if (VG_(strcmp)(model, "mazouz") == 0) clo_mazouz = True;
      else if (VG_(strcmp)(model, "diener") == 0) clo_mazouz = False;
      else VG_(fmsg_bad_option)(arg, "--pw-model must be diener or mazouz\n");
   }
   else return False;
   return True;
}

static void pw_print_usage(void)
{
   VG_(printf)(
"    --pw-out=FILE            where to write the result [pinwise-trace.txt]\n"
"    --pw-model=diener|mazouz communication events in windows, or alpha [diener]\n"
"    --pw-window=N            accesses per live thread per time window [1000000]\n"
"    --pw-window-ms=N         milliseconds per window instead (0: use --pw-window) [0]\n"
"    --pw-sharing=any|write   events between any two accesses, or only when one writes [any]\n"
"    --pw-readonly=yes|no     also count read-only lines and the loader's tables [no]\n"
"    --pw-stack=yes|no        also trace accesses addressed from the stack pointer [no]\n"
"    --pw-max-lines=N         lines tracked at most, bounding memory [16777216]\n"
"    --pw-dump-ms=N           write the partial result every N ms (0: only at exit) [2000]\n");
}

static void pw_print_debug_usage(void)
{
   VG_(printf)(
"    --pw-cache-bits=N        line cache of 2^N slots (the result must not change) [19]\n"
"    --pw-max-stamp=N         reuse stamps after N (the result must not change) [8388606]\n"
"    --pw-settle-every=N      settle every pending count each N accesses (the result must not change)\n"
"                             [2147483648]\n"
"    --pw-page-mode=auto|always|never  lookups that watch private pages instead of lines: those that\n"
"                             stream through private memory, all, none (the result must not change) [auto]\n");
}

/* The fast path. Valgrind runs one thread at a time, and a line's sharers change only when a
   thread touches it for the first time in a window. Once thread t has touched line L in the
   current window, each further access of t to L adds the same events as the last one until
   another thread touches L or the window closes. Instrumented code therefore adds one to the
   pending count of L's slot in `line_cache` and, unless the slot holds the key (L, stamp of t in
   this window), calls the helper (it takes that add back, records t as a sharer, counts that
   access's events at once and takes the slot). Every line has one slot, so another thread
   touching L, or a new window's first touch of L, first evicts t's entry, and eviction settles the
   pending count against the sharers the accesses saw: C[t][u] += count for each other sharer u.
   Counts still pending are settled before each partial dump and at exit. This is exactly the
   per-access definition, computed inline with one load, compare, add and store per access.
   Reads and writes are pending apart (with --pw-sharing=write they add different events, and a
   write makes its thread a writer of the line for the others), in the two halves of one word so
   that one add counts both: reads in the low 32 bits, writes in the high ones; every slot is
   settled at least every 2^31 accesses (advance_window), so neither half overflows. The entry
   keeps its line even when only its thread shares it, so that eviction records the thread's
   writes. */
#define CACHE_ENTRIES (1 << CACHE_BITS)
typedef struct LineEntry LineEntry;
typedef struct {
   ULong      key;      /* line | stamp << KEY_SHIFT; 0: empty (stamps start at 1) */
   ULong      pending;  /* reads + (writes << 32) not yet counted (instrumented code adds to it) */
} CacheEntry;           /* 16 bytes: all the inline code touches, four slots to a cache line */
typedef struct {
   LineEntry* line;     /* the line's entry; NULL when its accesses are not traced */
   UShort     owner;    /* the thread whose accesses are pending */
   UChar      flags;    /* SLOT_PRIVATE, SLOT_RENEWED, SLOT_RENEWED_BY_WRITE */
   UChar      spare;
   UInt       window;   /* SLOT_RENEWED: the window it was renewed in */
} CacheSide;            /* the rest of a slot, which only the helpers read, in a table of its own */
/* The line had no sharer but its owner when cached, and still has none: another thread's access
   to it would have taken the slot. */
#define SLOT_PRIVATE 1
/* Renewed (see renew_private): the line's entry does not know yet that the owner touched it in
   `window`; settle_slot tells it (SLOT_RENEWED_BY_WRITE: that first access wrote). */
#define SLOT_RENEWED 2
#define SLOT_RENEWED_BY_WRITE 4
#define LINE_OF_KEY(key) ((key) & ((1ULL << KEY_SHIFT) - 1))
#define PENDING_OFFSET 8
#define PENDING(reads, writes) ((ULong)(reads) + ((ULong)(writes) << 32))
static CacheEntry line_cache[CACHE_ENTRIES];
static CacheSide cache_side[CACHE_ENTRIES];
static UInt shared_slots[CACHE_ENTRIES];          /* slots filled with a shared line, to settle */
static UInt n_shared_slots = 0;
STATIC_ASSERT(sizeof(CacheEntry) == 16 && sizeof(CacheSide) == 16);
/* A lookup that streams through memory only its own thread touches (a private working set larger
   than a window, swept again in every window) misses the line cache at each line's first access
   in every window, and the line cache's slots and the lines' entries, one of each per line, come
   on top of the program's own memory: past the CPU's caches this doubled the cost of tracing.
   Such lookups watch pages instead. A page is private in a window while only one thread has
   touched it in that window; its owner's accesses then add no events, and all that matters later
   is which of its lines the owner touched, and wrote, in the window: two bit masks. A page slot
   holds them, keyed by page and stamp as the line cache is by line, so that an inline lookup that
   finds its key (page | stamp of the running thread) only sets a bit: no event can be missed,
   since another thread touching the page in the window dissolves the private page first (its
   lines' entries learn the owner's touches, the page slot is emptied, and the page stays shared
   for the rest of the window). Every first touch of a line in a window, however made, passes
   through touch_page, which keeps that invariant.

   Which lookups watch pages is chosen per instruction (a site): lookups start with lines, and
   pw_miss counts the misses each site takes on lines private to its thread (first accesses of a
   window, renewals) against the others; a site that takes thousands of private misses and few
   others is retranslated to watch pages. A page-watching site whose pages turn out shared goes
   back to lines for good (every such access is a helper call). Both kinds of lookup give the same
   events: --pw-page-mode=always or never must not change the matrix (the tests check that). */
#define MAX_PAGE_SITES 1024
typedef struct PageLines PageLines;
typedef struct {
   ULong  key;       /* page | stamp << KEY_SHIFT; 0: empty */
   ULong  read;      /* lines read (bit k: line k), lines written: instrumented code sets them */
   ULong  written;
   PageLines* page;  /* the page's lines */
   Addr   ip;        /* the site's instruction */
   UInt   window;    /* the window it was filled in, and by whom */
   UShort owner;
   UShort spare;
   UInt   misses;    /* pw_page_miss calls in window `misses_window` */
   UInt   misses_window;
   UInt   taken;     /* misses that took a private page, and those processed line by line */
   UInt   fallbacks;
} PageSlot;          /* a cache line each */
STATIC_ASSERT(sizeof(PageSlot) == 64);
#define PAGE_READ_OFFSET 8
#define PAGE_WRITTEN_OFFSET 16
static PageSlot page_slots[MAX_PAGE_SITES] __attribute__((aligned(64)));  /* one per page-watching site */
static UInt n_page_slots = 0;

/* Sites: what pw_miss saw of each instruction's line lookups, and how it is instrumented. A
   direct-mapped table: a site that loses its entry to another starts counting again (and is
   instrumented with lines if translated again meanwhile), which changes speed only. */
enum { SITE_LINES, SITE_PAGES, SITE_LINES_FOR_GOOD };
typedef struct {
   Addr   ip;
   UInt   private_misses;  /* line lookups in window `window`: misses on lines only the thread */
   UInt   other_misses;    /* touched in the window, and the others */
   UInt   window;
   UShort slot;            /* 1 + its page slot, once it watches pages */
   UChar  mode;
} Site;
#define SITE_BITS 14
#define SWITCH_MISSES 16384            /* private misses of a site in one window that make it watch pages */
#define FALLBACKS_TO_LINES 256         /* and a quarter of its page misses: back to lines for good */
static Site sites[1 << SITE_BITS];
static Addr to_retranslate[256];       /* sites whose mode changed, discarded when client code stops */
static Int n_to_retranslate = 0;
static ULong window_started_at = 0;    /* total_accesses when the window began */

static ULong key_bits = 1ULL << KEY_SHIFT;         /* stamp of the running thread, shifted */
static ULong next_stamp = 1;
static UInt* stamp_of = NULL;                      /* per thread: its stamp, valid in stamp_window */
static UInt* stamp_window = NULL;
/* Counted inline, per superblock; credited to the running thread when its slice ends. */
static ULong total_accesses = 0;
static ULong total_instructions = 0;
static ULong credited_accesses = 0, credited_instructions = 0;
static ULong next_window_at = 0;  /* instrumented code calls advance_window once total_accesses reaches it */
static UInt window = 1;            /* the current time window */

static void settle_all(Bool forget);
static void grow_hot(Int new_cap, Int old_cap);
static void credit_slice(void);
static void set_stamp(void);

/*------------------------------------------------------------*/
/*--- Threads                                              ---*/
/*------------------------------------------------------------*/

static Int* index_of_tid = NULL;    /* Valgrind ThreadId -> creation index */
static Int n_threads = 1;           /* the main thread exists from the start */
static Int cur = 0;                 /* creation index of the thread running client code */
static Int live_threads = 1;
static ULong* accv = NULL;          /* per thread: memory accesses */
static ULong* load = NULL;          /* per thread: guest instructions */
static ULong* load_together = NULL; /* per thread: guest instructions while another thread lived */
static Int* creator_of = NULL;      /* per thread: creation index of its creator (-1: main) */
static ULong* born = NULL;          /* per thread: total_accesses when it was created */
static ULong* ended = NULL;         /* per thread: total_accesses when it exited; 0 while alive */
static ULong* comm = NULL;          /* C[t * cap + u] */
/* The same under the other sharing model (--pw-sharing=write: any; any: write), counted beside it
   so that analyze can say where the two disagree; up to OTHER_THREADS threads (its memory). */
static ULong* comm_other = NULL;
#define OTHER_THREADS 1024
static Bool other_lost = False;     /* the threads outgrew it: no other matrix */
static Int cap = 0;

static void grow_threads(Int needed)
{
   if (needed <= cap) return;
   Int new_cap = cap ? cap : 16;
   while (new_cap < needed) new_cap *= 2;
   ULong* new_comm = VG_(calloc)("pw.comm", (SizeT)new_cap * new_cap, sizeof(ULong));
   ULong* new_other = !clo_mazouz && !other_lost && new_cap <= OTHER_THREADS
                      ? VG_(calloc)("pw.comm", (SizeT)new_cap * new_cap, sizeof(ULong)) : NULL;
   other_lost = !clo_mazouz && new_other == NULL;
   ULong* new_accv = VG_(calloc)("pw.accv", new_cap, sizeof(ULong));
   ULong* new_load = VG_(calloc)("pw.load", new_cap, sizeof(ULong));
   UInt* new_stamp_of = VG_(calloc)("pw.stamps", new_cap, sizeof(UInt));
   UInt* new_stamp_window = VG_(calloc)("pw.stamps", new_cap, sizeof(UInt));
   Int* new_creator_of = VG_(calloc)("pw.life", new_cap, sizeof(Int));
   ULong* new_born = VG_(calloc)("pw.life", new_cap, sizeof(ULong));
   ULong* new_ended = VG_(calloc)("pw.life", new_cap, sizeof(ULong));
   ULong* new_load_together = VG_(calloc)("pw.load", new_cap, sizeof(ULong));
   for (Int t = 0; t < cap; t++) {
      new_load_together[t] = load_together[t];
      new_creator_of[t] = creator_of[t];
      new_born[t] = born[t];
      new_ended[t] = ended[t];
      VG_(memcpy)(new_comm + (SizeT)t * new_cap, comm + (SizeT)t * cap, cap * sizeof(ULong));
      if (new_other) VG_(memcpy)(new_other + (SizeT)t * new_cap, comm_other + (SizeT)t * cap, cap * sizeof(ULong));
      new_accv[t] = accv[t];
      new_load[t] = load[t];
      new_stamp_of[t] = stamp_of[t];
      new_stamp_window[t] = stamp_window[t];
   }
   if (comm) {
      VG_(free)(comm); VG_(free)(accv); VG_(free)(load); VG_(free)(stamp_of); VG_(free)(stamp_window);
      VG_(free)(creator_of); VG_(free)(born); VG_(free)(ended); VG_(free)(load_together);
   }
   grow_hot(new_cap, cap);
   if (comm_other) VG_(free)(comm_other);
   comm_other = new_other;
   comm = new_comm; accv = new_accv; load = new_load; stamp_of = new_stamp_of; stamp_window = new_stamp_window;
   creator_of = new_creator_of; born = new_born; ended = new_ended; load_together = new_load_together;
   cap = new_cap;
}

static void pw_thread_create(ThreadId parent, ThreadId child)
{
   tl_assert(child < VG_N_THREADS);
   if (parent == VG_INVALID_THREADID) {  /* the main thread, announced at start-up */
      index_of_tid[child] = 0;
      return;
   }
   if (n_threads >= MAX_THREADS) return;
   credit_slice();  /* what ran before this thread existed was not "together" with it */
   Int index = n_threads++;
   index_of_tid[child] = index;
   live_threads++;
   grow_threads(n_threads);
   tl_assert(index < cap);  /* its row and column of the matrix, and a UShort sharer id */
   creator_of[index] = index_of_tid[parent];
   tl_assert(creator_of[index] >= 0 && creator_of[index] < index);  /* created before it */
   born[index] = total_accesses;
   ended[index] = 0;
}

static void pw_thread_exit(ThreadId tid)
{
   Int index = index_of_tid[tid];
   credit_slice();
   if (index >= 0 && index < n_threads) ended[index] = total_accesses + 1;  /* + 1: 0 means alive */
   if (live_threads > 1) live_threads--;
}

static void advance_window(void);

/* Called each time a thread enters generated code (after every syscall, signal and scheduler
   tick too); what changes is only whether it is another thread. */
static void pw_start_client_code(ThreadId tid, ULong blocks)
{
   (void)blocks;
   Int next = index_of_tid[tid];
   if (next != cur) {
      tl_assert(next >= 0 && next < n_threads);
      credit_slice();
      cur = next;
      set_stamp();
   }
   advance_window();
}

/*------------------------------------------------------------*/
/*--- Lines                                                ---*/
/*------------------------------------------------------------*/

/* What the tool knows of one line: the threads that touched it in the current window. */
struct LineEntry {
   UInt   window;             /* 0: never touched */
   UChar  n;                  /* sharers in use */
   UChar  skip;               /* not traced: read-only now, or a loader table (unless --pw-readonly=yes) */
   UShort index;              /* its place in its page */
   UShort sharer[SHARERS];
   UChar  wrote;              /* bit k: sharer[k] wrote the line in this window */
   UChar  hot;                /* 1 + its index in hot[], or 0 */
   UShort before;             /* accesses to it while not hot, 11 significant bits (see approximate) */
   UInt   events;             /* events of accesses to it, whole run, up to 2^32 - 1: a hot line
                                 counts on in its record (HotLine.events) */
};
STATIC_ASSERT(sizeof(LineEntry) == 32);

/* Lines are kept by page (4 KiB, 64 lines), found through a three-level directory indexed by the
   page number as in a page table: the lines of a page sit side by side, so code streaming
   through memory finds each next line's entry next to the last one, and entries never move. */
#define PAGE_SHIFT 12
#define LINES_PER_PAGE (1 << (PAGE_SHIFT - LINE_SHIFT))
#define DIR_BITS_3 11
#define DIR_BITS_2 12
#define DIR_BITS_1 12              /* 12 + 12 + 11 page bits + 12 = 47: user addresses on x86-64 */
struct PageLines {
   LineEntry line[LINES_PER_PAGE];
   UInt (*count)[SHARERS];    /* mazouz model: accesses per sharer of each line */
   struct PageLines* next;    /* all pages, for the mazouz sum */
   Addr page_no;
   /* Private pages (see there): in window `private_window`, only thread `owner` touched the page
      unless `shared`; `read` and `written` (bit k: line k) are lines it touched through page slots
      that its lines' entries do not know yet. `ever`: lines touched at all, for lines_touched. */
   ULong read, written, ever;
   ULong skips;               /* lines not traced (LineEntry.skip), as a mask */
   UInt  private_window;
   UShort owner;
   UChar shared;
   UChar hot_lines;           /* lines of it with a hot record: never private then */
   Bool  watched;             /* a page slot may hold it */
};

static PageLines*** directory[1 << DIR_BITS_1];
static PageLines* all_pages = NULL;
static ULong pages_used = 0;
static ULong directory_bytes = 0;
static ULong lines_touched = 0;
static ULong accesses_dropped = 0;  /* to lines past --pw-max-lines */
static UInt last_dump_ms = 0;

/* Which lines of a page hold no communication: all of them in a mapping without write permission
   now; else those wholly inside an object's GOT (the loader's table every call into a shared
   library reads). A line the GOT shares with data is counted: skipped, a small program's globals
   beside .got.plt lost every event of their sharing (two threads incrementing one counter: 28
   events of 12 million accesses, read as private work), and the line does travel between the
   caches when the data is written. */
static void set_skips(PageLines* page, Bool writable)
{
   for (Int k = 0; k < LINES_PER_PAGE; k++) page->line[k].skip = !clo_readonly && !writable;
   page->skips = !clo_readonly && !writable ? ~0ULL : 0;
   if (clo_readonly || !writable) return;
   Addr start = page->page_no << PAGE_SHIFT, end = start + (1 << PAGE_SHIFT);
   for (const DebugInfo* di = VG_(next_DebugInfo)(NULL); di != NULL; di = VG_(next_DebugInfo)(di)) {
      Addr table[2] = { VG_(DebugInfo_get_got_avma)(di), VG_(DebugInfo_get_gotplt_avma)(di) };
      SizeT size[2] = { VG_(DebugInfo_get_got_size)(di), VG_(DebugInfo_get_gotplt_size)(di) };
      for (Int i = 0; i < 2; i++) {
         if (size[i] == 0 || table[i] >= end || table[i] + size[i] <= start) continue;
         Addr line = (Addr)1 << LINE_SHIFT;
         Addr from = table[i] > start ? table[i] : start;
         Addr to = table[i] + size[i] < end ? table[i] + size[i] : end;
         from = (from + line - 1) & ~(line - 1);  /* whole lines only */
         to &= ~(line - 1);
         for (Addr a = from; a < to; a += line) {
            page->line[(a - start) >> LINE_SHIFT].skip = True;
            page->skips |= 1ULL << ((a - start) >> LINE_SHIFT);
         }
      }
   }
}

static Bool writable_now(Addr a)
{
   NSegment const* seg = VG_(am_find_nsegment)(a);
   return seg == NULL || seg->hasW;
}

static void* zeroed(const HChar* cost_centre, SizeT bytes)
{
   directory_bytes += bytes;
   return VG_(calloc)(cost_centre, 1, bytes);
}

/* The lines of a page, created at its first access; NULL past the memory bound. */
static PageLines* page_lines(Addr page_no)
{
   if (page_no >> (DIR_BITS_1 + DIR_BITS_2 + DIR_BITS_3)) return NULL;  /* not a user address */
   PageLines*** level2 = directory[page_no >> (DIR_BITS_2 + DIR_BITS_3)];
   if (level2 == NULL)
      level2 = directory[page_no >> (DIR_BITS_2 + DIR_BITS_3)] = zeroed("pw.dir", sizeof(void*) << DIR_BITS_2);
   PageLines** level3 = level2[(page_no >> DIR_BITS_3) & ((1 << DIR_BITS_2) - 1)];
   if (level3 == NULL)
      level3 = level2[(page_no >> DIR_BITS_3) & ((1 << DIR_BITS_2) - 1)] = zeroed("pw.dir", sizeof(void*) << DIR_BITS_3);
   PageLines** slot = &level3[page_no & ((1 << DIR_BITS_3) - 1)];
   if (*slot != NULL) return *slot;
   if ((Long)((pages_used + 1) * LINES_PER_PAGE) > clo_max_lines) return NULL;
   PageLines* page = VG_(calloc)("pw.lines", 1, sizeof(PageLines));
   page->page_no = page_no;
   for (Int k = 0; k < LINES_PER_PAGE; k++) page->line[k].index = (UShort)k;
   set_skips(page, writable_now(page_no << PAGE_SHIFT));  /* mappings are whole pages */
   if (clo_mazouz) page->count = VG_(calloc)("pw.counts", LINES_PER_PAGE, sizeof *page->count);
   page->next = all_pages;
   all_pages = page;
   pages_used++;
   return *slot = page;
}

static LineEntry* line_entry(Addr line_no)
{
   static Addr last_page_no = ~(Addr)0;
   static PageLines* last_page = NULL;
   Addr page_no = line_no >> (PAGE_SHIFT - LINE_SHIFT);
   if (page_no != last_page_no) {
      last_page = page_lines(page_no);
      last_page_no = page_no;
   }
   if (last_page == NULL) {
      accesses_dropped++;
      return NULL;
   }
   return &last_page->line[line_no & (LINES_PER_PAGE - 1)];
}

static PageLines* page_of(LineEntry* e)
{
   return (PageLines*)(e - e->index);  /* line[] is the page's first field */
}

static UInt* counts_of(LineEntry* e)
{
   return page_of(e)->count[e->index];
}

/* Hot lines (see the top of the file). */
typedef struct {
   LineEntry* line;
   Addr       address;      /* a byte of it the program accessed */
   Addr       read_ip, write_ip;  /* instructions seen reading and writing it (0: none yet) */
   ULong*     reads;        /* per thread, since the line became hot (cap entries) */
   ULong*     writes;
   ULong*     pairs;        /* C[t * cap + u] of its events since then; NULL past HOT_PAIR_THREADS */
   ULong      events;       /* the line's events in the whole run: a spin-waited flag passes 2^32 */
   ULong      before;       /* accesses to it before it became hot (approximate: LineEntry.before) */
} HotLine;
static HotLine hot[HOT_LINES];
static Int n_hot = 0;
static ULong events_total = 0;      /* events of all lines, for the hot threshold */
static ULong coldest_events = 0;    /* events of the coldest hot line when the table filled */
static Addr access_address = 0;     /* the access being processed by a helper, and its instruction */
static Addr access_ip = 0;

/* A count of accesses in 16 bits with 11 significant ones: below 2048 as it is, above as
   (2048 + mantissa) << (exponent - 1), rounded down. A thread spinning alone on a flag before
   another thread shares it makes millions of accesses that carry no event; without them the
   analysis would take the flag's accesses out of the matrix's only in part (see hot-before). */
static ULong approximate_value(UShort v)
{
   UInt exponent = v >> 11, mantissa = v & 2047;
   return exponent == 0 ? mantissa : (ULong)(2048 + mantissa) << (exponent - 1);
}

static UShort approximate_add(UShort v, ULong n)
{
   ULong sum = approximate_value(v) + n;
   if (sum < 2048) return (UShort)sum;
   UInt exponent = 1;
   while ((sum >> (exponent - 1)) >= 4096) exponent++;
   if (exponent > 31) return 0xFFFF;
   return (UShort)((exponent << 11) | ((sum >> (exponent - 1)) - 2048));
}

static ULong block_bytes(void);

static ULong tracer_bytes(void)
{
   ULong per_page = sizeof(PageLines) + (clo_mazouz ? LINES_PER_PAGE * sizeof(UInt[SHARERS]) : 0);
   ULong hot_bytes = (ULong)n_hot * cap * 2 * sizeof(ULong)
                     + (cap <= HOT_PAIR_THREADS ? (ULong)n_hot * cap * cap * sizeof(ULong) : 0);
   return sizeof directory + directory_bytes + pages_used * per_page + (ULong)cap * cap * sizeof(ULong) * (comm_other ? 2 : 1)
          + hot_bytes + block_bytes();
}

/*------------------------------------------------------------*/
/*--- Output                                               ---*/
/*------------------------------------------------------------*/

static ULong pair_value(Int t, Int u)
{
   return comm[(SizeT)t * cap + u] + comm[(SizeT)u * cap + t];
}

static void mazouz_alpha(void)
{
   /* alpha[i][j] += count_i + count_j for every line touched by both; kept in C's upper triangle. */
   VG_(memset)(comm, 0, (SizeT)cap * cap * sizeof(ULong));
   for (PageLines* page = all_pages; page != NULL; page = page->next)
      for (Int k = 0; k < LINES_PER_PAGE; k++) {
         LineEntry* e = &page->line[k];
         UInt* count = page->count[k];
         for (Int a = 0; a < e->n; a++)
            for (Int b = a + 1; b < e->n; b++) {
               Int i = e->sharer[a], j = e->sharer[b];
               comm[(SizeT)(i < j ? i : j) * cap + (i < j ? j : i)] += (ULong)count[a] + count[b];
            }
      }
}

/* One line of text: what the tool knows of `address` (a data symbol, the mapping). */
static void describe_data(Addr address, HChar* text, Int size)
{
   const HChar* name = NULL;
   PtrdiffT offset = 0;
   if (VG_(get_datasym_and_offset)(VG_(current_DiEpoch)(), address, &name, &offset)) {
      VG_(snprintf)(text, size, "variable %s+%ld", name, (long)offset);
      return;
   }
   NSegment const* seg = VG_(am_find_nsegment)(address);
   if (seg == NULL) VG_(snprintf)(text, size, "unmapped now");
   else if (seg->kind == SkFileC) VG_(snprintf)(text, size, "mapping of %s", VG_(am_get_filename)(seg));
   else if (seg->kind == SkAnonC && seg->isCH) VG_(snprintf)(text, size, "heap (brk)");
   else if (seg->kind == SkAnonC) VG_(snprintf)(text, size, "anonymous memory (malloc arenas, big blocks, stacks)");
   else if (seg->kind == SkShmC) VG_(snprintf)(text, size, "shared memory");
   else VG_(snprintf)(text, size, "memory of another kind");
}

static void write_code(const HChar* key, Addr ip)
{
   out_text(key);
   if (ip == 0) out_text(" -\n");
   else {
      out_text(" ");
      out_text(VG_(describe_IP)(VG_(current_DiEpoch)(), ip, NULL));
      out_text("\n");
   }
}

static void write_hot_lines(void)
{
   Int order[HOT_LINES];
   for (Int i = 0; i < n_hot; i++) order[i] = i;
   for (Int i = 1; i < n_hot; i++)  /* hottest first: insertion sort of at most HOT_LINES */
      for (Int k = i; k > 0 && hot[order[k]].events > hot[order[k - 1]].events; k--) {
         Int swap = order[k]; order[k] = order[k - 1]; order[k - 1] = swap;
      }
   out_printf("hot-lines %llu\n", (ULong)n_hot);
   HChar text[512];
   for (Int i = 0; i < n_hot; i++) {
      HotLine* h = &hot[order[i]];
      out_printf("hot 0x%llx", (ULong)h->address);
      out_printf(" %llu", h->events);
      out_printf(" %llu\n", h->before);
      describe_data(h->address, text, sizeof text);
      out_text("hot-where ");
      out_text(text);
      out_text("\n");
      write_code("hot-read", h->read_ip);
      write_code("hot-write", h->write_ip);
      out_text("hot-reads");
      for (Int t = 0; t < n_threads; t++) out_printf(" %llu", h->reads[t]);
      out_text("\nhot-writes");
      for (Int t = 0; t < n_threads; t++) out_printf(" %llu", h->writes[t]);
      out_text("\nhot-pairs");
      if (h->pairs)
         for (Int t = 0; t < n_threads; t++)
            for (Int u = t + 1; u < n_threads; u++) {
               ULong n = h->pairs[(SizeT)t * cap + u] + h->pairs[(SizeT)u * cap + t];
               if (n == 0) continue;
               out_printf(" %llu", (ULong)t);
               out_printf(" %llu", (ULong)u);
               out_printf(" %llu", n);
            }
      out_text("\n");
   }
}

static void write_blocks(void);

static void write_result(Bool partial)
{
   HChar tmp[4096];
   VG_(snprintf)(tmp, sizeof tmp, "%s.tmp", clo_out);
   SysRes res = VG_(open)(tmp, VKI_O_CREAT | VKI_O_WRONLY | VKI_O_TRUNC, 0644);
   if (sr_isError(res)) {
      VG_(umsg)("pinwise: cannot write %s\n", tmp);
      return;
   }
   out_fd = (Int)sr_Res(res);
   out_len = 0;
   Int t = n_threads;
   out_printf("pinwise-trace %llu\n", 1);
   out_text(clo_mazouz ? "model mazouz\n" : "model diener\n");
   out_printf("partial %llu\n", partial ? 1 : 0);
   out_printf("threads %llu\n", (ULong)t);
   if (clo_window_ms > 0) out_printf("window-ms %llu\n", (ULong)clo_window_ms);
   else out_printf("window %llu\n", clo_mazouz ? 0 : (ULong)clo_window);
   out_printf("accesses %llu\n", total_accesses);
   out_printf("lines %llu", lines_touched);
   out_printf(" %llu\n", accesses_dropped);
   out_printf("table-bytes %llu\n", tracer_bytes());
   out_printf("cache-bytes %llu\n", (((ULong)sizeof(CacheEntry) + sizeof(CacheSide) + sizeof(UInt)) << clo_cache_bits)
                                      + sizeof sites + sizeof page_slots);
   out_printf("page-sites %llu\n", (ULong)n_page_slots);
   out_text("accv");
   for (Int i = 0; i < t; i++) out_printf(" %llu", accv[i]);
   out_text("\nload");
   for (Int i = 0; i < t; i++) out_printf(" %llu", load[i]);
   out_text("\nload-together");
   for (Int i = 0; i < t; i++) out_printf(" %llu", load_together[i]);
   out_text("\ncreator -");
   for (Int i = 1; i < t; i++) out_printf(" %llu", (ULong)creator_of[i]);
   out_text("\nlifetime");
   for (Int i = 0; i < t; i++) {
      out_printf(" %llu", born[i]);
      out_printf(" %llu", ended[i] ? ended[i] - 1 : total_accesses);
   }
   out_text(clo_write_sharing ? "\nsharing write" : "\nsharing any");
   out_text("\nmatrix\n");
   if (clo_mazouz && !partial) mazouz_alpha();
   for (Int i = 0; i < t; i++) {
      for (Int j = 0; j < t; j++)
         out_printf(j ? " %llu" : "%llu", i == j ? 0 : pair_value(i, j));
      out_text("\n");
   }
   if (comm_other) {
      out_text(clo_write_sharing ? "other-sharing any\n" : "other-sharing write\n");
      for (Int i = 0; i < t; i++) {
         for (Int j = 0; j < t; j++)
            out_printf(j ? " %llu" : "%llu",
                       i == j ? 0 : comm_other[(SizeT)i * cap + j] + comm_other[(SizeT)j * cap + i]);
         out_text("\n");
      }
   }
   if (!clo_mazouz) write_hot_lines();
   write_blocks();
   out_flush();
   VG_(close)(out_fd);
   out_fd = -1;
   VG_(rename)(tmp, clo_out);
}

/*------------------------------------------------------------*/
/*--- Time blocks                                          ---*/
/*------------------------------------------------------------*/

/* The events of each pair of threads in blocks of the run's accesses, for pinwise.phases (a
   program whose threads change partners half way sums into one matrix that no placement serves).
   A block ends at the first window check past its length, and each pair's events counted since
   the block before are kept, for the pairs that had any: the counts pending in the line cache land
   in the block that settles them (a short swap of partners half way was placed at 52-54% of the
   accesses; settled at each block's end, they changed which lines became hot). At most MAX_BLOCKS
   blocks: when they are full, each two neighbours become one, twice as long. Only up to
   BLOCK_THREADS threads (a T x T table each block), and not under --pw-model=mazouz (its matrix
   is made at the end). */
#define BLOCK_THREADS 64
#define MAX_BLOCKS 64
#define FIRST_BLOCK (1ULL << 20)   /* accesses */

typedef struct {
   UInt block;
   UShort a, b;
   ULong events;
} BlockEvents;

static BlockEvents* block_events = NULL;
static SizeT n_block_events = 0, cap_block_events = 0;
static ULong block_seen[BLOCK_THREADS * BLOCK_THREADS];  /* pair_value(a, b) at the last block's end */
static ULong block_len = FIRST_BLOCK;
static ULong block_end_at = FIRST_BLOCK;
static UInt n_blocks = 0;           /* blocks closed */
static Bool blocks_off = False;     /* more threads than BLOCK_THREADS, or the mazouz model */

static ULong pair_value(Int t, Int u);

static void keep_block_event(UInt block, Int a, Int b, ULong events)
{
   if (n_block_events == cap_block_events) {
      cap_block_events = cap_block_events ? 2 * cap_block_events : 1024;
      block_events = VG_(realloc)("pw.blocks", block_events, cap_block_events * sizeof(BlockEvents));
   }
   block_events[n_block_events++] = (BlockEvents){block, (UShort)a, (UShort)b, events};
}

static void close_block(void)
{
   if (!blocks_off && (clo_mazouz || n_threads > BLOCK_THREADS)) {
      blocks_off = True;
      if (block_events) VG_(free)(block_events);
      block_events = NULL;
      n_block_events = cap_block_events = 0;
   }
   if (blocks_off) {
      block_end_at = ~0ULL;
      return;
   }
   /* the counts as settled: those pending in the line cache land in the block that settles them
      (settling them here would change which lines become hot, and so what the tool reports) */
   for (Int a = 0; a < n_threads; a++)
      for (Int b = a + 1; b < n_threads; b++) {
         ULong now = pair_value(a, b), *seen = &block_seen[a * BLOCK_THREADS + b];
         if (now > *seen) keep_block_event(n_blocks, a, b, now - *seen);
         *seen = now;
      }
   n_blocks++;
   if (n_blocks == MAX_BLOCKS) {
      for (SizeT i = 0; i < n_block_events; i++) block_events[i].block /= 2;
      n_blocks /= 2;
      block_len *= 2;
   }
   block_end_at = (ULong)(n_blocks + 1) * block_len;
   if (block_end_at <= total_accesses) block_end_at = total_accesses + block_len;
}

/* What the time blocks take: their events and the pairs' counts at the last block's end. */
static ULong block_bytes(void)
{
   return (ULong)cap_block_events * sizeof(BlockEvents) + sizeof block_seen;
}

/* The blocks closed and the one running (its events so far, as settled now). */
static void write_blocks(void)
{
   if (blocks_off || clo_mazouz || n_threads > BLOCK_THREADS) return;
   out_printf("blocks %llu", (ULong)n_blocks + 1);
   out_printf(" %llu\n", block_len);
   SizeT i = 0;
   for (UInt k = 0; k < n_blocks; k++) {
      out_text("block");
      for (; i < n_block_events && block_events[i].block == k; i++) {
         out_printf(" %llu", (ULong)block_events[i].a);
         out_printf(" %llu", (ULong)block_events[i].b);
         out_printf(" %llu", block_events[i].events);
      }
      out_text("\n");
   }
   out_text("block");
   for (Int a = 0; a < n_threads; a++)
      for (Int b = a + 1; b < n_threads; b++) {
         ULong now = pair_value(a, b), seen = block_seen[a * BLOCK_THREADS + b];
         if (now > seen) {
            out_printf(" %llu", (ULong)a);
            out_printf(" %llu", (ULong)b);
            out_printf(" %llu", now - seen);
         }
      }
   out_text("\n");
}

/*------------------------------------------------------------*/
/*--- The helpers called from instrumented code            ---*/
/*------------------------------------------------------------*/

static void hot_arrays(HotLine* h, Int new_cap, Int old_cap)
{
   ULong* reads = VG_(calloc)("pw.hot", new_cap, sizeof(ULong));
   ULong* writes = VG_(calloc)("pw.hot", new_cap, sizeof(ULong));
   ULong* pairs = new_cap <= HOT_PAIR_THREADS ? VG_(calloc)("pw.hot", (SizeT)new_cap * new_cap, sizeof(ULong)) : NULL;
   for (Int t = 0; t < old_cap; t++) {
      reads[t] = h->reads[t];
      writes[t] = h->writes[t];
      if (pairs && h->pairs) VG_(memcpy)(pairs + (SizeT)t * new_cap, h->pairs + (SizeT)t * old_cap, old_cap * sizeof(ULong));
   }
   if (h->reads) { VG_(free)(h->reads); VG_(free)(h->writes); }
   if (h->pairs) VG_(free)(h->pairs);
   h->reads = reads; h->writes = writes; h->pairs = pairs;
}

static void grow_hot(Int new_cap, Int old_cap)
{
   for (Int i = 0; i < n_hot; i++) hot_arrays(&hot[i], new_cap, old_cap);
}

/* Give `e` a hot record, taking the coldest one's when all are in use. */
static void promote(LineEntry* e)
{
   HotLine* h;
   if (n_hot < HOT_LINES) h = &hot[n_hot++];
   else {
      h = &hot[0];
      for (Int i = 1; i < HOT_LINES; i++)
         if (hot[i].events < h->events) h = &hot[i];
      if (h->events >= e->events) {  /* still the coldest: no rescan until e passes twice its events */
         coldest_events = h->events;
         return;
      }
      h->line->hot = 0;
      h->line->events = h->events > 0xFFFFFFFFULL ? 0xFFFFFFFFU : (UInt)h->events;
      h->line->before = 0;
      tl_assert(page_of(h->line)->hot_lines > 0);
      page_of(h->line)->hot_lines--;
   }
   if (h->reads == NULL) hot_arrays(h, cap, 0);
   VG_(memset)(h->reads, 0, cap * sizeof(ULong));
   VG_(memset)(h->writes, 0, cap * sizeof(ULong));
   if (h->pairs) VG_(memset)(h->pairs, 0, (SizeT)cap * cap * sizeof(ULong));
   h->line = e;
   h->events = e->events;
   h->before = approximate_value(e->before);
   h->address = access_address;
   h->read_ip = h->write_ip = 0;
   e->hot = (UChar)(h - hot + 1);
   page_of(e)->hot_lines++;  /* at most HOT_LINES, which a UChar holds */
   tl_assert(page_of(e)->hot_lines <= HOT_LINES);
   if (n_hot == HOT_LINES) {
      coldest_events = ~0ULL;
      for (Int i = 0; i < HOT_LINES; i++)
         if (hot[i].events < coldest_events) coldest_events = hot[i].events;
   }
}

/* `events` more events on line `e`: counted for it, and a hot record when it carries enough. A
   line's own count only decides when it becomes hot, and stops at 2^32 - 1 (by then it carries
   less than 1/64 of 2^38 events, or less than twice the coldest hot line); a hot line's record
   counts them all in 64 bits: spinning on a flag passes 2^32 in a few seconds under Valgrind. */
static inline void line_events(LineEntry* e, ULong events)
{
   events_total += events;
   if (e->hot) {
      hot[e->hot - 1].events += events;
      return;
   }
   ULong sum = (ULong)e->events + events;
   e->events = sum > 0xFFFFFFFFULL ? 0xFFFFFFFFU : (UInt)sum;
   if (e->events >= 256 && e->events >= events_total / 64
       && (n_hot < HOT_LINES || e->events > 2 * coldest_events))
      promote(e);
}

static inline Bool sharer_wrote(LineEntry* e, Int k)
{
   return (e->wrote >> k) & 1;
}

static Bool touch_page(PageLines* p);

/* Lines of page `p` touched for the first time (`lines`: bit k, line k); untraced ones do not count. */
static inline void count_new_lines(PageLines* p, ULong lines)
{
   lines &= ~p->skips;
   lines_touched += (ULong)__builtin_popcountll(lines & ~p->ever);
   p->ever |= lines;
}

/* Thread `t`, not a sharer of `e` yet, becomes one (the oldest is forgotten when all are taken). */
static void add_sharer(LineEntry* e, UShort t, Bool wrote)
{
   if (e->n < SHARERS) {
      e->wrote |= (UChar)(wrote << e->n);
      e->sharer[e->n++] = t;
   } else {
      for (Int k = 1; k < SHARERS; k++) e->sharer[k - 1] = e->sharer[k];
      e->sharer[SHARERS - 1] = t;
      e->wrote = (UChar)((e->wrote >> 1) | (wrote << (SHARERS - 1)));
   }
   /* callers add only a thread that is not a sharer yet: the sharers are distinct threads */
   tl_assert(e->n <= n_threads && t < n_threads);
}

/* Thread `t` touched line `e` in window `w` (as known later than the access: no events are due,
   since nobody else touched the line in `w` before it): it becomes a sharer of that window. */
static void note_sharer(LineEntry* e, UShort t, Bool wrote, UInt w)
{
   if (e->window > w) return;  /* what the entry knows is newer */
   if (e->window != w) {
      e->window = w;
      e->n = 1;
      e->sharer[0] = t;
      e->wrote = wrote;
      return;
   }
   for (Int k = 0; k < e->n; k++)
      if (e->sharer[k] == t) { e->wrote |= (UChar)(wrote << k); return; }
   add_sharer(e, t, wrote);
}

/* Thread `cur` accesses line `e` once: it becomes a sharer, and (diener) the access is an event
   with every other thread that touched the line in this window (with --pw-sharing=write, every
   other thread when the access writes, else those that wrote it). */
static void access_line(LineEntry* e, Bool is_write)
{
   if (e == NULL) return;
   if (!clo_mazouz) touch_page(page_of(e));
   if (e->skip) return;
   UShort t = (UShort)cur;
   count_new_lines(page_of(e), 1ULL << e->index);
   HotLine* h = e->hot ? &hot[e->hot - 1] : NULL;
   if (h) {
      if (is_write) { h->writes[t]++; h->write_ip = access_ip; }
      else { h->reads[t]++; h->read_ip = access_ip; }
   } else {
      e->before = approximate_add(e->before, 1);
   }
   if (clo_mazouz) {  /* one window, and a count per sharer */
      UInt* count = counts_of(e);
      e->window = window;
      for (Int k = 0; k < e->n; k++)
         if (e->sharer[k] == t) { count[k]++; return; }
      if (e->n < SHARERS) { e->sharer[e->n] = t; count[e->n] = 1; e->n++; }
      return;
   }
   if (e->window != window) {  /* first touch in this window */
      e->window = window;
      e->n = 1;
      e->sharer[0] = t;
      e->wrote = is_write;
      return;
   }
   Int mine = -1;
   ULong events = 0;
   ULong* row = comm + (SizeT)t * cap;
   ULong* other = comm_other ? comm_other + (SizeT)t * cap : NULL;
   for (Int k = 0; k < e->n; k++) {
      UShort u = e->sharer[k];
      Bool written = is_write || sharer_wrote(e, k);
      if (u == t) mine = k;
      else {
         if (!clo_write_sharing || written) {
            row[u]++;
            events++;
            if (h && h->pairs) h->pairs[(SizeT)t * cap + u]++;
         }
         if (other && (clo_write_sharing || written)) other[u]++;  /* any counts them all; write, written ones */
      }
   }
   if (mine >= 0) e->wrote |= (UChar)(is_write << mine);
   else add_sharer(e, t, is_write);
   if (events) line_events(e, events);
}

/* The instruction of the access being processed, for a hot line it read or wrote: its first
   access is counted by access_line, which notes it; the rest may be of the other kind. */
static void note_instruction(LineEntry* e, ULong reads, ULong writes)
{
   if (e == NULL || e->hot == 0) return;
   if (reads) hot[e->hot - 1].read_ip = access_ip;
   if (writes) hot[e->hot - 1].write_ip = access_ip;
}

/* More accesses of thread `t` to a line it already shares, `reads` and `writes` of them: each
   adds the same events as the last of its kind. */
static void repeat_accesses(LineEntry* e, ULong reads, ULong writes, UShort t)
{
   if (e == NULL || e->skip || reads + writes == 0) return;
   if (clo_mazouz) {
      UInt* counts = counts_of(e);
      for (Int k = 0; k < e->n; k++)
         if (e->sharer[k] == t) { counts[k] += (UInt)(reads + writes); return; }
      return;
   }
   if (writes > 0)
      for (Int k = 0; k < e->n; k++)
         if (e->sharer[k] == t) e->wrote |= (UChar)(1 << k);
   ULong events = 0;
   for (Int k = 0; k < e->n; k++)
      if (e->sharer[k] != t) events += !clo_write_sharing || sharer_wrote(e, k) ? reads + writes : writes;
   if (events) line_events(e, events);  /* first: the line may become hot with these accesses */
   HotLine* h = e->hot ? &hot[e->hot - 1] : NULL;
   if (h) { h->reads[t] += reads; h->writes[t] += writes; }
   else e->before = approximate_add(e->before, reads + writes);
   if (events == 0 && (comm_other == NULL || e->n < 2)) return;  /* no other sharer: no event in either model */
   ULong* row = comm + (SizeT)t * cap;
   ULong* other = comm_other ? comm_other + (SizeT)t * cap : NULL;
   for (Int k = 0; k < e->n; k++) {
      UShort u = e->sharer[k];
      if (u == t) continue;
      ULong any = reads + writes, written = sharer_wrote(e, k) ? reads + writes : writes;
      ULong add = clo_write_sharing ? written : any;
      row[u] += add;
      if (h && h->pairs) h->pairs[(SizeT)t * cap + u] += add;
      if (other) other[u] += clo_write_sharing ? any : written;
   }
}

static inline UInt slot_of(Addr line_no)
{
   return (UInt)(line_no & ((1 << clo_cache_bits) - 1));
}

/* Count the slot's pending accesses; the entry stays valid. */
static void settle_slot(UInt slot)
{
   CacheEntry* c = &line_cache[slot];
   CacheSide* side = &cache_side[slot];
   if (side->flags & SLOT_RENEWED) {  /* the line's entry learns of the renewal's first access */
      note_sharer(side->line, side->owner, (side->flags & SLOT_RENEWED_BY_WRITE) != 0, side->window);
      side->flags = SLOT_PRIVATE;
   }
   if (c->pending == 0) return;  /* the common case of streaming: nothing to count */
   tl_assert(side->owner < n_threads);  /* the pending accesses are a thread's */
   if (side->line != NULL) repeat_accesses(side->line, c->pending & 0xFFFFFFFF, c->pending >> 32, side->owner);
   c->pending = 0;
}

/* The slot holds nothing (settled before). */
static void empty_slot(UInt slot)
{
   line_cache[slot].key = 0;
   cache_side[slot].line = NULL;
   cache_side[slot].flags = 0;
}

/* Before an access of the running thread to a line outside the fast path (the second line of a
   crossing access, a guarded or very wide access): the line's sharers may change, so the slot is
   settled and, unless it holds this thread's own entry for the line, emptied. Another thread's
   entry must not survive: marked private, its later hits would miss the events with this one. */
static void before_direct_access(Addr line_no)
{
   UInt slot = slot_of(line_no);
   settle_slot(slot);
   if (line_cache[slot].key != (line_no | key_bits)) empty_slot(slot);
}

/*------------------------------------------------------------*/
/*--- Private pages                                        ---*/
/*------------------------------------------------------------*/

/* The slot's lines go to its page (to the page's masks while the page is still private to the
   slot's thread in the slot's window; else they are of a window that ended), and the slot empties. */
static void flush_page_slot(PageSlot* s)
{
   if (s->key == 0) return;
   PageLines* p = s->page;
   count_new_lines(p, s->read | s->written);
   if (!p->shared && p->private_window == s->window && p->owner == s->owner) {
      p->read |= s->read;
      p->written |= s->written;
   }
   s->key = 0;
   s->read = s->written = 0;
}

static void flush_page_slots(void)
{
   for (UInt i = 0; i < n_page_slots; i++) flush_page_slot(&page_slots[i]);
}

/* The slots that hold page `p` (several sites may watch it, in any window). */
static void flush_page(PageLines* p)
{
   if (!p->watched) return;
   for (UInt i = 0; i < n_page_slots; i++)
      if (page_slots[i].key != 0 && page_slots[i].page == p) flush_page_slot(&page_slots[i]);
   p->watched = False;
}

/* Another thread touches private page `p` in its window: the owner's lines become known to their
   entries (their line slots settled first: what is pending there belongs to the entries as they
   are, and emptied, since the owner is no longer their only possible sharer), and the page is
   shared until the window ends. */
static void dissolve(PageLines* p)
{
   flush_page(p);
   for (ULong touched = p->read | p->written; touched != 0; touched &= touched - 1) {
      Int k = __builtin_ctzll(touched);
      Addr line_no = p->page_no * LINES_PER_PAGE + (Addr)k;
      UInt slot = slot_of(line_no);
      if (line_cache[slot].key != 0 && LINE_OF_KEY(line_cache[slot].key) == line_no) {
         settle_slot(slot);
         empty_slot(slot);
      }
      if (!p->line[k].skip) note_sharer(&p->line[k], p->owner, (p->written >> k) & 1, p->private_window);
   }
   p->shared = True;
   p->read = p->written = 0;
}

/* The running thread touches page `p` for the first time in this window through a line (not a
   page slot). Returns whether that dissolved the page, private to another thread until now. */
static Bool touch_page(PageLines* p)
{
   if (p->private_window != window) {
      p->private_window = window;
      p->owner = (UShort)cur;
      p->shared = False;
      p->read = p->written = 0;
      return False;
   }
   if (p->shared || p->owner == cur) return False;
   dissolve(p);
   return True;
}

static Site* site_of(Addr ip)
{
   Site* s = &sites[(ip ^ (ip >> SITE_BITS) ^ (ip >> (2 * SITE_BITS))) & ((1 << SITE_BITS) - 1)];
   if (s->ip != ip) {
      VG_(memset)(s, 0, sizeof *s);
      s->ip = ip;
      s->mode = clo_page_mode == PAGE_MODE_ALWAYS ? SITE_PAGES : SITE_LINES;
   }
   return s;
}

/* The site is instrumented the other way from its next translation on (none while too many
   wait to be dropped: it keeps counting, and switches later). */
static void switch_site(Site* s, UChar mode)
{
   if (n_to_retranslate == (Int)(sizeof to_retranslate / sizeof to_retranslate[0])) return;
   to_retranslate[n_to_retranslate++] = s->ip;
   s->mode = mode;
}

extern void VG_(discard_translations)(Addr start, ULong range, const HChar* who);

/* Outside generated code: the translations of sites whose mode changed are dropped, so that the
   next execution instruments them anew. */
static void pw_stop_client_code(ThreadId tid, ULong blocks)
{
   (void)tid; (void)blocks;
   for (Int i = 0; i < n_to_retranslate; i++) VG_(discard_translations)(to_retranslate[i], 1, "pinwise");
   n_to_retranslate = 0;
}

/* Settle every slot that may hold pending events; with `forget` also empty them. */
static void settle_all(Bool forget)
{
   for (UInt i = 0; i < n_shared_slots; i++) {
      UInt slot = shared_slots[i];
      settle_slot(slot);
      if (forget) empty_slot(slot);
   }
   if (forget) n_shared_slots = 0;
   flush_page_slots();  /* the lines page slots touched are counted in lines_touched then */
}

/* The running thread's stamp: one per thread and window, so its cached lines stay valid while
   other threads run in between and lapse when the window closes. Stamps are reused from 1 once
   they run out, after every pending count is settled (the writes of lines only their thread
   shares too: they make it a writer) and the cache emptied. */
static void set_stamp(void)
{
   if (stamp_window[cur] != window) {
      if (next_stamp > (ULong)clo_max_stamp) {
         for (UInt slot = 0; slot < 1U << clo_cache_bits; slot++) settle_slot(slot);
         flush_page_slots();
         n_shared_slots = 0;
         VG_(memset)(line_cache, 0, sizeof(CacheEntry) << clo_cache_bits);
         VG_(memset)(cache_side, 0, sizeof(CacheSide) << clo_cache_bits);
         VG_(memset)(stamp_window, 0, cap * sizeof(UInt));
         next_stamp = 1;
      }
      stamp_of[cur] = (UInt)next_stamp++;
      stamp_window[cur] = window;
      /* 0 is an empty slot's key; above the limit the stamp would not fit above a line's bits */
      tl_assert(stamp_of[cur] >= 1 && stamp_of[cur] <= (ULong)clo_max_stamp);
   }
   key_bits = (ULong)stamp_of[cur] << KEY_SHIFT;
}

static void close_window(void)
{
   window++;
   tl_assert(window != 0);  /* 0 is a line never touched; entries compare windows as times */
   window_started_at = total_accesses;
   set_stamp();
   if (clo_dump_ms > 0 && !clo_mazouz) {
      UInt now = VG_(read_millisecond_timer)();
      if (now - last_dump_ms >= (UInt)clo_dump_ms) {
         last_dump_ms = now;
         settle_all(False);
         credit_slice();
         write_result(True);
      }
   }
}

/* A program run under the tool can end the current window itself with this client request
   (valgrind.h: VALGRIND_DO_CLIENT_REQUEST_STMT(VG_USERREQ_TOOL_BASE('P', 'W'), 0, 0, 0, 0, 0)),
   which puts a window's end at a known point of the program: the tests plant events across
   windows with it (tests/programs/renew.c). The mazouz model has one window and ignores it. */
#define PW_USERREQ_CLOSE_WINDOW VG_USERREQ_TOOL_BASE('P', 'W')

static Bool pw_client_request(ThreadId tid, UWord* arg, UWord* ret)
{
   (void)tid;
   if (arg[0] != PW_USERREQ_CLOSE_WINDOW) return False;
   if (!clo_mazouz) close_window();
   *ret = 0;
   return True;
}

static void credit_slice(void)
{
   accv[cur] += total_accesses - credited_accesses;
   load[cur] += total_instructions - credited_instructions;
   if (live_threads > 1) load_together[cur] += total_instructions - credited_instructions;
   credited_accesses = total_accesses;
   credited_instructions = total_instructions;
}

#define CLOCK_CHECK_ACCESSES (1 << 16)  /* time windows: how often the clock is read */

static ULong window_end_at = 0;        /* total_accesses at which the window ends (time windows: the clock is read) */
static ULong settle_at;                 /* total_accesses at which every slot is settled */

/* Called by instrumented code once total_accesses reaches next_window_at: the sooner of the two. */
static void advance_window(void)
{
   if (total_accesses >= settle_at) {
      for (UInt slot = 0; slot < 1U << clo_cache_bits; slot++) settle_slot(slot);
      settle_at = total_accesses + (ULong)clo_settle_every;
   }
   if (total_accesses >= window_end_at) {
      if (clo_mazouz) {  /* one window: the whole run */
         window_end_at = ~0ULL;
      } else if (clo_window_ms == 0) {
         /* Valgrind runs one thread at a time, in slices of many accesses: a window must span a
            slice of every live thread to see their sharing, so it grows with their number. */
         window_end_at = total_accesses + (ULong)clo_window * live_threads;
         close_window();
      } else {
         static UInt window_start = 0;
         UInt now = VG_(read_millisecond_timer)();
         if (now - window_start >= (UInt)clo_window_ms) {
            window_start = now;
            close_window();
         }
         window_end_at = total_accesses + CLOCK_CHECK_ACCESSES;
      }
   }
   if (total_accesses >= block_end_at) close_block();
   next_window_at = window_end_at < settle_at ? window_end_at : settle_at;
   if (block_end_at < next_window_at) next_window_at = block_end_at;
}

/* The accesses an instrumented lookup stands for, packed into one argument: reads, writes,
   whether the first of them writes, and (for pw_miss) the bytes the widest of them spans. */
#define PACK(reads, writes, first_write, size) \
   ((ULong)(reads) | (ULong)(writes) << 24 | (ULong)(first_write) << 48 | (ULong)(size) << 49)
#define READS_OF(p) ((p) & 0xFFFFFF)
#define WRITES_OF(p) (((p) >> 24) & 0xFFFFFF)
#define FIRST_WRITE_OF(p) (((p) >> 48) & 1)
#define SIZE_OF(p) ((p) >> 49)

/* The running thread's accesses that `packed` stands for, to each of lines first..last, outside
   the fast path: each line's slot is settled first (before_direct_access), then the first access
   is counted with its sharers and the rest repeat it. */
static void direct_accesses(Addr first, Addr last, ULong packed)
{
   ULong reads = READS_OF(packed), writes = WRITES_OF(packed);
   Bool first_write = FIRST_WRITE_OF(packed);
   for (Addr line = first; line <= last; line++) {
      before_direct_access(line);
      LineEntry* e = line_entry(line);
      access_line(e, first_write);
      repeat_accesses(e, reads - !first_write, writes - first_write, (UShort)cur);
      note_instruction(e, reads - !first_write, writes - first_write);
   }
}

/* A line lookup of `site` missed, on a line only its thread touched in the window (`private`) or not.
   Thousands of private misses in one window and few others: a stream through private memory
   larger than the CPU's caches, which pages serve better. */
static void count_line_miss(Site* site, Bool private)
{
   if (site->mode != SITE_LINES) return;  /* (switched: this translation is dropped at the slice's end) */
   if (site->window != window) {
      site->window = window;
      site->private_misses = site->other_misses = 0;
   }
   if (private) site->private_misses++;
   else site->other_misses++;
   if (clo_page_mode == PAGE_MODE_AUTO && site->private_misses >= SWITCH_MISSES
       && 16ULL * site->other_misses <= site->private_misses)
      switch_site(site, SITE_PAGES);
}

/* The running thread's first access in this window to a line its slot still holds from an earlier
   window, when no other thread has touched the line since (SLOT_PRIVATE): streaming through a
   private working set larger than a window does this for every line in every window. Those
   earlier accesses added no events, and which of them wrote no longer matters, so their pending
   count is dropped (but for a count of thousands, a thread spinning alone on a flag, which the
   line's count of accesses takes, or its hot record); the slot takes the new stamp and notes the
   window and the first access, which settle_slot writes into the line's entry before anything
   reads it (every access to the line by another thread, and every access outside the fast path,
   settles its slot first). The line's
   entry, in memory the streaming thread no longer has in its caches, is not touched. */
static void renew_private(UInt slot, Addr first, Bool first_write, ULong pending)
{
   ULong old = line_cache[slot].pending, reads = old & 0xFFFFFFFF, writes = old >> 32;
   LineEntry* e = cache_side[slot].line;
   if (reads + writes >= 4096 && e != NULL) {  /* a thread spinning alone on a flag, not a stream: counted */
      if (e->hot) {
         hot[e->hot - 1].reads[cache_side[slot].owner] += reads;
         hot[e->hot - 1].writes[cache_side[slot].owner] += writes;
      } else {
         e->before = approximate_add(e->before, reads + writes);
      }
   }
   line_cache[slot].key = first | key_bits;
   line_cache[slot].pending = pending;
   cache_side[slot].window = window;
   cache_side[slot].flags = SLOT_PRIVATE | SLOT_RENEWED | (first_write ? SLOT_RENEWED_BY_WRITE : 0);
}

/* The inline lookup missed (the thread's first access to the line in this window, a line taken
   by another thread since, or an access crossing into a second line). The inline code has already
   added the lookup's accesses to the pending count of the slot of its first line, whatever entry
   the slot held: unless that was this thread's entry for the line, the add is taken back. The
   first access is counted now, and the slot takes the line with the rest of the lookup's accesses
   pending. */
static VG_REGPARM(3) void pw_miss(Addr address, ULong packed, Addr ip)
{
   ULong reads = READS_OF(packed), writes = WRITES_OF(packed);
   Bool first_write = FIRST_WRITE_OF(packed);
   access_address = address;
   access_ip = ip;
   Addr first = address >> LINE_SHIFT, last = (address + SIZE_OF(packed) - 1) >> LINE_SHIFT;
   UInt slot = slot_of(first);
   CacheEntry* c = &line_cache[slot];
   CacheSide* side = &cache_side[slot];
   Bool cached = c->key == (first | key_bits);
   if (!cached) c->pending -= PENDING(reads, writes);  /* before anything settles the slot */
   if (last != first) direct_accesses(last, last, packed);
   if (cached) return;  /* only the crossing sent us here */
   ULong rest = PENDING(reads, writes) - PENDING(!first_write, first_write);
   Site* site = clo_page_mode == PAGE_MODE_NEVER || clo_mazouz ? NULL : site_of(ip);
   if ((side->flags & SLOT_PRIVATE) && side->owner == cur && LINE_OF_KEY(c->key) == first
       && !touch_page(page_of(side->line))) {  /* (a page slot of another thread may have touched it) */
      renew_private(slot, first, first_write, rest);
      if (site) count_line_miss(site, True);
      return;
   }
   settle_slot(slot);
   LineEntry* e = line_entry(first);
   access_line(e, first_write);
   note_instruction(e, reads - !first_write, writes - first_write);
   if (e != NULL && e->skip) e = NULL;
   /* A line only this thread has touched in the window has no events to settle until another
      thread takes its slot; a shared one is listed, to be settled before dumps. */
   Bool shared = e != NULL && (clo_mazouz || e->n > 1);
   if (shared && n_shared_slots == 1U << clo_cache_bits) settle_all(True);
   c->key = first >> KEY_SHIFT ? 0 : first | key_bits;  /* beyond user addresses: never cached */
   c->pending = rest;
   side->line = e;
   side->owner = (UShort)cur;
   side->flags = c->key != 0 && e != NULL && !clo_mazouz && e->n == 1 && e->hot == 0 ? SLOT_PRIVATE : 0;
   if (shared) {
      tl_assert(n_shared_slots < 1U << clo_cache_bits);  /* settle_all(True) above made room */
      shared_slots[n_shared_slots++] = slot;
   }
   if (site) count_line_miss(site, side->flags == SLOT_PRIVATE);
}

/* A page lookup missed (see "Private pages"): the page slot holds another page, or this one for
   another thread or an earlier window, or the access crosses into a second line. The slot takes
   the page when it is private to the running thread in this window (which this access may make it
   be); else the access is processed line by line. The inline code counted the access already. */
static VG_REGPARM(3) void pw_page_miss(Addr address, ULong packed, PageSlot* s)
{
   ULong writes = WRITES_OF(packed);
   Addr first = address >> LINE_SHIFT, last = (address + SIZE_OF(packed) - 1) >> LINE_SHIFT;
   Addr page_no = address >> PAGE_SHIFT;
   if (s->misses_window != window) {
      s->misses_window = window;
      s->misses = 0;
   }
   s->misses++;
   PageLines* p = first == last && !(page_no >> KEY_SHIFT) ? page_lines(page_no) : NULL;
   if (p != NULL && p->hot_lines == 0) {
      flush_page_slot(s);
      touch_page(p);
      if (!p->shared && p->owner == cur) {
         ULong bit = 1ULL << (first & (LINES_PER_PAGE - 1));
         s->key = page_no | key_bits;
         s->page = p;
         p->watched = True;
         s->read = writes ? 0 : bit;
         s->written = writes ? bit : 0;
         s->window = window;
         s->owner = (UShort)cur;
         s->taken++;
         /* Pages change as often as lines would miss (a site that jumps from page to page): lines serve
            better. */
         if (clo_page_mode == PAGE_MODE_AUTO && s->misses >= SWITCH_MISSES
             && 16ULL * s->misses >= total_accesses - window_started_at)
            switch_site(site_of(s->ip), SITE_LINES_FOR_GOOD);
         return;
      }
   }
   s->fallbacks++;
   if (clo_page_mode == PAGE_MODE_AUTO && s->fallbacks >= FALLBACKS_TO_LINES && 4ULL * s->fallbacks >= s->taken)
      switch_site(site_of(s->ip), SITE_LINES_FOR_GOOD);
   access_address = address;
   access_ip = s->ip;
   direct_accesses(first, last, packed);
}

/* Accesses that take no fast path (guarded ones, and ones too wide to cache): count and process.
   Windows advance at the next superblock, which keeps the stamp of this one's lookups. */
static VG_REGPARM(3) void pw_access_counted(Addr address, SizeT size, ULong packed, Addr ip)
{
   total_accesses += READS_OF(packed) + WRITES_OF(packed);
   access_address = address;
   access_ip = ip;
   direct_accesses(address >> LINE_SHIFT, (address + size - 1) >> LINE_SHIFT, packed);
}

/* The program changed the protection of [a, a + len) (mmap, mprotect, brk, mremap): the lines
   of its pages already known follow it, and the line cache forgets them (settled first). */
static void protection_changed(Addr a, SizeT len, Bool writable)
{
   if (len == 0) return;
   Addr page_no = a >> PAGE_SHIFT, last_page = (a + len - 1) >> PAGE_SHIFT;
   const Addr span3 = 1ULL << DIR_BITS_3, span2 = 1ULL << (DIR_BITS_2 + DIR_BITS_3);
   while (page_no <= last_page && !(page_no >> (DIR_BITS_1 + DIR_BITS_2 + DIR_BITS_3))) {
      /* what the directory does not hold is passed over a whole level at a time */
      PageLines*** level2 = directory[page_no >> (DIR_BITS_2 + DIR_BITS_3)];
      if (level2 == NULL) { page_no = (page_no / span2 + 1) * span2; continue; }
      PageLines** level3 = level2[(page_no >> DIR_BITS_3) & ((1 << DIR_BITS_2) - 1)];
      if (level3 == NULL) { page_no = (page_no / span3 + 1) * span3; continue; }
      PageLines* page = level3[page_no & (span3 - 1)];
      if (page != NULL) {
         flush_page(page);  /* its lines were touched under the old protection */
         set_skips(page, writable);
         for (Int k = 0; k < LINES_PER_PAGE; k++) {
            Addr line_no = page_no * LINES_PER_PAGE + k;
            UInt cache_slot = slot_of(line_no);
            ULong key = line_cache[cache_slot].key;
            if (key != 0 && LINE_OF_KEY(key) == line_no) {
               settle_slot(cache_slot);
               empty_slot(cache_slot);
            }
         }
      }
      page_no++;
   }
}

static void pw_mprotect(Addr a, SizeT len, Bool rr, Bool ww, Bool xx)
{
   (void)rr; (void)xx;
   protection_changed(a, len, ww);
}

static void pw_mmap(Addr a, SizeT len, Bool rr, Bool ww, Bool xx, ULong di_handle)
{
   (void)rr; (void)xx; (void)di_handle;
   protection_changed(a, len, ww);
}

static void pw_brk(Addr a, SizeT len, ThreadId tid)
{
   (void)tid;
   protection_changed(a, len, True);
}

static void pw_remap(Addr from, Addr to, SizeT len)
{
   (void)from;
   protection_changed(to, len, writable_now(to));
}

/*------------------------------------------------------------*/
/*--- Instrumentation                                      ---*/
/*------------------------------------------------------------*/

/* Temporaries holding the stack pointer plus a constant: a thread's own stack frame. Accesses
   addressed through them are private in practice and make up a large share of all accesses, so
   they are not traced unless --pw-stack=yes (a pointer to a stack variable handed to another
   thread is still traced on that thread's side). */
static Bool* from_sp = NULL;
static Int from_sp_size = 0;

static void note_sp_temps(IRStmt* st, const VexGuestLayout* layout)
{
   if (st->tag != Ist_WrTmp) return;
   IRExpr* e = st->Ist.WrTmp.data;
   IRTemp t = st->Ist.WrTmp.tmp;
   Bool sp = False;
   if (e->tag == Iex_Get && e->Iex.Get.offset == layout->offset_SP) sp = True;
   else if (e->tag == Iex_RdTmp) sp = from_sp[e->Iex.RdTmp.tmp];
   else if (e->tag == Iex_Binop && (e->Iex.Binop.op == Iop_Add64 || e->Iex.Binop.op == Iop_Sub64)
            && e->Iex.Binop.arg1->tag == Iex_RdTmp && e->Iex.Binop.arg2->tag == Iex_Const)
      sp = from_sp[e->Iex.Binop.arg1->Iex.RdTmp.tmp];
   from_sp[t] = sp;
}

static Bool stack_address(IRExpr* address)
{
   return !clo_stack && address->tag == Iex_RdTmp && from_sp[address->Iex.RdTmp.tmp];
}

static IRExpr* add_to_counter(IRSB* sb, ULong* counter, Int amount)
{
   IRExpr* old = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, u64((ULong)(HWord)counter)));
   IRExpr* new = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, old, u64((ULong)amount)));
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, u64((ULong)(HWord)counter), new));
   return new;
}

/* At the start of each superblock, inline: its instructions and accesses (an early exit still
   counts the whole block: both are estimates, as in Lackey's --basic-counts), and a call to
   advance_window when the accesses reach the end of the window. Returns the running thread's
   stamp for the superblock's lookups (NULL when it makes none). */
static IRExpr* add_block_counts(IRSB* sb, Int instructions, Int accesses_in_block)
{
   add_to_counter(sb, &total_instructions, instructions);
   if (accesses_in_block == 0) return NULL;
   IRExpr* total = add_to_counter(sb, &total_accesses, accesses_in_block);
   IRExpr* end = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, u64((ULong)(HWord)&next_window_at)));
   IRDirty* di = unsafeIRDirty_0_N(0, "advance_window", VG_(fnptr_to_fnentry)(advance_window), mkIRExprVec_0());
   di->guard = tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpLE64U, end, total));
   addStmtToIRSB(sb, IRStmt_Dirty(di));
   /* The running thread's stamp, read after the window may have moved on: the same for every
      lookup of the superblock (pw_miss and pw_access_counted never change it). */
   return tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, u64((ULong)(HWord)&key_bits)));
}

/* The accesses of the superblock being instrumented, found before any code is added so that
   consecutive accesses to one address (a read-modify-write, say) share one lookup. */
typedef struct {
   Int     stmt;     /* index of the statement that makes the access */
   IRExpr* address;
   Int     size;
   IRExpr* guard;    /* NULL unless the access is conditional */
   Int     reads, writes;  /* accesses it stands for (both 0: merged into an earlier one) */
   Bool    first_write;
   Addr    ip;       /* the guest instruction that makes it */
} Access;

static Access* accesses = NULL;
static Int accesses_cap = 0;
static Int n_accesses = 0;

static Addr current_ip = 0;  /* of the instruction whose statements are being scanned */

static void note_access(Int stmt, IRExpr* address, Int size, IRExpr* guard, Bool is_write)
{
   if (stack_address(address)) return;
   if (n_accesses == accesses_cap) {
      Access* grown = VG_(malloc)("pw.accesses", (accesses_cap ? accesses_cap * 2 : 64) * sizeof(Access));
      if (accesses) {
         VG_(memcpy)(grown, accesses, n_accesses * sizeof(Access));
         VG_(free)(accesses);
      }
      accesses = grown;
      accesses_cap = accesses_cap ? accesses_cap * 2 : 64;
   }
   accesses[n_accesses++] = (Access){ stmt, address, size, guard, !is_write, is_write, is_write, current_ip };
}

static Bool same_address(IRExpr* a, IRExpr* b)
{
   if (a->tag == Iex_RdTmp && b->tag == Iex_RdTmp) return a->Iex.RdTmp.tmp == b->Iex.RdTmp.tmp;
   if (a->tag == Iex_Const && b->tag == Iex_Const) return eqIRConst(a->Iex.Const.con, b->Iex.Const.con);
   return False;
}

/* Merge each access into the previous one when both use the same address and nothing between
   them can leave the superblock: the merged lookup counts both. */
static void merge_repeats(IRSB* in)
{
   Int kept = -1;
   for (Int i = 0; i < n_accesses; i++) {
      Access* a = &accesses[i];
      if (kept >= 0 && a->guard == NULL && accesses[kept].guard == NULL
          && same_address(a->address, accesses[kept].address)) {
         Bool exits = False;
         for (Int k = accesses[kept].stmt; k < a->stmt && !exits; k++) exits = in->stmts[k]->tag == Ist_Exit;
         if (!exits) {
            if (a->size > accesses[kept].size) accesses[kept].size = a->size;
            accesses[kept].reads += a->reads;
            accesses[kept].writes += a->writes;
            a->reads = a->writes = 0;
            continue;
         }
      }
      kept = i;
   }
}

/* The inline lookup of one access (see line_cache): call pw_miss unless the line is cached and
   the access stays inside it, then add the access's weight to the entry's pending count. */
static Bool looked_up_inline(const Access* a)
{
   return a->guard == NULL && a->size >= 1 && a->size <= 64;
}

static void add_pending(IRSB* sb, IRExpr* entry, ULong amount)
{
   IRExpr* at = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, entry, u64((ULong)PENDING_OFFSET)));
   IRExpr* old = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, at));
   IRExpr* more = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, old, u64(amount)));
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, at, more));
}

/* The page slot of the access's site when it watches pages; else NULL. */
static PageSlot* watched_page(const Access* a)
{
   if (!looked_up_inline(a) || clo_mazouz || clo_page_mode == PAGE_MODE_NEVER) return NULL;
   Site* site = site_of(a->ip);
   if (site->mode != SITE_PAGES) return NULL;
   if (site->slot == 0) {  /* its first translation with pages: a slot of its own, for good */
      if (n_page_slots == MAX_PAGE_SITES) return NULL;
      site->slot = ++n_page_slots;
      page_slots[site->slot - 1].ip = a->ip;
   }
   return &page_slots[site->slot - 1];
}

/* The inline lookup of a site that watches pages (see "Private pages"): when the page's slot holds
   (page | stamp of the running thread) and the access stays inside one line, the line's bit is set
   in the slot's read or written mask; else pw_page_miss. */
static void add_page_lookup(IRSB* sb, const Access* a, IRExpr* key_bits_now, PageSlot* page_slot)
{
   IRExpr* page = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shr64, a->address, IRExpr_Const(IRConst_U8(PAGE_SHIFT))));
   IRExpr* key = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Or64, page, key_bits_now));
   IRExpr* slot = u64((ULong)(HWord)page_slot);
   if (a->size > 1) {  /* an access that crosses into the next line misses: its key is off */
      IRExpr* last_byte = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, a->address, u64((ULong)(a->size - 1))));
      IRExpr* apart = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Xor64, a->address, last_byte));
      IRExpr* crosses = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shr64, apart, IRExpr_Const(IRConst_U8(LINE_SHIFT))));
      key = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Xor64, key, crosses));
   }
   IRExpr* cached = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, slot));
   IRExpr* hit = tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpEQ64, cached, key));
   IRExpr* line = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shr64, a->address, IRExpr_Const(IRConst_U8(LINE_SHIFT))));
   IRExpr* index = tmp_of(sb, Ity_I8, IRExpr_Unop(Iop_64to8, tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_And64, line, u64(LINES_PER_PAGE - 1)))));
   IRExpr* bit = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shl64, u64(1), index));
   IRExpr* mask_at = u64((ULong)(HWord)page_slot + (a->writes ? PAGE_WRITTEN_OFFSET : PAGE_READ_OFFSET));
   IRExpr* mask = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, mask_at));
   IRExpr* more = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Or64, mask, bit));
   /* Stored either way (a branch would cost more): unchanged unless the slot is the thread's. */
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, mask_at, tmp_of(sb, Ity_I64, IRExpr_ITE(hit, more, mask))));
   IRDirty* di = unsafeIRDirty_0_N(3, "pw_page_miss", VG_(fnptr_to_fnentry)(pw_page_miss),
                                   mkIRExprVec_3(a->address,
                                                 mkIRExpr_HWord((HWord)PACK(a->reads, a->writes, a->first_write, a->size)),
                                                 mkIRExpr_HWord((HWord)page_slot)));
   di->guard = tmp_of(sb, Ity_I1, IRExpr_Unop(Iop_Not1, hit));
   addStmtToIRSB(sb, IRStmt_Dirty(di));
}

static void add_lookup(IRSB* sb, const Access* a, IRExpr* key_bits_now)
{
   IRExpr* packed = mkIRExpr_HWord((HWord)PACK(a->reads, a->writes, a->first_write, 0));
   if (!looked_up_inline(a)) {
      IRDirty* di = unsafeIRDirty_0_N(3, "pw_access_counted", VG_(fnptr_to_fnentry)(pw_access_counted),
                                      mkIRExprVec_4(a->address, mkIRExpr_HWord((HWord)(a->size > 0 ? a->size : 1)),
                                                    packed, mkIRExpr_HWord((HWord)a->ip)));
      if (a->guard) di->guard = a->guard;
      addStmtToIRSB(sb, IRStmt_Dirty(di));
      return;
   }
   PageSlot* page_slot = watched_page(a);
   if (page_slot != NULL) {
      add_page_lookup(sb, a, key_bits_now, page_slot);
      return;
   }
   /* The line of the access's last byte: it differs from the cached tag both when the line is
      not cached and when the access crosses into the next line. */
   IRExpr* last_byte = a->size == 1 ? a->address
                       : tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, a->address, u64((ULong)(a->size - 1))));
   IRExpr* line = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shr64, last_byte, IRExpr_Const(IRConst_U8(LINE_SHIFT))));
   IRExpr* key = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Or64, line, key_bits_now));
   /* The slot of the first byte's line: (line mod 2^clo_cache_bits) * sizeof(CacheEntry). */
   IRExpr* shifted = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shr64, a->address, IRExpr_Const(IRConst_U8(LINE_SHIFT - 4))));
   IRExpr* offset = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_And64, shifted, u64((ULong)((1 << clo_cache_bits) - 1) << 4)));
   IRExpr* entry = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, u64((ULong)(HWord)line_cache), offset));
   IRExpr* cached = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, entry));
   /* Added before the call, so that no value but the guest's lives across it (a register spilled
      and reloaded at every lookup); pw_miss takes the add back from an entry it was not for. */
   add_pending(sb, entry, PENDING(a->reads, a->writes));
   IRExpr* miss = tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpNE64, cached, key));
   IRDirty* di = unsafeIRDirty_0_N(3, "pw_miss", VG_(fnptr_to_fnentry)(pw_miss),
                                   mkIRExprVec_3(a->address,
                                                 mkIRExpr_HWord((HWord)PACK(a->reads, a->writes, a->first_write, a->size)),
                                                 mkIRExpr_HWord((HWord)a->ip)));
   di->guard = miss;
   addStmtToIRSB(sb, IRStmt_Dirty(di));
}

static void note_statement_access(void* context, IRExpr* address, Int size, IRExpr* guard, Bool is_write)
{
   note_access(*(Int*)context, address, size, guard, is_write);
}

/* The access made by statement `index`, if any. */
static void find_access(IRSB* in, Int index)
{
   visit_access(in, in->stmts[index], note_statement_access, &index);
}

static IRSB* pw_instrument(VgCallbackClosure* closure, IRSB* in, const VexGuestLayout* layout,
                           const VexGuestExtents* vge, const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   (void)closure; (void)vge; (void)archinfo_host;
   if (gWordTy != hWordTy) VG_(tool_panic)("host/guest word size mismatch");
   if (in->tyenv->types_used > from_sp_size) {
      if (from_sp) VG_(free)(from_sp);
      from_sp_size = in->tyenv->types_used * 2;
      from_sp = VG_(malloc)("pw.sp", from_sp_size * sizeof(Bool));
   }
   VG_(memset)(from_sp, 0, in->tyenv->types_used * sizeof(Bool));
   n_accesses = 0;
   Int instructions = 0;
   for (Int i = 0; i < in->stmts_used; i++) {
      note_sp_temps(in->stmts[i], layout);
      if (in->stmts[i]->tag == Ist_IMark) {
         instructions++;
         current_ip = (Addr)in->stmts[i]->Ist.IMark.addr;
      }
      find_access(in, i);
   }
   merge_repeats(in);

   IRSB* out = deepCopyIRSBExceptStmts(in);
   Int i = 0;
   while (i < in->stmts_used && in->stmts[i]->tag != Ist_IMark) {  /* preamble, verbatim */
      addStmtToIRSB(out, in->stmts[i]);
      i++;
   }
   Int counted = 0;
   for (Int k = 0; k < n_accesses; k++)
      if (looked_up_inline(&accesses[k])) counted += accesses[k].reads + accesses[k].writes;
   IRExpr* key_bits_now = add_block_counts(out, instructions, counted);
   Int next = 0;
   for (; i < in->stmts_used; i++) {
      while (next < n_accesses && accesses[next].stmt < i) next++;
      for (; next < n_accesses && accesses[next].stmt == i; next++)
         if (accesses[next].reads + accesses[next].writes > 0) add_lookup(out, &accesses[next], key_bits_now);
      addStmtToIRSB(out, in->stmts[i]);
   }
   return out;
}

/*------------------------------------------------------------*/
/*--- Setup and teardown                                   ---*/
/*------------------------------------------------------------*/

static void pw_post_clo_init(void)
{
   index_of_tid = VG_(calloc)("pw.tids", VG_N_THREADS + 1, sizeof(Int));
   grow_threads(16);
   set_stamp();
   window_end_at = clo_mazouz ? ~0ULL : clo_window_ms > 0 ? CLOCK_CHECK_ACCESSES : (ULong)clo_window;
   settle_at = (ULong)clo_settle_every;
   next_window_at = window_end_at < settle_at ? window_end_at : settle_at;
   if (block_end_at < next_window_at) next_window_at = block_end_at;
   last_dump_ms = VG_(read_millisecond_timer)();
}

static void pw_fini(Int exitcode)
{
   (void)exitcode;
   settle_all(False);
   credit_slice();
   write_result(False);
}

static void pw_pre_clo_init(void)
{
   VG_(details_name)("pinwise");
   VG_(details_version)(PW_VERSION);
   VG_(details_description)("which threads share which cache lines, for thread mapping");
   VG_(details_copyright_author)("pinwise developers");
   VG_(details_bug_reports_to)("the pinwise issue tracker");
   VG_(details_avg_translation_sizeB)(200);
   VG_(basic_tool_funcs)(pw_post_clo_init, pw_instrument, pw_fini);
   VG_(needs_command_line_options)(pw_process_cmd_line_option, pw_print_usage, pw_print_debug_usage);
   VG_(needs_client_requests)(pw_client_request);
   VG_(track_pre_thread_ll_create)(pw_thread_create);
   VG_(track_start_client_code)(pw_start_client_code);
   VG_(track_stop_client_code)(pw_stop_client_code);
   VG_(track_pre_thread_ll_exit)(pw_thread_exit);
   VG_(track_change_mem_mprotect)(pw_mprotect);
   VG_(track_new_mem_mmap)(pw_mmap);
   VG_(track_new_mem_brk)(pw_brk);
   VG_(track_copy_mem_remap)(pw_remap);
}

VG_DETERMINE_INTERFACE_VERSION(pw_pre_clo_init)
