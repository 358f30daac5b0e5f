#!/usr/bin/env bash
# Run ON THE LENT GPU MACHINE, one device call for the whole session (docs/gpu_backend.md):
#   ZT_COMMIT=<hash> bash tools/gpu_session.sh [--limit SECONDS] PHASE[=SECONDS] ...
# with carry [".gpu_deps", ".gpu_build"] (tools/gpu_deps.sh and tools/gpu_pack.sh, run here first).
# Phases run in the order given, each within its budget (seconds; defaults below):
#   tests        ctest -L gpu: the core list first (every kernel against the CPU, one model run,
#                NCCL), then the rest, then compute-sanitizer memcheck on zt_gpu_tests  [240]
#   multirank    2 and 3 ranks sharing the GPU (comm.backend = mpi, the carried OpenMPI), stages 0-3,
#                against the CPU, and a 2-GPU-rank checkpoint resumed elsewhere; on a machine
#                with several GPUs, first 2 (and 4) ranks a GPU each through NCCL; then whole
#                training runs against a float64 PyTorch loop (trainer_trajectory_test.py)   [150]
#   bench        zt_bench_kernels, then tools/bench_gpu.py: zerotrain stages 0-3 (collectives
#                on), PyTorch compiled (default, and max-autotune with cuDNN attention) and
#                llm.c, interleaved                                                         [330]
#   llama        tools/bench_llama_gpu.py: a Llama 3.2 1B-shaped model at stage 3 against
#                PyTorch FSDP2 compiled                                                     [180]
#   shakespeare  zerotrain's half of tools/shakespeare_gpu.py (carry runs/shakespeare_char_data too) [300]
#   autotune     tools/bench_gpu.py with zerotrain stage 0 beside PyTorch compiled (default) and
#                under max-autotune (cuDNN attention), so the best-PyTorch ratio has both rows in
#                one invocation: max-autotune's compile passed 200 s on an H200, so it has its
#                own phase, and the deadline stops it cleanly where it overruns                [420]
#   llmc         tools/llmc_interop.py: llm.c's train_gpt2cu writes its own model file, zerotrain
#                starts from it (train.init_from) and evaluates llm.c's validation windows      [90]
#   asyncckpt    tools/bench_async_checkpoint.py --device cuda: GPT-2 124M's blocked time per save,
#                synchronous against checkpoint.async (staging into pinned memory)          [120]
#   sampling     tools/bench_sampling.py --device cuda --dtype bf16: tokens/s through the key/value
#                cache and with the whole window per token, GPT-2 124M and a Llama of its width  [150]
#   multigpu     tools/bench_multi_gpu.py where 2 or more GPUs are visible: zerotrain stages 0-3
#                on every GPU (NCCL) and stage 0 on one, beside PyTorch FSDP2 on every GPU, per GPU [300]
# --warm-autotune: PyTorch's max-autotune anchor (cuDNN attention) compiles and tunes in the
# background from set-up on, niced, on 8 compile threads, while the untimed phases (tests, multirank)
# run; it is stopped before any timed phase starts, so no timing shares the machine with it. What it
# compiled stays in the cache folder (.gpu_session_cache/, kept between the calls of a warm machine)
# and is returned with the others' at the end, so the bench phase of the next call, or of the next
# lease once committed, starts that anchor from it: a hit where the compile finished. Its choices of
# kernels were timed beside the tests' GPU work (session.txt says how long it ran and whether it ended).
# e.g. `bash tools/gpu_session.sh tests=230 multirank=60 bench=250`. The bench phase also compares
# every kernel with a committed zt_bench_kernels JSON of the same card (tools/kernel_bench_delta.py:
# ZT_KERNEL_BASELINE where it is this card's, else the newest committed one; `none` for none) and
# lists the slower ones in session.txt.
#
# Before anything runs it prints the plan and refuses (exit 2) one whose budgets and set-up exceed
# the outer limit (--limit, else ZT_SESSION_SECONDS, else 570: the device's 600 s per command less
# the copy back), so the call's timeout and the phases agree. It refuses a pack whose recorded source
# sums differ from this tree (built from other sources), or that names another commit than ZT_COMMIT.
# Every result lands in $OUT the moment its step ends (a call cut short loses only the step in
# progress), and nothing is ever copied from docs/results: each tool writes straight into $OUT.
# A call brings back 8 files of $OUT at most, and the plan refuses phases that would leave more:
# session.txt (plan, machine, every step's status and seconds, the GPU's
# clocks, power and temperature around each benchmark), one log per phase, and the result JSONs
# (gpu_kernels_, gpu_bench_, gpu_multirank_, gpu_llama_bench_, gpu_multi_gpu_bench_, shakespeare_gpu_<device>.json), which
# then go into docs/results/ here; last, where a place is left, torch_compile_cache_<device>.tar.gz
# (tools/torch_compile_cache.py), which goes into tools/torch_compile_cache/. Exit 0 when every step
# passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/zt_gpu_session}
mkdir -p "$OUT"
summary="$OUT/session.txt"
note() { echo "$*" | tee -a "$summary"; }

