#!/bin/bash
# Runs the .metal kernels on an NVIDIA GPU (the device machine: nvcc,
# PyTorch, compute-sanitizer, ncu; no network). Needs the traces and
# kernels.cu that `go test ./metal/internal/gpu -run TestExport -args -out DIR`
# writes (DIR defaults to metal/internal/gpu/out). Results go to $OUT (or ./results).
#
#   run.sh build            the builds below
#   run.sh check            every recorded dispatch against the emulator,
#                           racecheck on them, stale traces refused
#   run.sh sanitize         compute-sanitizer memcheck and synccheck on check,
#                           and racecheck/synccheck on the planted bugs
#   run.sh attention        70B decode attention: .metal kernels and PyTorch SDPA
#   run.sh decode           one decode step of a Llama-3.2-1B-shaped model:
#                           per dispatch, and as wall time per token (the
#                           dispatches back to back, and as one CUDA graph)
#   run.sh decode-compare   the decode step of this tree's kernels against
#                           another's (OLD=dir of its TestExportDecode), Q4_K
#                           and Q4_0 weights, wall time per token, the grid
#                           and fusion variants, the mat-vec check and ncu's
#                           DRAM bytes and throughput of the new step (traces
#                           from `go test ./metal/internal/gpu -run
#                           TestExportDecode -args -decode-out DIR`)
#   run.sh ncu              profiler bytes and DRAM throughput of attention
#   run.sh variants         attention with other threadgroup shapes
#   run.sh ncu-decode       profiler bytes per dispatch of the decode step
#   run.sh proto            the tensor-core attention prototype (proto/)
#   run.sh ncu-proto        where its time goes
#   run.sh compare          .metal q4, the prototype and PyTorch on one machine
#   run.sh mma              decode attention with the matrix units: check,
#                           sanitizers, 70B layer timings against PyTorch
#   run.sh moe              the MoE and MXFP4 kernels: check, sanitizers,
#                           timings and ncu bytes of the MoE traces (written
#                           by `go test ./metal/internal/gpu -run TestExportMoE
#                           -args -moe-out DIR`)
#   run.sh prefill          pp512 of the 1B shape (Q4_K, Q4_0): mul_mm with
#                           simdgroup matrices against the kernels.cu in
#                           $OLD (default $DIR/old: the per-thread mul_mm of
#                           testdata/mul_mm_perthread.metal),
#                           alternating (and $VAR's kernels.cu, if set);
#                           the check of mul_mm and of the
#                           simdgroup_matrix test kernels ($DIR/matrix) and
#                           racecheck on both (traces: `go test
#                           ./metal/internal/gpu -run 'TestExport$|TestExportMatrix'
#                           -args -out DIR`)
#   run.sh prefill-variants the shim's simdgroup_matrix options on pp512
#   run.sh all              all of it
#
# Builds (build/): generic (every kernel, function constants set at launch;
# Metal's "active lanes" simd collectives), attn (decode attention for
# D 128, gs 32, 8 heads a threadgroup, function constants compiled in, as
# Metal specialises a pipeline), attn-fullwarp (the same, collectives
# assuming full warps, -DMSL_FULL_WARP), attn-hg4/2/1 (4, 2, 1 heads a
# threadgroup), decode1b (every kernel, the 1B model's constants compiled
# in), bugs (metal/internal/emulator/testdata/bugs.metal). Timing builds use
# --use_fast_math, as Metal compiles with fast math.
set -u
cd "$(dirname "$0")"
DIR=${DIR:-out}
OUT=${OUT:-results}
mkdir -p build "$OUT"
ARCH=${ARCH:-sm_90}
NVCC="nvcc -std=c++17 -O3 -arch=$ARCH -lineinfo -I include -I $DIR -Xcompiler -Wno-unused-function"
ATTN="-DMSL_ONLY -DMSL_K_kernel_attn_decode_q4 -DMSL_K_kernel_attn_decode_q8 -DMSL_K_kernel_attn_decode_f16 -DMSL_K_kernel_attn_merge_f32"
for kv in q4 q8 f16; do ATTN="$ATTN -DMSL_K_kernel_attn_decode_mma_$kv -DMSL_K_kernel_attn_decode_mmah_$kv"; done
FC70="-DMSL_FC_100=128 -DMSL_FC_101=32 -DMSL_FC_102=8 -DMSL_FC_103=false -DMSL_FC_104=false -DMSL_FC_105=false"
FC1B="-DMSL_FC_100=64 -DMSL_FC_101=32 -DMSL_FC_102=4 -DMSL_FC_103=false -DMSL_FC_104=false -DMSL_FC_105=false -DMSL_FC_600=1"

