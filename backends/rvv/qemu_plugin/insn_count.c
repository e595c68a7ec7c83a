/*
 * insn_count.c - mblast QEMU TCG plugin: deterministic dynamic instruction
 * counts (total and RVV 1.0 vector) for riscv64 programs under qemu-user,
 * for the whole process and for each marked region.
 *
 * At translation time every instruction of a translation block (TB) is
 * decoded and classified.  Counting (mode=tb, the default): the per-TB
 * totals are added to global counters by inline TCG ops each time the TB
 * starts.  Counting (mode=insn): every instruction adds its own counts
 * inline; slower, used to cross-check mode=tb.  No callbacks run during
 * execution except at the two region markers (region_markers.h).
 *
 * Regions: the instructions strictly between a begin marker and the next
 * end marker.  A marker's callback runs before the marker executes; in
 * mode=tb the counters then already include the whole TB, so the callback
 * subtracts what the TB has at and after the marker (computed at
 * translation).  Both modes give the same, exact counts for programs whose
 * TBs run to completion (no fault inside a region).
 *
 * Markers are honoured at one address each: the ones given as
 * begin_pc=ADDR,end_pc=ADDR (mblast-runner reads them from the program's
 * symbol table), else the first begin and the first end marker executed.
 * Markers elsewhere are counted as "foreign_markers" and otherwise ignored,
 * so code under test cannot forge regions with marker instructions of its
 * own; marker calls out of order are counted as "unmatched_markers".
 *
 * Work the count cannot see is reported, never hidden: every guest clone,
 * clone3, execve and execveat is counted (syscall callback) as
 * "threads_created", "processes_created" or "execs"; mblast-runner refuses
 * a measurement with any of them (a forked child's or a second thread's
 * instructions would not be in the regions).  An execve writes the report
 * at once, since the new image runs without this plugin.
 *
 * The report is authenticated: key=HEX (a secret mblast-runner makes per
 * worker) is copied into the report and scrubbed from QEMU's own argument
 * area at install, before any guest code runs.  The guest sees QEMU's real
 * command line in /proc/self/task/TID/cmdline (only /proc/self/cmdline is
 * emulated), so without the scrub it could forge a report with the key.
 *
 * Usage:
 *   qemu-riscv64 -cpu rv64,v=true,vlen=256,vext_spec=v1.0 \
 *       -plugin ./libmblast_insn_count.so,out=/tmp/c.json ./a.out
 *
 * Output (one line of JSON, written at exit to out=PATH, or to stderr):
 *   {"insns": N, "vector_insns": N, "vector_loads": N, "vector_stores": N,
 *    "vsetvl": N, "mode": "tb", "region_fields": [...], "regions": [[...]],
 *    "foreign_markers": N, "unmatched_markers": N, "regions_dropped": N,
 *    "marker_pcs": {"begin": "0x...", "end": "0x..."},
 *    "threads_created": N, "processes_created": N, "execs": N, "key": "HEX"}
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
#include "region_markers.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

enum { CNT_INSNS, CNT_VECTOR, CNT_VLOAD, CNT_VSTORE, CNT_VSETVL, CNT_N };

/*
 * Global counters, bumped by inline ops.  Single vCPU in linux-user for our
 * (single-threaded) programs, so the non-atomic inline add is exact.  Each
 * counter sits on its own cache line to keep the generated code simple.
 */
static struct {
  uint64_t v;
  char pad[56];
} counters[CNT_N] __attribute__((aligned(64)));

static char* out_path;   /* NULL -> stderr */
static pid_t owner_pid;  /* only the process that loaded us reports */
static int per_insn;     /* mode=insn: inline counts per instruction */
static char* report_key; /* key=HEX, echoed in the report; NULL: none given */
static uint64_t threads_created, processes_created, execs;

/* Linux system call numbers of riscv64 (asm-generic; there is no fork/vfork). */
#define NR_CLONE 220
#define NR_EXECVE 221
#define NR_EXECVEAT 281
#define NR_CLONE3 435
#define CLONE_THREAD_FLAG 0x00010000ull

