/*--------------------------------------------------------------------*/
/*--- pinwise: a Valgrind tool that measures which threads share   ---*/
/*--- data, for thread mapping.                        pw_main.c  ---*/
/*--------------------------------------------------------------------*/

/* Shaped after Lackey (lackey/lk_main.c): one instrumentation pass that adds a helper call before
   every memory access, and a fini that writes the result.

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
   uses for pinning. Lines in read-only mappings (constants, code) are skipped unless
   --pw-readonly=yes: every thread reads them and they would look like all-to-all communication.

   Output (--pw-out=FILE), plain text, rewritten every --pw-dump-ms while running (marked partial)
   and at exit:
      pinwise-trace 1
      model diener|mazouz
      partial 0|1
      threads T
      window N | window-ms N
      accesses TOTAL
      lines TRACKED DROPPED
      table-bytes B
      accv a0 a1 ...
      load i0 i1 ...
      matrix
      T rows of T numbers
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
#include "pub_tool_aspacemgr.h"
#include "pub_tool_threadstate.h"

#define PW_VERSION "1"
#define LINE_SHIFT 6
#define SHARERS 8          /* threads remembered per line */
#define MAX_THREADS 65535  /* thread indices are UShort */

/*------------------------------------------------------------*/
/*--- Command line options                                 ---*/
/*------------------------------------------------------------*/

static const HChar* clo_out = "pinwise-trace.txt";
static Long clo_window = 1000000;      /* accesses per window; 0 = time windows */
static Long clo_window_ms = 0;         /* milliseconds per window when > 0 */
static Bool clo_mazouz = False;
static Bool clo_readonly = False;
static Long clo_max_lines = 1 << 24;   /* lines tracked at most (memory bound) */
static Long clo_dump_ms = 2000;
static Bool clo_stack = False;         /* also trace accesses addressed from the stack pointer */

static Bool pw_process_cmd_line_option(const HChar* arg)
{
   const HChar* model = NULL;
   if VG_STR_CLO(arg, "--pw-out", clo_out) {}
   else if VG_BINT_CLO(arg, "--pw-window", clo_window, 1, 1000000000000LL) {}
   else if VG_BINT_CLO(arg, "--pw-window-ms", clo_window_ms, 0, 100000000) {}
   else if VG_BOOL_CLO(arg, "--pw-readonly", clo_readonly) {}
   else if VG_BOOL_CLO(arg, "--pw-stack", clo_stack) {}
   else if VG_BINT_CLO(arg, "--pw-max-lines", clo_max_lines, 1024, 1LL << 34) {}
   else if VG_BINT_CLO(arg, "--pw-dump-ms", clo_dump_ms, 0, 100000000) {}
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
"    --pw-readonly=yes|no     also count lines of read-only mappings [no]\n"
"    --pw-stack=yes|no        also trace accesses addressed from the stack pointer [no]\n"
"    --pw-max-lines=N         lines tracked at most, bounding memory [16777216]\n"
"    --pw-dump-ms=N           write the partial result every N ms (0: only at exit) [2000]\n");
}

static void pw_print_debug_usage(void) { VG_(printf)("    (none)\n"); }

/* The fast path. Most accesses go to lines only the running thread has touched in the current
   window: they can cause no event. Such lines are noted in `owner_cache` with the stamp
   (window, thread); instrumented code compares the accessed line's entry with `cur_stamp`
   inline and calls the helper only when they differ. Counting (per thread and in total) is
   inline too. A line gaining a second sharer loses its entry, and the stamp changes at every
   thread switch and window, so nothing that could be an event is skipped. Windows close at the
   first thread switch (or helper call) after their accesses. */
#define OWNER_ENTRIES (1 << 16)
typedef struct { ULong line; ULong stamp; } OwnerEntry;
static OwnerEntry owner_cache[OWNER_ENTRIES];
static ULong cur_stamp = 1;
static ULong* cur_accv = NULL;
static ULong inline_accesses = 0;
static ULong next_window_at = 0;
static UInt window = 1;            /* the current time window */

