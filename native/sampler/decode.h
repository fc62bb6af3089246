/* The address a sampled instruction touches, from the program's code and the sampled registers
 * (pinwise-sample's decoder; see decode.c). */
#ifndef PW_DECODE_H
#define PW_DECODE_H

#include <stdint.h>
#include <sys/types.h>

/* The general registers a sample carries, in perf's x86-64 order (asm/perf_regs.h). */
enum { PW_REGS = 24, PW_REG_SP = 7, PW_REG_IP = 8 };
/* sample_regs_user: AX..SP, IP, R8..R15 (not FLAGS and the segment selectors). */
#define PW_REGS_MASK 0xff01ffULL

enum pw_kind { PW_READ = 1, PW_WRITE = 2 };

/* Why a sample gives no communication candidate (counted per reason, printed in the output). */
enum pw_skip {
    PW_OK = 0,
    PW_SKIP_NO_ACCESS,    /* neither the instruction at IP nor the one before it touches memory */
    PW_SKIP_STACK,        /* the thread's own stack (stack-pointer relative, or the mapping it lies in) */
    PW_SKIP_TLS,          /* fs/gs relative: thread-local storage */
    PW_SKIP_READONLY,     /* a mapping nobody can write: code, constants */
    PW_SKIP_UNMAPPED,     /* no mapping holds the address (a stale sample, or a bad decode) */
    PW_SKIP_NO_CODE,      /* the code could not be read */
    PW_SKIP_KINDS
};

struct pw_access {
    uint64_t addr;        /* effective address */
    uint64_t ip;          /* the instruction that makes the access */
    uint8_t size;         /* bytes (1..64) */
    uint8_t kind;         /* PW_READ, PW_WRITE (read-modify-write counts as a write) */
    uint8_t behind;       /* 1: the instruction before IP (it had just run), 0: the one at IP */
};

struct pw_decoder;

/* A decoder for the address space of process pid; NULL with errno set when Capstone cannot start. */
struct pw_decoder *pw_decoder_new(pid_t pid, int readonly, int stack);
void pw_decoder_free(struct pw_decoder *d);
/* Read the process's memory and mappings through thread tid from now on: any live thread of it
 * will do, and the leader's id stops doing once the main thread has ended (pthread_exit) while
 * the others run (its /proc/PID/maps is empty then, and process_vm_readv fails). */
void pw_decoder_via(struct pw_decoder *d, pid_t tid);
/* The program exec'd a new image: forget its mappings and code. */
void pw_decoder_reset(struct pw_decoder *d);

/* The access of the sample (ip, regs) of a thread whose stack pointer is regs[PW_REG_SP]:
 * PW_OK and *out, or the reason there is none. */
enum pw_skip pw_decode(struct pw_decoder *d, uint64_t ip, const uint64_t *regs, struct pw_access *out);

/* What an address is, for the hot-line records: "[heap]+0x10", "prog+0x4010", "anon 0x7f..". */
void pw_describe(struct pw_decoder *d, uint64_t addr, char *out, size_t len);

/* Decoder statistics: functions decoded, instructions decoded, map reloads, samples decoded, and
   those of them in code with no function table (a stripped static program's, JIT code), decoded
   at IP only. */
void pw_decoder_counts(const struct pw_decoder *d, uint64_t *functions, uint64_t *instructions, uint64_t *reloads,
                       uint64_t *decodes, uint64_t *untabled);

#endif
