#!/bin/sh
# test_insn_count.sh PLUGIN_SO
#
# End-to-end test of the mblast QEMU instruction-count plugin: builds a
# scalar and an RVV riscv64 program, runs them under qemu-riscv64 with the
# plugin and checks
#   - counts are identical across two runs (determinism),
#   - the scalar program executes no vector instructions,
#   - the RVV program does, including vector loads, stores and vsetvl*,
#   - the RVV program executes fewer instructions at vlen=512 than at 128.
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

CFLAGS="--target=riscv64-linux-gnu -O2 -fuse-ld=lld-19 --gcc-toolchain=/usr -static"
# shellcheck disable=SC2086
"$CLANG" $CFLAGS -march=rv64gc scalar.c -o scalar 2>build.log ||
    { cat build.log; fail "building scalar.c"; }
# shellcheck disable=SC2086
"$CLANG" $CFLAGS -march=rv64gcv rvv.c -o rvv 2>>build.log ||
    { cat build.log; fail "building rvv.c"; }

# run PROG VLEN -> prints the JSON line; empty env and fixed paths so the
# libc start-up path is identical between runs.
run() {
    rm -f out.json
    env -i "$QEMU" -cpu "rv64,v=true,vlen=$2,vext_spec=v1.0" \
        -plugin "$PLUGIN,out=$TMP/out.json" "./$1" \
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

echo "PASS"
exit 0