build() {
  local t0=$SECONDS
  $NVCC harness.cu -o build/generic > "$OUT/build-generic.log" 2>&1 &
  $NVCC --use_fast_math $ATTN $FC70 harness.cu -o build/attn > "$OUT/build-attn.log" 2>&1 &
  $NVCC --use_fast_math --resource-usage $ATTN $FC70 -DMSL_FULL_WARP harness.cu -o build/attn-fullwarp > "$OUT/build-attn-fullwarp.log" 2>&1 &
  $NVCC --use_fast_math $FC1B harness.cu -o build/decode1b > "$OUT/build-decode1b.log" 2>&1 &
  for hg in 4 2 1; do
    $NVCC --use_fast_math --resource-usage $ATTN ${FC70/MSL_FC_102=8/MSL_FC_102=$hg} -DMSL_FULL_WARP harness.cu -o build/attn-hg$hg > "$OUT/build-attn-hg$hg.log" 2>&1 &
  done
  local rc=0
  ${NVCC/-I $DIR/-I $DIR/bugs} harness.cu -o build/bugs > "$OUT/build-bugs.log" 2>&1 &
  for j in $(jobs -p); do wait "$j" || rc=1; done
  for b in generic attn attn-fullwarp decode1b attn-hg4 attn-hg2 attn-hg1 bugs; do
    if [ -x build/$b ]; then echo "build $b: ok"; else echo "build $b: FAILED"; head -40 "$OUT/build-$b.log"; fi
  done
  echo "builds took $((SECONDS - t0)) s"
  return $rc
}

# check: every recorded dispatch against the emulator, then the same under
# compute-sanitizer's racecheck (a missing barrier can leave the output
# right on one GPU run and still race), and the stale traces, which the
# harness must refuse (another trace format; argument blocks of another
# size than the kernel's struct).
check() {
  local rc=0 r
  CHECK_KERNELS= build/generic check "$DIR/check.trace" 2>&1 | tee "$OUT/check.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  for s in stale-format stale-args; do
    build/generic time "$DIR/$s.trace" 1 > "$OUT/$s.txt" 2>&1
    r=$?
    if [ $r = 3 ] && grep -q "refused" "$OUT/$s.txt"; then
      echo "$s: refused: $(grep -o 'refused: .*' "$OUT/$s.txt" | head -1 | cut -c10-200)"
    else
      echo "$s: NOT refused (rc $r)"; head -5 "$OUT/$s.txt"; rc=1
    fi
  done
  CHECK_KERNELS=${SAN_KERNELS:-} timeout ${SAN_TIMEOUT:-240} compute-sanitizer --tool racecheck --print-limit 20 build/generic check "$DIR/check.trace" > "$OUT/sanitize-racecheck.txt" 2>&1
  r=$?
  echo "racecheck (rc $r): $(grep -E 'RACECHECK SUMMARY' "$OUT/sanitize-racecheck.txt") $(grep -E '^check:' "$OUT/sanitize-racecheck.txt")"
  grep -E "Race reported" "$OUT/sanitize-racecheck.txt" | sort | uniq -c | head -10
  grep -q "RACECHECK SUMMARY: 0 hazards" "$OUT/sanitize-racecheck.txt" && [ $r = 0 ] || rc=1
  return $rc
}