declare -A default_budget=([tests]=240 [multirank]=150 [bench]=330 [llama]=180 [shakespeare]=300 [llmc]=90 [autotune]=420 [asyncckpt]=120 [sampling]=150 [multigpu]=300)
# The files each phase leaves in $OUT: its log and its result JSONs (bench: zt_bench_kernels' and
# bench_gpu's). A call brings back 8 at most, session.txt one of them: a ninth is lost, not late.
declare -A phase_files=([tests]=1 [multirank]=2 [bench]=3 [llama]=2 [shakespeare]=2 [llmc]=2 [autotune]=2 [asyncckpt]=2 [sampling]=2 [multigpu]=2)
out_files_max=8
limit=${ZT_SESSION_SECONDS:-570}
warm_autotune=0
# Unpacking, the pack check and the machine facts (4-8 s on the leases so far), a warm compile's
# stop (up to 15 s), the last step's grace after its time limit and the last GPU state: the phases'
# deadlines keep what runs late out of the later phases and the end, so the call ends by the limit.
setup_reserve=30
# Of it, after the last phase: a step's command may outlive its time limit by the 10 s `timeout -k`
# grants it after SIGTERM (a checkpoint saved on the signal), then the GPU state at the end.
end_reserve=15
phases=()
declare -A budget
usage() {
  echo "usage: tools/gpu_session.sh [--limit SECONDS] [--warm-autotune] PHASE[=SECONDS] ... (phases: ${!default_budget[*]})${1:+: $1}" >&2
  exit 2
}
# Counts refused here, before a device minute goes: a word where a number belongs passed the plan
# check and ended the session mid-way (an unbound variable), after its set-up or its phases.
whole_seconds() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
while [ $# -gt 0 ]; do
  case "$1" in
    --limit)
      [ $# -ge 2 ] && whole_seconds "$2" || usage "--limit takes whole seconds (got '${2:-}')"
      limit=$2
      shift 2 ;;
    --warm-autotune) warm_autotune=1; shift ;;
    *)
      name=${1%%=*}
      [ -n "${default_budget[$name]:-}" ] || usage "no phase '$name'"
      [ -z "${budget[$name]:-}" ] || usage "phase $name given twice"
      phases+=("$name")
      budget[$name]=$([ "$1" != "$name" ] && echo "${1#*=}" || echo "${default_budget[$name]}")
      whole_seconds "${budget[$name]}" || usage "$name takes whole seconds (got '${budget[$name]}')"
      shift ;;
  esac
done
whole_seconds "$limit" || usage "ZT_SESSION_SECONDS takes whole seconds (got '$limit')"
# The device tool runs a command 600 s at the most; past it the session would be cut, not planned.
[ "$limit" -le 600 ] || usage "--limit $limit is past the 600 s a device command may run"
[ ${#phases[@]} -gt 0 ] || usage "no phase given"
total=$setup_reserve
plan="set-up $setup_reserve s"
files=1  # session.txt
for p in "${phases[@]}"; do
  total=$((total + budget[$p]))
  plan="$plan + $p ${budget[$p]} s"
  files=$((files + phase_files[$p]))
done
: >"$summary"
note "plan: $plan = $total s of the $limit s limit; $files of the $out_files_max files a call brings back"
if [ "$total" -gt "$limit" ]; then
  note "refused: the phases' budgets exceed the limit; shorten them (PHASE=SECONDS) or raise --limit"
  exit 2
fi
if [ "$files" -gt "$out_files_max" ]; then
  note "refused: the phases leave $files files in \$OUT (session.txt, each phase's log and results) and a call brings back $out_files_max; split them over two calls"
  exit 2
fi

# step NAME SECONDS CMD...: runs CMD within SECONDS, never past the phase's deadline; logs status.
failed=0
phase_deadline=0
step() {
  local name=$1 want=$2
  shift 2
  local left=$((phase_deadline - SECONDS))
  if [ "$left" -lt 10 ]; then
    note "  $name: skipped (the phase's budget is spent)"
    failed=1
    return 1
  fi
  local limit_s=$((want < left ? want : left))
  local t0=$SECONDS rc=0
  timeout -k 10 "$limit_s" "$@" || rc=$?
  note "  $name: $([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc$([ $rc -eq 124 ] && echo ', time limit'))") in $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || failed=1
  return $rc
}
gpu_state() { note "  gpu $1: $(python3 tools/gpu_state.py 2>&1)"; }
# The GPUs CUDA shows: nvidia-smi's list, which ignores CUDA_VISIBLE_DEVICES, cut to its entries.
visible_gpus() {
  local gpus shown
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    shown=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c '[^[:space:]]')
    [ "$shown" -lt "$gpus" ] && gpus=$shown
  fi
  echo "$gpus"
}

