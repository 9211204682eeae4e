// Shared by the amd64 dot-product kernels (dot_*_amd64.s): AVX2 + FMA +
// F16C. Go operand order: sources first, the destination last, e.g.
// VPMADDUBSW Ysigned, Yunsigned, Ydst. The kernels run a row loop: R12
// walks the weight rows, R13 counts them, and dst[r] gets row r's dot (the
// x4 kernels instead take one weight row against four activation rows).

// Y15 = 0x0F bytes, Y14 = 1 words.
#define CONSTS \
	MOVQ $0x0F0F0F0F0F0F0F0F, AX; \
	VMOVQ AX, X15; \
	VPBROADCASTQ X15, Y15; \
	MOVQ $0x0001000100010001, AX; \
	VMOVQ AX, X14; \
	VPBROADCASTQ X14, Y14

// Weights stream from DRAM: prefetch ~2 KB ahead (measured best on Zen 3;
// the hardware prefetcher alone leaves the loop waiting on memory).
#define PF1 PREFETCHT0 2048(SI)
#define PF2 PF1; PREFETCHT0 2112(SI)
#define PF3 PF2; PREFETCHT0 2176(SI)
#define PF4 PF3; PREFETCHT0 2240(SI)

// Sum the 8 floats of Y into the low float of X (X is Y's low half).
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS T, X, X; \
	VHADDPS X, X, X; \
	VHADDPS X, X, X
