#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/cls_tiny/: tiny sequence classifiers and a reward model as
transformers' *ForSequenceClassification computes them and TRL's RewardTrainer trains them,
for tests/test_classifier.c.

Not run by CI (it needs PyTorch + transformers); run once and commit the output. No
downloads: random models (fixed seeds), single-threaded, deterministic, eager attention.

    /tmp/venv-torch/bin/python tests/gen_cls_fixtures.py [--out tests/fixtures/cls_tiny]

The pooled position of a row is transformers' (GenericForSequenceClassification,
GPT2ForSequenceClassification): argmax over t of t * (id_t != pad_token_id), the last
non-pad position. The pad id is set on the configuration after the model is built, as
RewardTrainer sets it (so the embedding has no padding_idx and every row trains).

Cases (T 12, B 4; AdamW lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight decay 0.1 on the
parameters of 2 dims or more, none on the others: nnt's default; 3 steps on the same batch):
  llama_cls/   LlamaForSequenceClassification, num_labels 3, pad 0 (V 64, C 32, L 2, NH 4,
               NKV 2, hidden 48, untied); reference: pooled logits, the cross-entropy
               (transformers' single_label_classification), every gradient (grad.<name>),
               3 steps' losses, final.<name>
  llama_rm/    the same shapes, num_labels 1 (a reward model), pad 0; rows 2p / 2p + 1 the
               chosen / rejected sequence of pair p; loss as trl/trainer/reward_trainer.py
               (1.16) writes it: -logsigmoid(r_c - r_r).mean() + center_rewards_coefficient *
               mean((r_c + r_r)^2), with the coefficient 0.25 (TRL's default: none); the
               reference also holds the loss without it (loss_plain), and the loss of the
               pairs after the 3 steps (val_loss)
  gpt2_cls/    GPT2ForSequenceClassification, num_labels 2, pad 5 (V 64, C 32, L 2, NH 4,
               n_positions 32): pooled logits, loss, 3 steps' losses, final_model.safetensors
               (save_pretrained's file after the steps)
  llama_rm_pairs.bin  llama_rm's rows as an nnt token file (nnt-tokenize(1), TOKEN FILES:
               header magic 20240520, version 2, N, flags 1 (loss mask), block T; N uint16
               ids; the mask bits, 1 where the id is not the pad), twice: the training pairs,
               then the same pairs again to hold out (tests/check_reward.sh)
  llama_lm/    a LlamaForCausalLM of llama_cls's shapes (a base to build a classifier on)

RewardTrainer tokenizes a preference record into the same full sequences as DPOTrainer
(prompt + chosen, prompt + rejected: the chat template's rendering, or the text with the eos
appended): checked here when trl is installed against tests/fixtures/dpo_tiny/*.expected
(tests/gen_dpo_tok_fixtures.py), so that nnt's preference rows (nnt-tokenize --preference)
serve reward models as they serve DPO.
  pool.safetensors  ids (6, 7) with pad 3 (rows all pad, no pad, pad inside, ...) and
               pooled (6) int32: the positions transformers pools

Text classification as nnt-train trains it from classification records ({"text", "label"},
nnt_sft_encode_labelled, nnt-tokenize --num-labels):
  text_train.jsonl, text_val.jsonl  12 and 4 records of 3 labels (one text longer than a row)
  text_<tok>.expected  for the tokenizers of tests/fixtures/sft/<tok> (chatml, llama3): a
               line "label id id ..." a record of text_train.jsonl then text_val.jsonl, the
               ids tokenizer(text)["input_ids"] (the post-processor's special tokens, no eos,
               not truncated)
  llama_text/  a LlamaForSequenceClassification of 3 labels over the llama3 tokenizer's
               vocabulary (C 32, L 2, NH 4, NKV 2, hidden 48), pad_token_id its pad_token's
  lora_cls_qv/, lora_cls_all/  LoRA adapters of llama_cls as PEFT makes them for a
               classifier (LoraConfig task_type SEQ_CLS: the score head trained whole,
               modules_to_save ["classifier", "score"]): qv r 4, lora_alpha 6 on q_proj and
               v_proj; all r 2, lora_alpha 4, use_rslora, all-linear (score not adapted);
               init/ as get_peft_model made it, trained/ after 3 AdamW steps on llama_cls's
               rows (the optimizer above, the base frozen)
  lora_cls_<case>.safetensors  losses (the 3 steps'), logits (the pooled logits after
               them), merged_logits (trained/ read back and merged: merge_and_unload),
               lm_probs (float64: llama_lm read as a classifier of 3 labels with
               from_pretrained(num_labels=3), trained/ on it; the label probabilities of the
               first row of llama_cls's ids, which has no padding)
  llama_named/  llama_cls with its labels named (NAMES: a non-ASCII letter, a quote, a
               backslash) as transformers writes id2label and label2id
  lora_text/   a SEQ_CLS adapter of llama_text (r 4, lora_alpha 6, q_proj and v_proj) as
               get_peft_model made it; lora_text.safetensors: what llama_text.safetensors
               holds, for it trained on the records (probs0 before the steps: the head's
               alone, the adapters' B being zero)
  llama_text.safetensors  losses (3 steps of B 4: the training records in order, each
               text truncated to TEXT_T - 1 tokens as tokenizer(text, truncation=True,
               max_length=TEXT_T - 1) does, rows padded on the right with the pad id as
               DataCollatorWithPadding does, the cross-entropy of the pooled logits), then
               val_loss and val_accuracy (argmax) on the 4 held-out records; probs0, the
               labels' probabilities of the first held-out text before the steps
"""
import argparse
import inspect
import json
import os
import struct
import tempfile

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import (GPT2Config, GPT2ForSequenceClassification, LlamaConfig,
                          LlamaForCausalLM, LlamaForSequenceClassification)

T, B, V, LR, WD, STEPS, CENTER = 12, 4, 64, 1e-2, 0.1, 3, 0.25
TEXT_T = 48   # the classification rows: a text of at most TEXT_T - 1 tokens, then its label
NAMES = ["n\u00e9gatif", 'say "maybe"', "positive\\ok"]   # llama_named's labels

TEXT_TRAIN = [
    ("The service was quick and the staff were kind.", 2),
    ("Terrible food, cold and late.", 0),
    ("It was fine, nothing special.", 1),
    ("I loved every minute of it!", 2),
    ("Never again. Worst evening in years.", 0),
    ("The room was clean; the view was average.", 1),
    ("Brilliant \u2014 would book again \u2764", 2),
    ("Rude staff, and the bill was wrong twice, and nobody came when we asked for help, "
     "so we left before the dessert arrived and wrote to the manager the next morning.", 0),
    ("Okay.", 1),
    ("Great value for the price.", 2),
    ("The music was far too loud.", 0),
    ("Average in every way: parking, food, noise.", 1),
]
TEXT_VAL = [
    ("Wonderful people and great coffee.", 2),
    ("Slow, dirty and overpriced.", 0),
    ("It was what it was.", 1),
    ("I would happily come back.", 2),
]


def pooled_positions(ids, pad):
    """transformers' rule, written as in modeling_layers.py"""
    mask = (ids != pad).to(torch.int32)
    idx = torch.arange(ids.shape[-1], dtype=torch.int32)
    return (idx * mask).argmax(-1)


def rows(g, lengths, pad):
    out = []
    for n in lengths:
        r = torch.randint(1, V, (n,), generator=g)
        r[r == pad] = (pad + 1) % V
        out.append(torch.cat([r, torch.full((T - n,), pad)]))
    ids = torch.stack(out)
    ids[1, 2] = pad   # a pad id inside a row: not its end
    return ids


def adamw(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=LR, betas=(0.9, 0.999), eps=1e-8)


def pooled_logits(model, ids):
    return model(input_ids=ids).logits   # (B, num_labels)


def cls_loss(model, ids, labels):
    return F.cross_entropy(pooled_logits(model, ids), labels)


def reward_loss(model, ids, center):
    r = pooled_logits(model, ids).squeeze(-1)
    rc, rr = r[0::2], r[1::2]
    loss = -F.logsigmoid(rc - rr).mean()
    if center is not None:
        loss = loss + center * torch.mean((rc + rr) ** 2)
    return loss


def check_trl_formula():
    try:
        from trl.trainer import reward_trainer
    except ImportError:
        return
    src = inspect.getsource(reward_trainer.RewardTrainer.compute_loss)
    for line in ["loss = -nn.functional.logsigmoid(rewards_chosen - rewards_rejected).mean()",
                 "loss += self.args.center_rewards_coefficient * torch.mean((rewards_chosen + "
                 "rewards_rejected) ** 2)",
                 "rewards_chosen, rewards_rejected = torch.chunk(outputs.logits.squeeze(-1), "
                 "chunks=2)"]:
        assert line in src, line


def token_file(rows, pad):
    """nnt's token file with a loss mask in rows of T, written byte by byte."""
    n = rows.numel()
    head = [20240520, 2, n, 1, T] + [0] * 251
    bits = bytearray((n + 7) // 8)
    for i, v in enumerate(rows.reshape(-1).tolist()):
        if v != pad:
            bits[i // 8] |= 1 << (i % 8)
    return (struct.pack("<256i", *head) + struct.pack(f"<{n}H", *rows.reshape(-1).tolist()) +
            bytes(bits))


def check_reward_tokenization():
    """RewardTrainer's chosen_ids / rejected_ids equal DPOTrainer's full sequences."""
    try:
        from datasets import Dataset
        from transformers import AutoTokenizer
        from trl import RewardConfig, RewardTrainer
    except ImportError:
        return
    here = os.path.dirname(os.path.abspath(__file__))
    fx = os.path.join(here, "fixtures")
    recs = [json.loads(line) for line in open(os.path.join(fx, "dpo_tiny", "preference.jsonl"))]
    for name in ("chatml", "llama3"):
        tok = AutoTokenizer.from_pretrained(os.path.join(fx, "sft", name))
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                          num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                          num_labels=1)
        model = LlamaForSequenceClassification(cfg)
        lines = [line.split() for line in open(os.path.join(fx, "dpo_tiny", name + ".expected"))]
        for i, r in enumerate(recs):
            args = RewardConfig(output_dir=tempfile.mkdtemp(), report_to=[], max_length=None,
                                use_cpu=True)
            t = RewardTrainer(model=model, args=args, train_dataset=Dataset.from_list([r]),
                              processing_class=tok)
            ex = t.train_dataset[0]
            assert ex["chosen_ids"] == [int(v) for v in lines[3 * i + 1][1:]], (name, i)
            assert ex["rejected_ids"] == [int(v) for v in lines[3 * i + 2][1:]], (name, i)


def train(model, loss_fn, ref, prefix_grads):
    opt = adamw(model)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        if s == 0 and prefix_grads:
            for n, p in model.named_parameters():
                ref["grad." + n] = p.grad.detach().clone()
        losses.append(loss.item())
        opt.step()
    ref["losses"] = torch.tensor(losses, dtype=torch.float64)
    for n, p in model.named_parameters():
        ref["final." + n] = p.detach().clone()


def llama_config(num_labels):
    return LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                       rms_norm_eps=1e-5, tie_word_embeddings=False, num_labels=num_labels,
                       pad_token_id=None, bos_token_id=None, eos_token_id=None,
                       attn_implementation="eager")


def text_classification(out):
    """The classification records, their ids, and a classifier trained on them."""
    from transformers import AutoTokenizer
    fx = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sft")
    for split, recs in (("train", TEXT_TRAIN), ("val", TEXT_VAL)):
        with open(os.path.join(out, "text_%s.jsonl" % split), "w") as fh:
            for text, label in recs:
                fh.write(json.dumps({"text": text, "label": label}) + "\n")
    for name in ("chatml", "llama3"):
        tok = AutoTokenizer.from_pretrained(os.path.join(fx, name))
        with open(os.path.join(out, "text_%s.expected" % name), "w") as fh:
            for text, label in TEXT_TRAIN + TEXT_VAL:
                ids = tok(text)["input_ids"]
                fh.write(" ".join(str(v) for v in [label] + ids) + "\n")
    tok = AutoTokenizer.from_pretrained(os.path.join(fx, "llama3"))
    pad = tok.pad_token_id
    cfg = llama_config(3)
    cfg.vocab_size = len(tok)
    torch.manual_seed(5)
    m = LlamaForSequenceClassification(cfg).eval()
    m.config.pad_token_id = pad
    m.save_pretrained(os.path.join(out, "llama_text"), safe_serialization=True)

    save_file(train_text(m, tok), os.path.join(out, "llama_text.safetensors"))


def text_batch(tok, recs):
    """records as tokenizer(text, truncation=True, max_length=TEXT_T - 1) encodes them,
    padded on the right with the pad id (DataCollatorWithPadding); their labels"""
    enc = [tok(t, truncation=True, max_length=TEXT_T - 1)["input_ids"] for t, _ in recs]
    n = max(len(e) for e in enc)
    ids = torch.tensor([e + [tok.pad_token_id] * (n - len(e)) for e in enc])
    return ids, torch.tensor([lab for _, lab in recs])


def train_text(m, tok):
    """STEPS steps of B training records on m; the reference: losses, val_loss, val_accuracy,
    probs0 (the first held-out text's label probabilities before the steps)"""
    with torch.no_grad():   # the first held-out text, as nnt-generate classifies it
        probs0 = m(**tok(TEXT_VAL[0][0], return_tensors="pt")).logits.softmax(-1)[0].double()
    opt = adamw(m)
    losses = []
    for s in range(STEPS):
        ids, labels = text_batch(tok, TEXT_TRAIN[s * B:(s + 1) * B])
        opt.zero_grad()
        loss = cls_loss(m, ids, labels)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    ids, labels = text_batch(tok, TEXT_VAL)
    with torch.no_grad():
        logits = pooled_logits(m, ids)
        val_loss = F.cross_entropy(logits, labels)
        accuracy = (logits.argmax(-1) == labels).double().mean()
    return {"losses": torch.tensor(losses, dtype=torch.float64),
            "val_loss": val_loss.reshape(1).double(), "val_accuracy": accuracy.reshape(1),
            "probs0": probs0}


def clean_adapter(adir):
    """no machine's path in a committed adapter_config.json, all-linear's names sorted"""
    cfg_path = os.path.join(adir, "adapter_config.json")
    cfg = json.load(open(cfg_path))
    cfg["base_model_name_or_path"] = None
    if isinstance(cfg["target_modules"], list):   # (all-linear's names: a set's order)
        cfg["target_modules"] = sorted(cfg["target_modules"])
    with open(cfg_path, "w") as fh:
        json.dump(cfg, fh, indent=2, sort_keys=True)
    readme = os.path.join(adir, "README.md")
    if os.path.exists(readme):
        os.remove(readme)


def lora_classifier(out):
    """LoRA adapters of llama_cls as PEFT makes them for a classifier (task_type SEQ_CLS: the
    score head trained whole, modules_to_save), trained on llama_cls's rows; one of
    llama_text trained on the classification records."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "fixtures", "sft", "llama3"))
    m = LlamaForSequenceClassification.from_pretrained(os.path.join(out, "llama_text")).eval()
    torch.manual_seed(13)
    pm = get_peft_model(m, LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=6, lora_dropout=0.0,
                                      target_modules=["q_proj", "v_proj"]))
    pm.save_pretrained(os.path.join(out, "lora_text"))
    clean_adapter(os.path.join(out, "lora_text"))
    save_file(train_text(pm, tok), os.path.join(out, "lora_text.safetensors"))

    base = os.path.join(out, "llama_cls")
    r = load_file(os.path.join(out, "llama_cls.safetensors"))
    ids, labels = r["ids"].long(), r["labels"].long()
    for case, seed, kw in (("lora_cls_qv", 11, dict(r=4, lora_alpha=6,
                                                    target_modules=["q_proj", "v_proj"])),
                           ("lora_cls_all", 12, dict(r=2, lora_alpha=4, use_rslora=True,
                                                     target_modules="all-linear"))):
        m = LlamaForSequenceClassification.from_pretrained(base).eval()
        torch.manual_seed(seed)
        pm = get_peft_model(m, LoraConfig(task_type="SEQ_CLS", lora_dropout=0.0, **kw))
        trainable = sorted(n for n, p in pm.named_parameters() if p.requires_grad)
        assert trainable[-1].endswith("score.modules_to_save.default.weight"), trainable
        assert not any("score.lora" in n for n in trainable), trainable
        pm.save_pretrained(os.path.join(out, case, "init"))
        ref = {}
        train(pm, lambda: cls_loss(pm, ids, labels), ref, False)
        ref = {k: v for k, v in ref.items() if not k.startswith("final.")}
        with torch.no_grad():
            ref["logits"] = pooled_logits(pm, ids).contiguous()
        pm.save_pretrained(os.path.join(out, case, "trained"))
        merged = PeftModel.from_pretrained(
            LlamaForSequenceClassification.from_pretrained(base).eval(),
            os.path.join(out, case, "trained")).merge_and_unload()
        with torch.no_grad():   # the trained adapter read back and merged: the same logits
            ref["merged_logits"] = pooled_logits(merged, ids).contiguous()
        # on llama_lm (llama_cls's shapes) read as a classifier of 3 labels, as
        # from_pretrained(num_labels=3) does (the head new), then the adapter: the label
        # probabilities of ids' first row (no padding; nnt-generate --num-labels 3 --adapter)
        on_lm = PeftModel.from_pretrained(
            LlamaForSequenceClassification.from_pretrained(os.path.join(out, "llama_lm"),
                                                           num_labels=3).eval(),
            os.path.join(out, case, "trained"))
        with torch.no_grad():
            ref["lm_probs"] = on_lm(input_ids=ids[:1]).logits.softmax(-1)[0].double()
        save_file(ref, os.path.join(out, case + ".safetensors"))
        for sub in ("init", "trained"):
            clean_adapter(os.path.join(out, case, sub))


def named_labels(out):
    """llama_cls with names for its labels, as transformers writes them (config.json's
    id2label and label2id, JSON with ASCII escapes)"""
    m = LlamaForSequenceClassification.from_pretrained(os.path.join(out, "llama_cls"))
    m.config.id2label = dict(enumerate(NAMES))
    m.config.label2id = {n: i for i, n in enumerate(NAMES)}
    m.save_pretrained(os.path.join(out, "llama_named"), safe_serialization=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                   "cls_tiny"))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    check_trl_formula()
    check_reward_tokenization()
    g = torch.Generator().manual_seed(7)

    # the pooling rule's cases
    pad = 3
    pool_ids = torch.tensor([[1, 2, 4, 3, 3, 3, 3], [3, 3, 3, 3, 3, 3, 3],
                             [5, 6, 7, 8, 9, 10, 11], [3, 3, 3, 5, 3, 3, 3],
                             [4, 3, 4, 3, 4, 3, 3], [3, 9, 9, 9, 9, 9, 3]], dtype=torch.int32)
    save_file({"ids": pool_ids, "pooled": pooled_positions(pool_ids, pad).to(torch.int32)},
              os.path.join(out, "pool.safetensors"))

    # a classifier of 3 labels
    torch.manual_seed(1)
    m = LlamaForSequenceClassification(llama_config(3)).eval()
    m.config.pad_token_id = 0
    ids = rows(g, [12, 9, 5, 1], 0)
    labels = torch.tensor([2, 0, 1, 2])
    m.save_pretrained(os.path.join(out, "llama_cls"), safe_serialization=True)
    ref = {"ids": ids.to(torch.int32), "labels": labels.to(torch.int32),
           "pooled": pooled_positions(ids, 0).to(torch.int32)}
    with torch.no_grad():
        ref["logits"] = pooled_logits(m, ids)
        ref["loss"] = cls_loss(m, ids, labels).reshape(1).double()
    train(m, lambda: cls_loss(m, ids, labels), ref, True)
    save_file({k: v.contiguous() for k, v in ref.items()},
              os.path.join(out, "llama_cls.safetensors"))

    # a reward model: pairs of rows
    torch.manual_seed(2)
    m = LlamaForSequenceClassification(llama_config(1)).eval()
    m.config.pad_token_id = 0
    ids = rows(g, [10, 7, 12, 4], 0)
    m.save_pretrained(os.path.join(out, "llama_rm"), safe_serialization=True)
    ref = {"ids": ids.to(torch.int32), "pooled": pooled_positions(ids, 0).to(torch.int32)}
    with torch.no_grad():
        ref["rewards"] = pooled_logits(m, ids).squeeze(-1)
        ref["loss_plain"] = reward_loss(m, ids, None).reshape(1).double()
        ref["loss"] = reward_loss(m, ids, CENTER).reshape(1).double()
    train(m, lambda: reward_loss(m, ids, CENTER), ref, True)
    with torch.no_grad():   # the pairs after the steps (check_reward.sh holds them out)
        ref["val_loss"] = reward_loss(m, ids, CENTER).reshape(1).double()
    save_file({k: v.contiguous() for k, v in ref.items()},
              os.path.join(out, "llama_rm.safetensors"))
    with open(os.path.join(out, "llama_rm_pairs.bin"), "wb") as fh:
        fh.write(token_file(torch.cat([ids, ids]), 0))

    # GPT-2's own classifier class
    torch.manual_seed(3)
    cfg = GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                     num_labels=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     summary_first_dropout=0.0, pad_token_id=None, bos_token_id=None,
                     eos_token_id=None, attn_implementation="eager")
    m = GPT2ForSequenceClassification(cfg).eval()
    m.config.pad_token_id = 5
    ids = rows(g, [12, 6, 8, 3], 5)
    labels = torch.tensor([1, 0, 0, 1])
    m.save_pretrained(os.path.join(out, "gpt2_cls"), safe_serialization=True)
    ref = {"ids": ids.to(torch.int32), "labels": labels.to(torch.int32)}
    with torch.no_grad():
        ref["logits"] = pooled_logits(m, ids)
        ref["loss"] = cls_loss(m, ids, labels).reshape(1).double()
    train(m, lambda: cls_loss(m, ids, labels), ref, False)
    ref = {k: v for k, v in ref.items() if not k.startswith("final.")}
    m.save_pretrained(os.path.join(out, "gpt2_final"), safe_serialization=True)
    os.replace(os.path.join(out, "gpt2_final", "model.safetensors"),
               os.path.join(out, "gpt2_cls_final.safetensors"))
    for f in os.listdir(os.path.join(out, "gpt2_final")):
        os.remove(os.path.join(out, "gpt2_final", f))
    os.rmdir(os.path.join(out, "gpt2_final"))
    save_file({k: v.contiguous() for k, v in ref.items()},
              os.path.join(out, "gpt2_cls.safetensors"))

    # a language model to build a classifier on
    torch.manual_seed(4)
    lm = LlamaForCausalLM(llama_config(2))
    lm.save_pretrained(os.path.join(out, "llama_lm"), safe_serialization=True)
    text_classification(out)
    lora_classifier(out)
    named_labels(out)
    for d in ["llama_cls", "llama_rm", "gpt2_cls", "llama_lm", "llama_text", "llama_named"]:
        gen = os.path.join(out, d, "generation_config.json")
        if os.path.exists(gen):
            os.remove(gen)


if __name__ == "__main__":
    main()
