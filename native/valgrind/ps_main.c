/*--------------------------------------------------------------------*/
/*--- pinwise-sim: trace-driven simulation of a machine's caches   ---*/
/*--- under several thread placements at once.          ps_main.c  ---*/
/*--------------------------------------------------------------------*/

/* `pinwise simulate` runs the program once under this tool. Every data access (loads, stores,
   atomics, guarded and dirty-helper accesses, as Lackey and pw_main.c find them), by the thread
   that makes it, is fed to K models of one machine, one per placement: each model is the
   machine's caches with the threads on the PUs the placement names.

   The machine (--ps-config=FILE, written by pinwise from a topology): cache levels from L1 up,
   each with size, line size, associativity, hit latency and its instances (which PUs share each);
   NUMA nodes; a class of distance for every pair of PUs (the lowest level they share) with a
   transfer latency; local and remote DRAM latency; inclusive or not.

   The model of an access by thread t to line X, in placement k, t on PU p (slot t of the
   placement, wrapping round as pinwise's plans do):
   - Caches are set-associative with LRU replacement, looked up from p's L1 upward; the first that
     holds X is a hit (its LRU order updated), the levels below it are filled (write-allocate).
     Each level counts accesses (the misses of the level below, as cachegrind counts LL) and misses.
   - A directory remembers, per line, which cache instances hold it and which one holds it
     modified (MESI's M). A write invalidates every copy off p's path (counted) and makes p's L1
     the owner. An access that finds X modified in a cache off its path is a cache-to-cache
     transfer, counted by the distance class of the two PUs; the owner's copy becomes shared.
   - A miss everywhere is a DRAM access: the page's node is the node of the first PU that touched
     it (first touch), and the access is local or remote to p's node.
   - Inclusive (default): a line evicted from a cache is invalidated in the caches below it.
     --ps-inclusive=no keeps levels independent, as cachegrind does.
   - Cost: each access adds the latency of where it was served (a level's hit, a transfer by its
     class, local or remote DRAM) to its thread's cycles.

   Interleaving: Valgrind runs one thread at a time for long slices. Simulated threads run
   together, so accesses are buffered per thread and fed to the models in turns of --ps-quantum
   accesses per thread (round robin), a buffer of --ps-buffer accesses at a time; --ps-quantum=0
   feeds them in Valgrind's own order.

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
      cycles c0 c1 ...               (per thread)
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
#include "pw_tool_common.h"

#define MAX_LEVELS 8
#define MAX_CLASSES 16
#define MAX_MODELS 64
#define MAX_PUS 4096
#define MAX_INSTANCES 4096
#define MAX_THREADS 65536

static const HChar* clo_config = NULL;
static const HChar* clo_out = "pinwise-sim.txt";
static Long clo_quantum = 1;
static Long clo_buffer = 1 << 22;
static Bool clo_inclusive = True;

static Bool ps_process_cmd_line_option(const HChar* arg)
{
   if VG_STR_CLO(arg, "--ps-config", clo_config) {}
   else if VG_STR_CLO(arg, "--ps-out", clo_out) {}
   else if VG_BINT_CLO(arg, "--ps-quantum", clo_quantum, 0, 1LL << 30) {}
   else if VG_BINT_CLO(arg, "--ps-buffer", clo_buffer, 1024, 1LL << 30) {}
   else if VG_BOOL_CLO(arg, "--ps-inclusive", clo_inclusive) {}
   else return False;
   return True;
}

static void ps_print_usage(void)
{
   VG_(printf)("    --ps-config=FILE         the machine and the placements (written by pinwise simulate)\n"
               "    --ps-out=FILE            where the counts go [pinwise-sim.txt]\n"
               "    --ps-quantum=N           accesses per thread per turn when interleaving; 0: Valgrind's order [1]\n"
               "    --ps-buffer=N            accesses buffered before they are interleaved [4194304]\n"
               "    --ps-inclusive=yes|no    a line evicted from a cache leaves the caches below it [yes]\n");
}

static void ps_print_debug_usage(void) { VG_(printf)("    (none)\n"); }

/*------------------------------------------------------------*/
/*--- The machine                                          ---*/
/*------------------------------------------------------------*/