static void set_current(void);

/*------------------------------------------------------------*/
/*--- Threads                                              ---*/
/*------------------------------------------------------------*/

static Int* index_of_tid = NULL;    /* Valgrind ThreadId -> creation index */
static Int n_threads = 1;           /* the main thread exists from the start */
static Int cur = 0;                 /* creation index of the thread running client code */
static Int live_threads = 1;
static ULong* accv = NULL;          /* per thread: memory accesses */
static ULong* load = NULL;          /* per thread: guest instructions */
static ULong* comm = NULL;          /* C[t * cap + u] */
static Int cap = 0;

static void grow_threads(Int needed)
{
   if (needed <= cap) return;
   Int new_cap = cap ? cap : 16;
   while (new_cap < needed) new_cap *= 2;
   ULong* new_comm = VG_(calloc)("pw.comm", (SizeT)new_cap * new_cap, sizeof(ULong));
   ULong* new_accv = VG_(calloc)("pw.accv", new_cap, sizeof(ULong));
   ULong* new_load = VG_(calloc)("pw.load", new_cap, sizeof(ULong));
   for (Int t = 0; t < cap; t++) {
      VG_(memcpy)(new_comm + (SizeT)t * new_cap, comm + (SizeT)t * cap, cap * sizeof(ULong));
      new_accv[t] = accv[t];
      new_load[t] = load[t];
   }
   if (comm) { VG_(free)(comm); VG_(free)(accv); VG_(free)(load); }
   comm = new_comm; accv = new_accv; load = new_load; cap = new_cap;
}

static void pw_thread_create(ThreadId parent, ThreadId child)
{
   tl_assert(child < VG_N_THREADS);
   if (parent == VG_INVALID_THREADID) {  /* the main thread, announced at start-up */
      index_of_tid[child] = 0;
      return;
   }
   if (n_threads >= MAX_THREADS) return;
   index_of_tid[child] = n_threads++;
   live_threads++;
   grow_threads(n_threads);
   set_current();  /* accv may have moved */
}

static void pw_thread_exit(ThreadId tid)
{
   (void)tid;
   if (live_threads > 1) live_threads--;
}

static void advance_window(void);

static void set_current(void)
{
   cur_accv = &accv[cur];
   cur_stamp = ((ULong)window << 20) | (ULong)(cur + 1);
}

static void pw_start_client_code(ThreadId tid, ULong blocks)
{
   (void)blocks;
   cur = index_of_tid[tid];
   advance_window();
   set_current();
}

/*------------------------------------------------------------*/
/*--- Lines                                                ---*/
/*------------------------------------------------------------*/

typedef struct {
   Addr   line;               /* line number + 1; 0 marks an empty slot */
   UInt   window;
   UShort n;                  /* sharers in use */
   UShort readonly;
   UShort sharer[SHARERS];
   UInt   count[SHARERS];     /* accesses per sharer (mazouz model) */
} LineEntry;

static LineEntry* table = NULL;
static ULong table_size = 0;  /* a power of two */
static ULong table_used = 0;
static ULong lines_dropped = 0;
static UInt last_dump_ms = 0;

static inline ULong slot_of(Addr line, ULong size)
{
   return (line * 0x9E3779B97F4A7C15ULL) >> 17 & (size - 1);
}

static void table_init(ULong size)
{
   table = VG_(calloc)("pw.lines", size, sizeof(LineEntry));
   table_size = size;
}

/* A small direct-mapped memo in front of the table: most accesses go to a few hundred recently
   used lines, whose entries it finds without probing the big table (which may not fit in cache). */
#define MEMO_SIZE 1024
static Addr memo_key[MEMO_SIZE];
static LineEntry* memo_entry[MEMO_SIZE];

