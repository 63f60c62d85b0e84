#!/bin/sh
# device-check.sh - the whole check of the cuda backend on a machine with an
# NVIDIA GPU, in one command:
#   1. build everything (make -j16, plus the test programs);
#   2. the conformance suite on cuda, directly and with every op replayed
#      from a recording (CUDA graphs);
#   3. ABI v2 interop against PyTorch (tests/device/cuda_interop.py: its
#      stream, its memory wrapped and through DLPack, a CUDA graph, timing);
#      the Python package's tests (tests/python, PyTorch CUDA tensors in
#      test_torch.py: ops, a non-default stream, per-call overhead);
#      the conformance suite again (quick sizes) under compute-sanitizer
#      memcheck and racecheck;
#   4. gllmk-bench --backend cuda (JSON);
#   5. tools/bench/torch_peer.py: the same rows in PyTorch, and the issue's
#      target shapes, ours vs PyTorch with the ratio per row;
#   6. vulkan on NVIDIA's driver: the conformance suite, gllmk-bench, the
#      vulkan / cuda ratio per op, and that the default context picks cuda
#      while vulkan stays available (tools/check-selection.py).
# Every log lands in $OUT (default build/device-check); a summary is printed
# last. Exit status 0 only if every step passed.
#
# The GPU machines have gcc, make, the CUDA toolkit and PyTorch, but not the
# Check unit-test library, and no network. Where Check is missing, the script
# unpacks Debian's packages from .devdeps/ (make them on a Debian machine,
# once: mkdir .devdeps && cd .devdeps && apt-get download check libsubunit0
# libsubunit-dev libvulkan-dev libdlpack-dev) into a private prefix, and
# DLPack's header from there when /usr/include lacks it; nothing is installed
# system-wide. For the vulkan steps also carry .gl/ with Debian's libvulkan1
# and libglvnd packages (the device README's recipe), all unpacked into /:
# NVIDIA's Vulkan driver is libGLX_nvidia.so.0, which needs libglvnd, and on
# a fresh machine libvulkan1 alone left vkCreateInstance failing with
# VK_ERROR_INCOMPATIBLE_DRIVER.
# Only the parts that need no other vendor's headers are built there: the
# core, the cpu and cuda plugins, the tools and the tests.
#
# The generator (libgllmk-model, `model` part): tests/model on cuda (and on
# vulkan when that part runs too), tests/device/generate_check.py (gllmk's
# logits and greedy tokens against tools/bench/torch_model.py and
# transformers, every family, bf16 and f32, then in bf16 at batch 24, which
# cuda decodes through its fused TMA/wgmma skinny GEMM), the load speed of an 8B-shaped
# checkpoint from the page cache, and gllmk-generate --synthetic llama3-8b.
#
# Tensor parallelism (`tp` part, on a machine with 2 or more GPUs):
# tests/collectives and tests/model on cuda (their tensor-parallel cases
# take GPUs 0 and 1), tests/collectives under memcheck,
# tests/device/abandoned_all_reduce.c (one rank's recorded all-reduce
# replayed alone: an error after 20 s, not a hang), then gllmk-generate --synthetic llama3-8b with --tp 1
# and --tp 2 (TP_DEGREES="1 2 4" for more) at batch 1 and 32 after a
# 1024-token prompt: tokens/s, the all-reduce time, and the greedy tokens and
# logits of each --tp N against --tp 1
# (tools/bench/compare_logits.py). NVLink multicast stays off
# (NCCL_NVLS_ENABLE=0, docs/nccl.md); libnccl.so.2 comes from PyTorch's
# nvidia-nccl wheel where the system has none.
#
# Generator speed (`gen` part, issue 23): the conformance suite on cuda
# (its quick sizes under memcheck and replayed from recordings), tests/model,
# the matmul rows of gllmk-bench (decode batches of 1 and 32 through every
# Llama-3-8B weight) against PyTorch, tools/bench/generator_peer.py:
# gllmk-generate against an eager PyTorch forward of the same shapes (decode
# at batch 1 and 32, prefill of 2048 tokens, time to first token) with the
# issue's ratios, decode again without programmatic dependent launch, and
# each op of a decode step timed alone (tools/bench/trace_summary.py) and the
# step's kernels inside its CUDA graph (tools/bench/graph_steps.py); with
# the vulkan part too (`vulkan gen`), vulkan's decode at batch 1 and prefill
# of 2048 tokens against cuda's (tools/bench/generator_ratio.py).
#
# Decode attention and sampling (`attn` part, issue 27): conformance on cuda
# (and its quick sizes under memcheck), the paged_attention, argmax and
# sample rows of gllmk-bench against PyTorch, and with ATTN_NCU=1 Nsight
# Compute's view of the paged kernels (ATTN_ROWS="paged_attn" takes only
# some of the rows).
#
# usage: tools/device-check.sh [--quick] [cuda] [vulkan] [model] [gen] [tp] [attn]
#   --quick  quick sizes everywhere
#   cuda     only steps 1-5;  vulkan  only the build and the vulkan steps;
#   model    only the build and the generator's steps
#   (both, the default, may outlast a 10-minute device call: run the two
#   parts as two calls, the build is kept between them)
# STEP_TIMEOUT (seconds, default 1800) bounds each step.
set -u
cd "$(dirname "$0")/.."
out=${OUT:-build/device-check}
mkdir -p "$out"
quick=""
parts=""
for arg in "$@"; do
  case $arg in
    --quick) quick="--quick" ;;
    cuda | vulkan | model | gen | tp | attn) parts="$parts $arg" ;;
    *) echo "usage: $0 [--quick] [cuda] [vulkan] [model] [gen] [tp] [attn]" >&2; exit 2 ;;
  esac
