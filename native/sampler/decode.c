/* The address a sampled instruction touches, computed outside the program.
 *
 * A clock sample gives the thread's instruction pointer and its general registers as they were
 * when the timer interrupted it. The instruction at IP has not run yet; the one before it has
 * just run, and a timer interrupt is taken at an instruction boundary once a slow instruction
 * (a cache miss, a locked add on a contended line) completes, so the time of a slow access is
 * sampled at the instruction *after* it: on pinwise-patterns 78% of samples fall right behind
 * `lock addq $1,(%rax)`. So the decoder looks behind first: when the instruction before IP
 * touches memory, ran last (IP is not a branch target, and it is not a jump, call or return) and
 * did not overwrite the registers its address is made of, its address is computed from the
 * sampled registers; otherwise the instruction at IP, whose registers are exactly those sampled.
 *
 * Knowing the instruction before IP needs instruction boundaries, which x86 code does not carry:
 * the function around IP is decoded from its start, found in the unwind table every x86-64 ELF
 * file keeps even when stripped (.eh_frame_hdr's sorted list of function starts), or, in a file
 * linked without that table (a statically linked program: gcc -static omits it), in its symbol
 * table (.symtab's functions). Code with neither (JIT code, a stripped static program) is
 * decoded at IP only, which misses the slow access behind it. Decoding is Capstone's; each function is
 * decoded once and kept.
 *
 * Skipped, counted by reason: stack accesses (rsp-relative, or in the mapping that holds the
 * thread's stack pointer), fs/gs-relative ones (thread-local storage), addresses in mappings
 * nobody writes (unless readonly), and instructions that do not touch memory (lea, nop, prefetch).
 *
 * Limitations: one memory operand per instruction (the first: a string move's destination);
 * vector gathers are skipped; code that changes after it was decoded (JIT) is decoded as it
 * first was, until the program execs.
 */
#define _GNU_SOURCE
#include "decode.h"

#include <capstone/capstone.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_FUNCTION (256 << 10)   /* bytes decoded from a function's start */
#define IP_CACHE 65536             /* direct-mapped: IP -> (function, instruction) */
#define RELOAD_NS 20000000ULL      /* at most one reading of /proc/PID/maps every 20 ms */

enum { NOREG = 0xff, RIPREG = 0xfe };
enum { F_MEM = 1, F_TLS = 2, F_BRANCH = 4, F_TARGET = 8, F_NARROW = 16 };

struct insn {
    uint64_t addr;
    int64_t disp;
    uint32_t writes;          /* perf register bits the instruction writes */
    uint8_t len, flags, base, index, scale, size, kind;
};

struct function {
    uint64_t start;           /* runtime address; 0: a free slot */
    uint32_t count;
    struct insn *insns;
};

struct elf_file {
    char *path;
    int ok;                   /* 1: segments and table read; 0: no unwind table (decode at IP only) */
    int nseg;
    struct { uint64_t vaddr, offset, filesz; } seg[16];
    uint64_t *starts;         /* function starts, virtual addresses, sorted */
    size_t nstarts;
};

struct mapping {
    uint64_t start, end, offset;
    int writable, executable;
    int file;                 /* index in files, or -1 */
    char *name;               /* the path, [heap], [stack], ... or "" */
};

struct ip_entry {
    uint64_t ip;
    struct function *function;
    uint32_t index;
};

