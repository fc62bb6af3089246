/*--------------------------------------------------------------------*/
/*--- pinwise-sim: trace-driven simulation of a machine's caches   ---*/
/*--- under several thread placements at once.          ps_main.c  ---*/
/*--------------------------------------------------------------------*/

/* `pinwise simulate` runs the program once under this tool. Every data access (loads, stores,
   atomics, guarded and dirty-helper accesses, as Lackey and pw_main.c find them; an instruction
   that reads a word and writes it back, `lock add` included, makes one access, a write: see
   Found), by the thread that makes it, is fed to K models of one machine, one per placement: each
   model is the machine's caches with the threads on the PUs the placement names.

   The machine (--ps-config=FILE, written by pinwise from a topology): cache levels from L1 up,
   each with size, line size, associativity, hit latency and its instances (which PUs share each);
   NUMA nodes; a class of distance for every pair of PUs (the lowest level they share) with a
   transfer latency; local and remote DRAM latency; inclusive or not.

   The model of an access by thread t to line X, in placement k, t on PU p (slot t of the
   placement, wrapping round as pinwise's plans do):
   - Caches are set-associative with LRU replacement (any number of sets: see set_index), looked
     up from p's L1 upward; the first that
     holds X is a hit (its LRU order updated), the levels below it are filled (write-allocate).
     Each level counts accesses (the misses of the level below, as cachegrind counts LL) and misses.
   - A directory remembers, per line, which cache instances hold it; the L1 holding it modified
     (MESI's M) is marked in its set (see writer_of). A write invalidates every copy off p's path
     (counted) and makes p's L1 the owner. An access that finds X modified in a cache off its path is a cache-to-cache
     transfer, counted by the distance class of the two PUs; the owner's copy becomes shared.
   - A miss everywhere is a DRAM access: the page's node is the node of the first PU that touched
     it (first touch), and the access is local or remote to p's node.
   - Inclusive (default): a line evicted from a cache is invalidated in the caches below it.
     --ps-inclusive=no keeps levels independent, as cachegrind does.
   - Cost: each access adds the latency of where it was served (a level's hit, a transfer by its
     class, local or remote DRAM) to its thread's cycles.
   - Prefetched streams (--ps-config's `prefetch 1`): an L1 miss on the line next to one of the
     16 lines its thread's last L1 misses opened streams at (one more or one less, in the same 4
     KiB page, as the L2 streamer of Intel's cores follows them) is prefetched: served beyond the
     second level (a third level's hit, DRAM), it costs the second level's latency, the streamer
     having fetched it ahead of use. Its line still crosses every level and memory controller it
     came through, below. The L1 misses are the group's (placements of a group share their L1s
     alike), so every member sees the same streams.
   - Bandwidth and queueing: each cache instance above L1 and each NUMA node's memory controller
     moves at most B bytes a cycle (--ps-config's `bandwidth`, per level and for DRAM; 0: no
     limit). Every access that reaches a level moves a line through the thread's instance there;
     a DRAM access moves one through the controller of the page's node, two when a write brought
     it (its write-back comes later). At the end of each chunk (CHUNK accesses, a time slice of
     every thread at once under --ps-quantum), per placement: each PU's busy time D_p is the sum
     of its threads' cycles over the chunk; a resource r that moved X_r bytes, at D cycles of
     chunk, is busy rho_r = X_r / (B_r D) and each line waits W_r = s_r rho_r / (2 (1 - rho_r))
     cycles on top of its latency (M/D/1: deterministic service s_r = line / B_r); D solves
     D = max_p (D_p + sum of its threads' lines through r times W_r(D)), which exists past the
     largest X_r / B_r (a bisection). Each thread's queueing cycles join its cycles. It is the
     throughput side of the model: threads that stream from one socket's memory wait there,
     spread over two sockets they wait half as much; a thread that stays in its L1 waits on
     nothing. Left out still: misses overlapped by the core beyond the streams.

   Interleaving: Valgrind runs one thread at a time for long slices. Simulated threads run
   together, so accesses are buffered per thread and fed to the models in turns of --ps-quantum
   accesses per thread (round robin), a buffer of --ps-buffer accesses at a time; --ps-quantum=0
   feeds them in Valgrind's own order.

   Sharing between placements: two placements that put the same threads together in each L1 (and
   maybe in each L2, ...) see the same contents in those caches, whatever PUs they chose. They form
   a group that simulates those levels once (the group's levels) on behalf of all; each member
   simulates only the levels above, for the accesses that reach them, and its own costs where they
   differ (a transfer's distance, a DRAM access's node). An L1 hit, the common case, is then one
   lookup per group instead of one per placement. What the levels above do to the group's is
   identical in every member but for inclusive evictions: a member whose eviction above takes a
   line out of the group's levels leaves the group with a copy of its state (split_off) and goes on
   alone; the counts stay exact. A group whose threads all share one L1 has a single path of caches
   and needs no directory (one_path_access). --ps-check-groups=yes also simulates every placement
   alone, on the general path, in the same run and says whether the counts agree (a self-test; the
   test suite runs it).

   Workers: --ps-workers=N processes, forked before the program starts, simulate the groups while
   Valgrind's process only collects the accesses (see Workers below); same counts, which
   --ps-check-workers=yes checks (Valgrind's process simulates every group as well).

   Output (--ps-out=FILE), plain text:
      pinwise-sim 1
      threads T
      accesses a0 a1 ...             (per thread)
      models K
      then per model k:
      model k
      level j ACCESSES MISSES        (one line per level, L1 first)
      invalidations N
      transfers n0 n1 ...            (per distance class)
      dram LOCAL REMOTE
      cycles c0 c1 ...               (per thread, queueing included)
      queue q0 q1 ...                (per thread: the cycles it waited on bandwidth)
      memory b0 b1 ...               (per NUMA node: bytes its memory controller moved)
      busiest PPM                    (the highest utilisation of a resource over a chunk, per million)
      then:
      groups G                       (groups that simulated caches, split-offs included)
      workers-check N                (--ps-check-workers: placements the workers counted differently)
      check N                        (--ps-check-groups: placements whose counts differ alone)
*/

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_clientstate.h"
#include "pub_tool_xarray.h"
#include "pw_tool_common.h"

#define MAX_LEVELS 8
#define MAX_CLASSES 16
#define MAX_MODELS 64
#define MAX_PUS 4096
#define MAX_INSTANCES 4096
#define MAX_THREADS 65536
#define MAX_WORKERS 4           /* each takes two of the few file descriptors Valgrind keeps for itself */

static const HChar* clo_config = NULL;
static const HChar* clo_out = "pinwise-sim.txt";
static Long clo_quantum = 1;
static Long clo_buffer = 1 << 22;
static Bool clo_inclusive = True;
static Bool clo_check = False;
static Bool clo_check_workers = False;
static Long clo_workers = 0;
static Long clo_split = 0;

static Bool ps_process_cmd_line_option(const HChar* arg)
{
   if VG_STR_CLO(arg, "--ps-config", clo_config) {}
   else if VG_STR_CLO(arg, "--ps-out", clo_out) {}
   else if VG_BINT_CLO(arg, "--ps-quantum", clo_quantum, 0, 1LL << 30) {}
   else if VG_BINT_CLO(arg, "--ps-buffer", clo_buffer, 1024, 1LL << 30) {}
   else if VG_BOOL_CLO(arg, "--ps-inclusive", clo_inclusive) {}
   else if VG_BOOL_CLO(arg, "--ps-check-groups", clo_check) {}
   else if VG_BOOL_CLO(arg, "--ps-check-workers", clo_check_workers) {}
   else if VG_BINT_CLO(arg, "--ps-workers", clo_workers, 0, MAX_WORKERS) {}
   else if VG_BINT_CLO(arg, "--ps-split", clo_split, 0, MAX_WORKERS) {}
   else return False;
   return True;
}

static void ps_print_usage(void)
{
   VG_(printf)("    --ps-config=FILE         the machine and the placements (written by pinwise simulate)\n"
               "    --ps-out=FILE            where the counts go [pinwise-sim.txt]\n"
               "    --ps-quantum=N           accesses per thread per turn when interleaving; 0: Valgrind's order [1]\n"
               "    --ps-buffer=N            accesses buffered before they are interleaved [4194304]\n"
               "    --ps-inclusive=yes|no    a line evicted from a cache leaves the caches below it [yes]\n"
               "    --ps-check-groups=yes|no also simulate each placement alone and say whether the counts\n"
               "                             agree with the grouped simulation (a self-test) [no]\n"
               "    --ps-workers=N           processes that simulate the groups of placements while the\n"
               "                             program runs; 0: this process does [0]\n"
               "    --ps-check-workers=yes|no this process also simulates every group and says whether\n"
               "                             the workers counted the same (a self-test) [no]\n"
               "    --ps-split=N             split groups of placements until there are N of them (at most\n"
               "                             --ps-workers), so that N workers share the work [0]\n");
}

static void ps_print_debug_usage(void) { VG_(printf)("    (none)\n"); }

/*------------------------------------------------------------*/
/*--- The machine                                          ---*/
/*------------------------------------------------------------*/

static Int n_pus, n_levels, n_nodes, n_classes, n_models, n_instances;
static Int n_placements;                 /* n_models, or half of them under --ps-check-groups */
static Int line_shift;
static Int sets_of[MAX_LEVELS], assoc_of[MAX_LEVELS], latency_of[MAX_LEVELS], instances_of[MAX_LEVELS];
static Int level_base[MAX_LEVELS + 1];   /* global instance ids of a level: base .. base + instances */
static Int* path;                        /* path[p * n_levels + j]: p's cache instance at level j */
static Int* level_of_instance;
static Int* pu_of_instance;              /* a PU below the instance, for distances */
static SizeT* tags_offset;               /* where an instance's tags start in a model's array */
static SizeT tags_per_model;
static Int** below;                      /* per instance: the instances of lower levels under it, -1 ended */
static Int* node_of_pu;
static UChar* class_of_pair;             /* class_of_pair[p * n_pus + q] */
static Int class_latency[MAX_CLASSES];
static Int dram_local_latency, dram_remote_latency;
static Int mask_words, dir_stride;
static Bool dir_deleted;                 /* a directory entry was deleted (others may have moved) */
static Bool pow2_sets[MAX_LEVELS];      /* sets_of[j] is a power of two: the set is the line's low bits */
static double bandwidth_of[MAX_LEVELS];  /* bytes a cycle an instance of the level moves; 0: no limit */
static double dram_bandwidth;            /* bytes a cycle each node's memory controller moves; 0: no limit */
static Bool prefetch;                    /* streams are prefetched (see the top of the file) */
#define MAX_NODES 256
static UWord l1_set_mask;
static Int l1_assoc;
static Bool l1_alone_under_l2;           /* every L2 has one L1 below it (no L2 shared by cores): see unlisted */
static Int* l2_above;                    /* per L1 instance: its L2 */
static Int* l1_below;                    /* per L2 instance: its one L1 (l1_alone_under_l2) */
static ULong* path_mask;                 /* per PU, mask_words words: the instances on its path */

/* A directory: which cache instances hold a line. Linear probing; per entry dir_stride words (one
   host cache line for up to 384 instances): line + 1 (0: empty), the line's writer + 1 (0: none;
   only a group's directory has writers: they are L1s, see writer_of), and the mask of the
   instances holding it. */
typedef struct {
   UWord* entries;
   UWord cap, count;
   Int shift, run;                       /* see hash_of */
} Dir;

/* What a model counts; a group counts for all its members what they count alike. */
typedef struct {
   ULong accesses[MAX_LEVELS], misses[MAX_LEVELS], invalidations;
   ULong* cycles;                        /* per thread */
   ULong* reach;                         /* per thread and level: reach[t * MAX_LEVELS + j], its accesses there */
} Counts;

/* Placements whose threads share the caches of the lowest `levels` levels the same way (the same
   threads together in each L1, and so on up) see the same contents there: a group simulates those
   levels once for all its members, numbered as the placement it started from numbers them
   (canonical instances). Each member simulates only the levels above, and only for the accesses
   that reach them. An inclusive eviction above that takes a line out of the group's levels in one
   member and not in the others splits that member off with a copy of the group's state. */
typedef struct {
   Int levels;                           /* the group's levels: 0 .. levels - 1 */
   Int nslots, repeat_from;
   Int* slots;                           /* canonical PU per slot */
   UWord* tags;                          /* the group's levels, canonical instances */
   Dir dir;
   Counts counts;
   Int members[MAX_MODELS];
   Int n_members;
   Int resume;                           /* the chunk's first access it has not taken */
   Int worker;                           /* the worker process that simulates it (--ps-workers), -1: none */
   const Int* one_path;                  /* all its threads under one L1: their path (see one_path_access) */
   Bool unlisted;                        /* its directory lists no L1 (see unlisted) */
   UWord* streams;                       /* per thread: its STREAMS stream heads and the next to replace */
} Group;

typedef struct {
   Int nslots, repeat_from;
   Int* slots;                           /* PU per slot */
   Bool alone;                           /* in a group of its own (--ps-check-groups) */
   Int group;
   Int* canonical;                       /* per instance of the group's levels: its canonical id, -1: unused */
   Int* actual;                          /* per canonical instance: this placement's, -1: unused */
   UWord* tags;                          /* per way ((line + 1) << 1) | M, MRU first; 0: empty. M (in an L1
                                            only): modified here and held nowhere else. Levels above the
                                            group's only (tags + tags_offset[i] for those) */
   UWord* tags_memory;
   Dir dir;                              /* levels above the group's */
   UWord* page_keys;                     /* first touch: page + 1 -> node */
   UChar* page_node;
   UWord page_cap, page_count;
   Counts counts;                        /* its own */
   Counts settled;                       /* its group's counts when it last took them over */
   ULong transfers[MAX_CLASSES], dram_local, dram_remote;
   /* Bandwidth (see the top of the file): lines each thread moved through each node's memory
      controller; what each thread had counted at the last chunk's end; its queueing cycles. */
   ULong* dram_lines;                    /* dram_lines[t * n_nodes + node] */
   ULong* seen_cycles;
   ULong* seen_reach;
   ULong* seen_dram;
   double* queue;
   ULong node_bytes[MAX_NODES];
   double busiest;                       /* the highest utilisation of a resource over a chunk */
} Model;

