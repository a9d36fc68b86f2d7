#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lora_peft.py: time one LoRA training step (forward + loss + backward + AdamW on the
adapters, the base frozen) of nnt-train and of Hugging Face PEFT + transformers (eager
attention; fp32, or bf16 autocast against nnt's --precision bf16) on the SmolLM2-135M or
Qwen3-0.6B shape, side by side, and print a Markdown table with the CPU model, the load
average around each run and the commands. --quantize nf4: QLoRA on both sides (the frozen
base's matrices in NF4, bitsandbytes' 4-bit NormalFloat, blocks of 64).

Not a test and not run by CI: run by hand, preferably on a quiet machine; results go to
bench/RESULTS-lora.md. Needs a Python with torch, transformers and peft (and bitsandbytes
for --quantize nf4), and a built nnt-train.

    python bench/lora_peft.py --build-dir BUILD [--shape smollm2-135m|qwen3-0.6b]
        [--precision fp32|bf16] [--quantize none|nf4] [--threads 2] [--batch 4] [--seq 256]
        [--rank 16] [--alpha 32] [--targets all-linear] [--steps 3] [--rounds 2] [--dora]

Both sides: random weights of the shape's sizes (SmolLM2-135M: vocab 49152, hidden 576,
intermediate 1536, 30 layers, 9 heads, 3 key/value heads, tied embeddings; Qwen3-0.6B:
vocab 151936, hidden 1024, intermediate 3072, 28 layers, 16 heads of 128, 8 key/value
heads, q/k norms, tied), LoRA of rank --rank on --targets, dropout 0, AdamW (lr 1e-4,
weight decay 0), random tokens, one warm-up step, then --steps timed steps; a round runs
nnt then PyTorch (A B A B ...), each in a fresh process under /usr/bin/time (peak RSS), and
the table gives the median over the rounds of each run's mean step time. --precision bf16:
nnt-train --precision bf16 (bf16 operands of the products, the frozen matrices kept in
bf16 only) against torch.autocast("cpu", bfloat16) around the forward and the loss (the
weights fp32, as PEFT's users run it).

--quantize nf4: nnt-train --quantize nf4 (the frozen base's matrices kept in NF4, blocks of
64, fp32 absmax; each product dequantizes the weight to bf16 under --precision bf16, to fp32
otherwise) against the same kind of random model quantized by bitsandbytes as transformers
does it. A helper process (not timed) builds the random model (fp32), save_pretrained's it,
loads it with
    AutoModelForCausalLM.from_pretrained(DIR, device_map="cpu", dtype=torch.float32,
        quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=torch.float32 (fp32) or torch.bfloat16 (bf16)))
