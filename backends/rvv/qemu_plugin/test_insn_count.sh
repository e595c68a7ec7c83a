#!/bin/sh
# test_insn_count.sh PLUGIN_SO
#
# End-to-end test of the mblast QEMU instruction-count plugin: builds a
# scalar and an RVV riscv64 program, runs them under qemu-riscv64 with the
# plugin and checks
#   - counts are identical across two runs (determinism),
#   - the scalar program executes no vector instructions,
#   - the RVV program does, including vector loads, stores and vsetvl*,
#   - the RVV program executes fewer instructions at vlen=512 than at 128;
#   - a guest cannot read the key= argument (scrubbed from QEMU's
#     argument area) and the report carries it; fork and pthread_create
#     are reported as processes_created and threads_created;
#   - regions (region_markers.h): exact counts for a hand-written assembly
#     loop, identical in mode=tb and mode=insn, markers at foreign addresses
#     ignored, an unmatched begin reported.
# Exit status: 0 pass, 1 fail, 77 skipped (tools missing).

set -u

if [ $# -ne 1 ]; then
    echo "usage: $0 PLUGIN_SO" >&2
    exit 2
fi

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

case "$1" in
    /*) PLUGIN=$1 ;;
    *)  PLUGIN=$(pwd)/$1 ;;
esac
[ -f "$PLUGIN" ] || fail "plugin not found: $PLUGIN"

CLANG=$(command -v clang-19) || skip "clang-19 not found"
QEMU=$(command -v qemu-riscv64) || skip "qemu-riscv64 not found"
command -v ld.lld-19 >/dev/null 2>&1 || skip "ld.lld-19 (lld-19) not found"
SYSROOT=/usr/riscv64-linux-gnu
[ -f "$SYSROOT/lib/libc.a" ] || skip "riscv64 cross libc not found ($SYSROOT/lib/libc.a)"
"$QEMU" -h 2>/dev/null | grep -q -- '-plugin' || skip "$QEMU has no -plugin support"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mblast_insn_count.XXXXXX") || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT INT TERM
cd "$TMP" || fail "cd $TMP"

# No printf: output buffering/isatty checks in libc would make the counts
# depend on what stdout is connected to.
cat > scalar.c <<'EOF'
#include <stddef.h>
#define N 20000
static float a[N], b[N], c[N];
volatile float sink;
int main(void)
{
    for (size_t i = 0; i < N; i++) { a[i] = (float)i; b[i] = 2.0f; }
    for (size_t i = 0; i < N; i++) c[i] = a[i] + b[i];
    sink = c[N - 1];
    return 0;
}
EOF

cat > rvv.c <<'EOF'
#include <riscv_vector.h>
#include <stddef.h>
#define N 20000
static float a[N], b[N], c[N];
volatile float sink;
static void fill(float *p, float v, size_t n)
{
    for (size_t vl; n > 0; n -= vl, p += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        __riscv_vse32_v_f32m8(p, __riscv_vfmv_v_f_f32m8(v, vl), vl);
    }
}
__attribute__((noinline)) static void add(float *c, const float *a,
                                          const float *b, size_t n)
{
    for (size_t vl; n > 0; n -= vl, a += vl, b += vl, c += vl) {
        vl = __riscv_vsetvl_e32m8(n);
        vfloat32m8_t va = __riscv_vle32_v_f32m8(a, vl);
        vfloat32m8_t vb = __riscv_vle32_v_f32m8(b, vl);
        __riscv_vse32_v_f32m8(c, __riscv_vfadd_vv_f32m8(va, vb, vl), vl);
    }
}
int main(void)
{
    fill(a, 1.0f, N);
    fill(b, 2.0f, N);
    add(c, a, b, N);
    sink = c[N - 1];
    return 0;
}
EOF

# counted(n, skip_end): the begin marker after two instructions (so it sits
# inside a TB), a 3-instruction loop run n times (one vsetvli), one branch,
# then the end marker unless skip_end.  Region = 3n + 1 instructions, n vector.
cat > regions.c <<'EOF'
void counted(long n, long skip_end);
void forged(void);
__asm__(
    ".text\n"
    ".globl counted\n"
    "counted:\n"
    "  addi t1, x0, 1\n"
    "  addi t1, t1, 1\n"
    "  slti x0, x0, 1745\n"
    "1:\n"
    "  vsetvli t0, a0, e32, m1, ta, ma\n"
    "  addi a0, a0, -1\n"
    "  bnez a0, 1b\n"
    "  bnez a1, 2f\n"
    "  slti x0, x0, 1746\n"
    "2:\n"
    "  addi t1, t1, 1\n"
    "  ret\n"
    ".globl forged\n"
    "forged:\n"
    "  slti x0, x0, 1746\n"
    "  slti x0, x0, 1745\n"
    "  ret\n");
int main(void)
{
    counted(1, 0);    /* region 4 */
    counted(1000, 0); /* region 3001 */
    forged();         /* 2 foreign markers, ignored */
    counted(5, 1);    /* begin without end ... */
    counted(7, 0);    /* ... begin again: 1 unmatched, region 22 */
    return 0;
}
EOF

