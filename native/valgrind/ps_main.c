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

   Limitations: what the models do not see, or see approximately (docs/simulate.md says the same).
   - Data accesses only: no instruction fetches, hence no instruction caches and no code in the
     unified levels. An access that spans more than two lines (a wide dirty helper's, fxsave's)
     counts its first and last lines only (ps_access).
   - Time is counted, not simulated: each access costs its full latency, one after the other (no
     overlap of misses but the prefetched streams, no out-of-order core); an L1 hit costs its
     latency too. Bandwidth is a queueing estimate per chunk (above), not a timed model of the
     interconnect; a line brought by a read and written later is no write-back.
   - The interleaving is made up: Valgrind runs one thread at a time, so the threads' buffered
     accesses are interleaved by --ps-quantum; how often a contended line moves depends on it.
   - SMT siblings run side by side at full speed, sharing only their caches and bandwidth. Sets
     that are not a power of two take the line modulo the sets, where a real sliced cache hashes
     it: the same capacity, another mapping. Replacement is exact LRU; prefetching follows only
     the L2 streamer's next-line streams in a 4 KiB page.
   - Threads past MAX_THREADS are not told apart; a process the program forks is not simulated.

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
#include "ps_machine.h"

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

/* The tool's parts, one translation unit as cachegrind includes cg_sim.c into cg_main.c (the
   per-access paths stay inlined across them): ps_machine.h the machine and the models' types,
   ps_config.c reads --ps-config; then, after the threads' state below, ps_cache.c the caches and
   directories, ps_model.c an access through a group and its members, ps_bandwidth.c the queueing
   over a chunk, ps_workers.c the worker processes; this file records the accesses, instruments
   and writes the result. */
#include "ps_config.c"

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
   /* a thread's index fits the per-thread arrays and an entry's thread bits (ENTRY_THREAD) */
   tl_assert(n_threads <= threads_cap && n_threads <= MAX_THREADS);
}

static void sync_current(void);
static void aim_current(void);

static void ps_start_client_code(ThreadId tid, ULong blocks)
{
   (void)blocks;
   if (cur == index_of_tid[tid]) return;
   sync_current();
   cur = index_of_tid[tid];
   tl_assert(cur >= 0 && cur < n_threads);
   aim_current();
}

#include "ps_cache.c"
#include "ps_model.c"
#include "ps_bandwidth.c"
#include "ps_workers.c"


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
   SizeT pending = 0;
   for (Int t = 0; t < n_threads; t++) {
      if (buffered[t]) active[n_active++] = t;
      pending += buffered[t];
   }
   tl_assert(pending == total_buffered);  /* record and sync_current keep the two in step */
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
   tl_assert(synced_at <= rec_pos && rec_pos <= rec_end);
   SizeT added = (SizeT)(rec_pos - synced_at);
   buffered[cur] += added;
   total_buffered += added;
   synced_at = rec_pos;
   tl_assert(buffered[cur] <= buffer_cap[cur]);  /* the inline path stopped at rec_end */
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
