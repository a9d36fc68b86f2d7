#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/dpo_tiny/loss_types.safetensors: TRL's DPOTrainer pair losses of
the loss types nnt has as NNT_DPO_ROBUST ... NNT_DPO_SIGMOID_NORM, and their derivatives by
the two log ratios, at fixed points, for tests/test_dpo.c (test_loss_types_trl).

The losses are TRL's own code: each loss_type's branch of DPOTrainer's loss (the lines under
`elif loss_type == "NAME":` in the installed trl/trainer/dpo_trainer.py, 1.16), run on float64
tensors with the attributes it reads (beta, label_smoothing, args.discopop_tau) and the
variables it reads (chosen_logratios, rejected_logratios, their scores and delta_score as
f_divergence_type "reverse_kl" makes them, completion_mask; torch.tensor of a number in
float64, where TRL's default is float32); the derivatives by autograd.

Not run by CI (it needs PyTorch and TRL); run once and commit the output.

    /tmp/venv-torch/bin/python tests/gen_dpo_loss_types.py [--out tests/fixtures/dpo_tiny]

Tensors:
  points     (N, 4) float64: per point lc, lr (the chosen and rejected log ratios), nc, nr
             (their sequences' counted targets)
  NAME.b<B>.loss, NAME.b<B>.dc, NAME.b<B>.dr   (N) float64: the pair loss and its
             derivatives by lc and lr, at beta BETAS[B], with the loss's parameter PARAM[NAME]
  params     (K, 3) float64: per loss (KINDS' order) its nnt_dpo_loss, label_smoothing, tau
  batch      (S, 4) float64: a micro-batch of S pairs' chosen and rejected log-likelihoods under
             the policy and under the reference (no two sorted values tied: their order would
             route the derivatives), for the losses of the pairs together (aot, aot_unpaired)
  NAME.b<B>.loss (S): TRL's per_sequence_loss (a sorted position each), NAME.b<B>.dc and
             .dr (S): the derivatives of their sum by each pair's policy log-likelihoods
  train.NAME.losses (3 or 4) float64, NAME in TRAINED: the steps of the tiny Llama of this
             directory
             (llama/, pairs.safetensors, the reference's ref_logps of reference.safetensors)
             trained with that loss at beta 0.3 as tests/gen_dpo_fixtures.py trains its IPO
             run (2 pairs a step over TRAINED's pairs, AdamW lr 1e-2, betas (0.9, 0.999), eps 1e-8, decay
             0.1 on the matrices and embeddings): each step's loss before its update
"""
import argparse
import inspect
import os
import textwrap
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

# nnt_dpo_loss values, TRL's names; label_smoothing and discopop_tau given to each
KINDS = [(8, "robust", 0.1, 0.05), (9, "exo_pair", 1e-3, 0.05), (10, "nca_pair", 0.0, 0.05),
         (11, "bco_pair", 0.0, 0.05), (12, "sppo_hard", 0.0, 0.05), (13, "apo_zero", 0.0, 0.05),
         (14, "apo_down", 0.0, 0.05), (15, "discopop", 0.0, 0.3),
         (16, "sigmoid_norm", 0.0, 0.05)]
SORTED = [(17, "aot", 0.1), (18, "aot_unpaired", 0.0)]   # (nnt_dpo_loss, name, smoothing)
BETAS = (0.3, 2.0)
# (KINDS', SORTED's parameters); 2 pairs a step (B 4) over the 6 training pairs, aot over all
# 8 (its first step's two orders are the same: the policy is the reference; 4 steps let later
# steps' gradients, whose orders differ, reach the losses)
TRAINED = {"robust": 6, "discopop": 6, "sigmoid_norm": 6, "apo_down": 6, "aot": 8}


def branch(src, name):
    """The lines of loss_type NAME's branch of the loss, dedented"""
    lines = src.splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        if s in ('if loss_type == "%s":' % name, 'elif loss_type == "%s":' % name):
            ind = len(line) - len(line.lstrip())
            body = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= ind:
                    break
                body.append(nxt)
            return textwrap.dedent("\n".join(body))
    raise SystemExit("no branch for loss_type %s in TRL's source" % name)


class Float64Torch:
    """torch, with torch.tensor of a Python number in float64: exo_pair's branch makes its
    epsilon a tensor, float32 by default, whose logs would round once more than the rest"""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def tensor(data, **kw):
        kw.setdefault("dtype", torch.float64)
        return torch.tensor(data, **kw)


def run_branch(code, beta, ls, tau, **variables):
    """per_sequence_loss of a loss_type's branch (code) run with these attributes and
    variables"""
    me = SimpleNamespace(beta=beta, label_smoothing=ls, args=SimpleNamespace(discopop_tau=tau))
    env = {"self": me, "torch": Float64Torch(), "F": F, "device": "cpu", **variables}
    exec(code, env)
    return env["per_sequence_loss"]


def points():
    lc = [-12.5, -3.25, -0.75, 0.0, 0.6, 2.0, 7.5]
    lr = [-9.0, -4.5, -0.5, 0.25, 1.25, 6.0]
    pts = []
    for i, a in enumerate(lc):
        for j, b in enumerate(lr):
            pts.append((a, b, [1, 3, 17, 5][(i + j) % 4], [2, 1, 9, 17][(i * j) % 4]))
    return torch.tensor(pts, dtype=torch.float64)


def sorted_losses(src, out):
    """SORTED's losses on one micro-batch (the docstring above) into out"""
    g = torch.Generator().manual_seed(5)
    batch = -torch.rand(7, 4, generator=g, dtype=torch.float64) * 20
    out["batch"] = batch
    for (_, name, ls) in SORTED:
        code = compile(branch(src, name), name, "exec")
        for b, beta in enumerate(BETAS):
            pc = batch[:, 0].clone().requires_grad_(True)
            pr = batch[:, 1].clone().requires_grad_(True)
            rc, rr = batch[:, 2], batch[:, 3]
            loss = run_branch(code, beta, ls, 0.05, chosen_logps=pc, rejected_logps=pr,
                              ref_chosen_logps=rc, ref_rejected_logps=rr,
                              chosen_logratios=pc - rc, rejected_logratios=pr - rr)
            dc, dr = torch.autograd.grad(loss.sum(), (pc, pr))
            key = "%s.b%d" % (name, b)
            out[key + ".loss"] = loss.detach().contiguous()
            out[key + ".dc"], out[key + ".dr"] = dc.contiguous(), dr.contiguous()


def train_runs(src, d, out):
    """TRAINED's runs (the docstring above) into out"""
    import sys
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gen_dpo_fixtures import BETA, PER_STEP, adamw, row_logps
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    pairs = load_file(os.path.join(d, "pairs.safetensors"))
    rows, counts = pairs["rows"].long(), pairs["counts"].long()
    ref = load_file(os.path.join(d, "reference.safetensors"))["ref_logps"]
    for (_, name, ls, tau) in KINDS + [(k, n, e, 0.05) for (k, n, e) in SORTED]:
        if name not in TRAINED:
            continue
        code = compile(branch(src, name), name, "exec")
        m = LlamaForCausalLM.from_pretrained(os.path.join(d, "llama"), dtype=torch.float32,
                                             attn_implementation="eager")
        m.config.use_cache = False
        o = adamw(m)
        losses = []
        for step in range(TRAINED[name] // PER_STEP):
            b = slice(2 * PER_STEP * step, 2 * PER_STEP * (step + 1))
            logps, r, c = row_logps(m, rows[b], counts[b]), ref[b], counts[b].double()
            lc, lr = logps[0::2] - r[0::2], logps[1::2] - r[1::2]
            loss = run_branch(code, BETA, ls, tau, chosen_logratios=lc, rejected_logratios=lr,
                              chosen_scores=lc, rejected_scores=lr, delta_score=lc - lr,
                              completion_mask=torch.cat([c[0::2], c[1::2]]),
                              chosen_logps=logps[0::2], rejected_logps=logps[1::2],
                              ref_chosen_logps=r[0::2], ref_rejected_logps=r[1::2]).mean()
            o.zero_grad()
            loss.backward()
            o.step()
            losses.append(loss.item())
        out["train.%s.losses" % name] = torch.tensor(losses, dtype=torch.float64)
        print("trained with %s: losses %s" % (name, losses))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "dpo_tiny"))
    args = ap.parse_args()
    from trl.trainer import dpo_trainer
    src = inspect.getsource(dpo_trainer)
    assert "delta_score = chosen_scores - rejected_scores" in src
    pts = points()
    n = pts.shape[0]
    out = {"points": pts}
    for (_, name, ls, tau) in KINDS:
        code = compile(branch(src, name), name, "exec")
        for b, beta in enumerate(BETAS):
            lc = pts[:, 0].clone().requires_grad_(True)
            lr = pts[:, 1].clone().requires_grad_(True)
            width = int(pts[:, 2:].max())
            mask = torch.zeros(2 * n, width, dtype=torch.float64)
            for k in range(n):
                mask[k, :int(pts[k, 2])] = 1
                mask[n + k, :int(pts[k, 3])] = 1
            loss = run_branch(code, beta, ls, tau, chosen_logratios=lc, rejected_logratios=lr,
                              chosen_scores=lc, rejected_scores=lr, delta_score=lc - lr,
                              completion_mask=mask)
            dc, dr = torch.autograd.grad(loss.sum(), (lc, lr))
            key = "%s.b%d" % (name, b)
            out[key + ".loss"] = loss.detach().contiguous()
            out[key + ".dc"], out[key + ".dr"] = dc.contiguous(), dr.contiguous()
            print("%s beta %g: losses %.4g .. %.4g" % (name, beta, float(loss.min()),
                                                       float(loss.max())))
    out["params"] = torch.tensor([(k, ls, tau) for (k, _, ls, tau) in KINDS],
                                 dtype=torch.float64)
    sorted_losses(src, out)
    train_runs(src, args.out, out)
    save_file(out, os.path.join(args.out, "loss_types.safetensors"))


if __name__ == "__main__":
    main()