static Int n_pus, n_levels, n_nodes, n_classes, n_models, n_instances;
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
static SizeT* l1_offset;                 /* per PU: where its L1's tags start */
static UWord l1_set_mask;
static Int l1_assoc;

typedef struct {
   Int nslots, repeat_from;
   Int* slots;                           /* PU per slot */
   UWord* tags;                          /* per way ((line + 1) << 1) | M, MRU first; 0: empty. M (in an L1
                                            only): modified here and held nowhere else */
   UWord* dir;                           /* directory, linear probing; per entry (dir_stride words, one
                                            host cache line for up to 384 instances): line + 1 (0: empty),
                                            the instance holding it modified + 1 (0: none), and the mask
                                            of the instances holding it */
   UWord dir_cap, dir_count;
   Int dir_shift;
   UWord* page_keys;                     /* first touch: page + 1 -> node */
   UChar* page_node;
   UWord page_cap, page_count;
   ULong accesses[MAX_LEVELS], misses[MAX_LEVELS];
   ULong invalidations, transfers[MAX_CLASSES], dram_local, dram_remote;
   ULong* cycles;                        /* per thread */
} Model;

static Model models[MAX_MODELS];

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

static void dir_alloc(Model* m, UWord cap);

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
      if (sets < 1 || sets * line * assoc != size || (sets & (sets - 1)) != 0)
         fail("a cache's size / (line x associativity) must be a power of two");
      sets_of[j] = (Int)sets;
      assoc_of[j] = (Int)assoc;
      level_base[j] = n_instances;
      n_instances += instances_of[j];
      if (n_instances > MAX_INSTANCES) fail("too many cache instances");
      for (Int p = 0; p < n_pus; p++) path[p * n_levels + j] = level_base[j] + (Int)number(0, instances_of[j] - 1);
   }
   level_base[n_levels] = n_instances;
   expect("nodes"); n_nodes = (Int)number(1, 255);
   node_of_pu = zeroed("ps.nodes", n_pus, sizeof(Int));
   for (Int p = 0; p < n_pus; p++) node_of_pu[p] = (Int)number(0, n_nodes - 1);
   expect("classes"); n_classes = (Int)number(1, MAX_CLASSES);
   for (Int c = 0; c < n_classes; c++) class_latency[c] = (Int)number(0, 1 << 20);
   class_of_pair = zeroed("ps.classes", (SizeT)n_pus * n_pus, 1);
   for (SizeT i = 0; i < (SizeT)n_pus * n_pus; i++) class_of_pair[i] = (UChar)number(0, n_classes - 1);
   expect("dram"); dram_local_latency = (Int)number(0, 1 << 20); dram_remote_latency = (Int)number(0, 1 << 20);
   expect("placements"); n_models = (Int)number(1, MAX_MODELS);
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
   l1_offset = zeroed("ps.l1", n_pus, sizeof(SizeT));
   for (Int p = 0; p < n_pus; p++) l1_offset[p] = tags_offset[path[p * n_levels]];
   l1_set_mask = (UWord)(sets_of[0] - 1);
   l1_assoc = assoc_of[0];

   for (Int k = 0; k < n_models; k++) {
      Model* m = &models[k];
      m->tags = zeroed("ps.tags", tags_per_model, sizeof(UWord));
      dir_alloc(m, 4096);
      m->page_cap = 1024;
      m->page_keys = zeroed("ps.pages", m->page_cap, sizeof(UWord));
      m->page_node = zeroed("ps.pages", m->page_cap, 1);
   }
}

/*------------------------------------------------------------*/
/*--- Threads                                              ---*/
/*------------------------------------------------------------*/

static Int* index_of_tid;
static Int n_threads = 1, cur = 0, threads_cap = 0;
static ULong* thread_accesses;
static UWord** buffer;        /* per thread: pending accesses, (line << 1) | write */
static SizeT* buffered;       /* per thread: how many */
static SizeT* buffer_cap;
static SizeT total_buffered = 0;

