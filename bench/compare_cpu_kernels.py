#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""compare_cpu_kernels.py (issue 16): one GPT-2 training step on the CPU, nnt with each CPU
GEMM backend (NNT_GEMM=blis, NNT_GEMM=onednn) at fp32 and --precision bf16, against PyTorch
eager fp32 and PyTorch bf16 autocast, all in one run, interleaved rounds, medians.

It drives compare_pytorch.py's pieces (the nnt-train command and its train.csv parsing; the
PyTorch worker process, whose --precision bf16 on the CPU is torch.autocast('cpu',
dtype=torch.bfloat16) around forward + loss, fp32 parameters and AdamW), so the step is
timed exactly as there. Not a test; run by hand with a Python that has torch and
transformers, results to bench/RESULTS-cpu-kernels.md:

    python bench/compare_cpu_kernels.py --build-dir BUILD [--threads 2] [--steps 3]
        [--rounds 3] [--config 124M] [--batch 4] [--seq 64] [--output FILE|-]
        [--torch-bf16-rounds N] [--torch-bf16-steps N]

Each round runs, each in a fresh process: nnt fp32 BLIS, PyTorch fp32, nnt fp32 oneDNN,
nnt bf16 BLIS, PyTorch bf16 autocast, nnt bf16 oneDNN. nnt-train uses its automatic tiling
and the lws scheduler; PyTorch's AdamW is the default (for-loop) one. On a CPU without bf16
instructions (AMD Zen 3) a PyTorch bf16 autocast step takes minutes: --torch-bf16-rounds and
--torch-bf16-steps limit those runs.
"""

import argparse
import datetime
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("compare_pytorch",
                                               os.path.join(HERE, "compare_pytorch.py"))
cp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cp)

# compare_pytorch's run_child, keeping the last output (nnt-train's summary has the kernels)
_last_out = [""]
_run_child = cp.run_child


def _keep_output(argv, env=None):
    out = _run_child(argv, env=env)
    _last_out[0] = out
    return out


cp.run_child = _keep_output

KERNELS_RE = re.compile(r"^kernels: +(.*)$", re.M)

# (label, side, precision, NNT_GEMM or None)
RUNS = [
    ("nnt fp32 BLIS", "nnt", "fp32", "blis"),
    ("torch fp32 eager", "torch", "fp32", None),
    ("nnt fp32 oneDNN", "nnt", "fp32", "onednn"),
    ("nnt bf16 BLIS", "nnt", "bf16", "blis"),
    ("torch bf16 autocast", "torch", "bf16", None),
    ("nnt bf16 oneDNN", "nnt", "bf16", "onednn"),
]


def lscpu():
    out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, universal_newlines=True).stdout
    model = flags = "?"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
        elif line.startswith("Flags:"):
            flags = line.split(":", 1)[1].strip()
    return model, flags


def args_for(a, precision):
    """A namespace as compare_pytorch's functions expect it."""
    return argparse.Namespace(
        nnt_train=a.nnt_train, batch=a.batch, seq=a.seq, steps=a.steps, threads=a.threads,
        gpus=0, sched="lws", grad_clip=0.0, precision=precision, peak_tflops=None,
        nnt_data="text", device="cpu", config_list=[a.config], calibrate_steps=0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build-dir", default="/tmp/b2")
    p.add_argument("--nnt-train")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--config", default="124M", choices=[c for c in cp.CONFIGS
                                                       if c not in cp.LLAMA])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--torch-bf16-rounds", type=int,
                   help="rounds that run PyTorch bf16 autocast (default: every round; on a "
                        "CPU without bf16 instructions a step takes minutes)")
    p.add_argument("--torch-bf16-steps", type=int,
                   help="timed steps of the PyTorch bf16 autocast runs (default: --steps)")
    p.add_argument("--output", default=os.path.join(HERE, "RESULTS-cpu-kernels.md"))
    a = p.parse_args()
    a.nnt_train = os.path.abspath(a.nnt_train or os.path.join(a.build_dir, "nnt-train"))
    if a.torch_bf16_rounds is None:
        a.torch_bf16_rounds = a.rounds
    if a.torch_bf16_steps is None:
        a.torch_bf16_steps = a.steps
    if not os.access(a.nnt_train, os.X_OK):
        raise SystemExit("compare_cpu_kernels: no nnt-train at %s" % a.nnt_train)
    tmp = tempfile.mkdtemp(prefix="nnt-kern-")
    try:
        report(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(a, tmp):
    env = dict(os.environ, STARPU_SILENT="1", STARPU_HOME=os.path.join(tmp, "starpu"))
    env.pop("NNT_GEMM", None)
    start = datetime.datetime.now(datetime.timezone.utc)
    load_before = cp.loadavg()
    model, flags = lscpu()
    versions = cp.lib_versions(args_for(a, "fp32"))
    kernels = {}
    # the default choice (no NNT_GEMM: nnt's start-up measurement), one untimed run
    shutil.rmtree(os.path.join(tmp, "out"), ignore_errors=True)
    cp.run_child(cp.nnt_argv(args_for(a, "fp32"), a.config, "auto", tmp, steps=1), env=env)
    m = KERNELS_RE.search(_last_out[0])
    kernels["default"] = m.group(1) if m else "?"
    times = {label: [] for label, *_ in RUNS}
    tiling = "?"
    load_max = max(load_before)
    for rnd in range(a.rounds):
        for label, side, prec, gemm in RUNS:
            pa = args_for(a, prec)
            if side == "nnt":
                e = dict(env, NNT_GEMM=gemm)
                r = cp.run_nnt(pa, a.config, "auto", e, tmp)
                times[label].append(r["ms"] / 1e3)
                tiling = r["tiling"]
                m = KERNELS_RE.search(_last_out[0])
                kernels[gemm] = m.group(1) if m else "?"
            else:
                if prec == "bf16":
                    if rnd >= a.torch_bf16_rounds:
                        continue
                    pa.steps = a.torch_bf16_steps
                r = cp.run_torch(pa, a.config, "default")
                times[label].append(statistics.mean(r["times"]))
            la = cp.loadavg()[0]
            load_max = max(load_max, la)
            print("round %d %-20s %.3f s/step (load %.2f)" % (rnd + 1, label, times[label][-1],
                                                             la), flush=True)
    end = datetime.datetime.now(datetime.timezone.utc)
    load_after = cp.loadavg()
    med = {k: statistics.median(v) if v else float("nan") for k, v in times.items()}
    L, C, NH, V, maxT = cp.CONFIGS[a.config]

    lines = []
    w = lines.append
    w("# CPU kernels: nnt (BLIS / oneDNN, fp32 / bf16) vs PyTorch (fp32 / bf16 autocast)")
    w("")
    w("Generated by `bench/compare_cpu_kernels.py` (issue 16). GPT-2 %s (L%d C%d NH%d V%d), "
      "B = %d, T = %d, one training step (forward, loss, backward, AdamW), %d threads / CPU "
      "workers, %d timed steps after one warm-up step per run, %d interleaved rounds (every "
      "run a fresh process), median over the rounds."
      % (a.config, L, C, NH, V, a.batch, a.seq, a.threads, a.steps, a.rounds))
    w("")
    w("- Date: %s to %s UTC" % (start.strftime("%Y-%m-%d %H:%M"), end.strftime("%H:%M")))
    w("- CPU (lscpu): %s; flags: %s" % (model, flags))
    w("- Load average before %s, after %s, highest seen between runs %.2f%s"
      % (", ".join("%.2f" % x for x in load_before), ", ".join("%.2f" % x for x in load_after),
         load_max, " (**shared machine: noisy**)" if load_max > 1.5 else ""))
    w("- PyTorch %s, transformers %s, CPU capability %s; eager; AdamW default; bf16: "
      "torch.autocast('cpu', dtype=torch.bfloat16) around forward + loss"
      % (versions["torch"], versions["transformers"], versions["cpu_capability"]))
    w("- nnt: %s, automatic tiling (%s), lws; --precision bf16 = operands rounded to bf16, "
      "fp32 accumulation" % (cp.nnt_version(args_for(a, "fp32")), tiling))
    w("- nnt kernels (nnt-train's `kernels:` line):")
    for k in ("default", "blis", "onednn"):
        w("  - %s: %s" % ("no NNT_GEMM (default)" if k == "default" else "NNT_GEMM=" + k,
                          kernels.get(k, "?")))
    w("")
    w("Command: `%s`" % " ".join([os.path.basename(sys.executable)] + sys.argv))
    w("")
    w("| run | s/step (median) | min | max/min | runs | vs torch fp32 | vs torch bf16 |")
    w("|---|---:|---:|---:|---|---:|---:|")
    for label, *_ in RUNS:
        x = times[label]
        if not x:
            w("| %s | not run | | | | | |" % label)
            continue
        w("| %s | %.3f | %.3f | %.2f | %s | %.2f | %.2f |"
          % (label, med[label], min(x), max(x) / min(x), ", ".join("%.3f" % y for y in x),
             med["torch fp32 eager"] / med[label], med["torch bf16 autocast"] / med[label]))
    w("")
    w("vs torch X: PyTorch's median over nnt's (> 1: nnt faster). PyTorch bf16 autocast: "
      "%d of the %d rounds, %d timed steps a run." % (min(a.torch_bf16_rounds, a.rounds),
                                                     a.rounds, a.torch_bf16_steps))
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if a.output != "-":
        with open(a.output, "a" if os.path.exists(a.output) else "w") as f:
            f.write(text + "\n")
        print("appended to %s" % a.output)


if __name__ == "__main__":
    main()
