/* The --ps-config file: the machine and the placements, and the tables derived from them.
   Part of ps_main.c, which includes it (as cachegrind's cg_main.c includes cg_sim.c): one
   translation unit, so the per-access paths stay inlined and everything stays static. */

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

static void group_models(Int limit);

/* The whole file into `text`. */
static void load_config(void)
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
}

/* The PUs and the cache levels, L1 first: each level's geometry, latency and instances, and each
   PU's instance at every level (its path). */
static void read_levels(void)
{
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
}

/* Memory and distances: each PU's NUMA node, the distance classes between PUs and their transfer
   latencies, DRAM's latencies, every level's and the memory controllers' bandwidth, prefetching. */
static void read_costs(void)
{
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
}

/* The placements: each a PU per slot, and the slot threads past the last wrap round to. Under
   --ps-check-groups each once more, to be simulated alone. */
static void read_placements(void)
{
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
}

/* Instances: their level, a PU below each, where their tags start, the instances of lower levels
   under each. */
static void derive_instances(void)
{
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
}

/* Paths: each PU's instances as a mask (the directory's terms), each L1's L2 and, where every L2
   has one L1 below it, each L2's L1. */
static void derive_paths(void)
{
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
}

/* Each placement's first-touch table (page -> node), grown as pages are touched. */
static void allocate_page_tables(void)
{
   for (Int k = 0; k < n_models; k++) {
      Model* m = &models[k];
      m->page_cap = 1024;
      m->page_keys = zeroed("ps.pages", m->page_cap, sizeof(UWord));
      m->page_node = zeroed("ps.pages", m->page_cap, 1);
   }
}

static void read_config(void)
{
   load_config();
   read_levels();
   read_costs();
   read_placements();
   derive_instances();
   derive_paths();
   allocate_page_tables();
   group_models(n_models);
}