/* RISC-V major opcodes (bits [6:0]) relevant to RVV 1.0. */
#define OPC_LOAD_FP 0x07u
#define OPC_STORE_FP 0x27u
#define OPC_OP_V 0x57u

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
static void classify(const uint8_t* bytes, size_t size, int* vec, int* vld, int* vst, int* vcfg) {
  *vec = *vld = *vst = *vcfg = 0;
  if (size != 4 || (bytes[0] & 0x3u) != 0x3u) {
    return;
  }
  uint32_t w = (uint32_t)bytes[0] | ((uint32_t)bytes[1] << 8) | ((uint32_t)bytes[2] << 16) | ((uint32_t)bytes[3] << 24);
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

/* 0 = not a marker, 1 = begin, 2 = end. */
static int marker_kind(const uint8_t* bytes, size_t size) {
  if (size != 4) {
    return 0;
  }
  uint32_t w = (uint32_t)bytes[0] | ((uint32_t)bytes[1] << 8) | ((uint32_t)bytes[2] << 16) | ((uint32_t)bytes[3] << 24);
  if (w == MBLAST_REGION_BEGIN_INSN) {
    return 1;
  }
  if (w == MBLAST_REGION_END_INSN) {
    return 2;
  }
  return 0;
}

/*
 * One translated marker.  `ahead` holds what the counters already include
 * but has not run yet when the marker's callback fires: in mode=tb the
 * marker and the rest of its TB; in mode=insn nothing (the marker's own
 * count is then added by the callback).  Allocated at translation and kept
 * for the life of the process (one per translation of a marker).
 */
struct marker_site {
  int kind;
  uint64_t pc;
  uint64_t ahead[CNT_N];
};

/* Regions, grown by doubling; beyond MAX_REGIONS they are only counted. */
#define MAX_REGIONS (1u << 20)
static uint64_t (*regions)[CNT_N];
static size_t n_regions, cap_regions;
static uint64_t regions_dropped;

static int region_open;
static uint64_t region_start[CNT_N];
static uint64_t begin_pc, end_pc; /* 0 until the first marker of each kind */
static uint64_t foreign_markers, unmatched_markers;

static void on_marker(unsigned int vcpu_index, void* userdata) {
  (void)vcpu_index;
  const struct marker_site* site = userdata;
  uint64_t* pc = site->kind == 1 ? &begin_pc : &end_pc;

  if (*pc == 0) {
    *pc = site->pc;
  }
  /* Instructions executed before this marker. */
  uint64_t before[CNT_N];
  for (int k = 0; k < CNT_N; k++) {
    before[k] = counters[k].v - site->ahead[k];
  }
  if (per_insn) {
    counters[CNT_INSNS].v += 1; /* the marker itself */
  }
  if (*pc != site->pc) {
    foreign_markers++;
    return;
  }
  if (site->kind == 1) {
    if (region_open) {
      unmatched_markers++; /* begin, begin: the first one is dropped */
    }
    region_open = 1;
    for (int k = 0; k < CNT_N; k++) {
      region_start[k] = before[k];
    }
    region_start[CNT_INSNS] += 1; /* the begin marker is not inside */
    return;
  }
  if (!region_open) {
    unmatched_markers++; /* end without begin */
    return;
  }
  region_open = 0;
  if (n_regions == cap_regions) {
    size_t cap = cap_regions ? 2 * cap_regions : 256;
    void* p = cap <= MAX_REGIONS ? realloc(regions, cap * sizeof *regions) : NULL;
    if (p == NULL) {
      regions_dropped++;
      return;
    }
    regions = p;
    cap_regions = cap;
  }
  for (int k = 0; k < CNT_N; k++) {
    regions[n_regions][k] = before[k] - region_start[k];
  }
  n_regions++;
}

static void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  size_t count = qemu_plugin_tb_n_insns(tb);
  uint64_t tb_total[CNT_N] = {0};
  struct {
    struct qemu_plugin_insn* insn;
    uint64_t n[CNT_N];
    int marker;
  } info[count > 0 ? count : 1];

  for (size_t i = 0; i < count; i++) {
    struct qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
    size_t size = qemu_plugin_insn_size(insn);
    const uint8_t* data = (const uint8_t*)qemu_plugin_insn_data(insn);
    int vec = 0, vld = 0, vst = 0, vcfg = 0;

    info[i].insn = insn;
    info[i].marker = 0;
    if (data != NULL) {
      classify(data, size, &vec, &vld, &vst, &vcfg);
      info[i].marker = marker_kind(data, size);
    }
    info[i].n[CNT_INSNS] = 1;
    info[i].n[CNT_VECTOR] = (uint64_t)vec;
    info[i].n[CNT_VLOAD] = (uint64_t)vld;
    info[i].n[CNT_VSTORE] = (uint64_t)vst;
    info[i].n[CNT_VSETVL] = (uint64_t)vcfg;
    for (int k = 0; k < CNT_N; k++) {
      tb_total[k] += info[i].n[k];
    }
  }

  if (!per_insn) {
    for (int k = 0; k < CNT_N; k++) {
      if (tb_total[k] != 0) {
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &counters[k].v, tb_total[k]);
      }
    }
  }

  /* Walk backwards so `suffix` is what this TB has from insn i on. */
  uint64_t suffix[CNT_N] = {0};
  for (size_t j = count; j-- > 0;) {
    for (int k = 0; k < CNT_N; k++) {
      suffix[k] += info[j].n[k];
    }
    if (info[j].marker != 0) {
      struct marker_site* site = calloc(1, sizeof *site);
      if (site == NULL) {
        continue; /* the region is then reported as unmatched */
      }
      site->kind = info[j].marker;
      site->pc = qemu_plugin_insn_vaddr(info[j].insn);
      if (!per_insn) {
        memcpy(site->ahead, suffix, sizeof suffix);
      }
      qemu_plugin_register_vcpu_insn_exec_cb(info[j].insn, on_marker, QEMU_PLUGIN_CB_NO_REGS, site);
    } else if (per_insn) {
      for (int k = 0; k < CNT_N; k++) {
        if (info[j].n[k] != 0) {
          qemu_plugin_register_vcpu_insn_exec_inline(info[j].insn, QEMU_PLUGIN_INLINE_ADD_U64, &counters[k].v,
                                                     info[j].n[k]);
        }
      }
    }
  }
}

