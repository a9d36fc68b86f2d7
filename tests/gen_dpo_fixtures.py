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
      K.losses, K.accuracies, K.margins (3 each), K.val_loss, K.val_accuracy, K.val_margin,
      K.final.<HF name>, for K the reference-free losses (free_loss below: TRL's
      CPOTrainer loss_type "sigmoid" (cpo, beta 0.3, cpo_alpha 0.6) and "simpo" (simpo,
      beta 0.3, simpo_gamma 0.7, cpo_alpha 0.4), ORPOTrainer (orpo, beta 0.3)): the same
      3 steps from the model before training; orpo.grad.<HF name>: ORPO's gradient of the
      first batch; rpo.*: the same for DPO's sigmoid loss plus 0.5 times the chosen nll
      (RPO: DPOTrainer's loss_type ["sigmoid", "sft"], loss_weights [1, 0.5])
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
# the reference-free losses' parameters (not TRL's defaults: 0.1, 1.0, 0.5): ORPO's beta
# (lambda) is BETA
CPO_BETA, CPO_ALPHA = 0.3, 0.6
SIMPO_BETA, SIMPO_GAMMA, SIMPO_ALPHA = 0.3, 0.7, 0.4
RPO_ALPHA = 0.5   # DPO (sigmoid, BETA) plus this times the chosen nll: TRL's loss_type
                  # ["sigmoid", "sft"], loss_weights [1, RPO_ALPHA]
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


def adamw(model):
    """torch AdamW lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight decay 0.1 on the matrices and
    embeddings, none on the norms (nnt's default decay)"""
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decayed, "weight_decay": WD},
                              {"params": others, "weight_decay": 0.0}], lr=LR,
                             betas=(0.9, 0.999), eps=1e-8)


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


def token_logps(model, rows):
    """(B, T - 1) float64: log p of each row's next token."""
    logits = model(input_ids=rows, use_cache=False).logits.double()
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    return logp.gather(-1, rows[:, 1:].unsqueeze(-1)).squeeze(-1)


def seen(counts):
    """(B, T) 1 where the row holds its example (prompt and completion: up to its last
    counted token), 0 on the padding after it."""
    pos = torch.arange(T).expand_as(counts)
    last = torch.where(counts > 0, pos, torch.full_like(pos, -1)).max(dim=1).values
    return (pos <= last.unsqueeze(1)).to(counts.dtype)


def free_loss(tok, counts, kind, ref=None):
    """The reference-free losses of a batch of pairs from its tokens' log p (B, T - 1),
    float64, as TRL 1.16 computes them (trl/experimental/cpo/cpo_trainer.py cpo_loss and
    concatenated_forward, orpo/orpo_trainer.py odds_ratio_loss and concatenated_forward):
      cpo    -logsigmoid(beta (pi_c - pi_r)) + cpo_alpha nll, pi the sums over the
             completion's tokens, nll the mean of -log p over the chosen rows' completion
             tokens of the batch
      simpo  -logsigmoid(beta (a_c - a_r) - gamma) + cpo_alpha nll, a the per-token means
      orpo   nll' - beta logsigmoid(log odds), log odds = (a_c - a_r) - (log(1 - exp(a_c))
             - log(1 - exp(a_r))), nll' the mean of -log p over the chosen rows' prompt and
             completion tokens (every target up to the last completion token)
    The rewards: beta times pi (cpo) or a (simpo, orpo)."""
    cnt = counts[:, 1:].double()
    sums = (tok * cnt).sum(dim=1)
    avg = sums / cnt.sum(dim=1)
    c = cnt[0::2]
    nll = -(tok[0::2] * c).sum() / c.sum()
    if kind == "rpo":   # DPO's sigmoid loss (ref: the reference's sums) + RPO_ALPHA nll
        beta, s = BETA, sums - ref
        loss = -F.logsigmoid(beta * (s[0::2] - s[1::2])).mean() + RPO_ALPHA * nll
    elif kind == "cpo":
        beta, s = CPO_BETA, sums
        loss = -F.logsigmoid(beta * (s[0::2] - s[1::2])).mean() + CPO_ALPHA * nll
    elif kind == "simpo":
        beta, s = SIMPO_BETA, avg
        loss = (-F.logsigmoid(beta * (s[0::2] - s[1::2]) - SIMPO_GAMMA).mean() +
                SIMPO_ALPHA * nll)
    else:
        beta, s = BETA, avg
        odds = (s[0::2] - s[1::2]) - (torch.log(-torch.expm1(s[0::2])) -
                                      torch.log(-torch.expm1(s[1::2])))
        w = seen(counts)[0::2, 1:].double()
        nll_all = -(tok[0::2] * w).sum() / w.sum()
        loss = nll_all - beta * F.logsigmoid(odds).mean()
    chosen, rejected = beta * s[0::2], beta * s[1::2]
    return loss, (chosen > rejected).double().mean(), (chosen - rejected).mean()


def free_terms(model, rows, counts, kind, ref=None):
    return free_loss(token_logps(model, rows), counts, kind, ref)