static void grow_threads(Int needed)
{
   if (needed <= threads_cap) return;
   Int cap = threads_cap ? threads_cap : 16;
   while (cap < needed) cap *= 2;
   ULong* acc = zeroed("ps.threads", cap, sizeof(ULong));
   UWord** buf = zeroed("ps.threads", cap, sizeof(UWord*));
   SizeT* count = zeroed("ps.threads", cap, sizeof(SizeT));
   SizeT* bcap = zeroed("ps.threads", cap, sizeof(SizeT));
   for (Int t = 0; t < threads_cap; t++) {
      acc[t] = thread_accesses[t]; buf[t] = buffer[t]; count[t] = buffered[t]; bcap[t] = buffer_cap[t];
   }
   for (Int k = 0; k < n_models; k++) {
      ULong* cycles = zeroed("ps.cycles", cap, sizeof(ULong));
      for (Int t = 0; t < threads_cap; t++) cycles[t] = models[k].cycles[t];
      if (models[k].cycles) VG_(free)(models[k].cycles);
      models[k].cycles = cycles;
   }
   if (thread_accesses) {
      VG_(free)(thread_accesses); VG_(free)(buffer); VG_(free)(buffered); VG_(free)(buffer_cap);
   }
   thread_accesses = acc; buffer = buf; buffered = count; buffer_cap = bcap;
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

static void ps_start_client_code(ThreadId tid, ULong blocks)
{
   (void)blocks;
   cur = index_of_tid[tid];
}

/*------------------------------------------------------------*/
/*--- The models                                           ---*/
/*------------------------------------------------------------*/

static inline Int pu_of_thread(const Model* m, Int t)
{
   Int slot = t < m->nslots ? t : m->repeat_from + (t - m->nslots) % (m->nslots - m->repeat_from);
   return m->slots[slot];
}

static inline UWord hash_of(const Model* m, UWord key)
{
   return (UWord)((key * 0x9E3779B97F4A7C15ULL) >> m->dir_shift);
}

#define KEY(m, i) ((m)->dir[(SizeT)(i) * dir_stride])
#define OWNER(m, i) ((m)->dir[(SizeT)(i) * dir_stride + 1])
#define MASK(m, i) ((ULong*)&(m)->dir[(SizeT)(i) * dir_stride + 2])

static inline Int dir_find(const Model* m, UWord line)
{
   UWord key = line + 1, mask = m->dir_cap - 1;
   for (UWord i = hash_of(m, key);; i = (i + 1) & mask) {
      UWord found = KEY(m, i);
      if (found == key) return (Int)i;
      if (found == 0) return -1;
   }
}

static void dir_alloc(Model* m, UWord cap)
{
   m->dir_cap = cap;
   m->dir_shift = 64;
   for (UWord c = cap; c > 1; c >>= 1) m->dir_shift--;
   m->dir = zeroed("ps.dir", cap * dir_stride, sizeof(UWord));
}

/* The directory grows with the lines actually cached, so that a program with a small working set
   keeps it small (and in the host's caches) whatever the machine's cache capacity. */
static void dir_grow(Model* m)
{
   UWord old_cap = m->dir_cap;
   UWord* old = m->dir;
   dir_alloc(m, old_cap * 2);
   for (UWord i = 0; i < old_cap; i++) {
      UWord* entry = old + i * dir_stride;
      if (!entry[0]) continue;
      UWord j = hash_of(m, entry[0]);
      while (KEY(m, j)) j = (j + 1) & (m->dir_cap - 1);
      VG_(memcpy)(&KEY(m, j), entry, dir_stride * sizeof(UWord));
   }
   VG_(free)(old);
}

static Int dir_insert(Model* m, UWord line)
{
   Int found = dir_find(m, line);
   if (found >= 0) return found;
   if (2 * (m->dir_count + 1) > m->dir_cap) dir_grow(m);
   m->dir_count++;
   UWord key = line + 1, mask = m->dir_cap - 1;
   UWord i = hash_of(m, key);
   while (KEY(m, i) != 0) i = (i + 1) & mask;
   VG_(memset)(&KEY(m, i), 0, dir_stride * sizeof(UWord));
   KEY(m, i) = key;
   return (Int)i;
}

/* Backward-shift deletion keeps every probe sequence whole without tombstones. */
static void dir_delete(Model* m, UWord i)
{
   UWord mask = m->dir_cap - 1, j = i;
   for (;;) {
      j = (j + 1) & mask;
      if (KEY(m, j) == 0) break;
      UWord home = hash_of(m, KEY(m, j));
      Bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
         VG_(memcpy)(&KEY(m, i), &KEY(m, j), dir_stride * sizeof(UWord));
         i = j;
      }
   }
   KEY(m, i) = 0;
   m->dir_count--;
   dir_deleted = True;
}