static void table_grow(void)
{
   LineEntry* old = table;
   VG_(memset)(memo_key, 0, sizeof memo_key);  /* entries move */
   ULong old_size = table_size;
   table_init(old_size * 2);
   for (ULong i = 0; i < old_size; i++) {
      if (!old[i].line) continue;
      ULong s = slot_of(old[i].line, table_size);
      while (table[s].line) s = (s + 1) & (table_size - 1);
      table[s] = old[i];
   }
   VG_(free)(old);
}

static Bool is_readonly(Addr a)
{
   NSegment const* seg = VG_(am_find_nsegment)(a);
   return seg != NULL && !seg->hasW;
}

/* The entry of a line, created on first touch; NULL once the memory bound is reached. */
static __attribute__((noinline)) LineEntry* entry_of(Addr line_no, Addr address)
{
   Addr key = line_no + 1;
   ULong s = slot_of(key, table_size);
   while (table[s].line) {
      if (table[s].line == key) return &table[s];
      s = (s + 1) & (table_size - 1);
   }
   if ((Long)table_used >= clo_max_lines) { lines_dropped++; return NULL; }
   if (2 * (table_used + 1) > table_size) {
      table_grow();
      return entry_of(line_no, address);
   }
   LineEntry* e = &table[s];
   e->line = key;
   e->window = 0;
   e->n = 0;
   e->readonly = !clo_readonly && is_readonly(address);
   table_used++;
   return e;
}

/*------------------------------------------------------------*/
/*--- Output                                               ---*/
/*------------------------------------------------------------*/

static Int out_fd = -1;
static HChar out_buf[1 << 16];
static Int out_len = 0;

static void out_flush(void)
{
   if (out_len > 0 && out_fd >= 0) VG_(write)(out_fd, out_buf, out_len);
   out_len = 0;
}

static void out_printf(const HChar* format, ULong value)
{
   if (out_len > (Int)sizeof out_buf - 64) out_flush();
   out_len += VG_(snprintf)(out_buf + out_len, sizeof out_buf - out_len, format, value);
}

static void out_text(const HChar* text)
{
   if (out_len > (Int)sizeof out_buf - 64) out_flush();
   out_len += VG_(snprintf)(out_buf + out_len, sizeof out_buf - out_len, "%s", text);
}

static ULong pair_value(Int t, Int u)
{
   return comm[(SizeT)t * cap + u] + comm[(SizeT)u * cap + t];
}

static void mazouz_alpha(void)
{
   /* alpha[i][j] += count_i + count_j for every line touched by both; kept in C's upper triangle. */
   VG_(memset)(comm, 0, (SizeT)cap * cap * sizeof(ULong));
   for (ULong s = 0; s < table_size; s++) {
      LineEntry* e = &table[s];
      if (!e->line || e->readonly) continue;
      for (Int a = 0; a < e->n; a++)
         for (Int b = a + 1; b < e->n; b++) {
            Int i = e->sharer[a], j = e->sharer[b];
            comm[(SizeT)(i < j ? i : j) * cap + (i < j ? j : i)] += (ULong)e->count[a] + e->count[b];
         }
   }
}

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
   out_printf("accesses %llu\n", inline_accesses);
   out_printf("lines %llu", table_used);
   out_printf(" %llu\n", lines_dropped);
   out_printf("table-bytes %llu\n", table_size * sizeof(LineEntry) + (ULong)cap * cap * sizeof(ULong));
   out_text("accv");
   out_len -= 0;
   for (Int i = 0; i < t; i++) out_printf(" %llu", accv[i]);
   out_text("\nload");
   for (Int i = 0; i < t; i++) out_printf(" %llu", load[i]);
   out_text("\nmatrix\n");
   if (clo_mazouz && !partial) mazouz_alpha();
   for (Int i = 0; i < t; i++) {
      for (Int j = 0; j < t; j++)
         out_printf(j ? " %llu" : "%llu", i == j ? 0 : pair_value(i, j));
      out_text("\n");
   }
   out_flush();
   VG_(close)(out_fd);
   out_fd = -1;
   VG_(rename)(tmp, clo_out);
}

