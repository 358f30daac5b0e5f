"""What tools/bench_cpu.py says beside its figures: the machine and the CPU that other processes
and the hypervisor took while it measured, the warnings that make its numbers unreliable (an sgemm
peak a side outran, competition for the cores, BLAS core types that differ), and its table with the
targets' verdicts."""
import json
import os
import platform

TORCH_SIDES = {"pytorch": "PyTorch", "pytorch_zt_blas": "PyTorch/zt"}  # result key -> table label


def cpu_counters():
    """(busy s, steal s) over all cores from /proc/stat, this process's CPU s (children included), wall s."""
    fields = [int(x) / os.sysconf("SC_CLK_TCK") for x in open("/proc/stat").readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    t = os.times()
    return user + nice + system + irq + softirq, steal, t.user + t.system + t.children_user + t.children_system, t.elapsed


def cpu_competition(start):
    """Cores' worth of CPU that other processes, and the hypervisor (steal), took while we measured.
    ZT_TEST_CPU_COMPETITION (JSON of the same keys) stands in for the measure: the tests' verdicts on
    a machine whose other tests load it."""
    if os.environ.get("ZT_TEST_CPU_COMPETITION"):
        return json.loads(os.environ["ZT_TEST_CPU_COMPETITION"])
    end = cpu_counters()
    busy, steal, ours, wall = (e - s for e, s in zip(end, start))
    return {"other_processes_cores": max(0.0, busy - ours) / wall, "steal_cores": steal / wall}


def machine_info():
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "unknown")
    return {"cpu_model": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "hostname": platform.node()}


def over_peak(r):
    """{side's label: its share of the sgemm peak} for the sides past 100% of it. No training step
    outruns the machine's own GEMM: such a peak was measured while other processes took cores (a
    run under load read 192.7% and PASS), so no side's share of it means anything."""
    return {label: r[key]["fraction_of_sgemm_peak"] for key, label in {"zerotrain": "zerotrain", **TORCH_SIDES}.items()
            if key in r and r[key]["fraction_of_sgemm_peak"] > 1.0}


def under_load(competition):
    """Whether other processes or the hypervisor took enough CPU while this measured (cpu_competition)
    that no target is judged (a run beside 0.93 cores of other work measured sgemm at a third of its
    idle peak, and zerotrain's share of it passed)."""
    return competition["other_processes_cores"] > 0.2 or competition["steal_cores"] > 0.1


def load_warning(competition):
    """The warning under load, "" without it."""
    if not under_load(competition):
        return ""
    return (f"other processes used {competition['other_processes_cores']:.2f} cores and the hypervisor stole "
            f"{competition['steal_cores']:.2f} while this ran: timings are unreliable; rerun on an idle machine")


def warnings(r):
    """Conditions that make the numbers unreliable or not comparable, said next to the table."""
    found = []
    if loaded := load_warning(r["machine"]["cpu_competition"]):
        found.append(loaded)
    over = over_peak(r)
    if over:
        found.append(f"the sgemm peak ({r['sgemm']['gflops']:.1f} GFLOP/s) is below what "
                     + ", ".join(f"{label} reached ({share:.1%} of it)" for label, share in over.items())
                     + ": it was measured under load and is unreliable, so no share of peak is given; "
                       "rerun on an idle machine")
    cores = {key: r[key]["blas"]["core"] for key in TORCH_SIDES if key in r}
    cores.update(zerotrain=r["zerotrain"]["blas_core"], sgemm=r["sgemm"]["core"])
    if len(set(cores.values())) > 1:
        found.append("BLAS cores differ: " + ", ".join(f"{k} {v}" for k, v in cores.items()))
    if r["threads"] > r["machine"]["usable_cores"]:
        found.append(f"--threads {r['threads']} exceeds the {r['machine']['usable_cores']} usable cores")
    return found


def wait_policy(env):
    """A side's OMP_WAIT_POLICY as its JSON records it: results from before it was recorded say so."""
    if "OMP_WAIT_POLICY" not in env:
        return "not recorded"
    return env["OMP_WAIT_POLICY"] or "unset (torch spins between ops)"


