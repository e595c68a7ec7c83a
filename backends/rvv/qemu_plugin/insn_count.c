/*
 * insn_count.c - mblast QEMU TCG plugin: deterministic dynamic instruction
 * counts (total and RVV 1.0 vector) for riscv64 programs under qemu-user.
 *
 * At translation time every instruction of a translation block (TB) is
 * decoded and classified; the per-TB totals are then added to global
 * counters with inline TCG ops each time the TB executes.  No callbacks run
 * during execution, so the counts depend only on the executed path.
 *
 * Usage:
 *   qemu-riscv64 -cpu rv64,v=true,vlen=256,vext_spec=v1.0 \
 *       -plugin ./libmblast_insn_count.so,out=/tmp/c.json ./a.out
 *
 * Output (one line, written at exit to out=PATH, or to stderr):
 *   {"insns": N, "vector_insns": N, "vector_loads": N,
 *    "vector_stores": N, "vsetvl": N}
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qemu_plugin_api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

enum {
    CNT_INSNS,
    CNT_VECTOR,
    CNT_VLOAD,
    CNT_VSTORE,
    CNT_VSETVL,
    CNT_N
};

/*
 * Global counters, bumped by inline ops.  Single vCPU in linux-user for our
 * (single-threaded) programs, so the non-atomic inline add is exact.  Each
 * counter sits on its own cache line to keep the generated code simple.
 */
static struct {
    uint64_t v;
    char pad[56];
} counters[CNT_N] __attribute__((aligned(64)));

static char *out_path;  /* NULL -> stderr */
static pid_t owner_pid; /* only the process that loaded us reports */

/* RISC-V major opcodes (bits [6:0]) relevant to RVV 1.0. */
#define OPC_LOAD_FP  0x07u
#define OPC_STORE_FP 0x27u
#define OPC_OP_V     0x57u

/*
 * Classify one instruction.  Sets *vec, *vld, *vst, *vcfg to 0/1.
 * RVV 1.0 encodings:
 *   - OP-V (0x57): all vector arithmetic; funct3 == 7 (OPCFG) is
 *     vsetvli / vsetivli / vsetvl.
 *   - LOAD-FP (0x07) / STORE-FP (0x27) with width funct3 in {0,5,6,7}
 *     (8/16/32/64-bit elements, plus whole-register and mask ld/st) are
 *     vector loads/stores; funct3 1,2,3,4 are scalar FLH/FLW/FLD/FLQ and
 *     the matching stores.
 * Compressed (16-bit) instructions are never vector.
 */
static void classify(const uint8_t *bytes, size_t size,
                     int *vec, int *vld, int *vst, int *vcfg)
{
    *vec = *vld = *vst = *vcfg = 0;
    if (size != 4 || (bytes[0] & 0x3u) != 0x3u) {
        return;
    }
    uint32_t w = (uint32_t)bytes[0] | ((uint32_t)bytes[1] << 8) |
                 ((uint32_t)bytes[2] << 16) | ((uint32_t)bytes[3] << 24);
    uint32_t opcode = w & 0x7fu;
    uint32_t funct3 = (w >> 12) & 0x7u;

    switch (opcode) {
    case OPC_OP_V:
        *vec = 1;
        *vcfg = (funct3 == 7u);
        break;
    case OPC_LOAD_FP:
    case OPC_STORE_FP:
        if (funct3 == 0u || funct3 >= 5u) {
            *vec = 1;
            if (opcode == OPC_LOAD_FP) {
                *vld = 1;
            } else {
                *vst = 1;
            }
        }
        break;
    default:
        break;
    }
}

static void add_inline(struct qemu_plugin_tb *tb, int which, uint64_t n)
{
    if (n != 0) {
        qemu_plugin_register_vcpu_tb_exec_inline(
            tb, QEMU_PLUGIN_INLINE_ADD_U64, &counters[which].v, n);
    }
}