# sanitize: memcheck and synccheck on check (racecheck is part of check),
# and the planted bugs.
sanitize() {
  for tool in memcheck synccheck; do
    timeout ${SAN_TIMEOUT:-240} compute-sanitizer --tool $tool --print-limit 20 build/generic check "$DIR/check.trace" > "$OUT/sanitize-$tool.txt" 2>&1
    echo "== $tool (rc $?)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error|Race|Barrier|check:" "$OUT/sanitize-$tool.txt" | sort | uniq -c | head -20
  done
  # The planted bugs of metal/internal/emulator/testdata/bugs.metal must be flagged,
  # at their .metal lines.
  for tool in racecheck synccheck; do
    timeout 120 compute-sanitizer --tool $tool --print-limit 10 build/bugs time "$DIR/bugs/bugs.trace" 1 > "$OUT/sanitize-bugs-$tool.txt" 2>&1
    echo "== planted bugs, $tool (rc $?)"; grep -E "SUMMARY|bugs.metal:[0-9]+" "$OUT/sanitize-bugs-$tool.txt" | sed 's/^=* *//' | sort | uniq -c | head -12
  done
}

attention() {
  for kv in q4 q8 f16; do
    for n in 8k 32k 128k; do
      for b in attn attn-fullwarp; do
        echo "== $b $kv $n"
        build/$b time "$DIR/attn70b-$kv-$n.trace" ${ITERS:-50} --flush | grep -E "dispatch|total|bandwidth"
      done
    done
  done 2>&1 | tee "$OUT/attention.txt"
  python3 sdpa.py ${ITERS:-50} 2>&1 | tee "$OUT/sdpa.txt"
}

decode() {
  for kv in q4 f16; do
    build/decode1b time "$DIR/decode-llama3.2-1b-$kv-4k.trace" ${ITERS:-20} --flush 2>&1 | tee "$OUT/decode-$kv.txt"
    build/decode1b time "$DIR/decode-llama3.2-1b-$kv-4k.trace" ${ITERS:-20} --wall 2>&1 | tee -a "$OUT/decode-$kv.txt"
  done
  build/decode1b time "$DIR/decode-llama3.2-1b-q4-4k.trace" ${ITERS:-20} --flush --per-grid > "$OUT/decode-q4-per-grid.txt" 2>&1
}

# trace_kernels TRACE...: -DMSL_K_ flags for the kernels these traces
# dispatch, for a build of those only.
trace_kernels() {
  cat "$@" | awk '/^dispatch/ {print "-DMSL_K_" $2}' | sort -u | tr '\n' ' '
}

# decode_compare: the 1B decode step at depth 4096 (q4 KV) with Q4_K and
# Q4_0 weights, the kernels of $DIR against those of $OLD (each built with
# its own kernels.cu and only the kernels its traces use), wall time per
# token alternating old and new; the new step's variants (unfused, other
# mat-vec grids); the mat-vec check against the emulator; ncu's DRAM bytes
# per dispatch and throughput of the new Q4_K step.
decode_compare() {
  local t0=$SECONDS OLD=${OLD:?OLD: the TestExportDecode directory of the other tree}
  local NV="nvcc -std=c++17 -O3 -arch=$ARCH -lineinfo -I include -Xcompiler -Wno-unused-function"
  $NV --use_fast_math -DMSL_ONLY $(trace_kernels "$DIR"/decode-*.trace) $FC1B -I "$DIR" harness.cu -o build/decode-new > build/decode-new.log 2>&1 &
  $NV --use_fast_math -DMSL_ONLY $(trace_kernels "$OLD"/decode-*.trace) $FC1B -I "$OLD" harness.cu -o build/decode-old > build/decode-old.log 2>&1 &
  # The mat-vecs reach every collective with the whole simdgroup (no early
  # return): MSL_FULL_WARP, so that a lane still in a divergent branch is
  # waited for rather than left out of __activemask()'s collective, as
  # Metal's simdgroups reconverge after a branch. mvcheck-active keeps the
  # active-lanes shim. (The SwiGLU-fused mat-vecs failed this check with
  # both builds while their emulator twin passed, and were removed.)
  $NV -DMSL_ONLY -DMSL_FULL_WARP $(trace_kernels "$DIR"/check-mv.trace) -I "$DIR" harness.cu -o build/mvcheck > build/mvcheck.log 2>&1 &
  $NV -DMSL_ONLY $(trace_kernels "$DIR"/check-mv.trace) -I "$DIR" harness.cu -o build/mvcheck-active > build/mvcheck-active.log 2>&1 &
  wait
  for b in decode-new decode-old mvcheck mvcheck-active; do [ -x build/$b ] || { echo "build $b: FAILED"; head -30 build/$b.log; }; done
  echo "builds took $((SECONDS - t0)) s"
  for b in mvcheck mvcheck-active; do
    build/$b check "$DIR/check-mv.trace" > "$OUT/check-mv-$b.txt" 2>&1
    echo "== $b"; grep -E "^dispatch|^check:" "$OUT/check-mv-$b.txt" | head -24; awk '$3 > 0' "$OUT/check-mv-$b.txt" | grep ^kernel
  done
  local i
  for i in 1 2; do
    for m in q4 q4_0-q4; do
      for b in old new; do
        echo "== $b $m: $(build/decode-$b time "$([ $b = old ] && echo "$OLD" || echo "$DIR")/decode-llama3.2-1b-$m-4k.trace" ${ITERS:-30} --wall | grep graph)"
      done
    done
  done 2>&1 | tee "$OUT/decode-compare.txt"
  for v in q4-4k q4-4k-fused q4-4k-ropekv q4_0-q4-4k q4_0-q4-4k-fused q4_0-q4-4k-ropekv q4-4k-pc4 q4-4k-pc8 q4-4k-pc32 q4-4k-pc64 f16-4k; do
    echo "== new $v: $(build/decode-new time "$DIR/decode-llama3.2-1b-$v.trace" ${ITERS:-30} --wall | tr '\n' ' ')"
  done 2>&1 | tee -a "$OUT/decode-compare.txt"
  # Per kernel (events between dispatches, L2 flushed): the new step, by
  # grid too, and the old.
  build/decode-new time "$DIR/decode-llama3.2-1b-q4-4k.trace" ${ITERS:-20} --flush --per-grid > "$OUT/decode-new-q4-per-kernel.txt" 2>&1
  build/decode-old time "$OLD/decode-llama3.2-1b-q4-4k.trace" ${ITERS:-20} --flush >> "$OUT/decode-new-q4-per-kernel.txt" 2>&1
  head -24 "$OUT/decode-new-q4-per-kernel.txt"
  BIN=build/decode-new ncu_decode
  echo "decode-compare took $((SECONDS - t0)) s"
}