def print_table(r):
    m, t, fl = r["config"]["model"], r["config"]["train"], r["flops"]
    family = (f"Llama {m['n_layer']}L/{m['n_head']}H ({m['n_kv_head']} kv)/{m['n_embd']}C/"
              f"{m['intermediate_size']}I" if m["arch"] == "llama" else f"GPT {m['n_layer']}L/{m['n_head']}H/{m['n_embd']}C")
    print(f"\nCPU training step: {family}, vocab {m['vocab_size']}, "
          f"B={t['micro_batch']} T={t['seq_len']} x{t.get('grad_accum', 1)} ({fl['tokens_per_step']} tokens/step), "
          f"{r['config']['precision']['param_dtype']}, {r['threads']} threads, median of steps "
          f"{r['warmup'] + 1}..{r['steps']}" + (f", the median of {r['rounds']} interleaved rounds" if r["rounds"] > 1
                                                 else ""))
    print(f"machine: {r['machine']['cpu_model']}, {r['machine']['cores']} cores; zerotrain BLAS "
          f"{r['zerotrain']['blas_library']} core {r['zerotrain']['blas_core']} ({r['zerotrain']['blas_core_source']})")
    for key, label in TORCH_SIDES.items():
        if key in r:
            print(f"{label}: torch {r[key]['torch_version']}, BLAS {r[key]['blas'].get('library', 'no OpenBLAS found')} "
                  f"core {r[key]['blas']['core']}, OMP_WAIT_POLICY {wait_policy(r[key]['env'])}")
    print(f"sgemm peak ({r['sgemm']['size']}^3, {r['sgemm']['threads']} threads, core {r['sgemm']['core']}): "
          f"{r['sgemm']['gflops']:.1f} GFLOP/s")
    print(f"flops/token = 6*N + 6*L*C*T = {fl['per_token'] / 1e6:.2f} MFLOP "
          f"(N = {fl['n_params']:,} incl. embeddings, vocab padded {m['vocab_size']} -> {fl['padded_vocab_size']})\n")
    print(f"{'':<11}{'ms/step':>10}{'min':>9}{'tokens/s':>11}{'GFLOP/s':>9}{'of peak':>9}")
    unreliable = r["sgemm"]["peak_unreliable"]
    for key, name in {"zerotrain": "zerotrain", **TORCH_SIDES}.items():
        if key not in r:
            continue
        s = r[key]
        share = "n/a" if unreliable else format(s["fraction_of_sgemm_peak"], ".1%")
        print(f"{name:<11}{s['ms_per_step_median']:>10.1f}{s['ms_per_step_min']:>9.1f}{s['tokens_per_s']:>11.0f}"
              f"{s['gflops']:>9.1f}{share:>9}")
    for warning in r["warnings"]:
        print(f"warning: {warning}")
    tg = r["targets"]
    print()
    for key, label in TORCH_SIDES.items():
        if key in r["speedup"]:
            # The project's 2x target is against Debian's PyTorch as installed (same core type, its
            # OpenMP threads told not to spin: --torch-wait-policy); PyTorch on the OpenMP OpenBLAS
            # is another baseline, reported for information.
            verdict = {True: "PASS", False: "FAIL", None: "not judged (measured under load)"}[tg["speedup_pass"][key]]
            note = "the project's target" if key == "pytorch" else "another baseline, for information"
            by_round = r["speedup_by_round"][key]
            spread = f" (rounds {min(by_round):.2f}-{max(by_round):.2f}x)" if len(by_round) > 1 else ""
            what = f"({label} ms / zerotrain ms)" if len(by_round) == 1 else \
                f"(median of the rounds' {label} ms / zerotrain ms)"
            print(f"speedup over {label} {what}: {r['speedup'][key]:.2f}x{spread}   "
                  f"target >= {tg['speedup_min']:.1f}x: {verdict} ({note})")
    if unreliable:
        print(f"zerotrain fraction of sgemm peak: unreliable (the peak was measured under load; see the warning)   "
              f"target >= {tg['fraction_of_peak_min']:.0%}: not judged")
    elif tg["fraction_pass"] is None:
        print(f"zerotrain fraction of sgemm peak: {r['zerotrain']['fraction_of_sgemm_peak']:.1%}   "
              f"target >= {tg['fraction_of_peak_min']:.0%}: not judged (measured under load)")
    else:
        print(f"zerotrain fraction of sgemm peak: {r['zerotrain']['fraction_of_sgemm_peak']:.1%}   "
              f"target >= {tg['fraction_of_peak_min']:.0%}: {'PASS' if tg['fraction_pass'] else 'FAIL'}")
