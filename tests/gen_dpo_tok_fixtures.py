#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/dpo_tiny/preference.jsonl and NAME.expected: preference records as
TRL 1.16's DPOTrainer tokenizes them (its own dataset preparation: extract_prompt for an
implicit prompt, eos added to text completions, the chat template, the completion starting
where the tokenized prompt and prompt + completion first differ), for tests/test_dpo.c
(nnt_sft_encode_preference).

Not run by CI (it needs PyTorch, transformers, trl, datasets); run once and commit the
output. No downloads: the tokenizers of tests/fixtures/sft (chatml: SmolLM2's template;
llama3: Meta Llama 3's, a bos post-processor), a random one-layer model that DPOTrainer is
given but never trains.

    /tmp/venv-torch/bin/python tests/gen_dpo_tok_fixtures.py

preference.jsonl: text with an explicit prompt; conversations with an explicit prompt (one
turn, and a system message with an earlier exchange); conversations with an implicit prompt
(the shared messages); text with an implicit prompt (shared words, the space before the first
differing word left to the completions; completions that differ inside a two-byte UTF-8
character, whose shared first byte stays with them; TRL compares characters); a text prompt
that ends inside a word, whose last token merges with one completion's first characters and
not with the other's (chatml: the rejected sequence's completion starts 2 tokens before the
prompt's end, the chosen one's at it; TRL counts both from the earlier place).
NAME.expected: per record "prompt N", "chosen ..." and "rejected ..." lines: the prompt's
length N and the full sequences prompt_ids + chosen_ids and prompt_ids + rejected_ids.
"""
import copy
import json
import os
import tempfile

from datasets import Dataset
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from trl import DPOConfig, DPOTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "dpo_tiny")
RECORDS = [
    {"prompt": "The sky is", "chosen": " blue.", "rejected": " green, mostly."},
    {"prompt": [{"role": "user", "content": "Hi?"}],
     "chosen": [{"role": "assistant", "content": "Hello!"}],
     "rejected": [{"role": "assistant", "content": "Go away."}]},
    {"prompt": [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Name a fruit."},
                {"role": "assistant", "content": "An apple."},
                {"role": "user", "content": "Another?"}],
     "chosen": [{"role": "assistant", "content": "A pear."}],
     "rejected": [{"role": "assistant", "content": "No."}]},
    {"chosen": [{"role": "user", "content": "What color is the sky?"},
                {"role": "assistant", "content": "It is blue."}],
     "rejected": [{"role": "user", "content": "What color is the sky?"},
                  {"role": "assistant", "content": "It is green."}]},
    {"chosen": "Water boils at 100 degrees.", "rejected": "Water boils at 50 degrees."},
    {"chosen": "Un caf\u00e9 noir.", "rejected": "Un caf\u00e8 noir."},
    {"prompt": "The sky is bl", "chosen": "ack.", "rejected": "ue."},
]


def main():
    with open(os.path.join(OUT, "preference.jsonl"), "w") as fh:
        for r in RECORDS:
            fh.write(json.dumps(r) + "\n")
    for name in ("chatml", "llama3"):
        tok = AutoTokenizer.from_pretrained(os.path.join(HERE, "fixtures", "sft", name))
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                          num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
        model = LlamaForCausalLM(cfg)
        lines = []
        for r in RECORDS:
            args = DPOConfig(output_dir=tempfile.mkdtemp(), report_to=[], max_length=None,
                             use_cpu=True)
            t = DPOTrainer(model=model, ref_model=copy.deepcopy(model), args=args,
                           train_dataset=Dataset.from_list([r]), processing_class=tok)
            ex = t.train_dataset[0]
            p = ex["prompt_ids"]
            lines.append(f"prompt {len(p)}")
            lines.append("chosen " + " ".join(map(str, p + ex["chosen_ids"])))
            lines.append("rejected " + " ".join(map(str, p + ex["rejected_ids"])))
        with open(os.path.join(OUT, name + ".expected"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
        print(name, "ok")


if __name__ == "__main__":
    main()