# mma: decode attention with the matrix units, in one call: the builds it
# needs, check (with racecheck and the stale traces), memcheck and
# synccheck on the attention dispatches of check, then one
# Llama-3.1-70B layer (64/8 heads, D 128) at 8K, 32K and 128K: the scalar
# kernel at the shape the encoder gave it (128K), the matrix kernels with
# float and half operands at the encoder's grid for the H200's 132 SMs, and
# PyTorch's f16 SDPA (GQA) in the same run. SAN_KERNELS=attn limits the
# sanitizers (check's racecheck too) to the kernels whose names contain it.
mma() {
  local t0=$SECONDS n kv v
  $NVCC harness.cu -o build/generic > "$OUT/build-generic.log" 2>&1 &
  $NVCC --use_fast_math $ATTN $FC70 harness.cu -o build/attn > "$OUT/build-attn.log" 2>&1 &
  wait
  for b in generic attn; do [ -x build/$b ] || { echo "build $b: FAILED"; head -40 "$OUT/build-$b.log"; return 1; }; done
  echo "builds took $((SECONDS - t0)) s"
  check
  for tool in memcheck synccheck; do
    CHECK_KERNELS=${SAN_KERNELS:-} timeout ${SAN_TIMEOUT:-240} compute-sanitizer --tool $tool --print-limit 20 build/generic check "$DIR/check.trace" > "$OUT/sanitize-$tool.txt" 2>&1
    echo "== $tool (rc $?): $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-$tool.txt") $(grep -E '^check:' "$OUT/sanitize-$tool.txt")"
  done
  echo "checks took $((SECONDS - t0)) s"
  for n in 8k 32k 128k; do
    [ $n = 128k ] && echo "== $n scalar q4 (8 heads, 32 splits): $(build/attn time "$DIR/attn70b-q4-128k-hg8-s32.trace" ${ITERS:-50} --flush | grep -E '^total')"
    for kv in q4 q8 f16; do
      for v in mma mmah; do
        echo "== $n $v $kv: $(build/attn time "$DIR/attn70b-$v-$kv-$n-h200.trace" ${ITERS:-50} --flush | grep -E '^total|dispatch 0|bandwidth' | tr -s ' ' | tr '\n' ' ')"
      done
    done
  done 2>&1 | tee "$OUT/mma.txt"
  python3 sdpa.py ${ITERS:-50} 2>&1 | grep -E "^torch|enable_gqa" | tee -a "$OUT/mma.txt"
  echo "mma took $((SECONDS - t0)) s"
}