struct pw_decoder {
    pid_t pid;
    int readonly, stack;
    csh cs;
    struct mapping *maps;
    size_t nmaps;
    uint64_t last_reload;
    struct elf_file *files;
    size_t nfiles;
    struct function *functions;   /* open addressing by start */
    size_t nfunctions, function_slots;
    struct ip_entry *ips;         /* [IP_CACHE] */
    int ips_used;                 /* an entry was filled since the cache was last cleared */
    uint64_t decoded_functions, decoded_insns, reloads;
    uint64_t decodes, untabled;   /* samples decoded; of them in code with no function table (at IP only) */
};

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* Capstone's register -> perf's register index (the 64-bit register it is part of). */
static uint8_t perf_reg(x86_reg reg, int *narrow)
{
    static const struct { x86_reg r64, r32; uint8_t perf; } table[] = {
        {X86_REG_RAX, X86_REG_EAX, 0}, {X86_REG_RBX, X86_REG_EBX, 1}, {X86_REG_RCX, X86_REG_ECX, 2},
        {X86_REG_RDX, X86_REG_EDX, 3}, {X86_REG_RSI, X86_REG_ESI, 4}, {X86_REG_RDI, X86_REG_EDI, 5},
        {X86_REG_RBP, X86_REG_EBP, 6}, {X86_REG_RSP, X86_REG_ESP, 7}, {X86_REG_R8, X86_REG_R8D, 16},
        {X86_REG_R9, X86_REG_R9D, 17}, {X86_REG_R10, X86_REG_R10D, 18}, {X86_REG_R11, X86_REG_R11D, 19},
        {X86_REG_R12, X86_REG_R12D, 20}, {X86_REG_R13, X86_REG_R13D, 21}, {X86_REG_R14, X86_REG_R14D, 22},
        {X86_REG_R15, X86_REG_R15D, 23},
    };
    if (reg == X86_REG_INVALID)
        return NOREG;
    if (reg == X86_REG_RIP)
        return RIPREG;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].r64 == reg)
            return table[i].perf;
        if (table[i].r32 == reg) {
            if (narrow)
                *narrow = 1;
            return table[i].perf;
        }
    }
    return RIPREG - 1;        /* a register the sample does not carry (a vector index): unusable */
}

/* Bits of the perf registers that ``reg`` (any width) overlaps, for the "writes" mask. */
static uint32_t reg_bit(csh cs, x86_reg reg)
{
    const char *name = cs_reg_name(cs, reg);
    static const char *families[][5] = {
        {"rax", "eax", "ax", "al", "ah"}, {"rbx", "ebx", "bx", "bl", "bh"}, {"rcx", "ecx", "cx", "cl", "ch"},
        {"rdx", "edx", "dx", "dl", "dh"}, {"rsi", "esi", "si", "sil", ""}, {"rdi", "edi", "di", "dil", ""},
        {"rbp", "ebp", "bp", "bpl", ""}, {"rsp", "esp", "sp", "spl", ""},
    };
    if (name == NULL)
        return 0;
    for (int f = 0; f < 8; f++)
        for (int k = 0; k < 5; k++)
            if (families[f][k][0] && strcmp(name, families[f][k]) == 0)
                return 1u << f;
    if (name[0] == 'r' && name[1] >= '0' && name[1] <= '9') {  /* r8..r15 and their b/w/d parts */
        int n = atoi(name + 1);
        if (n >= 8 && n <= 15)
            return 1u << (16 + n - 8);
    }
    return 0;
}

/* -- the address space ------------------------------------------------------------------------ */

static int file_index(struct pw_decoder *d, const char *path)
{
    for (size_t i = 0; i < d->nfiles; i++)
        if (strcmp(d->files[i].path, path) == 0)
            return (int)i;
    struct elf_file *grown = realloc(d->files, (d->nfiles + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    d->files = grown;
    struct elf_file *f = &d->files[d->nfiles];
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    f->ok = -1;               /* not read yet */
    return f->path ? (int)d->nfiles++ : -1;
}

static void free_maps(struct pw_decoder *d)
{
    for (size_t i = 0; i < d->nmaps; i++)
        free(d->maps[i].name);
    free(d->maps);
    d->maps = NULL;
    d->nmaps = 0;
}

/* Read /proc/PID/maps again (at most every RELOAD_NS unless forced); 0 when it could not. */
static int reload_maps(struct pw_decoder *d, int force)
{
    uint64_t now = now_ns();
    if (!force && d->maps && now - d->last_reload < RELOAD_NS)
        return 0;
    d->last_reload = now;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)d->pid);
    FILE *maps = fopen(path, "re");
    if (maps == NULL)
        return 0;
    struct mapping *found = NULL;
    size_t count = 0, capacity = 0;
    char line[4352];
    while (fgets(line, sizeof line, maps)) {
        unsigned long long start, end, offset;
        char perms[8] = "";
        int name_at = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s%n", &start, &end, perms, &offset, &name_at) < 4)
            continue;
        char *name = line + name_at;
        while (*name == ' ' || *name == '\t')
            name++;
        name[strcspn(name, "\n")] = '\0';
        if (count == capacity) {
            capacity = capacity ? capacity * 2 : 256;
            struct mapping *grown = realloc(found, capacity * sizeof *found);
            if (grown == NULL)
                break;
            found = grown;
        }
        struct mapping *m = &found[count];
        m->start = start;
        m->end = end;
        m->offset = offset;
        m->writable = perms[1] == 'w';
        m->executable = perms[2] == 'x';
        m->name = strdup(name);
        m->file = name[0] == '/' && strstr(name, " (deleted)") == NULL ? file_index(d, name) : -1;
        if (m->name == NULL)
            break;
        count++;
    }
    fclose(maps);
    free_maps(d);
    d->maps = found;
    d->nmaps = count;
    d->reloads++;
    return 1;
}

