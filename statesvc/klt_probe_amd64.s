//go:build !purego

#include "textflag.h"
#include "go_asm.h"

// The three passes of the KLT's batch lookup (see klt_probe_amd64.go and,
// for the layout they read, hashSeq and lookupGroup). Registers across
// each loop: R10 the scratch, R11 the key's index in the group.

// Offsets of the fields the passes read.
#define B_FAST kltBucket_fast
#define B_PLAIN kltBucket_plain
#define B_OWNER0 kltBucket_owner0
#define B_DEAD kltBucket_dead
#define B_DATA (kltBucket_seq+hashSeq_data)
#define B_DIROFF (kltBucket_seq+hashSeq_dirOff)
#define B_RBITS (kltBucket_seq+hashSeq_rbits)
#define S_B kltProbeScratch_b
#define S_REC kltProbeScratch_rec
#define S_J kltProbeScratch_j
#define S_LO kltProbeScratch_lo
#define S_N kltProbeScratch_n

// PAIR compares the two remainders at bit offset DX of the remainders
// (SI) with AX (CX: bits per remainder, R13: their mask), setting bits
// s and s+1 of DI for a match. Clobbers DX, R14.
#define PAIR(s) \
	MOVQ  DX, R14; \
	SHRQ  $3, R14; \
	MOVQ  (SI)(R14*1), R14; \
	ANDQ  $7, DX; \
	SHRXQ DX, R14, R14; \
	MOVQ  R14, DX; \
	ANDQ  R13, DX; \
	XORQ  AX, DX; \
	SUBQ  $1, DX; \
	SHRQ  $63, DX; \
	SHLQ  $(s), DX; \
	ORQ   DX, DI; \
	SHRXQ CX, R14, R14; \
	ANDQ  R13, R14; \
	XORQ  AX, R14; \
	SUBQ  $1, R14; \
	SHRQ  $63, R14; \
	SHLQ  $((s)+1), R14; \
	ORQ   R14, DI

// Pass 1: bucket, group and directory record of each key; the record is
// prefetched. A bucket that is not fast leaves the key to the general
// path, reading the empty kltZeroRecord in pass 2.
//
// func kltProbeDirs(buckets **kltBucket, mask uint64, xs *uint64, n int, sc *kltProbeScratch) (rare uint64)
TEXT ·kltProbeDirs(SB), NOSPLIT, $0-48
	MOVQ buckets+0(FP), SI
	MOVQ mask+8(FP), DI
	MOVQ xs+16(FP), R8
	MOVQ n+24(FP), R9
	MOVQ sc+32(FP), R10
	MOVQ $0, rare+40(FP)
	LEAQ ·kltNoBucket(SB), R14
	XORQ R11, R11

pass1:
	CMPQ    R11, R9
	JGE     done1
	MOVQ    (R8)(R11*8), AX
	MOVQ    AX, BX
	ANDQ    DI, BX
	MOVQ    (SI)(BX*8), DX
	TESTQ   DX, DX
	CMOVQEQ R14, DX
	MOVQ    DX, S_B(R10)(R11*8)
	CMPB    B_FAST(DX), $0
	JEQ     rare1
	SHRQ    $32, AX
	MOVBQZX B_RBITS(DX), CX
	SHRQ    CX, AX                // group g
	MOVQ    AX, BX
	MOVQ    $0x8AD8F2FC, R12
	IMULQ   R12, BX
	SHRQ    $37, BX               // g / 59 (hashSeqBlock)
	IMUL3Q  $59, BX, R12
	SUBQ    R12, AX               // g % 59
	SHLQ    $6, BX
	MOVLQZX B_DIROFF(DX), R12
	ADDQ    R12, BX
	ADDQ    B_DATA(DX), BX        // the record
	PREFETCHT0 (BX)
	MOVQ    BX, S_REC(R10)(R11*8)
	MOVQ    AX, S_J(R10)(R11*8)
	INCQ    R11
	JMP     pass1