# variants: the same kernels at 128K with other threadgroup shapes (hg
# query heads a threadgroup, splits per kv head); registers per thread from
# ptxas.
variants() {
  for kv in q4 f16; do
    for v in hg8-s32 hg8-s64 hg8-s128 hg4-s32 hg4-s64 hg2-s32; do
      b=attn-fullwarp; case $v in hg4*) b=attn-hg4 ;; hg2*) b=attn-hg2 ;; esac
      echo "== $kv $v ($b): $(build/$b time "$DIR/attn70b-$kv-128k-$v.trace" ${ITERS:-30} --flush | grep -E "^total|bandwidth" | tr '\n' ' ')"
    done
    echo "== $kv GQA 1 hg1-s32 (attn-hg1): $(build/attn-hg1 time "$DIR/attn-g1-$kv-128k-hg1-s32.trace" ${ITERS:-30} --flush | grep -E "^total|bandwidth" | tr '\n' ' ')"
  done 2>&1 | tee "$OUT/variants.txt"
  for b in attn-fullwarp attn-hg4 attn-hg2 attn-hg1; do
    echo "$b: $(grep -A3 "Compiling entry function 'kernel_attn_decode" "$OUT/build-$b.log" | grep -oE "(decode_[a-z0-9]+'|Used [0-9]+ registers)" | tr '\n' ' ')"
  done | tee "$OUT/registers.txt"
}

# ncu_decode: DRAM bytes per dispatch of the 1B decode step (ncu flushes
# the caches before each kernel), for the traffic model.
ncu_decode() {
  local tr="$DIR/decode-llama3.2-1b-q4-4k.trace" n
  n=$(grep -c '^dispatch' "$tr")
  timeout ${NCU_TIMEOUT:-300} ncu --launch-skip $((2 * n)) --launch-count $n --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    ${BIN:-build/decode1b} time "$tr" 1 > "$OUT/ncu-decode-q4.csv" 2>&1
  echo "== ncu decode (rc $?): $(grep -c dram__bytes_read "$OUT/ncu-decode-q4.csv") rows of $n dispatches"
  python3 ncu_sum.py "$OUT/ncu-decode-q4.csv"
}

NCU_METRICS=launch__registers_per_thread,launch__occupancy_limit_registers,launch__waves_per_multiprocessor,gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active

ncu_one() { # build trace label
  timeout 240 ncu --kernel-name regex:kernel_attn_decode --launch-count 1 --metrics $NCU_METRICS build/$1 time "$DIR/$2.trace" 1 > "$OUT/ncu-$3.txt" 2>&1
  echo "== ncu $3: $2 on $1 (rc $?)"; grep -E "launch__|gpu__time|dram__|lts__|sm__|smsp__|ERR" "$OUT/ncu-$3.txt" | head -20
}

ncu_attn() {
  ncu_one attn-fullwarp attn70b-q4-128k q4-128k
  ncu_one attn-fullwarp attn70b-f16-128k f16-128k
  ncu_one attn-hg4 attn70b-q4-128k-hg4-s32 q4-128k-hg4
  ncu_one attn-hg1 attn-g1-q4-128k-hg1-s32 q4-128k-gqa1
}