/*------------------------------------------------------------*/
/*--- The helpers called from instrumented code            ---*/
/*------------------------------------------------------------*/

static void close_window(void)
{
   window++;
   if (clo_window_ms > 0 || clo_dump_ms > 0) {
      UInt now = VG_(read_millisecond_timer)();
      if (clo_dump_ms > 0 && now - last_dump_ms >= (UInt)clo_dump_ms && !clo_mazouz) {
         last_dump_ms = now;
         write_result(True);
      }
   }
}

static inline __attribute__((always_inline)) Bool touch(Addr line_no, Addr address)
{
   UWord m = line_no & (MEMO_SIZE - 1);
   LineEntry* e;
   if (memo_key[m] == line_no + 1) {
      e = memo_entry[m];
   } else {
      e = entry_of(line_no, address);
      if (e != NULL) {
         memo_key[m] = line_no + 1;
         memo_entry[m] = e;
      }
   }
   if (e == NULL) return False;
   if (e->readonly) return True;
   UShort t = (UShort)cur;
   if (clo_mazouz) {
      for (Int k = 0; k < e->n; k++)
         if (e->sharer[k] == t) { e->count[k]++; return False; }
      if (e->n < SHARERS) { e->sharer[e->n] = t; e->count[e->n] = 1; e->n++; }
      return False;
   }
   if (e->window != window) {  /* first touch in this window */
      e->window = window;
      e->n = 1;
      e->sharer[0] = t;
      return True;
   }
   if (e->n == 1 && e->sharer[0] == t) return True;
   Bool present = False;
   ULong* row = comm + (SizeT)t * cap;
   for (Int k = 0; k < e->n; k++) {
      UShort u = e->sharer[k];
      if (u == t) present = True;
      else row[u]++;
   }
   if (!present) {
      if (e->n < SHARERS) e->sharer[e->n++] = t;
      else {  /* forget the oldest sharer */
         for (Int k = 1; k < SHARERS; k++) e->sharer[k - 1] = e->sharer[k];
         e->sharer[SHARERS - 1] = t;
      }
      owner_cache[line_no & (OWNER_ENTRIES - 1)].stamp = 0;  /* shared now: no more skipping */
   }
   return False;
}

static void advance_window(void)
{
   if (clo_window_ms == 0) {
      if (inline_accesses >= next_window_at) {
         /* Valgrind runs one thread at a time, in slices of many accesses: a window must span a
            slice of every live thread to see their sharing, so it grows with their number. */
         next_window_at = inline_accesses + (ULong)clo_window * live_threads;
         close_window();
      }
   } else {
      static UInt window_start = 0;
      UInt now = VG_(read_millisecond_timer)();
      if (now - window_start >= (UInt)clo_window_ms) {
         window_start = now;
         close_window();
      }
   }
}

/* Called when the inline check could not rule out an event (accesses already counted). */
static VG_REGPARM(2) void pw_access(Addr address, SizeT size)
{
   static UInt calls = 0;
   if ((++calls & 0xFFF) == 0) {
      UInt old = window;
      advance_window();
      if (window != old) set_current();
   }
   Addr first = address >> LINE_SHIFT, last = (address + (size ? size - 1 : 0)) >> LINE_SHIFT;
   Bool private_line = touch(first, address);
   if (last != first) touch(last, last << LINE_SHIFT);
   else if (private_line && !clo_mazouz) {
      OwnerEntry* o = &owner_cache[first & (OWNER_ENTRIES - 1)];
      o->line = first;
      o->stamp = cur_stamp;
   }
}

/* Accesses that take no fast path (guarded ones, the mazouz model): count, then process. */
static VG_REGPARM(2) void pw_access_counted(Addr address, SizeT size)
{
   inline_accesses++;
   (*cur_accv)++;
   pw_access(address, size);
}