/* Writes the JSON report to f. Returns 0 when every write succeeded. */
static int write_report(FILE* f) {
  fprintf(f,
          "{\"insns\": %" PRIu64 ", \"vector_insns\": %" PRIu64 ", \"vector_loads\": %" PRIu64
          ", \"vector_stores\": %" PRIu64 ", \"vsetvl\": %" PRIu64 ", \"mode\": \"%s\"",
          counters[CNT_INSNS].v, counters[CNT_VECTOR].v, counters[CNT_VLOAD].v, counters[CNT_VSTORE].v,
          counters[CNT_VSETVL].v, per_insn ? "insn" : "tb");
  fprintf(f, ", \"marker_pcs\": {\"begin\": \"0x%" PRIx64 "\", \"end\": \"0x%" PRIx64 "\"}", begin_pc, end_pc);
  fprintf(f, ", \"foreign_markers\": %" PRIu64 ", \"unmatched_markers\": %" PRIu64 ", \"regions_dropped\": %" PRIu64,
          foreign_markers, unmatched_markers + (uint64_t)region_open, regions_dropped);
  fprintf(f, ", \"threads_created\": %" PRIu64 ", \"processes_created\": %" PRIu64 ", \"execs\": %" PRIu64,
          threads_created, processes_created, execs);
  if (report_key != NULL) {
    fprintf(f, ", \"key\": \"%s\"", report_key);
  }
  fputs(
      ", \"region_fields\": [\"insns\", \"vector_insns\", "
      "\"vector_loads\", \"vector_stores\", \"vsetvl\"], \"regions\": [",
      f);
  for (size_t i = 0; i < n_regions; i++) {
    fprintf(f, "%s[%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 "]", i ? ", " : "", regions[i][0],
            regions[i][1], regions[i][2], regions[i][3], regions[i][4]);
  }
  fputs("]}\n", f);
  return ferror(f) ? -1 : 0;
}

static void write_report_file(void);

static void plugin_exit(qemu_plugin_id_t id, void* userdata) {
  (void)id;
  (void)userdata;
  /* A forked guest child runs this too; only the original process reports. */
  if (getpid() != owner_pid) {
    return;
  }
  write_report_file();
}

static void write_report_file(void) {
  /*
   * QEMU also runs atexit callbacks when it bails out before starting the
   * guest (e.g. a bad -cpu option).  Write nothing then, so that a missing
   * output file means "no valid measurement".
   */
  if (counters[CNT_INSNS].v == 0) {
    fprintf(stderr,
            "mblast_insn_count: no guest instructions executed; "
            "no counts written\n");
    return;
  }
  if (out_path == NULL) {
    (void)write_report(stderr);
    fflush(stderr);
    return;
  }

  /* Write PATH.tmp.PID completely, then rename over PATH. */
  size_t tmp_len = strlen(out_path) + 32;
  char* tmp = malloc(tmp_len);
  if (tmp == NULL) {
    return;
  }
  snprintf(tmp, tmp_len, "%s.tmp.%ld", out_path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  FILE* f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f != NULL) {
    int ok = write_report(f) == 0;
    ok = (fclose(f) == 0) && ok;
    if (ok && rename(tmp, out_path) == 0) {
      free(tmp);
      return;
    }
    unlink(tmp);
  } else if (fd >= 0) {
    close(fd);
    unlink(tmp);
  }
  free(tmp);
  fprintf(stderr, "mblast_insn_count: cannot write %s: %s\n", out_path, strerror(errno));
  (void)write_report(stderr);
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
                       uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8) {
  (void)id;
  (void)vcpu_index;
  (void)a2;
  (void)a3;
  (void)a4;
  (void)a5;
  (void)a6;
  (void)a7;
  (void)a8;
  switch (num) {
    case NR_CLONE:
      /* a1 is the flags word; without CLONE_THREAD it is a new process. */
      if (a1 & CLONE_THREAD_FLAG) {
        threads_created++;
      } else {
        processes_created++;
      }
      break;
    case NR_CLONE3:
      /* The flags are in guest memory, which 7.2's API cannot read: glibc
       * makes threads this way, so it is counted as a thread (either way
       * the runner refuses it). */
      threads_created++;
      break;
    case NR_EXECVE:
    case NR_EXECVEAT:
      execs++;
      /* If it succeeds, the new image runs without us: report now. */
      if (getpid() == owner_pid) {
        write_report_file();
      }
      break;
    default:
      break;
  }
}