static struct mapping *lookup(struct pw_decoder *d, uint64_t addr)
{
    size_t lo = 0, hi = d->nmaps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (addr < d->maps[mid].start)
            hi = mid;
        else if (addr >= d->maps[mid].end)
            lo = mid + 1;
        else
            return &d->maps[mid];
    }
    return NULL;
}

static struct mapping *find_mapping(struct pw_decoder *d, uint64_t addr)
{
    struct mapping *m = lookup(d, addr);
    if (m == NULL && reload_maps(d, 0))
        m = lookup(d, addr);
    return m;
}

/* -- unwind tables: where functions start -------------------------------------------------------- */

/* A DWARF pointer encoding's value (the subset .eh_frame_hdr uses); 0 on an unknown encoding. */
static int read_encoded(const uint8_t *p, const uint8_t *end, uint8_t enc, uint64_t pcrel, uint64_t datarel,
                        uint64_t *value, const uint8_t **next)
{
    if (enc == 0xff)
        return 0;
    int64_t v;
    size_t n;
    switch (enc & 0x0f) {
    case 0x03: n = 4; if (p + n > end) return 0; { uint32_t x; memcpy(&x, p, 4); v = x; } break;
    case 0x0b: n = 4; if (p + n > end) return 0; { int32_t x; memcpy(&x, p, 4); v = x; } break;
    case 0x04: case 0x0c: case 0x00: n = 8; if (p + n > end) return 0; memcpy(&v, p, 8); break;
    default: return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += (int64_t)pcrel; break;
    case 0x30: v += (int64_t)datarel; break;
    default: return 0;
    }
    *value = (uint64_t)v;
    *next = p + n;
    return 1;
}

/* Read a file's load segments and its .eh_frame_hdr table of function starts. */
static int by_address(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The function starts of a file without an unwind table, from its symbol table: sorted, unique,
   into f->starts. Returns 1 when there is at least one. */
static int load_symbol_starts(int fd, const Elf64_Ehdr *eh, struct elf_file *f)
{
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 || eh->e_shnum > 4096)
        return 0;
    size_t bytes = sizeof(Elf64_Shdr) * eh->e_shnum;
    Elf64_Shdr *sh = malloc(bytes);
    if (sh == NULL || pread(fd, sh, bytes, (off_t)eh->e_shoff) != (ssize_t)bytes) {
        free(sh);
        return 0;
    }
    for (int i = 0; i < eh->e_shnum && f->nstarts == 0; i++) {
        size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
        if (sh[i].sh_type != SHT_SYMTAB || count == 0 || count > (16u << 20))
            continue;
        Elf64_Sym *symbols = malloc(count * sizeof(Elf64_Sym));
        f->starts = malloc(count * sizeof(uint64_t));
        if (symbols == NULL || f->starts == NULL ||
            pread(fd, symbols, count * sizeof(Elf64_Sym), (off_t)sh[i].sh_offset) != (ssize_t)(count * sizeof(Elf64_Sym))) {
            free(symbols);
            free(f->starts);
            f->starts = NULL;
            break;
        }
        for (size_t k = 0; k < count; k++)
            if (ELF64_ST_TYPE(symbols[k].st_info) == STT_FUNC && symbols[k].st_shndx != SHN_UNDEF && symbols[k].st_value)
                f->starts[f->nstarts++] = symbols[k].st_value;
        free(symbols);
        qsort(f->starts, f->nstarts, sizeof(uint64_t), by_address);
        size_t kept = 0;
        for (size_t k = 0; k < f->nstarts; k++)
            if (kept == 0 || f->starts[kept - 1] != f->starts[k])
                f->starts[kept++] = f->starts[k];
        f->nstarts = kept;
    }
    free(sh);
    return f->nstarts > 0;
}

