/* The model of an access (see the top of ps_main.c): groups of placements and their members,
   first touch, streams, splitting a member off, and a chunk of accesses run through a group.
   Part of ps_main.c, which includes it (as cachegrind's cg_main.c includes cg_sim.c): one
   translation unit, so the per-access paths stay inlined and everything stays static. */

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
   tl_assert(instance >= 0 && instance < n_instances);
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
            UWord j = (UWord)((old_keys[i] * FIBONACCI_MULTIPLIER) >> 20) & (m->page_cap - 1);
            while (m->page_keys[j]) j = (j + 1) & (m->page_cap - 1);
            m->page_keys[j] = old_keys[i];
            m->page_node[j] = old_node[i];
         }
      VG_(free)(old_keys);
      VG_(free)(old_node);
   }
   UWord key = page + 1;
   UWord j = (UWord)((key * FIBONACCI_MULTIPLIER) >> 20) & (m->page_cap - 1);
   while (m->page_keys[j]) {
      if (m->page_keys[j] == key) return m->page_node[j];
      j = (j + 1) & (m->page_cap - 1);
   }
   tl_assert(node >= 0 && node < n_nodes);  /* fits page_node's byte: n_nodes < MAX_NODES */
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
   Int members_before = g->n_members;
   for (Int i = 0; i < g->n_members; i++)
      if (g->members[i] == k) {
         g->members[i] = g->members[--g->n_members];
         break;
      }
   tl_assert(g->n_members == members_before - 1);  /* k was a member of its group, once */
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