done
[ -z "$parts" ] && parts=" cuda vulkan"
wants() { case "$parts " in *" $1 "*) return 0 ;; esac; return 1; }
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
status=0

# step NAME LOG COMMAND...: runs the command with its output in LOG.
step() {
  name=$1
  log=$2
  shift 2
  start=$(date +%s)
  timeout "${STEP_TIMEOUT:-1800}" "$@" >"$log" 2>&1
  code=$?
  elapsed=$(($(date +%s) - start))
  if [ $code -eq 0 ]; then result=ok; else result="FAILED (exit $code)"; status=1; fi
  printf '%-34s %-18s %4ss  %s\n' "$name" "$result" "$elapsed" "$log" | tee -a "$summary"
}

# Check and DLPack's header from .devdeps when the system lacks them.
if ls .devdeps/*.deb >/dev/null 2>&1; then
  prefix=/tmp/gllmk-devdeps
  for deb in .devdeps/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
  [ -e /usr/include/dlpack/dlpack.h ] || export CFLAGS="${CFLAGS:-} -isystem $prefix/usr/include"
  # libjansson (the generator's JSON) the same way: headers, library, loader path.
  if [ ! -e /usr/include/jansson.h ]; then
    export CFLAGS="${CFLAGS:-} -isystem $prefix/usr/include"
    export LDFLAGS="${LDFLAGS:-} -L$prefix/usr/lib/x86_64-linux-gnu"
    export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  if ! pkg-config --exists check 2>/dev/null; then
    export PKG_CONFIG_SYSROOT_DIR=$prefix
    export PKG_CONFIG_PATH=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig
    export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
fi

# -o: the dependency installers need a network; what is missing shows in the
# log. -k: a part that fails to build does not stop the others. Of the tests,
# only the conformance program: `test-programs` also builds the
# vulkan-portable test plugin, which needs the Vulkan headers.
step "build" "$out/build.log" make -k -j16 -o deps-check -o deps-build core model plugin-cpu \
  plugin-cuda tools build/tests/conformance build/tests/model build/tests/collectives
step "nvidia-smi, gllmk-info" "$out/gllmk-info.txt" sh -c 'nvidia-smi && build/bin/gllmk-info'

# gllmk-bench's rows as JSON (its progress lines on stderr stay out)
bench_json='backend=$1; shift; build/bin/gllmk-bench --backend "$backend" --json "$@" 2>/dev/null'
cuda_bench=$out/bench-cuda.json

if wants cuda; then

  # Only the cuda test case of the suite (Check selects it by name), in one
  # process: the suite's main() initialises CUDA while listing the backends,
  # and CUDA cannot be used in a process forked after that (Check forks each
  # test by default).
  export CK_RUN_CASE=cuda CK_FORK=no
  step "conformance (cuda)" "$out/conformance.log" build/tests/conformance $quick
  step "conformance --record (cuda)" "$out/conformance-record.log" build/tests/conformance --record $quick
  step "conformance under memcheck" "$out/memcheck.log" \
    compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 build/tests/conformance --quick
  step "conformance under racecheck" "$out/racecheck.log" \
    compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 --print-limit 20 \
    build/tests/conformance --quick
  unset CK_RUN_CASE CK_FORK

  # One gllmk-bench run serves the PyTorch table here and, kept in build/
  # (which survives between calls on one machine), the vulkan / cuda table.
  step "cuda interop with PyTorch" "$out/cuda-interop.txt" \
    env PYTHONUNBUFFERED=1 python3 tests/device/cuda_interop.py build/lib
  # The Python package (tools/python/gllmk): tests/python, whose
  # test_torch.py runs every op on PyTorch CUDA tensors, the ordering on a
  # non-default stream and the per-call overhead (the rest runs on cpu, and
  # on vulkan where its plugin works). Without pytest, test_torch.py alone.
  step "python tests (PyTorch, cuda)" "$out/python-tests.txt" \
    env PYTHONPATH=tools/python GLLMK_LIBRARY_DIR="$PWD/build/lib" PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 sh -c 'if python3 -c "import pytest" 2>/dev/null; then
      python3 -m pytest tests/python -x -q -rs -p no:cacheprovider
    else python3 tests/python/test_torch.py build/lib; fi'
  step "gllmk-bench recordings row" "$out/bench-recording.txt" \
    build/bin/gllmk-bench --backend cuda --filter recording
  step "gllmk-bench --backend cuda" "$cuda_bench" sh -c "$bench_json" _ cuda $quick
  cp "$cuda_bench" build/device-check-bench-cuda.json
  step "torch_peer.py" "$out/torch_peer.txt" \
    env PYTHONUNBUFFERED=1 python3 tools/bench/torch_peer.py --json "$out/torch_peer.json" \
    --bench-json "$cuda_bench" $quick
fi

if wants vulkan; then
  # Vulkan on NVIDIA's driver. The GPU machines lack the Vulkan loader and
  # headers: bring libvulkan1 and libglvnd0 in .gl/ and libvulkan-dev in
  # .devdeps/ (Debian packages, see the header), and point the loader at
  # NVIDIA's ICD file.
  for deb in .gl/*.deb; do [ -e "$deb" ] && dpkg -x "$deb" / && ldconfig; done
  vulkan_prefix=/tmp/gllmk-devdeps
  for deb in .devdeps/libvulkan-dev_*.deb; do [ -e "$deb" ] && dpkg-deb -x "$deb" "$vulkan_prefix"; done
  nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [ -e "$nvidia_icd" ] && export VK_DRIVER_FILES=$nvidia_icd
  step "build vulkan plugin" "$out/build-vulkan.log" \
    make -j16 -o deps-check -o deps-build plugin-vulkan CFLAGS="-I$vulkan_prefix/usr/include"
  step "conformance (vulkan)" "$out/conformance-vulkan.log" \
    env CK_RUN_CASE=vulkan build/tests/conformance --backend vulkan $quick
  step "gllmk-bench --backend vulkan" "$out/bench-vulkan.json" sh -c "$bench_json" _ vulkan $quick
  if [ build/device-check-bench-cuda.json -nt build/lib/gllmk/gllmk-cuda.so ]; then
    cp build/device-check-bench-cuda.json "$cuda_bench"
  else
    step "gllmk-bench recordings row" "$out/bench-recording.txt" \
    build/bin/gllmk-bench --backend cuda --filter recording
  step "gllmk-bench --backend cuda" "$cuda_bench" sh -c "$bench_json" _ cuda $quick
  fi
  step "vulkan / cuda per op" "$out/vulkan-vs-cuda.txt" \
    python3 tools/bench/compare_backends.py "$out/bench-vulkan.json" "$cuda_bench"
  # With both plugins usable, the default context must pick cuda and vulkan
  # must stay available for a forced context (the conformance run above).
  step "selection: cuda over vulkan" "$out/selection.txt" \
    sh -c 'build/bin/gllmk-info --json | python3 tools/check-selection.py cuda vulkan'
fi

if wants model; then
  gen_check="env PYTHONUNBUFFERED=1 python3 tests/device/generate_check.py --gllmk-generate build/bin/gllmk-generate --workdir /tmp/gllmk-generate-check"
  step "model tests (cuda)" "$out/model-cuda.log" env CK_RUN_CASE=cuda build/tests/model --backend cuda
  step "generate vs torch (cuda)" "$out/generate-check-cuda.txt" $gen_check --backend cuda
  # 24 sequences: cuda's decode steps through matmul_skinny_wgmma_fused on Hopper
  step "generate vs torch, batch 24 (cuda)" "$out/generate-check-cuda-b24.txt" \
    $gen_check --backend cuda --batch 24 --dtypes bf16
  if wants vulkan; then
    step "model tests (vulkan)" "$out/model-vulkan.log" env CK_RUN_CASE=vulkan build/tests/model --backend vulkan
    step "generate vs torch (vulkan)" "$out/generate-check-vulkan.txt" $gen_check --backend vulkan
  fi
  step "load speed, 8B-shaped checkpoint" "$out/load-speed.txt" $gen_check --backend cuda --load-speed
  step "gllmk-generate llama3-8b" "$out/generate-speed.txt" $gen_check --backend cuda --speed
fi

if wants gen; then
  # Generator speed (issue 23): the matmul kernels it leans on checked first
  # (the whole conformance suite on cuda, and its quick sizes under
  # memcheck), then the decode-size matmul rows against PyTorch, then
  # gllmk-generate against an eager PyTorch forward of the same shapes.
  export CK_RUN_CASE=cuda CK_FORK=no
  step "conformance (cuda)" "$out/conformance.log" build/tests/conformance $quick
  step "conformance under memcheck" "$out/memcheck.log" \
    compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 build/tests/conformance --quick
  step "conformance --record (cuda)" "$out/conformance-record.log" build/tests/conformance --record --quick
  unset CK_RUN_CASE CK_FORK
  step "model tests (cuda)" "$out/model-cuda.log" env CK_RUN_CASE=cuda build/tests/model --backend cuda
  step "gllmk-bench matmul rows (cuda)" "$out/bench-matmul.json" sh -c "$bench_json" _ cuda --filter matmul/decode
  step "decode matmul vs PyTorch" "$out/torch_peer.txt" \
    env PYTHONUNBUFFERED=1 python3 tools/bench/torch_peer.py --quick --json "$out/torch_peer.json" \
    --bench-json "$out/bench-matmul.json"
  step "generator vs PyTorch eager" "$out/generator-peer.txt" \
    env PYTHONUNBUFFERED=1 python3 tools/bench/generator_peer.py --json "$out/generator-peer.json"
  # What programmatic dependent launch gives: the same decode without it.
  for batch in 1 32; do
    step "decode b$batch, no programmatic launch" "$out/no-pdl-b$batch.json" env GLLMK_CUDA_PDL=0 \
      build/bin/gllmk-generate --synthetic llama3-8b --prompt-len 1024 --batch $batch --max-new 65 --json --quiet
  done
  grep -h '"decode_tokens_per_s"' "$out"/no-pdl-b*.json | sed 's/^/without programmatic launch (b1, b32): /'
  # Each op of a decode step timed alone (call by call), per op and shape.
  for batch in 1 32; do
    step "decode b$batch, per-op trace" "$out/trace-b$batch.txt" sh -c "build/bin/gllmk-generate \
      --synthetic llama3-8b --prompt-len 1024 --batch $batch --max-new 4 --quiet --trace /tmp/gllmk-trace.json \
      >/dev/null && python3 tools/bench/trace_summary.py /tmp/gllmk-trace.json"
    # The same step inside its CUDA graph (kernels as CUPTI sees them, gaps).
    step "decode b$batch, kernels inside the graph" "$out/graph-b$batch.txt" \
      env PYTHONPATH=tools/python GLLMK_LIBRARY_DIR="$PWD/build/lib" PYTHONUNBUFFERED=1 \
      python3 tools/bench/graph_steps.py --batch $batch
  done
  if wants vulkan; then
    # Issue 23's vulkan targets against cuda: decode at batch 1 and a
    # 2048-token prefill. A backend's first run builds its pipelines, so each
    # runs once unmeasured first.
    for b in cuda vulkan; do
      build/bin/gllmk-generate --backend $b --synthetic llama3-8b --prompt-len 16 --max-new 2 --quiet >/dev/null 2>&1
      step "decode b1 ($b)" "$out/gen-decode-$b.json" build/bin/gllmk-generate --backend $b \
        --synthetic llama3-8b --prompt-len 1024 --max-new 65 --json --quiet
      step "prefill 2048 ($b)" "$out/gen-prefill-$b.json" build/bin/gllmk-generate --backend $b \
        --synthetic llama3-8b --prompt-len 2048 --max-new 2 --json --quiet
    done
    step "generator: vulkan / cuda" "$out/gen-vulkan-vs-cuda.txt" python3 tools/bench/generator_ratio.py \
      "$out/gen-decode-vulkan.json" "$out/gen-prefill-vulkan.json" "$out/gen-decode-cuda.json" \
      "$out/gen-prefill-cuda.json"
  fi
fi

if wants attn; then
  # Decode attention and sampling (issue 27): conformance on cuda, the
  # paged_attention, argmax and sample rows of gllmk-bench against PyTorch,
  # and with ATTN_NCU=1 Nsight Compute's duration, DRAM throughput and occupancy of the
  # kernels of a few calls at each paged shape (tools/bench/paged_probe.py).
  if ! wants gen; then # the gen part has run them
    export CK_RUN_CASE=cuda CK_FORK=no
    step "conformance (cuda)" "$out/conformance.log" build/tests/conformance $quick
    step "conformance under memcheck" "$out/memcheck.log" \
      compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 build/tests/conformance --quick
    unset CK_RUN_CASE CK_FORK
  fi
  for rows in ${ATTN_ROWS:-paged_attn argmax sample}; do
    step "gllmk-bench $rows rows (cuda)" "$out/bench-$rows.json" sh -c "$bench_json" _ cuda --filter $rows
    step "$rows vs PyTorch" "$out/torch-$rows.txt" env PYTHONUNBUFFERED=1 python3 tools/bench/torch_peer.py \
      --skip-targets --bench-json "$out/bench-$rows.json"
  done
  if [ -n "${ATTN_NCU:-}" ]; then
    step "paged_attn under ncu" "$out/ncu-paged.csv" ncu --csv --kernel-name regex:attention \
      --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_shared_mem,launch__registers_per_thread \
      python3 tools/bench/paged_probe.py 1:1024 1:4096 1:32768 16:4096 32:1024 32:4096 64:1024
  fi
fi

if wants tp; then
  export NCCL_NVLS_ENABLE=0
  if ! ldconfig -p | grep -q 'libnccl\.so\.2 '; then
    nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
    [ -n "$nccl_lib" ] && export LD_LIBRARY_PATH=$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  step "collectives (cuda)" "$out/collectives-cuda.log" env CK_RUN_CASE=cuda build/tests/collectives --backend cuda
  # NCCL probes its own kernels through CUDA API errors: only memory errors count.
  step "collectives under memcheck" "$out/memcheck-collectives.log" env CK_RUN_CASE=cuda CK_FORK=no \
    compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 --print-limit 20 \
    build/tests/collectives --quick --backend cuda
  step "all_reduce abandoned by a rank" "$out/abandoned-all-reduce.txt" sh -c \
    'cc -std=c11 -D_GNU_SOURCE -Icore/include tests/device/abandoned_all_reduce.c -Lbuild/lib -lgllmk \
       -o build/tests/abandoned_all_reduce && LD_LIBRARY_PATH=build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
       build/tests/abandoned_all_reduce'
  step "model tests (cuda, TP)" "$out/model-cuda.log" env CK_RUN_CASE=cuda build/tests/model --backend cuda
  gen="build/bin/gllmk-generate --synthetic llama3-8b --prompt-len 1024 --quiet"
  degrees=${TP_DEGREES:-1 2} # e.g. "1 2 4" on a machine with 4 GPUs
  for tp in $degrees; do
    step "llama3-8b greedy logits tp=$tp" "$out/tp$tp-greedy.txt" \
      $gen --tp $tp --max-new 8 --logits-out "$out/tp$tp-logits.f32"
    for batch in 1 32; do
      step "llama3-8b tp=$tp batch $batch" "$out/tp$tp-b$batch.json" \
        $gen --tp $tp --batch $batch --max-new 257 --json
    done
    [ "$tp" = 1 ] && continue
    step "tp=$tp vs tp=1 tokens and logits" "$out/tp$tp-compare.txt" python3 tools/bench/compare_logits.py \
      "$out/tp1-logits.f32" "$out/tp$tp-logits.f32" 128256
  done
  step "tp speed table" "$out/tp-speed.txt" python3 tools/bench/tp_table.py "$out" "$degrees"
fi

echo
cat "$out"/tp*-compare.txt "$out/tp-speed.txt" 2>/dev/null
echo
cat "$out/vulkan-vs-cuda.txt" 2>/dev/null
echo
for log in conformance conformance-vulkan memcheck racecheck model-cuda model-vulkan collectives-cuda \
  memcheck-collectives; do
  [ -e "$out/$log.log" ] || continue
  grep -E '^[0-9]+%: Checks:|ERROR SUMMARY|RACECHECK SUMMARY' "$out/$log.log" | sed "s/^/$log: /"
done
echo
cat "$out/torch_peer.txt" 2>/dev/null | sed -n '/^context creation/,$p'
echo
cat "$out/generator-peer.txt" "$out/trace-b1.txt" "$out/trace-b32.txt" "$out/graph-b1.txt" "$out/graph-b32.txt" \
  2>/dev/null
echo
cat "$out/generate-check-cuda.txt" "$out/generate-check-vulkan.txt" "$out/load-speed.txt" \
  "$out/generate-speed.txt" 2>/dev/null
echo
cat "$summary"
exit $status
