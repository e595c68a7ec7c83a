/*
 * region_markers.h - the two instructions that open and close a counted region.
 *
 * Shared by the QEMU plugin (which recognises them) and the rvv worker's Device (which
 * executes them around each timed candidate call).  Both are RISC-V HINTs: SLTI with rd = x0
 * is in the HINT space the unprivileged ISA "designates for custom use" (RISC-V ISA manual,
 * "HINT Instructions" table), so every RV64 core executes them as no-ops, and no compiler or
 * standard extension emits them.  SLTI has no compressed form, so the 32-bit encodings below
 * are what the assembler produces for MBLAST_REGION_*_ASM.
 *
 *   begin  slti x0, x0, 1745   = 0x6d102013
 *   end    slti x0, x0, 1746   = 0x6d202013
 */
#ifndef MBLAST_REGION_MARKERS_H
#define MBLAST_REGION_MARKERS_H

#define MBLAST_REGION_BEGIN_INSN 0x6d102013u
#define MBLAST_REGION_END_INSN 0x6d202013u

#define MBLAST_REGION_BEGIN_ASM "slti x0, x0, 1745"
#define MBLAST_REGION_END_ASM "slti x0, x0, 1746"

#endif /* MBLAST_REGION_MARKERS_H */