rare1:
	MOVQ rare+40(FP), R12
	BTSQ R11, R12
	MOVQ R12, rare+40(FP)
	LEAQ ·kltZeroRecord(SB), BX
	MOVQ BX, S_REC(R10)(R11*8)
	MOVQ $0, S_J(R10)(R11*8)
	INCQ R11
	JMP  pass1

done1:
	RET

// Pass 2: the group's first element and size, from the record; the word
// of its first remainder is prefetched.
//
// func kltProbeRems(n int, sc *kltProbeScratch)
TEXT ·kltProbeRems(SB), NOSPLIT, $0-16
	MOVQ n+0(FP), R9
	MOVQ sc+8(FP), R10
	XORQ R11, R11

pass2:
	CMPQ    R11, R9
	JGE     done2
	MOVQ    S_REC(R10)(R11*8), DX
	MOVQ    S_J(R10)(R11*8), AX
	MOVLQZX (DX), R12
	MOVBQZX 4(DX)(AX*1), R13
	MOVBQZX 5(DX)(AX*1), BX
	SUBQ    R13, BX               // group size
	ADDQ    R13, R12              // first element
	MOVQ    R12, S_LO(R10)(R11*8)
	MOVQ    BX, S_N(R10)(R11*8)
	MOVQ    S_B(R10)(R11*8), DX
	MOVBQZX B_RBITS(DX), CX
	IMULQ   CX, R12
	SHRQ    $3, R12
	ADDQ    B_DATA(DX), R12
	PREFETCHT0 (R12)
	INCQ    R11
	JMP     pass2

done2:
	RET

// Pass 3: compare the key's remainder with the group's (the first 4
// without branches, then, for the one group in about 8 that is longer,
// the next 4) and write the ref: owner0+1 on a match, else 0.
//
// func kltProbeMatch(xs *uint64, n int, sc *kltProbeScratch, out *uint32) (rare uint64)
TEXT ·kltProbeMatch(SB), NOSPLIT, $0-40
	MOVQ xs+0(FP), R8
	MOVQ sc+16(FP), R10
	MOVQ $0, rare+32(FP)
	XORQ R11, R11

pass3:
	CMPQ    R11, n+8(FP)
	JGE     done3
	MOVQ    S_B(R10)(R11*8), DX
	MOVQ    S_LO(R10)(R11*8), R12
	MOVQ    S_N(R10)(R11*8), BX
	MOVBQZX B_RBITS(DX), CX
	MOVQ    B_DATA(DX), SI
	IMULQ   CX, R12               // bit offset of the first element
	MOVQ    $-1, R13
	SHLXQ   CX, R13, R13
	NOTQ    R13                   // remainder mask
	MOVQ    (R8)(R11*8), AX
	SHRQ    $32, AX
	ANDQ    R13, AX               // the key's remainder
	XORQ    DI, DI
	MOVQ    R12, DX
	PAIR(0)
	LEAQ    (R12)(CX*2), DX
	CMPQ    BX, $2
	CMOVQLS R12, DX
	PAIR(2)
	CMPQ    BX, $4
	JHI     long3

masked3:
	MOVQ    $1, R14
	SHLXQ   BX, R14, R14
	DECQ    R14
	ANDQ    R14, DI               // elements of the group only
	MOVQ    S_B(R10)(R11*8), DX
	MOVL    B_OWNER0(DX), R9
	INCL    R9
	XORL    R14, R14
	TESTQ   DI, DI
	CMOVLEQ R14, R9
	CMPB    B_PLAIN(DX), $0
	JEQ     dead3

store3:
	MOVQ out+24(FP), R14
	MOVL R9, (R14)(R11*4)
	INCQ R11
	JMP  pass3

	// A bucket with removed entries: a single match counts unless its
	// dead bit is set; several go to the general path.
dead3:
	TESTQ DI, DI
	JEQ   store3
	LEAQ  -1(DI), R14
	TESTQ DI, R14
	JNE   rare3
	BSFQ  DI, R14
	ADDQ  S_LO(R10)(R11*8), R14
	MOVQ  B_DEAD(DX), R13
	MOVQ  R14, R12
	SHRQ  $6, R12
	MOVQ  (R13)(R12*8), R12
	BTQ   R14, R12
	JCC   store3
	XORL  R9, R9
	JMP   store3

	// A group of 5 to 8 elements (about 1 lookup in 8): two more words.
