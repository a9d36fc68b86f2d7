#!/usr/bin/env python3
"""compare_pytorch.py: time one GPT-2 training step (forward + loss + backward + AdamW) of
nnt's training program nnt-train and of PyTorch (eager, fp32, Hugging Face transformers
GPT2LMHeadModel) side by side on the CPU, and write a Markdown table.

Not a test and not run by CI: run by hand on a quiet machine, results go to
bench/RESULTS-pytorch.md. Needs a Python with torch and transformers and a built nnt-train
(make in a configured build directory: BUILD/nnt-train).

    python bench/compare_pytorch.py --build-dir BUILD [--threads 2] [--steps 3]
        [--rounds 3] [--configs 124M,small,wide] [--tilings auto,none,split]
        [--torch-variants default,fused] [--grad-clip 0] [--nnt-data text|random]

For every config the runs are interleaved (round 1: nnt tiling 1, PyTorch variant 1, nnt
tiling 2, PyTorch variant 2, ...; round 2: the same), each run in a fresh process; the table
gives, per side, the median over the rounds of the mean step time of each run, and for each
side the variant (nnt tiling, PyTorch AdamW implementation) with the lowest median.

The nnt side runs

    nnt-train --layers L --channels C --heads NH --vocab V --context maxT --batch B --seq T
        --steps N+1 --sample 0 --no-save --out DIR --cpus THREADS --gpus 0 --sched lws
        --grad-clip G --warmup 0 --schedule constant --lr 1e-4 --beta2 0.999
        --weight-decay 0.1 [tiling options] [--data FILE --data-format nanogpt]

and reads the per-step wall times from the ms column of DIR/train.csv: the first step is the
warm-up and is dropped, the mean of the other N (= --steps) is the run's step time (nnt-train
times a whole step: loading the batch, zero grad, forward, loss, backward, the gradient norm,
AdamW, waiting for every task). The PyTorch side (a worker process of this script) does one
warm-up step and then times N steps the same way (random tokens, forward, loss, backward,
[clip_grad_norm_], AdamW step, zero grad, loss.item()).

nnt tilings: `auto` gives no tile option (nnt-train's own heuristic, nnt_gpt_tiling(3));
`none` keeps every dimension in one tile (all tile options -1); `split` and `split-b1` are
hand-picked tilings (see TILINGS), and the tile sizes nnt-train used are listed in the
report. Data: with --nnt-data text (default) nnt-train reads its default corpus
(/usr/share/common-licenses) with the byte tokenizer; nnt-train accepts a model vocabulary
(50257) larger than the tokenizer's (256), so the model is the same and only token ids below
256 occur. With --nnt-data random it reads uniform random tokens in [0, V), like PyTorch's,
from a nanoGPT .bin file (uint16, no header) written to a temporary directory. The amount of
work per step does not depend on the token values. Gradient clipping is off on both sides by default
(--grad-clip 0); --grad-clip G > 0 turns it on on both sides (nnt-train --grad-clip G,
torch.nn.utils.clip_grad_norm_(params, G)). nnt-train computes the global gradient norm
every step even with clipping off (it logs it), PyTorch only when clipping.
"""

import argparse
import array
import csv
import datetime
import json
import os
import random
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