/* Once per superblock: its instructions and the accesses that took the fast path's counting.
   An early exit still counts the whole block: both are estimates, as in Lackey's --basic-counts. */
static VG_REGPARM(2) void pw_block(UWord instructions, UWord accesses)
{
   load[cur] += instructions;
   accv[cur] += accesses;
   inline_accesses += accesses;
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

static IRExpr* tmp_of(IRSB* sb, IRType ty, IRExpr* e)
{
   IRTemp t = newIRTemp(sb->tyenv, ty);
   addStmtToIRSB(sb, IRStmt_WrTmp(t, e));
   return IRExpr_RdTmp(t);
}

static IRExpr* u64(ULong value) { return IRExpr_Const(IRConst_U64(value)); }

static Int block_accesses = 0;  /* fast-path accesses in the superblock being instrumented */

static void add_access(IRSB* sb, IRExpr* address, Int size, IRExpr* guard)
{
   if (stack_address(address)) return;
   IRExpr** args = mkIRExprVec_2(address, mkIRExpr_HWord((HWord)size));
   if (guard != NULL || clo_mazouz) {
      IRDirty* di = unsafeIRDirty_0_N(2, "pw_access_counted", VG_(fnptr_to_fnentry)(pw_access_counted), args);
      if (guard) di->guard = guard;
      addStmtToIRSB(sb, IRStmt_Dirty(di));
      return;
   }
   block_accesses++;  /* counted once per superblock by pw_block */
   /* Call the helper unless owner_cache says: this line, this thread, this window. */
   IRExpr* line = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shr64, address, IRExpr_Const(IRConst_U8(LINE_SHIFT))));
   IRExpr* index = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_And64, line, u64(OWNER_ENTRIES - 1)));
   IRExpr* offset = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Shl64, index, IRExpr_Const(IRConst_U8(4))));
   IRExpr* entry = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, u64((ULong)(HWord)owner_cache), offset));
   IRExpr* cached_line = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, entry));
   IRExpr* stamp_at = tmp_of(sb, Ity_I64, IRExpr_Binop(Iop_Add64, entry, u64(8)));
   IRExpr* cached_stamp = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, stamp_at));
   IRExpr* stamp = tmp_of(sb, Ity_I64, IRExpr_Load(Iend_LE, Ity_I64, u64((ULong)(HWord)&cur_stamp)));
   IRExpr* other_line = tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpNE64, cached_line, line));
   IRExpr* other_stamp = tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_CmpNE64, cached_stamp, stamp));
   IRExpr* call = tmp_of(sb, Ity_I1, IRExpr_Binop(Iop_Or1, other_line, other_stamp));
   IRDirty* di = unsafeIRDirty_0_N(2, "pw_access", VG_(fnptr_to_fnentry)(pw_access), args);
   di->guard = call;
   addStmtToIRSB(sb, IRStmt_Dirty(di));
}