static inline Int owner_of(const Model* m, Int entry) { return (Int)OWNER(m, entry) - 1; }
static inline void set_owner(Model* m, Int entry, Int instance) { OWNER(m, entry) = (UWord)(instance + 1); }

static inline Bool holds(const Model* m, Int entry, Int instance)
{
   return (MASK(m, entry)[instance >> 6] >> (instance & 63)) & 1;
}

static inline void set_holder(Model* m, Int entry, Int instance, Bool on)
{
   ULong* word = &MASK(m, entry)[instance >> 6];
   if (on) *word |= 1ULL << (instance & 63);
   else *word &= ~(1ULL << (instance & 63));
}

static Bool no_holder(const Model* m, Int entry)
{
   for (Int w = 0; w < mask_words; w++) if (MASK(m, entry)[w]) return False;
   return True;
}

static inline UWord* set_of(Model* m, Int instance, UWord line)
{
   Int j = level_of_instance[instance];
   return m->tags + tags_offset[instance] + (SizeT)(line & (UWord)(sets_of[j] - 1)) * assoc_of[j];
}

#define TAG(line) (((line) + 1) << 1)
#define SAME(way, line) (((way) >> 1) == (line) + 1)

/* Take `line` out of one cache's set (its copy is invalidated or evicted below). */
static void remove_from(Model* m, Int instance, UWord line)
{
   UWord* ways = set_of(m, instance, line);
   Int a = assoc_of[level_of_instance[instance]];
   for (Int w = 0; w < a; w++)
      if (SAME(ways[w], line)) {
         for (; w < a - 1; w++) ways[w] = ways[w + 1];
         ways[a - 1] = 0;
         return;
      }
}

/* The directory after `instance` lost its copy of `line`; inclusive: the caches below lose theirs. */
static void dropped(Model* m, Int instance, UWord line)
{
   Int e = dir_find(m, line);
   if (e < 0) return;
   set_holder(m, e, instance, False);
   if (owner_of(m, e) == instance) set_owner(m, e, -1);
   if (clo_inclusive)
      for (Int* d = below[instance]; *d >= 0; d++)
         if (holds(m, e, *d)) {
            remove_from(m, *d, line);
            set_holder(m, e, *d, False);
            if (owner_of(m, e) == *d) set_owner(m, e, -1);
         }
   if (no_holder(m, e)) dir_delete(m, (UWord)e);
}

/* Put `line` at the front of the set (it was not there); what falls out is dropped. */
static void fill(Model* m, Int instance, UWord line)
{
   UWord* ways = set_of(m, instance, line);
   Int a = assoc_of[level_of_instance[instance]];
   UWord victim = ways[a - 1] >> 1;
   for (Int w = a - 1; w > 0; w--) ways[w] = ways[w - 1];
   ways[0] = TAG(line);
   if (victim) dropped(m, instance, victim - 1);
}

/* Move `line` to the front of its set; returns its way's value there. */
static inline UWord* touch(Model* m, Int instance, UWord line)
{
   UWord* ways = set_of(m, instance, line);
   if (SAME(ways[0], line)) return ways;
   Int a = assoc_of[level_of_instance[instance]];
   for (Int w = 1; w < a; w++)
      if (SAME(ways[w], line)) {
         UWord value = ways[w];
         for (; w > 0; w--) ways[w] = ways[w - 1];
         ways[0] = value;
         return ways;
      }
   return ways;
}

/* The M mark of an L1's copy, if it holds the line. */
static void mark_modified(Model* m, Int instance, UWord line, Bool on)
{
   UWord* ways = set_of(m, instance, line);
   Int a = assoc_of[level_of_instance[instance]];
   for (Int w = 0; w < a; w++)
      if (SAME(ways[w], line)) {
         ways[w] = on ? (ways[w] | 1) : (ways[w] & ~(UWord)1);
         return;
      }
}

