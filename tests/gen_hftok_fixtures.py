#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fixtures for tests/test_hftok.c: small tokenizer.json files trained with the Hugging Face
`tokenizers` package on local text (the repository's README and man pages; no downloads), and
for each of them >= 1000 test strings with the package's ids and decode.

Run from the repository root:  /tmp/venv-torch/bin/python tests/gen_hftok_fixtures.py [KIND ...]
(no KIND: all of them)
Writes tests/fixtures/hftok/KIND.json and KIND.cases, one case a line:
    HEX(text bytes) TAB ids separated by spaces TAB HEX(decode(ids, skip_special_tokens=False))
Kinds:
  gpt2      BPE, ByteLevel pre-tokenizer with GPT-2's regex, ByteLevel decoder, <|endoftext|>
  llama3    BPE (ignore_merges), Sequence[Split(Llama 3 regex, Isolated), ByteLevel(use_regex
            false)], ByteLevel decoder, special tokens <|begin_of_text|> ... and one ordinary
            added token
  smollm    Sequence[Digits(individual_digits), ByteLevel(use_regex true)] (SmolLM2 style)
  llama2    BPE with byte_fallback and <0xXX> tokens, normalizer Sequence[Prepend("▁"),
            Replace(" ", "▁")], decoder Sequence[Replace, ByteFallback, Fuse, Strip]
  metaspace BPE with byte_fallback, pre-tokenizer Metaspace(prepend_scheme first, split false),
            Metaspace decoder (the newer Llama / Mistral layout)
  qwen      the Qwen2 / Qwen3 layout: normalizer NFC, Sequence[Split(Qwen's regex: single
            digits, Isolated), ByteLevel(use_regex false)], ByteLevel decoder, <|endoftext|>,
            <|im_start|>, <|im_end|>; test strings with decomposed and compatibility forms
            (e + U+0301, A + U+030A, Hangul jamo, U+212B ANGSTROM SIGN, U+0958 (excluded from
            composition), U+FB01 ligature)
  gemma     Gemma's layout (SentencePiece-style BPE with byte_fallback and <0xXX> tokens, no
            dummy prefix): normalizer Replace(" ", "▁") alone, pre-tokenizer Split(" ",
            MergedWithPrevious) (a no-op after the normalizer, as in Gemma 3's file), decoder
            Sequence[Replace("▁", " "), ByteFallback, Fuse] (no Strip), Gemma's special tokens
            first (<pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4, <start_of_turn>,
            <end_of_turn>), a <bos> $A post-processor (not applied to the cases); test strings
            with runs of spaces, newlines and tabs and characters the vocabulary lacks (their
            UTF-8 bytes as <0xXX> tokens)
The tokenizers are trained on the repository's README and man pages as they are when the
script runs, so a run at another commit rewrites every file; qwen was added later (2026-11-26)
with the others left as they were, gemma too (2026-11-28, with its own random sequence:
`gen_hftok_fixtures.py gemma` rewrites only its files).
Invalid UTF-8 (kinds that can take bytes): the package only takes str, so the expected ids
follow nnt's documented rule: the text is cut at every byte that is not part of a valid UTF-8
sequence, each valid piece is encoded alone by the package, each invalid byte is its byte token
(ByteLevel: the token of its mapped character; byte_fallback: <0xXX>); the expected decode for
ByteLevel kinds is each valid piece as the package decodes it (itself, or its normalized form
under qwen's NFC) and each invalid byte itself, "-" (not compared) for the others.
"""
import glob
import json
import os
import random

from tokenizers import (Tokenizer, Regex, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)

OUT = "tests/fixtures/hftok"
LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
              r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
QWEN_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_QWEN = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# decomposed / compatibility forms that NFC changes (or, U+0958 and U+FB01, keeps)
UNNORMALIZED = ["e\u0301", "cafe\u0301 au lait", "A\u030a", "\u212b", "\u1100\u1161\u11a8",
                "\u0958", "\ufb01", "o\u0308\u0301", "\u00c5\u0327", "\u0041\u0327\u030a"]


def corpus_lines():
    files = ["README"] + sorted(glob.glob("man/man3/*.3"))[:80]
    lines = []
    for f in files:
        if os.path.exists(f):
            with open(f, encoding="utf-8", errors="replace") as fh:
                lines += [l.rstrip("\n") for l in fh if l.strip()]
    # a few scripts beyond ASCII so that merges exist for them too
    lines += ["Größe der Straße: 12 345 Ämter", "Ελληνικά κείμενα και αριθμοί 42",
              "Русский текст, пробелы   и цифры 2024", "日本語のテキストと数字１２３", "中文文本测试",
              "العربية نص قصير", "हिन्दी पाठ", "emoji 🙂🚀👍🏽 done", "tabs\tand\r\nCRLF lines"] * 20
    return lines


def bytelevel_trainer(vocab, special):
    return trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, special_tokens=special,
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                               show_progress=False)


def make_gpt2(lines):
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(lines, bytelevel_trainer(800, ["<|endoftext|>"]))
    return t


def make_llama3(lines):
    t = Tokenizer(models.BPE(ignore_merges=True))
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(lines, bytelevel_trainer(1200, SPECIAL3))
    t.add_tokens(["nnt_added"])
    return t


def make_smollm(lines):
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(lines, bytelevel_trainer(600, ["<|endoftext|>", "<|im_start|>"]))
    return t


def add_byte_tokens(t):
    """Append <0x00>..<0xFF> to the model's vocabulary (as Llama 2 has them) and reload."""
    d = json.loads(t.to_str())
    vocab = d["model"]["vocab"]
    nxt = max(vocab.values()) + 1
    for b in range(256):
        name = "<0x%02X>" % b
        if name not in vocab:
            vocab[name] = nxt
            nxt += 1
    return Tokenizer.from_str(json.dumps(d, ensure_ascii=False))


def make_llama2(lines):
    t = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                   decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tr = trainers.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False,
                             special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120)
    t.train_from_iterator([l[:200] for l in lines], tr)
    return add_byte_tokens(t)


def make_metaspace(lines):
    t = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    t.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tr = trainers.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False,
                             special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=100)
    t.train_from_iterator([l[:200] for l in lines], tr)
    return add_byte_tokens(t)