static IRSB* pw_instrument(VgCallbackClosure* closure, IRSB* in, const VexGuestLayout* layout,
                           const VexGuestExtents* vge, const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   (void)closure; (void)vge; (void)archinfo_host;
   if (gWordTy != hWordTy) VG_(tool_panic)("host/guest word size mismatch");
   IRSB* out = deepCopyIRSBExceptStmts(in);
   if (in->tyenv->types_used > from_sp_size) {
      if (from_sp) VG_(free)(from_sp);
      from_sp_size = in->tyenv->types_used * 2;
      from_sp = VG_(malloc)("pw.sp", from_sp_size * sizeof(Bool));
   }
   VG_(memset)(from_sp, 0, in->tyenv->types_used * sizeof(Bool));
   Int i = 0;
   while (i < in->stmts_used && in->stmts[i]->tag != Ist_IMark) {  /* preamble, verbatim */
      addStmtToIRSB(out, in->stmts[i]);
      i++;
   }
   /* One call per superblock counts its instructions and its fast-path accesses (known only
      once the block is instrumented, so the argument is filled in at the end). */
   Int instructions = 0;
   for (Int k = i; k < in->stmts_used; k++)
      if (in->stmts[k]->tag == Ist_IMark) instructions++;
   IRDirty* block = unsafeIRDirty_0_N(2, "pw_block", VG_(fnptr_to_fnentry)(pw_block),
                                      mkIRExprVec_2(mkIRExpr_HWord((HWord)instructions), mkIRExpr_HWord(0)));
   addStmtToIRSB(out, IRStmt_Dirty(block));
   block_accesses = 0;
   for (; i < in->stmts_used; i++) {
      IRStmt* st = in->stmts[i];
      note_sp_temps(st, layout);
      switch (st->tag) {
         case Ist_WrTmp: {
            IRExpr* data = st->Ist.WrTmp.data;
            if (data->tag == Iex_Load)
               add_access(out, data->Iex.Load.addr, sizeofIRType(data->Iex.Load.ty), NULL);
            break;
         }
         case Ist_Store:
            add_access(out, st->Ist.Store.addr, sizeofIRType(typeOfIRExpr(in->tyenv, st->Ist.Store.data)), NULL);
            break;
         case Ist_StoreG: {
            IRStoreG* sg = st->Ist.StoreG.details;
            add_access(out, sg->addr, sizeofIRType(typeOfIRExpr(in->tyenv, sg->data)), sg->guard);
            break;
         }
         case Ist_LoadG: {
            IRLoadG* lg = st->Ist.LoadG.details;
            IRType ty = Ity_INVALID, wide = Ity_INVALID;
            typeOfIRLoadGOp(lg->cvt, &wide, &ty);
            add_access(out, lg->addr, sizeofIRType(ty), lg->guard);
            break;
         }
         case Ist_Dirty: {
            IRDirty* d = st->Ist.Dirty.details;
            if (d->mFx != Ifx_None && d->mAddr != NULL) add_access(out, d->mAddr, d->mSize, NULL);
            break;
         }
         case Ist_CAS: {
            IRCAS* cas = st->Ist.CAS.details;
            Int size = sizeofIRType(typeOfIRExpr(in->tyenv, cas->dataLo)) * (cas->dataHi ? 2 : 1);
            add_access(out, cas->addr, size, NULL);
            break;
         }
         case Ist_LLSC: {
            IRType ty = st->Ist.LLSC.storedata == NULL
                           ? typeOfIRTemp(in->tyenv, st->Ist.LLSC.result)
                           : typeOfIRExpr(in->tyenv, st->Ist.LLSC.storedata);
            add_access(out, st->Ist.LLSC.addr, sizeofIRType(ty), NULL);
            break;
         }
         default:
            break;
      }
      addStmtToIRSB(out, st);
   }
   block->args[1] = mkIRExpr_HWord((HWord)block_accesses);
   return out;
}

/*------------------------------------------------------------*/
/*--- Setup and teardown                                   ---*/
/*------------------------------------------------------------*/

static void pw_post_clo_init(void)
{
   index_of_tid = VG_(calloc)("pw.tids", VG_N_THREADS + 1, sizeof(Int));
   grow_threads(16);
   table_init(1 << 12);  /* 256 KiB to start: small enough to stay in cache */
   next_window_at = (ULong)clo_window;
   set_current();
   last_dump_ms = VG_(read_millisecond_timer)();
}

static void pw_fini(Int exitcode)
{
   (void)exitcode;
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
   VG_(track_pre_thread_ll_create)(pw_thread_create);
   VG_(track_start_client_code)(pw_start_client_code);
   VG_(track_pre_thread_ll_exit)(pw_thread_exit);
}

VG_DETERMINE_INTERFACE_VERSION(pw_pre_clo_init)
