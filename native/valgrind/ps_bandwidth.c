/* Bandwidth and queueing over a chunk, per placement (see the top of ps_main.c).
   Part of ps_main.c, which includes it (as cachegrind's cg_main.c includes cg_sim.c): one
   translation unit, so the per-access paths stay inlined and everything stays static. */

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