def check_trl_free(rows, counts):
    """free_loss against TRL's own functions (called with the attributes they read) on the
    pairs' rows under random logits: the per-sequence log p (get_batch_logps), the CPO /
    SimPO losses (cpo_loss), ORPO's (odds_ratio_loss), the nll terms as the source writes
    them. TRL must be installed (1.16)."""
    from types import SimpleNamespace
    from trl.experimental.cpo import cpo_trainer
    from trl.experimental.orpo import orpo_trainer
    src_c, src_o = inspect.getsource(cpo_trainer), inspect.getsource(orpo_trainer)
    assert "loss = losses.mean() + self.cpo_alpha * policy_nll_loss" in src_c
    assert "nll_loss = cross_entropy_loss(all_logits[:len_chosen], labels[:len_chosen])" in src_c
    assert 'labels = concatenated_batch["concatenated_labels"].clone()' in src_c
    assert "loss = policy_nll_loss - losses.mean()" in src_o
    assert "labels = torch.where(attention_mask == 1, labels, -100)" in src_o
    assert "average_log_prob=True" in src_o
    g = torch.Generator().manual_seed(7103)
    logits = torch.randn(rows.shape[0], T, V, generator=g, dtype=torch.float64) * 2
    labels = torch.where(counts > 0, rows, torch.full_like(rows, -100))
    acc = SimpleNamespace(device="cpu")
    tok = torch.log_softmax(logits[:, :-1], dim=-1).gather(
        -1, rows[:, 1:].unsqueeze(-1)).squeeze(-1)
    ce = torch.nn.CrossEntropyLoss()
    for kind in ("cpo", "simpo", "orpo"):
        mine, _, _ = free_loss(tok, counts, kind)
        if kind == "orpo":
            lp = orpo_trainer.ORPOTrainer.get_batch_logps(logits, labels, average_log_prob=True)
            me = SimpleNamespace(beta=BETA, accelerator=acc)
            losses = orpo_trainer.ORPOTrainer.odds_ratio_loss(me, lp[0::2], lp[1::2])[0]
            full = torch.where(seen(counts) > 0, rows, torch.full_like(rows, -100))
            nll = ce(logits[0::2, :-1].reshape(-1, V), full[0::2, 1:].reshape(-1))
            trl = nll - losses.mean()
        else:
            avg = kind == "simpo"
            lp = cpo_trainer.CPOTrainer.get_batch_logps(logits, labels, average_log_prob=avg)
            alpha = CPO_ALPHA if kind == "cpo" else SIMPO_ALPHA
            me = SimpleNamespace(beta=CPO_BETA if kind == "cpo" else SIMPO_BETA, alpha=0.0,
                                 loss_type="sigmoid" if kind == "cpo" else "simpo",
                                 simpo_gamma=SIMPO_GAMMA, label_smoothing=0.0,
                                 accelerator=acc)
            losses = cpo_trainer.CPOTrainer.cpo_loss(me, lp[0::2], lp[1::2])[0]
            nll = ce(logits[0::2, :-1].reshape(-1, V), labels[0::2, 1:].reshape(-1))
            trl = losses.mean() + alpha * nll
        err = abs(mine.item() - trl.item())
        print(f"{kind}: this file's loss {mine.item():.9f}, TRL's {trl.item():.9f}")
        assert err < 1e-6 * max(1.0, abs(trl.item())), (kind, err)   # (ORPO: float32 odds)


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
    assert "batch_loss = -chosen_per_token_logps[chosen_mask.bool()].mean()" in src
    assert "loss += per_sequence_loss.mean() * loss_weight" in src
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
    opt = adamw(model)
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
        o = adamw(m)
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
    # the reference-free losses (TRL's CPOTrainer and ORPOTrainer), from the model before
    # training: 3 steps' losses, accuracies, margins, the held-out loss after them, the
    # parameters after the steps (ORPO: and the first batch's gradient)
    check_trl_free(rows, counts)
    for kind in ("cpo", "simpo", "orpo", "rpo"):
        m = LlamaForCausalLM(cfg).float()
        m.load_state_dict(start)
        m.config.use_cache = False
        if kind == "orpo":   # (the others' gradients: through the parameters after 3 steps)
            b = slice(0, 2 * PER_STEP)
            loss, _, _ = free_terms(m, rows[b], counts[b], kind, ref[b])
            loss.backward()
            for name, p in m.named_parameters():
                out[kind + ".grad." + name] = p.grad.detach().clone()
            m.zero_grad()
        o = adamw(m)
        kl, ka, km = [], [], []
        for step in range(TRAIN_PAIRS // PER_STEP):
            b = slice(2 * PER_STEP * step, 2 * PER_STEP * (step + 1))
            loss, acc, margin = free_terms(m, rows[b], counts[b], kind, ref[b])
            o.zero_grad()
            loss.backward()
            o.step()
            kl.append(loss.item()), ka.append(acc.item()), km.append(margin.item())
        out[kind + ".losses"] = torch.tensor(kl, dtype=torch.float64)
        out[kind + ".accuracies"] = torch.tensor(ka, dtype=torch.float64)
        out[kind + ".margins"] = torch.tensor(km, dtype=torch.float64)
        with torch.no_grad():
            v = slice(2 * TRAIN_PAIRS, 2 * PAIRS)
            loss, acc, margin = free_terms(m, rows[v], counts[v], kind, ref[v])
        out[kind + ".val_loss"] = loss.reshape(1)
        out[kind + ".val_accuracy"] = acc.reshape(1)
        out[kind + ".val_margin"] = margin.reshape(1)
        for name, p in m.named_parameters():
            out[kind + ".final." + name] = p.detach().clone()
        print(kind, kl, ka, km, out[kind + ".val_loss"].item())
    save_file({k: v.contiguous() for k, v in out.items()},
              os.path.join(args.out, "reference.safetensors"))
    print("losses", losses, "accuracies", accs, "margins", margins)
    print("val", out["val_loss"].item(), out["val_accuracy"].item(), out["val_margin"].item())


if __name__ == "__main__":
    main()