static void load_elf(struct elf_file *f)
{
    f->ok = 0;
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    Elf64_Ehdr eh;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 64) {
        close(fd);
        return;
    }
    Elf64_Phdr ph[64];
    size_t bytes = sizeof(Elf64_Phdr) * eh.e_phnum;
    if (pread(fd, ph, bytes, (off_t)eh.e_phoff) != (ssize_t)bytes) {
        close(fd);
        return;
    }
    const Elf64_Phdr *hdr = NULL;
    for (int i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && f->nseg < 16) {
            f->seg[f->nseg].vaddr = ph[i].p_vaddr;
            f->seg[f->nseg].offset = ph[i].p_offset;
            f->seg[f->nseg].filesz = ph[i].p_filesz;
            f->nseg++;
        }
        if (ph[i].p_type == PT_GNU_EH_FRAME)
            hdr = &ph[i];
    }
    if (hdr == NULL || hdr->p_filesz < 12 || hdr->p_filesz > (64u << 20)) {
        f->ok = load_symbol_starts(fd, &eh, f);
        close(fd);
        return;
    }
    uint8_t *table = malloc(hdr->p_filesz);
    if (table == NULL || pread(fd, table, hdr->p_filesz, (off_t)hdr->p_offset) != (ssize_t)hdr->p_filesz) {
        free(table);
        close(fd);
        return;
    }
    close(fd);
    const uint8_t *p = table + 4, *end = table + hdr->p_filesz;
    uint64_t base = hdr->p_vaddr, eh_frame, count;
    if (table[0] == 1 && read_encoded(p, end, table[1], base + 4, base, &eh_frame, &p) &&
        read_encoded(p, end, table[2], base + (uint64_t)(p - table), base, &count, &p) &&
        count < (16u << 20) && (f->starts = malloc(sizeof(uint64_t) * (count + 1))) != NULL) {
        for (uint64_t i = 0; i < count; i++) {
            uint64_t start, fde;
            if (!read_encoded(p, end, table[3], base + (uint64_t)(p - table), base, &start, &p) ||
                !read_encoded(p, end, table[3], base + (uint64_t)(p - table), base, &fde, &p))
                break;
            f->starts[f->nstarts++] = start;
        }
        f->ok = f->nstarts > 0;
    }
    free(table);
}

