/* Caches and directories: slots to PUs, the directory's hash table, sets and ways in LRU order.
   Part of ps_main.c, which includes it (as cachegrind's cg_main.c includes cg_sim.c): one
   translation unit, so the per-access paths stay inlined and everything stays static. */

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
   UWord start = (UWord)(((key >> d->run) * FIBONACCI_MULTIPLIER) >> (d->shift + d->run));
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
   tl_assert(2 * d->count <= d->cap);  /* half full at most: every probe ends at an empty entry */
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
   tl_assert(d->count > 0);
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