# proto: the tensor-core design of the README (proto/attn_mma.cu, plain
# CUDA) checked against a float reference and timed at 8K, 32K and 128K,
# beside the .metal q4 kernel and PyTorch in the same run.
proto() {
  nvcc -std=c++17 -O3 -arch=$ARCH -lineinfo --use_fast_math -Xptxas -v proto/attn_mma.cu -o build/attn_mma > "$OUT/build-attn_mma.log" 2>&1 || { tail -30 "$OUT/build-attn_mma.log"; return 1; }
  for a in "131072 32" "32768 64" "8192 32"; do build/attn_mma $a ${ITERS:-50}; build/attn_mma $a ${ITERS:-50} smem; done 2>&1 | tee "$OUT/proto.txt"
  # Shapes: warps per threadgroup and a register cap for more threadgroups per SM.
  for v in "8 2" "4 4" "8 1"; do
    set -- $v
    nvcc -std=c++17 -O3 -arch=$ARCH --use_fast_math -Xptxas -v -DWARPS=$1 -DMINB=$2 proto/attn_mma.cu -o build/attn_mma_$1_$2 > "$OUT/build-attn_mma_$1_$2.log" 2>&1 &
  done
  wait
  for v in "8 2" "4 4" "8 1"; do
    set -- $v
    for s in 32 64 128; do
      for mode in plain smem; do build/attn_mma_$1_$2 131072 $s ${ITERS:-50} $mode | grep median; done
    done
  done 2>&1 | tee -a "$OUT/proto.txt"
}

# ncu_proto: where the prototype's time goes (8 warps, 2 blocks/SM, 32 splits, staged).
ncu_proto() {
  [ -x build/attn_mma_8_2 ] || nvcc -std=c++17 -O3 -arch=$ARCH --use_fast_math -DWARPS=8 -DMINB=2 proto/attn_mma.cu -o build/attn_mma_8_2
  timeout 200 ncu --kernel-name attn_q4_mma_smem --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --metrics dram__bytes_read.sum,smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
    build/attn_mma_8_2 131072 32 3 smem > "$OUT/ncu-proto.txt" 2>&1
  echo "== ncu proto (rc $?)"; grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|dram__bytes|smsp__inst|tensor|Stall|stall" "$OUT/ncu-proto.txt" | head -30
}

# compare: the fused q4 .metal kernel (encoder's shape and 4 heads a
# threadgroup), the prototype's best shape and PyTorch, on one machine.
compare() {
  nvcc -std=c++17 -O3 -arch=$ARCH --use_fast_math -DWARPS=8 -DMINB=2 proto/attn_mma.cu -o build/attn_mma_8_2 &
  nvcc -std=c++17 -O3 -arch=$ARCH --use_fast_math -DWARPS=8 -DMINB=2 -DFASTCVT proto/attn_mma.cu -o build/attn_mma_fast &
  wait
  for n in 8k 32k 128k; do
    echo "== $n .metal q4 (full warp): $(build/attn-fullwarp time "$DIR/attn70b-q4-$n.trace" ${ITERS:-50} --flush | grep -E "^total" )"
  done
  echo "== 128k .metal q4, 4 heads a threadgroup: $(build/attn-hg4 time "$DIR/attn70b-q4-128k-hg4-s32.trace" ${ITERS:-50} --flush | grep -E "^total")"
  for a in "8192 32" "32768 32" "131072 32"; do build/attn_mma_8_2 $a ${ITERS:-50} smem; done
  echo "FASTCVT: two nibbles of a word per mask, the 1024 offset through the sums"
  for a in "8192 32" "32768 32" "131072 32" "131072 64"; do build/attn_mma_fast $a ${ITERS:-50} smem; done
  python3 sdpa.py ${ITERS:-50} | grep enable_gqa
}