static void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    uint64_t n[CNT_N] = {0};
    size_t count = qemu_plugin_tb_n_insns(tb);

    for (size_t i = 0; i < count; i++) {
        const struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t size = qemu_plugin_insn_size(insn);
        const uint8_t *data = (const uint8_t *)qemu_plugin_insn_data(insn);
        int vec = 0, vld = 0, vst = 0, vcfg = 0;

        if (data != NULL) {
            classify(data, size, &vec, &vld, &vst, &vcfg);
        }
        n[CNT_INSNS] += 1;
        n[CNT_VECTOR] += (uint64_t)vec;
        n[CNT_VLOAD] += (uint64_t)vld;
        n[CNT_VSTORE] += (uint64_t)vst;
        n[CNT_VSETVL] += (uint64_t)vcfg;
    }
    for (int k = 0; k < CNT_N; k++) {
        add_inline(tb, k, n[k]);
    }
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

static void plugin_exit(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    /* A forked guest child runs this too; only the original process reports. */
    if (getpid() != owner_pid) {
        return;
    }
    /*
     * QEMU also runs atexit callbacks when it bails out before starting the
     * guest (e.g. a bad -cpu option).  Write nothing then, so that a missing
     * output file means "no valid measurement".
     */
    if (counters[CNT_INSNS].v == 0) {
        fprintf(stderr, "mblast_insn_count: no guest instructions executed; "
                        "no counts written\n");
        return;
    }

    char line[256];
    int len = snprintf(line, sizeof line,
                       "{\"insns\": %" PRIu64 ", \"vector_insns\": %" PRIu64
                       ", \"vector_loads\": %" PRIu64
                       ", \"vector_stores\": %" PRIu64
                       ", \"vsetvl\": %" PRIu64 "}\n",
                       counters[CNT_INSNS].v, counters[CNT_VECTOR].v,
                       counters[CNT_VLOAD].v, counters[CNT_VSTORE].v,
                       counters[CNT_VSETVL].v);
    if (len < 0 || (size_t)len >= sizeof line) {
        return;
    }

    if (out_path == NULL) {
        (void)write_all(STDERR_FILENO, line, (size_t)len);
        return;
    }

    /* Write PATH.tmp.PID completely, then rename over PATH. */
    size_t tmp_len = strlen(out_path) + 32;
    char *tmp = malloc(tmp_len);
    if (tmp == NULL) {
        return;
    }
    snprintf(tmp, tmp_len, "%s.tmp.%ld", out_path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        int ok = write_all(fd, line, (size_t)len) == 0;
        ok = (close(fd) == 0) && ok;
        if (ok && rename(tmp, out_path) == 0) {
            free(tmp);
            return;
        }
        unlink(tmp);
    }
    free(tmp);
    /* Fallback: write the target directly. */
    fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)write_all(fd, line, (size_t)len);
        close(fd);
    } else {
        fprintf(stderr, "mblast_insn_count: cannot write %s: %s\n", out_path,
                strerror(errno));
        (void)write_all(STDERR_FILENO, line, (size_t)len);
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
                                           const qemu_info_t *info,
                                           int argc, char **argv)
{
    if (info != NULL && info->target_name != NULL &&
        strncmp(info->target_name, "riscv", 5) != 0) {
        fprintf(stderr, "mblast_insn_count: target '%s' is not RISC-V\n",
                info->target_name);
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "out=", 4) == 0 && a[4] != '\0') {
            free(out_path);
            out_path = strdup(a + 4);
            if (out_path == NULL) {
                return -1;
            }
        } else {
            fprintf(stderr,
                    "mblast_insn_count: unknown argument '%s' "
                    "(expected out=PATH)\n", a);
            return -1;
        }
    }
    owner_pid = getpid();
    qemu_plugin_register_vcpu_tb_trans_cb(id, vcpu_tb_trans);
    qemu_plugin_register_atexit_cb(id, plugin_exit, NULL);
    return 0;
}
