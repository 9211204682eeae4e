#!/bin/bash
# Runs the .metal kernels on an NVIDIA GPU (the device machine: nvcc,
# PyTorch, compute-sanitizer, ncu; no network). Needs the traces and
# kernels.cu that `go test ./metal/internal/gpu -run TestExport -args -out DIR`
# writes (DIR defaults to metal/internal/gpu/out). Results go to $OUT (or ./results).
#
#   run.sh build            the builds below
#   run.sh check            every recorded dispatch against the emulator
#   run.sh sanitize         compute-sanitizer memcheck, racecheck and synccheck
#                           on check, and on the planted bugs
#   run.sh attention        70B decode attention: .metal kernels and PyTorch SDPA
#   run.sh decode           one decode step of a Llama-3.2-1B-shaped model
#   run.sh ncu              profiler bytes and DRAM throughput of attention
#   run.sh variants         attention with other threadgroup shapes
#   run.sh ncu-decode       profiler bytes per dispatch of the decode step
#   run.sh proto            the tensor-core attention prototype (proto/)
#   run.sh ncu-proto        where its time goes
#   run.sh compare          .metal q4, the prototype and PyTorch on one machine
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

check() { build/generic check "$DIR/check.trace" 2>&1 | tee "$OUT/check.txt"; }

sanitize() {
  for tool in memcheck racecheck synccheck; do
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
  done
  build/decode1b time "$DIR/decode-llama3.2-1b-q4-4k.trace" ${ITERS:-20} --flush --per-grid > "$OUT/decode-q4-per-grid.txt" 2>&1
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
  timeout 300 ncu --launch-skip 552 --launch-count 276 --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    build/decode1b time "$DIR/decode-llama3.2-1b-q4-4k.trace" 1 > "$OUT/ncu-decode-q4.csv" 2>&1
  echo "== ncu decode (rc $?): $(grep -c dram__bytes_read "$OUT/ncu-decode-q4.csv") rows"
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
  proto) proto ;;
  compare) compare ;;
  ncu-proto) ncu_proto ;;
  moe) moe ;;
  prefill) prefill ;;
  prefill-variants) prefill_variants ;;
  all) build && check; sanitize; attention; decode; ncu_attn; variants; ncu_decode; proto; ncu_proto; compare ;;
  *) echo "unknown step $1"; exit 2 ;;
esac