# ZT_COMMIT=<hash> names the commit: the tree travels without .git.
ZT_COMMIT_GIVEN=${ZT_COMMIT:-}
commit=${ZT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
export ZT_COMMIT=$commit
# A GPU test that finds no device fails here instead of skipping (a driver older than the toolkit
# must not read as "all passed").
export ZT_REQUIRE_GPU=1
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
slug=$(echo "${gpu_name:-unknown}" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\+/_/g; s/^_//; s/_$//')
# The bench phase's kernel baseline: ZT_KERNEL_BASELINE where it is a JSON of this card, else the
# newest zt_bench_kernels JSON of this card in docs/results (session folders sort by date, the calls
# in a folder by number), so a lease drawing another card than the one a doc names still compares
# (tools/kernel_bench_delta.py refuses two cards); ZT_KERNEL_BASELINE=none compares with nothing.
kernel_baseline=
if [ "${ZT_KERNEL_BASELINE:-}" != none ]; then
  if [[ "${ZT_KERNEL_BASELINE:-}" == *"_$slug.json" && -f "$ZT_KERNEL_BASELINE" ]]; then
    kernel_baseline=$ZT_KERNEL_BASELINE
  else
    # Version order, so a folder's call10 comes after its call2 (the top-level file, older, first).
    kernel_baseline=$(
      {
        if [ -f "docs/results/gpu_kernels_$slug.json" ]; then echo "docs/results/gpu_kernels_$slug.json"; fi
        find docs/results -path 'docs/results/gpu_session_*' -name "*gpu_kernels_$slug.json" | sort -V
      } | tail -1
    )
  fi
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
  echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "python: $(command -v python3) $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"
  echo "kernel baseline: ${kernel_baseline:-none}${ZT_KERNEL_BASELINE:+ (ZT_KERNEL_BASELINE=$ZT_KERNEL_BASELINE)}"
  echo "bench args: ${ZT_BENCH_ARGS:-none, the defaults of bench_gpu.py}"  # the engines a bench phase timed
} >>"$summary"
gpu_state "at start"

# The pack: built from this tree's sources (file by file), at ZT_COMMIT when one is named.
if [ ! -f .gpu_build/build-gpu.tar.gz ]; then
  note "refused: no pack (.gpu_build/build-gpu.tar.gz): run tools/gpu_deps.sh and tools/gpu_pack.sh here, and carry [\".gpu_deps\", \".gpu_build\"]"
  exit 2
fi
cat .gpu_build/build_info.txt >>"$summary"
differing=$(sha256sum --quiet -c .gpu_build/source_sums 2>&1 | head -3 | tr '\n' ';')
if [ -n "$differing" ]; then
  note "refused: the pack was built from other sources than this tree's ($differing); rebuild it with tools/gpu_pack.sh"
  exit 2
fi
if grep -q "uncommitted changes" .gpu_build/build_info.txt && [ -z "${ZT_ALLOW_DIRTY_PACK:-}" ]; then
  note "refused: the pack was built from uncommitted sources (no commit names its results); commit, re-pack, or set ZT_ALLOW_DIRTY_PACK=1 for a throwaway run"
  exit 2
fi
# A short hash names the pack's commit too (at least 7 characters).
packed_commit=$(cat .gpu_build/commit)
if [ "$commit" != unknown ] && [ ${#commit} -ge 7 ] && [ "${packed_commit#"$commit"}" != "$packed_commit" ]; then
  commit=$packed_commit
  export ZT_COMMIT=$commit
fi
if [ "$commit" != unknown ] && [ "$commit" != "$packed_commit" ]; then
  if [ -n "${ZT_COMMIT_GIVEN:-}" ]; then
    note "refused: ZT_COMMIT is $commit but the pack was built at $packed_commit; re-pack at HEAD"
  else  # the tree's .git, carried from an older checkout, names another commit than the pack's
    note "refused: ZT_COMMIT was not given, and this tree's git names $commit where the pack was built at $packed_commit; pass ZT_COMMIT=$packed_commit (the pack's .gpu_build/commit)"
  fi
  exit 2
fi
# No commit named and no git to tell one: the pack's, whose sources were checked file by file above.
if [ "$commit" = unknown ]; then
  commit=$packed_commit
  export ZT_COMMIT=$commit
  echo "commit: $commit (the pack's; no ZT_COMMIT given and no git here)" >>"$summary"
fi

# The carried packages, unpacked where nothing of the image is touched.
deps=/tmp/zt_deps
if ls .gpu_deps/*.deb >/dev/null 2>&1; then
  # The runtime libraries OpenBLAS needs (libgomp, libgfortran, libquadmath) go apart and after the
  # image's own on the search path, so PyTorch and the image keep theirs where they have them.
  for f in .gpu_deps/*.deb; do
    case $(basename "$f") in
      libgomp1_* | libgfortran5_* | libquadmath0_*) dpkg -x "$f" "$deps/fallback" ;;
      *) dpkg -x "$f" "$deps" ;;
    esac
  done
  # zlib1g-dev's libz.so points at /lib/...: point it at the unpacked library instead.
  ln -sf "$deps/lib/x86_64-linux-gnu/libz.so.1" "$deps/usr/lib/x86_64-linux-gnu/libz.so"
  # Not $deps/lib (zlib's runtime): python and torch keep the image's libz.
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:$deps/usr/lib/x86_64-linux-gnu/openmpi/lib:$deps/usr/lib/x86_64-linux-gnu/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "deps: $(ls .gpu_deps/*.deb | wc -l) packages unpacked into $deps" >>"$summary"
else
  note "refused: no .gpu_deps (run tools/gpu_deps.sh here and carry it): the packed binaries need its libraries"
  exit 2
fi
# OpenMPI, relocated: OPAL_PREFIX moves its plugins and help files, PMIX_INSTALL_PREFIX PMIx's.
if [ -x "$deps/usr/bin/orterun" ]; then
  export OPAL_PREFIX="$deps/usr" PMIX_INSTALL_PREFIX="$deps/usr/lib/x86_64-linux-gnu/pmix2"
  export PATH="$deps/usr/bin:$PATH"
  export ZT_SESSION_MPIRUN="$deps/usr/bin/orterun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x LD_LIBRARY_PATH -x OPAL_PREFIX -x PMIX_INSTALL_PREFIX -x ZT_REQUIRE_GPU"
fi
# cuDNN (loaded at run time by the cuDNN attention, linked by llm.c): PyTorch's wheel where the
# toolkit has none; where the machine has it, the GPU tests must run it rather than skip.
for lib in libcudart.so.13 libcublasLt.so.13 libnccl.so.2 libcudnn.so.9; do
  found=$(ls /usr/local/cuda/lib*/$lib /usr/local/cuda/targets/*/lib/$lib 2>/dev/null | head -1)
  [ -z "$found" ] && found=$(python3 -c "import nvidia, glob; print(next(iter(sorted(g for p in nvidia.__path__ for g in glob.glob(p + '/*/lib/$lib*'))), ''))" 2>/dev/null)
  echo "$lib: ${found:-not found}" >>"$summary"
  if [ -n "$found" ] && [ "$lib" != libcudart.so.13 ]; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$found")"
    [ "$lib" = libcudnn.so.9 ] && export ZT_REQUIRE_CUDNN=1
  fi
done
python=${ZT_SESSION_PYTHON:-$(command -v python3)}  # the python3 that holds PyTorch and numpy
# A machine with no GPU to see, or no PyTorch to time against: refused now, where every phase
# failed in turn and the call was spent for nothing.
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  note "refused: no GPU visible (nvidia-smi -L lists none${gpu_name:+; it named $gpu_name}): nothing here can run"
  exit 2
fi
if ! torch_facts=$("$python" -c 'import numpy, torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1); then
  note "refused: $python has no PyTorch or numpy ($(echo "$torch_facts" | tail -1)); set ZT_SESSION_PYTHON to one that has"
  exit 2
fi
echo "session python: $python $torch_facts" >>"$summary"
# torch.compile's caches for the PyTorch anchors: seeded from the last lease's on this kind of GPU
# (committed under tools/torch_compile_cache/), so a hit skips their compile (max-autotune's minutes).
# In the tree, not /tmp: ignored folders there stay between the calls of a warm machine.
export TORCHINDUCTOR_CACHE_DIR=$PWD/.gpu_session_cache/torch_inductor
compile_cache=tools/torch_compile_cache/$slug.tar.gz
if [ -f "$compile_cache" ]; then
  "$python" tools/torch_compile_cache.py seed "$compile_cache" --into "$TORCHINDUCTOR_CACHE_DIR" >>"$summary" 2>&1 ||
    note "torch compile cache: $compile_cache could not be seeded; the anchors compile from scratch"
else
  echo "torch compile cache: none for $slug ($compile_cache): the anchors compile from scratch" >>"$summary"
fi

# The packed binaries and CTest files, where they were built (a link from that path to this tree),
# and the CTest files' python at a fixed path.
packed_dir=$(cat .gpu_build/build_dir)
packed_src=$(dirname "$packed_dir")
if [ "$packed_src" != "$PWD" ]; then
  if [ -e "$packed_src" ] && [ "$(cd "$packed_src" && pwd -P)" != "$(pwd -P)" ]; then
    note "refused: $packed_src exists here and is not this tree; cannot place the packed build"
    exit 2
  fi
  mkdir -p "$(dirname "$packed_src")"
  ln -sfn "$PWD" "$packed_src"
fi
rm -rf build-gpu
mkdir -p build-gpu
tar -xzf .gpu_build/build-gpu.tar.gz -C build-gpu
[ "$(basename "$packed_dir")" != build-gpu ] && ln -sfn "$PWD/build-gpu" "$packed_dir"
printf '#!/bin/sh\nexec %s "$@"\n' "$python" >/tmp/zt_gpu_python
chmod +x /tmp/zt_gpu_python
# After the image's libraries (RUNPATH, ld.so.cache): CUDA's, then the carried runtime fallbacks.
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:$deps/fallback/usr/lib/x86_64-linux-gnu"
missing=$(ldd build-gpu/zerotrain | grep "not found" | tr -s ' \t\n' ' ')
if [ -n "$missing" ]; then
  note "refused: the packed zerotrain is missing libraries here: $missing"
  exit 2
fi
# cuBLASLt is opened on first use (dlopen, engine/base/device/cublaslt_library), which ldd does not
# list: open it as the binary will (this LD_LIBRARY_PATH; the binary's fallback is CUDA's lib64 too).
if ! "$python" -c "import ctypes; ctypes.CDLL('libcublasLt.so.13')" 2>>"$summary"; then
  note "refused: libcublasLt.so.13 does not open here (LD_LIBRARY_PATH: $LD_LIBRARY_PATH): every GPU product needs it"
  exit 2
fi
note "set-up done in $SECONDS s"

# --warm-autotune's background compile (see the top): started here, stopped by warm_stop (also on
# any exit: a job of its own process group would outlive the session's). Its pid file lets a later
# call on the same machine end one that a cut call left running, before anything is timed.
warm_pid=""
warm_pidfile=.gpu_session_cache/warm_autotune.pid
if [ -f "$warm_pidfile" ]; then
  left=$(cat "$warm_pidfile")
  # Only if that group still runs the warm compile (a pid can be reused).
  if ps -eo pgid=,args= | awk -v g="$left" '$1 == g' | grep -q -- "--warm-only"; then
    kill -KILL -- -"$left" 2>/dev/null && note "max-autotune: ended a warm compile a cut call left running"
  fi
  rm -f "$warm_pidfile"
fi
if [ "$warm_autotune" = 1 ]; then
  warm_t0=$SECONDS
  warm_limit=$((limit - SECONDS - 30))
  [ "$warm_limit" -ge 1 ] || warm_limit=1
  # What it tunes is timed beside the untimed phases' GPU work: the workers say so in their facts
  # (tools/bench_gpu_torch.py reads this marker, which travels with the cache).
  mkdir -p "$TORCHINDUCTOR_CACHE_DIR"
  echo "{\"tuned_beside\": \"${phases[*]}\", \"commit\": \"$commit\"}" >"$TORCHINDUCTOR_CACHE_DIR/zt_warm_autotune.json"
  # A job of its own (monitor mode: its process group is $!), so warm_stop ends its compile workers too.
  set -m
  nice -n 15 env TORCHINDUCTOR_COMPILE_THREADS=8 PYTHONUNBUFFERED=1 timeout -k 10 "$warm_limit" \
    "$python" tools/bench_gpu_torch.py --compile max-autotune --sdpa cudnn --warm-only \
    >/tmp/zt_warm_autotune.out 2>/tmp/zt_warm_autotune.log &
  warm_pid=$!
  set +m
  echo "$warm_pid" >"$warm_pidfile"
  note "max-autotune anchor: compiling in the background (TORCHINDUCTOR_CACHE_DIR), until the first timed phase"
fi
warm_stop() {  # $1: what comes next
  [ -n "$warm_pid" ] || return 0
  local rc=0 waited=0
  if kill -0 "$warm_pid" 2>/dev/null; then
    kill -TERM -- -"$warm_pid" 2>/dev/null || kill -TERM "$warm_pid" 2>/dev/null
    # Until the whole group is gone (its compile workers, the GPU context's teardown), at most 15 s.
    while kill -0 -- -"$warm_pid" 2>/dev/null && [ $waited -lt 15 ]; do sleep 1; waited=$((waited + 1)); done
    kill -KILL -- -"$warm_pid" 2>/dev/null
    wait "$warm_pid" 2>/dev/null
    note "  max-autotune warm compile: stopped unfinished after $((SECONDS - warm_t0)) s, before $1 (what it tuned stays in the cache)"
  else
    wait "$warm_pid" || rc=$?
    if [ $rc -eq 0 ]; then
      note "  max-autotune warm compile: done ($(tail -1 /tmp/zt_warm_autotune.out | cut -c1-300))"
    else
      note "  max-autotune warm compile: FAILED (exit $rc): $(tail -c 300 /tmp/zt_warm_autotune.log | tr '\n' ' ')"
    fi
  fi
  warm_pid=""
  rm -f "$warm_pidfile"
}
trap 'warm_stop "the exit"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

core='^(Cuda|NcclOneRank|RankDevice|DeviceMemory)|^gpu\.model_matches'
for i in "${!phases[@]}"; do
  p=${phases[$i]}
  case $p in tests | multirank) ;; *) warm_stop "phase $p" ;; esac
  # Its budget, but never into the later phases' or past the limit: a slow set-up or a warm
  # compile's stop comes out of this phase, where it ran late, rather than out of the call's end.
  later=0
  for q in "${phases[@]:i+1}"; do later=$((later + budget[$q])); done
  phase_deadline=$((SECONDS + budget[$p]))
  if [ $((limit - end_reserve - later)) -lt "$phase_deadline" ]; then
    phase_deadline=$((limit - end_reserve - later))
    cut=$((phase_deadline - SECONDS))
    note "phase $p (budget ${budget[$p]} s, cut to $((cut > 0 ? cut : 0)) s: the phases before it ran late)"
  else
    note "phase $p (budget ${budget[$p]} s)"
  fi
  log="$OUT/$p.log"
  case $p in
    tests)
      # The longest first: without cost data ctest starts tests in index order, and the whole-model
      # runs, registered last, were the ones the budget cut on 2026-11-28.
      mkdir -p build-gpu/Testing/Temporary
      {
        for t in gpu.model_matches_cpu_and_trains gpu.llama_matches_cpu_and_trains gpu.sample_matches_cpu \
          gpu.selective_checkpointing; do echo "$t 1 300"; done
        echo "---"
      } >build-gpu/Testing/Temporary/CTestCostData.txt
      # The core first, so a short run still tests what matters; multirank is its own phase. A test
      # without a TIMEOUT of its own (the gtests: 2.3 s at most on 2026-11-28) gets 60 s, so a hang
      # in a never-run path costs a lane a minute, not the step.
      # Each step's tally from its own lines of the log: a step cut by its limit prints none, and
      # must not show the one before it.
      tally() { tail -n +"$1" "$log" | grep -E "tests passed|tests failed" | tail -1 | sed 's/^/    /' >>"$summary"; }
      from=$(($({ wc -l <"$log"; } 2>/dev/null || echo 0) + 1))
      step "ctest core" 200 bash -c "cd build-gpu && ctest -L gpu -R '$core' --output-on-failure --timeout 60 -j 2" >>"$log" 2>&1
      tally "$from"
      # The rest is mostly parity runs (~40, 10-15 s each at -j 2 on the H200 on 2026-11-28, most of it
      # process, CUDA and torch start-up rather than work): more at once where the machine has the cores.
      rest_jobs=$(( $(nproc) >= 12 ? 4 : 2 ))
      from=$(($(wc -l <"$log") + 1))
      step "ctest rest" 240 bash -c "cd build-gpu && ctest -L gpu -E '$core|multirank|trajectory' --output-on-failure --timeout 240 -j $rest_jobs" >>"$log" 2>&1
      tally "$from"
      echo "    skipped: $(grep -c '(Skipped)' "$log")" >>"$summary"
      sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      # Without the NCCL cases: they hold streams and wait on peers, slow under memcheck.
      step "compute-sanitizer memcheck" 150 "$sanitizer" --tool memcheck --error-exitcode 1 \
        build-gpu/tests/zt_gpu_tests --gtest_brief=1 --gtest_filter=-NcclOneRank.* >>"$log" 2>&1
      grep "ERROR SUMMARY" "$log" | tail -1 | sed 's/^/    /' >>"$summary"
      ;;
    multirank)
      if [ -z "${ZT_SESSION_MPIRUN:-}" ]; then
        note "  multirank: FAILED (no OpenMPI in .gpu_deps: re-run tools/gpu_deps.sh)"
        failed=1
        continue
      fi
      # With several GPUs, first the path users train on and no session has run: a GPU a rank
      # through NCCL (2 ranks, and 4 where there are 4 GPUs); then the ranks sharing one GPU.
      gpus=$(visible_gpus)
      comms=(staged)
      nccl_ranks=()
      if [ "$gpus" -ge 2 ]; then
        comms=(nccl staged)
        nccl_ranks=(--nccl-ranks 2)
        [ "$gpus" -ge 4 ] && nccl_ranks+=(4)
      fi
      note "  $gpus GPU(s) visible: comm ${comms[*]} ${nccl_ranks[*]}"
      # Up to the phase's time less 40 s, which the whole-run trajectories below keep (of a phase cut
      # short too).
      phase_left=$((phase_deadline - SECONDS))
      step "several ranks (${comms[*]})" $((phase_left > 80 ? phase_left - 40 : phase_left)) \
        env PYTHONUNBUFFERED=1 "$python" tests/gpu/gpu_multirank_test.py \
        --zerotrain build-gpu/zerotrain --mpirun "$ZT_SESSION_MPIRUN" --device cuda --comm "${comms[@]}" \
        "${nccl_ranks[@]}" --out "$OUT/gpu_multirank_$slug.json" >>"$log" 2>&1
      grep -E "passed, .* failed" "$log" | tail -1 | sed 's/^/    /' >>"$summary"
      # Whole training runs against a float64 PyTorch loop through the staged collectives (ranks
      # share the GPU on a one-GPU machine; with several, each takes its own): ctest's
      # gpu.trainer_trajectory, which names the system mpirun the image lacks, run here instead.
      from=$(($(wc -l <"$log") + 1))
      # shellcheck disable=SC2086  # the launcher's words
      step "whole-run trajectories" 120 env PYTHONUNBUFFERED=1 "$python" tests/parity/trainer_trajectory_test.py \
        $ZT_SESSION_MPIRUN -- build-gpu/zerotrain --device cuda >>"$log" 2>&1
      tail -n +"$from" "$log" | grep -E "passed, .* failed" | tail -1 | sed 's/^/    /' >>"$summary"
      ;;
    bench)
      gpu_state "before zt_bench_kernels"
      step zt_bench_kernels 90 build-gpu/tools/zt_bench_kernels --commit "$commit" --out "$OUT" >>"$log" 2>&1
      gpu_state "after zt_bench_kernels"
      for f in "$OUT"/gpu_kernels_*.json; do [ -f "$f" ] && python3 tools/gpu_state.py --into "$f" gpu_state_after; done
      # Each kernel against ZT_KERNEL_BASELINE (a committed gpu_kernels_ JSON of this card): the table
      # in the log, the rows more than 5% slower in session.txt, so the call can still revert them,
      # and the run's variants side by side (a default and its tagged alternatives), which say which
      # one each default should be.
      if [ -n "$kernel_baseline" ]; then
        for f in "$OUT"/gpu_kernels_*.json; do
          [ -f "$f" ] || continue
          delta=$(mktemp)
          python3 tools/kernel_bench_delta.py "$kernel_baseline" "$f" >"$delta" 2>&1 || true
          cat "$delta" >>"$log"
          { grep -E "^zt_bench_kernels on|SLOWER|slower|^kernel_bench_delta" "$delta" || true; } | sed 's/^/    /' >>"$summary"
          sed -n '/^variants in the new run/,$p' "$delta" | sed 's/^/    /' >>"$summary"
          rm -f "$delta"
        done
      fi
      step bench_gpu $((budget[$p] - 20)) env PYTHONUNBUFFERED=1 "$python" tools/bench_gpu.py --zerotrain build-gpu/zerotrain \
        --llmc .gpu_build/train_gpt2cu --python "$python" --out "$OUT/gpu_bench_$slug.json" \
        --time-limit $((phase_deadline - SECONDS - 30)) ${ZT_BENCH_ARGS:-} >>"$log" 2>&1
      sed -n '/^GPT-2 124M/,/^wrote/p' "$log" | sed 's/^/    /' >>"$summary"
      ;;
    multigpu)
      gpus=$(visible_gpus)
      if [ "$gpus" -lt 2 ]; then
        note "  multigpu: not run ($gpus GPU visible; it needs 2 or more)"
        continue
      fi
      if [ -z "${ZT_SESSION_MPIRUN:-}" ]; then
        note "  multigpu: FAILED (no OpenMPI in .gpu_deps: re-run tools/gpu_deps.sh)"
        failed=1
        continue
      fi
      gpu_state "before bench_multi_gpu"
      step bench_multi_gpu $((budget[$p] - 20)) env PYTHONUNBUFFERED=1 "$python" tools/bench_multi_gpu.py \
        --zerotrain build-gpu/zerotrain --mpirun "$ZT_SESSION_MPIRUN" --python "$python" \
        --out "$OUT/gpu_multi_gpu_bench_$slug.json" --time-limit $((phase_deadline - SECONDS - 30)) >>"$log" 2>&1
      sed -n '/^GPT-2 124M on/,/^wrote/p' "$log" | sed 's/^/    /' >>"$summary"
      ;;
    llama)
      step bench_llama_gpu "${budget[$p]}" env PYTHONUNBUFFERED=1 "$python" tools/bench_llama_gpu.py \
        --zerotrain build-gpu/zerotrain --python "$python" --out "$OUT/gpu_llama_bench_$slug.json" \
        --time-limit $((phase_deadline - SECONDS - 15)) >>"$log" 2>&1
      sed -n '/^Llama/,/^wrote/p' "$log" | sed 's/^/    /' >>"$summary"
      ;;
    shakespeare)
      # exit 3 = stopped with a checkpoint: call again to continue.
      step shakespeare_gpu "${budget[$p]}" env PYTHONUNBUFFERED=1 "$python" tools/shakespeare_gpu.py --engines zerotrain \
        --zerotrain build-gpu/zerotrain --data runs/shakespeare_char_data --commit "$commit" --set precision.matmul=bf16 \
        --set precision.activations=bf16 --time-limit $((phase_deadline - SECONDS > 41 ? phase_deadline - SECONDS - 40 : 1)) \
        --out "$OUT/shakespeare_gpu_$slug.json" >>"$log" 2>&1
      ;;
    autotune)
      step bench_gpu_autotune $((budget[$p] - 10)) env PYTHONUNBUFFERED=1 "$python" tools/bench_gpu.py \
        --zerotrain build-gpu/zerotrain --llmc .gpu_build/train_gpt2cu --python "$python" \
        --engines zerotrain-s0 pytorch pytorch-max-autotune-cudnn --rounds 3 --no-profile \
        --out "$OUT/gpu_bench_autotune_$slug.json" --time-limit $((phase_deadline - SECONDS - 25)) >>"$log" 2>&1
      sed -n '/^GPT-2 124M/,/^wrote/p' "$log" | sed 's/^/    /' >>"$summary"
      ;;
    llmc)
      step llmc_interop "${budget[$p]}" env PYTHONUNBUFFERED=1 "$python" tools/llmc_interop.py \
        --llmc .gpu_build/train_gpt2cu --zerotrain build-gpu/zerotrain --device cuda \
        --out "$OUT/llmc_interop_$slug.json" >>"$log" 2>&1
      grep "llm.c's own model file" "$log" | tail -1 | sed 's/^/    /' >>"$summary"
      ;;
    sampling)
      step bench_sampling "${budget[$p]}" env PYTHONUNBUFFERED=1 "$python" tools/bench_sampling.py \
        --zerotrain build-gpu/zerotrain --device cuda --dtype bf16 --tokens 128 1000 --rounds 2 \
        --out "$OUT/sampling_bench_$slug.json" >>"$log" 2>&1
      sed -n '/^zerotrain sample on/,/^wrote/p' "$log" | sed 's/^/    /' >>"$summary"
      ;;
    asyncckpt)
      step async_checkpoint_bench "${budget[$p]}" env PYTHONUNBUFFERED=1 "$python" tools/bench_async_checkpoint.py \
        --zerotrain build-gpu/zerotrain --device cuda --steps 300 --every 100 \
        --out "$OUT/async_checkpoint_bench_$slug.json" >>"$log" 2>&1
      sed -n '/^GPT-2 124M/,/^wrote/p' "$log" | sed 's/^/    /' >>"$summary"
      ;;
  esac
  note "phase $p done at $SECONDS s"
