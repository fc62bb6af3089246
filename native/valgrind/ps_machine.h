/* The simulated machine: its limits, its caches as read from --ps-config, and the types of the
   models (a directory, the counts, a group of placements, a placement).
   Part of ps_main.c, which includes it (as cachegrind's cg_main.c includes cg_sim.c): one
   translation unit, so the per-access paths stay inlined and everything stays static. */

#ifndef PS_MACHINE_H
#define PS_MACHINE_H

#define MAX_LEVELS 8
#define MAX_CLASSES 16
#define MAX_MODELS 64
#define MAX_PUS 4096
#define MAX_INSTANCES 4096
#define MAX_THREADS 65536
#define MAX_WORKERS 4           /* each takes two of the few file descriptors Valgrind keeps for itself */

/* The multiplier of Fibonacci hashing (Knuth, TAOCP 6.4): 2^64 divided by the golden ratio, odd;
   the high bits of key * it spread keys that differ in their low bits. The directory and the
   first-touch page table take them. */
#define FIBONACCI_MULTIPLIER 0x9E3779B97F4A7C15ULL

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

static void* zeroed(const HChar* cc, SizeT count, SizeT size)
{
   return VG_(calloc)(cc, count ? count : 1, size);
}

#endif