# moe: a build of the kernels the MoE traces use (fast math for timing, and
# without for the check), the check against the emulator and the
# sanitizers on check-moe, the timings of one Qwen3-30B-A3B layer's MoE
# block and of the synth Qwen3-MoE decode step, and ncu's DRAM bytes per
# dispatch of both (metal/traffic's TestMoEAgainstH200).
moe() {
  local ks t0=$SECONDS m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  ks=$(cat "$DIR"/check-moe.trace "$DIR"/moe-*.trace "$DIR"/decode-qwen3moe-*.trace | awk '/^dispatch/ {print "-DMSL_K_" $2}' | sort -u | tr '\n' ' ')
  $NVCC --use_fast_math -DMSL_ONLY $ks harness.cu -o build/moe > "$OUT/build-moe.log" 2>&1 &
  $NVCC -DMSL_ONLY $ks harness.cu -o build/moecheck > "$OUT/build-moecheck.log" 2>&1 &
  wait
  for b in moe moecheck; do [ -x build/$b ] || { echo "build $b: FAILED"; head -30 "$OUT/build-$b.log"; return 1; }; done
  build/moecheck check "$DIR/check-moe.trace" 2>&1 | tee "$OUT/check-moe.txt"
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --print-limit 10 build/moecheck check "$DIR/check-moe.trace" > "$OUT/sanitize-moe-$tool.txt" 2>&1
    echo "== $tool (rc $?): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-moe-$tool.txt")"
  done
  build/moe time "$DIR/moe-qwen3moe-layer.trace" ${ITERS:-100} --flush 2>&1 | tee "$OUT/moe-layer.txt"
  build/moe time "$DIR/decode-qwen3moe-synth-q4-4k.trace" ${ITERS:-30} --flush 2>&1 | tee "$OUT/moe-decode.txt"
  local n
  for t in moe-qwen3moe-layer decode-qwen3moe-synth-q4-4k; do
    n=$(grep -c '^dispatch' "$DIR/$t.trace")
    timeout 240 ncu --kernel-name regex:^kernel_ --launch-skip $((2 * n)) --launch-count $n --csv --metrics $m \
      build/moe time "$DIR/$t.trace" 1 > "$OUT/ncu-$t.csv" 2>&1
    echo "== ncu $t (rc $?): $(grep -c dram__bytes_read "$OUT/ncu-$t.csv") rows"
  done
  echo "moe took $((SECONDS - t0)) s"
}

# prefill: builds of only the kernels the prefill and mul_mm check traces
# use (fast math for timing, as Metal; plain for the check), the check of
# the matrix test kernels (half products through mma.sync, float ones
# through shuffles) and of every mul_mm dispatch of check.trace, racecheck
# on both, then pp512 of the 1B shape, new and old builds alternating.
prefill() {
  local t0=$SECONDS OLD=${OLD:-$DIR/old} ks mm=$DIR/check-mul_mm.trace
  awk '/^dispatch/ {keep = ($2 ~ /mul_mm/)} !inblock && !/^dispatch/ {print; next} {inblock = 1; if (keep) print} /^end/ {inblock = 0}' "$DIR/check.trace" > $mm
  ks=$(cat "$DIR"/prefill-*.trace $mm | awk '/^dispatch/ {print "-DMSL_K_" $2}' | sort -u | tr '\n' ' ')
  $NVCC --use_fast_math -DMSL_ONLY $ks harness.cu -o build/prefill > "$OUT/build-prefill.log" 2>&1 &
  ${NVCC/-I $DIR/-I $OLD} --use_fast_math -DMSL_ONLY $ks harness.cu -o build/prefill-old > "$OUT/build-prefill-old.log" 2>&1 &
  local bs="prefill-old prefill" tb="prefill prefill-old"
  if [ -n "${VAR:-}" ]; then
    ${NVCC/-I $DIR/-I $VAR} --use_fast_math -DMSL_ONLY $ks harness.cu -o build/prefill-var > "$OUT/build-prefill-var.log" 2>&1 &
    bs="$bs prefill-var" tb="$tb prefill-var"
  fi
  $NVCC -DMSL_ONLY $ks harness.cu -o build/mmcheck > "$OUT/build-mmcheck.log" 2>&1 &
  ${NVCC/-I $DIR/-I $DIR/matrix} harness.cu -o build/matrix > "$OUT/build-matrix.log" 2>&1 &
  wait
  for b in $tb mmcheck matrix; do [ -x build/$b ] || { echo "build $b: FAILED"; head -30 "$OUT/build-$b.log"; return 1; }; done
  echo "builds took $((SECONDS - t0)) s"
  build/matrix check "$DIR/matrix/matrix.trace" 2>&1 | tee "$OUT/check-matrix.txt"
  build/mmcheck check $mm 2>&1 | tee "$OUT/check-mul_mm.txt" | tail -32
  for t in "matrix $DIR/matrix/matrix.trace" "mmcheck $mm"; do
    set -- $t
    timeout ${SAN_TIMEOUT:-60} compute-sanitizer --tool racecheck --print-limit 10 build/$1 check $2 > "$OUT/racecheck-$1.txt" 2>&1
    echo "== racecheck $1 (rc $?): $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck-$1.txt")"
  done
  for w in q4_k q4_0; do
    for b in $bs $bs; do
      echo "== pp512 $w $b: $(build/$b time "$DIR/prefill-llama3.2-1b-$w-512.trace" ${ITERS:-5} --flush | grep -E "kernel_mul_mm_|^total" | tr -s ' ' | tr '\n' ';')"
    done
  done 2>&1 | tee "$OUT/prefill.txt"
  echo "prefill took $((SECONDS - t0)) s"
}