CFLAGS="--target=riscv64-linux-gnu -O2 -fuse-ld=lld-19 --gcc-toolchain=/usr -static"
# shellcheck disable=SC2086
"$CLANG" $CFLAGS -march=rv64gc scalar.c -o scalar 2>build.log ||
    { cat build.log; fail "building scalar.c"; }
# shellcheck disable=SC2086
"$CLANG" $CFLAGS -march=rv64gcv rvv.c -o rvv 2>>build.log ||
    { cat build.log; fail "building rvv.c"; }
# shellcheck disable=SC2086
"$CLANG" $CFLAGS -march=rv64gcv regions.c -o regions 2>>build.log ||
    { cat build.log; fail "building regions.c"; }

# What a guest can see of QEMU's real command line (only /proc/self/cmdline is
# emulated): prints /proc/self/task/TID/cmdline, NULs as spaces.
cat > peek.c <<'EOF'
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(void)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/self/task/%d/cmdline", (int)getpid());
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 1;
    ssize_t n = read(fd, buf, sizeof buf);
    for (ssize_t i = 0; i < n; i++) if (buf[i] == 0) buf[i] = ' ';
    if (n > 0) fwrite(buf, 1, (size_t)n, stderr);
    return 0;
}
EOF
# A process (fork) and a thread (pthread_create), each waited for.
cat > spawn.c <<'EOF'
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
static void *nothing(void *p) { return p; }
int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        pthread_t t;
        if (pthread_create(&t, 0, nothing, 0) != 0) return 1;
        return pthread_join(t, 0);
    }
    pid_t p = fork();
    if (p == 0) _exit(0);
    return waitpid(p, 0, 0) == p ? 0 : 1;
}
EOF
"$CLANG" $CFLAGS -march=rv64gc peek.c -o peek 2>>build.log ||
    { cat build.log; fail "building peek.c"; }
"$CLANG" $CFLAGS -march=rv64gc spawn.c -o spawn -lpthread 2>>build.log ||
    { cat build.log; fail "building spawn.c"; }

# run PROG VLEN [MODE] -> prints the JSON line; empty env and fixed paths so
# the libc start-up path is identical between runs.
run() {
    rm -f out.json
    env -i "$QEMU" -cpu "rv64,v=true,vlen=$2,vext_spec=v1.0" \
        -plugin "$PLUGIN,out=$TMP/out.json,mode=${3:-tb}" "./$1" \
        </dev/null >/dev/null 2>qemu.err
    rc=$?
    if [ $rc -ne 0 ]; then
        cat qemu.err >&2
        fail "qemu-riscv64 ./$1 (vlen=$2) exited with status $rc"
    fi
    [ -s out.json ] || fail "plugin wrote no output for ./$1 (vlen=$2)"
    cat out.json
}

# field JSON KEY -> the integer value of KEY
field() {
    v=$(printf '%s\n' "$1" | sed -n "s/.*\"$2\": \([0-9][0-9]*\).*/\1/p")
    [ -n "$v" ] || fail "no \"$2\" in: $1"
    echo "$v"
}