# nnt tilings, as functions of the channels C -> nnt-train tile options (0 or absent:
# automatic, -1: one tile). "split" is the best hand-picked tiling of bench/RESULTS.md for
# 124M (batch 2, channels 768, hidden 1536, vocab 6400), scaled: whole channels, hidden in two
# tiles (2C), vocab in ~8 tiles; dimensions it does not name stay whole, as they did in
# bench_gpt2, which these tilings were first written for.
WHOLE = "-1"
TILINGS = {
    "auto": lambda C: [],
    "none": lambda C: ["--tile-batch", WHOLE, "--tile-seq", WHOLE, "--tile-channels", WHOLE,
                       "--tile-hidden", WHOLE, "--tile-vocab", WHOLE, "--tile-heads", WHOLE],
    "split": lambda C: ["--tile-batch", "2", "--tile-seq", WHOLE, "--tile-channels", WHOLE,
                        "--tile-hidden", str(2 * C), "--tile-vocab", "6400",
                        "--tile-heads", WHOLE],
    "split-b1": lambda C: ["--tile-batch", "1", "--tile-seq", WHOLE, "--tile-channels", WHOLE,
                           "--tile-hidden", str(2 * C), "--tile-vocab", "8192",
                           "--tile-heads", WHOLE],
}
TILING_DESC = {
    "auto": ("nnt-train's automatic tiling (nnt_gpt_tiling(3))", "(no tile option)"),
    "none": ("one tile per dimension",
             "--tile-batch -1 --tile-seq -1 --tile-channels -1 --tile-hidden -1 "
             "--tile-vocab -1 --tile-heads -1"),
    "split": ("batch 2, hidden 2C, vocab 6400, the rest whole",
              "--tile-batch 2 --tile-seq -1 --tile-channels -1 --tile-hidden 2C "
              "--tile-vocab 6400 --tile-heads -1"),
    "split-b1": ("batch 1, hidden 2C, vocab 8192, the rest whole",
                 "--tile-batch 1 --tile-seq -1 --tile-channels -1 --tile-hidden 2C "
                 "--tile-vocab 8192 --tile-heads -1"),
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
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
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
            "--batch", str(a.batch), "--seq", str(a.seq), "--grad-clip", "%g" % a.grad_clip]


def run_torch(a, config, variant):
    out = run_child(torch_argv(a, config, variant))
    return json.loads(out.strip().splitlines()[-1])


def torch_peak(a):
    argv = [sys.executable, os.path.abspath(__file__), "--peak-worker",
            "--threads", str(a.threads)]
    return json.loads(run_child(argv).strip().splitlines()[-1])["gflops"]


# nnt-train's output: the model, tiling and runtime lines at start, the summary at the end.
PARAMS_RE = re.compile(r"^model: .*: ([\d.]+)M parameters", re.M)
DATA_RE = re.compile(r"^data: +(.*)$", re.M)
TILING_RE = re.compile(r"^tiling: +(.*)$", re.M)
RUNTIME_RE = re.compile(r"^runtime: +(\d+) CPU workers, (\d+) CUDA workers, scheduler (\S+)",
                        re.M)
MEAN_RE = re.compile(r"trained steps (\d+)\.\.(\d+) in [\d.]+ s: ([\d.]+) ms/step")


def random_data(a, path):
    """Uniform random tokens in [0, V) as a nanoGPT .bin file: uint16, little-endian, no
    header; enough for every step of a run without wrapping around."""
    V = max(CONFIGS[c][3] for c in a.config_list)
    if V > 65536:
        raise SystemExit("compare_pytorch: vocab %d does not fit uint16 tokens" % V)
    n = max(1 << 18, (a.steps + 1) * a.batch * a.seq + 1)
    rng = random.Random(7)
    tokens = array.array("H", (rng.randrange(V) for _ in range(n)))
    if sys.byteorder != "little":
        tokens.byteswap()
    with open(path, "wb") as f:
        tokens.tofile(f)


def nnt_argv(a, config, tiling, tmp="TMP"):
    """The nnt-train command of one run; tmp is the run's temporary directory (the default
    is the placeholder used in the report)."""
    L, C, NH, V, maxT = CONFIGS[config]
    argv = [a.nnt_train, "--layers", str(L), "--channels", str(C), "--heads", str(NH),
            "--vocab", str(V), "--context", str(maxT), "--batch", str(a.batch),
            "--seq", str(a.seq), "--steps", str(a.steps + 1), "--sample", "0", "--no-save",
            "--out", os.path.join(tmp, "out"), "--cpus", str(a.threads), "--gpus", "0",
            "--sched", "lws", "--grad-clip", "%g" % a.grad_clip, "--warmup", "0",
            "--schedule", "constant", "--lr", "1e-4", "--beta2", "0.999",
            "--weight-decay", "0.1"]
    if a.nnt_data == "random":
        argv += ["--data", os.path.join(tmp, "random.bin"), "--data-format", "nanogpt"]
    return argv + TILINGS[tiling](C)