/*
 * Overwrites every copy of `secret` in this process's original argument
 * area (what /proc/PID/cmdline and /proc/self/task/TID/cmdline show), found
 * through arg_start and arg_end in /proc/self/stat (fields 48 and 49).
 * Returns 0 when the area no longer holds it.
 */
static int scrub_from_cmdline(const char* secret) {
  char buf[4096];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return -1;
  }
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) {
    return -1;
  }
  buf[n] = '\0';
  /* Fields after the command name (which may hold spaces and ')'). */
  char* p = strrchr(buf, ')');
  if (p == NULL) {
    return -1;
  }
  unsigned long long arg_start = 0, arg_end = 0;
  int field = 2;
  for (char* tok = strtok(p + 1, " "); tok != NULL; tok = strtok(NULL, " ")) {
    field++;
    if (field == 48) {
      arg_start = strtoull(tok, NULL, 10);
    } else if (field == 49) {
      arg_end = strtoull(tok, NULL, 10);
      break;
    }
  }
  size_t len = strlen(secret);
  if (arg_start == 0 || arg_end <= arg_start || len == 0) {
    return -1;
  }
  char* area = (char*)(uintptr_t)arg_start;
  size_t size = (size_t)(arg_end - arg_start);
  for (size_t i = 0; i + len <= size; i++) {
    if (memcmp(area + i, secret, len) == 0) {
      memset(area + i, 'x', len);
    }
  }
  /* Check what the kernel now shows. */
  fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return -1;
  }
  char* shown = malloc(size + 1);
  if (shown == NULL) {
    close(fd);
    return -1;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, shown + got, size - got);
    if (r <= 0) {
      break;
    }
    got += (size_t)r;
  }
  close(fd);
  int found = 0;
  for (size_t i = 0; i + len <= got && !found; i++) {
    found = memcmp(shown + i, secret, len) == 0;
  }
  free(shown);
  return found ? -1 : 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc, char** argv) {
  if (info != NULL && info->target_name != NULL && strncmp(info->target_name, "riscv", 5) != 0) {
    fprintf(stderr, "mblast_insn_count: target '%s' is not RISC-V\n", info->target_name);
    return -1;
  }
  for (int i = 0; i < argc; i++) {
    const char* a = argv[i];
    if (strncmp(a, "out=", 4) == 0 && a[4] != '\0') {
      free(out_path);
      out_path = strdup(a + 4);
      if (out_path == NULL) {
        return -1;
      }
    } else if (strncmp(a, "begin_pc=", 9) == 0 || strncmp(a, "end_pc=", 7) == 0) {
      int is_begin = a[0] == 'b';
      const char* v = a + (is_begin ? 9 : 7);
      char* endp = NULL;
      errno = 0;
      unsigned long long pc = strtoull(v, &endp, 0);
      if (errno != 0 || endp == v || *endp != '\0' || pc == 0) {
        fprintf(stderr, "mblast_insn_count: bad address in '%s'\n", a);
        return -1;
      }
      *(is_begin ? &begin_pc : &end_pc) = (uint64_t)pc;
    } else if (strncmp(a, "key=", 4) == 0 && a[4] != '\0') {
      free(report_key);
      report_key = strdup(a + 4);
      if (report_key == NULL) {
        return -1;
      }
      /* QEMU's copy of the option string is not the argument area;
       * scrub this copy too, so that the key lives in one place. */
      memset(argv[i] + 4, 'x', strlen(argv[i] + 4));
    } else if (strcmp(a, "mode=tb") == 0) {
      per_insn = 0;
    } else if (strcmp(a, "mode=insn") == 0) {
      per_insn = 1;
    } else {
      fprintf(stderr,
              "mblast_insn_count: unknown argument '%s' "
              "(expected out=PATH, mode=tb|insn, begin_pc=ADDR, "
              "end_pc=ADDR, key=HEX)\n",
              a);
      return -1;
    }
  }
  if (report_key != NULL && scrub_from_cmdline(report_key) != 0) {
    fprintf(stderr,
            "mblast_insn_count: cannot hide key= from the "
            "guest (/proc/self/cmdline still shows it)\n");
    return -1;
  }
  owner_pid = getpid();
  qemu_plugin_register_vcpu_tb_trans_cb(id, vcpu_tb_trans);
  qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
  qemu_plugin_register_atexit_cb(id, plugin_exit, NULL);
  return 0;
}