static Model models[MAX_MODELS];
static Int worker = -1;                  /* in a worker process: its number (--ps-workers); -1 in Valgrind's */
static Group* groups[MAX_MODELS];
static Int n_groups;

/* The config file: whitespace-separated integers after a keyword at the start of each record. */
static HChar* text;
static SizeT text_len, text_pos;

static void fail(const HChar* what)
{
   VG_(umsg)("pinwise-sim: bad --ps-config file: %s\n", what);
   VG_(exit)(2);
}

static void expect(const HChar* word)
{
   while (text_pos < text_len && VG_(isspace)(text[text_pos])) text_pos++;
   SizeT n = VG_(strlen)(word);
   if (text_pos + n > text_len || VG_(strncmp)(text + text_pos, word, n) != 0) fail(word);
   text_pos += n;
}

static Long number(Long low, Long high)
{
   while (text_pos < text_len && VG_(isspace)(text[text_pos])) text_pos++;
   Bool negative = text_pos < text_len && text[text_pos] == '-';
   if (negative) text_pos++;
   if (text_pos >= text_len || !VG_(isdigit)(text[text_pos])) fail("a number expected");
   Long value = 0;
   while (text_pos < text_len && VG_(isdigit)(text[text_pos])) value = value * 10 + (text[text_pos++] - '0');
   if (negative) value = -value;
   if (value < low || value > high) fail("a number out of range");
   return value;
}

static void* zeroed(const HChar* cc, SizeT count, SizeT size)
{
   return VG_(calloc)(cc, count ? count : 1, size);
}

static void group_models(Int limit);

static void read_config(void)
{
   if (clo_config == NULL) fail("--ps-config is required");
   SysRes res = VG_(open)(clo_config, VKI_O_RDONLY, 0);
   if (sr_isError(res)) fail("cannot open it");
   Int fd = (Int)sr_Res(res);
   SizeT cap = 1 << 16;
   text = VG_(malloc)("ps.config", cap);
   text_len = 0;
   for (;;) {
      if (text_len == cap) {
         cap *= 2;
         text = VG_(realloc)("ps.config", text, cap);
      }
      Int got = VG_(read)(fd, text + text_len, cap - text_len);
      if (got <= 0) break;
      text_len += got;
   }
   VG_(close)(fd);
   text_pos = 0;

   expect("pinwise-sim-config"); number(1, 1);
   expect("pus"); n_pus = (Int)number(1, MAX_PUS);
   expect("levels"); n_levels = (Int)number(1, MAX_LEVELS);
   path = zeroed("ps.path", (SizeT)n_pus * n_levels, sizeof(Int));
   n_instances = 0;
   for (Int j = 0; j < n_levels; j++) {
      expect("level");
      Long size = number(64, 1LL << 40), line = number(8, 4096), assoc = number(1, 1 << 16);
      latency_of[j] = (Int)number(0, 1 << 20);
      instances_of[j] = (Int)number(1, MAX_INSTANCES);
      Int shift = 0;
      while ((1L << shift) < line) shift++;
      if ((1L << shift) != line) fail("line sizes must be powers of two");
      if (j == 0) line_shift = shift;
      else if (shift != line_shift) fail("every level must have the same line size");
      Long sets = size / line / assoc;
      if (sets < 1 || sets * line * assoc != size || sets > (1L << 30))
         fail("a cache's size must be a whole number of sets of (line x associativity) bytes");
      sets_of[j] = (Int)sets;
      pow2_sets[j] = (sets & (sets - 1)) == 0;
      assoc_of[j] = (Int)assoc;
      level_base[j] = n_instances;
      n_instances += instances_of[j];
      if (n_instances > MAX_INSTANCES) fail("too many cache instances");
      for (Int p = 0; p < n_pus; p++) path[p * n_levels + j] = level_base[j] + (Int)number(0, instances_of[j] - 1);
   }
   level_base[n_levels] = n_instances;
   expect("nodes"); n_nodes = (Int)number(1, MAX_NODES - 1);
   node_of_pu = zeroed("ps.nodes", n_pus, sizeof(Int));
   for (Int p = 0; p < n_pus; p++) node_of_pu[p] = (Int)number(0, n_nodes - 1);
   expect("classes"); n_classes = (Int)number(1, MAX_CLASSES);
   for (Int c = 0; c < n_classes; c++) class_latency[c] = (Int)number(0, 1 << 20);
   class_of_pair = zeroed("ps.classes", (SizeT)n_pus * n_pus, 1);
   for (SizeT i = 0; i < (SizeT)n_pus * n_pus; i++) class_of_pair[i] = (UChar)number(0, n_classes - 1);
   expect("dram"); dram_local_latency = (Int)number(0, 1 << 20); dram_remote_latency = (Int)number(0, 1 << 20);
   expect("bandwidth");  /* bytes per thousand cycles: per level, then per memory controller */
   for (Int j = 0; j < n_levels; j++) bandwidth_of[j] = (double)number(0, 1LL << 40) / 1000.0;
   dram_bandwidth = (double)number(0, 1LL << 40) / 1000.0;
   expect("prefetch"); prefetch = number(0, 1) == 1;
   expect("placements"); n_placements = n_models = (Int)number(1, MAX_MODELS);
   if (clo_check && 2 * n_models > MAX_MODELS) fail("too many placements for --ps-check-groups");
   for (Int k = 0; k < n_models; k++) {
      expect("placement");
      Model* m = &models[k];
      m->repeat_from = (Int)number(0, MAX_THREADS);
      m->nslots = (Int)number(1, MAX_THREADS);
      if (m->repeat_from >= m->nslots) fail("repeat-from past the last slot");
      m->slots = zeroed("ps.slots", m->nslots, sizeof(Int));
      for (Int s = 0; s < m->nslots; s++) m->slots[s] = (Int)number(0, n_pus - 1);
   }
   VG_(free)(text);
   if (clo_check)  /* each placement once more, simulated alone */
      for (Int k = 0; k < n_placements; k++) {
         models[n_models] = models[k];
         models[n_models++].alone = True;
      }

   /* Instances: their level, a PU below each, the instances of lower levels under each. */
   level_of_instance = zeroed("ps.inst", n_instances, sizeof(Int));
   pu_of_instance = zeroed("ps.inst", n_instances, sizeof(Int));
   tags_offset = zeroed("ps.inst", n_instances, sizeof(SizeT));
   below = zeroed("ps.inst", n_instances, sizeof(Int*));
   tags_per_model = 0;
   for (Int j = 0; j < n_levels; j++)
      for (Int i = level_base[j]; i < level_base[j + 1]; i++) {
         level_of_instance[i] = j;
         pu_of_instance[i] = -1;
         tags_offset[i] = tags_per_model;
         tags_per_model += (SizeT)sets_of[j] * assoc_of[j];
      }
   Int* seen = zeroed("ps.seen", n_instances, sizeof(Int));
   for (Int i = 0; i < n_instances; i++) {
      Int j = level_of_instance[i], count = 0;
      for (Int d = 0; d < n_instances; d++) seen[d] = 0;
      for (Int p = 0; p < n_pus; p++) {
         if (path[p * n_levels + j] != i) continue;
         if (pu_of_instance[i] < 0) pu_of_instance[i] = p;
         for (Int lower = 0; lower < j; lower++) {
            Int d = path[p * n_levels + lower];
            if (!seen[d]) { seen[d] = 1; count++; }
         }
      }
      below[i] = zeroed("ps.below", count + 1, sizeof(Int));
      Int n = 0;
      for (Int d = 0; d < n_instances; d++) if (seen[d]) below[i][n++] = d;
      below[i][n] = -1;
      if (pu_of_instance[i] < 0) fail("a cache instance with no PU below it");
   }
   VG_(free)(seen);
   mask_words = (n_instances + 63) / 64;
   dir_stride = 2 + mask_words;
   l1_set_mask = (UWord)(sets_of[0] - 1);
   l1_assoc = assoc_of[0];
   path_mask = zeroed("ps.paths", (SizeT)n_pus * mask_words, sizeof(ULong));
   for (Int p = 0; p < n_pus; p++)
      for (Int j = 0; j < n_levels; j++) {
         Int i = path[p * n_levels + j];
         path_mask[(SizeT)p * mask_words + (i >> 6)] |= 1ULL << (i & 63);
      }
   l2_above = zeroed("ps.paths", n_instances, sizeof(Int));
   l1_below = zeroed("ps.paths", n_instances, sizeof(Int));
   l1_alone_under_l2 = n_levels >= 2;
   for (Int i = 0; i < n_instances; i++) l2_above[i] = l1_below[i] = -1;
   for (Int p = 0; p < n_pus && l1_alone_under_l2; p++) {
      Int l1 = path[p * n_levels], l2 = path[p * n_levels + 1];
      if (l1_below[l2] >= 0 && l1_below[l2] != l1) l1_alone_under_l2 = False;
      l1_below[l2] = l1;
      l2_above[l1] = l2;
   }

   for (Int k = 0; k < n_models; k++) {
      Model* m = &models[k];
      m->page_cap = 1024;
      m->page_keys = zeroed("ps.pages", m->page_cap, sizeof(UWord));
      m->page_node = zeroed("ps.pages", m->page_cap, 1);
   }
   group_models(n_models);
}

/*------------------------------------------------------------*/
/*--- Threads                                              ---*/
/*------------------------------------------------------------*/

static Int* index_of_tid;
static Int n_threads = 1, cur = 0, threads_cap = 0;
static ULong* recorded;       /* per thread: entries it recorded, up to the last drain */
static ULong* extra;          /* per thread: second entries, of accesses that cross into the next line
                                 (its accesses: recorded - extra) */
static UWord** buffer;        /* per thread: pending accesses, (line << 1) | write */
static SizeT* buffered;       /* per thread: how many */
static SizeT* buffer_cap;
static SizeT total_buffered = 0;
static UWord** l1_of_thread;  /* per thread: where its L1's tags start in the group at work */
static UWord** l2_of_thread;  /* and its L2's (groups whose directory lists no L1: unlisted) */

static void grow_cycles(ULong** cycles, Int cap)
{
   ULong* grown = zeroed("ps.cycles", cap, sizeof(ULong));
   if (*cycles) {
      for (Int t = 0; t < threads_cap; t++) grown[t] = (*cycles)[t];
      VG_(free)(*cycles);
   }
   *cycles = grown;
}

/* A per-thread array of `width` values each, grown to `cap` threads. */
static void grow_wide(ULong** values, Int width, Int cap)
{
   ULong* grown = zeroed("ps.threads", (SizeT)cap * width, sizeof(ULong));
   if (*values) {
      VG_(memcpy)(grown, *values, (SizeT)threads_cap * width * sizeof(ULong));
      VG_(free)(*values);
   }
   *values = grown;
}

static void grow_doubles(double** values, Int cap)
{
   double* grown = zeroed("ps.threads", cap, sizeof(double));
   if (*values) {
      VG_(memcpy)(grown, *values, (SizeT)threads_cap * sizeof(double));
      VG_(free)(*values);
   }
   *values = grown;
}

#define STREAMS 16            /* streams followed per thread (see stream_of) */

static void grow_threads(Int needed)
{
   if (needed <= threads_cap) return;
   Int cap = threads_cap ? threads_cap : 16;
   while (cap < needed) cap *= 2;
   UWord** buf = zeroed("ps.threads", cap, sizeof(UWord*));
   SizeT* count = zeroed("ps.threads", cap, sizeof(SizeT));
   SizeT* bcap = zeroed("ps.threads", cap, sizeof(SizeT));
   for (Int t = 0; t < threads_cap; t++) {
      buf[t] = buffer[t]; count[t] = buffered[t]; bcap[t] = buffer_cap[t];
   }
   grow_cycles(&recorded, cap);
   grow_cycles(&extra, cap);
   for (Int k = 0; k < n_models; k++) {
      Model* m = &models[k];
      grow_cycles(&m->counts.cycles, cap);
      grow_cycles(&m->settled.cycles, cap);
      grow_wide(&m->counts.reach, MAX_LEVELS, cap);
      grow_wide(&m->settled.reach, MAX_LEVELS, cap);
      grow_wide(&m->dram_lines, n_nodes, cap);
      grow_wide(&m->seen_cycles, 1, cap);
      grow_wide(&m->seen_reach, MAX_LEVELS, cap);
      grow_wide(&m->seen_dram, n_nodes, cap);
      grow_doubles(&m->queue, cap);
   }
   for (Int g = 0; g < n_groups; g++) {
      grow_cycles(&groups[g]->counts.cycles, cap);
      grow_wide(&groups[g]->counts.reach, MAX_LEVELS, cap);
   }
   for (Int g = 0; g < n_groups; g++)
      if (groups[g]->streams) grow_wide((ULong**)&groups[g]->streams, STREAMS + 1, cap);
   if (buffer) {
      VG_(free)(buffer); VG_(free)(buffered); VG_(free)(buffer_cap);
   }
   buffer = buf; buffered = count; buffer_cap = bcap;
   if (l1_of_thread) VG_(free)(l1_of_thread);
   if (l2_of_thread) VG_(free)(l2_of_thread);
   l1_of_thread = zeroed("ps.threads", cap, sizeof(UWord*));
   l2_of_thread = zeroed("ps.threads", cap, sizeof(UWord*));
   threads_cap = cap;
}

