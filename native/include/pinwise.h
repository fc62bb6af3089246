/* pinwise in-process API: pin the calling thread to a slot of the plan pinwise prepared.
 *
 * The plan comes from the environment variable PINWISE_PLAN, which `pinwise run --print` shows
 * and `pinwise run` sets: slots separated by ';', each slot a CPU list ("0;2;1,3;4-7").
 * Link with -lpinwise (the library lives in the pinwise Python package, `pinwise run --print`
 * prints its path), or with the preload library already in the process.
 */
#ifndef PINWISE_H
#define PINWISE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Pin the calling thread to slot `slot` of the plan (wrapping round past the last slot).
 * Returns 0 on success, -1 with errno set: EINVAL when there is no usable plan or no CPU of the
 * slot is allowed, or the error of sched_setaffinity. */
int pinwise_pin_self(int slot);

/* Number of slots in the plan, or -1 when PINWISE_PLAN is unset or unusable. */
int pinwise_plan_slots(void);

#ifdef __cplusplus
}
#endif

#endif