def make_qwen(lines):
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(lines, bytelevel_trainer(900, SPECIAL_QWEN))
    return t


SPECIAL_GEMMA = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"]


def make_gemma(lines):
    t = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    t.normalizer = normalizers.Replace(" ", "▁")
    t.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False)
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                   decoders.Fuse()])
    tr = trainers.BpeTrainer(vocab_size=900, min_frequency=2, show_progress=False,
                             special_tokens=SPECIAL_GEMMA, limit_alphabet=110)
    t.train_from_iterator([l[:200] for l in lines], tr)
    t = add_byte_tokens(t)
    t.post_processor = processors.TemplateProcessing(single="<bos> $A",
                                                     special_tokens=[("<bos>", 2)])
    return t


SCRIPTS = [(0x41, 0x7a), (0xc0, 0x17f), (0x391, 0x3c9), (0x410, 0x44f), (0x5d0, 0x5ea),
           (0x627, 0x64a), (0x905, 0x939), (0x3041, 0x3096), (0x4e00, 0x4fff), (0xac00, 0xacff),
           (0x1f600, 0x1f64f), (0x1f680, 0x1f6c5), (0x660, 0x669), (0xff10, 0xff19), (0x2070, 0x2079)]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\n\n", "   \n", "\u00a0", "\u3000", "\u2003", " \t "]
PUNCT = list(".,;:!?'\"()[]{}-_+=*/\\<>@#$%^&|~`") + ["'s", "'ll", "'RE", "...", "--"]


def random_piece(rng, extra):
    r = rng.random()
    if r < 0.35:
        lo, hi = rng.choice(SCRIPTS)
        return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 6)))
    if r < 0.5:
        return rng.choice(SPACES)
    if r < 0.65:
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 7)))
    if r < 0.8:
        return rng.choice(PUNCT)
    if r < 0.85 and extra:
        return rng.choice(extra)
    return rng.choice(["the", " model", "tensor", " Tile", "HELLO", "café", "naïve", "👍🏽", "🙂",
                       "e\u0301", "ﬁ", "x" * rng.randint(1, 30)])


def test_strings(rng, lines, extra, n=1100):
    out = ["", " ", "a", "  leading", "trailing  ", "\r\n", "\n\n\n", "0", "1234567890"]
    out += [x for x in extra]
    while len(out) < n:
        if rng.random() < 0.3:
            l = rng.choice(lines)
            i = rng.randint(0, max(0, len(l) - 1))
            out.append(l[i:i + rng.randint(1, 60)])
        else:
            out.append("".join(random_piece(rng, extra) for _ in range(rng.randint(1, 8))))
    return out