static void ps_thread_create(ThreadId parent, ThreadId child)
{
   tl_assert(child < VG_N_THREADS);
   if (parent == VG_INVALID_THREADID) {
      index_of_tid[child] = 0;
      return;
   }
   if (n_threads >= MAX_THREADS) return;
   index_of_tid[child] = n_threads++;
   grow_threads(n_threads);
}

static void sync_current(void);
static void aim_current(void);

static void ps_start_client_code(ThreadId tid, ULong blocks)
{
   (void)blocks;
   if (cur == index_of_tid[tid]) return;
   sync_current();
   cur = index_of_tid[tid];
   aim_current();
}

/*------------------------------------------------------------*/
/*--- The models                                           ---*/
/*------------------------------------------------------------*/

static inline Int pu_of_slot(const Int* slots, Int nslots, Int repeat_from, Int t)
{
   Int slot = t < nslots ? t : repeat_from + (t - nslots) % (nslots - repeat_from);
   return slots[slot];
}

static inline UWord hash_of(const Dir* d, UWord key)
{
   UWord start = (UWord)(((key >> d->run) * 0x9E3779B97F4A7C15ULL) >> (d->shift + d->run));
   return (start << d->run) | (key & (((UWord)1 << d->run) - 1));
}

#define KEY(d, i) ((d)->entries[(SizeT)(i) * dir_stride])
#define WRITER_WORD(d, i) ((d)->entries[(SizeT)(i) * dir_stride + 1])
#define MASK(d, i) ((ULong*)&(d)->entries[(SizeT)(i) * dir_stride + 2])

static inline Int dir_find(const Dir* d, UWord line)
{
   UWord key = line + 1, mask = d->cap - 1;
   for (UWord i = hash_of(d, key);; i = (i + 1) & mask) {
      UWord found = KEY(d, i);
      if (found == key) return (Int)i;
      if (found == 0) return -1;
   }
}

static void dir_alloc(Dir* d, UWord cap)
{
   d->cap = cap;
   d->shift = 64;
   for (UWord c = cap; c > 1; c >>= 1) d->shift--;
   d->run = cap >= 16 ? 3 : 0;  /* shift + run < 64 */
   d->entries = zeroed("ps.dir", cap * dir_stride, sizeof(UWord));
}

/* The directory grows with the lines actually cached, so that a program with a small working set
   keeps it small (and in the host's caches) whatever the machine's cache capacity. */
static void dir_grow(Dir* d)
{
   UWord old_cap = d->cap;
   UWord* old = d->entries;
   dir_alloc(d, old_cap * 2);
   for (UWord i = 0; i < old_cap; i++) {
      UWord* entry = old + i * dir_stride;
      if (!entry[0]) continue;
      UWord j = hash_of(d, entry[0]);
      while (KEY(d, j)) j = (j + 1) & (d->cap - 1);
      VG_(memcpy)(&KEY(d, j), entry, dir_stride * sizeof(UWord));
   }
   VG_(free)(old);
}

static Int dir_insert(Dir* d, UWord line)
{
   Int found = dir_find(d, line);
   if (found >= 0) return found;
   if (2 * (d->count + 1) > d->cap) dir_grow(d);
   d->count++;
   UWord key = line + 1, mask = d->cap - 1;
   UWord i = hash_of(d, key);
   while (KEY(d, i) != 0) i = (i + 1) & mask;
   UWord* entry = &KEY(d, i);
   entry[0] = key;
   for (Int w = 1; w < dir_stride; w++) entry[w] = 0;
   return (Int)i;
}

/* Backward-shift deletion keeps every probe sequence whole without tombstones. */
static void dir_delete(Dir* d, UWord i)
{
   UWord mask = d->cap - 1, j = i;
   for (;;) {
      j = (j + 1) & mask;
      if (KEY(d, j) == 0) break;
      UWord home = hash_of(d, KEY(d, j));
      Bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
         VG_(memcpy)(&KEY(d, i), &KEY(d, j), dir_stride * sizeof(UWord));
         i = j;
      }
   }
   KEY(d, i) = 0;
   d->count--;
   dir_deleted = True;
}

/* The writer, in a group's directory: the L1 whose write last invalidated every other copy, as
   long as no other L1 has asked for the line since; then no placement holds the line off that
   L1's path, at any level. The line's owner (the L1 holding it modified: MESI's M) is always the
   writer, when the writer's copy is marked MODIFIED (owner_in). */
static inline Int writer_of(const Dir* d, Int entry) { return (Int)WRITER_WORD(d, entry) - 1; }
static inline void set_writer(Dir* d, Int entry, Int l1) { WRITER_WORD(d, entry) = (UWord)(l1 + 1); }

static inline Bool holds(const Dir* d, Int entry, Int instance)
{
   return (MASK(d, entry)[instance >> 6] >> (instance & 63)) & 1;
}

static inline void set_holder(Dir* d, Int entry, Int instance, Bool on)
{
   ULong* word = &MASK(d, entry)[instance >> 6];
   if (on) *word |= 1ULL << (instance & 63);
   else *word &= ~(1ULL << (instance & 63));
}

static Bool no_holder(const Dir* d, Int entry)
{
   for (Int w = 0; w < mask_words; w++) if (MASK(d, entry)[w]) return False;
   return True;
}

/* The set of `line` at level j: its low bits, or, where the level's sets are not a power of two
   (12 MiB of 16 ways: 12,288), the line modulo the sets. A real cache of that size is sliced and
   spreads lines by a hash of their address: the same capacity, another mapping. */
static inline UWord set_index(Int j, UWord line)
{
   return pow2_sets[j] ? line & (UWord)(sets_of[j] - 1) : line % (UWord)sets_of[j];
}

static inline UWord* set_of(UWord* tags, Int instance, UWord line)
{
   Int j = level_of_instance[instance];
   return tags + tags_offset[instance] + (SizeT)set_index(j, line) * assoc_of[j];
}

/* A way of a set: (line + 1) << 2 with two marks in an L1 (0: empty). WRITER: this L1 is the line's
   writer (writer_of), so a write here invalidates nothing and changes nothing but the marks: run_group
   takes it on its fast path. MODIFIED: written here since it became the writer (then it is the
   owner). Both go when another L1 asks for the line. */
#define TAG(line) (((line) + 1) << 2)
#define SAME(way, line) (((way) >> 2) == (line) + 1)
#define MODIFIED ((UWord)1)
#define WRITER ((UWord)2)

/* Take `line` out of one cache's set (its copy is invalidated or evicted below). Above L1 the way
   is left empty where it is: the ways in use stay in LRU order, and the next line put in the set
   takes the first empty way (put_front) before any line is evicted, as if the set had been closed
   up, which is what an L1's set is (run_group's fast paths rely on it): a write's invalidations
   take recent lines, near the front of a 16-way set, and closing it up moved the rest. */
static Bool remove_from(UWord* tags, Int instance, UWord line)
{
   UWord* ways = set_of(tags, instance, line);
   Int j = level_of_instance[instance], a = assoc_of[j];
   for (Int w = 0; w < a; w++)
      if (SAME(ways[w], line)) {
         if (j == 0)
            for (; w < a - 1; w++) ways[w] = ways[w + 1];
         ways[w] = 0;
         return True;
      }
   return False;
}

/* Put `way` (a tag with its marks) at the front of `ways` (its line was not there), the others
   moving back one, up to the first empty way; returns what fell out + 1, 0: nothing. */
static inline UWord push_front(UWord* ways, Int a, UWord way)
{
   for (Int w = 0; w < a; w++) {
      UWord here = ways[w];
      ways[w] = way;
      if (here == 0) return 0;
      way = here;
   }
   return way >> 2;
}

/* Put `line` at the front of the set (it was not there); returns what fell out + 1, 0: nothing. */
static UWord put_front(UWord* tags, Int instance, UWord line)
{
   UWord* ways = set_of(tags, instance, line);
   Int j = level_of_instance[instance], a = assoc_of[j];
   if (j > 0) return push_front(ways, a, TAG(line));
   UWord victim = ways[a - 1] >> 2;  /* an L1's set is closed up: an empty way is at the end */
   for (Int w = a - 1; w > 0; w--) ways[w] = ways[w - 1];
   ways[0] = TAG(line);
   return victim;
}

/* Move `line` to the front of its set. */
static inline void touch(UWord* tags, Int instance, UWord line)
{
   UWord* ways = set_of(tags, instance, line);
   if (SAME(ways[0], line)) return;
   Int a = assoc_of[level_of_instance[instance]];
   for (Int w = 1; w < a; w++)
      if (SAME(ways[w], line)) {
         UWord value = ways[w];
         for (; w > 0; w--) ways[w] = ways[w - 1];
         ways[0] = value;
         return;
      }
}

/* The way of a cache's set that holds `line`, NULL: none. */
static UWord* way_of(UWord* tags, Int instance, UWord line)
{
   UWord* ways = set_of(tags, instance, line);
   Int a = assoc_of[level_of_instance[instance]];
   for (Int w = 0; w < a; w++)
      if (SAME(ways[w], line)) return &ways[w];
   return NULL;
}

/* The L1 holding the line modified (directory entry e of group g), -1: none. */
static Int owner_in(const Group* g, Int e, UWord line)
{
   Int w = writer_of(&g->dir, e);
   if (w < 0) return -1;
   UWord* way = way_of(g->tags, w, line);
   return way && (*way & MODIFIED) ? w : -1;
}

/* Inclusive caches and a group with levels above its L1s: an L1 that evicts a line stays listed in
   the group's directory (the copy in the level above keeps the entry alive, and its eviction
   there takes the listing away), which saves a directory lookup per L1 miss. So the directory
   may list an L1 without a copy: an L1 is looked up in its set, not in the directory (run_group
   does), an invalidation counts only copies it finds, and a back-invalidation is owed only for a
   copy found (model_dropped). */
static inline Bool lazy_l1(const Group* g) { return clo_inclusive && g->levels >= 2; }

/* Further, when every L2 has a single L1 below it (one core per L2, as on most machines), the
   directory of such a group lists no L1 at all: an L1 can hold a line only while its L2 does
   (inclusion), so the L2's listing stands for both (may_hold), and an L1 that misses finds the
   line in its L2's set without the directory (run_group). That is a read's whole work there: no
   other L1 holds a line modified that is in this L2 (its write would have taken this copy), and
   the line's writer, when it is this L1, is marked WRITER in the L2's way too (group_part keeps
   the mark), which the L1's copy takes. */
static inline Bool unlisted(const Group* g) { return lazy_l1(g) && l1_alone_under_l2; }

/* Whether the group's `instance` may hold the line of directory entry e. */
static inline Bool may_hold(const Group* g, const Dir* d, Int e, Int instance)
{
   if (g->unlisted && level_of_instance[instance] == 0) return holds(d, e, l2_above[instance]);
   return holds(d, e, instance);
}

/* The group's `instance` evicted `line`; inclusive: the caches below it (the group's) lose theirs. */
static void group_dropped(Group* g, Int instance, UWord line)
{
   Dir* d = &g->dir;
   Int e = dir_find(d, line);
   if (e < 0) return;
   if (clo_inclusive)  /* the lower levels first (L1s before L2s): may_hold reads an L1's L2 */
      for (Int* b = below[instance]; *b >= 0; b++)
         if (may_hold(g, d, e, *b)) {
            remove_from(g->tags, *b, line);
            set_holder(d, e, *b, False);
         }
   set_holder(d, e, instance, False);
   if (no_holder(d, e)) dir_delete(d, (UWord)e);
}

/* Back-invalidations a member owes its group's levels, collected while the members take an access:
   (canonical instance, line). A member with any leaves the group (split_off). */
static Int* owed_instance;
static UWord* owed_line;
static Int owed_used, owed_cap;

static void owe(Int instance, UWord line)
{
   if (owed_used == owed_cap) {
      owed_cap = owed_cap ? owed_cap * 2 : 256;
      owed_instance = VG_(realloc)("ps.owed", owed_instance, owed_cap * sizeof(Int));
      owed_line = VG_(realloc)("ps.owed", owed_line, owed_cap * sizeof(UWord));
   }
   owed_instance[owed_used] = instance;
   owed_line[owed_used++] = line;
}

/* A member's `instance` (above its group's levels) evicted `line`; inclusive: the caches below it
   lose theirs, its own at once, the group's owed. */
static void model_dropped(Model* m, const Group* g, Int instance, UWord line)
{
   Dir* d = &m->dir;
   Int e = dir_find(d, line);
   if (e < 0) return;
   set_holder(d, e, instance, False);
   if (clo_inclusive) {
      Int shared = -2;
      for (Int* b = below[instance]; *b >= 0; b++) {
         if (level_of_instance[*b] >= g->levels) {
            if (holds(d, e, *b)) {
               remove_from(m->tags, *b, line);
               set_holder(d, e, *b, False);
            }
            continue;
         }
         Int c = m->canonical[*b];
         if (c < 0) continue;
         if (shared == -2) shared = dir_find(&g->dir, line);
         if (shared >= 0 && may_hold(g, &g->dir, shared, c) && (c >= level_base[1] || way_of(g->tags, c, line)))
            owe(c, line);
      }
   }
   if (no_holder(d, e)) dir_delete(d, (UWord)e);
}