# prefill_variants: the shim's simdgroup_matrix options on the same
# kernels (msl_cuda.h: MSL_SGM_LOAD_NOSYNC drops the __syncwarp after each
# simdgroup_load, leaving the order to the kernel's barriers as on Metal;
# MSL_SGM_MMA_NONVOLATILE lets the compiler schedule the mma.sync), their
# mul_mm check and racecheck, and pp512 against the default and the old
# per-thread mul_mm, alternating. About 45 s.
prefill_variants() {
  local OLD=${OLD:-$DIR/old} ks mm=$DIR/check-mul_mm.trace b w
  awk '/^dispatch/ {keep = ($2 ~ /mul_mm/)} !inblock && !/^dispatch/ {print; next} {inblock = 1; if (keep) print} /^end/ {inblock = 0}' "$DIR/check.trace" > $mm
  ks=$(cat "$DIR"/prefill-*.trace $mm | awk '/^dispatch/ {print "-DMSL_K_" $2}' | sort -u | tr '\n' ' ')
  local NS=-DMSL_SGM_LOAD_NOSYNC NV=-DMSL_SGM_MMA_NONVOLATILE
  $NVCC --use_fast_math -DMSL_ONLY $ks harness.cu -o build/pv-base > "$OUT/build-pv-base.log" 2>&1 &
  $NVCC --use_fast_math -DMSL_ONLY $NS $ks harness.cu -o build/pv-nosync > "$OUT/build-pv-nosync.log" 2>&1 &
  $NVCC --use_fast_math -DMSL_ONLY $NV $ks harness.cu -o build/pv-nonvol > "$OUT/build-pv-nonvol.log" 2>&1 &
  $NVCC --use_fast_math -DMSL_ONLY $NS $NV $ks harness.cu -o build/pv-both > "$OUT/build-pv-both.log" 2>&1 &
  ${NVCC/-I $DIR/-I $OLD} --use_fast_math -DMSL_ONLY $ks harness.cu -o build/pv-old > "$OUT/build-pv-old.log" 2>&1 &
  $NVCC -DMSL_ONLY $NS $NV $ks harness.cu -o build/pv-check > "$OUT/build-pv-check.log" 2>&1 &
  wait
  for b in base nosync nonvol both old check; do [ -x build/pv-$b ] || { echo "build pv-$b: FAILED"; head -30 "$OUT/build-pv-$b.log"; return 1; }; done
  build/pv-check check $mm 2>&1 | tail -1
  timeout ${SAN_TIMEOUT:-60} compute-sanitizer --tool racecheck --print-limit 10 build/pv-check check $mm > "$OUT/racecheck-pv.txt" 2>&1
  echo "== racecheck (nosync, nonvolatile; rc $?): $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck-pv.txt")"
  for w in q4_k q4_0; do
    for b in old base nosync nonvol both old base nosync nonvol both; do
      echo "== pp512 $w $b: $(build/pv-$b time "$DIR/prefill-llama3.2-1b-$w-512.trace" ${ITERS:-5} --flush | grep -E "kernel_mul_mm_|^total" | tr -s ' ' | tr '\n' ';')"
    done
  done 2>&1 | tee "$OUT/prefill-variants.txt"
}

case "${1:-all}" in
  build) build ;;
  check) check ;;
  sanitize) sanitize ;;
  attention) attention ;;
  decode) decode ;;
  ncu) ncu_attn ;;
  variants) variants ;;
  ncu-decode) ncu_decode ;;
  decode-compare) decode_compare ;;
  proto) proto ;;
  compare) compare ;;
  ncu-proto) ncu_proto ;;
  moe) moe ;;
  mma) mma ;;
  prefill) prefill ;;
  prefill-variants) prefill_variants ;;
  all) build && check; sanitize; attention; decode; ncu_attn; variants; ncu_decode; proto; ncu_proto; compare ;;
  *) echo "unknown step $1"; exit 2 ;;
esac
