#!/bin/bash
# The behaviour-preserving check of a refactor: a matrix of short GPT-2 and Llama runs (fp32 and
# bf16, ZeRO stages 0-3 on 1-3 ranks, the head in chunks, split units, activation checkpointing,
# dropout, accumulation, tied heads; a prepared single-file dataset) and `memory --json` for every shipped config, written by one
# zerotrain binary into OUTDIR as small files (*.metrics: every train/eval record's step, loss,
# grad_norm, val_loss, lr, tokens; *.weights: a hash of final.safetensors' tensors plus its
# metadata (its data files' identity too) with the run directory left out and OUTDIR written as such; mem_*.json). Run it with the binary before and after
# the change and compare the two folders: `diff -r` on those files must be empty.
# usage: tools/bitwise_matrix.sh PATH/TO/zerotrain OUTDIR   (needs mpirun; ~1 minute on 2 cores)
# OUTDIR is made afresh: a new folder, or an earlier matrix's (marked by its .bitwise_matrix file),
# which is replaced; any other folder is refused, never emptied. Configs whose memory cannot be
# predicted here (the fine-tune recipes name downloaded weights) are listed as skipped.
set -u
if [ $# -ne 2 ] || [ -z "$2" ]; then echo "usage: tools/bitwise_matrix.sh PATH/TO/zerotrain OUTDIR" >&2; exit 2; fi
if [ ! -x "$1" ] || [ -d "$1" ]; then echo "bitwise_matrix: $1: not an executable zerotrain binary" >&2; exit 2; fi
if [ -e "$2" ] && [ ! -f "$2/.bitwise_matrix" ] && [ -n "$(ls -A "$2" 2>/dev/null || echo file)" ]; then
  echo "bitwise_matrix: $2 exists and is not an earlier matrix's output: give a new folder (nothing was removed)" >&2
  exit 2
fi
B=$(realpath "$1"); O=$2; rm -rf "$O"
mkdir -p "$O" && O=$(realpath "$O") && [ -n "$O" ] || { echo "bitwise_matrix: cannot make $2" >&2; exit 2; }
touch "$O/.bitwise_matrix"
M2="mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2"
M3="mpirun --oversubscribe --allow-run-as-root --bind-to none -np 3"
cd "$(dirname "$0")/.."
C="--set log.progress=plain --set log.sample_tokens=0 --set train.num_threads=1"
run() { name=$1; shift; "$@" > $O/$name.log 2>&1 || echo "FAILED $name" >> $O/failures; }
G="--config configs/tiny.json --set train.max_steps=12 --set train.eval_every=6 --set train.micro_batch=4"
L="--config configs/llama_tiny_debug.json --set train.max_steps=12 --set train.eval_every=6 --set data.dataset=embedded"
run g0 $B train $G --run-dir $O/g0 $C
run g1 $M2 $B train $G --run-dir $O/g1 $C --set zero.stage=1 --set train.deterministic=true
run g2 $M3 $B train $G --run-dir $O/g2 $C --set zero.stage=2 --set precision.param_dtype=bf16 --set train.grad_accum=2 --set model.dropout=0.1
run g3 $M2 $B train $G --set model.vocab_size=200 --run-dir $O/g3 $C --set zero.stage=3 --set precision.param_dtype=bf16 --set precision.activations=bf16 --set train.head_chunks=3 --set train.block_units=2 --set train.activation_checkpointing=every:2
run g4 $M3 $B train $G --set model.vocab_size=200 --run-dir $O/g4 $C --set zero.stage=3 --set train.activation_checkpointing=all --set train.deterministic=true --set train.head_chunks=2
run l0 $B train $L --run-dir $O/l0 $C
run l1 $M2 $B train $L --run-dir $O/l1 $C --set zero.stage=1 --set precision.param_dtype=bf16
run l2 $M3 $B train $L --run-dir $O/l2 $C --set zero.stage=2 --set train.block_units=2 --set train.deterministic=true
run l3 $M2 $B train $L --run-dir $O/l3 $C --set zero.stage=3 --set precision.param_dtype=bf16 --set precision.activations=bf16 --set train.head_chunks=2 --set train.block_units=2 --set train.activation_checkpointing=all
run l4 $M3 $B train $L --run-dir $O/l4 $C --set zero.stage=3 --set model.tie_embeddings=true --set train.activation_checkpointing=every:2 --set train.grad_accum=2
run l5 $M2 $B train $L --run-dir $O/l5 $C --set zero.stage=3 --set model.tie_embeddings=true --set train.head_chunks=2 --set precision.param_dtype=bf16 --set train.block_units=2
run prep $B prepare --text ../shared/data/tinyshakespeare.txt --out $O/prep
run g6 $M2 $B train $G --set data.dataset=$O/prep --set model.vocab_size=65 --run-dir $O/g6 $C --set zero.stage=3
run g5 $B train $G --set model.vocab_size=200 --run-dir $O/g5 $C --set train.head_chunks=3 --set model.dropout=0.1 --set train.grad_accum=2
for r in g0 g1 g2 g3 g4 g5 g6 l0 l1 l2 l3 l4 l5; do
  [ -f $O/$r/metrics.jsonl ] || { echo "MISSING $r" >> $O/failures; continue; }
  /usr/bin/python3 -c "
import json
recs=[json.loads(l) for l in open('$O/$r/metrics.jsonl')]
keep=('step','loss','grad_norm','val_loss','lr','tokens')
print(json.dumps([{k:x[k] for k in keep if k in x} for x in recs if x.get('type') in ('train','eval')]))" > $O/$r.metrics
  /usr/bin/python3 -c "
import json,struct,hashlib
b=open('$O/$r/final.safetensors','rb').read(); n=struct.unpack('<Q',b[:8])[0]; h=json.loads(b[8:8+n])
m=h.pop('__metadata__',{}); rc=json.loads(m.pop('run_config','{}')); rc.get('log',{}).pop('run_dir',None)
print(hashlib.sha256(json.dumps(h,sort_keys=True).encode()+b[8+n:]).hexdigest()); print(json.dumps(m,sort_keys=True).replace('$O/', 'OUTDIR/'))
print(json.dumps(rc,sort_keys=True).replace('$O/', 'OUTDIR/'))" > $O/$r.weights
done
# memory --json of every shipped config on 1 and 4 ranks, and split (the head in 2 chunks where its
# vocabulary has room for them, the blocks in 2 units); each must be JSON, or the config is listed
# as skipped with the reason (a fine-tune recipe's train.init_from names downloaded weights).
mem() { out=$1; shift; $B memory --json "$@" > "$out" 2> "$out.err" || return 1; }
for c in configs/*.json; do
  n=$(basename $c .json)
  if ! mem $O/mem_${n}_r1.json --config $c --ranks 1; then
    echo "$n: $(tail -1 $O/mem_${n}_r1.json.err)" >> $O/skipped; rm -f $O/mem_${n}_r1.json $O/mem_${n}_r1.json.err
    continue
  fi
  mem $O/mem_${n}_r4.json --config $c --ranks 4 || echo "FAILED mem_${n}_r4" >> $O/failures
  mem $O/mem_${n}_split.json --config $c --ranks 2 --set train.head_chunks=2 --set train.block_units=2 ||
    mem $O/mem_${n}_split.json --config $c --ranks 2 --set train.block_units=2 || echo "FAILED mem_${n}_split" >> $O/failures
  rm -f $O/mem_${n}_r1.json.err $O/mem_${n}_r4.json.err $O/mem_${n}_split.json.err
done
if [ -f $O/skipped ]; then echo "memory not predicted (skipped):"; sed 's/^/  /' $O/skipped; fi
if [ -f $O/failures ]; then cat $O/failures; exit 1; fi
echo "bitwise matrix written to $O"