long3:
	CMPQ    BX, $const_kltMatchWidth8
	JHI     rare3
	LEAQ    (R12)(CX*4), DX
	PAIR(4)
	LEAQ    (CX)(CX*2), DX
	LEAQ    (R12)(DX*2), DX
	CMPQ    BX, $6
	CMOVQLS R12, DX
	PAIR(6)
	JMP     masked3

rare3:
	MOVQ rare+32(FP), R14
	BTSQ R11, R14
	MOVQ R14, rare+32(FP)
	INCQ R11
	JMP  pass3

done3:
	RET

// kltHashKeys is keyHash (XXH64, seed 0) of each key shorter than 32
// bytes, the constants kept in registers: SI the slice headers, DI xs,
// R11 the index, DX the hash, BX and CX the bytes left, R8 scratch; R12
// xxPrime1, R13 xxPrime2, R10 xxPrime3, R14 xxPrime4.
//
// func kltHashKeys(keys *[]byte, n int, xs *uint64) (long uint64)
TEXT ·kltHashKeys(SB), NOSPLIT, $0-32
	MOVQ keys+0(FP), SI
	MOVQ n+8(FP), R9
	MOVQ xs+16(FP), DI
	MOVQ $0, long+24(FP)
	MOVQ $0x9E3779B185EBCA87, R12
	MOVQ $0xC2B2AE3D27D4EB4F, R13
	MOVQ $0x165667B19E3779F9, R10
	MOVQ $0x85EBCA77C2B2AE63, R14
	XORQ R11, R11

hashKey:
	CMPQ  R11, R9
	JGE   hashDone
	LEAQ  (R11)(R11*2), AX
	MOVQ  (SI)(AX*8), BX   // the key's bytes
	MOVQ  8(SI)(AX*8), CX  // its length
	CMPQ  CX, $32
	JAE   hashLong
	MOVQ  $0x27D4EB2F165667C5, DX
	ADDQ  CX, DX
	CMPQ  CX, $8
	JB    hashTail4

hashWord:
	MOVQ  (BX), R8
	IMULQ R13, R8
	ROLQ  $31, R8
	IMULQ R12, R8
	XORQ  R8, DX
	ROLQ  $27, DX
	IMULQ R12, DX
	ADDQ  R14, DX
	ADDQ  $8, BX
	SUBQ  $8, CX
	CMPQ  CX, $8
	JAE   hashWord

hashTail4:
	CMPQ    CX, $4
	JB      hashTail1
	MOVLQZX (BX), R8
	IMULQ   R12, R8
	XORQ    R8, DX
	ROLQ    $23, DX
	IMULQ   R13, DX
	ADDQ    R10, DX
	ADDQ    $4, BX
	SUBQ    $4, CX

hashTail1:
	TESTQ CX, CX
	JZ    hashAvalanche

hashByte:
	MOVBQZX (BX), R8
	MOVQ    $0x27D4EB2F165667C5, AX
	IMULQ   AX, R8
	XORQ    R8, DX
	ROLQ    $11, DX
	IMULQ   R12, DX
	INCQ    BX
	DECQ    CX
	JNZ     hashByte

hashAvalanche:
	MOVQ  DX, R8
	SHRQ  $33, R8
	XORQ  R8, DX
	IMULQ R13, DX
	MOVQ  DX, R8
	SHRQ  $29, R8
	XORQ  R8, DX
	IMULQ R10, DX
	MOVQ  DX, R8
	SHRQ  $32, R8
	XORQ  R8, DX
	MOVQ  DX, (DI)(R11*8)
	INCQ  R11
	JMP   hashKey

hashLong:
	MOVQ long+24(FP), R8
	BTSQ R11, R8
	MOVQ R8, long+24(FP)
	INCQ R11
	JMP  hashKey

hashDone:
	RET
