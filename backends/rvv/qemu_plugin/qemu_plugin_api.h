/*
 * qemu_plugin_api.h - minimal declaration of the QEMU TCG plugin API,
 * written for mblast against QEMU 7.2 (plugin API version 1).
 *
 * Debian ships qemu-user without <qemu-plugin.h>, so this header declares
 * only the handful of types and functions that insn_count.c uses.  The
 * signatures and enum values follow the QEMU 7.2 API documentation
 * (docs/devel/tcg-plugins.rst, "API" section).  The functions are not
 * linked at build time: QEMU dlopen()s the plugin and the dynamic linker
 * resolves them against the symbols the qemu binary exports
 * (`nm -D /usr/bin/qemu-riscv64 | grep qemu_plugin`).
 *
 * Debian 12's qemu-user 7.2 reports info->version = {min 0, cur 1}.  A later
 * API version (2) removed qemu_plugin_register_vcpu_tb_exec_inline in favour
 * of *_per_vcpu variants and raised the minimum, so a plugin built from this
 * header loads only in QEMU releases whose [min, cur] range contains 1.
 */
#ifndef MBLAST_QEMU_PLUGIN_API_H
#define MBLAST_QEMU_PLUGIN_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))

/* The API version this plugin is written against. */
#define QEMU_PLUGIN_VERSION 1

/* Unique plugin ID handed to qemu_plugin_install. */
typedef uint64_t qemu_plugin_id_t;

/*
 * System information passed to qemu_plugin_install (only valid during
 * that call).  Layout as in QEMU 7.2.
 */
typedef struct qemu_info_t {
  const char* target_name; /* e.g. "riscv64" */
  struct {
    int min;
    int cur;
  } version;             /* supported plugin API range */
  bool system_emulation; /* false for linux-user */
  union {
    struct {
      int smp_vcpus;
      int max_vcpus;
    } system;
  };
} qemu_info_t;

/* Opaque handles valid only inside the translation callback. */
struct qemu_plugin_tb;
struct qemu_plugin_insn;

/* Inline operations (7.2 has exactly one). */
enum qemu_plugin_op {
  QEMU_PLUGIN_INLINE_ADD_U64,
};

/* How much of the CPU state a callback may read or write. */
enum qemu_plugin_cb_flags {
  QEMU_PLUGIN_CB_NO_REGS,
  QEMU_PLUGIN_CB_R_REGS,
  QEMU_PLUGIN_CB_RW_REGS,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void* userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void* userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb* tb);

/* Called on every guest system call, before it runs (7.2: arguments only). */
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num, uint64_t a1,
                                              uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                                              uint64_t a7, uint64_t a8);

/* Symbols the plugin must export. */
extern QEMU_PLUGIN_EXPORT int qemu_plugin_version;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc, char** argv);

/* Functions provided by QEMU. */
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);

void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb* tb, enum qemu_plugin_op op, void* ptr,
                                              uint64_t imm);

/* Per-instruction instrumentation, inserted before the instruction runs. */
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn* insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void* userdata);

void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn* insn, enum qemu_plugin_op op, void* ptr,
                                                uint64_t imm);

void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_cb_t cb);

void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void* userdata);

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);

struct qemu_plugin_insn* qemu_plugin_tb_get_insn(const struct qemu_plugin_tb* tb, size_t idx);

const void* qemu_plugin_insn_data(const struct qemu_plugin_insn* insn);

size_t qemu_plugin_insn_size(const struct qemu_plugin_insn* insn);

uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn* insn);

#ifdef __cplusplus
}
#endif

#endif /* MBLAST_QEMU_PLUGIN_API_H */
