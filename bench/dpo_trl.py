#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The peer of bench_dpo.sh: TRL's DPOTrainer on the same model directory and preference
records, on the CPU, fp32 (or bf16 autocast), precompute_ref_log_probs=True (the reference
once, before the steps, as nnt computes it), max_length T (keep_start), AdamW with nnt's
settings; with LOSS orpo or simpo, TRL's ORPOTrainer or CPOTrainer (loss_type "simpo")
instead (no reference model); with kto, TRL's KTOTrainer on unpaired records, 2 PAIRS rows a
step read in order, the reference (rows and KL rows) precomputed. Prints "init_s S train_s S" (the trainer's creation:
tokenization and the reference pass; train()) and "step N ms M loss L" lines (each step's
wall time, from the trainer's callbacks).

    python bench/dpo_trl.py MODEL_DIR RECORDS.jsonl PAIRS_A_STEP T STEPS THREADS [fp32|bf16]
                            [dpo|orpo|simpo|kto]
"""
import copy
import sys
import tempfile
import time

import torch
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import DPOConfig, DPOTrainer


class Clock(TrainerCallback):
    def __init__(self):
        self.t = None
        self.ms = []

    def on_step_begin(self, args, state, control, **kw):
        self.t = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.ms.append(1e3 * (time.perf_counter() - self.t))


def main():
    model_dir, records, pairs, T, steps, threads = sys.argv[1:7]
    bf16 = len(sys.argv) > 7 and sys.argv[7] == "bf16"
    loss = sys.argv[8] if len(sys.argv) > 8 else "dpo"
    torch.set_num_threads(int(threads))
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="sdpa")
    ds = load_dataset("json", data_files=records, split="train")
    common = dict(output_dir=tempfile.mkdtemp(), report_to=[], use_cpu=True, bf16=bf16,
                  per_device_train_batch_size=int(pairs), max_steps=int(steps),
                  max_length=int(T), beta=0.1, learning_rate=1e-6, lr_scheduler_type="constant",
                  warmup_steps=0, adam_beta2=0.95, weight_decay=0.1, max_grad_norm=1.0,
                  logging_steps=1, save_strategy="no", dataloader_num_workers=0, seed=1)
    clock = Clock()
    t0 = time.perf_counter()   # tokenizes and precomputes the reference (in __init__)
    if loss == "dpo":
        args = DPOConfig(precompute_ref_log_probs=True, **common)
        trainer = DPOTrainer(model=model, ref_model=copy.deepcopy(model), args=args,
                             train_dataset=ds, processing_class=tok, callbacks=[clock])
    elif loss == "kto":
        from trl import KTOConfig, KTOTrainer
        common["per_device_train_batch_size"] = 2 * int(pairs)
        args = KTOConfig(precompute_ref_log_probs=True, train_sampling_strategy="sequential",
                         **common)
        trainer = KTOTrainer(model=model, ref_model=copy.deepcopy(model), args=args,
                             train_dataset=ds, processing_class=tok, callbacks=[clock])
    elif loss == "orpo":
        from trl.experimental.orpo import ORPOConfig, ORPOTrainer
        trainer = ORPOTrainer(model=model, args=ORPOConfig(**common), train_dataset=ds,
                              processing_class=tok, callbacks=[clock])
    else:
        from trl.experimental.cpo import CPOConfig, CPOTrainer
        trainer = CPOTrainer(model=model, args=CPOConfig(loss_type="simpo", **common),
                             train_dataset=ds, processing_class=tok, callbacks=[clock])
    t1 = time.perf_counter()
    trainer.train()
    print("init_s %.2f train_s %.2f" % (t1 - t0, time.perf_counter() - t1))
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    for i, ms in enumerate(clock.ms):
        print("step %d ms %.1f loss %s" % (i + 1, ms, losses[i] if i < len(losses) else "?"))


if __name__ == "__main__":
    main()
