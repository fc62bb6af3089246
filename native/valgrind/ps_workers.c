/* Worker processes that simulate the groups while Valgrind's process collects the accesses.
   Part of ps_main.c, which includes it (as cachegrind's cg_main.c includes cg_sim.c): one
   translation unit, so the per-access paths stay inlined and everything stays static. */

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
   tl_assert(outstanding < RING && chunk_used <= CHUNK);
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
      /* threads are only ever added (grow_threads keeps what it has) */
      tl_assert(h.threads >= n_threads && h.threads <= MAX_THREADS);
      grow_threads(h.threads);  /* the counts below go for as many threads as Valgrind's process has */
      n_threads = h.threads;
      if (h.count < 0) break;
      tl_assert(h.buffer >= 0 && h.buffer < RING && h.count <= CHUNK);
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
