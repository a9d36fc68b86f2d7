#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A Llama 3-shaped tokenizer.json for bench_tokenize.py, trained with the `tokenizers` package on
local text (no download): byte-level BPE, Llama 3's split pattern, VOCAB ids (default 50000).

usage: train_bench_tokenizer.py CORPUS OUT.json [VOCAB]
"""
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
              r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

corpus, out = sys.argv[1:3]
vocab = int(sys.argv[3]) if len(sys.argv) > 3 else 50000
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              special_tokens=["<|end_of_text|>"])
tok.train([corpus], trainer)
tok.save(out)