static UChar first_touch(Model* m, UWord page, Int node)
{
   if (2 * (m->page_count + 1) > m->page_cap) {  /* grow and rehash */
      UWord old_cap = m->page_cap;
      UWord* old_keys = m->page_keys;
      UChar* old_node = m->page_node;
      m->page_cap *= 2;
      m->page_keys = zeroed("ps.pages", m->page_cap, sizeof(UWord));
      m->page_node = zeroed("ps.pages", m->page_cap, 1);
      for (UWord i = 0; i < old_cap; i++)
         if (old_keys[i]) {
            UWord j = (UWord)((old_keys[i] * 0x9E3779B97F4A7C15ULL) >> 20) & (m->page_cap - 1);
            while (m->page_keys[j]) j = (j + 1) & (m->page_cap - 1);
            m->page_keys[j] = old_keys[i];
            m->page_node[j] = old_node[i];
         }
      VG_(free)(old_keys);
      VG_(free)(old_node);
   }
   UWord key = page + 1;
   UWord j = (UWord)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (m->page_cap - 1);
   while (m->page_keys[j]) {
      if (m->page_keys[j] == key) return m->page_node[j];
      j = (j + 1) & (m->page_cap - 1);
   }
   m->page_keys[j] = key;
   m->page_node[j] = (UChar)node;
   m->page_count++;
   return (UChar)node;
}

/* What the group found for an access, before any cache changes. */
typedef struct {
   Int t;
   UWord line;
   Bool is_write;
   const Int* mine;     /* the thread's canonical path */
   Int hit;             /* the group's level that holds the line, -1: none */
   Int owner;           /* canonical L1 holding it modified, -1: none */
   Bool transfer;       /* modified off the thread's path: it comes from there */
   Bool streamed;       /* prefetched (see the top of the file) */
} Lookup;

/* Whether thread t's L1 miss on `line` in group g continues one of its streams (the line next to
   a stream's last, either way, in the same 4 KiB page); the stream moves on to it. Otherwise the
   line starts a stream in place of the oldest. */
static Bool stream_of(Group* g, Int t, UWord line)
{
   if (!prefetch) return False;
   if (g->streams == NULL) g->streams = zeroed("ps.streams", (SizeT)threads_cap * (STREAMS + 1), sizeof(UWord));
   UWord* heads = g->streams + (SizeT)t * (STREAMS + 1);
   for (Int k = 0; k < STREAMS; k++)
      if (heads[k] + 1 == line || heads[k] == line + 1) {
         Bool same_page = (heads[k] >> (12 - line_shift)) == (line >> (12 - line_shift));
         heads[k] = line;
         return same_page;
      }
   heads[heads[STREAMS]] = line;
   heads[STREAMS] = (heads[STREAMS] + 1) % STREAMS;
   return False;
}

/* The latency of a line served at `level` (-1: DRAM, at `dram` cycles): a prefetched one costs at
   most the second level's. */
static inline ULong served(Int level, ULong dram, Bool streamed)
{
   ULong latency = level < 0 ? dram : (ULong)latency_of[level];
   if (streamed && (level < 0 || level > 1)) {
      ULong ahead = (ULong)latency_of[n_levels > 1 ? 1 : 0];
      if (ahead < latency) latency = ahead;
   }
   return latency;
}

/* A write: every copy of `line` that directory entry e lists off the writer's path `mine` goes;
   returns how many (a group's L1 may be listed without a copy: see lazy_l1). */
static ULong invalidate_off_path(Dir* d, Int e, UWord* tags, const Int* mine, UWord line, Bool unlisted_l1)
{
   ULong count = 0;
   const ULong* on_path = path_mask + (SizeT)((mine - path) / n_levels) * mask_words;  /* mine: a PU's path */
   for (Int w = 0; w < mask_words; w++) {
      ULong bits = MASK(d, e)[w] & ~on_path[w];
      while (bits) {
         Int i = w * 64 + __builtin_ctzll(bits);
         bits &= bits - 1;
         count += remove_from(tags, i, line);
         set_holder(d, e, i, False);
         if (unlisted_l1 && level_of_instance[i] == 1) count += remove_from(tags, l1_below[i], line);
      }
   }
   return count;
}

/* A member's part of an access: the levels above its group's, and the cost where the group's
   levels did not serve it (a miss there, or a transfer from another L1). */
static void member_part(Model* m, const Group* g, const Lookup* a)
{
   Int t = a->t, hit = a->hit, top = g->levels;
   UWord line = a->line;
   Int p = pu_of_slot(m->slots, m->nslots, m->repeat_from, t);
   const Int* mine = path + (SizeT)p * n_levels;
   Dir* d = &m->dir;
   Int e = -1;
   if (top < n_levels && (hit < 0 || a->is_write)) {
      e = dir_find(d, line);
      if (hit < 0)
         for (Int j = top; j < n_levels; j++) {
            m->counts.accesses[j]++;
            m->counts.reach[(SizeT)t * MAX_LEVELS + j]++;
            if (e >= 0 && holds(d, e, mine[j])) {
               hit = j;
               break;
            }
            m->counts.misses[j]++;
         }
   }
   if (a->transfer) {
      Int c = class_of_pair[(SizeT)p * n_pus + pu_of_instance[m->actual[a->owner]]];
      m->transfers[c]++;
      m->counts.cycles[t] += (ULong)class_latency[c];
   } else if (hit < 0) {
      UWord page = line >> (12 - line_shift);
      Int node = first_touch(m, page, node_of_pu[p]);
      if (node == node_of_pu[p]) {
         m->dram_local++;
         m->counts.cycles[t] += served(-1, (ULong)dram_local_latency, a->streamed);
      } else {
         m->dram_remote++;
         m->counts.cycles[t] += served(-1, (ULong)dram_remote_latency, a->streamed);
      }
      m->dram_lines[(SizeT)t * n_nodes + node] += 1 + (a->is_write != 0);  /* a write's line goes back later */
   } else if (a->hit < 0) {
      m->counts.cycles[t] += served(hit, 0, a->streamed);
   }
   if (top == n_levels) return;
   if (hit >= top) touch(m->tags, mine[hit], line);
   Int filled = hit < 0 ? n_levels : hit;
   dir_deleted = False;
   for (Int j = filled - 1; j >= top; j--) {  /* from the top: inclusion holds */
      UWord victim = put_front(m->tags, mine[j], line);
      if (victim) model_dropped(m, g, mine[j], victim - 1);
   }
   if (filled > top) {
      if (e < 0 || dir_deleted) e = dir_insert(d, line);  /* a deletion may have moved it */
      for (Int j = top; j < filled; j++) set_holder(d, e, mine[j], True);
   }
   if (a->is_write && e >= 0) {
      m->counts.invalidations += invalidate_off_path(d, e, m->tags, mine, line, False);
      if (no_holder(d, e)) dir_delete(d, (UWord)e);
   }
}

/* The group's part of an access, after its members': its levels filled, a write's other copies
   invalidated, the writer's L1 the owner. */
static void group_part(Group* g, const Lookup* a, Int e)
{
   Dir* d = &g->dir;
   UWord line = a->line;
   const Int* mine = a->mine;
   Int writer = e >= 0 ? writer_of(d, e) : -1;
   if (writer >= 0 && writer != mine[0] && !a->is_write) {  /* its copy is shared now (a write invalidates it below) */
      UWord* way = way_of(g->tags, writer, line);
      if (way) *way &= ~(MODIFIED | WRITER);
      if (g->unlisted && (way = way_of(g->tags, l2_above[writer], line)) != NULL) *way &= ~WRITER;
   }
   if (a->hit >= 0) touch(g->tags, mine[a->hit], line);
   Int filled = a->hit < 0 ? g->levels : a->hit;
   dir_deleted = False;
   for (Int j = filled - 1; j >= 0; j--) {  /* from the top: inclusion holds */
      UWord victim = put_front(g->tags, mine[j], line);
      if (victim && (j > 0 || !lazy_l1(g))) group_dropped(g, mine[j], victim - 1);
   }
   if (filled > 0 || a->is_write) {
      if (e < 0 || dir_deleted) e = dir_insert(d, line);
      for (Int j = g->unlisted ? 1 : 0; j < filled; j++) set_holder(d, e, mine[j], True);
   }
   if (a->is_write) {
      g->counts.invalidations += invalidate_off_path(d, e, g->tags, mine, line, g->unlisted);
      set_of(g->tags, mine[0], line)[0] |= MODIFIED | WRITER;  /* at the front of its L1 set (touched or filled above) */
      set_writer(d, e, mine[0]);
   } else if (writer != mine[0]) {
      set_writer(d, e, -1);
      return;
   } else {
      set_of(g->tags, mine[0], line)[0] |= WRITER;  /* filled again by its writer */
   }
   if (g->unlisted) *way_of(g->tags, mine[1], line) |= WRITER;  /* its L2 holds it: inclusion */
}

static void counts_alloc(Counts* c)
{
   c->cycles = zeroed("ps.cycles", threads_cap, sizeof(ULong));
   c->reach = zeroed("ps.reach", (SizeT)threads_cap * MAX_LEVELS, sizeof(ULong));
}

/* A member takes over what its group counted for it since it last did. */
static void settle(Model* m)
{
   const Counts* g = &groups[m->group]->counts;
   for (Int j = 0; j < n_levels; j++) {
      m->counts.accesses[j] += g->accesses[j] - m->settled.accesses[j];
      m->counts.misses[j] += g->misses[j] - m->settled.misses[j];
   }
   m->counts.invalidations += g->invalidations - m->settled.invalidations;
   for (Int t = 0; t < threads_cap; t++) m->counts.cycles[t] += g->cycles[t] - m->settled.cycles[t];
   for (SizeT i = 0; i < (SizeT)threads_cap * MAX_LEVELS; i++) m->counts.reach[i] += g->reach[i] - m->settled.reach[i];
   ULong* cycles = m->settled.cycles;
   ULong* reach = m->settled.reach;
   m->settled = *g;
   m->settled.cycles = cycles;
   m->settled.reach = reach;
   for (Int t = 0; t < threads_cap; t++) cycles[t] = g->cycles[t];
   VG_(memcpy)(reach, g->reach, (SizeT)threads_cap * MAX_LEVELS * sizeof(ULong));
}

static SizeT group_tags(Int levels)
{
   return levels < n_levels ? tags_offset[level_base[levels]] : tags_per_model;
}

static Int new_group(Int levels, Int nslots, Int repeat_from, Int* slots)
{
   tl_assert(n_groups < MAX_MODELS);
   Group* g = zeroed("ps.group", 1, sizeof(Group));
   g->levels = levels;
   g->nslots = nslots;
   g->repeat_from = repeat_from;
   g->slots = slots;
   g->worker = -1;
   g->unlisted = unlisted(g);
   counts_alloc(&g->counts);
   groups[n_groups] = g;
   return n_groups++;
}

/* Member k leaves its group with a copy of the group's state; returns its new group. */
static Group* split_off(Int k, Int resume)
{
   Model* m = &models[k];
   Group* g = groups[m->group];
   settle(m);
   Int index = new_group(g->levels, g->nslots, g->repeat_from, g->slots);
   Group* h = groups[index];
   SizeT size = group_tags(g->levels);
   h->tags = VG_(malloc)("ps.tags", size * sizeof(UWord));
   VG_(memcpy)(h->tags, g->tags, size * sizeof(UWord));
   if (g->streams) {
      h->streams = VG_(malloc)("ps.streams", (SizeT)threads_cap * (STREAMS + 1) * sizeof(UWord));
      VG_(memcpy)(h->streams, g->streams, (SizeT)threads_cap * (STREAMS + 1) * sizeof(UWord));
   }
   h->dir = g->dir;
   h->dir.entries = VG_(malloc)("ps.dir", g->dir.cap * dir_stride * sizeof(UWord));
   VG_(memcpy)(h->dir.entries, g->dir.entries, g->dir.cap * dir_stride * sizeof(UWord));
   h->members[0] = k;
   h->n_members = 1;
   h->resume = resume;
   h->worker = g->worker;
   for (Int i = 0; i < g->n_members; i++)
      if (g->members[i] == k) {
         g->members[i] = g->members[--g->n_members];
         break;
      }
   m->group = index;
   VG_(memset)(m->settled.accesses, 0, sizeof m->settled.accesses);
   VG_(memset)(m->settled.misses, 0, sizeof m->settled.misses);
   m->settled.invalidations = 0;
   VG_(memset)(m->settled.cycles, 0, threads_cap * sizeof(ULong));
   VG_(memset)(m->settled.reach, 0, (SizeT)threads_cap * MAX_LEVELS * sizeof(ULong));
   return h;
}

/* The inclusive back-invalidations a member owed its group's levels, in its own copy of them. */
static void pay(Group* h, Int from, Int to)
{
   for (Int i = from; i < to; i++) {
      Int e = dir_find(&h->dir, owed_line[i]), owed = owed_instance[i];
      if (e < 0 || !may_hold(h, &h->dir, e, owed)) continue;
      for (Int* b = below[owed]; *b >= 0; b++)  /* L1s listed without a copy (lazy_l1), or not listed (unlisted) */
         if (may_hold(h, &h->dir, e, *b)) {
            remove_from(h->tags, *b, owed_line[i]);
            set_holder(&h->dir, e, *b, False);
         }
      remove_from(h->tags, owed, owed_line[i]);
      set_holder(&h->dir, e, owed, False);
      if (no_holder(&h->dir, e)) dir_delete(&h->dir, (UWord)e);
   }
}

/* The members' parts of access `index`; those that owe the group's levels a back-invalidation
   leave it, but for the last member, which pays in the group (then returns True). */
static __attribute__((noinline)) Bool members_take(Group* g, const Lookup* a, Int index)
{
   Int owing[MAX_MODELS], from[MAX_MODELS], to[MAX_MODELS], n_owing = 0;
   owed_used = 0;
   for (Int i = 0; i < g->n_members; i++) {
      Int start = owed_used;
      member_part(&models[g->members[i]], g, a);
      if (owed_used > start) {
         owing[n_owing] = g->members[i];
         from[n_owing] = start;
         to[n_owing++] = owed_used;
      }
   }
   for (Int i = 0; i < n_owing; i++) {
      if (g->n_members == 1) {
         pay(g, from[i], to[i]);
         return True;
      }
      Group* h = split_off(owing[i], index + 1);
      pay(h, from[i], to[i]);
      group_part(h, a, dir_find(&h->dir, a->line));  /* a deletion may have moved it */
   }
   return False;
}