/* The runtime start and end of the function around ip, from its file's table; 0 when unknown. */
static int function_bounds(struct pw_decoder *d, const struct mapping *m, uint64_t ip, uint64_t *start,
                           uint64_t *end)
{
    if (m->file < 0)
        return 0;
    struct elf_file *f = &d->files[m->file];
    if (f->ok < 0)
        load_elf(f);
    if (!f->ok)
        return 0;
    int64_t bias = 0;
    int found = 0;
    for (int i = 0; i < f->nseg; i++)
        if (f->seg[i].offset <= m->offset && m->offset < f->seg[i].offset + f->seg[i].filesz) {
            bias = (int64_t)(m->start - m->offset + f->seg[i].offset - f->seg[i].vaddr);
            found = 1;
            break;
        }
    if (!found)
        return 0;
    uint64_t vaddr = ip - (uint64_t)bias;
    size_t lo = 0, hi = f->nstarts;
    while (lo < hi) {  /* the last start <= vaddr */
        size_t mid = (lo + hi) / 2;
        if (f->starts[mid] <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    *start = f->starts[lo - 1] + (uint64_t)bias;
    *end = lo < f->nstarts ? f->starts[lo] + (uint64_t)bias : *start + MAX_FUNCTION;
    if (*end > m->end)
        *end = m->end;
    if (*end - *start > MAX_FUNCTION)
        *end = *start + MAX_FUNCTION;
    return ip >= *start && ip < *end;
}

/* -- decoding ------------------------------------------------------------------------------------ */

/* Read code from the program, or from its file when the kernel will not let us (ptrace scope). */
static size_t read_code(struct pw_decoder *d, const struct mapping *m, uint64_t addr, uint8_t *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)addr, len};
    ssize_t got = process_vm_readv(d->pid, &local, 1, &remote, 1, 0);
    if (got > 0)
        return (size_t)got;
    if (m == NULL || m->file < 0)
        return 0;
    int fd = open(d->files[m->file].path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    got = pread(fd, buf, len, (off_t)(addr - m->start + m->offset));
    close(fd);
    return got > 0 ? (size_t)got : 0;
}

static int is_branch(const cs_insn *insn)
{
    for (int g = 0; g < insn->detail->groups_count; g++) {
        uint8_t group = insn->detail->groups[g];
        if (group == X86_GRP_JUMP || group == X86_GRP_CALL || group == X86_GRP_RET || group == X86_GRP_INT ||
            group == X86_GRP_IRET)
            return 1;
    }
    return insn->id == X86_INS_SYSCALL;
}

static void describe_insn(csh cs, const cs_insn *insn, struct insn *out)
{
    memset(out, 0, sizeof *out);
    out->addr = insn->address;
    out->len = (uint8_t)insn->size;
    out->base = out->index = NOREG;
    if (is_branch(insn))
        out->flags |= F_BRANCH;
    cs_regs read, written;
    uint8_t nread = 0, nwritten = 0;
    if (cs_regs_access(cs, insn, read, &nread, written, &nwritten) == CS_ERR_OK)
        for (int i = 0; i < nwritten; i++)
            out->writes |= reg_bit(cs, written[i]);
    switch (insn->id) {  /* a memory operand that is not an access */
    case X86_INS_LEA: case X86_INS_NOP: case X86_INS_PREFETCH: case X86_INS_PREFETCHNTA: case X86_INS_PREFETCHT0:
    case X86_INS_PREFETCHT1: case X86_INS_PREFETCHT2: case X86_INS_PREFETCHW: case X86_INS_CLFLUSH:
    case X86_INS_CLFLUSHOPT: case X86_INS_CLWB:
        return;
    default:
        break;
    }
    if (out->flags & F_BRANCH)
        return;                /* call/jmp through memory: control flow, not data */
    const cs_x86 *x86 = &insn->detail->x86;
    for (int i = 0; i < x86->op_count; i++) {
        const cs_x86_op *op = &x86->operands[i];
        if (op->type != X86_OP_MEM)
            continue;
        int narrow = 0;
        uint8_t base = perf_reg(op->mem.base, &narrow), index = perf_reg(op->mem.index, &narrow);
        if (base == RIPREG - 1 || index == RIPREG - 1 || index == RIPREG)
            return;            /* a vector index (gather): not one address */
        out->flags |= F_MEM | (narrow ? F_NARROW : 0);
        if (op->mem.segment == X86_REG_FS || op->mem.segment == X86_REG_GS)
            out->flags |= F_TLS;
        out->base = base;
        out->index = index;
        out->scale = (uint8_t)op->mem.scale;
        out->disp = op->mem.disp;
        out->size = op->size ? op->size : 8;
        out->kind = (op->access & CS_AC_WRITE) ? PW_WRITE : PW_READ;
        return;
    }
}

static uint64_t hash_ip(uint64_t ip)
{
    return (ip * 0x9E3779B97F4A7C15ULL) >> 48;  /* Fibonacci hashing onto IP_CACHE slots */
}

static struct function *function_slot(struct pw_decoder *d, uint64_t start)
{
    size_t mask = d->function_slots - 1, k = (size_t)(hash_ip(start) & mask);
    while (d->functions[k].start && d->functions[k].start != start)
        k = (k + 1) & mask;
    return &d->functions[k];
}

static void forget_functions(struct pw_decoder *d)
{
    for (size_t i = 0; d->nfunctions && i < d->function_slots; i++)
        free(d->functions[i].insns);
    /* cleared only when used: the reset at the program's exec, before any sample, wrote the whole
       cache (1.5 MiB, calloc'ed and so not yet in memory) while the program started: some 400 page
       faults in its first milliseconds (the sampler's CPU while a 0.4 s private run ran, median of 8
       under perf: 38 ms before, 35 ms after) */
    if (d->nfunctions)
        memset(d->functions, 0, d->function_slots * sizeof *d->functions);
    if (d->ips_used)
        memset(d->ips, 0, IP_CACHE * sizeof *d->ips);
    d->nfunctions = 0;
    d->ips_used = 0;
}

/* The function starting at start, decoded (once) up to end. */
static struct function *decode_function(struct pw_decoder *d, const struct mapping *m, uint64_t start, uint64_t end)
{
    struct function *slot = function_slot(d, start);
    if (slot->start == start)
        return slot;
    if ((d->nfunctions + 1) * 2 > d->function_slots)  /* full enough: start over (a bounded cache) */
        forget_functions(d), slot = function_slot(d, start);
    uint8_t *code = malloc(end - start);
    if (code == NULL)
        return NULL;
    size_t got = read_code(d, m, start, code, end - start);
    cs_insn *insns = NULL;
    size_t count = got ? cs_disasm(d->cs, code, got, start, 0, &insns) : 0;
    free(code);
    if (count == 0)
        return NULL;
    struct insn *out = malloc(count * sizeof *out);
    if (out == NULL) {
        cs_free(insns, count);
        return NULL;
    }
    for (size_t i = 0; i < count; i++)
        describe_insn(d->cs, &insns[i], &out[i]);
    for (size_t i = 0; i < count; i++) {  /* direct jumps' targets inside the function */
        const cs_x86 *x86 = &insns[i].detail->x86;
        if (!(out[i].flags & F_BRANCH) || x86->op_count != 1 || x86->operands[0].type != X86_OP_IMM)
            continue;
        uint64_t target = (uint64_t)x86->operands[0].imm;
        size_t lo = 0, hi = count;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (out[mid].addr < target)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < count && out[lo].addr == target)
            out[lo].flags |= F_TARGET;
    }
    cs_free(insns, count);
    slot->start = start;
    slot->count = (uint32_t)count;
    slot->insns = out;
    d->nfunctions++;
    d->decoded_functions++;
    d->decoded_insns += count;
    return slot;
}

