#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hugging Face transformers' generate(use_cache=True, do_sample=False) tokens/s on a model of
the shapes of nnt's presets (random weights), the peer of bench/bench_generate.c; run by
bench/bench_generate.sh (needs PyTorch + transformers, e.g. /tmp/venv-torch/bin/python).

    generate_hf.py MODEL PROMPT NEW THREADS [DTYPE [SAMPLES [ragged]]]
MODEL: gpt2 | smollm2-135m | llama-3.2-1b. DTYPE fp32 (default) or bf16: the model's weights
and activations in that type (PyTorch's bf16 inference; nnt's bf16 precision keeps float
activations and rounds the products' operands); nf4 or nf4-bf16: the model saved, then loaded
by bitsandbytes in 4 bits (BitsAndBytesConfig load_in_4bit, nf4, compute dtype fp32 or bf16;
its linears' weights in NF4, the rest as for fp32 / bf16: nnt's --freeze nf4). SAMPLES
(default 1): a batch of that many copies of the prompt, decoded together (the peer of
bench_generate --samples; greedy generate takes no num_return_sequences); with "ragged",
SAMPLES different prompts of lengths from PROMPT down to about half of it (prompt r:
PROMPT - r * (PROMPT // 2) // SAMPLES ids from position r of one random sequence, as
bench_generate --ragged), padded on the left with an attention mask (transformers' batched
generation). Prints one line:
"hf MODEL: S s, R tokens/s" (the whole generate call, prefill included, new tokens of all
sequences a second, after an untimed warm-up generation of 8 tokens)."""
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM


def model_of(name):
    if name == "gpt2":
        return GPT2LMHeadModel(GPT2Config())  # 124M: V 50257, 1024 positions, 12 x 768
    if name == "smollm2-135m":  # HuggingFaceTB/SmolLM2-135M's config.json
        return LlamaForCausalLM(LlamaConfig(
            vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
            num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
            rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True))
    if name == "llama-3.2-1b":  # meta-llama/Llama-3.2-1B's config.json (rope scaling aside)
        return LlamaForCausalLM(LlamaConfig(
            vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
            num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
            rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True))
    raise SystemExit(f"generate_hf.py: unknown model {name}")


def quantized(model, dtype):
    """The model saved and loaded again by bitsandbytes in NF4 (its CPU backend)."""
    import tempfile
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    compute = torch.bfloat16 if dtype == "nf4-bf16" else torch.float32
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                               bnb_4bit_compute_dtype=compute)
        return AutoModelForCausalLM.from_pretrained(d, quantization_config=q, device_map="cpu",
                                                    dtype=compute).eval()


def main():
    name, nprompt, ngen, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    dtype = sys.argv[5] if len(sys.argv) > 5 else "fp32"
    samples = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    ragged = len(sys.argv) > 7 and sys.argv[7] == "ragged"
    if dtype not in ("fp32", "bf16", "nf4", "nf4-bf16"):
        raise SystemExit(f"generate_hf.py: DTYPE {dtype}: use fp32, bf16, nf4 or nf4-bf16")
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = model_of(name).float().eval()
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
    elif dtype.startswith("nf4"):
        model = quantized(model, dtype)
    prompt = torch.randint(0, model.config.vocab_size, (1, nprompt)).repeat(samples, 1)
    mask = torch.ones_like(prompt)
    if ragged:  # prompt r: its ids right-aligned, the pads masked
        ids = torch.randint(0, model.config.vocab_size, (nprompt + samples,))
        prompt = torch.zeros((samples, nprompt), dtype=torch.long)
        mask = torch.zeros_like(prompt)
        for r in range(samples):
            n = nprompt - r * (nprompt // 2) // samples
            prompt[r, nprompt - n:] = ids[r:r + n]
            mask[r, nprompt - n:] = 1

    def run(n):
        return model.generate(prompt, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                              do_sample=False, use_cache=True, pad_token_id=0)

    with torch.inference_mode():
        run(8)
        t0 = time.perf_counter()
        out = run(ngen)
        dt = time.perf_counter() - t0
    assert out.shape == (samples, nprompt + ngen)
    print(f"hf {name}: {dt:.3f} s, {samples * ngen / dt:.2f} tokens/s (torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads, {dtype}, {samples} "
          f"sequences{', prompts of their own' if ragged else ''})")


if __name__ == "__main__":
    main()
