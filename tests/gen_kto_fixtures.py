#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/kto_tiny/: a tiny Llama trained by TRL 1.16's own KTOTrainer
(Kahneman-Tversky optimization on unpaired preference records), for tests/test_dpo.c and
tests/check_dpo.sh.

Not run by CI (it needs PyTorch, transformers, trl, datasets); run once and commit the
output. No downloads: the chatml tokenizer of tests/fixtures/sft (SmolLM2's template, 400
ids), a random model (fixed seeds), single-threaded, deterministic algorithms, eager
attention.

    /tmp/venv-torch/bin/python tests/gen_kto_fixtures.py [--out tests/fixtures/kto_tiny]

What KTOTrainer does (trl/trainer/kto_trainer.py, 1.16), which nnt reproduces:
  rows       each record {"prompt": messages, "completion": messages, "label": bool} is the
             chat template's prompt (with its generation prompt) then the completion, the
             completion's tokens counting (as DPO's rows)
  KL rows    within each run of per_device_train_batch_size records in the data's order, record
             i's prompt followed by record i-1's completion (the first takes the last's):
             add_kl_completion_ids; the training order is sequential
  reference  the model before training: each row's and each KL row's log-likelihood (the sum
             over the completion's tokens of log p)
  kl         per micro-batch, max(0, mean over its rows of (KL row's logp - its reference)),
             not differentiated
  loss       per micro-batch, the mean over its rows of desirable_weight (1 - sigmoid(beta
             (logp - ref - kl))) for a desirable row (label true) and undesirable_weight (1 -
             sigmoid(beta (kl - (logp - ref)))) for an undesirable one; a step's the mean of
             its micro-batches' (gradient accumulation)
  apo_zero_unpaired: no kl; 1 - sigmoid(beta (logp - ref)) and sigmoid(beta (logp - ref))

Runs in float32 (bf16=False: TRL turns bf16 autocast on by default), beta 0.3,
desirable_weight 1.3, undesirable_weight 0.7 (none TRL's default); torch AdamW
through the Trainer: lr 1e-2 constant, betas (0.9, 0.999), eps 1e-8, weight decay 0.1 on all
but the norms, no clipping; max_length T):
  kto     per_device_train_batch_size 4, 3 steps over the 12 training records
  accum   per_device_train_batch_size 2, gradient_accumulation_steps 2, 3 steps
  apo     loss_type apo_zero_unpaired, batch 4, 3 steps
  paired  batch 4, 3 steps over paired records (paired_train.jsonl: 6 records, their
          prompts given), which KTOTrainer unpairs into 12 rows: the 6 chosen completions
          (desirable), then the 6 rejected ones; held out: paired_val.jsonl (4 records whose
          prompt is the messages their sides share: 8 rows)
Each then evaluates its held-out records (per_device_eval_batch_size as the training's).

Files:
  llama/config.json, llama/model.safetensors   the model before training
  train.jsonl (12 records), val.jsonl (8)      the records (conversations)
  text.jsonl, text.expected   records of text, each tokenized alone by KTOTrainer (eos added
                       to the completion unless it ends with it; the completion from where the
                       tokenized prompt and prompt + completion first differ): per record
                       "prompt N" (the prompt's length) and "ids ..." (the whole sequence)
  text_paired.jsonl, text_paired.expected   paired records of text (a prompt given, or the
                       characters the sides share), each tokenized alone by KTOTrainer: its
                       chosen row then its rejected row, each "prompt N" and "ids ..."
  unpair_order.txt     the order KTOTrainer (maybe_unpair_preference_dataset) gives the rows of
                       2503 paired text records {"prompt": "p<i>", "chosen": "c<i>",
                       "rejected": "r<i>"}: lines "<label> FIRST LAST", runs of consecutive
                       records' rows of one label (datasets' map batches of 1000)
  paired_train.bin, paired_val.bin   the paired run's rows, as train.bin
  train.bin, val.bin   the rows as KTOTrainer tokenizes them, in nnt's token file (a loss mask
                       and one value a row, the label: 1 desirable, 0 undesirable), written
                       here independently (header magic 20240520, version 2, N, flags 1 | 4,
                       block T, 1 value; uint16 ids, the mask bits, float32 labels), padded
                       with the tokenizer's pad id
  reference.safetensors, for R in kto, accum, apo, paired:
      R.losses (3) float64: each step's loss (the mean of its micro-batches'), before its
      update; R.kl (3 or 6 micro-batches): each micro-batch's kl; R.margins (3): each step's
      rewards/margins as TRL logs it (the mean over its micro-batches holding both kinds of
      the mean desirable reward minus the mean undesirable one; 0 when none does); R.eval_loss (1): the held-out
      loss after the 3 steps; R.final.<HF name>: every parameter after them (not paired)
      kto.grad.<HF name>: the gradient of the first micro-batch's loss
      ref_logps (12), ref_kl_logps (12): the reference of each training row and KL row
      (batches of 4)
"""
import argparse
import copy
import json
import os
import struct
import tempfile

import torch
from datasets import Dataset
from safetensors.torch import save_file
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from trl import KTOConfig, KTOTrainer
from trl.data_utils import maybe_unpair_preference_dataset

HERE = os.path.dirname(os.path.abspath(__file__))
T, BETA, DES, UND, LR, WD = 96, 0.3, 1.3, 0.7, 1e-2, 0.1


def conv(prompt, answer, label, system=None):
    msgs = ([{"role": "system", "content": system}] if system else []) + \
        [{"role": "user", "content": prompt}]
    return {"prompt": msgs, "completion": [{"role": "assistant", "content": answer}],
            "label": label}


TRAIN = [
    conv("Hi?", "Hello!", True),
    conv("Hi?", "Go away.", False),
    conv("Name a fruit.", "An apple.", True, "Be brief."),
    conv("What is 2 + 2?", "It is 4.", True),
    conv("What is 2 + 2?", "Five, I think.", False, "You are a calculator."),
    conv("Say yes.", "Yes.", True),
    conv("Colour of the sky?", "Blue, on a clear day.", True, "Answer plainly."),
    conv("Colour of the sky?", "Green.", False),
    conv("Count to three.", "One, two, three.", True),
    conv("Spell cat.", "K-A-T.", False, "Be exact."),
    conv("Capital of France?", "Paris.", True),
    conv("Capital of France?", "Rome, surely.", False, "Be brief."),
]
VAL = [
    conv("Hello?", "Hi there.", True),
    conv("Hello?", "No.", False, "Be kind."),
    conv("Name a colour.", "Red.", True),
    conv("Name a colour.", "Seven.", False),
    conv("What is 3 + 1?", "Four.", True, "You are a calculator."),
    conv("What is 3 + 1?", "Two.", False),
    conv("Is ice cold?", "Yes, it is.", True),
    conv("Is ice cold?", "It is hot.", False, "Answer plainly."),
]


def token_file(rows, masks, labels):
    """nnt's token file: a loss mask and one value a row, written byte by byte."""
    n = len(rows) * T
    head = [20240520, 2, n, 1 | 4, T, 1] + [0] * 250
    ids = [i for r in rows for i in r]
    bits = bytearray((n + 7) // 8)
    for i, f in enumerate(m for r in masks for m in r):
        if f:
            bits[i // 8] |= 1 << (i % 8)
    return (struct.pack("<256i", *head) + struct.pack(f"<{n}H", *ids) + bytes(bits) +
            struct.pack(f"<{len(labels)}f", *labels))


def rows_of(trainer_dataset, pad):
    rows, masks, labels = [], [], []
    for ex in trainer_dataset:
        p, c = ex["prompt_ids"], ex["completion_ids"]
        assert len(p) + len(c) <= T, len(p) + len(c)
        rows.append(p + c + [pad] * (T - len(p) - len(c)))
        masks.append([0] * len(p) + [1] * len(c) + [0] * (T - len(p) - len(c)))
        labels.append(1.0 if ex["label"] else 0.0)
    return rows, masks, labels


class Recorder(KTOTrainer):
    """KTOTrainer, keeping each training micro-batch's loss and kl (float64), and the
    gradient of the first micro-batch (its first training_step's backward, accum 1)."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        margins = self._metrics["train"]["rewards/margins"]
        before = len(margins)
        out = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.model.training:
            loss = out[0] if return_outputs else out
            self.rec_losses.append(loss.item())
            self.rec_kl.append(self._metrics["train"]["kl"][-1])
            # (appended for a micro-batch of both kinds only)
            self.rec_margins.append(margins[-1] if len(margins) > before else None)
        return out

    def training_step(self, *args, **kwargs):
        loss = super().training_step(*args, **kwargs)
        if self.rec_grad is not None and not self.rec_grad:
            for n, p in self.model.named_parameters():
                self.rec_grad[n] = p.grad.detach().clone()
        return loss


def run(name, model0, tok, batch, accum, loss_type, out, first_grad=False, train=None,
        val=None, logging_steps=1, final=True):
    model = copy.deepcopy(model0)
    args = KTOConfig(output_dir=tempfile.mkdtemp(), report_to=[], use_cpu=True,
                     per_device_train_batch_size=batch, per_device_eval_batch_size=batch,
                     gradient_accumulation_steps=accum, max_steps=3, beta=BETA,
                     desirable_weight=DES, undesirable_weight=UND, loss_type=loss_type,
                     train_sampling_strategy="sequential", learning_rate=LR,
                     lr_scheduler_type="constant", warmup_steps=0, weight_decay=WD,
                     adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, max_grad_norm=0,
                     max_length=T, logging_steps=logging_steps, save_strategy="no", seed=7200, bf16=False,
                     dataloader_drop_last=False, disable_tqdm=True)
    t = Recorder(model=model, ref_model=copy.deepcopy(model0), args=args,
                 train_dataset=Dataset.from_list(train or TRAIN),
                 eval_dataset=Dataset.from_list(val or VAL),
                 processing_class=tok)
    t.rec_losses, t.rec_kl, t.rec_margins = [], [], []
    t.rec_grad = {} if first_grad else None
    t.train()
    steps = [sum(t.rec_losses[accum * s:accum * (s + 1)]) / accum for s in range(3)]
    out[name + ".losses"] = torch.tensor(steps, dtype=torch.float64)
    out[name + ".kl"] = torch.tensor(t.rec_kl, dtype=torch.float64)
    margins = []
    for s in range(3):   # the step's mean over its micro-batches of both kinds (none: 0)
        got = [m for m in t.rec_margins[accum * s:accum * (s + 1)] if m is not None]
        margins.append(sum(got) / len(got) if got else 0.0)
    out[name + ".margins"] = torch.tensor(margins, dtype=torch.float64)
    ev = t.evaluate()
    out[name + ".eval_loss"] = torch.tensor([ev["eval_loss"]], dtype=torch.float64)
    for n, p in model.named_parameters() if final else ():
        out[name + ".final." + n] = p.detach().clone()
    for n, g in (t.rec_grad or {}).items():
        out[name + ".grad." + n] = g
    print(name, "losses", steps, "kl", t.rec_kl, "eval", ev["eval_loss"])
    return t


def pair(prompt, chosen, rejected, system=None):
    msgs = ([{"role": "system", "content": system}] if system else []) + \
        [{"role": "user", "content": prompt}]
    return {"prompt": msgs, "chosen": [{"role": "assistant", "content": chosen}],
            "rejected": [{"role": "assistant", "content": rejected}]}


def pair_implicit(prompt, chosen, rejected, system=None):
    """A preference record whose prompt is the messages its two sides share."""
    r = pair(prompt, chosen, rejected, system)
    return {"chosen": r["prompt"] + r["chosen"], "rejected": r["prompt"] + r["rejected"]}


# paired records, which KTOTrainer unpairs (maybe_unpair_preference_dataset: the chosen
# completions of each 1000 records, then their rejected ones)
PAIRED_TRAIN = [
    pair("Hi?", "Hello!", "Go away."),
    pair("Name a fruit.", "An apple.", "A chair.", "Be brief."),
    pair("What is 2 + 2?", "It is 4.", "Five, I think."),
    pair("Colour of the sky?", "Blue, on a clear day.", "Green.", "Answer plainly."),
    pair("Count to three.", "One, two, three.", "Three, two."),
    pair("Capital of France?", "Paris.", "Rome, surely.", "Be brief."),
]
PAIRED_VAL = [
    pair_implicit("Hello?", "Hi there.", "No.", "Be kind."),
    pair_implicit("Name a colour.", "Red.", "Seven."),
    pair_implicit("What is 3 + 1?", "Four.", "Two.", "You are a calculator."),
    pair_implicit("Is ice cold?", "Yes, it is.", "It is hot."),
]
TEXT_PAIRED = [
    {"prompt": "Water boils at", "chosen": " 100 degrees.", "rejected": " 50 degrees."},
    {"chosen": "The sky is blue.", "rejected": "The sky is green."},
    {"chosen": "Un caf\u00e9 noir.", "rejected": "Un caf\u00e9 au lait<|im_end|>"},
]
ORDER_RECORDS = 2503   # unpair_order: a dataset larger than two of datasets' map batches

TEXT = [
    {"prompt": "The sky is", "completion": " blue.", "label": True},
    {"prompt": "Water boils at", "completion": " 50 degrees.", "label": False},
    {"prompt": "Un caf", "completion": "\u00e9 noir.<|im_end|>", "label": True},
    {"prompt": "The sky is bl", "completion": "ue.", "label": False},
]


def text_expected(model, tok, out, records=TEXT, name="text"):
    """Each text record tokenized alone by KTOTrainer (a one-record dataset; a paired
    record: its two rows, chosen then rejected)."""
    lines = []
    for r in records:
        args = KTOConfig(output_dir=tempfile.mkdtemp(), report_to=[], use_cpu=True,
                         bf16=False, max_length=None, per_device_train_batch_size=2)
        t = KTOTrainer(model=model, ref_model=copy.deepcopy(model), args=args,
                       train_dataset=Dataset.from_list([r, r]), processing_class=tok)
        rows = [t.train_dataset[0]] if "label" in r else [t.train_dataset[0], t.train_dataset[2]]
        if "label" not in r:   # (the dataset [r, r] unpaired: chosen, chosen, rejected, rejected)
            assert [t.train_dataset[k]["label"] for k in range(4)] == [True, True, False, False]
        for ex in rows:
            lines.append(f"prompt {len(ex['prompt_ids'])}")
            lines.append("ids " + " ".join(map(str, ex["prompt_ids"] + ex["completion_ids"])))
    with open(os.path.join(out, name + ".jsonl"), "w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    with open(os.path.join(out, name + ".expected"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def unpair_order(out):
    """The order TRL gives the rows of ORDER_RECORDS paired records (record i: prompt "p<i>",
    chosen "c<i>", rejected "r<i>"), unpaired as KTOTrainer unpairs a dataset: written as
    runs "<true|false> FIRST LAST" of consecutive records' rows of one label."""
    ds = Dataset.from_list([{"prompt": f"p{i}", "chosen": f"c{i}", "rejected": f"r{i}"}
                            for i in range(ORDER_RECORDS)])
    ds = maybe_unpair_preference_dataset(ds, num_proc=None)
    runs = []
    for ex in ds:
        i = int(ex["prompt"][1:])
        assert ex["completion"] == ("c" if ex["label"] else "r") + str(i)
        if runs and runs[-1][0] == ex["label"] and runs[-1][2] == i - 1:
            runs[-1][2] = i
        else:
            runs.append([ex["label"], i, i])
    with open(os.path.join(out, "unpair_order.txt"), "w") as fh:
        for label, first, last in runs:
            fh.write(f"{'true' if label else 'false'} {first} {last}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "fixtures", "kto_tiny"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    src = os.path.join(HERE, "fixtures", "sft", "chatml")
    tok = AutoTokenizer.from_pretrained(src)
    for fname, recs in (("train.jsonl", TRAIN), ("val.jsonl", VAL),
                        ("paired_train.jsonl", PAIRED_TRAIN), ("paired_val.jsonl", PAIRED_VAL)):
        with open(os.path.join(args.out, fname), "w") as fh:
            for r in recs:
                fh.write(json.dumps(r) + "\n")
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=128, rms_norm_eps=1e-5,
                      tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                      attn_implementation="eager", bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(7201)
    model = LlamaForCausalLM(cfg).float()
    gw = torch.Generator().manual_seed(7202)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gw))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gw))
    model.config.use_cache = False
    model.save_pretrained(os.path.join(args.out, "llama"), safe_serialization=True)
    out = {}
    t = run("kto", model, tok, 4, 1, "kto", out, first_grad=True)
    for fname, ds in (("train.bin", t.train_dataset), ("val.bin", t.eval_dataset)):
        rows, masks, labels = rows_of(ds, tok.pad_token_id)
        with open(os.path.join(args.out, fname), "wb") as fh:
            fh.write(token_file(rows, masks, labels))
    # the reference of the training rows and KL rows, as KTOTrainer computes it (batches of 4)
    ref, ref_kl = [], []
    for i in range(0, len(TRAIN), 4):
        b = t.data_collator([t.train_dataset[k] for k in range(i, i + 4)])
        lp, kl = t.compute_ref_log_probs(t.ref_model, b)
        ref += lp.double().tolist()
        ref_kl += kl.double().tolist()
    out["ref_logps"] = torch.tensor(ref, dtype=torch.float64)
    out["ref_kl_logps"] = torch.tensor(ref_kl, dtype=torch.float64)
    run("accum", model, tok, 2, 2, "kto", out)
    run("apo", model, tok, 4, 1, "apo_zero_unpaired", out)
    # (logging_steps 3: TRL's log divides by zero over a logged step of desirable rows alone)
    t = run("paired", model, tok, 4, 1, "kto", out, train=PAIRED_TRAIN, val=PAIRED_VAL,
            logging_steps=3, final=False)
    for fname, ds in (("paired_train.bin", t.train_dataset), ("paired_val.bin", t.eval_dataset)):
        rows, masks, labels = rows_of(ds, tok.pad_token_id)
        with open(os.path.join(args.out, fname), "wb") as fh:
            fh.write(token_file(rows, masks, labels))
    text_expected(model, tok, args.out)
    text_expected(model, tok, args.out, TEXT_PAIRED, "text_paired")
    unpair_order(args.out)
    save_file({k: v.contiguous() for k, v in out.items()},
              os.path.join(args.out, "reference.safetensors"))


if __name__ == "__main__":
    main()