(bitsandbytes' other defaults: blocks of 64, no double quantization, uint8 storage; the
decoder layers' linear layers become bnb Linear4bit, lm_head and the tied embeddings stay
fp32, transformers' default) and saves that as a 4-bit checkpoint; each timed PyTorch run
loads the 4-bit checkpoint (from_pretrained, its quantization_config from its config.json,
the same weights bit for bit), then the same LoraConfig and get_peft_model. Why not quantize
while loading in the timed process: the fp32 tensors that from_pretrained leaves unquantized
are zero-copy views of the mmap'd safetensors file, which keeps the whole fp32 checkpoint
mapped and the pages read while quantizing in the RSS (some 300-400 MiB more on
SmolLM2-135M, after the steps too). prepare_model_for_kbit_training is NOT called: the base stays as the
non-quantized run has it (norms and embeddings fp32, no gradient checkpointing, no input
grads forced), the LoRA adapters fp32; --precision bf16 still puts torch.autocast around the
forward and the loss. bitsandbytes' CPU paths are left as they are, which is what a user
gets: its Linear4bit on a CPU with AVX512-BF16, in eval mode and with an input that needs no
grad, repacks the weight once and computes in bf16 (gemv_4bit, the fused kernel of the
kernels package when installed, else bnb's own), but that path never runs here (train
mode). In training, Linear4bit.forward casts the input to the compute dtype and calls
matmul_4bit, which dequantizes the weight to the compute dtype (bnb's C dequantize_4bit,
AVX-512 where present) and calls F.linear (gemm_4bit has no CPU kernel: its default one),
directly where no grad is needed (layer 0's q/k/v projections, whose input comes from the
frozen embeddings) and through MatMul4Bit elsewhere, whose backward dequantizes the weight
again for the input's gradient (grad_output @ W). The summary gives, per PyTorch run, the
VmRSS after the steps, anonymous and file-backed (the shared libraries, some 250-350 MiB
with torch's, and the mmap'd 4-bit checkpoint's pages).

The nnt side runs
    nnt-train --model SHAPE --lora-rank R --lora-alpha A --lora-targets LIST
        [--precision bf16] [--quantize nf4]
        --batch B --seq T --steps N+1 --sample 0 --no-save --cpus THREADS --lr 1e-4
        --warmup 0 --schedule constant --weight-decay 0 --grad-clip 0 --data RANDOM.bin
and reads the ms column of OUT/train.csv (the first step dropped).
"""
import argparse
import contextlib
import csv
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

SMOLLM2 = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
               num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
               rope_theta=100000.0, tie_word_embeddings=True, rms_norm_eps=1e-5)
QWEN3 = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
             num_attention_heads=16, num_key_value_heads=8, head_dim=128,
             max_position_embeddings=40960, rope_theta=1000000.0, tie_word_embeddings=True,
             rms_norm_eps=1e-6)
SHAPES = {"smollm2-135m": ("LlamaConfig", "LlamaForCausalLM", SMOLLM2),
          "qwen3-0.6b": ("Qwen3Config", "Qwen3ForCausalLM", QWEN3)}


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def token_file(path, n, vocab):
    """An llm.c token file (magic 20240520, version 1, uint16 ids) of n random ids."""
    import numpy as np
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, n
    ids = np.random.default_rng(0).integers(0, vocab, n, dtype=np.uint16)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(ids.tobytes())


def run_nnt(a, data, out):
    cmd = [os.path.join(a.build_dir, "nnt-train"), "--model", a.shape,
           "--lora-rank", str(a.rank), "--lora-alpha", str(a.alpha), "--lora-targets", a.targets,
           "--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps + 1),
           "--sample", "0", "--no-save", "--cpus", str(a.threads), "--lr", "1e-4",
           "--warmup", "0", "--schedule", "constant", "--weight-decay", "0", "--grad-clip", "0",
           "--data", data, "--out", out, "--overwrite"]
    if a.precision == "bf16":
        cmd += ["--precision", "bf16"]
    if a.quantize != "none":
        cmd += ["--quantize", a.quantize]
    if a.dora:
        cmd += ["--lora-dora"]
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("nnt-train failed: " + p.stderr[-2000:])
    rss_kb = int(p.stderr.strip().splitlines()[-1])
    with open(os.path.join(out, "train.csv")) as f:
        rows = list(csv.DictReader(f))
    ms = [float(r["ms"]) for r in rows]
    own_peak = max(float(r["RAM_peak_mib"]) for r in rows)
    text = p.stdout + p.stderr
    for key in ("MFU:", "memory:", "trained steps"):
        for line in text.splitlines():
            if line.startswith(key):
                print("  nnt: " + line.strip(), flush=True)
    return ms[1:], rss_kb / 1024.0, own_peak, " ".join(cmd)


def bnb_config_text(a):
    return ('BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", '
            f'bnb_4bit_compute_dtype=torch.{"bfloat16" if a.precision == "bf16" else "float32"})')


def rss_now():
    """VmRSS, RssAnon, RssFile of this process in MiB, from /proc/self/status."""
    v = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "RssAnon", "RssFile"):
                    v[key] = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return (f"VmRSS {v.get('VmRSS', 0):.0f} MiB (anonymous {v.get('RssAnon', 0):.0f}, "
            f"file-backed {v.get('RssFile', 0):.0f})")


def random_model(a):
    import torch
    import transformers
    cfg_name, cls_name, sizes = SHAPES[a.shape]
    torch.manual_seed(0)
    cfg = getattr(transformers, cfg_name)(**sizes, attn_implementation="eager")
    return getattr(transformers, cls_name)(cfg).float()


def save_worker(a):
    """--save-model DIR: the random model of the shape (fp32) save_pretrained'd into DIR/fp32,
    loaded from there quantized as transformers does it, that saved into DIR/nf4 (a
    bitsandbytes 4-bit checkpoint, the quantization_config in its config.json), DIR/fp32
    removed."""
    import shutil
    import torch
    import transformers
    torch.set_num_threads(a.threads)
    fp32, nf4 = os.path.join(a.save_model, "fp32"), os.path.join(a.save_model, "nf4")
    random_model(a).save_pretrained(fp32)
    bnb = transformers.BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=torch.bfloat16 if a.precision == "bf16" else torch.float32)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        fp32, quantization_config=bnb, device_map="cpu", dtype=torch.float32)
    model.save_pretrained(nf4)
    shutil.rmtree(fp32)


def torch_worker(a):
    import torch
    import torch.nn.functional as F
    import transformers
    from peft import LoraConfig, get_peft_model
    sizes = SHAPES[a.shape][2]
    torch.set_num_threads(a.threads)
    if a.quantize == "nf4":
        # the quantization_config comes from the checkpoint's config.json (save_worker)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.join(a.model_dir, "nf4"), device_map="cpu", dtype=torch.float32,
            attn_implementation="eager")
        q = model.config.quantization_config
        q = q if isinstance(q, dict) else q.to_dict()
        want = "bfloat16" if a.precision == "bf16" else "float32"
        if (not q.get("load_in_4bit") or q.get("bnb_4bit_quant_type") != "nf4"
                or str(q.get("bnb_4bit_compute_dtype")).replace("torch.", "") != want):
            sys.exit(f"unexpected quantization_config {q}")
        torch.manual_seed(0)
    else:
        model = random_model(a)
    model = get_peft_model(model, LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=0.0,
                                             target_modules=a.targets if a.targets == "all-linear"
                                             else a.targets.split(","), task_type="CAUSAL_LM",
                                             use_dora=a.dora))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4,
                            weight_decay=0.0)
    times = []
    for s in range(a.steps + 1):
        x = torch.randint(0, sizes["vocab_size"], (a.batch, a.seq + 1))
        t = time.perf_counter()
        with (torch.autocast("cpu", dtype=torch.bfloat16) if a.precision == "bf16"
              else contextlib.nullcontext()):
            logits = model(input_ids=x[:, :-1]).logits
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                   x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        times.append(1e3 * (time.perf_counter() - t))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if a.quantize != "none":
        import bitsandbytes
        n4 = sum(isinstance(m, bitsandbytes.nn.Linear4bit) for m in model.modules())
        print(f"{n4} bitsandbytes Linear4bit layers, {rss_now()} after the steps",
              file=sys.stderr)
    print(" ".join(f"{x}" for x in times[1:]) + f" {rss}")


def save_model(a, model_dir):
    cmd = [sys.executable, __file__, "--save-model", model_dir, "--shape", a.shape,
           "--precision", a.precision, "--threads", str(a.threads)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("saving the random model failed: " + p.stderr[-2000:])
    return " ".join(cmd)


def run_torch(a, model_dir=None):
    cmd = [sys.executable, __file__, "--worker", "--shape", a.shape, "--precision",
           a.precision, "--threads", str(a.threads), "--batch", str(a.batch), "--seq",
           str(a.seq), "--rank", str(a.rank), "--alpha", str(a.alpha), "--targets", a.targets,
           "--steps", str(a.steps)]
    if a.quantize != "none":
        cmd += ["--quantize", a.quantize, "--model-dir", model_dir]
    if a.dora:
        cmd += ["--dora"]
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("PyTorch worker failed: " + p.stderr[-2000:])
    rss_kb = int(p.stderr.strip().splitlines()[-1])
    vals = [float(x) for x in p.stdout.split()]
    note = ""
    if a.quantize != "none":
        for line in p.stderr.splitlines():
            if "Linear4bit layers" in line:
                note = line.strip()
                print("  torch: " + note, flush=True)
    return vals[:-1], rss_kb / 1024.0, vals[-1], " ".join(cmd), note


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=".")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="smollm2-135m")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--quantize", choices=["none", "nf4"], default="none")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32)
    ap.add_argument("--targets", default="all-linear")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dora", action="store_true", help="DoRA on both sides (nnt-train "
                    "--lora-dora, PEFT's use_dora)")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--save-model", help=argparse.SUPPRESS)   # helper: DIR
    ap.add_argument("--model-dir", help=argparse.SUPPRESS)    # worker, --quantize nf4: DIR
    a = ap.parse_args()
    if a.save_model:
        return save_worker(a)
    if a.worker:
        return torch_worker(a)
    sides = {"nnt": [], "torch": []}   # per run: (step ms list, RSS MiB, own peak, loads)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "tokens.bin")
        vocab = SHAPES[a.shape][2]["vocab_size"]
        n = max(200000, 4 * a.batch * (a.seq + 1) * (a.steps + 2))
        if vocab > 65535:   # uint16 ids: draw them below 65536 (the speed does not care)
            vocab = 65535
        token_file(data, n, vocab)
        os.environ.setdefault("STARPU_HOME", os.path.join(tmp, "starpu"))
        cmds = {}
        notes = []
        model_dir = None
        if a.quantize != "none":
            model_dir = os.path.join(tmp, "model")
            cmds["save"] = save_model(a, model_dir)
        for r in range(a.rounds):
            l0 = load()
            ms, rss, own, cmds["nnt"] = run_nnt(a, data, os.path.join(tmp, f"out{r}"))
            sides["nnt"].append((ms, rss, own, (l0, load())))
            print(f"round {r + 1} nnt: {[round(x) for x in ms]} ms, RSS {rss:.0f} MiB, "
                  f"load {l0} -> {load()}", flush=True)
            l0 = load()
            ms, rss, own, cmds["torch"], note = run_torch(a, model_dir)
            notes.append(note)
            sides["torch"].append((ms, rss, own, (l0, load())))
            print(f"round {r + 1} torch: {[round(x) for x in ms]} ms, RSS {rss:.0f} MiB, "
                  f"load {l0} -> {load()}", flush=True)
    label = "bf16 autocast" if a.precision == "bf16" else "fp32"
    nnt_label = "--precision bf16" if a.precision == "bf16" else "fp32"
    quant = ""
    if a.quantize != "none":
        import importlib.metadata as md
        try:
            bnb_version = md.version("bitsandbytes")
        except md.PackageNotFoundError:
            bnb_version = "?"
        label = f"bitsandbytes {bnb_version} nf4, {label}"
        nnt_label += f" --quantize {a.quantize}"
        quant = (f" QLoRA: nnt --quantize {a.quantize} against transformers' "
                 f"{bnb_config_text(a)} (bitsandbytes {bnb_version}; lm_head and embeddings "
                 f"unquantized, no prepare_model_for_kbit_training);")
    print(f"\nCPU: {cpu_model()}, {a.threads} threads; {a.shape} shape, {a.precision},{quant} "
          f"B {a.batch}, T {a.seq}, {'DoRA' if a.dora else 'LoRA'} r {a.rank} alpha {a.alpha:g} on {a.targets}; one "
          f"warm-up step and {a.steps} timed steps a run, {a.rounds} rounds nnt, PyTorch, "
          f"nnt, ... (medians of the runs' means)\n")
    print("| side | ms / step | tokens / s | peak RSS MiB (time -v) | runs: mean ms, steps ms, "
          "load before -> after |")
    print("|------|-----------|------------|--------------|-----------|")
    med = {}
    for key, name in (("nnt", f"nnt-train ({nnt_label})"),
                      ("torch", f"PEFT + transformers ({label} eager)")):
        means = [statistics.mean(r[0]) for r in sides[key]]
        med[key] = statistics.median(means)
        runs = "; ".join(f"{statistics.mean(r[0]):.0f} ({', '.join(f'{x:.0f}' for x in r[0])}), "
                         f"{r[3][0]} -> {r[3][1]}" for r in sides[key])
        print(f"| {name} | {med[key]:.0f} | {a.batch * a.seq / (med[key] / 1e3):.0f} | "
              f"{max(r[1] for r in sides[key]):.0f} | {runs} |")
    print(f"\nnnt / PyTorch speed: {med['torch'] / med['nnt']:.2f}x; nnt's own RAM peak "
          f"{max(r[2] for r in sides['nnt']):.0f} MiB, PyTorch's getrusage "
          f"{max(r[2] for r in sides['torch']):.0f} MiB"
          + (f"; PyTorch runs: {'; '.join(notes)}" if a.quantize != "none" else ""))
    for key in ("nnt", "torch"):
        print(f"\n    {cmds[key]}")
    if a.quantize != "none":
        print(f"\n    (the PyTorch side loads the 4-bit checkpoint of the random model, quantized"
              f" with {bnb_config_text(a)}, that this saved:)\n    {cmds['save']}")

if __name__ == "__main__":
    sys.exit(main())