/* The common case without the directory: the line in p's L1, read, or written where it is
   already modified (M: no other copy exists). */
static inline Bool l1_hit(Model* m, Int p, Int t, UWord line, Bool is_write)
{
   UWord* ways = m->tags + l1_offset[p] + (SizeT)(line & l1_set_mask) * l1_assoc;
   UWord want = line + 1;
   for (Int w = 0; w < l1_assoc; w++) {
      UWord value = ways[w];
      if ((value >> 1) != want) continue;
      if (is_write && !(value & 1)) return False;
      for (; w > 0; w--) ways[w] = ways[w - 1];
      ways[0] = value;
      m->accesses[0]++;
      m->cycles[t] += (ULong)latency_of[0];
      return True;
   }
   return False;
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

static void simulate(Model* m, Int t, UWord line, Bool is_write)
{
   Int p = pu_of_thread(m, t);
   if (l1_hit(m, p, t, line, is_write)) return;
   const Int* mine = path + (SizeT)p * n_levels;
   Int e = dir_find(m, line);
   Int hit = -1;
   for (Int j = 0; j < n_levels; j++) {
      m->accesses[j]++;
      if (e >= 0 && holds(m, e, mine[j])) {
         hit = j;
         break;
      }
      m->misses[j]++;
   }
   Int owner = e >= 0 ? owner_of(m, e) : -1;
   ULong cost;
   if (owner >= 0 && mine[level_of_instance[owner]] != owner) {  /* modified off my path: it comes from there */
      Int c = class_of_pair[(SizeT)p * n_pus + pu_of_instance[owner]];
      m->transfers[c]++;
      cost = (ULong)class_latency[c];
      set_owner(m, e, -1);
      mark_modified(m, owner, line, False);  /* its copy is shared now */
   } else if (hit < 0) {
      UWord page = line >> (12 - line_shift);
      UChar home = first_touch(m, page, node_of_pu[p]);
      if (home == node_of_pu[p]) {
         m->dram_local++;
         cost = (ULong)dram_local_latency;
      } else {
         m->dram_remote++;
         cost = (ULong)dram_remote_latency;
      }
   } else {
      cost = (ULong)latency_of[hit];
   }
   m->cycles[t] += cost;
   if (hit >= 0) touch(m, mine[hit], line);
   Int filled = hit < 0 ? n_levels : hit;
   dir_deleted = False;
   for (Int j = filled - 1; j >= 0; j--) fill(m, mine[j], line);  /* from the top: inclusion holds */
   if (filled > 0 || is_write) {
      if (e < 0 || dir_deleted) e = dir_insert(m, line);  /* a deletion may have moved it */
      for (Int j = 0; j < filled; j++) set_holder(m, e, mine[j], True);
   }
   if (is_write) {
      for (Int w = 0; w < mask_words; w++) {
         ULong bits = MASK(m, e)[w];
         while (bits) {
            Int i = w * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            if (mine[level_of_instance[i]] == i) continue;
            remove_from(m, i, line);
            set_holder(m, e, i, False);
            m->invalidations++;
         }
      }
      set_owner(m, e, mine[0]);
      mark_modified(m, mine[0], line, True);
   }
}

/* Accesses in the order the models take them, a chunk at a time. The models never interact, so
   each takes the whole chunk in turn: one model's caches and directory stay in the host's caches
   for CHUNK accesses instead of all K models' at each access (same sequence, same counts), and
   the chunk (3 MiB) stays in the host's L2 or L3 while they take it. Measured on 8 placements of
   8 threads: 4,096 accesses a chunk saved 7-20%, 262,144 saved 10-42%. */
#define CHUNK (1 << 18)
static UWord* chunk_entry;  /* (line << 1) | write */
static Int* chunk_thread;
static Int chunk_used = 0;

static void flush_chunk(void)
{
   for (Int k = 0; k < n_models; k++) {
      Model* m = &models[k];
      for (Int i = 0; i < chunk_used; i++) simulate(m, chunk_thread[i], chunk_entry[i] >> 1, chunk_entry[i] & 1);
   }
   chunk_used = 0;
}

static inline void feed(Int t, UWord entry)
{
   chunk_thread[chunk_used] = t;
   chunk_entry[chunk_used] = entry;
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
   while (n_active > 0) {
      for (Int a = 0; a < n_active;) {
         Int t = active[a];
         SizeT end = done[t] + (SizeT)clo_quantum;
         if (end > buffered[t]) end = buffered[t];
         const UWord* entries = buffer[t];
         for (SizeT i = done[t]; i < end; i++) feed(t, entries[i]);
         done[t] = end;
         if (end == buffered[t]) {
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
}

static void record(Int t, UWord line, Bool is_write)
{
   UWord entry = (line << 1) | (is_write ? 1 : 0);
   if (clo_quantum == 0) {
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

static VG_REGPARM(3) void ps_access(Addr address, SizeT size, UWord is_write)
{
   Int t = cur;
   thread_accesses[t]++;
   UWord first = address >> line_shift, last = (address + (size ? size : 1) - 1) >> line_shift;
   record(t, first, is_write != 0);
   if (last != first) record(t, last, is_write != 0);
}

/*------------------------------------------------------------*/
/*--- Instrumentation                                      ---*/
/*------------------------------------------------------------*/

static void add_call(void* context, IRExpr* address, Int size, IRExpr* guard, Bool is_write)
{
   IRExpr** args = mkIRExprVec_3(address, mkIRExpr_HWord((HWord)size), mkIRExpr_HWord(is_write ? 1 : 0));
   IRDirty* di = unsafeIRDirty_0_N(3, "ps_access", VG_(fnptr_to_fnentry)(ps_access), args);
   if (guard) di->guard = guard;
   addStmtToIRSB((IRSB*)context, IRStmt_Dirty(di));
}

static IRSB* ps_instrument(VgCallbackClosure* closure, IRSB* in, const VexGuestLayout* layout,
                           const VexGuestExtents* vge, const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   (void)closure; (void)layout; (void)vge; (void)archinfo_host;
   if (gWordTy != hWordTy) VG_(tool_panic)("host/guest word size mismatch");
   IRSB* out = deepCopyIRSBExceptStmts(in);
   for (Int i = 0; i < in->stmts_used; i++) {
      visit_access(in, in->stmts[i], add_call, out);
      addStmtToIRSB(out, in->stmts[i]);
   }
   return out;
}

/*------------------------------------------------------------*/
/*--- Output, setup and teardown                           ---*/
/*------------------------------------------------------------*/

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
   for (Int t = 0; t < n_threads; t++) out_printf(" %llu", thread_accesses[t]);
   out_printf("\nmodels %llu\n", (ULong)n_models);
   for (Int k = 0; k < n_models; k++) {
      Model* m = &models[k];
      out_printf("model %llu\n", (ULong)k);
      for (Int j = 0; j < n_levels; j++) {
         out_printf("level %llu", (ULong)j);
         out_printf(" %llu", m->accesses[j]);
         out_printf(" %llu\n", m->misses[j]);
      }
      out_printf("invalidations %llu\ntransfers", m->invalidations);
      for (Int c = 0; c < n_classes; c++) out_printf(" %llu", m->transfers[c]);
      out_printf("\ndram %llu", m->dram_local);
      out_printf(" %llu\ncycles", m->dram_remote);
      for (Int t = 0; t < n_threads; t++) out_printf(" %llu", m->cycles[t]);
      if (out_len > (Int)sizeof out_buf - 64) out_flush();
      out_buf[out_len++] = '\n';
   }
   out_flush();
   VG_(close)(out_fd);
   out_fd = -1;
   VG_(rename)(tmp, clo_out);
}

static void ps_post_clo_init(void)
{
   read_config();
   chunk_entry = VG_(malloc)("ps.chunk", CHUNK * sizeof(UWord));
   chunk_thread = VG_(malloc)("ps.chunk", CHUNK * sizeof(Int));
   index_of_tid = zeroed("ps.tids", VG_N_THREADS + 1, sizeof(Int));
   grow_threads(16);
}

static void ps_fini(Int exitcode)
{
   (void)exitcode;
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
}

VG_DETERMINE_INTERFACE_VERSION(ps_pre_clo_init)
