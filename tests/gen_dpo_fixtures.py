#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/dpo_tiny/: a tiny Llama trained by direct preference optimization
as TRL's DPOTrainer trains it (loss_type "sigmoid", the reference the model before training,
as with precompute_ref_log_probs), for tests/test_dpo.c.

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: a random model (fixed seeds), single-threaded, deterministic algorithms, eager
attention.

    /tmp/venv-torch/bin/python tests/gen_dpo_fixtures.py [--out tests/fixtures/dpo_tiny]

The loss of a batch of pairs, as trl/trainer/dpo_trainer.py (1.16) computes it:
  logps      per row, the sum over its counted targets of log p(target) (the completion's
             tokens; the prompt, its first token and the padding do not count)
  z          beta * ((logp_chosen - ref_chosen) - (logp_rejected - ref_rejected))
  loss       mean over the batch's pairs of -logsigmoid(z)
  rewards    beta * (logp - ref); accuracy: the share of pairs with the chosen reward above
             the rejected one; margin: the mean of their difference
The generator also checks this loss against TRL's own code when trl is installed: TRL's
DPOTrainer._compute_loss is not callable alone, so the check is against the formula as
written in that file (loss_type "sigmoid"), read from the installed source.

Model (V 64, C 32, L 2, NH 4, NKV 2, hidden 48), T 16, beta 0.3 (not TRL's default 0.1).
Pairs: 8 of them, each a prompt of 2-6 random ids and chosen / rejected completions of 1-8
ids; a row is prompt + completion padded with id 0 to T; the completion's ids count.
Pairs 0-5 train (one batch of 2 pairs, B 4, a step: pairs 0-1, 2-3, 4-5); pairs 6-7 are held
out.
  llama/config.json, llama/model.safetensors   the model before training (save_pretrained)
  pairs.safetensors   rows (16, T) int32: row 2p pair p's chosen sequence, 2p + 1 its
                      rejected one; counts (16, T) int32 (1: the token counts as a target)
  pairs.bin           the rows as nnt-tokenize --preference writes them (nnt-tokenize(1),
                      TOKEN FILES), encoded here independently: header magic 20240520,
                      version 2, N, flags 1 (loss mask), block T; N uint16 ids; the mask bits
  reference.safetensors
      ref_logps (16) float64: each row's log-likelihood under the model before training
      loss1 (1): the first batch's loss (log 2: the policy is the reference); grad.<HF name>:
      the gradient of that loss for every parameter
      losses (3), accuracies (3), margins (3): each step's, before its update (torch AdamW lr
      1e-2, betas (0.9, 0.999), eps 1e-8, weight decay 0.1 on the matrices and embeddings,
      none on the norms: nnt's default decay)
      val_loss, val_accuracy, val_margin (1 each): the held-out pairs after the 3 steps
      final.<HF name>: every parameter after the 3 steps
      ipo.losses, ipo.final.<HF name>, hinge.losses, hinge.final.<HF name>: the same 3 steps
      with TRL's loss types "ipo" ((d' - 1 / (2 beta))^2, d' of the log ratios averaged
      over each sequence's completion tokens) and "hinge" (relu(1 - beta d))