/* Access `index` of the chunk (thread t, line, write?) in group g and its members, when it is not
   the common case of run_group. */
static void simulate(Int gi, Int index, Int t, UWord line, Bool is_write, Bool in_l1)
{
   Group* g = groups[gi];
   Bool streamed = !in_l1 && stream_of(g, t, line);
   Lookup a;
   a.t = t;
   a.line = line;
   a.is_write = is_write;
   a.streamed = streamed;
   a.mine = path + (SizeT)pu_of_slot(g->slots, g->nslots, g->repeat_from, t) * n_levels;
   Dir* d = &g->dir;
   Int e = dir_find(d, line);
   a.hit = -1;
   for (Int j = 0; j < g->levels; j++) {
      g->counts.accesses[j]++;
      g->counts.reach[(SizeT)t * MAX_LEVELS + j]++;
      if (j == 0 ? in_l1 : e >= 0 && holds(d, e, a.mine[j])) {  /* L1: see lazy_l1 */
         a.hit = j;
         break;
      }
      g->counts.misses[j]++;
   }
   a.owner = e >= 0 && writer_of(d, e) != a.mine[0] ? owner_in(g, e, line) : -1;  /* its own: no transfer */
   a.transfer = a.owner >= 0 && a.mine[0] != a.owner;
   if (a.hit >= 0 && !a.transfer) g->counts.cycles[t] += served(a.hit, 0, streamed);
   /* A write served by the group's levels leaves the members only copies to invalidate above them,
      and there are none off the writer's path if its L1 wrote the line last and alone since. */
   Bool mine_alone = e >= 0 && writer_of(d, e) == a.mine[0];
   if ((a.hit < 0 || a.transfer || (is_write && g->levels < n_levels && !mine_alone)) && members_take(g, &a, index))
      e = dir_find(d, line);  /* the group paid a back-invalidation: a deletion may have moved it */
   group_part(g, &a, e);
}

/* Placements grouped by the levels whose caches their threads share alike: a placement joins the
   first group it shares at least its L1s with; a group's levels are those all its members share. */
static Int shared_levels(const Model* a, const Model* b, Int* a_to_b, Int* b_to_a)
{
   if (a->nslots != b->nslots || a->repeat_from != b->repeat_from) return 0;
   for (Int i = 0; i < n_instances; i++) a_to_b[i] = b_to_a[i] = -1;
   for (Int j = 0; j < n_levels; j++)
      for (Int s = 0; s < a->nslots; s++) {
         Int x = path[a->slots[s] * n_levels + j], y = path[b->slots[s] * n_levels + j];
         if (a_to_b[x] < 0 && b_to_a[y] < 0) {
            a_to_b[x] = y;
            b_to_a[y] = x;
         } else if (a_to_b[x] != y || b_to_a[y] != x) {
            return j;
         }
      }
   return n_levels;
}

static void group_models(Int limit)
{
   Int* first = zeroed("ps.group", n_models, sizeof(Int));
   for (Int k = 0; k < n_models; k++) {
      Model* m = &models[k];
      m->canonical = zeroed("ps.map", n_instances, sizeof(Int));
      m->actual = zeroed("ps.map", n_instances, sizeof(Int));
      m->group = -1;
      for (Int gi = 0; gi < n_groups && m->group < 0 && !m->alone; gi++) {
         if (models[first[gi]].alone || groups[gi]->n_members >= limit) continue;
         Int shared = shared_levels(&models[first[gi]], m, m->canonical, m->actual);
         if (shared == 0) continue;
         Group* g = groups[gi];
         if (shared < g->levels) g->levels = shared;
         g->members[g->n_members++] = k;
         m->group = gi;
      }
      if (m->group < 0) {
         first[n_groups] = k;
         m->group = new_group(n_levels, m->nslots, m->repeat_from, m->slots);
         groups[m->group]->members[groups[m->group]->n_members++] = k;
      }
   }
   for (Int gi = 0; gi < n_groups; gi++) {
      Group* g = groups[gi];
      /* --ps-check-groups holds the one-path groups to the general case */
      Bool one = !models[first[gi]].alone && g->levels == n_levels;
      for (Int s = 1; s < g->nslots && one; s++) one = path[g->slots[s] * n_levels] == path[g->slots[0] * n_levels];
      if (one) g->one_path = path + (SizeT)g->slots[0] * n_levels;
      g->unlisted = unlisted(g);  /* its levels are final now */
      for (Int i = 0; i < g->n_members; i++)  /* canonical[x] = the group's instance for x, on its levels */
         shared_levels(&models[first[gi]], &models[g->members[i]], models[g->members[i]].actual,
                       models[g->members[i]].canonical);
   }
   VG_(free)(first);
}

/* The caches and directories of a group and its members, in the process that simulates them
   (allocate_groups): Valgrind's process does not hold those of the groups its workers take. */
static void allocate_group(Group* g)
{
   g->tags = zeroed("ps.tags", group_tags(g->levels), sizeof(UWord));
   dir_alloc(&g->dir, 4096);
   for (Int i = 0; i < g->n_members; i++) {
      Model* m = &models[g->members[i]];
      SizeT low = group_tags(g->levels);
      m->tags_memory = zeroed("ps.tags", tags_per_model - low, sizeof(UWord));
      m->tags = m->tags_memory - low;
      dir_alloc(&m->dir, g->levels < n_levels ? 4096 : 2);
   }
}

static void allocate_groups(Bool all)
{
   for (Int gi = 0; gi < n_groups; gi++)
      if (all || groups[gi]->worker == worker) allocate_group(groups[gi]);
}

/* Accesses in the order the models take them, a chunk at a time. The groups never interact, so
   each takes the whole chunk in turn: one group's caches and directories stay in the host's caches
   for CHUNK accesses instead of all groups' at each access (same sequence, same counts), and
   the chunk (3 MiB) stays in the host's L2 or L3 while they take it. Measured on 8 placements of
   8 threads, one model each: 4,096 accesses a chunk saved 7-20%, 262,144 saved 10-42%; with
   groups, 32,768 to 262,144 are alike. */
#define CHUNK (1 << 18)
/* An access in a chunk: (line << ENTRY_LINE) | (thread << 1) | write, one word (MAX_THREADS
   fits in the thread's bits; a line of a 53-bit address in the rest): a group streams through the
   chunk at every access, and one word read instead of a word and a thread's int took a third
   off that stream. */
#define ENTRY_LINE 17
#define ENTRY_THREAD(entry) ((Int)(((entry) >> 1) & (MAX_THREADS - 1)))
#define ENTRY_LINE_OF(entry) ((entry) >> ENTRY_LINE)
STATIC_ASSERT(MAX_THREADS == 1 << (ENTRY_LINE - 1));  /* the thread's bits, between the write bit and the line */
static UWord* chunk_entry;
static Int chunk_used = 0;

/* A group whose threads all share one L1 (OpenMP's proc_bind(primary), or any placement on the
   PUs of one core) has one path of caches: no line is ever held off it, so no copy is invalidated
   and none comes from another cache; the directory is not needed and each level is looked up in
   its set, as cachegrind does. Same counts as simulate (the tests check it against the general
   case with --ps-check-groups). `ways`, `w`: the thread's L1 set and the way holding the line
   (w == l1_assoc: none), which run_group found. */
static void one_path_access(Group* g, Int t, UWord line, Bool is_write, UWord* ways, Int w)
{
   const Int* mine = g->one_path;
   Counts* c = &g->counts;
   c->accesses[0]++;
   if (w < l1_assoc) {  /* a write to a line held clean: modified now */
      UWord value = ways[w] | MODIFIED | WRITER;
      for (; w > 0; w--) ways[w] = ways[w - 1];
      ways[0] = value;
      c->cycles[t] += (ULong)latency_of[0];
      return;
   }
   c->misses[0]++;
   Bool streamed = stream_of(g, t, line);
   Int hit = -1;
   for (Int j = 1; j < n_levels && hit < 0; j++) {
      c->accesses[j]++;
      c->reach[(SizeT)t * MAX_LEVELS + j]++;
      UWord* set = set_of(g->tags, mine[j], line);
      for (Int v = 0; v < assoc_of[j]; v++)
         if (SAME(set[v], line)) {
            touch(g->tags, mine[j], line);
            hit = j;
            break;
         }
      if (hit < 0) c->misses[j]++;
   }
   if (hit >= 0) {
      c->cycles[t] += served(hit, 0, streamed);
   } else {
      Lookup a = {t, line, is_write, mine, -1, -1, False, streamed};
      for (Int i = 0; i < g->n_members; i++) member_part(&models[g->members[i]], g, &a);  /* DRAM: their nodes */
   }
   for (Int j = (hit < 0 ? n_levels : hit) - 1; j >= 0; j--) {  /* from the top: inclusion holds */
      UWord victim = put_front(g->tags, mine[j], line);
      if (victim && clo_inclusive)
         for (Int k = j - 1; k >= 0; k--) remove_from(g->tags, mine[k], victim - 1);
   }
   ways[0] |= WRITER | (is_write ? MODIFIED : 0);  /* the only path: no copy is ever held elsewhere */
}

/* Group gi takes the chunk from where it is. The common case is done here without the directory:
   the line in the thread's L1, read, or written by the line's writer (WRITER: no other copy
   exists); the rest in simulate. Tried and left out: prefetching the directory entry (and the
   L2 set) of the access 16 ahead, in groups that went off this path often in the last chunk:
   measured on the benchmark's three programs as simulate runs them, within +-5% either way. */
static void run_group(Int gi)
{
   Group* g = groups[gi];
   for (Int t = 0; t < n_threads; t++) {
      const Int* mine = path + (SizeT)pu_of_slot(g->slots, g->nslots, g->repeat_from, t) * n_levels;
      l1_of_thread[t] = g->tags + tags_offset[mine[0]];
      l2_of_thread[t] = g->unlisted ? g->tags + tags_offset[mine[1]] : NULL;
   }
   const Bool l2_read = g->unlisted && !g->one_path;
   const UWord l2_mask = l2_read ? (UWord)(sets_of[1] - 1) : 0;
   const Bool l1_pow2 = pow2_sets[0], l2_pow2 = l2_read && pow2_sets[1];
   const UWord l1_sets = (UWord)sets_of[0], l2_sets = l2_read ? (UWord)sets_of[1] : 1;
   const Int l2_assoc = l2_read ? assoc_of[1] : 0;
   const ULong l2_latency = l2_read ? (ULong)latency_of[1] : 0;
   ULong* cycles = g->counts.cycles;
   ULong latency = (ULong)latency_of[0], hits = 0;
   /* in locals: the slow path's calls would make the compiler reload the globals at each access */
   const UWord* entries = chunk_entry;
   UWord* const* l1_of = l1_of_thread;
   const UWord set_mask = l1_set_mask;
   const Int assoc = l1_assoc, used = chunk_used;
   for (Int i = g->resume; i < used; i++) {
      UWord entry = entries[i], line = ENTRY_LINE_OF(entry), want = line + 1;
      Int t = ENTRY_THREAD(entry);
      UWord* ways = l1_of[t] + (l1_pow2 ? line & set_mask : line % l1_sets) * assoc;
      Int w = 0;
      while (w < assoc && (ways[w] >> 2) != want) w++;
      if (w < assoc && (((ways[w] >> 1) | ~entry) & 1)) {  /* a read, or a write by the line's writer */
         UWord value = ways[w] | (entry & 1);
         for (; w > 0; w--) ways[w] = ways[w - 1];
         ways[0] = value;
         hits++;
         cycles[t] += latency;
         continue;
      }
      g->counts.accesses[0] += hits;
      hits = 0;
      if (l2_read && w == assoc && !(entry & 1)) {  /* a read that misses its L1: its L2's set (see unlisted) */
         UWord* l2 = l2_of_thread[t] + (l2_pow2 ? line & l2_mask : line % l2_sets) * l2_assoc;
         Int v = 0;
         while (v < l2_assoc && (l2[v] >> 2) != want) v++;
         if (v < l2_assoc) {
            stream_of(g, t, line);  /* an L1 miss: the streams follow it, as every other group's do */
            UWord found = l2[v];
            for (; v > 0; v--) l2[v] = l2[v - 1];
            l2[0] = found;
            for (w = assoc - 1; w > 0; w--) ways[w] = ways[w - 1];  /* the L1's victim: nothing lists it */
            ways[0] = TAG(line) | (found & WRITER);
            g->counts.accesses[0]++;
            g->counts.misses[0]++;
            g->counts.accesses[1]++;
            g->counts.reach[(SizeT)t * MAX_LEVELS + 1]++;
            cycles[t] += l2_latency;
            continue;
         }
      }
      if (g->one_path) one_path_access(g, t, line, entry & 1, ways, w);
      else simulate(gi, i, t, line, entry & 1, w < assoc);
   }
   g->counts.accesses[0] += hits;
}

/* Bandwidth and queueing over the chunk just simulated, for placement m (see the top of the
   file). Resources: cache instances (by their global number), then memory controllers (n_instances
   + node). Scratch arrays, sized once: lines through each resource, each PU's busy cycles, each
   PU's lines through the resources on its path (levels above L1, then every node). */
static double* res_bytes;
static double* res_wait;
static double* pu_busy;
static double* pu_lines;
static Bool* pu_used;
static double* thread_lines;             /* per thread and level: its lines through it in the chunk */
static Int thread_lines_cap;

static inline double resource_bandwidth(Int r)
{
   return r < n_instances ? bandwidth_of[level_of_instance[r]] : dram_bandwidth;
}

/* Each line's wait at resource r when the chunk lasts `span` cycles (M/D/1); a resource past its
   bandwidth waits without end. */