def invalid_strings(rng, valid, n=120):
    bad = [b"\xff", b"\xc3", b"\x80\x80", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80",
           b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xfe\xfe"]
    out = []
    while len(out) < n:
        s = rng.choice(valid).encode()
        i = rng.randint(0, len(s))
        # cut at a character boundary so that the valid parts stay valid
        while i < len(s) and (s[i] & 0xC0) == 0x80:
            i += 1
        out.append(s[:i] + rng.choice(bad) + s[i:])
    return out


def split_invalid(b):
    """[(True, valid bytes) | (False, one invalid byte)] as nnt cuts the text."""
    parts, i, start = [], 0, 0
    while i < len(b):
        ok = 0
        for k in (1, 2, 3, 4):
            try:
                b[i:i + k].decode("utf-8")
                ok = k
                break
            except UnicodeDecodeError:
                continue
        if ok:
            i += ok
            continue
        if start < i:
            parts.append((True, b[start:i]))
        parts.append((False, b[i:i + 1]))
        i += 1
        start = i
    if start < len(b):
        parts.append((True, b[start:]))
    return parts


def byte_token_id(t, byte, bytelevel):
    if bytelevel:
        return t.token_to_id(pre_tokenizers.ByteLevel.alphabet_map[byte]) \
            if hasattr(pre_tokenizers.ByteLevel, "alphabet_map") else t.token_to_id(BYTE2CH[byte])
    return t.token_to_id("<0x%02X>" % byte)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE2CH = bytes_to_unicode()


def write(name, t, lines, extra, rng, can_bytes, bytelevel):
    with open(os.path.join(OUT, name + ".json"), "w", encoding="utf-8") as fh:
        fh.write(t.to_str())
    strings = test_strings(rng, lines, extra)
    rows = []
    for s in strings:
        ids = t.encode(s, add_special_tokens=False).ids
        dec = t.decode(ids, skip_special_tokens=False)
        rows.append((s.encode(), ids, dec.encode()))
    if can_bytes:
        for b in invalid_strings(rng, strings):
            ids, dec = [], b""
            for valid, part in split_invalid(b):
                if valid:
                    piece = t.encode(part.decode(), add_special_tokens=False).ids
                    ids += piece
                    dec += t.decode(piece, skip_special_tokens=False).encode()
                else:
                    ids.append(byte_token_id(t, part[0], bytelevel))
                    dec += part
            # ByteLevel decodes every byte back (each valid piece as the package decodes it:
            # itself, or its normalized form); the other kinds prepend "▁" to each valid
            # piece (and the package would print U+FFFD): their decode is not compared
            rows.append((b, ids, dec if bytelevel else None))
    with open(os.path.join(OUT, name + ".cases"), "w") as fh:
        for b, ids, d in rows:
            fh.write("%s\t%s\t%s\n" % (b.hex(), " ".join(map(str, ids)),
                                          "-" if d is None else d.hex()))
    print(name, t.get_vocab_size(), len(rows), "cases")


GEMMA_EXTRA = SPECIAL_GEMMA + ["   three spaces", "line\nbreak\n\n", "\ttab", " lead", "trail ",
                               "<start_of_turn>user\nHi<end_of_turn>\n", "🙂🚀", "日本語",
                               "\u0915\u094d\u0937", "▁literal", "\x00\x01\x7f"]


def main():
    import sys
    only = set(sys.argv[1:])
    rng = random.Random(15)
    lines = corpus_lines()
    os.makedirs(OUT, exist_ok=True)
    kinds = [("gpt2", lambda: make_gpt2(lines), ["<|endoftext|>"], True),
             ("llama3", lambda: make_llama3(lines), SPECIAL3 + ["nnt_added", " nnt_added "], True),
             ("smollm", lambda: make_smollm(lines), ["<|endoftext|>", "<|im_start|>"], True),
             ("llama2", lambda: make_llama2(lines), ["<s>", "</s>", "<unk>"], False),
             ("metaspace", lambda: make_metaspace(lines), ["<s>", "</s>"], False),
             ("qwen", lambda: make_qwen(lines), SPECIAL_QWEN + UNNORMALIZED, True)]
    for name, make, extra, bytelevel in kinds:   # one random sequence, in this order
        if not only or name in only:
            write(name, make(), lines, extra, rng, True, bytelevel)
        elif only:
            break   # the later kinds' strings depend on the earlier ones'
    if not only or "gemma" in only:
        write("gemma", make_gemma(lines), lines, GEMMA_EXTRA, random.Random(39), True, False)


if __name__ == "__main__":
    main()
