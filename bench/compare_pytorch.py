#!/usr/bin/env python3
"""compare_pytorch.py: time one GPT-2 training step (forward + loss + backward + AdamW) of
nnt (bench/bench_gpt2, the internal model) and of PyTorch (eager, fp32, Hugging Face
transformers GPT2LMHeadModel) side by side on the CPU, and write a Markdown table.

Not a test and not run by CI: run by hand on a quiet machine, results go to
bench/RESULTS-pytorch.md. Needs a Python with torch and transformers and a built
bench/bench_gpt2 (make bench/bench_gpt2 in a configured build directory).

    python bench/compare_pytorch.py --build-dir BUILD [--threads 2] [--steps 3]
        [--rounds 3] [--configs 124M,small,wide] [--tilings none,split]

For every config the runs are interleaved (round 1: nnt tiling 1, PyTorch, nnt tiling 2,
PyTorch, ...; round 2: the same), each run in a fresh process that does one warm-up step
and then times --steps steps; the table gives, per side, the median over the rounds of the
mean step time of each run, and for nnt the tiling with the lowest median.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# name: (layers, channels, heads, vocab, context)
CONFIGS = {
    "124M": (12, 768, 12, 50257, 1024),
    "small": (6, 512, 8, 50257, 1024),
    "wide": (4, 1536, 16, 50257, 1024),
}

# nnt tilings, as functions of (C, V) -> bench_gpt2 options. "split" is the best hand-picked
# tiling of bench/RESULTS.md for 124M (batch 2, channels 768, hidden 1536, vocab 6400),
# scaled: whole channels, hidden in two tiles (2C), vocab in ~8 tiles.
TILINGS = {
    "none": lambda C, V: [],
    "split": lambda C, V: ["--tile-batch", "2", "--tile-channels", str(C),
                           "--tile-hidden", str(2 * C), "--tile-vocab", "6400"],
    "split-b1": lambda C, V: ["--tile-batch", "1", "--tile-hidden", str(2 * C),
                              "--tile-vocab", "8192"],
}
TILING_DESC = {
    "none": ("one tile per dimension", "(none)"),
    "split": ("batch 2, channels C, hidden 2C, vocab 6400",
              "--tile-batch 2 --tile-channels C --tile-hidden 2C --tile-vocab 6400"),
    "split-b1": ("batch 1, hidden 2C, vocab 8192",
                 "--tile-batch 1 --tile-hidden 2C --tile-vocab 8192"),
}

# PyTorch variants: extra keyword arguments of torch.optim.AdamW. "default" is what
# AdamW(params, lr, weight_decay) gives on the CPU (the per-tensor for-loop implementation);
# "fused" is the fused CPU kernel (fused=True, PyTorch >= 2.4), the counterpart of nnt's
# one-pass AdamW task.
TORCH_VARIANTS = {
    "default": {},
    "fused": {"fused": True},
    "foreach": {"foreach": True},
}

DESIGN_PEAK = 175.0  # GFLOP/s, BLIS sgemm with 2 threads on this kind of machine (design.md)


def flops_per_step(params, L, C, B, T):
    return 6.0 * params * B * T + 12.0 * L * B * T * T * C


def loadavg():
    with open("/proc/loadavg") as f:
        return tuple(float(x) for x in f.read().split()[:3])


# ---- PyTorch side (runs in a child process: --torch-worker / --peak-worker) -----------------

def torch_worker(a):
    import torch
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    L, C, NH, V, maxT = CONFIGS[a.config]
    cfg = GPT2Config(vocab_size=V, n_positions=maxT, n_embd=C, n_layer=L, n_head=NH,
                     activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, use_cache=False)
    model = GPT2LMHeadModel(cfg).float()
    model.train()
    params = sum(p.numel() for p in model.parameters())  # wte and lm_head tied: counted once
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1,
                            **TORCH_VARIANTS[a.variant])
    g = torch.Generator().manual_seed(7)

    def step():
        x = torch.randint(0, V, (a.batch, a.seq), generator=g)
        y = torch.randint(0, V, (a.batch, a.seq), generator=g)
        logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    step()  # warm-up
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"params": params, "times": times, "threads": torch.get_num_threads(),
                      "attn": getattr(cfg, "_attn_implementation", None)}))


def peak_worker(a):
    import torch
    torch.set_num_threads(a.threads)
    n = 1024
    x, y = torch.randn(n, n), torch.randn(n, n)
    for _ in range(5):
        torch.mm(x, y)
    best = float("inf")
    for _ in range(50):
        t0 = time.perf_counter()
        torch.mm(x, y)
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"gflops": 2.0 * n ** 3 / best / 1e9}))


# ---- driver ------------------------------------------------------------------------------

def run_child(argv, env=None):
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit("compare_pytorch: failed (%d): %s" % (r.returncode, shlex.join(argv)))
    return r.stdout


def torch_argv(a, config, variant):
    return [sys.executable, os.path.abspath(__file__), "--torch-worker", "--config", config,
            "--variant", variant,
            "--threads", str(a.threads), "--steps", str(a.steps),
            "--batch", str(a.batch), "--seq", str(a.seq)]


def run_torch(a, config, variant):
    out = run_child(torch_argv(a, config, variant))
    return json.loads(out.strip().splitlines()[-1])


def torch_peak(a):
    argv = [sys.executable, os.path.abspath(__file__), "--peak-worker",
            "--threads", str(a.threads)]
    return json.loads(run_child(argv).strip().splitlines()[-1])["gflops"]


MEAN_RE = re.compile(r"mean of (\d+) steps: (\d+(?:\.\d+)?) ms/step")
HEAD_RE = re.compile(r": ([\d.]+)M parameters;.* (\d+) CPU workers[^;]*; ([\d.]+) GFLOP/step")


def nnt_argv(a, config, tiling):
    L, C, NH, V, maxT = CONFIGS[config]
    return [a.nnt_bench, "--layers", str(L), "--channels", str(C), "--heads", str(NH),
            "--vocab", str(V), "--context", str(maxT), "--batch", str(a.batch),
            "--seq", str(a.seq), "--steps", str(a.steps)] + TILINGS[tiling](C, V)


def run_nnt(a, config, tiling, env):
    out = run_child(nnt_argv(a, config, tiling), env=env)
    m, h = MEAN_RE.search(out), HEAD_RE.search(out)
    if not m or not h:
        sys.stderr.write(out)
        raise SystemExit("compare_pytorch: cannot parse bench_gpt2 output")
    if int(h.group(2)) != a.threads:
        raise SystemExit("compare_pytorch: bench_gpt2 ran with %s CPU workers, wanted %d"
                         % (h.group(2), a.threads))
    return {"ms": float(m.group(2)), "mparams": float(h.group(1)),
            "gflop": float(h.group(3))}


def machine():
    model = "?"
    try:
        for line in subprocess.run(["lscpu"], stdout=subprocess.PIPE,
                                   universal_newlines=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    nproc = subprocess.run(["nproc"], stdout=subprocess.PIPE,
                           universal_newlines=True).stdout.strip()
    return model, nproc


def lib_versions():
    out = run_child([sys.executable, "-c",
                     "import torch, transformers; print(torch.__version__, "
                     "transformers.__version__, torch.backends.mkl.is_available(), "
                     "torch.backends.cpu.get_cpu_capability())"])
    return out.split()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default="/tmp/b2",
                   help="configured nnt build directory holding bench/bench_gpt2 "
                        "(default %(default)s)")
    p.add_argument("--nnt-bench", help="the bench_gpt2 binary (default BUILD_DIR/bench/bench_gpt2)")
    p.add_argument("--threads", type=int, default=2,
                   help="torch.set_num_threads and nnt CPU workers (STARPU_NCPU) (default 2)")
    p.add_argument("--steps", type=int, default=3, help="timed steps per run (default 3)")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved runs per side, tiling and config; median reported "
                        "(default 3)")
    p.add_argument("--configs", default="124M,small,wide",
                   help="comma list of %s (default %%(default)s)" % ", ".join(CONFIGS))
    p.add_argument("--tilings", default="none,split",
                   help="comma list of nnt tilings: %s (default %%(default)s)"
                        % ", ".join(TILINGS))
    p.add_argument("--torch-variants", default="default,fused",
                   help="comma list of PyTorch AdamW variants: %s (default %%(default)s)"
                        % ", ".join(TORCH_VARIANTS))
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--output", default=os.path.join(here, "RESULTS-pytorch.md"),
                   help="Markdown file to write (default %(default)s); '-' for stdout only")
    p.add_argument("--config", help=argparse.SUPPRESS)
    p.add_argument("--variant", default="default", help=argparse.SUPPRESS)
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--peak-worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.torch_worker:
        return torch_worker(a)
    if a.peak_worker:
        return peak_worker(a)

    a.nnt_bench = os.path.abspath(a.nnt_bench or os.path.join(a.build_dir, "bench", "bench_gpt2"))
    if not os.access(a.nnt_bench, os.X_OK):
        raise SystemExit("compare_pytorch: no bench_gpt2 at %s (make bench/bench_gpt2 in the "
                         "build directory, or pass --nnt-bench)" % a.nnt_bench)
    configs = a.configs.split(",")
    tilings = a.tilings.split(",")
    for c in configs:
        if c not in CONFIGS:
            raise SystemExit("compare_pytorch: unknown config %s" % c)
    for t in tilings:
        if t not in TILINGS:
            raise SystemExit("compare_pytorch: unknown tiling %s" % t)
    variants = a.torch_variants.split(",")
    for v in variants:
        if v not in TORCH_VARIANTS:
            raise SystemExit("compare_pytorch: unknown PyTorch variant %s" % v)
    # One round: nnt and PyTorch runs alternate (A B A B ...).
    n = max(len(tilings), len(variants))
    order = []
    for i in range(n):
        if i < len(tilings):
            order.append(("nnt", tilings[i]))
        if i < len(variants):
            order.append(("torch", variants[i]))

    starpu_home = tempfile.mkdtemp(prefix="nnt-cmp-starpu-")
    env = dict(os.environ, STARPU_SILENT="1", STARPU_HOME=starpu_home,
               STARPU_NCPU=str(a.threads))
    cmdline = shlex.join([sys.executable] + sys.argv)
    start = datetime.datetime.now(datetime.timezone.utc)
    load_before = loadavg()
    model, nproc = machine()
    versions = lib_versions()
    peak0 = torch_peak(a)
    print("torch.mm 1024^3 fp32, %d threads: %.1f GFLOP/s; load %s"
          % (a.threads, peak0, load_before), flush=True)

    results = {}
    load_max = max(load_before)
    attn = None
    for c in configs:
        L, C, NH, V, maxT = CONFIGS[c]
        r = results[c] = {"nnt": {t: [] for t in tilings}, "torch": {v: [] for v in variants},
                          "params": None}
        for rnd in range(a.rounds):
            for side, what in order:
                if side == "nnt":
                    nr = run_nnt(a, c, what, env)
                    r["nnt"][what].append(nr["ms"] / 1e3)
                    r["nnt_mparams"] = nr["mparams"]
                else:
                    tr = run_torch(a, c, what)
                    r["params"] = tr["params"]
                    attn = tr["attn"]
                    r["torch"][what].append(statistics.mean(tr["times"]))
                la = loadavg()[0]
                load_max = max(load_max, la)
                print("%s round %d %-5s %-8s %.3f s/step (load %.2f)"
                      % (c, rnd + 1, side, what, r[side][what][-1], la), flush=True)
    peak1 = torch_peak(a)
    load_after = loadavg()
    shutil.rmtree(starpu_home, ignore_errors=True)
    end = datetime.datetime.now(datetime.timezone.utc)
    peak = max(peak0, peak1)

    # ---- report --------------------------------------------------------------------------
    toks = a.batch * a.seq
    rows = []
    for c in configs:
        L, C, NH, V, maxT = CONFIGS[c]
        r = results[c]
        med = {t: statistics.median(v) for t, v in r["nnt"].items()}
        tmed = {v: statistics.median(x) for v, x in r["torch"].items()}
        best = min(med, key=med.get)
        tbest = min(tmed, key=tmed.get)
        tn, tt = med[best], tmed[tbest]
        fl = flops_per_step(r["params"], L, C, a.batch, a.seq)
        rows.append((c, L, C, NH, r["params"], r["nnt_mparams"], fl, tn, tt, best, med, r,
                     tbest, tmed))

    lines = []
    w = lines.append
    w("# nnt vs PyTorch: GPT-2 training step on the CPU")
    w("")
    w("Generated by `bench/compare_pytorch.py` (issue 6). One training step = forward with "
      "cross-entropy loss, backward, AdamW (lr 1e-4, weight decay 0.1), zero grad; fp32, "
      "random tokens, B = %d, T = %d, %d timed steps after one warm-up step per run, "
      "%d interleaved rounds (every run a fresh process; in each round the runs alternate "
      "nnt, PyTorch, nnt, PyTorch), median over the rounds. For each side the table gives "
      "the best variant (nnt tiling, PyTorch AdamW implementation) and names it; every "
      "variant is listed further down." % (a.batch, a.seq, a.steps, a.rounds))
    w("")
    w("- Date: %s to %s UTC" % (start.strftime("%Y-%m-%d %H:%M"), end.strftime("%H:%M")))
    w("- Machine: %s, nproc %s; %d threads / CPU workers used" % (model, nproc, a.threads))
    w("- Load average (1, 5, 15 min): before %s, after %s; highest 1-min value seen "
      "between runs %.2f" % (", ".join("%.2f" % x for x in load_before),
                             ", ".join("%.2f" % x for x in load_after), load_max))
    spread = max(max(x) / min(x) for row in rows for side in ("nnt", "torch")
                 for x in row[11][side].values())
    if spread > 1.2:
        w("- **Runs of the same variant differ by up to %.1fx (see the table of every run "
          "below): the medians are not reliable to better than that.**" % spread)
    if max(load_before[0], load_after[0], load_max) > 1.5:
        w("- **The load average was above 1.5: the machine was shared with other work "
          "during this run, so the timings are noisy and probably pessimistic for both sides. "
          "Re-run the command below on a quiet machine.**")
    w("- PyTorch %s, transformers %s (MKL %s, CPU capability %s), eager, "
      "GPT2LMHeadModel(GPT2Config(activation_function='gelu_new', dropouts 0)), "
      "attention implementation %s, torch.optim.AdamW (variants: %s)"
      % (versions[0], versions[1], versions[2], versions[3], attn,
         "; ".join("`%s` = AdamW(lr=1e-4, weight_decay=0.1%s)"
                   % (v, "".join(", %s=%s" % kv for kv in TORCH_VARIANTS[v].items()))
                   for v in variants)))
    w("- nnt: %s, StarPU lws scheduler, STARPU_NCPU=%d, BLIS single-threaded per worker"
      % (a.nnt_bench, a.threads))
    w("- sgemm peak for MFU: torch.mm 1024 x 1024 x 1024 fp32 with %d threads, best of 50: "
      "%.1f GFLOP/s before, %.1f after (the higher, %.1f, is used); and %.0f GFLOP/s, "
      "BLIS sgemm with 2 threads on an idle machine of this kind (design.md)"
      % (a.threads, peak0, peak1, peak, DESIGN_PEAK))
    w("- FLOPs per step = 6 * params * B * T + 12 * L * B * T^2 * C (params: PyTorch's "
      "count, wte tied with the LM head)")
    w("")
    w("Command:")
    w("")
    w("```sh")
    w(cmdline)
    w("```")
    w("")
    w("| config | params | GFLOP/step | s/step nnt | s/step torch | tokens/s nnt | "
      "tokens/s torch | MFU nnt (%.0f / meas.) | MFU torch (%.0f / meas.) | "
      "torch/nnt | nnt tiling | torch AdamW |" % (DESIGN_PEAK, DESIGN_PEAK))
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for c, L, C, NH, params, _, fl, tn, tt, best, med, r, tbest, tmed in rows:
        def mfu(t):
            g = fl / t / 1e9
            return "%.1f%% / %.1f%%" % (100 * g / DESIGN_PEAK, 100 * g / peak)
        w("| %s (L%d C%d NH%d) | %.1fM | %.1f | %.3f | %.3f | %.0f | %.0f | %s | %s | %.2f | "
          "%s | %s |" % (c, L, C, NH, params / 1e6, fl / 1e9, tn, tt, toks / tn, toks / tt,
                         mfu(tn), mfu(tt), tt / tn, best, tbest))
    w("")
    w("MFU: achieved GFLOP/s over the %.0f GFLOP/s of design.md / over the torch.mm peak "
      "measured here. torch/nnt > 1 means nnt is faster." % DESIGN_PEAK)
    w("")
    w("nnt tilings tried (bench_gpt2 options; C = channels):")
    w("")
    for t in tilings:
        w("- `%s`: %s: `%s`" % (t, TILING_DESC[t][0], TILING_DESC[t][1]))
    w("")
    w("Every run, s/step (mean of the timed steps of one process), in round order:")
    w("")
    w("| config | side | runs | median | min | max/min |")
    w("|---|---|---|---:|---:|---:|")
    for c, L, C, NH, params, _, fl, tn, tt, best, med, r, tbest, tmed in rows:
        for t in tilings:
            x = r["nnt"][t]
            w("| %s | nnt %s | %s | %.3f | %.3f | %.2f |"
              % (c, t, ", ".join("%.3f" % y for y in x), med[t], min(x), max(x) / min(x)))
        for v in variants:
            x = r["torch"][v]
            w("| %s | torch %s | %s | %.3f | %.3f | %.2f |"
              % (c, v, ", ".join("%.3f" % y for y in x), tmed[v], min(x), max(x) / min(x)))
    w("")
    w("nnt commands (env STARPU_SILENT=1 STARPU_HOME=<temp dir> STARPU_NCPU=%d):" % a.threads)
    w("")
    w("```sh")
    for c in configs:
        for t in tilings:
            w(shlex.join(nnt_argv(a, c, t)))
    w("```")
    w("")
    w("PyTorch runs (one process each; the worker is part of this script):")
    w("")
    w("```sh")
    for c in configs:
        for v in variants:
            w(shlex.join(torch_argv(a, c, v)))
    w("```")
    w("")
    w("Notes: nnt's parameter count (bench_gpt2) differs from PyTorch's only if the models "
      "differ; here: %s. The PyTorch loss is over all T positions (targets are independent "
      "random tokens), like bench_gpt2's; each side draws its own random tokens. nnt's weights "
      "are small uniform random values, PyTorch's are GPT-2's initialisation: this does not "
      "change the amount of work." % ", ".join(
          "%s %.1fM vs %.1fM" % (row[0], row[5], row[4] / 1e6) for row in rows))
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if a.output != "-":
        with open(a.output, "w") as f:
            f.write(text)
        print("wrote %s" % a.output)


if __name__ == "__main__":
    main()
