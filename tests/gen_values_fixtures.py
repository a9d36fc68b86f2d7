#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/cls_values/: tiny classifiers trained on values, as transformers'
LlamaForSequenceClassification computes their loss (its problem_type "regression" and
"multi_label_classification": modeling_layers.py's GenericForSequenceClassification with
loss_utils.py's ForSequenceClassificationLoss), for tests/test_classifier.c.

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: random models (fixed seeds), single-threaded, deterministic, eager attention.

    /tmp/venv-torch/bin/python tests/gen_values_fixtures.py [--out tests/fixtures/cls_values]

The shapes, the rows (T 12, B 4, pad 0, a pad id inside row 1) and the optimizer (AdamW lr
1e-2, betas (0.9, 0.999), eps 1e-8, weight decay 0.1 on the parameters of 2 dims or more;
3 steps on the same batch) are tests/gen_cls_fixtures.py's, the vocabulary the llama3 fixture
tokenizer's (400: tests/check_classify.sh classifies texts with it). Every row's text is at
most T - 1 tokens, so that the rows fit a token file of rows of T that nnt's trainer reads
(each text then the one target that counts). The loss is the model's own
(model(input_ids, labels=values).loss), not a formula written here.
  reg3/        num_labels 3, problem_type "regression": values of either sign around 1
  multi3/      num_labels 3, problem_type "multi_label_classification": values 0 and 1, and
               one soft value (0.3)
  reg1/        num_labels 1, problem_type "regression" (transformers squeezes the logits):
               nnt reads a one-label directory as a reward model, so the test builds this
               one with problem_type set and reads the weights in
  <case>.safetensors  ids, values (B, num_labels) float32, pooled, logits (the pooled
               logits), loss (float64), grad.<name> (the first step's), losses (the 3
               steps'), final.<name>
  text_regression/, text_multi/  classifiers over the llama3 fixture tokenizer's vocabulary
               (pad its pad_token) of 2 values / 3 labels, and text_<kind>_train.jsonl,
               text_<kind>_val.jsonl: gen_cls_fixtures.py's texts as records {"text", "label":
               [values]}; text_<kind>.safetensors: losses (3 steps of B 4 records in order, each
               text truncated to TEXT_T - 1 tokens and the rows padded on the right, as
               gen_cls_fixtures.py's text classifier), val_loss (the 4 held-out records)
  <case>.expected  row 0's ids (with its padding), then what nnt-generate prints for it
               before the steps: the pooled logits (regression), or sigmoid of them
               (multi-label)
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaForSequenceClassification

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_cls_fixtures as base  # noqa: E402  (the shapes, rows, optimizer and training loop)

TOK_V = 400   # tests/fixtures/sft/llama3's vocabulary: nnt-generate --classify tokenizes texts
CASES = [
    # name, num_labels, problem_type, seed, row lengths, values
    ("reg3", 3, "regression", 11, [11, 9, 5, 1],
     [[0.5, -1.25, 2.0], [1.5, 0.0, -0.75], [-2.0, 1.0, 0.25], [3.0, -0.5, 1.0]]),
    ("multi3", 3, "multi_label_classification", 12, [7, 11, 3, 10],
     [[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 0.3, 0]]),
    ("reg1", 1, "regression", 13, [4, 11, 10, 6], [[1.75], [-0.5], [0.25], [2.5]]),
]


def model_loss(m, ids, values):
    return m(input_ids=ids, labels=values).loss


# Records of texts trained through nnt-train (tests/check_classify.sh): gen_cls_fixtures.py's
# texts with values (regression: 2 values; multi-label: 3 labels, a text may have several)
def text_values(kind, label, i):
    if kind == "regression":
        return [0.5 * label - 0.25, 1.0 - 0.125 * i]
    return [float(label == 0 or i % 5 == 0), float(label == 1), float(label == 2 or i % 3 == 0)]


def text_case(out, kind, problem, seed):
    """The records of kind, a classifier of their values over the llama3 fixture tokenizer,
    and its STEPS steps of B records in order then its held-out loss (text_<kind>.*)"""
    from transformers import AutoTokenizer
    fx = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sft")
    tok = AutoTokenizer.from_pretrained(os.path.join(fx, "llama3"))
    recs = {}
    for split, texts in (("train", base.TEXT_TRAIN), ("val", base.TEXT_VAL)):
        recs[split] = [(t, text_values(kind, lab, i)) for i, (t, lab) in enumerate(texts)]
        with open(os.path.join(out, "text_%s_%s.jsonl" % (kind, split)), "w") as fh:
            for t, v in recs[split]:
                fh.write(json.dumps({"text": t, "label": v}) + "\n")
    L = len(recs["train"][0][1])
    cfg = base.llama_config(L)
    cfg.vocab_size = len(tok)
    torch.manual_seed(seed)
    m = LlamaForSequenceClassification(cfg).eval()
    m.config.pad_token_id = tok.pad_token_id
    m.config.problem_type = problem
    m.save_pretrained(os.path.join(out, "text_" + kind), safe_serialization=True)

    def batch(rs):   # gen_cls_fixtures.text_batch's encoding, with the values
        ids, _ = base.text_batch(tok, [(t, 0) for t, _ in rs])
        return ids, torch.tensor([v for _, v in rs], dtype=torch.float32)

    opt = base.adamw(m)
    losses = []
    for st in range(base.STEPS):
        ids, y = batch(recs["train"][st * base.B:(st + 1) * base.B])
        opt.zero_grad()
        loss = model_loss(m, ids, y)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    ids, y = batch(recs["val"])
    with torch.no_grad():
        val_loss = model_loss(m, ids, y)
    save_file({"losses": torch.tensor(losses, dtype=torch.float64),
               "val_loss": val_loss.reshape(1).double()},
              os.path.join(out, "text_%s.safetensors" % kind))
    print(f"text_{kind}: steps {losses}, held out {val_loss.item():.6f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "fixtures", "cls_values"))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    g = torch.Generator().manual_seed(17)
    for name, L, problem, seed, lengths, values in CASES:
        torch.manual_seed(seed)
        cfg = base.llama_config(L)
        cfg.vocab_size = TOK_V   # (the rows' ids stay below 64)
        m = LlamaForSequenceClassification(cfg).eval()
        m.config.pad_token_id = 0
        m.config.problem_type = problem
        ids = base.rows(g, lengths, 0)
        y = torch.tensor(values, dtype=torch.float32)
        m.save_pretrained(os.path.join(out, name), safe_serialization=True)
        ref = {"ids": ids.to(torch.int32), "values": y,
               "pooled": base.pooled_positions(ids, 0).to(torch.int32)}
        with torch.no_grad():
            ref["logits"] = base.pooled_logits(m, ids)
            ref["loss"] = model_loss(m, ids, y).reshape(1).double()
        base.train(m, lambda: model_loss(m, ids, y), ref, True)
        assert m.config.problem_type == problem   # (transformers kept the one given)
        save_file({k: v.contiguous() for k, v in ref.items()},
                  os.path.join(out, name + ".safetensors"))
        # nnt-generate's view of row 0 (padded as it is) before the steps: the values, or the
        # labels' probabilities sigmoid(logit) (tests/check_classify.sh)
        z = ref["logits"][0].double()
        shown = torch.sigmoid(z) if problem == "multi_label_classification" else z
        with open(os.path.join(out, name + ".expected"), "w") as f:
            f.write(" ".join(str(int(i)) for i in ids[0]) + "\n")
            f.write(" ".join(f"{v:.9f}" for v in shown.tolist()) + "\n")
        print(f"{name}: loss {ref['loss'].item():.6f}, steps {ref['losses'].tolist()}")
    text_case(out, "regression", "regression", 21)
    text_case(out, "multi", "multi_label_classification", 22)
    for d in [c[0] for c in CASES] + ["text_regression", "text_multi"]:   # no training args
        for junk in ["generation_config.json"]:
            p = os.path.join(out, d, junk)
            if os.path.exists(p):
                os.remove(p)


if __name__ == "__main__":
    main()