static inline double wait_at(Int r, double span)
{
   double bandwidth = resource_bandwidth(r);
   if (bandwidth <= 0 || res_bytes[r] <= 0) return 0;
   double busy = res_bytes[r] / (bandwidth * span);
   if (busy >= 1) return 1e300;
   double service = (double)(1 << line_shift) / bandwidth;
   return service * busy / (2 * (1 - busy));
}

/* The chunk's span if it lasted `span` cycles: the busiest PU's cycles with its waits. */
static double span_with_waits(double span)
{
   Int width = n_levels + n_nodes;
   for (Int r = 0; r < n_instances + n_nodes; r++) res_wait[r] = wait_at(r, span);
   double longest = 0;
   for (Int p = 0; p < n_pus; p++) {
      if (!pu_used[p]) continue;
      double busy = pu_busy[p];
      const double* lines = pu_lines + (SizeT)p * width;
      for (Int j = 1; j < n_levels; j++) if (lines[j] > 0) busy += lines[j] * res_wait[path[p * n_levels + j]];
      for (Int n = 0; n < n_nodes; n++) if (lines[n_levels + n] > 0) busy += lines[n_levels + n] * res_wait[n_instances + n];
      if (busy > longest) longest = busy;
   }
   return longest;
}

static void bandwidth_chunk(Model* m)
{
   if (res_bytes == NULL) {
      res_bytes = zeroed("ps.bw", n_instances + n_nodes, sizeof(double));
      res_wait = zeroed("ps.bw", n_instances + n_nodes, sizeof(double));
      pu_busy = zeroed("ps.bw", n_pus, sizeof(double));
      pu_lines = zeroed("ps.bw", (SizeT)n_pus * (n_levels + n_nodes), sizeof(double));
      pu_used = zeroed("ps.bw", n_pus, sizeof(Bool));
   }
   if (thread_lines_cap < threads_cap) {
      if (thread_lines) VG_(free)(thread_lines);
      thread_lines = zeroed("ps.bw", (SizeT)threads_cap * MAX_LEVELS, sizeof(double));
      thread_lines_cap = threads_cap;
   }
   const Group* g = groups[m->group];
   Int width = n_levels + n_nodes;
   double line = (double)(1 << line_shift);
   VG_(memset)(res_bytes, 0, (n_instances + n_nodes) * sizeof(double));
   VG_(memset)(pu_busy, 0, n_pus * sizeof(double));
   VG_(memset)(pu_lines, 0, (SizeT)n_pus * width * sizeof(double));
   VG_(memset)(pu_used, 0, n_pus * sizeof(Bool));
   Bool traffic = False;
   for (Int t = 0; t < n_threads; t++) {  /* what each thread did since the last chunk, on its PU */
      Int p = pu_of_slot(m->slots, m->nslots, m->repeat_from, t);
      ULong cycles = m->counts.cycles[t] + g->counts.cycles[t] - m->settled.cycles[t];
      pu_busy[p] += (double)(cycles - m->seen_cycles[t]);
      m->seen_cycles[t] = cycles;
      pu_used[p] = True;
      double* lines = pu_lines + (SizeT)p * width;
      for (Int j = 1; j < n_levels; j++) {
         SizeT i = (SizeT)t * MAX_LEVELS + j;
         ULong reach = m->counts.reach[i] + g->counts.reach[i] - m->settled.reach[i];
         double moved = (double)(reach - m->seen_reach[i]);
         m->seen_reach[i] = reach;
         thread_lines[i] = moved;
         lines[j] += moved;
         res_bytes[path[p * n_levels + j]] += moved * line;
      }
      for (Int n = 0; n < n_nodes; n++) {
         SizeT i = (SizeT)t * n_nodes + n;
         double moved = (double)(m->dram_lines[i] - m->seen_dram[i]);
         lines[n_levels + n] += moved;
         res_bytes[n_instances + n] += moved * line;
         m->node_bytes[n] += (m->dram_lines[i] - m->seen_dram[i]) << line_shift;
      }
   }
   double lowest = 0;  /* the chunk lasts at least its busiest PU's cycles, and what each resource moved */
   for (Int p = 0; p < n_pus; p++) if (pu_busy[p] > lowest) lowest = pu_busy[p];
   for (Int r = 0; r < n_instances + n_nodes; r++) {
      double bandwidth = resource_bandwidth(r);
      if (bandwidth > 0 && res_bytes[r] > 0) {
         traffic = True;
         if (res_bytes[r] / bandwidth > lowest) lowest = res_bytes[r] / bandwidth;
      }
   }
   if (!traffic || lowest <= 0) {
      for (Int t = 0; t < n_threads; t++)
         for (Int n = 0; n < n_nodes; n++) m->seen_dram[(SizeT)t * n_nodes + n] = m->dram_lines[(SizeT)t * n_nodes + n];
      return;
   }
   /* span_with_waits falls as the span grows: bisect for the span that equals it */
   double low = lowest, high = 2 * lowest;
   for (Int k = 0; k < 200 && span_with_waits(high) > high; k++) high *= 2;
   for (Int k = 0; k < 60 && high - low > 1e-9 * high; k++) {
      double mid = (low + high) / 2;
      if (span_with_waits(mid) > mid) low = mid;
      else high = mid;
   }
   span_with_waits(high);
   for (Int r = 0; r < n_instances + n_nodes; r++) {
      double bandwidth = resource_bandwidth(r);
      if (bandwidth > 0 && res_bytes[r] / (bandwidth * high) > m->busiest) m->busiest = res_bytes[r] / (bandwidth * high);
   }
   for (Int t = 0; t < n_threads; t++) {  /* each thread's waits, by its lines through each resource */
      Int p = pu_of_slot(m->slots, m->nslots, m->repeat_from, t);
      double waited = 0;
      for (Int j = 1; j < n_levels; j++) {
         waited += thread_lines[(SizeT)t * MAX_LEVELS + j] * res_wait[path[p * n_levels + j]];
      }
      for (Int n = 0; n < n_nodes; n++) {
         SizeT i = (SizeT)t * n_nodes + n;
         waited += (double)(m->dram_lines[i] - m->seen_dram[i]) * res_wait[n_instances + n];
         m->seen_dram[i] = m->dram_lines[i];
      }
      m->queue[t] += waited;
   }
}

/* The groups this process simulates (all: every group) over the chunk; then each placement's
   bandwidth over it. */
static void run_groups(Bool all)
{
   for (Int gi = 0; gi < n_groups; gi++) groups[gi]->resume = 0;
   for (Int gi = 0; gi < n_groups; gi++)  /* one split off during the chunk goes on where it left */
      if (all || groups[gi]->worker == worker) run_group(gi);
   for (Int k = 0; k < n_models; k++)
      if (all || groups[models[k].group]->worker == worker) bandwidth_chunk(&models[k]);
}

/*------------------------------------------------------------*/
/*--- Workers                                              ---*/
/*------------------------------------------------------------*/

/* The groups never interact, so --ps-workers=N processes can simulate them while the program
   runs, and this process (Valgrind's) only collects the accesses. The workers are forked before
   the program starts, with a copy of the models; each takes some groups (deal_groups; split-offs
   stay with it). RING chunk buffers in memory shared with them (16 MiB): this process fills one
   while the workers take the others in turn; a message on each worker's pipe hands a chunk over
   (buffer, accesses, threads), the worker's answer on its own pipe says it is done with it. With
   two buffers, the workers waited while this process collected the next --ps-buffer accesses,
   and it waited on them while it interleaved those (16 chunks at once by default); with RING the
   chunks it interleaves are simulated while it collects the next. At the end a message with
   no accesses asks for the counts: the worker writes every placement's on its pipe (zero where
   it did not simulate it), then an end record, and exits.
   Measured against this, splitting the lines between the workers by their set bits instead (every
   worker simulating every group for its part of the lines: they never meet in a cache) balanced
   worse on 2 workers (a few hot shared lines land in one part) and cost 14% more in all.
   Workers are grandchildren (the middle process exits at once), so that the program's own
   wait() for its children never finds them. Their pipes close when this process ends or execs,
   and a worker that reads the end of its pipe exits: none outlives the run. A process the
   program forks is not simulated (ps_client_forked). */

/* Valgrind's own, not in the tool interface: sharing memory with another process (Valgrind
   uses it to talk to vgdb), fcntl, and where the file descriptors it keeps for itself begin. */
extern SysRes VG_(am_shared_mmap_file_float_valgrind)(SizeT length, UInt prot, Int fd, Off64T offset);
extern Int VG_(fcntl)(Int fd, Int cmd, Addr arg);
extern Int VG_(fd_hard_limit);

typedef struct {
   Int buffer, count, threads;           /* count < 0: send the counts and exit */
} Handover;

static Int n_workers = 0;                /* how many; 0: Valgrind's process simulates */
static Int to_worker[MAX_WORKERS], from_worker[MAX_WORKERS];  /* a pipe each way per worker */
static Int worker_in, worker_out;        /* in a worker: its two pipe ends */
#define RING 8                           /* chunk buffers shared with the workers */
static UWord* shared_entries;            /* RING x CHUNK */
static Int filling = 0;                  /* the buffer being filled */
static Int outstanding = 0;              /* buffers handed over before it, the workers not done with */
static Bool forked_client = False;       /* this process is one the program forked */

static Bool read_all(Int fd, void* data, SizeT size)
{
   for (SizeT done = 0; done < size;) {
      Int got = VG_(read)(fd, (HChar*)data + done, size - done);
      if (got <= 0) return False;
      done += got;
   }
   return True;
}

static void write_all(Int fd, const void* data, SizeT size)
{
   for (SizeT done = 0; done < size;) {
      Int put = VG_(write)(fd, (const HChar*)data + done, size - done);
      if (put <= 0) {
         if (worker >= 0) VG_(exit)(0);  /* Valgrind's process is gone: nobody wants the counts */
         VG_(umsg)("pinwise-sim: a simulation worker died\n");
         VG_(exit)(3);
      }
      done += put;
   }
}

static void worker_answer(Int w, void* data, SizeT size)
{
   if (!read_all(from_worker[w], data, size)) {
      VG_(umsg)("pinwise-sim: simulation worker %d died\n", w);
      VG_(exit)(3);
   }
}

static void use_buffer(Int b)
{
   chunk_entry = shared_entries + (SizeT)b * CHUNK;
}

/* Hand the filled buffer to the workers and go on with the next; when every buffer is with them,
   wait until they are done with the oldest (the next: they take them in turn). */
static void hand_over(void)
{
   Handover h = {filling, chunk_used, n_threads};
   for (Int w = 0; w < n_workers; w++) write_all(to_worker[w], &h, sizeof h);
   if (++outstanding == RING) {
      for (Int w = 0; w < n_workers; w++) {
         Int done;
         worker_answer(w, &done, sizeof done);
      }
      outstanding--;
   }
   filling = (filling + 1) % RING;
   use_buffer(filling);
   chunk_used = 0;
}

static void flush_chunk(void)
{
   if (forked_client) {
      chunk_used = 0;
      return;
   }
   if (n_workers > 0) {
      if (clo_check_workers) run_groups(True);  /* every group here too, while the workers take theirs */
      hand_over();
      return;
   }
   run_groups(True);
   chunk_used = 0;
}

typedef struct {
   Int model;                            /* -1: the end (then levels holds the worker's groups) */
   ULong levels[2 * MAX_LEVELS], invalidations, transfers[MAX_CLASSES], dram_local, dram_remote;
   ULong node_bytes[MAX_NODES];
   double busiest;
} Record;

static void worker_loop(void)
{
   for (;;) {
      Handover h;
      if (!read_all(worker_in, &h, sizeof h)) VG_(exit)(0);  /* Valgrind's process is gone */
      grow_threads(h.threads);  /* the counts below go for as many threads as Valgrind's process has */
      n_threads = h.threads;
      if (h.count < 0) break;
      use_buffer(h.buffer);
      chunk_used = h.count;
      run_groups(False);
      write_all(worker_out, &h.buffer, sizeof h.buffer);
   }
   for (Int k = 0; k < n_models; k++) {
      Model* m = &models[k];
      settle(m);
      Record r;
      VG_(memset)(&r, 0, sizeof r);
      r.model = k;
      for (Int j = 0; j < n_levels; j++) {
         r.levels[2 * j] = m->counts.accesses[j];
         r.levels[2 * j + 1] = m->counts.misses[j];
      }
      r.invalidations = m->counts.invalidations;
      for (Int c = 0; c < n_classes; c++) r.transfers[c] = m->transfers[c];
      r.dram_local = m->dram_local;
      r.dram_remote = m->dram_remote;
      VG_(memcpy)(r.node_bytes, m->node_bytes, sizeof r.node_bytes);
      r.busiest = m->busiest;
      write_all(worker_out, &r, sizeof r);
      write_all(worker_out, m->counts.cycles, (SizeT)n_threads * sizeof(ULong));
      write_all(worker_out, m->queue, (SizeT)n_threads * sizeof(double));
   }
   Record end;
   VG_(memset)(&end, 0, sizeof end);
   end.model = -1;
   for (Int gi = 0; gi < n_groups; gi++) end.levels[0] += groups[gi]->worker == worker;
   write_all(worker_out, &end, sizeof end);
   VG_(exit)(0);
}

/* At the end, once the last chunk is handed over: the workers' counts into this process's models.
   Returns the groups they simulated. */