S1=$(run scalar 128) || exit 1
S2=$(run scalar 128) || exit 1
R1=$(run rvv 128) || exit 1
R2=$(run rvv 128) || exit 1
R512=$(run rvv 512) || exit 1
echo "scalar vlen=128: $S1"
echo "rvv    vlen=128: $R1"
echo "rvv    vlen=512: $R512"

[ "$S1" = "$S2" ] || fail "scalar counts differ between runs: $S1 vs $S2"
[ "$R1" = "$R2" ] || fail "rvv counts differ between runs: $R1 vs $R2"

[ "$(field "$S1" insns)" -gt 0 ] || fail "scalar: zero instructions"
[ "$(field "$S1" vector_insns)" -eq 0 ] || fail "scalar: vector_insns != 0"

for k in vector_insns vector_loads vector_stores vsetvl; do
    [ "$(field "$R1" "$k")" -gt 0 ] || fail "rvv: $k is 0"
done
sum=$(( $(field "$R1" vector_loads) + $(field "$R1" vector_stores) + $(field "$R1" vsetvl) ))
[ "$(field "$R1" vector_insns)" -gt "$sum" ] ||
    fail "rvv: vector_insns not above loads+stores+vsetvl"

i128=$(field "$R1" insns)
i512=$(field "$R512" insns)
[ "$i512" -lt "$i128" ] || fail "rvv: insns at vlen=512 ($i512) not below vlen=128 ($i128)"

G1=$(run regions 128 tb) || exit 1
G2=$(run regions 128 insn) || exit 1
echo "regions (tb):   $G1"
[ "$G1" = "$(printf '%s\n' "$G2" | sed 's/"mode": "insn"/"mode": "tb"/')" ] ||
    fail "regions: mode=tb and mode=insn disagree: $G1 vs $G2"
case "$G1" in
    *'"regions": [[4, 1, 0, 0, 1], [3001, 1000, 0, 0, 1000], [22, 7, 0, 0, 7]]'*) ;;
    *) fail "regions: expected [[4,1,0,0,1],[3001,1000,0,0,1000],[22,7,0,0,7]] in $G1" ;;
esac
[ "$(field "$G1" foreign_markers)" -eq 2 ] || fail "regions: foreign_markers != 2"
[ "$(field "$G1" unmatched_markers)" -eq 1 ] || fail "regions: unmatched_markers != 1"
R3=$(run rvv 128 insn) || exit 1
[ "$(field "$R3" insns)" -eq "$i128" ] || fail "rvv: mode=insn total differs from mode=tb"

# key=: echoed in the report, and scrubbed from what the guest can read.
KEY=5ec7e75ec7e75ec7e7
rm -f out.json
env -i "$QEMU" -plugin "$PLUGIN,out=$TMP/out.json,key=$KEY" ./peek </dev/null >/dev/null 2>peek.err ||
    fail "qemu-riscv64 ./peek failed: $(cat peek.err)"
grep -q -e "-plugin" peek.err || fail "peek: the guest did not see QEMU's command line: $(cat peek.err)"
grep -q "$KEY" peek.err && fail "key: the guest read the key from /proc/self/task/TID/cmdline"
grep -q "\"key\": \"$KEY\"" out.json || fail "key: the report lacks it: $(cat out.json)"

# Processes and threads the guest makes are reported.
P=$(run spawn 128) || exit 1
[ "$(field "$P" processes_created)" -eq 1 ] || fail "spawn: processes_created != 1 in $P"
[ "$(field "$P" threads_created)" -eq 0 ] || fail "spawn: threads_created != 0 in $P"
rm -f out.json
env -i "$QEMU" -plugin "$PLUGIN,out=$TMP/out.json" ./spawn thread </dev/null >/dev/null 2>qemu.err ||
    fail "qemu-riscv64 ./spawn thread failed"
T=$(cat out.json)
[ "$(field "$T" threads_created)" -eq 1 ] || fail "spawn thread: threads_created != 1 in $T"
[ "$(field "$T" processes_created)" -eq 0 ] || fail "spawn thread: processes_created != 0 in $T"
if [ "$(field "$S1" processes_created)" -ne 0 ] || [ "$(field "$S1" threads_created)" -ne 0 ]; then
    fail "scalar: a single-threaded program reported threads or processes: $S1"
fi

echo "PASS"
exit 0
