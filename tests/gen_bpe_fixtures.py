#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the GPT-2 byte-level BPE fixtures used by tests/test_bpe.c.

CI has no Hugging Face stack, so this script is run once by hand and its output
is committed under tests/fixtures/bpe/ (tests/fixtures/bpe/README describes the
files, the versions and the command line).

What it does
------------
1. Trains a small byte-level BPE (the `tokenizers` package: ByteLevel
   pre-tokenizer, BpeTrainer with the 256-character byte alphabet) on the
   multilingual CORPUS below, keeping its merges in rank order.
2. Writes a GPT-2-shaped tokenizer: vocab.json with ids 0..255 = the 256 byte
   characters in GPT-2's bytes_to_unicode order, then one id per merge result
   in merge order, then "<|endoftext|>" last (as GPT-2's 50256); ASCII-only
   JSON (\\uXXXX escapes, like OpenAI's file); merges.txt with a
   "#version: 0.2" first line.
3. Loads those two local files with transformers.GPT2Tokenizer (offline; in
   transformers 5 it is the `tokenizers` Rust backend: ByteLevel pre-tokenizer
   with GPT-2's regex, BPE model, "<|endoftext|>" as a special token) and
   encodes a fixed list of test strings, pseudo-random strings (seeded) and
   the corpus itself -> cases.txt, one case a line:
       HEX|ID ID ID ...
   HEX: the UTF-8 bytes of the text in lowercase hex (empty for ""), IDS the
   expected ids separated by single spaces (empty for no ids).  Lines starting
   with '#' are comments.  Every case is checked to decode back to its text.
4. Writes SHA256SUMS.

Usage
-----
    HF_HUB_OFFLINE=1 python3 tests/gen_bpe_fixtures.py [--out DIR]
        default DIR: tests/fixtures/bpe (next to this script)
    python3 tests/gen_bpe_fixtures.py --c-tables
        prints the letter and number range tables of lib/io/bpe.c, measured
        from the `tokenizers` pre-tokenizer itself (every code point probed
        between two letters, two digits and two punctuation marks), so the C
        classification is the one Hugging Face's regex engine uses.

Deterministic: two runs give byte-identical files.
"""

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

EOT = "<|endoftext|>"
VOCAB_SIZE = 1000          # trainer target: 256 bytes + about 740 merges

CORPUS = """\
The quick brown fox jumps over the lazy dog. It's the dog's day, isn't it?
We're here, they've gone, I'm tired, you'll see, he'd know. Don't stop!
In 1999 the population was 1,234,567; by 2024 it had grown to 2,345,678.
Prices: $3.99, 12.50 EUR, 100% pure, 42 answers and 7 wonders.
def tokenize(text):
    return [t for t in text.split() if t]  # comment
if (x == 0) { return -1; } else { x += 2; }
Le café de la rue est fermé; l'élève a réussi son année. Voilà, très bien.
Die Straße ist groß und schön. Größe, Maß, Fußball, Äpfel, Öl, Übung.
El niño comió una manzana. ¿Dónde está la estación? ¡Mañana!
Привет, мир! Это простой текст на русском языке. Москва, Россия.
Καλημέρα κόσμε, αυτό είναι ελληνικό κείμενο.
日本語のテキストです。東京は大きい都市です。ひらがなとカタカナ。
中文测试文本，这是一个简单的句子。北京是中国的首都。
한국어 텍스트입니다. 서울은 큰 도시입니다.
العربية لغة جميلة. مرحبا بالعالم.
עברית היא שפה. שלום עולם.
Emoji: 😀 😃 🎉 👍 🚀 ❤️ and more 😀😀😀.
Numbers ² ³ ½ Ⅻ ① and digits ٠١٢٣ ०१२३.
Tabs\tand\tspaces   and    more\t\tspace.
Lines

with blank lines


and trailing spaces   
"""

# Hand-written cases: every branch of the pre-tokenizer regex
#   's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
# and the special token.
CASES = [
    "", "a", " ", "  ", "\n", "Hello world", " Hello world", "Hello, world! It's a test.",
    "I'm you're we've they'll he'd she's don't can't won't",
    "'s 't 're 've 'm 'll 'd", "'S 'LL 'Re ''s ''' '", "rock'n'roll", "x's'", "'sup", " 's",
    "123 4567 3.14159 1,000,000 x1y2 ab12cd", " 42", "007", "1 2  3   4",
    "!!! ??? ... ---- ((())) ;;", " !!", "a!b", "a !b", "a! b",
    "!@#$%^&*()_+-=[]{}|\\:;\"<>,./?`~",
    "a   b", "a\n\nb", "a \n b", "a\n \nb", "\t\tindented", "trailing   ", "   leading",
    "\r\n", "line1\r\nline2\r\n", " \t \n ", "x\t\ty", "end \n", "multiple\n\n\n\nnewlines",
    "é", "café naïve résumé", "straße Größe ß", "Привет, мир!", "Ελληνικά",
    "日本語のテキスト", "中文测试", "한국어",
    "emoji 😀🎉👍🏽 family 👨\u200d👩\u200d👧",
    "arabic العربية ١٢٣", "hebrew עברית", "hindi हिन्दी", "Ⅻ ² ½ ① x²",
    "NBSP\u00a0here", "ideographic\u3000space", "line\u2028sep\u2029par", "nel\u0085x",
    "vt\x0bff\x0cx", "ctl\x1c\x1d\x1e\x1f!", "!\x01!\x7f!", "combining e\u0301 a\u0308",
    "zero\u200bwidth", "\u00a0\u00a0a", " \u00a0a", "\u3000 a", "a \u3000", "ª º µ",
    "ǅ ʰ ゝ", "\ufeffBOM", "\U00010348 gothic \U0001d400",
    EOT, "a" + EOT + "b", " " + EOT + " ", "a  " + EOT + "  b", EOT + EOT,
    "<|endoftext|", "<|endoftext|>\n\nNext document.", "x<|endoftext|>'s",
    "a" * 300, "the " * 50, " " * 40 + "x", "\n" * 10,
    "def f(x):\n    return x**2  # square\n",
    '{"key": [1, 2.5, "v\\u00e9"], "n": null}',
    "https://example.com/path?q=1&r=two#frag",
]

POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") * 2 +
        list("0123456789") + [" "] * 12 +
        ["  ", "\n", "\n\n", "\t", "\r\n"] +
        ["'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S"] +
        list(".,;:!?-()[]\"/#$%&*+<=>@_") +
        ["é", "ß", "Ж", "ж", "ω", "中", "文", "の", "😀", "👍", "\u00a0", "\u3000",
         "\u0301", "²", "½", "Ⅻ", "٣", "\u200b", "\x0b", "\x1c", "\u2028", "\u0085",
         "the", " the", "ing", EOT])


def bytes_to_unicode():
    """GPT-2's table: byte -> character (printable Latin-1 maps to itself)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, [chr(c) for c in cs]


def train_merges():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    lines = CORPUS.splitlines(keepends=True)
    tok.train_from_iterator(lines * 3, trainer=trainer)
    with tempfile.TemporaryDirectory() as d:
        tok.model.save(d)
        with open(os.path.join(d, "merges.txt"), encoding="utf-8") as f:
            text = f.read()
    merges = []
    for line in text.split("\n"):
        if not line or line.startswith("#version"):
            continue
        a, b = line.split(" ")
        merges.append((a, b))
    return merges


def write_tokenizer(out, merges):
    bs, cs = bytes_to_unicode()
    vocab = {}
    for c in cs:                      # GPT-2 order: ids 0..255 are bs[i] -> cs[i]
        vocab[c] = len(vocab)
    for a, b in merges:
        assert a in vocab and b in vocab, (a, b)
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    vocab[EOT] = len(vocab)
    with open(os.path.join(out, "vocab.json"), "w", encoding="ascii", newline="\n") as f:
        json.dump(vocab, f, ensure_ascii=True)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")
    return vocab


def random_cases(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 24)
        out.append("".join(rng.choice(POOL) for _ in range(k)))
    return out


def c_tables():
    """Print the C range tables of \\p{L} and \\p{N} as the tokenizers regex sees them."""
    pt = pre_tokenizers.ByteLevel(add_prefix_space=False)

    def one(s):
        return len(pt.pre_tokenize_str(s)) == 1

    ranges = {"L": [], "N": []}
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        k = "L" if one("a" + c + "a") else "N" if one("1" + c + "1") else None
        if k:
            r = ranges[k]
            if r and r[-1][1] == cp - 1:
                r[-1][1] = cp
            else:
                r.append([cp, cp])
    for k, name in (("L", "bpe_letters"), ("N", "bpe_numbers")):
        r = ranges[k]
        print(f"static const uint32_t {name}[{len(r)}][2] = {{")
        for i in range(0, len(r), 4):
            print("    " + " ".join(f"{{0x{a:x}, 0x{b:x}}}," for a, b in r[i:i + 4]))
        print("};")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(here, "fixtures", "bpe"))
    ap.add_argument("--c-tables", action="store_true")
    args = ap.parse_args()
    if args.c_tables:
        c_tables()
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers
    import tokenizers
    from transformers import GPT2Tokenizer

    os.makedirs(args.out, exist_ok=True)
    merges = train_merges()
    vocab = write_tokenizer(args.out, merges)
    tok = GPT2Tokenizer.from_pretrained(args.out)
    assert tok.convert_tokens_to_ids(EOT) == vocab[EOT]
    assert len(tok) == len(vocab), (len(tok), len(vocab))

    texts = CASES + random_cases(200, 20240601) + [CORPUS]
    lines = [
        "# GPT-2 byte-level BPE cases: HEX|IDS (see tests/gen_bpe_fixtures.py)",
        f"# transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, "
        f"{len(vocab)} tokens, {len(merges)} merges, {len(texts)} cases",
    ]
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False)
        back = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        assert back == t, (t, ids, back)
        assert all(0 <= i < len(vocab) for i in ids)
        lines.append(t.encode("utf-8").hex() + "|" + " ".join(str(i) for i in ids))
    with open(os.path.join(args.out, "cases.txt"), "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(lines) + "\n")

    names = ["cases.txt", "merges.txt", "vocab.json"]
    with open(os.path.join(args.out, "SHA256SUMS"), "w", newline="\n") as f:
        for name in names:
            with open(os.path.join(args.out, name), "rb") as g:
                f.write(f"{hashlib.sha256(g.read()).hexdigest()}  {name}\n")
    for name in names:
        print(f"{name}: {os.path.getsize(os.path.join(args.out, name))} bytes")
    print(f"{len(vocab)} tokens, {len(merges)} merges, {len(texts)} cases; "
          f"python {sys.version.split()[0]}, transformers {transformers.__version__}, "
          f"tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    main()