static Int collect_workers(void)
{
   Handover h = {0, -1, n_threads};
   for (Int w = 0; w < n_workers; w++) write_all(to_worker[w], &h, sizeof h);
   Int groups_seen = 0;
   ULong* cycles = zeroed("ps.cycles", n_threads, sizeof(ULong));
   double* queue = zeroed("ps.cycles", n_threads, sizeof(double));
   for (Int w = 0; w < n_workers; w++) {
      for (Int i = 0; i < outstanding; i++) {
         Int done;
         worker_answer(w, &done, sizeof done);
      }
      for (;;) {
         Record r;
         worker_answer(w, &r, sizeof r);
         if (r.model < 0) {
            groups_seen += (Int)r.levels[0];
            break;
         }
         if (r.model >= n_models) {
            VG_(umsg)("pinwise-sim: simulation worker %d answered nonsense\n", w);
            VG_(exit)(3);
         }
         Model* m = &models[r.model];
         for (Int j = 0; j < n_levels; j++) {
            m->counts.accesses[j] += r.levels[2 * j];
            m->counts.misses[j] += r.levels[2 * j + 1];
         }
         m->counts.invalidations += r.invalidations;
         for (Int c = 0; c < n_classes; c++) m->transfers[c] += r.transfers[c];
         m->dram_local += r.dram_local;
         m->dram_remote += r.dram_remote;
         for (Int n = 0; n < n_nodes; n++) m->node_bytes[n] += r.node_bytes[n];
         if (r.busiest > m->busiest) m->busiest = r.busiest;
         worker_answer(w, cycles, (SizeT)n_threads * sizeof(ULong));
         for (Int t = 0; t < n_threads; t++) m->counts.cycles[t] += cycles[t];
         worker_answer(w, queue, (SizeT)n_threads * sizeof(double));
         for (Int t = 0; t < n_threads; t++) m->queue[t] += queue[t];
      }
      VG_(close)(to_worker[w]);
      VG_(close)(from_worker[w]);
   }
   outstanding = 0;
   VG_(free)(cycles);
   VG_(free)(queue);
   return groups_seen;
}

/* Memory this process and the workers share: a file in /dev/shm (or beside --ps-out), mapped and
   unlinked at once. */
static Bool share_buffers(void)
{
   SizeT size = RING * (SizeT)CHUNK * sizeof(UWord);
   HChar name[4096];
   Int fd = -1;
   for (Int attempt = 0; attempt < 2 && fd < 0; attempt++) {
      if (attempt == 0) VG_(snprintf)(name, sizeof name, "/dev/shm/pinwise-sim-%d", VG_(getpid)());
      else VG_(snprintf)(name, sizeof name, "%s.shared", clo_out);
      SysRes res = VG_(open)(name, VKI_O_CREAT | VKI_O_EXCL | VKI_O_RDWR, 0600);
      if (!sr_isError(res)) fd = (Int)sr_Res(res);
   }
   if (fd < 0) return False;
   static HChar zeros[1 << 16];
   Bool ok = True;
   for (SizeT done = 0; done < size && ok; done += sizeof zeros) ok = VG_(write)(fd, zeros, sizeof zeros) == (Int)sizeof zeros;
   SysRes map = VG_(am_shared_mmap_file_float_valgrind)(size, VKI_PROT_READ | VKI_PROT_WRITE, fd, 0);
   VG_(close)(fd);
   VG_(unlink)(name);
   if (!ok || sr_isError(map)) return False;
   shared_entries = (UWord*)sr_Res(map);
   return True;
}

/* The groups dealt out to the workers in turn. What a group costs depends on the program more than
   on the group: measured on 8 placements of x7550, a group of one path (no directory) took 0.6x
   the others' time on the neighbour program and 2x on a program whose threads all thrash its one
   L1. */
static void deal_groups(void)
{
   /* Tried and left out: giving Valgrind's process a share when there are more groups than
      workers (five groups on four workers leave one worker with two, and a CPU idles while it
      ends alone): the collecting slowed, and the workers waited for chunks; 8 placements on x7550,
      interleaved best of 4: neighbour 2.47 -> 2.75 s, L1-resident 2.02 -> 2.11 s, 64 KiB equal. */
   for (Int gi = 0; gi < n_groups; gi++) groups[gi]->worker = gi % n_workers;
}

/* `fd` moved among the few descriptors Valgrind keeps for itself, out of the program's reach and
   closed on exec (what VG_(safe_fd) does, but it asserts when none is left); -1: none left, and
   `fd` is closed. */
static Int out_of_reach(Int fd)
{
   Int moved = VG_(fcntl)(fd, VKI_F_DUPFD, (Addr)VG_(fd_hard_limit));
   VG_(close)(fd);
   if (moved < 0) return -1;
   VG_(fcntl)(moved, VKI_F_SETFD, VKI_FD_CLOEXEC);
   return moved;
}

/* A pipe each way for a worker, Valgrind's ends out of the program's reach; False: no room. */
static Bool pipes_for(Int down[2], Int up[2])
{
   if (VG_(pipe)(down) != 0) return False;
   if (VG_(pipe)(up) != 0) {
      VG_(close)(down[0]);
      VG_(close)(down[1]);
      return False;
   }
   down[1] = out_of_reach(down[1]);
   up[0] = out_of_reach(up[0]);
   if (down[1] >= 0 && up[0] >= 0) return True;
   VG_(close)(down[0]);
   VG_(close)(up[1]);
   if (down[1] >= 0) VG_(close)(down[1]);
   if (up[0] >= 0) VG_(close)(up[0]);
   return False;
}

/* How many of its own descriptors Valgrind takes after the tool starts: its pipe lock unless
   --fair-sched=yes, and vgdb's unless --vgdb=no (two each; counted on this Valgrind). */
static Int descriptors_valgrind_needs(void)
{
   Bool fair = False, vgdb = True;
   for (Word i = 0; i < VG_(sizeXA)(VG_(args_for_valgrind)); i++) {
      const HChar* arg = *(HChar**)VG_(indexXA)(VG_(args_for_valgrind), i);
      if (VG_(strncmp)(arg, "--fair-sched=", 13) == 0) fair = VG_(strcmp)(arg + 13, "yes") == 0;
      else if (VG_(strncmp)(arg, "--vgdb=", 7) == 0) vgdb = VG_(strcmp)(arg + 7, "no") != 0;
   }
   return (fair ? 0 : 2) + (vgdb ? 2 : 0);
}

/* Whether `count` more descriptors are left where Valgrind keeps its own: `fd` is copied there
   and the copies closed. */
static Bool room_left(Int fd, Int count)
{
   Int copies[8], made = 0;
   tl_assert(count <= 8);
   while (made < count && (copies[made] = VG_(fcntl)(fd, VKI_F_DUPFD, (Addr)VG_(fd_hard_limit))) >= 0) made++;
   for (Int i = 0; i < made; i++) VG_(close)(copies[i]);
   return made == count;
}

/* Fewer groups than workers leave workers idle: placements that all share one grouping of L1s
   (4 placements of an ADI solver on x7550, one per core) were one group, simulated by one worker
   while the others waited, at 9-12x cachegrind. The groups are made again with at most
   ceil(K / N) placements each: each new group simulates the shared levels once more, and N
   workers share the levels above; the counts are the same (every grouping is exact). Before the
   groups are allocated or dealt. */
static void split_groups(Int target)
{
   Int own = 0;  /* groups of placements (--ps-check-groups adds a group per placement alone) */
   for (Int gi = 0; gi < n_groups; gi++) own += !models[groups[gi]->members[0]].alone;
   if (target <= own || own >= n_placements) return;
   for (Int gi = 0; gi < n_groups; gi++) {
      VG_(free)(groups[gi]->counts.cycles);
      VG_(free)(groups[gi]->counts.reach);
      VG_(free)(groups[gi]);
   }
   n_groups = 0;
   for (Int k = 0; k < n_models; k++) {
      VG_(free)(models[k].canonical);
      VG_(free)(models[k].actual);
   }
   group_models((n_placements + target - 1) / target);
}

static void start_workers(void)
{
   split_groups((Int)(clo_split < clo_workers ? clo_split : clo_workers));
   n_workers = (Int)clo_workers < n_groups ? (Int)clo_workers : n_groups;
   if (n_workers == 0) return;
   if (!share_buffers()) {
      VG_(umsg)("pinwise-sim: no memory to share with workers; simulating in this process\n");
      n_workers = 0;
      return;
   }
   Int down[MAX_WORKERS][2], up[MAX_WORKERS][2];
   Int made = 0;
   while (made < n_workers && pipes_for(down[made], up[made])) made++;
   Int later = descriptors_valgrind_needs();
   while (made > 0 && !room_left(down[0][0], later)) {
      made--;
      VG_(close)(down[made][0]);
      VG_(close)(down[made][1]);
      VG_(close)(up[made][0]);
      VG_(close)(up[made][1]);
   }
   if (made < n_workers) {  /* Valgrind keeps about ten descriptors for itself */
      VG_(umsg)("pinwise-sim: %d simulation worker%s instead of %d: Valgrind keeps too few file descriptors for "
                "their pipes (--fair-sched=yes and --vgdb=no free two each)\n", made, made == 1 ? "" : "s",
                n_workers);
      n_workers = made;
      if (n_workers == 0) return;
   }
   deal_groups();
   for (Int w = 0; w < n_workers; w++) {
      Int middle = VG_(fork)();
      if (middle < 0) {
         VG_(umsg)("pinwise-sim: cannot start simulation workers\n");
         VG_(exit)(3);
      }
      if (middle == 0) {
         if (VG_(fork)() == 0) {
            worker = w;
            for (Int v = 0; v < n_workers; v++) {  /* only its own two ends: then a closed pipe means gone */
               if (v != w) VG_(close)(down[v][0]);
               if (v != w) VG_(close)(up[v][1]);
               VG_(close)(down[v][1]);
               VG_(close)(up[v][0]);
            }
            worker_in = down[w][0];
            worker_out = up[w][1];
            allocate_groups(False);
            worker_loop();
         }
         VG_(exit)(0);
      }
      Int status;
      VG_(waitpid)(middle, &status, 0);
   }
   for (Int w = 0; w < n_workers; w++) {
      VG_(close)(down[w][0]);
      VG_(close)(up[w][1]);
      to_worker[w] = down[w][1];
      from_worker[w] = up[w][0];
   }
   use_buffer(filling);
}

/* A process the program forked: not simulated; its copies of the pipes are closed so that the
   workers still see when Valgrind's process ends. */
static void ps_client_forked(ThreadId tid)
{
   (void)tid;
   forked_client = True;
   for (Int w = 0; w < n_workers; w++) {
      VG_(close)(to_worker[w]);
      VG_(close)(from_worker[w]);
   }
   n_workers = 0;
}

static inline void feed(Int t, UWord entry)
{
   chunk_entry[chunk_used] = ((entry >> 1) << ENTRY_LINE) | ((UWord)t << 1) | (entry & 1);
   if (++chunk_used == CHUNK) flush_chunk();
}

/* The buffered accesses, in turns of --ps-quantum per thread, until every buffer is empty. */
static void drain(void)
{
   Int* active = zeroed("ps.drain", n_threads, sizeof(Int));
   SizeT* done = zeroed("ps.drain", n_threads, sizeof(SizeT));
   Int n_active = 0;
   for (Int t = 0; t < n_threads; t++)
      if (buffered[t]) active[n_active++] = t;
   const UWord** from = zeroed("ps.drain", n_threads, sizeof(UWord*));
   while (n_active > 0) {
      /* Turns in which no thread runs out keep the rotation as it is: as many as the thread with
         the fewest accesses left allows, in a tight loop. */
      SizeT least = ~(SizeT)0;
      for (Int a = 0; a < n_active; a++) {
         Int t = active[a];
         if (buffered[t] - done[t] < least) least = buffered[t] - done[t];
         from[a] = buffer[t] + done[t];
      }
      SizeT turns = (least - 1) / (SizeT)clo_quantum;
      for (SizeT turn = 0; turn < turns; turn++)
         for (Int a = 0; a < n_active; a++) {
            const UWord* next = from[a];
            for (Long k = 0; k < clo_quantum; k++) feed(active[a], next[k]);
            from[a] = next + clo_quantum;
         }
      for (Int a = 0; a < n_active; a++) done[active[a]] += turns * (SizeT)clo_quantum;
      for (Int a = 0; a < n_active;) {  /* a turn in which some run out */
         Int t = active[a];
         SizeT end = done[t] + (SizeT)clo_quantum;
         if (end > buffered[t]) end = buffered[t];
         const UWord* entries = buffer[t];
         for (SizeT i = done[t]; i < end; i++) feed(t, entries[i]);
         done[t] = end;
         if (end == buffered[t]) {
            recorded[t] += buffered[t];
            buffered[t] = 0;
            active[a] = active[--n_active];  /* the order of the others stays a rotation */
         } else {
            a++;
         }
      }
   }
   total_buffered = 0;
   VG_(free)(active);
   VG_(free)(done);
   VG_(free)(from);
}

static void record(Int t, UWord line, Bool is_write)
{
   UWord entry = (line << 1) | (is_write ? 1 : 0);
   if (clo_quantum == 0) {
      recorded[t]++;
      feed(t, entry);
      return;
   }
   if (buffered[t] == buffer_cap[t]) {
      SizeT cap = buffer_cap[t] ? buffer_cap[t] * 2 : 4096;
      UWord* grown = VG_(malloc)("ps.buffer", cap * sizeof(UWord));
      if (buffered[t]) VG_(memcpy)(grown, buffer[t], buffered[t] * sizeof(UWord));
      if (buffer[t]) VG_(free)(buffer[t]);
      buffer[t] = grown;
      buffer_cap[t] = cap;
   }
   buffer[t][buffered[t]++] = entry;
   if (++total_buffered >= (SizeT)clo_buffer) drain();
}

/* Recording inline: the instrumented code itself appends an access that stays in one line to the
   running thread's buffer while there is room (rec_pos < rec_end); ps_access, called otherwise,
   takes the rest (a full buffer, the access that starts a drain, one that crosses into the next
   line, a guarded or very wide one) and moves rec_pos and rec_end on. The room ends one access
   short of --ps-buffer, so that ps_access records the access that starts the drain, as when every
   access went through it. The running thread's buffered count is behind by what it recorded
   inline since sync_current. */
