#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/nf4/: bitsandbytes NF4 quantization results, a tiny Llama, its
NF4 checkpoints as transformers saves them, and a QLoRA run (PEFT LoRA on the NF4 base), for
nnt's QLoRA tests.

Not run by CI (it needs PyTorch + transformers + peft + bitsandbytes); run once and commit
the output. No downloads: random tensors and models (fixed seeds), single-threaded,
deterministic algorithms, eager attention, dropout 0, PYTHONHASHSEED 0 (the script re-executes
itself with it, so that PEFT's target_modules list, built from a set, has a fixed order).

    /tmp/venv-torch/bin/python tests/gen_nf4_fixtures.py [--out tests/fixtures/nf4]

Versions used: torch 2.15, transformers 5.25, peft 0.21.2, bitsandbytes 0.50.2 (CPU
backend), x86_64 with AVX-512. Runtime about 12 s. Two runs give byte-identical files
(SHA256SUMS).

NF4 (bitsandbytes 0.50.2 on CPU, blocksize 64, quant_type nf4, uint8 storage)
-----------------------------------------------------------------------------
code (16 fp32 values, index = the 4-bit value; stored as nf4_code):
  -1, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
  -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0,
  0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
  0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1
Quantize (bitsandbytes' default backend, the one CPU uses): the tensor flattened row-major
(a bf16 or fp16 tensor first converted to fp32, exactly), blocks of 64 consecutive values;
  absmax[b] = max |x| over the block (fp32, stored unclamped: 0 for an all-zero block)
  s = x * (1 / max(absmax[b], 1e-38f))     two fp32 roundings (1e-38f = bits 0x006ce3ee)
  s = clamp(s, -1, 1)
  q = number of mid[i] < s, mid[i] = (code[i] + code[i+1]) / 2 in fp32 (torch.bucketize,
      right=False: a value equal to a midpoint gets the LOWER code)
  byte k of the packed weight = q[2k] << 4 | q[2k+1]   (element 2k in the HIGH nibble)
Dequantize (libbitsandbytes_cpu): w = code[q] * absmax[b] in fp32 (one rounding; denormal
products kept); to bf16: that fp32 product rounded to nearest even. Exception: on a CPU with
AVX512-BF16 (this one) bnb converts with vcvtneps2bf16, which flushes denormal results to
+-0 (59 values of zeros_mixed); deq16 below keeps them (torch's .to(bfloat16) of deq32, what
bnb's scalar and plain AVX-512 paths give); the script checks that this is the only
difference.

quant.safetensors
  nf4_code (16) fp32
  per case C in randn (6, 256), zeros_mixed (2, 128), midpoints (2, 128), bf16vals (4, 192):
    src.C     fp32 (the source values)
    codes.C   uint8 (n/2): the packed bytes, flattened
    absmax.C  fp32 (n/64)
    deq32.C   fp32, src's shape: dequantize_4bit to fp32 (= code[q] * absmax, checked)
    deq16.C   bf16, src's shape: deq32 rounded to nearest even (see above)
  src16.bf16vals   bf16 (4, 192): the same values as src.bf16vals; codes/absmax/deq of
                   bf16vals come from quantize_4bit of this bf16 tensor (the script checks
                   that quantizing the fp32 copy gives the same bytes and absmax)
  Cases:
    randn        randn rows scaled by 1e-3, 1, 30, 0.05, 1e3, 2.5; row 5 has an outlier
                 100 at column 10
    zeros_mixed  block 0 all zeros, +0 and -0 alternating (absmax 0, every code 7);
                 block 1 randn with a +0 and a -0; block 2 denormals only, |x| < 1e-38
                 (absmax < 1e-38: the clamp decides the scale); block 3 randn * 1e-37
                 (normals near FLT_MIN and denormals) with a few tiny denormals
    midpoints    block 0: absmax 2 (exact powers of two: s is exact) with every midpoint *
                 2 and one ulp either side (of the product), and every code value * 2;
                 block 1: the same with absmax 0.5 given by the element -0.5;
                 block 2: absmax a = 0.9754456877708435 (fp32; not a power of two): 14
                 values near midpoint * a where x * fl(1/a) and x / a fall in different
                 buckets (dividing instead of multiplying by the reciprocal is caught), then
                 fl(midpoint * a) and one ulp either side, and code[0..3] * a;
                 block 3: absmax 0.0123 (the element -0.0123) with fl(midpoint * 0.0123)
                 and one ulp either side, and code values * 0.0123
                 (block 0 checks: midpoint i -> code i, one ulp up -> i + 1, down -> i)
    bf16vals     bf16-representable values (randn rows scaled by 0.02, 1, 7, 300)
  Double quantization of absmax (bnb_4bit_use_double_quant), one case "dq": a (2, 8320)
  randn tensor (260 blocks of 64, so two nested blocks of 256, the second of 4):
    dq.codes          uint8 (8320): the packed 4-bit weight
    dq.absmax_fp32    fp32 (260): absmax before the nested quantization
    dq.absmax8        uint8 (260): the nested-quantized absmax (the checkpoint's "absmax")
    dq.nested_absmax  fp32 (2), dq.offset fp32 (1), dq.nested_code fp32 (256)
    dq.absmax         fp32 (260): the absmax bnb dequantizes from those:
                      nested_code[absmax8[i]] * nested_absmax[i / 256] + offset (fp32)
                      (relative error up to 0.21 against dq.absmax_fp32: the small ones)

llama/  (config.json, generation_config.json, model.safetensors: save_pretrained, fp32)
  LlamaForCausalLM V 64, hidden 64, intermediate 128, L 2, NH 4, NKV 2 (head_dim 16),
  untied lm_head, rms_norm_eps 1e-5, rope_theta 10000, max_position_embeddings 64,
  bos/eos/pad None, eager attention. Norm weights 1 + 0.1 randn, every matrix 0.3 randn.

llama_bnb/  (config.json, model.safetensors): llama/ loaded with
  AutoModelForCausalLM.from_pretrained(llama/, quantization_config=BitsAndBytesConfig(
  load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32),
  dtype=torch.float32, device_map="cpu") and saved with save_pretrained; a pre-quantized
  checkpoint as people download them (generation_config.json removed: nothing in it).
  The 14 q/k/v/o/gate/up/down projections are NF4 (lm_head, embed_tokens and the norms stay
  fp32, under their usual names). Per projection P, e.g. model.layers.0.self_attn.q_proj
  (out 64, in 64; down_proj is out 64, in 128: weight (4096, 1), absmax (128)):
    P.weight                                    U8  (2048, 1)  out*in/2 packed bytes
    P.weight.absmax                             F32 (64)       out*in/64
    P.weight.quant_map                          F32 (16)       the NF4 code above
    P.weight.quant_state.bitsandbytes__nf4      U8  (77)       UTF-8 JSON (json.dumps):
      {"quant_type": "nf4", "blocksize": 64, "dtype": "float32", "shape": [64, 64]}
  The bytes cover the (out, in) matrix flattened row-major (element 2k high nibble of
  byte k, 2k+1 low), blocks of 64 consecutive elements of that flattening; "dtype" is the
  dtype of the matrix that was quantized (what dequantize_4bit returns by default).
  config.json has
    "quantization_config": {"_load_in_4bit": true, "_load_in_8bit": false,
      "bnb_4bit_compute_dtype": "float32", "bnb_4bit_quant_storage": "uint8",
      "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": false,
      "llm_int8_enable_fp32_cpu_offload": false, "llm_int8_has_fp16_weight": false,
      "llm_int8_skip_modules": null, "llm_int8_threshold": 6.0, "load_in_4bit": true,
      "load_in_8bit": false, "quant_method": "bitsandbytes"}
llama_bnb_dq/  the same with bnb_4bit_use_double_quant=True (the same 4-bit bytes):
    P.weight                                    U8  (2048, 1)
    P.weight.absmax                             U8  (64)       8-bit codes of the absmax
    P.weight.nested_absmax                      F32 (1)        ceil(64 / 256) blocks
    P.weight.nested_quant_map                   F32 (256)      the dynamic map
    P.weight.quant_map                          F32 (16)
    P.weight.quant_state.bitsandbytes__nf4      U8  (166)
      {"quant_type": "nf4", "blocksize": 64, "dtype": "float32", "shape": [64, 64],
       "nested_blocksize": 256, "nested_dtype": "float32",
       "nested_offset": 0.7876872420310974}
  and "bnb_4bit_use_double_quant": true in config.json. (No projection here has more than
  128 absmax, so one nested block each: quant.safetensors' dq case has two.)
  Double-quant dequantization (bitsandbytes.functional.dequantize_4bit with a nested
  QuantState; the CPU forward does the same via gemm_4bit):
    absmax[i] = nested_quant_map[absmax_u8[i]] * nested_absmax[i / 256] + nested_offset
  all in fp32 (product rounded, then the sum rounded); nested_offset is the JSON's float
  (a double holding the fp32 value: convert it to fp32). Then w = code[q] * absmax[b] as
  above. nested_quant_map is bitsandbytes' 8-bit signed "dynamic" map
  (create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8)), 256 sorted values
  from -0.99297 to 1. Quantizing (not needed to load): offset = mean(absmax) (fp32
  torch.mean), y = absmax - offset, blocks of 256: nested_absmax = max |y|, then each
  y * (1 / nested_absmax) is given the nearest code (libbitsandbytes_cpu: through a 65536
  entry lookup table over [-1, 1]; in these fixtures the same as torch.bucketize over the
  code's midpoints).
  nested_quant_map[0..3] = -0.99296873807907104, -0.97890627384185791,
  -0.96484375, -0.95078122615814209 ..., [127] = 0, [128] = 5.5000004e-07 ...,
  [254] = 0.99296873807907104, [255] = 1 (stored in the checkpoint and as dq.nested_code)

qlora.reference.safetensors  (B 2, T 16)
  tokens, targets (B, T) int32; train_tokens, train_targets (10, B, T) int32 (drawn as in
      gen_lora_fixtures.py's data(), seed 300)
  base_logits (B, T, V) fp32: the fp32 base (llama/) on tokens
  nf4_logits (B, T, V) fp32: llama/ loaded as llama_bnb/ (NF4, compute dtype fp32, the rest
      fp32) on tokens. Every bnb Linear4bit is given support_avx512bf16_for_cpu = False
      before its first forward: otherwise, on a CPU with AVX512-BF16, an eval-mode forward
      without grad repacks the weight and computes in bf16 (the script prints how much
      that changes the logits). With that, the forward is exactly dequantize to fp32 then
      F.linear (the script checks it: see (a) below)
  nf4_logits_bf16 (B, T, V) bf16: llama/ loaded with dtype=torch.bfloat16 and
      bnb_4bit_compute_dtype=torch.bfloat16: the fp32 checkpoint's matrices rounded to bf16
      before quantization (so every absmax and 300 of the 73728 codes differ from
      llama_bnb/'s), embeddings, norms and lm_head bf16, the model run in bf16 as
      transformers runs it; the logits come out bf16 and are stored as they are
  nf4_logits_bf16c (B, T, V) fp32: llama/ loaded with dtype=torch.float32 and
      bnb_4bit_compute_dtype=torch.bfloat16: the same NF4 weights as llama_bnb/, every other
      parameter and computation fp32; each Linear4bit casts its input to bf16, dequantizes
      to bf16, computes F.linear in bf16 and casts the result back to fp32
  dq_logits (B, T, V) fp32: llama_bnb_dq/'s model (double quant, compute dtype fp32)
  QLoRA: the nf4 (fp32 compute) model, torch.manual_seed(300), get_peft_model(LoraConfig(
  r=4, lora_alpha=8, lora_dropout=0, target_modules="all-linear", bias="none",
  task_type="CAUSAL_LM")) on it directly (no prepare_model_for_kbit_training: that casts
  norms and embeddings to fp32 and turns on gradient checkpointing; the base is fp32
  already), eval mode; all-linear picks the 14 Linear4bit projections (q_proj k_proj v_proj
  o_proj gate_proj up_proj down_proj of both layers), not lm_head; scale 8 / 4 = 2. AdamW
  on the adapters: lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight decay 0.05, 10 steps:
    losses (10) fp32: each step's loss (mean cross-entropy over B*T) before its update
    logits (B, T, V) fp32: the trained model on tokens
    merged_logits (B, T, V) fp32: qlora/trained/ on llama_bnb/ merged by merge_and_unload
      (each weight dequantized, B A s added in fp32, quantized again as bitsandbytes does)
  qlora/init/, qlora/trained/   the adapter (adapter_config.json, adapter_model.safetensors;
      PEFT's README.md removed) before and after training; keys
      base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight (r, in) and
      .lora_B.weight (out, r), fp32; B is zero in init/

qdora.reference.safetensors, qdora/init/, qdora/trained/   the same with DoRA: LoraConfig
  use_dora=True (torch.manual_seed(301)), the adapters' files also holding
  .lora_magnitude_vector (out) of each projection (PEFT starts them at the rows' norms of
  the dequantized weights); tokens, targets, train_tokens, train_targets as qlora's;
  losses, logits, merged_logits (merge_and_unload into the 4-bit base: dequantized, the
  rows rescaled, quantized again)

greedy.txt   "prompt" the first 5 ids of tokens[0] (comma-separated), "nf4" the 24 ids
  generate(do_sample=False) continues them with (llama/ loaded as NF4, fp32 compute, bnb's
  bf16 fast path off), "fp32" those of the fp32 base (space-separated): for nnt-generate
  (tests/check_generate.sh)

SHA256SUMS   sha256sum format, every other file

Checks the script makes (it stops if one fails; it prints the numbers):
  (a) a plain LlamaForCausalLM holding code[q] * absmax (computed here in torch, fp32) for
      every projection gives nf4_logits exactly (max abs diff 0): bnb's CPU forward (fast
      path off) is "dequantize to fp32, then F.linear"; the projections' bytes and absmax
      are the quantizer above applied to llama/'s fp32 matrices
  (b) the same with llama_bnb_dq/'s nested absmax (formula above) gives dq_logits exactly;
      bnb's dequantize_blockwise of the nested absmax equals the formula bit for bit; the
      4-bit bytes are those of llama_bnb/
  (c) quant.safetensors: bnb's bytes and absmax = the quantizer above (torch), bf16 source
      = its fp32 copy, deq32 = code[q] * absmax, bnb's bf16 dequantization = deq16 but for
      flushed denormals; the dq case's nested codes = bucketize over the dynamic map's
      midpoints of (absmax - offset) * (1 / nested_absmax)
  (d) llama_bnb/ and llama_bnb_dq/ reloaded with from_pretrained (no quantization_config)
      give nf4_logits and dq_logits bit for bit; qlora/trained/ loaded with
      PeftModel.from_pretrained on llama_bnb/ gives logits bit for bit; every projection's
      checkpoint tensors are as listed above
"""
import argparse
import hashlib
import json
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":   # PEFT's target_modules comes from a set
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch
import torch.nn.functional as F
import bitsandbytes as bnb
import bitsandbytes.functional as BF
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import (AutoModelForCausalLM, BitsAndBytesConfig, LlamaConfig,
                          LlamaForCausalLM)

B, T, STEPS, V = 2, 16, 10, 64
LR, WD = 1e-2, 0.05
BS = 64
NF4 = BF.get_4bit_type("nf4", device="cpu")           # the 16 code values, fp32
MIDS = (NF4[:-1] + NF4[1:]) / 2                        # what the quantizer compares with


# ---------------------------------------------------------------------------------------
# quant.safetensors

def nextafter(x, direction):
    """one ulp up (direction +1) or down (-1)"""
    return torch.nextafter(x, torch.full_like(x, direction * float("inf")))


def ref_quant(x):
    """The quantizer in torch, as documented above (packed bytes, absmax)."""
    xf = x.reshape(-1).float().reshape(-1, BS)
    absmax = xf.abs().max(dim=1).values
    s = torch.clamp(xf * (1.0 / absmax.clamp(min=1e-38)).view(-1, 1), -1, 1).reshape(-1)
    q = torch.bucketize(s, MIDS).to(torch.uint8)
    return (q[0::2] << 4) | q[1::2], absmax


def ref_deq(packed, absmax, shape):
    q = torch.stack([packed >> 4, packed & 15], dim=1).reshape(-1).long()
    return (NF4[q].reshape(-1, BS) * absmax.view(-1, 1)).reshape(shape)


def case_randn(g):
    x = torch.randn(6, 256, generator=g)
    x[5, 10] = 40.0
    return x * torch.tensor([1e-3, 1.0, 30.0, 0.05, 1e3, 2.5]).view(6, 1)


def denormals(g, n, kmax):
    """n fp32 denormals k * 2^-149, 1 <= k < kmax, random signs (as bit patterns)."""
    k = torch.randint(1, kmax, (n,), generator=g, dtype=torch.int32)
    sign = torch.randint(0, 2, (n,), generator=g, dtype=torch.int32) << 31
    return (k | sign).view(torch.float32)


def case_zeros_mixed(g):
    x = torch.zeros(2, 128)
    x[0, 1:64:2] = -0.0                       # block 0: +0 / -0, absmax 0
    x[0, 64:] = torch.randn(64, generator=g)  # block 1: randn with a +0 and a -0
    x[0, 64 + 5] = 0.0
    x[0, 64 + 9] = -0.0
    x[1, :64] = denormals(g, 64, 6_000_000)   # block 2: denormals, |x| < 1e-38
    x[1, 3] = torch.tensor([1], dtype=torch.int32).view(torch.float32)   # the smallest
    x[1, 64:] = torch.randn(64, generator=g) * 1e-37   # block 3: near FLT_MIN
    x[1, 64:72] = denormals(g, 8, 1000)
    assert x[1, :64].abs().max() < torch.tensor(1e-38)
    return x


def near_midpoints(a):
    """fl(mid * a) and one ulp either side, for every midpoint."""
    a = torch.tensor(a, dtype=torch.float32)
    c = MIDS * a
    return torch.stack([c, nextafter(c, 1.0), nextafter(c, -1.0)], 1).reshape(-1)


def discriminating(a, want):
    """values near mid * a where x * fl(1/a) and x / a give different buckets."""
    a = torch.tensor(a, dtype=torch.float32)
    inv = 1.0 / a
    found = []
    for m in MIDS:
        x = m * a
        for _ in range(6):
            x = nextafter(x, -1.0)
        for _ in range(13):
            if torch.bucketize(x * inv, MIDS) != torch.bucketize(x / a, MIDS):
                found.append(x.clone())
            x = nextafter(x, 1.0)
    assert len(found) >= want, (a, len(found))
    return torch.stack(found[:30])


def case_midpoints():
    blocks = []
    for a, sign in ((2.0, 1.0), (0.5, -1.0)):
        at = torch.tensor(a)
        v = torch.cat([torch.tensor([sign * a]), near_midpoints(a), NF4 * at,
                       torch.tensor([0.0, -0.0])])
        assert v.numel() == 64 and v.abs().max() == a
        blocks.append(v)
    a = 0.9754456877708435   # an fp32 value; found by a search over random a
    d = discriminating(a, 12)
    rest = torch.cat([near_midpoints(a), NF4 * torch.tensor(a)])[: 64 - 1 - d.numel()]
    v = torch.cat([torch.tensor([a]), d, rest])
    assert v.numel() == 64 and v.abs().max() == torch.tensor(a)
    blocks.append(v)
    a = 0.0123
    v = torch.cat([torch.tensor([-a]), near_midpoints(a), (NF4 * torch.tensor(a))[:16],
                   torch.tensor([0.0, 1e-9])])
    assert v.numel() == 64 and v.abs().max() == torch.tensor(a)
    blocks.append(v)
    return torch.stack(blocks).reshape(2, 128), len(d)


def case_bf16vals(g):
    x = torch.randn(4, 192, generator=g) * torch.tensor([0.02, 1.0, 7.0, 300.0]).view(4, 1)
    return x.to(torch.bfloat16)


def quantize_case(x):
    packed, st = BF.quantize_4bit(x, blocksize=BS, quant_type="nf4")
    assert packed.shape == (x.numel() // 2, 1) and packed.dtype == torch.uint8
    assert st.absmax.dtype == torch.float32 and torch.equal(st.code, NF4)
    return packed.reshape(-1), st.absmax


def dequantize_case(codes, absmax, shape, dtype):
    st = BF.QuantState(absmax=absmax, shape=torch.Size(shape), code=NF4, blocksize=BS,
                       quant_type="nf4", dtype=dtype)
    return BF.dequantize_4bit(codes.view(-1, 1), quant_state=st)


def same(a, b):
    """bitwise equality (so -0 vs +0 and NaNs count)"""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    bits = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.uint8: torch.uint8}
    return torch.equal(a.contiguous().view(bits[a.dtype]), b.contiguous().view(bits[b.dtype]))


def quant_fixture(out):
    g = torch.Generator().manual_seed(31)
    mids, ndisc = case_midpoints()
    cases = {"randn": case_randn(g), "zeros_mixed": case_zeros_mixed(g), "midpoints": mids}
    x16 = case_bf16vals(g)
    cases["bf16vals"] = x16
    tensors = {"nf4_code": NF4.clone()}
    flushed = {}
    for name, x in cases.items():
        codes, absmax = quantize_case(x)
        rc, ra = ref_quant(x)
        assert same(codes, rc) and same(absmax, ra), name
        if x.dtype == torch.bfloat16:
            c32, a32 = quantize_case(x.float())
            assert same(codes, c32) and same(absmax, a32), "bf16 vs fp32 quantization"
            tensors["src16." + name] = x.contiguous()
        deq32 = dequantize_case(codes, absmax, x.shape, torch.float32)
        assert same(deq32, ref_deq(codes, absmax, x.shape)), name
        deq16 = deq32.to(torch.bfloat16)    # round to nearest even, denormals kept
        lib16 = dequantize_case(codes, absmax, x.shape, torch.bfloat16)
        diff = lib16.view(torch.int16) != deq16.view(torch.int16)
        if diff.any():   # bnb's AVX512-BF16 conversion (vcvtneps2bf16) flushes denormals
            tiny = (deq32 != 0) & (deq32.abs() < torch.finfo(torch.float32).tiny)
            assert bool((tiny | ~diff).all()), name
            assert same(lib16[diff], (deq32[diff] * 0).to(torch.bfloat16)), name
            flushed[name] = int(diff.sum())
        tensors.update({"src." + name: x.float().contiguous(), "codes." + name: codes,
                        "absmax." + name: absmax, "deq32." + name: deq32,
                        "deq16." + name: deq16})
        q = torch.stack([codes >> 4, codes & 15], 1).reshape(-1)
        print(f"quant {name}: {tuple(x.shape)}, absmax {[f'{v:.4g}' for v in absmax[:8]]}"
              f"{'...' if absmax.numel() > 8 else ''}, codes used {q.unique().numel()}/16")
    # which side of each midpoint bnb put the values of midpoints' block 0 (absmax 2)
    q = torch.stack([tensors["codes.midpoints"] >> 4, tensors["codes.midpoints"] & 15],
                    1).reshape(-1)[1:46].reshape(15, 3)
    assert torch.equal(q[:, 0], torch.arange(15, dtype=torch.uint8))        # lower code
    assert torch.equal(q[:, 1], torch.arange(1, 16, dtype=torch.uint8))     # ulp above
    assert torch.equal(q[:, 2], torch.arange(15, dtype=torch.uint8))        # ulp below
    print(f"quant: bnb's own dequantize_4bit to bf16 flushed denormal results to +-0 "
          f"(deq16 keeps them): {flushed or 'none'}")
    print(f"quant midpoints: a value equal to midpoint i gets code i (the lower); "
          f"{ndisc} values where x/a and x*(1/a) differ in block 2")

    # double quantization of absmax
    gq = torch.Generator().manual_seed(32)
    w = torch.randn(2, 8320, generator=gq) * torch.linspace(0.05, 2.0, 8320)
    packed, st = BF.quantize_4bit(w, blocksize=BS, quant_type="nf4", compress_statistics=True)
    _, st0 = BF.quantize_4bit(w, blocksize=BS, quant_type="nf4")
    assert st.nested and st.state2.blocksize == 256 and st.absmax.dtype == torch.uint8
    absmax = BF.dequantize_blockwise(st.absmax, st.state2) + st.offset
    mine = nested_absmax(st.absmax, st.state2.absmax, st.state2.code, st.offset)
    assert same(absmax, mine)
    assert same(st.offset, st0.absmax.mean())
    assert torch.equal(st.state2.code, BF.create_dynamic_map(signed=True))
    y = st0.absmax - st.offset          # the nested quantizer, in torch
    n2 = st.state2.absmax
    s2 = torch.clamp(y * (1.0 / n2).repeat_interleave(256)[: y.numel()], -1, 1)
    code2 = st.state2.code
    assert torch.equal(torch.bucketize(s2, (code2[:-1] + code2[1:]) / 2).to(torch.uint8),
                       st.absmax)
    tensors.update({"dq.codes": packed.reshape(-1), "dq.absmax_fp32": st0.absmax,
                    "dq.absmax8": st.absmax, "dq.nested_absmax": st.state2.absmax,
                    "dq.offset": st.offset.reshape(1), "dq.nested_code": code2.clone(),
                    "dq.absmax": absmax})
    rel = ((absmax - st0.absmax).abs() / st0.absmax).max().item()
    print(f"quant dq: (2, 8320), 260 absmax -> {st.state2.absmax.numel()} nested blocks, "
          f"offset {st.offset.item():.9g}, absmax relative error up to {rel:.3g}")
    save_file(tensors, os.path.join(out, "quant.safetensors"))


def nested_absmax(a8, nabsmax, ncode, offset):
    idx = torch.arange(a8.numel()) // 256
    return ncode[a8.long()] * nabsmax[idx] + offset.float()


# ---------------------------------------------------------------------------------------
# models

def build():
    torch.manual_seed(11)
    cfg = LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=64, rms_norm_eps=1e-5,
                      tie_word_embeddings=False, rope_theta=10000.0,
                      attn_implementation="eager", bos_token_id=None, eos_token_id=None,
                      pad_token_id=None)
    model = LlamaForCausalLM(cfg).float()
    g = torch.Generator().manual_seed(21)
    with torch.no_grad():   # large weights: the quantization error shows in the logits
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    model.eval()
    return model


def load_nf4(path, dtype=torch.float32, compute=torch.float32, double=False, fused=False,
             prequantized=False):
    """path's model as NF4: quantized while loading, or as saved (prequantized)."""
    kw = {}
    if not prequantized:
        kw["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute,
            bnb_4bit_use_double_quant=double)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, device_map="cpu",
                                                 attn_implementation="eager", **kw)
    n = 0
    for m in model.modules():
        if isinstance(m, bnb.nn.Linear4bit):
            m.support_avx512bf16_for_cpu = fused and m.support_avx512bf16_for_cpu
            n += 1
    assert n == 14 and not isinstance(model.lm_head, bnb.nn.Linear4bit)
    model.eval()
    return model


def linear4bit_weights(model):
    """{name.weight: (packed, QuantState)} of every Linear4bit."""
    return {n + ".weight": (m.weight.data, m.weight.quant_state)
            for n, m in model.named_modules() if isinstance(m, bnb.nn.Linear4bit)}


def dequantized_copy(qmodel, base):
    """A plain LlamaForCausalLM with qmodel's projections dequantized here (torch)."""
    sd = {k: v.detach().float().clone() for k, v in base.state_dict().items()}
    for name, (packed, st) in linear4bit_weights(qmodel).items():
        assert st.blocksize == BS and st.quant_type == "nf4" and torch.equal(st.code, NF4)
        absmax = st.absmax
        if st.nested:
            absmax = nested_absmax(st.absmax, st.state2.absmax, st.state2.code, st.offset)
        sd[name] = ref_deq(packed.reshape(-1), absmax, tuple(st.shape))
    plain = LlamaForCausalLM(base.config).float()
    plain.load_state_dict(sd)
    plain.eval()
    return plain


def logits_of(model, tokens):
    with torch.no_grad():
        return model(input_ids=tokens.long()).logits.contiguous()


def maxdiff(a, b):
    return (a.float() - b.float()).abs().max().item()


def data(seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, V, (B, T), generator=g, dtype=torch.int32)
    targets = torch.randint(0, V, (B, T), generator=g, dtype=torch.int32)
    train = torch.randint(0, V, (STEPS, B, T + 1), generator=g, dtype=torch.int32)
    return tokens, targets, train[:, :, :T].contiguous(), train[:, :, 1:].contiguous()


def train(model, params, tt, tg):
    opt = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WD)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        logits = model(input_ids=tt[s].long()).logits
        loss = F.cross_entropy(logits.reshape(-1, V), tg[s].reshape(-1).long())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float32)


def save(obj, path, drop=("README.md",)):
    obj.save_pretrained(path)
    for f in drop:
        p = os.path.join(path, f)
        if os.path.exists(p):
            os.remove(p)


def check_checkpoint(path, nested):
    """every projection's tensors in path/model.safetensors are as the docstring says"""
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        n = 0
        for k in keys:
            if not k.endswith(".quant_state.bitsandbytes__nf4"):
                continue
            p = k[: -len(".quant_state.bitsandbytes__nf4")]
            blob = json.loads(bytes(f.get_tensor(k).tolist()).decode("utf-8"))
            out_f, in_f = blob["shape"]
            assert blob["quant_type"] == "nf4" and blob["blocksize"] == BS, blob
            assert blob["dtype"] == "float32" and ("nested_offset" in blob) == nested, blob
            assert f.get_tensor(p).shape == (out_f * in_f // 2, 1)
            assert same(f.get_tensor(p + ".quant_map"), NF4)
            absmax = f.get_tensor(p + ".absmax")
            assert absmax.shape == (out_f * in_f // BS,)
            assert absmax.dtype == (torch.uint8 if nested else torch.float32)
            want = {p, p + ".absmax", p + ".quant_map", k}
            if nested:
                assert blob["nested_blocksize"] == 256 and blob["nested_dtype"] == "float32"
                assert same(f.get_tensor(p + ".nested_quant_map"), BF.create_dynamic_map())
                assert f.get_tensor(p + ".nested_absmax").shape == ((absmax.numel() + 255)
                                                                    // 256,)
                want |= {p + ".nested_absmax", p + ".nested_quant_map"}
            assert want == {x for x in keys if x == p or x.startswith(p + ".")}, p
            n += 1
    assert n == 14


def describe(path, linear="model.layers.0.self_attn.q_proj"):
    """The checkpoint's tensors for one projection and its quant_state JSON, as text."""
    lines = []
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
        for k in sorted(f.keys()):
            if not k.startswith(linear + "."):
                continue
            t = f.get_tensor(k)
            lines.append(f"    {k:<58} {str(t.dtype).replace('torch.', ''):<8} "
                         f"{tuple(t.shape)}")
            if "quant_state" in k:
                blob = json.loads(bytes(t.tolist()).decode("utf-8"))
                lines.append(f"      = {json.dumps(blob)}")
            elif k.endswith("nested_offset") or t.numel() == 1:
                lines.append(f"      = {t.item()!r}")
    cfg = json.load(open(os.path.join(path, "config.json")))["quantization_config"]
    lines.append(f"    config.json quantization_config = {json.dumps(cfg, sort_keys=True)}")
    return "\n".join(lines)


def models(out):
    base = build()
    base_dir = os.path.join(out, "llama")
    base.save_pretrained(base_dir)
    tokens, targets, tt, tg = data(300)
    ref = {"tokens": tokens, "targets": targets, "train_tokens": tt, "train_targets": tg}
    ref["base_logits"] = logits_of(base, tokens)

    nf4 = load_nf4(base_dir)
    ref["nf4_logits"] = logits_of(nf4, tokens)
    # greedy decoding of the 4-bit model (fp32 compute, bnb's bf16 fast path off), and of the
    # fp32 base, 24 new tokens after the first 5 of tokens[0], for nnt-generate
    prompt = tokens[:1, :5].long()
    with torch.no_grad():
        g4 = nf4.generate(prompt, max_new_tokens=24, do_sample=False, pad_token_id=0)
        g32 = base.generate(prompt, max_new_tokens=24, do_sample=False, pad_token_id=0)
    with open(os.path.join(out, "greedy.txt"), "w") as fh:
        fh.write("prompt " + ",".join(str(int(x)) for x in prompt[0]) + "\n")
        fh.write("nf4 " + " ".join(str(int(x)) for x in g4[0, 5:]) + "\n")
        fh.write("fp32 " + " ".join(str(int(x)) for x in g32[0, 5:]) + "\n")
    print("greedy: nf4", g4[0, 5:].tolist(), "fp32", g32[0, 5:].tolist())
    for name, (packed, st) in linear4bit_weights(nf4).items():   # quantized from fp32
        w = base.state_dict()[name]
        pc, pa = ref_quant(w)
        assert same(packed.reshape(-1), pc) and same(st.absmax, pa), name
    plain = dequantized_copy(nf4, base)
    d_a = maxdiff(logits_of(plain, tokens), ref["nf4_logits"])
    print(f"(a) nf4_logits vs a plain Llama holding code[q]*absmax: max abs diff {d_a:.3g}")
    assert d_a == 0.0
    print(f"    nf4_logits vs base_logits: max abs diff "
          f"{maxdiff(ref['nf4_logits'], ref['base_logits']):.4g} "
          f"(logits up to {ref['base_logits'].abs().max().item():.3g})")
    fused = load_nf4(base_dir, fused=True)
    if any(m.support_avx512bf16_for_cpu for m in fused.modules()
           if isinstance(m, bnb.nn.Linear4bit)):
        print(f"    with bnb's AVX512-BF16 CPU path left on: max abs diff "
              f"{maxdiff(logits_of(fused, tokens), ref['nf4_logits']):.4g} from nf4_logits")
    else:
        print("    (this CPU has no AVX512-BF16: bnb's bf16 CPU path not tried)")
    del fused

    bnb_dir = os.path.join(out, "llama_bnb")
    save(nf4, bnb_dir, drop=("generation_config.json",))
    again = load_nf4(bnb_dir, prequantized=True)
    assert same(logits_of(again, tokens), ref["nf4_logits"]), "llama_bnb reload"
    del again

    m16 = load_nf4(base_dir, dtype=torch.bfloat16, compute=torch.bfloat16)
    ref["nf4_logits_bf16"] = logits_of(m16, tokens)
    nd, nb, na = 0, 0, 0
    w16 = linear4bit_weights(m16)
    for name, (packed, st) in linear4bit_weights(nf4).items():
        p16, st16 = w16[name]
        pc, pa = ref_quant(base.state_dict()[name].to(torch.bfloat16))
        assert same(p16.reshape(-1), pc) and same(st16.absmax, pa), name
        q32 = torch.stack([packed.reshape(-1) >> 4, packed.reshape(-1) & 15], 1)
        q16 = torch.stack([p16.reshape(-1) >> 4, p16.reshape(-1) & 15], 1)
        nd += (q32 != q16).sum().item()
        nb += q32.numel()
        na += (st.absmax != st16.absmax).sum().item()
    print(f"    nf4_logits_bf16 ({ref['nf4_logits_bf16'].dtype}): bf16 model quantizes the "
          f"bf16-rounded matrices: {nd} of {nb} codes and {na} absmax differ from "
          f"llama_bnb's; max abs diff from nf4_logits "
          f"{maxdiff(ref['nf4_logits_bf16'], ref['nf4_logits']):.4g}")
    del m16
    m16c = load_nf4(base_dir, compute=torch.bfloat16)
    ref["nf4_logits_bf16c"] = logits_of(m16c, tokens)
    assert ref["nf4_logits_bf16c"].dtype == torch.float32
    print(f"    nf4_logits_bf16c: max abs diff from nf4_logits "
          f"{maxdiff(ref['nf4_logits_bf16c'], ref['nf4_logits']):.4g}")
    del m16c

    dq = load_nf4(base_dir, double=True)
    ref["dq_logits"] = logits_of(dq, tokens)
    for name, (packed, st) in linear4bit_weights(dq).items():
        assert st.nested and st.state2.blocksize == 256
        lib = BF.dequantize_blockwise(st.absmax, st.state2) + st.offset
        assert same(lib, nested_absmax(st.absmax, st.state2.absmax, st.state2.code,
                                       st.offset)), name
        p0, _ = linear4bit_weights(nf4)[name]
        assert torch.equal(packed, p0), name      # the same 4-bit codes as llama_bnb
    d_b = maxdiff(logits_of(dequantized_copy(dq, base), tokens), ref["dq_logits"])
    print(f"(b) dq_logits vs a plain Llama holding code[q] * (nested_code[a8] * "
          f"nested_absmax + offset): max abs diff {d_b:.3g}; dq_logits vs nf4_logits "
          f"{maxdiff(ref['dq_logits'], ref['nf4_logits']):.4g}")
    assert d_b == 0.0
    dq_dir = os.path.join(out, "llama_bnb_dq")
    save(dq, dq_dir, drop=("generation_config.json",))
    again = load_nf4(dq_dir, prequantized=True)
    assert same(logits_of(again, tokens), ref["dq_logits"]), "llama_bnb_dq reload"
    del again, dq

    # QLoRA
    qm = load_nf4(base_dir)
    qm.name_or_path = None   # adapter_config's base_model_name_or_path: null, not a path
    torch.manual_seed(300)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear",
                     bias="none", task_type="CAUSAL_LM")
    peft = get_peft_model(qm, cfg)
    peft.eval()
    targets_ = sorted(n for n, m in peft.named_modules() if hasattr(m, "lora_A")
                      and "default" in m.lora_A)
    assert len(targets_) == 14 and not any("lm_head" in n for n in targets_), targets_
    assert all(type(m).__name__ == "Linear4bit" and m.__module__.startswith("peft")
               for n, m in peft.named_modules() if n in targets_)
    save(peft, os.path.join(out, "qlora", "init"))
    params = [p for p in peft.parameters() if p.requires_grad]
    assert len(params) == 28 and all(p.dtype == torch.float32 for p in params)
    ref["losses"] = train(peft, params, tt, tg)
    save(peft, os.path.join(out, "qlora", "trained"))
    ref["logits"] = logits_of(peft, tokens)
    print("qlora all-linear targets:", sorted({n.rsplit(".", 1)[1] for n in targets_}),
          "x 2 layers")
    print("qlora losses", [round(x, 5) for x in ref["losses"].tolist()])
    again = PeftModel.from_pretrained(load_nf4(bnb_dir, prequantized=True),
                                      os.path.join(out, "qlora", "trained"))
    again.eval()
    assert same(logits_of(again, tokens), ref["logits"]), "adapter reload"
    # merged into the 4-bit base: PEFT dequantizes, adds B A s, quantizes again
    merged = again.merge_and_unload()
    for m in merged.modules():
        if isinstance(m, bnb.nn.Linear4bit):
            m.support_avx512bf16_for_cpu = False
    ref["merged_logits"] = logits_of(merged, tokens)
    print(f"qlora merged into the 4-bit base: max abs diff from logits "
          f"{maxdiff(ref['merged_logits'], ref['logits']):.4g}")
    save_file(ref, os.path.join(out, "qlora.reference.safetensors"))
    qdora_case(out, base_dir, bnb_dir, ref, tt, tg)
    check_checkpoint(bnb_dir, False)
    check_checkpoint(dq_dir, True)
    for d in (bnb_dir, dq_dir):
        print(f"{os.path.basename(d)}/ model.safetensors, one projection:\n{describe(d)}")


def qdora_case(out, base_dir, bnb_dir, qref, tt, tg):
    """QDoRA: PEFT's DoRA (use_dora) on the same 4-bit base, trained as the QLoRA case."""
    qm = load_nf4(base_dir)
    qm.name_or_path = None
    torch.manual_seed(301)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear",
                     bias="none", task_type="CAUSAL_LM", use_dora=True)
    peft = get_peft_model(qm, cfg)
    peft.eval()
    save(peft, os.path.join(out, "qdora", "init"))
    params = [p for p in peft.parameters() if p.requires_grad]
    assert len(params) == 42 and all(p.dtype == torch.float32 for p in params)
    ref = {k: qref[k] for k in ("tokens", "targets", "train_tokens", "train_targets")}
    ref["losses"] = train(peft, params, tt, tg)
    save(peft, os.path.join(out, "qdora", "trained"))
    ref["logits"] = logits_of(peft, ref["tokens"])
    print("qdora losses", [round(x, 5) for x in ref["losses"].tolist()])
    again = PeftModel.from_pretrained(load_nf4(bnb_dir, prequantized=True),
                                      os.path.join(out, "qdora", "trained"))
    again.eval()
    assert same(logits_of(again, ref["tokens"]), ref["logits"]), "qdora adapter reload"
    merged = again.merge_and_unload()
    for m in merged.modules():
        if isinstance(m, bnb.nn.Linear4bit):
            m.support_avx512bf16_for_cpu = False
    ref["merged_logits"] = logits_of(merged, ref["tokens"])
    print(f"qdora merged into the 4-bit base: max abs diff from logits "
          f"{maxdiff(ref['merged_logits'], ref['logits']):.4g}")
    save_file(ref, os.path.join(out, "qdora.reference.safetensors"))


def save_sums(out):
    sums = []
    for root, _, names in sorted(os.walk(out)):
        for f in sorted(names):
            rel = os.path.relpath(os.path.join(root, f), out)
            if rel == "SHA256SUMS":
                continue
            with open(os.path.join(root, f), "rb") as fh:
                sums.append(f"{hashlib.sha256(fh.read()).hexdigest()}  {rel}\n")
    with open(os.path.join(out, "SHA256SUMS"), "w") as fh:
        fh.writelines(sums)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "nf4"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    quant_fixture(args.out)
    models(args.out)
    save_sums(args.out)
    print(json.dumps({"torch": torch.__version__,
                      "transformers": __import__("transformers").__version__,
                      "peft": __import__("peft").__version__,
                      "bitsandbytes": bnb.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