def read_step_ms(path):
    """The ms column of nnt-train's train.csv, one value per step, in step order."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [(int(r["step"]), float(r["ms"])) for r in rows]


def run_nnt(a, config, tiling, env, tmp):
    out_dir = os.path.join(tmp, "out")
    shutil.rmtree(out_dir, ignore_errors=True)
    argv = nnt_argv(a, config, tiling, tmp)
    out = run_child(argv, env=env)

    def fail(why):
        sys.stderr.write(out)
        raise SystemExit("compare_pytorch: %s: %s" % (why, shlex.join(argv)))

    pm, dm, tm, rm, mm = (PARAMS_RE.search(out), DATA_RE.search(out), TILING_RE.search(out),
                          RUNTIME_RE.search(out), MEAN_RE.search(out))
    if not (pm and dm and tm and rm and mm):
        fail("cannot parse nnt-train's output")
    if int(rm.group(1)) != a.threads or int(rm.group(2)) != 0:
        fail("nnt-train ran with %s CPU and %s CUDA workers, wanted %d and 0"
             % (rm.group(1), rm.group(2), a.threads))
    steps = read_step_ms(os.path.join(out_dir, "train.csv"))
    if [s for s, _ in steps] != list(range(1, a.steps + 2)):
        fail("train.csv has steps %s, wanted 1..%d" % ([s for s, _ in steps], a.steps + 1))
    ms = [m for _, m in steps[1:]]  # the first step warms up
    mean = statistics.mean(ms)
    # Cross-check with nnt-train's own summary (mean without the first step, printed %.1f;
    # the csv has 3 decimals).
    if abs(mean - float(mm.group(3))) > 0.06 + 1e-4 * mean:
        fail("train.csv gives %.3f ms/step, nnt-train's summary %s" % (mean, mm.group(3)))
    return {"ms": mean, "mparams": float(pm.group(1)), "data": dm.group(1).split(";")[0],
            "tiling": tm.group(1), "sched": rm.group(3)}


def nnt_version(a):
    out = run_child([a.nnt_train, "--version"]).strip().splitlines()
    return out[0] if out else "?"


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
                   help="configured and built nnt build directory holding nnt-train "
                        "(default %(default)s)")
    p.add_argument("--nnt-train", help="the nnt-train program (default BUILD_DIR/nnt-train)")
    p.add_argument("--threads", type=int, default=2,
                   help="torch.set_num_threads and nnt-train --cpus (default 2)")
    p.add_argument("--steps", type=int, default=3,
                   help="timed steps per run, after one warm-up step (default 3)")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved runs per side, tiling and config; median reported "
                        "(default 3)")
    p.add_argument("--configs", default="124M,small,wide",
                   help="comma list of %s (default %%(default)s)" % ", ".join(CONFIGS))
    p.add_argument("--tilings", default="auto,none,split",
                   help="comma list of nnt tilings: %s (default %%(default)s)"
                        % ", ".join(TILINGS))
    p.add_argument("--torch-variants", default="default,fused",
                   help="comma list of PyTorch AdamW variants: %s (default %%(default)s)"
                        % ", ".join(TORCH_VARIANTS))
    p.add_argument("--grad-clip", type=float, default=0.0,
                   help="clip the global gradient norm to this on both sides; 0: no clipping "
                        "on either side (default 0)")
    p.add_argument("--nnt-data", choices=("text", "random"), default="text",
                   help="nnt-train's data: its default text corpus with the byte tokenizer, "
                        "or uniform random tokens in [0, V) in a nanoGPT .bin file "
                        "(default %(default)s)")
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

    a.nnt_train = os.path.abspath(a.nnt_train or os.path.join(a.build_dir, "nnt-train"))
    if not os.access(a.nnt_train, os.X_OK):
        raise SystemExit("compare_pytorch: no nnt-train at %s (make nnt-train in the build "
                         "directory, or pass --nnt-train)" % a.nnt_train)
    if a.steps < 1 or a.rounds < 1:
        raise SystemExit("compare_pytorch: --steps and --rounds must be at least 1")
    configs = a.config_list = a.configs.split(",")
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

    # One temporary directory for everything on the nnt side: StarPU's home, nnt-train's
    # output directory (emptied before each run) and the random data.
    tmp = tempfile.mkdtemp(prefix="nnt-cmp-")
    try:
        return compare(a, configs, tilings, variants, order, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compare(a, configs, tilings, variants, order, tmp):
    env = dict(os.environ, STARPU_SILENT="1", STARPU_HOME=os.path.join(tmp, "starpu"))
    if a.nnt_data == "random":
        random_data(a, os.path.join(tmp, "random.bin"))
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
                          "params": None, "tiling": {}}
        for rnd in range(a.rounds):
            for side, what in order:
                if side == "nnt":
                    nr = run_nnt(a, c, what, env, tmp)
                    r["nnt"][what].append(nr["ms"] / 1e3)
                    r["nnt_mparams"] = nr["mparams"]
                    r["tiling"][what] = nr["tiling"]
                    nnt_data, nnt_sched = nr["data"].replace(tmp, "TMP"), nr["sched"]
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
    w("Generated by `bench/compare_pytorch.py` (issue 6); the nnt side is the training "
      "program `nnt-train`. One training step = forward with cross-entropy loss, backward, "
      "%s, AdamW (lr 1e-4, betas 0.9 0.999, weight decay 0.1), zero grad; fp32, B = %d, "
      "T = %d, %d timed steps after one warm-up step per run, %d interleaved rounds (every "
      "run a fresh process; in each round the runs alternate nnt, PyTorch, nnt, PyTorch), "
      "median over the rounds. For each side the table gives the best variant (nnt tiling, "
      "PyTorch AdamW implementation) and names it; every variant is listed further down."
      % ("gradient clipping off on both sides" if a.grad_clip <= 0 else
         "gradient norm clipped to %g on both sides" % a.grad_clip,
         a.batch, a.seq, a.steps, a.rounds))
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
    w("- nnt: %s (%s), StarPU %s scheduler, --cpus %d --gpus 0, BLIS single-threaded per "
      "worker; data: %s. Step time: the ms column of nnt-train's train.csv (the wall time of "
      "a whole step: loading the batch, zero grad, forward, loss, backward, gradient norm, "
      "AdamW, waiting for every task), run with --steps %d, the first step dropped as warm-up"
      % (a.nnt_train, nnt_version(a), nnt_sched, a.threads, nnt_data, a.steps + 1))
    w("- Gradient clipping: %s"
      % ("off on both sides (nnt-train --grad-clip 0; PyTorch: no clip_grad_norm_). nnt-train "
         "still computes the global gradient norm every step for its log; PyTorch does not"
         if a.grad_clip <= 0 else
         "on on both sides, max norm %g (nnt-train --grad-clip %g; PyTorch "
         "torch.nn.utils.clip_grad_norm_ before the AdamW step)" % (a.grad_clip, a.grad_clip)))
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
    w("nnt tilings tried (nnt-train options; C = channels; -1: one tile) and the tile sizes "
      "nnt-train reported:")
    w("")
    for t in tilings:
        w("- `%s`: %s: `%s`" % (t, TILING_DESC[t][0], TILING_DESC[t][1]))
        for c in configs:
            w("  - %s: %s" % (c, results[c]["tiling"][t]))
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
    w("nnt commands (TMP: a temporary directory, removed at the end; env STARPU_SILENT=1 "
      "STARPU_HOME=TMP/starpu; TMP/out is emptied before each run%s):"
      % (", TMP/random.bin holds the random tokens" if a.nnt_data == "random" else ""))
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
    w("Notes: nnt's parameter count (nnt-train) differs from PyTorch's only if the models "
      "differ; here: %s. Both losses are over all B x T positions. PyTorch draws independent "
      "uniform random tokens in [0, V) for inputs and targets; nnt-train reads %s, targets "
      "being the inputs shifted by one: the amount of work per step does not depend on the "
      "token values. Both sides start from GPT-2's initialisation. nnt-train applies weight "
      "decay to matrices and embeddings only, PyTorch's AdamW here to every parameter."
      % (", ".join("%s %.1fM vs %.1fM" % (row[0], row[5], row[4] / 1e6) for row in rows),
         "its default text corpus with the byte tokenizer (ids 0-255 of the model's V)"
         if a.nnt_data == "text" else "uniform random tokens in [0, V) from a nanoGPT .bin "
         "file"))
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if a.output != "-":
        with open(a.output, "w") as f:
            f.write(text)
        print("wrote %s" % a.output)


if __name__ == "__main__":
    main()