static UWord* rec_pos;        /* where the running thread's next access goes; NULL: ps_access */
static UWord* rec_end;
static UWord* synced_at;      /* rec_pos when buffered[cur] was last brought up to date */

static void sync_current(void)
{
   if (rec_pos == NULL) return;
   SizeT added = (SizeT)(rec_pos - synced_at);
   buffered[cur] += added;
   total_buffered += added;
   synced_at = rec_pos;
}

static void aim_current(void)
{
   if (clo_quantum == 0 || buffer[cur] == NULL) {
      rec_pos = rec_end = synced_at = NULL;
      return;
   }
   rec_pos = synced_at = buffer[cur] + buffered[cur];
   SizeT room = buffer_cap[cur] - buffered[cur];
   SizeT budget = total_buffered + 1 < (SizeT)clo_buffer ? (SizeT)clo_buffer - total_buffered - 1 : 0;
   rec_end = rec_pos + (room < budget ? room : budget);
}

static VG_REGPARM(3) void ps_access(Addr address, SizeT size, UWord is_write)
{
   Int t = cur;
   sync_current();
   UWord first = address >> line_shift, last = (address + (size ? size : 1) - 1) >> line_shift;
   record(t, first, is_write != 0);
   if (last != first) {
      record(t, last, is_write != 0);
      extra[t]++;
   }
   aim_current();
}

/*------------------------------------------------------------*/
/*--- Instrumentation                                      ---*/
/*------------------------------------------------------------*/

/* Before the statement that makes it: an access of at most 64 bytes that is not guarded is
   recorded inline when it stays in one line and the buffer has room, else by ps_access. */
static void add_record(void* context, IRExpr* address, Int size, IRExpr* guard, Bool is_write)
{
   IRSB* sb = (IRSB*)context;
   IRExpr** args = mkIRExprVec_3(address, mkIRExpr_HWord((HWord)size), mkIRExpr_HWord(is_write ? 1 : 0));
   IRDirty* di = unsafeIRDirty_0_N(3, "ps_access", VG_(fnptr_to_fnentry)(ps_access), args);
   if (guard || size < 1 || size > 64 || clo_quantum == 0) {
      if (guard) di->guard = guard;
      addStmtToIRSB(sb, IRStmt_Dirty(di));
      return;
   }
   IRExpr* shift = IRExpr_Const(IRConst_U8((UChar)line_shift));
   IRExpr* first = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shr64, address, shift));
   IRExpr* last = first;
   if (size > 1) {
      IRExpr* last_byte = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, address, u64((ULong)size - 1)));
      last = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shr64, last_byte, shift));
   }
   IRExpr* doubled = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shl64, first, IRExpr_Const(IRConst_U8(1))));
   IRExpr* entry = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Or64, doubled, u64(is_write ? 1 : 0)));
   IRExpr* pos = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, u64((ULong)(HWord)&rec_pos)));
   IRExpr* end = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, u64((ULong)(HWord)&rec_end)));
   IRExpr* room = tmp_of(sb, Ity_I64, IRExpr_Unop(Iop_1Uto64, tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpLT64U, pos, end))));
   IRExpr* one_line = tmp_of(sb, Ity_I64, IRExpr_Unop(Iop_1Uto64, tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpEQ64, first,
                                                                                                  last))));
   IRExpr* both = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_And64, room, one_line));
   IRExpr* fast = tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpNE64, both, u64(0)));
   addStmtToIRSB(sb, IRStmt_StoreG(Iend_LE, pos, entry, fast));
   IRExpr* next = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, pos, u64(sizeof(UWord))));
   IRExpr* moved = tmp_of(sb, Ity_I64, IRExpr_ITE(fast, next, pos));
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, u64((ULong)(HWord)&rec_pos), moved));
   di->guard = tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpEQ64, both, u64(0)));
   addStmtToIRSB(sb, IRStmt_Dirty(di));
}

/* The accesses of the superblock being instrumented, found first so that a read and the write
   that follows it to the same address in the same instruction (x86's `add %eax,(%rbx)`, or `lock
   add`: a load, then a compare-and-swap) are one access, a write, as cachegrind counts a modify
   once: one request for the line in the exclusive state, as a core makes it (a read-for-ownership),
   not a shared copy that a second request upgrades. */
typedef struct {
   Int     stmt, instruction;
   IRExpr* address;
   Int     size;
   IRExpr* guard;
   Bool    is_write, merged;  /* merged: into the read before it */
} Found;

static Found* found = NULL;
static Int found_cap = 0, n_found = 0;

typedef struct { Int stmt, instruction; } Scanning;  /* where the scan of the superblock is */

static void note_found(void* context, IRExpr* address, Int size, IRExpr* guard, Bool is_write)
{
   const Scanning* at = context;
   if (n_found == found_cap) {
      found_cap = found_cap ? 2 * found_cap : 64;
      found = VG_(realloc)("ps.found", found, found_cap * sizeof(Found));
   }
   found[n_found++] = (Found){ at->stmt, at->instruction, address, size, guard, is_write, False };
}

static Bool same_expr(const IRExpr* a, const IRExpr* b)
{
   if (a->tag == Iex_RdTmp && b->tag == Iex_RdTmp) return a->Iex.RdTmp.tmp == b->Iex.RdTmp.tmp;
   if (a->tag == Iex_Const && b->tag == Iex_Const) return eqIRConst(a->Iex.Const.con, b->Iex.Const.con);
   return False;
}

static IRSB* ps_instrument(VgCallbackClosure* closure, IRSB* in, const VexGuestLayout* layout,
                           const VexGuestExtents* vge, const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   (void)closure; (void)layout; (void)vge; (void)archinfo_host;
   if (gWordTy != hWordTy) VG_(tool_panic)("host/guest word size mismatch");
   n_found = 0;
   Scanning at = {0, 0};
   for (; at.stmt < in->stmts_used; at.stmt++) {
      if (in->stmts[at.stmt]->tag == Ist_IMark) at.instruction++;
      visit_access(in, in->stmts[at.stmt], note_found, &at);
   }
   for (Int k = 1; k < n_found; k++) {
      Found* read = &found[k - 1];
      Found* write = &found[k];
      if (write->is_write && !read->is_write && read->instruction == write->instruction
          && read->guard == NULL && write->guard == NULL && read->size == write->size
          && same_expr(read->address, write->address)) {
         read->is_write = True;  /* recorded where the read is, before the instruction changes the line */
         write->merged = True;
      }
   }
   IRSB* out = deepCopyIRSBExceptStmts(in);
   Int next = 0;
   for (Int i = 0; i < in->stmts_used; i++) {
      for (; next < n_found && found[next].stmt == i; next++)
         if (!found[next].merged)
            add_record(out, found[next].address, found[next].size, found[next].guard, found[next].is_write);
      addStmtToIRSB(out, in->stmts[i]);
   }
   return out;
}

/*------------------------------------------------------------*/
/*--- Output, setup and teardown                           ---*/
/*------------------------------------------------------------*/

/* Whether two models counted the same. */
static Bool same_counts(const Model* a, const Model* b)
{
   for (Int j = 0; j < n_levels; j++)
      if (a->counts.accesses[j] != b->counts.accesses[j] || a->counts.misses[j] != b->counts.misses[j]) return False;
   for (Int c = 0; c < n_classes; c++) if (a->transfers[c] != b->transfers[c]) return False;
   for (Int t = 0; t < n_threads; t++) if (a->counts.cycles[t] != b->counts.cycles[t]) return False;
   for (Int t = 0; t < n_threads; t++) if (a->queue[t] != b->queue[t]) return False;  /* the same sums in the same order */
   for (Int n = 0; n < n_nodes; n++) if (a->node_bytes[n] != b->node_bytes[n]) return False;
   return a->counts.invalidations == b->counts.invalidations && a->dram_local == b->dram_local
          && a->dram_remote == b->dram_remote;
}

static void write_result(void)
{
   HChar tmp[4096];
   VG_(snprintf)(tmp, sizeof tmp, "%s.tmp", clo_out);
   SysRes res = VG_(open)(tmp, VKI_O_CREAT | VKI_O_WRONLY | VKI_O_TRUNC, 0644);
   if (sr_isError(res)) {
      VG_(umsg)("pinwise-sim: cannot write %s\n", tmp);
      return;
   }
   out_fd = (Int)sr_Res(res);
   out_len = 0;
   out_printf("pinwise-sim %llu\n", 1);
   out_printf("threads %llu\naccesses", (ULong)n_threads);
   for (Int t = 0; t < n_threads; t++) out_printf(" %llu", recorded[t] - extra[t]);
   Model* whole = NULL;  /* --ps-check-workers: the counts of this process, which simulated every group */
   if (n_workers > 0 && clo_check_workers) {
      whole = zeroed("ps.check", n_models, sizeof(Model));
      for (Int k = 0; k < n_models; k++) {
         Model* m = &models[k];
         settle(m);
         whole[k] = *m;
         whole[k].counts.cycles = zeroed("ps.check", threads_cap, sizeof(ULong));
         for (Int t = 0; t < threads_cap; t++) whole[k].counts.cycles[t] = m->counts.cycles[t];
         whole[k].queue = zeroed("ps.check", threads_cap, sizeof(double));
         for (Int t = 0; t < threads_cap; t++) whole[k].queue[t] = m->queue[t];
         VG_(memset)(m->counts.accesses, 0, sizeof m->counts.accesses);
         VG_(memset)(m->counts.misses, 0, sizeof m->counts.misses);
         VG_(memset)(m->counts.cycles, 0, threads_cap * sizeof(ULong));
         VG_(memset)(m->queue, 0, threads_cap * sizeof(double));
         VG_(memset)(m->transfers, 0, sizeof m->transfers);
         VG_(memset)(m->node_bytes, 0, sizeof m->node_bytes);
         m->busiest = 0;
         m->counts.invalidations = m->dram_local = m->dram_remote = 0;
      }
   }
   Int n_simulated = n_workers > 0 ? collect_workers() : n_groups;
   for (Int k = 0; k < n_models; k++) settle(&models[k]);
   out_printf("\nmodels %llu\n", (ULong)n_placements);
   for (Int k = 0; k < n_placements; k++) {
      Model* m = &models[k];
      out_printf("model %llu\n", (ULong)k);
      for (Int j = 0; j < n_levels; j++) {
         out_printf("level %llu", (ULong)j);
         out_printf(" %llu", m->counts.accesses[j]);
         out_printf(" %llu\n", m->counts.misses[j]);
      }
      out_printf("invalidations %llu\ntransfers", m->counts.invalidations);
      for (Int c = 0; c < n_classes; c++) out_printf(" %llu", m->transfers[c]);
      out_printf("\ndram %llu", m->dram_local);
      out_printf(" %llu\ncycles", m->dram_remote);
      for (Int t = 0; t < n_threads; t++) out_printf(" %llu", m->counts.cycles[t] + (ULong)(m->queue[t] + 0.5));
      out_text("\nqueue");
      for (Int t = 0; t < n_threads; t++) out_printf(" %llu", (ULong)(m->queue[t] + 0.5));
      out_text("\nmemory");
      for (Int n = 0; n < n_nodes; n++) out_printf(" %llu", m->node_bytes[n]);
      out_printf("\nbusiest %llu", (ULong)(m->busiest * 1e6 + 0.5));
      if (out_len > (Int)sizeof out_buf - 64) out_flush();
      out_buf[out_len++] = '\n';
   }
   out_printf("groups %llu\n", (ULong)n_simulated);  /* at the end: how many simulated the caches separately */
   if (whole) {
      Int differ = 0;
      for (Int k = 0; k < n_models; k++) differ += !same_counts(&models[k], &whole[k]);
      out_printf("workers-check %llu\n", (ULong)differ);  /* placements the workers counted differently */
   }
   if (clo_check) {
      Int differ = 0;
      for (Int k = 0; k < n_placements; k++) differ += !same_counts(&models[k], &models[n_placements + k]);
      out_printf("check %llu\n", (ULong)differ);  /* placements whose grouped and alone counts differ */
   }
   out_flush();
   VG_(close)(out_fd);
   out_fd = -1;
   VG_(rename)(tmp, clo_out);
}

static void ps_post_clo_init(void)
{
   read_config();
   index_of_tid = zeroed("ps.tids", VG_N_THREADS + 1, sizeof(Int));
   grow_threads(16);
   start_workers();
   if (n_workers == 0 || clo_check_workers) allocate_groups(True);  /* else each worker its own */
   if (n_workers == 0) {
      chunk_entry = VG_(malloc)("ps.chunk", CHUNK * sizeof(UWord));
   }
}

static void ps_fini(Int exitcode)
{
   (void)exitcode;
   if (forked_client) return;  /* see ps_client_forked */
   sync_current();
   if (clo_quantum > 0) drain();
   flush_chunk();
   write_result();
}

static void ps_pre_clo_init(void)
{
   VG_(details_name)("pinwise-sim");
   VG_(details_version)("1");
   VG_(details_description)("cache simulation of a machine under several thread placements");
   VG_(details_copyright_author)("pinwise developers");
   VG_(details_bug_reports_to)("the pinwise issue tracker");
   VG_(details_avg_translation_sizeB)(300);
   VG_(basic_tool_funcs)(ps_post_clo_init, ps_instrument, ps_fini);
   VG_(needs_command_line_options)(ps_process_cmd_line_option, ps_print_usage, ps_print_debug_usage);
   VG_(track_pre_thread_ll_create)(ps_thread_create);
   VG_(track_start_client_code)(ps_start_client_code);
   VG_(atfork)(NULL, NULL, ps_client_forked);
}

VG_DETERMINE_INTERFACE_VERSION(ps_pre_clo_init)