static uint64_t reg_value(const uint64_t *regs, uint8_t reg, uint64_t next_ip, int narrow)
{
    if (reg == NOREG)
        return 0;
    if (reg == RIPREG)
        return next_ip;
    return narrow ? regs[reg] & 0xffffffffULL : regs[reg];
}

static uint32_t bit_of(uint8_t reg)
{
    return reg < PW_REGS ? 1u << reg : 0;
}

/* The access of ``insn`` with ``regs``, or why there is none. */
static enum pw_skip access_of(struct pw_decoder *d, const struct insn *insn, const uint64_t *regs,
                              struct pw_access *out, int behind)
{
    if (insn->flags & F_TLS)
        return PW_SKIP_TLS;
    if (insn->base == PW_REG_SP && !d->stack)
        return PW_SKIP_STACK;
    int narrow = (insn->flags & F_NARROW) != 0;
    uint64_t next = insn->addr + insn->len;
    uint64_t addr = reg_value(regs, insn->base, next, narrow) + reg_value(regs, insn->index, next, narrow) *
                    (insn->scale ? insn->scale : 1) + (uint64_t)insn->disp;
    if (narrow)
        addr &= 0xffffffffULL;
    struct mapping *m = addr < (1ULL << 47) ? find_mapping(d, addr) : NULL;
    if (m == NULL)
        return PW_SKIP_UNMAPPED;
    if (!d->stack) {
        struct mapping *stack = find_mapping(d, regs[PW_REG_SP]);
        if (stack == m)
            return PW_SKIP_STACK;
    }
    if (!m->writable && !d->readonly)
        return PW_SKIP_READONLY;
    out->addr = addr;
    out->ip = insn->addr;
    out->size = insn->size;
    out->kind = insn->kind;
    out->behind = (uint8_t)behind;
    return PW_OK;
}