done
warm_stop "the end"
gpu_state "at end"
# What the anchors compiled, for the next lease (copy it to tools/torch_compile_cache/ and commit it):
# after every phase, and only into a free one of $OUT's 8 places, never in a result's.
if [ $((limit - SECONDS)) -lt 15 ]; then
  note "torch compile cache: not returned (under 15 s of the $limit s limit left)"
elif [ "$(find "$OUT" -maxdepth 1 -type f | wc -l)" -lt "$out_files_max" ]; then
  # Within what is left of the limit; a save cut short leaves no partial file to take a place.
  timeout -k 3 $((limit - SECONDS - 3)) "$python" tools/torch_compile_cache.py save "$TORCHINDUCTOR_CACHE_DIR" \
    --out "$OUT/torch_compile_cache_$slug.tar.gz" --device "$slug" --commit "$commit" 2>&1 | tee -a "$summary"
  case ${PIPESTATUS[0]} in 124 | 137) note "torch compile cache: not returned (its save ran past the limit)" ;; esac
  rm -f "$OUT/torch_compile_cache_$slug.tar.gz.partial"
else
  note "torch compile cache: not returned ($OUT already holds the $out_files_max files a call brings back)"
fi
note "session: $([ $failed -eq 0 ] && echo "every step passed" || echo "some steps FAILED") in $SECONDS s"
exit $failed
