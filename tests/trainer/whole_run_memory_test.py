#!/usr/bin/env python3
"""A whole run's memory peaks against the prediction, to the byte, through the real binary and
real ranks: each run trains 2 steps, evaluates, samples and writes final.safetensors, and its
summary's peaks (rank 0's, over the whole run) equal the step's prediction in every category but
workspace, which holds the final gather's buffer on top: the largest unit in fp32, padded to the
optimizer's shards (computed here, and equal to `zerotrain memory --json`'s final_gather_buffer).
The table `train` prints at the end says so: every ratio 1.000 (or "-"). Every run's peak total
(the categories' sum at one moment) is within `required`, the largest phase's category sum the
memory check weighs; with a large token table beside few activations, the final gather is that
phase.

Configs: configs/tiny.json at stages 0-3 with f32 and bf16 parameters (bf16 with fp32 activations:
the sample's own model holds its fp32 unit copies in place of the training model's, which it had
held beside them), 1-3 ranks, a Llama, hybrid sharding on 4 ranks (a unit padded to the group),
a large token table, deterministic mode, bf16 activations, every block checkpointed at
micro-batch 1 (a sample beside a step that keeps few activations), multiple-choice scoring with
bf16 parameters; a run without final.safetensors, whose peaks are the step's; and one whose sample
passes both a step's and the final gather's sums (one layer, selective checkpointing,
micro-batch 1; at stage 3, many checkpointed layers and a prompt through the key/value cache),
which the memory check weighs by the sample's bound (`sample_total`); and multiple-choice
examples longer than a training window beside a step that keeps few activations, whose scorer
holds the run's peak total: predicted to the byte (`choices_total`, and by category
`choices_bytes`), weighed by the check, which refuses an offer a byte short of it for that.

usage: whole_run_memory_test.py MPIRUN [FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from choice_file_util import write_choice_file  # noqa: E402
from run_dir_util import mpi_driver, ranks_trainer, train_records  # noqa: E402

TINY = os.path.join(ROOT, "configs", "tiny.json")
LLAMA = os.path.join(ROOT, "configs", "llama_tiny_debug.json")
# Short runs that still evaluate, sample (a few tokens) and write their final weights.
SHORT = ["train.max_steps=2", "train.eval_batches=1", "log.sample_tokens=8"]


def whole_run_table_ratios(stdout):
    """The ratio column of the table printed after "over the whole run" (one per category)."""
    tail = stdout.split("over the whole run", 1)[-1].splitlines()
    rows = [line.split() for line in tail if line.split()[:1] and line.split()[0] in CATEGORIES]
    return [r[-1] for r in rows]


CATEGORIES = ("parameters", "master_weights", "gradients", "optimizer_states", "activations", "comm_buffers",
              "workspace")


def main():
    checks = Checks()
    launcher, binary, work, _, env = mpi_driver(checks, "zt_whole_run_memory_")
    # Multiple-choice examples in the tiny vocabulary: the scorer's models come and go too.
    choices = os.path.join(work, "choices.bin")
    write_choice_file(choices, [(i % 4, [1 + (7 * i + j) % 40 for j in range(20)],
                                 [[1 + (3 * i + k * j) % 40 for j in range(3 + k)] for k in range(4)])
                                for i in range(8)])
    # Contexts of 50 tokens: the scorer's rows are longer than a 16-token training window.
    long_choices = os.path.join(work, "long_choices.bin")
    write_choice_file(long_choices, [(i % 4, [1 + (7 * i + j) % 40 for j in range(50)],
                                      [[1 + (3 * i + k * j) % 40 for j in range(5 + k)] for k in range(4)])
                                     for i in range(8)])
    few_activations = ["model.n_layer=1", "model.n_embd=64", "model.n_head=2", "train.seq_len=16",
                       "train.micro_batch=1", "train.grad_accum=1", "train.activation_checkpointing=all",
                       f"data.choice_file={long_choices}", "log.sample_tokens=0"]
    cases = [(f"tiny_s{stage}_{dtype}_n{ranks}", TINY, ranks,
              [f"zero.stage={stage}", f"precision.param_dtype={dtype}"])
             for stage in range(4) for dtype in ("f32", "bf16") for ranks in ((2,) if stage % 3 else (1, 3))]
    cases += [("llama_s3_bf16_n2", LLAMA, 2, ["zero.stage=3", "precision.param_dtype=bf16"]),
              # Width 130: the largest unit (204490 elements) pads differently to the group's 2
              # ranks than to the world's 4.
              ("tiny_hybrid_n4", TINY, 4,
               ["zero.stage=3", "zero.shard_group_size=2", "model.n_embd=130", "model.n_head=2"]),
              # A large token table beside few activations: the final gather is the run's peak.
              ("large_table_bf16_n1", TINY, 1,
               ["zero.stage=0", "precision.param_dtype=bf16", "model.vocab_size=50257", "model.n_embd=64",
                "model.n_layer=1", "model.n_head=2", "model.block_size=8", "train.micro_batch=1"]),
              ("tiny_deterministic_n2", TINY, 2, ["zero.stage=2", "train.deterministic=true"]),
              ("tiny_bf16_activations_n2", TINY, 2,
               ["zero.stage=3", "precision.param_dtype=bf16", "precision.activations=bf16"]),
              # A step that keeps few activations beside a sample (whose model frees each
              # block's after its forward: it had held every block's, 2.45 MB against 0.72).
              ("tiny_checkpointed_micro_batch_1_n1", TINY, 1,
               ["zero.stage=0", "train.activation_checkpointing=all", "train.micro_batch=1",
                "log.sample_tokens=80"]),  # past the context: the window at its longest
              # A sample's window past a step that keeps very few activations (one layer,
              # selective checkpointing, micro-batch 1): its peak total passed the step's and the
              # final gather's sums, so the memory check weighs a bound of the sample's.
              ("sample_decides_n1", TINY, 1,
               ["zero.stage=0", "model.n_layer=1", "model.n_embd=64", "model.n_head=2", "model.vocab_size=64",
                "train.activation_checkpointing=selective", "train.micro_batch=1", "train.grad_accum=1",
                "log.sample_tokens=100"]),
              # At stage 3 on 2 ranks, 48 narrow layers all checkpointed, a 63-character prompt
              # through the key/value cache: the sample's forwards gather whole units as a step's
              # do (a bound without them was passed: 23,380,704 bytes against 23,366,272).
              ("sample_decides_s3_n2", TINY, 2,
               ["zero.stage=3", "model.n_layer=48", "model.n_embd=64", "model.n_head=2", "model.vocab_size=64",
                "train.activation_checkpointing=all", "train.micro_batch=1", "train.grad_accum=1",
                "log.sample_tokens=1", "log.sample_prompt=" + "the " * 15 + "and"]),
              ("tiny_bf16_choices_n2", TINY, 2,
               ["zero.stage=3", "precision.param_dtype=bf16", f"data.choice_file={choices}",
                "log.sample_tokens=0"]),  # the scorer's models alone after the steps
              # The scorer's one 55-token row a forward, beside 16-token steps: its peak total
              # passes a step's, the set-up's and the final gather's (1,449,184 bytes, where the
              # check weighed 1,373,696 without it).
              ("choices_decide_n1", TINY, 1, ["zero.stage=0", *few_activations]),
              # On 2 ranks its forwards reduce nothing: no staging of the step's (1,332,576
              # bytes weighed with it, 1,215,968 held).
              ("choices_decide_s1_n2", TINY, 2, ["zero.stage=1", *few_activations]),
              # At stage 3, units kept for a backward (reshard_after_forward false) that the
              # scorer's forwards free at their release (43,520 bytes of parameters against a
              # step's 51,840), 4-token steps.
              ("choices_decide_s3_n2", TINY, 2,
               ["zero.stage=3", *few_activations, "model.n_layer=2", "model.n_embd=16", "train.seq_len=4",
                "zero.reshard_after_forward=false"]),
              # Its peaks by category on 2 ranks at stage 3 with bf16 parameters (gathered
              # units, the scorer's own fp32 unit copies).
              ("choices_s3_bf16_n2", TINY, 2, ["zero.stage=3", "precision.param_dtype=bf16", *few_activations]),
              ("tiny_no_final_weights_n2", TINY, 2,
               ["zero.stage=3", "precision.param_dtype=bf16", "log.final_weights=false"])]
    for name, config, ranks, sets in cases:
        train = ranks_trainer(checks.check, launcher, binary, config, work, env)
        run_dir = train(name, ranks, *SHORT, *sets)
        if run_dir is None:
            continue
        stdout = train.last_stdout
        records = train_records(run_dir)
        step = next(r for r in records if r["type"] == "memory")["predicted_bytes"]
        summary = next(r for r in records if r["type"] == "summary")
        measured = summary["memory_peak_bytes"]
        # The categories' sum at its highest moment (memory_peak_bytes holds each one's own peak).
        total_peak = summary.get("memory_total_peak_bytes", -1)
        samples = "log.sample_tokens=0" not in sets
        checks.check(any(r["type"] == "eval" for r in records) and
                     any(r["type"] == "sample" for r in records) == samples,
                     f"{name}: the run evaluated{' and sampled' if samples else ''}")
        if any(kv.startswith("data.choice_file=") for kv in sets):
            checks.check(any(r["type"] == "eval" and r.get("choice_examples") == 8 for r in records),
                         f"{name}: the 8 multiple-choice examples were scored")
        final_weights = "log.final_weights=false" not in sets
        checks.check(os.path.exists(os.path.join(run_dir, "final.safetensors")) == final_weights,
                     f"{name}: final.safetensors written: {final_weights}")
        predicted = dict(step)
        p = subprocess.run([binary, "memory", "--config", config, "--ranks", str(ranks), "--json",
                            *[a for kv in SHORT + sets for a in ("--set", kv)]],
                           capture_output=True, text=True, timeout=60)
        if not checks.check(p.returncode == 0, f"{name}: memory --json exits 0 ({p.stderr[-300:]})"):
            continue
        memory = json.loads(p.stdout)
        value = dict(kv.split("=", 1) for kv in sets)
        stage = int(value["zero.stage"])
        at = memory["stages"][stage]
        if final_weights:
            # The unit gathered whole, padded to the optimizer's shards: the group's ranks under
            # hybrid sharding, none at stage 0.
            shards = int(value.get("zero.shard_group_size", ranks)) if stage >= 1 else 1
            unit = 4 * (-(-memory["max_unit_numel"] // shards) * shards)
            checks.check(at.get("final_gather_buffer") == unit,
                         f"{name}: the final gather's buffer is the largest unit padded to {shards} shard(s)"
                         f" ({at.get('final_gather_buffer')} against {unit} bytes)")
            predicted["workspace"] += unit
        if "data.choice_file" in value:  # each category's larger of the above and the scorer's
            checks.check("choices_bytes" in at, f"{name}: memory --json predicts the scorer's peaks")
            predicted = {k: max(v, at.get("choices_bytes", {}).get(k, 0)) for k, v in predicted.items()}
        if name.startswith("sample_decides"):
            checks.check(at.get("sample_total", 0) == at["required"] > max(at["total"], at["final_gather_total"])
                         and total_peak > max(at["total"], at["final_gather_total"]),
                         f"{name}: the sample's peak total {total_peak} passes a step's {at['total']} and the final"
                         f" gather's {at['final_gather_total']}; the check weighs the sample's bound"
                         f" ({at.get('sample_total')})")
            checks.check(0 < total_peak <= at["required"],
                         f"{name}: the run's peak total {total_peak} is within the required {at['required']}")
            continue  # its activations row is the sample's, which the table (a step's and the gather's) omits
        diff = {k: measured[k] - predicted[k] for k in predicted if measured[k] != predicted[k]}
        checks.check(not diff, f"{name}: the whole run's peaks on rank 0 equal the prediction to the byte"
                               f" (measured minus predicted: {diff or 'none'})")
        # At one moment, the run held no more than the memory check weighed (the largest phase's
        # category sum); with a large table and few activations that phase is the final gather.
        checks.check(0 < total_peak <= at["required"],
                     f"{name}: the run's peak total {total_peak} is within the required {at['required']}")
        if name.startswith("choices_decide"):
            # Its comm_buffers are the rows' losses summed after its model is freed.
            others = max(at["total"], at["setup_total"], at["final_gather_total"])
            at_once = at["choices_total"] - at["choices_bytes"]["comm_buffers"]
            checks.check(total_peak == at_once and at["choices_total"] == at["required"] > others,
                         f"{name}: the scorer's peak total {total_peak} equals its prediction {at_once}"
                         f" (its sum {at['choices_total']} less the losses' all-reduce), above the other"
                         f" phases' {others}; the check weighs it")
            refused = subprocess.run(
                [*launcher, "-np", str(ranks), binary, "train", "--config", config, "--run-dir",
                 os.path.join(work, name + "_refused"),
                 *[a for kv in SHORT + sets for a in ("--set", kv)]], capture_output=True, text=True, timeout=120,
                env=dict(env, ZT_TEST_AVAILABLE_BYTES=str(at["required"] - 1)))
            checks.check(refused.returncode == 2 and "to score its multiple-choice examples" in refused.stderr
                         and "leave data.choice_file out" in refused.stderr,
                         f"{name}: an offer a byte short is refused for the scorer (exit {refused.returncode}:"
                         f" {refused.stderr.strip()[-300:]})")
        if name.startswith("large_table"):
            checks.check(total_peak > at["total"] and at["required"] == at["final_gather_total"],
                         f"{name}: the final gather is the run's peak ({total_peak} over a step's {at['total']}),"
                         f" as predicted ({at['final_gather_total']})")
        ratios = whole_run_table_ratios(stdout)
        checks.check(len(ratios) == len(CATEGORIES) and all(r in ("1.000", "-") for r in ratios),
                     f"{name}: the whole-run table's ratios are 1.000 on every rank ({ratios})")
    # Away from the run (a file not on this machine), memory predicts the rest and says what it left out.
    p = subprocess.run([binary, "memory", "--config", TINY, "--ranks", "1", "--json", "--set",
                        f"data.choice_file={os.path.join(work, 'absent.bin')}"], capture_output=True, text=True,
                       timeout=60)
    notes = json.loads(p.stdout).get("notes", []) if p.returncode == 0 else []
    checks.check(any("multiple-choice scorer is left out" in n and "absent.bin" in n for n in notes)
                 and "choices_total" not in json.loads(p.stdout)["stages"][0],
                 f"memory with an absent data.choice_file: exit {p.returncode}, the scorer left out ({notes})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