"""
import argparse
import inspect
import os
import struct

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

T, V, BETA, LR, WD = 16, 64, 0.3, 1e-2, 0.1
PAIRS, TRAIN_PAIRS, PER_STEP = 8, 6, 2


def make_pairs(g):
    rows, counts = [], []
    for _ in range(PAIRS):
        np_ = int(torch.randint(2, 7, (1,), generator=g))
        prompt = torch.randint(1, V, (np_,), generator=g).tolist()
        for _side in range(2):
            nc = int(torch.randint(1, 9, (1,), generator=g))
            comp = torch.randint(1, V, (nc,), generator=g).tolist()
            row = prompt + comp + [0] * (T - np_ - nc)
            cnt = [0] * np_ + [1] * nc + [0] * (T - np_ - nc)
            rows.append(row), counts.append(cnt)
    return torch.tensor(rows), torch.tensor(counts)


def token_file(rows, cnt):
    """nnt's token file with a loss mask in rows of T, written byte by byte."""
    n = rows.numel()
    head = [20240520, 2, n, 1, T] + [0] * 251
    out = bytearray((n + 7) // 8)
    for i, f in enumerate(cnt.reshape(-1).tolist()):
        if f:
            out[i // 8] |= 1 << (i % 8)
    return (struct.pack("<256i", *head) + struct.pack(f"<{n}H", *rows.reshape(-1).tolist()) +
            bytes(out))


def row_logps(model, rows, counts):
    logits = model(input_ids=rows, use_cache=False).logits.double()
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    tok = logp.gather(-1, rows[:, 1:].unsqueeze(-1)).squeeze(-1)
    return (tok * counts[:, 1:]).sum(dim=1)


def dpo_terms(logps, ref, counts=None, kind="sigmoid"):
    chosen = BETA * (logps[0::2] - ref[0::2])
    rejected = BETA * (logps[1::2] - ref[1::2])
    z = chosen - rejected
    if kind == "ipo":   # TRL: the log ratios averaged over the completion's tokens
        n = counts.sum(dim=1).clamp(min=1.0).double()
        delta = (logps[0::2] - ref[0::2]) / n[0::2] - (logps[1::2] - ref[1::2]) / n[1::2]
        loss = ((delta - 1 / (2 * BETA)) ** 2).mean()
    elif kind == "hinge":
        loss = torch.relu(1 - z).mean()
    else:
        loss = -F.logsigmoid(z).mean()
    return loss, (chosen > rejected).double().mean(), z.mean()


def check_trl():
    """The loss above is TRL's sigmoid loss: the line in the installed dpo_trainer.py."""
    try:
        from trl.trainer import dpo_trainer
    except ImportError:
        print("trl not installed: the formula is not checked against its source")
        return
    src = inspect.getsource(dpo_trainer)
    assert "per_sequence_loss = -F.logsigmoid(self.beta * delta_score)" in src
    assert "delta_score = chosen_scores - rejected_scores" in src
    assert "chosen_logratios = chosen_logps - ref_chosen_logps" in src
    assert "reward_accuracies = (chosen_rewards > rejected_rewards).float()" in src
    assert "per_sequence_loss = torch.relu(1 - self.beta * delta_score)" in src
    assert "per_sequence_loss = (ipo_delta - 1 / (2 * self.beta)) ** 2" in src
    assert "chosen_avg_score = chosen_scores / chosen_mask.sum(dim=1).clamp(min=1.0)" in src
    print("TRL's sigmoid loss and rewards as computed here")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "dpo_tiny"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    check_trl()
    g = torch.Generator().manual_seed(7100)
    rows, counts = make_pairs(g)
    save_file({"rows": rows.to(torch.int32), "counts": counts.to(torch.int32)},
              os.path.join(args.out, "pairs.safetensors"))
    with open(os.path.join(args.out, "pairs.bin"), "wb") as fh:
        fh.write(token_file(rows, counts))
    cfg = LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False,
                      mlp_bias=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                      attn_implementation="eager", bos_token_id=None, eos_token_id=None,
                      pad_token_id=None)
    torch.manual_seed(7101)
    model = LlamaForCausalLM(cfg).float()
    gw = torch.Generator().manual_seed(7102)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gw))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gw))
    model.config.use_cache = False
    model.save_pretrained(os.path.join(args.out, "llama"), safe_serialization=True)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out = {}
    with torch.no_grad():
        ref = row_logps(model, rows, counts)
    out["ref_logps"] = ref
    # the first batch's loss and gradient
    b = slice(0, 2 * PER_STEP)
    loss, _, _ = dpo_terms(row_logps(model, rows[b], counts[b]), ref[b])
    loss.backward()
    out["loss1"] = loss.detach().float().reshape(1)
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().clone()
    model.zero_grad()
    # weight decay on the matrices and embeddings only, as nnt's optimizer decays by default
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": WD},
                             {"params": others, "weight_decay": 0.0}], lr=LR,
                            betas=(0.9, 0.999), eps=1e-8)
    losses, accs, margins = [], [], []
    for step in range(TRAIN_PAIRS // PER_STEP):
        b = slice(2 * PER_STEP * step, 2 * PER_STEP * (step + 1))
        loss, acc, margin = dpo_terms(row_logps(model, rows[b], counts[b]), ref[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item()), accs.append(acc.item()), margins.append(margin.item())
    out["losses"] = torch.tensor(losses, dtype=torch.float64)
    out["accuracies"] = torch.tensor(accs, dtype=torch.float64)
    out["margins"] = torch.tensor(margins, dtype=torch.float64)
    with torch.no_grad():
        v = slice(2 * TRAIN_PAIRS, 2 * PAIRS)
        loss, acc, margin = dpo_terms(row_logps(model, rows[v], counts[v]), ref[v])
    out["val_loss"] = loss.reshape(1)
    out["val_accuracy"] = acc.reshape(1)
    out["val_margin"] = margin.reshape(1)
    for name, p in model.named_parameters():
        out["final." + name] = p.detach().clone()
    # the other loss types, from the model before training: 3 steps' losses, the parameters
    for kind in ("ipo", "hinge"):
        m = LlamaForCausalLM(cfg).float()
        m.load_state_dict(start)
        m.config.use_cache = False
        decayed = [p for p in m.parameters() if p.dim() >= 2]
        others = [p for p in m.parameters() if p.dim() < 2]
        o = torch.optim.AdamW([{"params": decayed, "weight_decay": WD},
                               {"params": others, "weight_decay": 0.0}], lr=LR,
                              betas=(0.9, 0.999), eps=1e-8)
        kl = []
        for step in range(TRAIN_PAIRS // PER_STEP):
            b = slice(2 * PER_STEP * step, 2 * PER_STEP * (step + 1))
            loss, _, _ = dpo_terms(row_logps(m, rows[b], counts[b]), ref[b], counts[b], kind)
            o.zero_grad()
            loss.backward()
            o.step()
            kl.append(loss.item())
        out[kind + ".losses"] = torch.tensor(kl, dtype=torch.float64)
        for name, p in m.named_parameters():
            out[kind + ".final." + name] = p.detach().clone()
        print(kind, kl)
    save_file({k: v.contiguous() for k, v in out.items()},
              os.path.join(args.out, "reference.safetensors"))
    print("losses", losses, "accuracies", accs, "margins", margins)
    print("val", out["val_loss"].item(), out["val_accuracy"].item(), out["val_margin"].item())


if __name__ == "__main__":
    main()
