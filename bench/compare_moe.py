#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Training-step comparison of an OLMoE-shaped model: transformers' OlmoeForCausalLM (eager
attention, eager experts: its loop over the experts that got tokens, fp32, AdamW) against
nnt-train --load-hf on the directory transformers saved (same shapes and weights). With
--arch gpt_oss, a GptOssForCausalLM of the same sizes instead (attention sinks, q/k/v/o and
expert biases, the clamped SwiGLU, windows of 128 on every other layer, YaRN).

    /tmp/venv-torch/bin/python bench/compare_moe.py NNT_TRAIN [L C E I K T]
        [--threads 2] [--batch 4] [--vocab 4096] [--rounds 2] [--torch-steps 8]
        [--nnt-steps 6] [--arch olmoe|gpt_oss]

Defaults: L 4, C 512, 32 experts of 256, top 4, B 4, T 128, V 4096, heads of 64 (issue 40's
benchmark: 8 1024 64 512 8 256). The model is made and saved once; then each round runs
transformers, then nnt-train (A B A B ...), each in a fresh process under /usr/bin/time
(peak RSS), with the load average before and after. transformers: --torch-steps steps of
random tokens, the first two dropped (they are slow); nnt-train: --nnt-steps steps of random
tokens from an llm.c token file, the first dropped. Prints every step time, the medians over
all kept steps of each side, their spread (min .. max), the ratio of the medians, and
nnt-train's model, MFU and memory lines. Not run by make check."""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def model_class(a):
    import transformers
    return getattr(transformers, "GptOssForCausalLM" if a.arch == "gpt_oss"
                   else "OlmoeForCausalLM")


def make_model(a, hf):
    import torch
    from transformers import GptOssConfig, OlmoeConfig
    torch.manual_seed(0)
    if a.arch == "gpt_oss":
        cfg = GptOssConfig(vocab_size=a.vocab, hidden_size=a.C, intermediate_size=a.I,
                           num_hidden_layers=a.L, num_attention_heads=a.C // 64,
                           num_key_value_heads=max(1, a.C // 512), head_dim=64,
                           num_local_experts=a.E, num_experts_per_tok=a.K,
                           max_position_embeddings=max(a.T, 4096), sliding_window=128,
                           attn_implementation="eager", experts_implementation="eager",
                           tie_word_embeddings=False)
        model_class(a)(cfg).save_pretrained(hf)
        return
    cfg = OlmoeConfig(vocab_size=a.vocab, hidden_size=a.C, intermediate_size=a.I,
                      num_hidden_layers=a.L, num_attention_heads=a.C // 64,
                      num_key_value_heads=a.C // 64, num_experts=a.E,
                      num_experts_per_tok=a.K, max_position_embeddings=a.T,
                      attn_implementation="eager", experts_implementation="eager",
                      tie_word_embeddings=False)
    model_class(a)(cfg).save_pretrained(hf)


def torch_worker(a, hf):
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = model_class(a).from_pretrained(hf, attn_implementation="eager",
                                             experts_implementation="eager",
                                             dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(a.torch_steps):
        seq = torch.randint(0, a.vocab, (a.batch, a.T + 1))
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = model(input_ids=seq[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, a.vocab),
                                                 seq[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        loss.item()
        print(f"{1e3 * (time.perf_counter() - t0):.1f}", flush=True)


def token_file(path, n, vocab):
    """An llm.c token file (magic 20240520, version 1, uint16 ids) of n random ids."""
    import numpy as np
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, n
    ids = np.random.default_rng(0).integers(0, vocab, n, dtype=np.uint16)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(ids.tobytes())


def timed(cmd):
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{cmd[0]} failed: {p.stderr[-3000:]}")
    return p, int(p.stderr.strip().splitlines()[-1]) / 1024.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("nnt_train")
    p.add_argument("shape", nargs="*", type=int, default=[4, 512, 32, 256, 4, 128])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--torch-steps", type=int, default=8)
    p.add_argument("--nnt-steps", type=int, default=6)
    p.add_argument("--arch", choices=("olmoe", "gpt_oss"), default="olmoe")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args()
    a.L, a.C, a.E, a.I, a.K, a.T = a.shape
    if a.worker:
        return torch_worker(a, a.worker)
    tmp = tempfile.mkdtemp(prefix="nnt-moe-bench-")
    hf = os.path.join(tmp, "hf")
    make_model(a, hf)
    data = os.path.join(tmp, "tokens.bin")
    token_file(data, max(100000, 2 * a.batch * (a.T + 1) * a.nnt_steps), a.vocab)
    env = os.environ.setdefault("STARPU_HOME", os.path.join(tmp, "starpu"))
    del env
    me = [sys.executable, os.path.abspath(__file__), a.nnt_train] + [str(x) for x in a.shape] + [
          "--worker", hf, "--threads", str(a.threads), "--batch", str(a.batch), "--vocab",
          str(a.vocab), "--torch-steps", str(a.torch_steps), "--arch", a.arch]
    nnt = [a.nnt_train, "--load-hf", hf, "--data", data, "--batch", str(a.batch), "--seq",
           str(a.T), "--steps", str(a.nnt_steps), "--cpus", str(a.threads), "--sample", "0",
           "--no-save", "--out", os.path.join(tmp, "out"), "--overwrite", "--lr", "1e-4",
           "--warmup", "0", "--schedule", "constant", "--grad-clip", "0"]
    kept = {"torch": [], "nnt": []}
    rss = {"torch": 0.0, "nnt": 0.0}
    for r in range(a.rounds):
        l0 = load()
        proc, m = timed(me)
        ms = [float(x) for x in proc.stdout.split()]
        kept["torch"] += ms[2:]
        rss["torch"] = max(rss["torch"], m)
        print(f"round {r + 1} transformers: steps {[round(x) for x in ms]} ms, RSS {m:.0f} MiB,"
              f" load {l0} -> {load()}", flush=True)
        l0 = load()
        proc, m = timed(nnt)
        with open(os.path.join(tmp, "out", "train.csv")) as f:
            ms = [float(row["ms"]) for row in csv.DictReader(f)]
        kept["nnt"] += ms[1:]
        rss["nnt"] = max(rss["nnt"], m)
        print(f"round {r + 1} nnt-train: steps {[round(x) for x in ms]} ms, RSS {m:.0f} MiB, "
              f"load {l0} -> {load()}", flush=True)
        for line in (proc.stdout + proc.stderr).splitlines():
            if line.startswith(("model:", "MFU:", "trained steps", "memory:")):
                print("  " + line.strip(), flush=True)
    tokens = a.batch * a.T
    med = {k: statistics.median(v) for k, v in kept.items()}
    for k, name in (("torch", "transformers eager"), ("nnt", "nnt-train")):
        v = kept[k]
        print(f"{name}: median {med[k]:.0f} ms/step ({tokens / med[k] * 1e3:.0f} tokens/s) over "
              f"{len(v)} steps, spread {min(v):.0f} .. {max(v):.0f}, peak RSS {rss[k]:.0f} MiB")
    print(f"ratio of the medians: {med['torch'] / med['nnt']:.2f}x")
    print("commands:\n    " + " ".join(me) + "\n    " + " ".join(nnt))


if __name__ == "__main__":
    main()
