"""The thresholds of an adaptive run's decisions (:mod:`pinwise.adapt.decide`): how often it
judges, how much a placement must gain to move threads, and how many events each rule rests on."""

INTERVAL = 0.2
#: The sampler's windows (ticks) are this share of the interval: a judgment is made on the ticks
#: since the last one when an interval has passed, or before, as soon as they hold ALONE_EVENTS
#: weighted events and the placement looks stale on them (STALE_SHARE).
TICKS_PER_INTERVAL = 4
#: The placement looks stale when, under the CPUs of the last judgment, the fresh ticks cost this
#: share of a random dealing's cost per event more than that judgment's data did: the threads
#: that talk now are further apart than those that talked then (a phase change).
STALE_SHARE = 0.25
#: Intervals from the start in which, before the first move, any ticks that hold STRONG_EVENTS
#: are judged, stale or not (the held-out halves keep noise from moving the threads).
WARM_UP = 2
#: A new placement must cost less than this share of the current one (in two judgments in a row).
HYSTERESIS = 0.2
#: ... or less than this share of it in one judgment of at least STRONG_EVENTS weighted events:
#: a gain sampling noise does not make.
STRONG = 0.5
STRONG_EVENTS = 50.0
#: ... or, before the first move, this many watchpoint traps: an estimate's noise is that of the
#: traps it rests on, not of what they weigh, and at the start, before the watchpoints are rationed,
#: each weighs about one event (50 weighted events waited for about 50 traps).
STRONG_TRAPS = 20
#: Fewer weighted events than this in the windows judged: nothing to decide on.
MIN_EVENTS = 10.0
#: The newest window alone is judged when it holds this many weighted events (and MIN_WATCHED
#: watched samples); with fewer, the last two together.
ALONE_EVENTS = 100.0
#: Watchpoints armed in the span judged below which threads pinwise has placed before, and that
#: are not crowded, stay where they are, however many weighted events their hits stand for: a
#: pair's few hits weighed by its offers add up to ALONE_EVENTS, and a plan fitted to them beats
#: the held-out half by chance (4-thread all-to-all on 2 CPUs at 100 traps a second: second moves
#: made on 11-30 watched samples placed 6 runs of 40 twice without this floor). The first
#: placement does not wait for it (the blog's program on 2 CPUs waited 0.05-0.25 s of its 0.3).
MIN_WATCHED = 32
#: ... unless the plan costs less than this share of the placement, on the events judged and on
#: the held-out half: pairs that swap partners cost nothing placed anew (the two-phase program on 2
#: CPUs waited 0.25-0.6 s after its phase change for 32 watched samples, while each judgment read
#: 0.0 on the held-out half), where the noise second moves of all-to-all rested on 0.46-1.0.
FEW_SHARE = 0.1
#: A further move on fewer than MIN_WATCHED watched samples: its traps must fall on the pairs it
#: brings closer beyond what this chance makes them, judged against each pair's share of the traps
#: seen since the last move (Payoff._not_by_chance):
#: at 1e-5 all 11 of a span's traps on one matching of 4 all-to-all threads on 2 CPUs (a share of
#: 0.44 under the same placement: 1.2e-4) move nothing, and 3 on pairs that had 1 in 20 before do.
CHANCE = 1e-5
#: ... the spans judged since the last move that tell each pair's share (the newest), and the
#: traps they must hold to say anything.
HISTORY_SPANS = 4
HISTORY_TRAPS = 20
#: Judgments in a row without contention, over this many intervals less one at least, before
#: pairs that share a CPU are given back to the OS: more than the two a phase change straddles
#: (a judgment may sum the last two spans).
RELEASE_WINDOWS = 3
#: Weighted events seen under a new placement before whether it lowered the hops per event is
#: judged (one judgment's 100 events read it either way on noise), and a further move may follow.
PAID_EVENTS = 2 * ALONE_EVENTS
#: Due judgments in a row that changed nothing (no move, none pending, no early one: the
#: placement looks as it did) before the sampler arms at a quarter of its watchpoint budget
#: (pw_sample.c, STEADY_SHARE: each trap costs the program; 100 a second cost a pinned contending
#: pair on 2 CPUs 1.9 %); the first early judgment gives it the whole budget back.
STEADY_JUDGMENTS = 3
#: The log's decisions that applied a placement: threads moved, or the OS's pinned where they ran.
PLACED = ("moved", "pinned where they ran")
#: Threads made (alive or not) past which an adaptive run stops: each judgment reads a matrix of
#: every thread the program made, so its cost grows with their square (a program that made 4,001
#: threads in rounds of four cost pinwise 1.9 s of CPU in a 1.4 s run, 12,001 threads 23 s: 20x
#: the program's time; 2,001 threads 0.24 s). The threads stay where they are, and it says so.
MAX_THREADS_FOLLOWED = 2048