enum pw_skip pw_decode(struct pw_decoder *d, uint64_t ip, const uint64_t *regs, struct pw_access *out)
{
    d->decodes++;
    struct ip_entry *entry = &d->ips[hash_ip(ip)];
    if (entry->ip != ip || entry->function == NULL) {
        struct mapping *m = find_mapping(d, ip);
        uint64_t start, end;
        struct function *f = NULL;
        if (m && m->executable && function_bounds(d, m, ip, &start, &end))
            f = decode_function(d, m, start, end);
        uint32_t lo = 0, hi = f ? f->count : 0;
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (f->insns[mid].addr < ip)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (f == NULL)
            d->untabled++;
        if (f == NULL || lo >= f->count || f->insns[lo].addr != ip) {
            /* no unwind table, or IP inside what the linear decode took for another instruction */
            uint8_t code[16];
            size_t got = read_code(d, m, ip, code, sizeof code);
            cs_insn *insn = NULL;
            if (got == 0 || cs_disasm(d->cs, code, got, ip, 1, &insn) != 1)
                return PW_SKIP_NO_CODE;
            struct insn one;
            describe_insn(d->cs, insn, &one);
            cs_free(insn, 1);
            return (one.flags & F_MEM) ? access_of(d, &one, regs, out, 0) : PW_SKIP_NO_ACCESS;
        }
        entry->ip = ip;
        entry->function = f;
        entry->index = lo;
        d->ips_used = 1;
    }
    const struct insn *at = &entry->function->insns[entry->index];
    const struct insn *before = entry->index > 0 ? at - 1 : NULL;
    if (before && !(at->flags & F_TARGET) && !(before->flags & F_BRANCH) && (before->flags & F_MEM) &&
        !(before->writes & (bit_of(before->base) | bit_of(before->index))))
        return access_of(d, before, regs, out, 1);
    if (at->flags & F_MEM)
        return access_of(d, at, regs, out, 0);
    return PW_SKIP_NO_ACCESS;
}

void pw_describe(struct pw_decoder *d, uint64_t addr, char *out, size_t len)
{
    struct mapping *m = find_mapping(d, addr);
    if (m == NULL) {
        snprintf(out, len, "unmapped 0x%llx", (unsigned long long)addr);
    } else if (m->name[0] == '/') {
        const char *slash = strrchr(m->name, '/');
        snprintf(out, len, "%s+0x%llx", slash + 1, (unsigned long long)(addr - m->start + m->offset));
    } else if (m->name[0]) {
        snprintf(out, len, "%s+0x%llx", m->name, (unsigned long long)(addr - m->start));
    } else {
        snprintf(out, len, "anon 0x%llx", (unsigned long long)addr);
    }
}

void pw_decoder_via(struct pw_decoder *d, pid_t tid)
{
    d->pid = tid;
}

struct pw_decoder *pw_decoder_new(pid_t pid, int readonly, int stack)
{
    struct pw_decoder *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->pid = pid;
    d->readonly = readonly;
    d->stack = stack;
    d->function_slots = 4096;
    d->functions = calloc(d->function_slots, sizeof *d->functions);
    d->ips = calloc(IP_CACHE, sizeof *d->ips);
    if (d->functions == NULL || d->ips == NULL || cs_open(CS_ARCH_X86, CS_MODE_64, &d->cs) != CS_ERR_OK) {
        free(d->functions);
        free(d->ips);
        free(d);
        errno = ENOMEM;
        return NULL;
    }
    cs_option(d->cs, CS_OPT_DETAIL, CS_OPT_ON);
    reload_maps(d, 1);
    return d;
}

void pw_decoder_reset(struct pw_decoder *d)
{
    forget_functions(d);
    for (size_t i = 0; i < d->nfiles; i++) {
        free(d->files[i].path);
        free(d->files[i].starts);
    }
    free(d->files);
    d->files = NULL;
    d->nfiles = 0;
    reload_maps(d, 1);
}

void pw_decoder_free(struct pw_decoder *d)
{
    if (d == NULL)
        return;
    forget_functions(d);
    free_maps(d);
    for (size_t i = 0; i < d->nfiles; i++) {
        free(d->files[i].path);
        free(d->files[i].starts);
    }
    free(d->files);
    free(d->functions);
    free(d->ips);
    cs_close(&d->cs);
    free(d);
}

void pw_decoder_counts(const struct pw_decoder *d, uint64_t *functions, uint64_t *instructions, uint64_t *reloads,
                       uint64_t *decodes, uint64_t *untabled)
{
    *functions = d->decoded_functions;
    *instructions = d->decoded_insns;
    *reloads = d->reloads;
    *decodes = d->decodes;
    *untabled = d->untabled;
}
