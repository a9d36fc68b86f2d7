#!/bin/sh
# SPDX-License-Identifier: MIT
# Mutation check of the test suite (not run by make check; takes a few minutes a mutation).
#
#   tests/mutate.sh [-k] [-t "TEST ..."] [MUTATION ...]
#   tests/mutate.sh -c [MUTATION ...]
#
# Copies the source tree (git ls-files plus uncommitted changes) to a scratch directory,
# builds it once out of tree, then for each mutation (all of them by default; names below)
# applies a one-line numerical bug to the copy, rebuilds, runs the tests (the Check suites
# and check_train.sh, or the TESTs given with -t) and reports which of them fail, i.e.
# catch the bug; the copy is restored before the next mutation. Every mutation must be
# caught by at least one suite; the report ends "caught N of M" and the exit status is 1
# if any mutation survived. -k keeps the scratch directory (path printed).
# NNT_MUTATE_DIR selects the scratch directory (default: a new one under $TMPDIR or /tmp).
# -c only checks that each expression still changes exactly one line of the source as it is
# (no build; make check runs it as tests/check_mutations.sh).
# The last result is recorded in tests/README.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
keep=0
only_tests=
check_only=0
while [ $# -gt 0 ]; do
    case $1 in
        -k) keep=1; shift;;
        -c) check_only=1; shift;;
        -t) only_tests=$2; shift 2;;
        -h|--help) sed -n '3,19p' "$0"; exit 0;;
        *) break;;
    esac
done

# name|file|sed expression|what it does. Each expression must change exactly one line.
MUTATIONS='
ln_no_eps|cpu/layernorm.c|s@sqrt(sq / (double)n + (double)eps)@sqrt(sq / (double)n)@|LayerNorm forward without eps
attn_dk_sign|cpu/attention.c|s@product(dnnl, bf16, 1, 0, n, hd, m, scale, from(dsc, c)@product(dnnl, bf16, 1, 0, n, hd, m, -scale, from(dsc, c)@|attention backward: dk with its sign flipped
attn_future_key|cpu/attn_mask.h|s@int64_t n = qp - k_pos0 + 1;@int64_t n = qp - k_pos0 + 2;@|causal mask: each query sees one future key
bf16_choice_ignored|cpu/gemm_dnnl.c|s@return bf16_direct \&\& nnt_cpu_dnnl_bf16_isa();@return nnt_cpu_dnnl_bf16_isa();@|bf16 products direct wherever the CPU has them, whatever was chosen
bf16_expand_inverted|cpu/gemm.c|s@bf16_measured = t\[1\] <= BF16_EXPAND_ABOVE \* t\[0\];@bf16_measured = t[1] > BF16_EXPAND_ABOVE * t[0];@|bf16 products: the way measured slower chosen
b_verdict_inverted|cpu/gemm_dnnl.c|s@s->verdict = s->best\[1\] <= s->best\[0\];@s->verdict = s->best[1] > s->best[0];@|measured B layout: the slower way kept
sumsq_first_partial_lost|lib/ops/reduce.c|s@for (int64_t i = 0; i < asked; i++)@for (int64_t i = 1; i < asked; i++)@|gradient norm: the first partial sum of squares left out
trace_idle_from_wait_end|lib/trace/svg.c|s@int64_t gap = r->wait_start - last->end;@int64_t gap = r->wait_start - last->wait_end - 1000000000;@|trace table: idle stretches measured from the data fetch of the last task, less a second
llmc_header_l_nh|lib/io/llmc.c|s@cfg->vocab_size, cfg->num_layers,       cfg->num_heads,@cfg->vocab_size, cfg->num_heads,       cfg->num_layers,@|llm.c checkpoint written with its layer and head counts swapped
host_side_no_state|lib/internal.h|s@kind == NNT_MEM_OPTIM_STATE)@kind == NNT_MEM_TENSORS)@|NNT_OPTIM_ON=cpu: the optimizer state not marked host side (its tasks left to the GPU)
ram_kept_over_peak|lib/ctx_ram.c|s@live_bytes + kept_bytes > peak_bytes + peak_bytes / 8)@live_bytes > peak_bytes + peak_bytes / 8)@|RAM hooks in RAM: freed blocks kept beyond the peak in use
ram_no_slack|lib/ctx_ram.c|s@kept_bytes > peak_bytes + peak_bytes / 8)@kept_bytes > peak_bytes)@|RAM hooks in RAM: freed blocks kept only under the peak itself
ram_offset_zero|lib/ctx_ram.c|s@b->off = 64 \* ((mapped_count++ \* 5) % 64);@b->off = 0 * mapped_count++;@|RAM hooks: every block at the start of its page (4K aliasing)
hash_words_no_fold|lib/io/meta.c|s@lane\[j\] = h ^ (h >> 32);@lane[j] = h;@|base checksum: the high bits of the words not folded into the lanes
base_old_key_words|lib/train/record.c|s@        kind = NNT_BASE_SUM_FNV;@        kind = NNT_BASE_SUM_WORDS;@|resume: the base checksum of an older checkpoint compared with the new kind
axpbyz_sign|cpu/elementwise.c|s@            zr\[i\] = yr\[i\] + alpha \* x\[i\];@            zr[i] = yr[i] - alpha * x[i];@|axpbyz (the residual sums and the SwiGLU backward) subtracting x
attn_segment_rows|cpu/attention.c|s@r1 = (last + 1) \* ATTN_CHUNK;@r1 = last * ATTN_CHUNK + 1;@|attention backward: a key segment given too few rows of its chunk
peak_last_window_lost|lib/train/mfu.c|s@window >= 1 \&\& first + window <= n;@window >= 1 \&\& first + window < n;@|MFU peak: the last window of rounds not counted
window_full_ignored|lib/models/transformer.c|s@ NNT_MODEL_WINDOW_FULL(c, i))@ 0)@|sliding windows: the full layers of a layer_types list of no rule given a window
kv_window_cache_full|lib/layers/attention.c|s@    return a->window > 0 \&\& 2 \* rows < len ? rows : len;@    return len;@|generation: a windowed layer keeps caches of the generation length
kv_slide_one_short|lib/layers/attention.c|s@int64_t from = past - (a->window - 1);@int64_t from = past - (a->window - 2);@|generation: a sliding cache drops the oldest key a query still sees
attn_ds16_over_p|cpu/attention.c|s@round_row(bf16, rows \* nk, r, nk, dsr);@round_row(bf16, 0, r, nk, dsr);@|bf16 attention backward: ds rounded over the bf16 copy of p
bf16_cvt_subnormal|cpu/gemm.c|s@        if (subnormal)@        if (0 \&\& subnormal)@|bf16 conversion by VCVTNEPS2BF16: subnormal inputs flushed to zero
avx512_tail_lanes|cpu/softmax.c|s@s = _mm512_mask_add_ps(s, nnt_avx512_mask(n - j, 8), s, up);@s = _mm512_mask_add_ps(s, nnt_avx512_mask(n - j, 0), s, e);@|AVX-512 row exp: the tail summed in the lanes of the wrong partial sum
band_group_keys_short|cpu/attn_band_groups.h|s@            b = hi\[r\] > b ? hi\[r\] : b;@            b = hi[r] - 1 > b ? hi[r] - 1 : b;@|band products: a group of rows given its keys to one before the last its rows see
band_atb_rows_short|cpu/attn_band_groups.h|s@    \*i1 = b + 1;@    *i1 = b;@|band products: dk, dv of a group of keys without the last row that sees them (rows in no order)
band_rows_next_short|cpu/attn_band_groups.h|s@    \*i1 = c->last + 1;@    *i1 = c->last;@|band products: dk, dv of a group of keys without the last row that sees them (the diagonal, a window)
band_seg_clip_short|cpu/attention.c|s@int64_t b = hi\[r\] < ca ? ca : (hi\[r\] > cb ? cb : hi\[r\]);@int64_t b = hi[r] < ca ? ca : (hi[r] > cb ? cb - 1 : hi[r]);@|band tasks: a row whose keys run past a key tile of the band loses the last key of the tile in the products after the scores
band_seg_transpose_at|cpu/attention.c|s@xt + sa, ld);@xt + sa - sg->at[s], ld);@|band tasks: the k of each key tile transposed to its own columns (from 0), not to those of the band
band16_pair_start|cpu/attn_band16.c|s@#define BAND_IN0(k) ((k) / 2)@#define BAND_IN0(k) (((k) + 1) / 2)@|bf16 band products: p v (and p^T dout, ds^T q) without the first pair of a group that starts at an odd key (row)
band16_dv_of_ds|cpu/attention.c|s@segs_atb(sg, 0, 1, rows, k0, nk, hd, 1.0f, b16->pp,@segs_atb(sg, 0, 1, rows, k0, nk, hd, 1.0f, b16->dsp,@|bf16 band backward: dv from ds instead of p
band16_odd_k0|cpu/attention.c|s@return b16 ? k0 - (k0 \& 1) :@return b16 ? k0 :@|bf16 band products: key pairs from an odd first key (q k^T and p v misaligned)
band_transpose_lane|cpu/attn_band.c|s@_mm512_storeu_ps(o + 4 \* ldt, _mm512_shuffle_f32x4(add, bdd, 0x88));@_mm512_storeu_ps(o + 4 * ldt, _mm512_shuffle_f32x4(add, bdd, 0xdd));@|band products: the AVX-512 transpose of k writes column 12 where column 4 goes
band_run_gofs|cpu/attention.c|s@mp->q_h0 + h, mp->kv_hs, mp->group, mp->gofs + h,@mp->q_h0 + h, mp->kv_hs, mp->group, mp->gofs,@|band tasks: every run of q heads reads the kv slab of the first run
band_start_ignored|cpu/attention.c|s@                if (keys->start\[j\]) {@                if (0) {@|band tasks: dk, dv of a key tile not zeroed before their first sums
band_first_from_1|lib/ops/attention.c|s@    for (; j < i; j++) {@    for (j = i > 0; j < i; j++) {@|band tasks: a band never starts at the first key tile
band_start_always|lib/ops/attention.c|s@        t.start\[j\] = !touched\[kj\];@        t.start[j] = 1;@|band tasks: every backward task zeroes its dk, dv tiles first
band_runs_last_lost|lib/ops/attention.c|s@    for (int64_t r = 0; done < nt \&\& rc == 0; r++)@    for (int64_t r = 0; done < nt - 1 \&\& rc == 0; r++)@|band tasks: the backward leaves out the last task of its runs
trace_records_before_start|lib/trace/trace.c|s@if (st.tracing \&\& ts_ns(\&p->submit_time) >= st.trace_t0)@if (st.tracing)@|trace: the tasks submitted before nnt_trace_start recorded too
packed_window_ignored|cpu/attn_mask.h|s@        n = s > n ? s : n;@        n = s;@|attention with packed examples: the window ignored (each query sees all of its example)
band_budget_ignored|lib/ops/attention.c|s@(5 + 4 \* longest) \* tile_bytes > ctx->ram_budget / 4)@(5 + 4 * longest) * tile_bytes > ctx->ram_budget * 4)@|band tasks: kept under a RAM budget whose quarter their tiles exceed
band_workers_ignored|lib/ops/attention.c|s@return runs >= ctx->ncpus \&\&@return runs >= 1 \&\&@|band tasks: the backward by bands with fewer runs than CPU workers
band16_grad_subnormal|cpu/attn_band16.c|s@    if (_mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000)) \&@    if (0 \&\& _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000)) \&@|bf16 backward score rows: subnormal p and ds flushed to 0 by VCVTNEPS2BF16
band16_grad_keys_from_0|cpu/attn_band16.c|s@(nnt_avx512_maskn(b) \& ~nnt_avx512_maskn(a))@(nnt_avx512_maskn(b))@|bf16 backward score rows: the columns before a rows first key kept
attn_rescale_skipped|cpu/attention.c|s@        if (m\[i\] != mnew) {@        if (0) {@|attention forward: o and l not rescaled when the running maximum moves
prod_window_start|cpu/attn_products.c|s@\*kb = nlo(q_pos0 + r0, k_pos0, tk, w);@*kb = nlo(q_pos0 + r0 + 1, k_pos0, tk, w);@|attention by products: the chunk keys start at the second rows window start
prod_cap_grad|cpu/attn_products.c|s@drow\[j\] = p \* (drow\[j\] - d\[ri\]) \* g;@drow[j] = p * (drow[j] - d[ri]);@|attention by products: the soft-cap gradient factor dropped in the backward rows
prod_dk_scale|cpu/attn_products.c|s@rc = ops->gemm(ops->ctx, 1, 0, c->kn, hd, c->rq, b->scale, b->dp, c->kn, sp, b->q + c->qo,@rc = ops->gemm(ops->ctx, 1, 0, c->kn, hd, c->rq, 1.0f, b->dp, c->kn, sp, b->q + c->qo,@|attention by products: dk without the scores scale
prod_batch_row|cpu/attn_products.c|s@attn_run r = {i, mp->group, 0, 1, mp->nb \* mp->kv_hs, mp->kv_hs};@attn_run r = {i, mp->group, 0, 1, mp->nb * mp->kv_hs, 1};@|attention by products: a whole maps entries read the positions of the wrong batch row
test_shard_no_count|tests/testutil.h|s@return added++ % n == index;@return added % n == index;@|test shards: the order of addition not counted, so shard 0 runs every test and the others none
dnnl_cache_mru|cpu/gemm_dnnl.c|s@c->slot\[i\].last_use < c->slot\[v\].last_use@c->slot[i].last_use > c->slot[v].last_use@|primitive cache: the most recently used entry replaced
table_inexact_narrowed|lib/layers/leaf.c|s@return exact ? nnt_tensor_retype(e->wte, NNT_BF16) : NNT_OK;@return nnt_tensor_retype(e->wte, NNT_BF16);@|a frozen token table kept in bf16 whatever its values
gather_bf16_row|cpu/embedding.c|s@nnt_cpu_bf16_to_f32(nc, table + t \* ldt, out + i \* ldo);@nnt_cpu_bf16_to_f32(nc, table + (t ^ 1) * ldt, out + i * ldo);@|bf16 table lookups read a neighbouring row
table_refreeze_rounds|lib/layers/leaf.c|s@return exact ? nnt_tensor_retype(e->wte, NNT_BF16)@return exact ? (own->products_only = 1, nnt_tensor_retype(e->wte, NNT_BF16))@|a token table narrowed once is rounded again when frozen after an unfreeze
attn_bf16_off|lib/codelets/attention.c|s@m.bf16 = ctx->precision == NNT_PRECISION_BF16@m.bf16 = 0 \&\& ctx->precision == NNT_PRECISION_BF16@|bf16 precision: the CPU attention kernels keep float products
attn_bf16_kv_offset|cpu/attention.c|s@scale, from(q, i0 \* hd), hd, from(k, k0 \* hd), hd,@scale, from(q, i0 * hd), hd, from(k, 0), hd,@|attention forward: the scores of a chunk from the first key of the block, not of the chunk (windows)
adamw_bc_step|lib/ops/optim.c|s@float bc1 = (float)(1.0 - pow(o.beta1, (double)step));@float bc1 = (float)(1.0 - pow(o.beta1, (double)(step + 1)));@|AdamW: first-moment bias correction one step ahead
xent_vocab_edge|cpu/xent.c|0,/if (t >= 0 \&\& t < nv)/s@if (t >= 0 \&\& t < nv)@if (t > 0 \&\& t < nv)@|cross-entropy forward: a target on the first id of a vocabulary tile is missed
ln_var_n1|cpu/layernorm.c|s@double rs = 1.0 / sqrt(sq / (double)n + (double)eps);@double rs = 1.0 / sqrt(sq / (double)(n - 1) + (double)eps);@|LayerNorm forward: variance divided by n - 1
gelu_coef|cpu/elementwise.c|s@0.044715@0.04471@|GELU: tanh coefficient 0.044715 -> 0.04471
gelu_erf_coef|cpu/elementwise.c|s@#define ERFC_P6 (-1.13520398f)@#define ERFC_P6 (-1.13510398f)@|exact GELU: erfc coefficient -1.13520398 -> -1.13510398
gelu_erf_cdf_sign|cpu/elementwise.c|s@return _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), q), q, neg);@return _mm256_blendv_ps(q, _mm256_sub_ps(_mm256_set1_ps(1.0f), q), neg);@|exact GELU, AVX2: Phi(-x) in place of Phi(x)
adam_eps_inside|cpu/optim.c|s@p\[i\] = pi - step \* mi / (sqrtf(vi) \* inv_sqrt_bc2 + eps);@p[i] = pi - step * mi / sqrtf(vi * inv_sqrt_bc2 * inv_sqrt_bc2 + eps);@|Adam: eps inside the square root
rms_no_eps|cpu/rmsnorm.c|s@sqrt(sq / (double)n + (double)eps)@sqrt(sq / (double)n)@|RMSNorm forward without eps
rms_dx_sign|cpu/rmsnorm.c|s@(dyr\[j\] \* gamma\[j\] - xh \* mgx)@(dyr[j] * gamma[j] + xh * mgx)@|RMSNorm backward: the projection term of dx with its sign flipped
swiglu_dsilu|cpu/swiglu.c|s@float ds = s \* (1.0f + g \* (1.0f - s));@float ds = s * (1.0f + g * s);@|SwiGLU backward: the derivative of silu with s in place of 1 - s
rope_sign|cpu/rope.c|s@yl\[i\] = lo \* c\[i\] - hi \* s\[i\];@yl[i] = lo * c[i] + hi * s[i];@|RoPE: the sine term of the first half with its sign flipped
rope_position|cpu/rope.c|s@double pos = (double)(pos0 + t);@double pos = (double)(pos0 + t + 1);@|RoPE: positions off by one
rope_hi_offset|lib/codelets/rope.c|s@a->hi_offset = t->whole ? t->n : 0;@a->hi_offset = t->whole ? t->n - 1 : 0;@|RoPE, whole head vectors: pair partner i + hd/2 - 1
rope_pair_tile|lib/ops/rope.c|s@ihi = split ? lo + j + split : lo;@ihi = split ? lo + j + split - 1 : lo;@|RoPE, split head vectors: the partner tile off by one
rope_bwd_sign|lib/ops/rope.c|s@"dx", dx, -1);@"dx", dx, 1);@|RoPE backward rotates forward
rope_freq_exponent|lib/ops/rope.c|s@float e = (float)(2 \* i) / (float)hd;@float e = (float)(2 * i + 1) / (float)hd;@|RoPE: frequency exponent off by one
rope_llama3_smooth|lib/ops/rope.c|s@f = (1.0f - s) \* f / factor + s \* f;@f = (1.0f - s) * f + s * f / factor;@|RoPE llama3: smoothing weights swapped
gqa_kv_head|cpu/attention.c|s@return b \* mp->kv_hs + (mp->gofs + h) / mp->group;@return b * mp->kv_hs + (mp->gofs + h) % mp->kv_hs;@|grouped-query attention: q head h reads kv head h mod NKV (interleaved; whole kv tiles) instead of h / G
gqa_span|lib/ops/attention.c|s@\*last = (h1 - 1) / g / k->tile\[1\];@*last = h0 / g / k->tile[1];@|grouped-query attention: a q head tile that spans two kv head tiles reads only the first
gqa_dkv_init|lib/ops/attention.c|s@!touched_q\[qi\], !touched_kv\[kj\],@!touched_q[qi], i == j,@|grouped-query attention backward: dk, dv tiles zeroed again by the diagonal task of every q head tile (the multi-head rule)
llama_rope_q_only|lib/layers/attention.c|s@NNT_TRY(nnt_tensor_rope(a->qkv\[1\], &a->rope, past, a->qkv\[1\]));@; /* k not rotated */@|attention layer: RoPE applied to q only
llama_rope_bwd_k|lib/layers/attention.c|s@NNT_TRY(nnt_tensor_rope_backward(a->dh\[2\], &a->rope, 0, a->dh\[2\]));@; /* dk not rotated back */@|attention layer backward: dk not rotated back
llama_kv_heads|lib/layers/attention.c|s@rc = attention_params(l, a, channels, heads, nkv, hd, &o, &t);@rc = attention_params(l, a, channels, heads, heads, hd, \&o, \&t);@|attention layer: the kv head count passed as the q head count
qk_norm_q_only|lib/layers/attention.c|s@int normed = i < 2 \&\& a->qkn\[i\], full@int normed = i < 1 \&\& a->qkn[i], full@|attention layer (Qwen3): k not normalised, q only
head_dim_scale|lib/layers/attention.c|s@: 1.0 / sqrt((double)hd);@: 1.0 / sqrt((double)(channels / heads));@|attention layer: scores scaled by 1/sqrt(C / NH) instead of 1/sqrt(head_dim)
llama_out_bias|lib/layers/attention.c|s@a->pb ? NNT_EPILOGUE_BIAS : NNT_EPILOGUE_NONE, a->pb, NULL));@NNT_EPILOGUE_NONE, a->pb, NULL));@|attention layer: the output projection bias left out
swiglu_dx_up_only|lib/layers/composite.c|s@NNT_TRY(nnt_tensor_sum_into(dxu, dxg, m->dx));@NNT_TRY(nnt_tensor_copy(dxu, m->dx));@|SwiGLU MLP backward: dx from up_proj only
block_norm_eps|lib/layers/composite.c|s@gl_rmsnorm_new_ex(l->ctx, C, o->norm_eps, o->norm_plus_one@gl_rmsnorm_new_ex(l->ctx, C, 1e-5, o->norm_plus_one@|RMSNorm block: eps 1e-5 whatever norm_eps says
train_wrap_heldout|lib/train/trainer.c|s@int64_t run = len - at < n ? len - at : n;@int64_t run = n;@|trainer: a training window past the end of the training tokens reads on into the held-out ones
val_window_shift|lib/train/trainer.c|s@o->val_len, (uint64_t)(k \* bt), di.masked);@o->val_len, (uint64_t)(k * bt + 1), di.masked);@|trainer validation: every window one token late
shuffle_row_offset|lib/train/trainer.c|s@nnt_data_read(tr->data, (int64_t)r \* T, row, T + 1));@nnt_data_read(tr->data, (int64_t)r * T + 1, row, T + 1));@|trainer shuffle: each sequence read one token late
mpi_no_stop_agreement|lib/train/trainer.c|s@return tr->ctx->mpi \&\& tr->ctx->nranks > 1 ? nnt_mpi_max(tr->ctx, v, n) : NNT_OK;@return NNT_OK;@|trainer: the ranks do not agree on stop and save requests at a step boundary
mpi_save_no_wait|lib/mpi/mpi.c|s@ctx->nranks < 2)@ctx->nranks < 99)@|MPI save: ranks return before rank 0 has written the file
train_signals_off_before_save|examples/nnt_train.c|0,/rc = write_outputs(t);/s@rc = write_outputs(t);@catch_signals(0), rc = write_outputs(t);@|nnt-train: signal handlers reset before the final save
data_file_offset|lib/data/data.c|s@int64_t first = f ? d->file_end\[f - 1\] : 0;@int64_t first = f ? d->file_end[f - 1] - 1 : 0;@|token data of several files: the files after the first read one token late
resume_data_given|examples/train_opts.c|s@((d->flags \& DATA) \&\& data_given)@(d->flags \& DATA)@|nnt-train --resume: the data options of the checkpoint never taken
options_no_nesting|lib/train/options.c|s@if (nnt_json_peek(j) == .{. \&\& depth < OPTIONS_MAXDEPTH)@if (0)@|nnt_options_get: the members of nested objects (those of the model) not found
cli_open_max|examples/cli.c|s@((d->flags \& CLI_OPEN_MAX) \&\& \*v == d->max))@0)@|shared option parser: an excluded maximum accepted (--beta1 1)
clip_squared|lib/optim/optim.c|s@double c = grad_clip / (norm + CLIP_EPS);@double c = grad_clip * grad_clip / (norm + CLIP_EPS);@|gradient clipping: the threshold squared (the same number at grad_clip 1)
cosine_floor_zero|lib/optim/optim.c|s@           (o->lr - o->min_lr) \* decay_factor(shape, step - start, o->total_steps - start);@           o->lr * decay_factor(shape, step - start, o->total_steps - start);@|decaying schedules: the decay from lr, not from lr - min_lr (the same at min_lr 0)
wsd_decay_from_warmup|lib/optim/optim.c|s@start = o->total_steps - o->decay_steps, shape = o->decay_shape;@start = o->warmup_steps, shape = o->decay_shape;@|WSD: the decay from the end of the warmup (no stable phase)
decay_sqrt_linear|lib/optim/optim.c|s@return 1.0 - sqrt(p);@return 1.0 - p;@|WSD 1-sqrt decay: a linear one
linear_decay_late|lib/optim/optim.c|s@return (double)(span - done) / (double)span;@return (double)(span - done + 1) / (double)span;@|linear decay: one step behind
old_trainer_size|lib/train/trainer.c|s@    offsetof(nnt_trainer_options, simpo_gamma),   /\* 0.3 \*/@    0,@|nnt_trainer_options: the size of 0.3 refused
early_stop_no_delta|lib/train/trainer.c|s@tr->low_val - tr->o.early_stop_delta ? 0 : tr->stale + 1;@tr->low_val ? 0 : tr->stale + 1;@|early stop: any lower loss an improvement whatever early_stop_delta
early_stop_late|lib/train/trainer.c|s@int64_t stop = tr->rank == 0 \&\& tr->stale >= tr->o.early_stop;@int64_t stop = tr->rank == 0 \&\& tr->stale > tr->o.early_stop;@|early stop: one validation late
info_whole_copy|lib/train/trainer.c|s@    memcpy(info, \&all, size);@    memcpy(info, \&all, sizeof all);@|nnt_trainer_info: the whole structure written into a smaller one of 0.3
smooth_no_uniform_grad|cpu/xent.c|s@        dx\[j\] -= uniform;@        dx[j] -= 0.0f * uniform;@|label smoothing: the gradient without its eps / V on every id
smooth_one_hot_full|cpu/xent.c|s@        dx\[t\] += sr \* eps;   /\* the one-hot@        dx[t] += sr;   /* the one-hot@|label smoothing: the gradient with the whole one-hot (1 for 1 - eps)
smooth_d_not_moved|cpu/xent.c|s@    double moved = v0 > 0 \&\& m != -INFINITY ? d - (double)v0 \* ((double)mnew - m) : 0.0;@    double moved = v0 > 0 \&\& m != -INFINITY ? d : 0.0;@|label smoothing: the sum of logit - m not moved when a later vocabulary block raises m
smooth_mean_v_minus_one|cpu/xent.c|s@        float uniform = logf(s\[r\]) - d\[r\] / (float)vocab;@        float uniform = logf(s[r]) - d[r] / (float)(vocab - 1);@|label smoothing: the mean logit over V - 1 ids
smooth_bwd_plain|lib/layers/leaf.c|s@                                                       c->fwd_smoothing, scale,@                                                       0.0, scale,@|label smoothing: the loss layer backward without it
trainer_smoothing_unset|lib/train/trainer.c|s@    NNT_TRY(nnt_layer_set_label_smoothing(tr->model, eps));@    NNT_TRY(nnt_layer_set_label_smoothing(tr->model, 0.0));@|trainer: label_smoothing not set on the model
trainer_smoothing_kept|lib/train/trainer.c|s@        nnt_layer_set_label_smoothing(tr->model, tr->smoothing_before);@        nnt_layer_set_label_smoothing(tr->model, tr->o.label_smoothing);@|trainer: the model keeps the label smoothing of the run after it
record_no_smoothing|lib/train/record.c|s@    if (o->label_smoothing > 0)@    if (o->label_smoothing > 1)@|checkpoint: label_smoothing not recorded (a resume trains without it)
neftune_bound_no_t|lib/layers/leaf.c|s@    double mag = e->noise_alpha / sqrt((double)out->shape\[1\] \* (double)out->shape\[2\]);@    double mag = e->noise_alpha / sqrt((double)out->shape[2]);@|NEFTune: the bound alpha / sqrt(C), without the sequence length
neftune_in_validation|lib/layers/leaf.c|s@ l->ctx->no_dropout)$@ 0)@|NEFTune: noise in the forwards that train nothing (validations)
neftune_one_draw|lib/layers/leaf.c|s@    int64_t pass = l->ctx->dropout_pass > 0 ? l->ctx->dropout_pass : ++e->noise_passes;@    int64_t pass = 1;@|NEFTune: the same noise at every forward
neftune_counted_passes|lib/layers/leaf.c|s@    int64_t pass = l->ctx->dropout_pass > 0 ? l->ctx->dropout_pass : ++e->noise_passes;@    int64_t pass = ++e->noise_passes;@|NEFTune: the draws counted by the layer, not the micro-batch number (a resumed run draws others)
trainer_neftune_unset|lib/train/trainer.c|s@    NNT_TRY(nnt_layer_set_neftune(tr->model, tr->o.neftune_alpha, tr->o.seed));@    NNT_TRY(nnt_layer_set_neftune(tr->model, 0.0, tr->o.seed));@|trainer: neftune_alpha not set on the model
record_no_neftune|lib/train/record.c|s@    if (o->neftune_alpha > 0)@    if (o->neftune_alpha > 1e9)@|checkpoint: neftune_alpha not recorded (a resume trains without it)
inbwd_last_writer|lib/optim/backward.c|s@--opt->inbwd->writers_left\[i\] > 0)@--opt->inbwd->writers_left[i] > 1)@|updates in the backward: a parameter with two writers (a shared table) updated after the first
inbwd_step_scale|lib/optim/backward.c|s@    b->grad_scale = 1.0 / (double)opt->opts.accum_steps;@    b->grad_scale = 1.0;@|updates in the backward: gradients not divided by accum_steps
llama3_low_default|lib/ops/rope.c|s@float s = ((1.0f / wavelen) \* orig - low) / span;@float s = ((1.0f / wavelen) * orig - 1.0f) / span;@|RoPE llama3: the smoothing with low_freq_factor 1 (its usual value) whatever the option says
rms_eps_key|lib/models/llama.c|s@nnt_cfg_double(o, "rms_norm_eps", 0, 1e-6, \&c->norm_eps)@nnt_cfg_double(o, "rms_eps", 0, 1e-6, \&c->norm_eps)@|config.json: rms_norm_eps not read (the fallback 1e-6 always)
qk_norm_eps_fixed|lib/models/transformer.c|s@ao.qk_norm_eps = c->norm_eps;@ao.qk_norm_eps = 1e-6;@|Qwen3 q/k norms: eps 1e-6 (the usual Qwen3 value) whatever norm_eps says
grad_flag_kept|lib/layers/layer.c|/^double nnt_layer_grad_beta/,/return 0.0;/s@l->params\[i\].grad_dropped = 0;@l->params[i].grad_dropped = 1;@|dropped gradients: the flag never reset, so every backward after nnt_layer_clear_grad writes instead of adding
chunk_fill_whole|lib/ctx_alloc.c|s@const int64_t filled = NNT_STARPU_CHUNK - NNT_STARPU_CHUNK_ALLOC_MAX;@const int64_t filled = NNT_STARPU_CHUNK;@|budget with CUDA workers: chunks counted full, not at the 7/8 that first-fit packing guarantees
chunk_limit_strict|lib/ctx_alloc.c|s@return bytes <= NNT_STARPU_CHUNK_ALLOC_MAX;@return bytes < NNT_STARPU_CHUNK_ALLOC_MAX;@|budget with CUDA workers: a tile of exactly 4 MiB counted whole instead of in a chunk
chunks_kept_none|lib/ctx_alloc.c|s@return empty < NNT_STARPU_CHUNKS_KEPT ? empty : NNT_STARPU_CHUNKS_KEPT;@return 0;@|budget with CUDA workers: the empty chunks StarPU keeps not counted
tied_head_beta|lib/layers/leaf.c|s@nnt_layer_grad_beta(h->emb, dwte), dwte, g->ndim - 1, 0));@nnt_layer_grad_beta(l, dwte), dwte, g->ndim - 1, 0));@|tied lm_head after nnt_layer_clear_grad: adds to the dropped token-table gradient, which the embedding then zero-fills
window_one_more|cpu/attn_mask.h|s@int64_t n = qp - w + 1 - k_pos0;@int64_t n = qp - w - k_pos0;@|sliding window: each query sees one key more than the window
packed_prev_key|cpu/attn_mask.h|s@int64_t s = qp - p - k_pos0;@int64_t s = qp - p - 1 - k_pos0;@|packed examples: a query also sees the last key of the previous example
packed_chunk_lo|cpu/attention.c|s@k0 = a < k0 ? a : k0;@k0 = a > k0 ? a : k0;@|packed examples: a chunk of query rows starts at the latest example start of its rows (earlier rows lose keys)
packed_no_reset|lib/train/trainer.c|s@p = starts\[b \* T + t\] ? 0 : p;@p = p;@|trainer: positions not reset where examples start (only at the first token of each row)
packed_rope_index|cpu/rope.c|s@double p = (double)pos\[b \* nt + t\];@double p = (double)t;@|RoPE with positions: the row index of the tile instead of the position of the token
packed_skip_edge|lib/ops/attention.c|s@return begin >= 0 \&\& kt->pos0 + kt->rows - 1 < begin;@return begin >= 0 \&\& kt->pos0 + kt->rows - 1 <= begin;@|packed examples: a key tile whose last key is the first of an example skipped (the queries of that example lose it)
packed_wpe_grad|lib/layers/leaf.c|s@return nnt_tensor_embedding_backward(e->pos, dout, dwpe, NULL);@return nnt_tensor_embedding_backward(e->tokens, dout, dwpe, NULL);@|GPT-2 with positions: the gradient of the position table scattered by token id
sft_mask_shift|lib/train/trainer.c|s@read_range_mask(data, start, len, pos + 1, tr->mask, B \* T)@read_range_mask(data, start, len, pos, tr->mask, B * T)@|trainer, masked data: the mask of the inputs taken for the targets (shifted by one)
sft_mean_of_means|lib/train/trainer.c|s@    divisor /= (double)o->accum;@    divisor = 0;@|trainer, masked data: each micro-batch its own mean (the mean of means, not the sum over the step / N of transformers)
sft_targets_kept|lib/train/trainer.c|s@tr->kept\[i\] = tr->mask\[i\] ? targets\[i\] : NNT_TRAINER_IGNORE;@tr->kept[i] = targets[i];@|trainer, masked data: every target counted
sft_prompt_last|lib/data/sft.c|s@memset(s->counts + k, 1, s->n - k);@memset(s->counts + k - 1, 1, s->n - k + 1);@|prompt/completion: the last token of the prompt counted
phi3_eos_not_counted|lib/data/sft.c|s@        a->at\[2 \* a->n - 1\] = s->text.n;@        (void)a;@|Phi-3 chat template: the closing eos after a last assistant message not counted
phi35_empty_system_kept|lib/data/sft.c|s@strcmp(role->s, "system") == 0 \&\& content->len == 0)@strcmp(role->s, "system") == 0 \&\& content->len == 1)@|Phi-3.5 chat template: an empty system message rendered
sft_span_end|lib/data/sft.c|s@size_t end = p == n ? p : p + 1;@size_t end = p + 1;@|assistant turns: the token after the turn counted too
mask_row_start|lib/io/tokens.c|s@ \&\& !(w->block \&\& at % w->block == 0))@)@|token writer: the first token of a row may count
mask_bit_order|lib/io/tokens.c|s@out\[done\] = (buf\[i / 8 - first\] >> (i % 8)) \& 1u;@out[done] = (buf[i / 8 - first] >> (7 - i % 8)) \& 1u;@|token reader: the bits of the loss mask read most significant first
window_layer_shift|lib/models/transformer.c|s@int windowed = nnt_model_block_window(c, i);@int windowed = nnt_model_block_window(c, i + 1);@|sliding window: the windowed layers shifted by one (Qwen2 max_window_layers)
gemma_norm_w|lib/layers/leaf.c|s@NNT_TRY(nnt_tensor_fill(\*cache, 1.0));@NNT_TRY(nnt_tensor_fill(*cache, 0.0));@|Gemma: RMSNorms scaled by w instead of 1 + w
gemma_embed_scale|lib/models/transformer.c|s@gl_embedding_set_scale(emb, sqrt((double)c->channels))@gl_embedding_set_scale(emb, 1.0)@|Gemma: the embedding not scaled by sqrt(C)
gemma_attn_softcap_off|lib/layers/attention.c|s@o.softcap = a->softcap;@o.softcap = 0.0;@|Gemma 2: attention scores not soft-capped
gemma_softcap_grad|cpu/attention.c|s@ds\[j\] = e \* (ds\[j\] - d) \* (1.0f - t \* t);@ds[j] = e * (ds[j] - d);@|Gemma 2: the factor 1 - tanh^2 of the score soft-cap gradient left out
gemma_final_softcap_off|lib/models/transformer.c|s@if (c->final_softcap > 0.0) {@if (c->final_softcap > 1e300) {@|Gemma 2: final logits not soft-capped
gemma_local_rope|lib/models/transformer.c|s@: windowed \&\& c->rope_local_theta@: !windowed \&\& c->rope_local_theta@|Gemma 3: the local rope base on the global layers and the global one on the local layers
nope_ignored|lib/models/transformer.c|s@ao.rope = NNT_MODEL_NOPE_LAYER(c, i) ? NULL@ao.rope = 0 ? NULL@|SmolLM3: rotary positions on the layers without them
nope_interval_shift|lib/models/llama.c|s@for (int64_t i = every - 1; i < L; i += every)@for (int64_t i = every; i < L; i += every)@|SmolLM3: no_rope_layer_interval counted from 0, not from 1
olmo_post_norms_swapped|lib/layers/composite.c|s@{-1, 0, -1, 1, 2, 3},@{-1, 0, -1, 1, 3, 2},@|OLMo 2: the post-attention and post-feedforward norms swapped
yarn_ramp_shift|lib/ops/rope.c|s@float ramp = ((float)i - flow) / span;@float ramp = ((float)i + 1.0f - flow) / span;@|YaRN: the ramp one frequency early
rope_factor_dropped|lib/ops/rope.c|s@const float scale = (float)nnt_rope_attention_factor(\&o);@const float scale = 1.0f;@|YaRN, LongRoPE: the attention factor not applied to the cosines and sines
partial_whole_vector|lib/ops/rope.c|s@t.n = split ? shape\[3\] : rd / 2;@t.n = split ? shape[3] : hd / 2;@|partial rotary: the whole head vector rotated
partial_freq_over_hd|lib/ops/rope.c|s@rope_table(\&o, rd, use_long, inv);@rope_table(\&o, hd, use_long, inv);@|partial rotary: the frequencies over hd, not the rotary dimension
longrope_switch_early|lib/ops/rope.c|s@int use_long = pos_offset + T > o.original_max_position;@int use_long = pos_offset + T >= o.original_max_position;@|LongRoPE: the long factors one position early
longrope_no_reprefill|lib/models/generate.c|s@                 n != g->reprefill;@                 1;@|LongRoPE generation: the cache not computed again past the original context
phi3_original_ignored|lib/models/phi3.c|s@nnt_cfg_rope_ex(o, 10000.0, c->max_seq, original, 1,@nnt_cfg_rope_ex(o, 10000.0, c->max_seq, 0, 1,@|Phi-3: the original context of the rope object kept over the one of Phi3Config
fused_lora_up_as_gate|lib/layers/composite.c|s@    return gl_lora_part(l, m->lora, 1, m->u, 1.0, gl_linear_operand(l->children\[UP\]));@    return gl_lora_part(l, m->lora, 0, m->u, 1.0, gl_linear_operand(l->children[UP]));@|fused gate_up_proj LoRA: the up rows given the B of the gate part
llama_names_off|lib/models/transformer.c|s@ao.llama_names = f->rope @ao.llama_names = 0 \&\& f->rope @|a block without rope and with all biases named as GPT-2 (q.weight)
gemma_query_scale|lib/models/transformer.c|s@? pow(c->query_pre_attn_scalar, -0.5)$@? 1.0 / sqrt((double)head_dim_of(c))@|Gemma: scores scaled by 1/sqrt(head_dim), not query_pre_attn_scalar^-1/2
gemma_geglu_grad|cpu/elementwise.c|s@dgate\[i\] = d \* u \* gelu_grad(g);@dgate[i] = d * u * gelu(g);@|GeGLU backward: gelu in place of its derivative
gemma_rope_linear|lib/ops/rope.c|s@if (o->scaling == NNT_ROPE_SCALING_LINEAR)$@if (o->scaling == -1)@|RoPE linear scaling (Gemma 3 global layers) not applied
gemma_mm_softcap_kept|lib/models/gemma.c|s@    c->final_softcap = 0.0;$@    ;@|Gemma3ForConditionalGeneration: final_logit_softcapping of the text_config applied (transformers applies none)
gemma_mm_tie_text|lib/models/gemma.c|s@return rc ? rc : nnt_cfg_bool(o, "tie_word_embeddings", 1, \&c->tied);@return rc;@|Gemma3ForConditionalGeneration: the head tied by tie_word_embeddings of the text_config, not of the top level
gemma_mm_first_nesting|lib/models/hf.c|s@if (starts_with(nnt_hf_weights_name(w, i), n->rename\[0\]\[1\]))@if (0)@|Gemma3ForConditionalGeneration: files under the module names of transformers read as if under the names of Google
gemma_lora_targets|lib/models/gemma.c|s@"q_proj,v_proj",   /\* PEFT@"q_proj,k_proj",   /* PEFT@|LoRA on Gemma: default targets q_proj, k_proj instead of PEFT q_proj, v_proj
open_val_split_round|lib/train/run.c|s@held_out = (int64_t)((double)n \* r->val_split);@held_out = (int64_t)((double)n * r->val_split + 1.0);@|nnt_trainer_open: one token more held out than val_split says
open_default_lr|lib/train/run.c|s@return nparams < 10000000 ? 3e-3 :@return nparams < 10000000 ? 6e-4 :@|nnt_trainer_open: the default learning rate of a small fresh model 6e-4, not 3e-3
resume_base_unchecked|lib/train/record.c|s@want != sum)@0)@|resume of a fine-tuning run: the checksum of the frozen base not compared (a changed base accepted)
resume_model_unchecked|lib/train/record.c|s@for (int i = 0; i < 10; i++) {@for (int i = 0; i < 0; i++) {@|resume: the recorded model configuration not compared
keep_resumed_moved|lib/train/keep.c|s@in_directory(o->resume, o->log_dir)@0@|keep_previous: a run resuming a checkpoint of its own directory moves the files of that run away
live_ema_weight|lib/train/trainer.c|s@0.9 \* tr->loss_ema + 0.1 \* r.loss@0.8 * tr->loss_ema + 0.2 * r.loss@|the smoothed loss of the live line with weight 0.2 for the new loss, not 0.1
text_width_edge|lib/train/text.c|s@t->n + (size_t)k >= (size_t)t->width@t->n + (size_t)k > (size_t)t->width@|nnt_trainer_text: the last field of a line may reach the last column of the terminal
resume_base_source|lib/train/run.c|s@    if (frozen > 0)   /@    if (frozen < 0)   /@|nnt_trainer_open resuming a fine-tuning run without a model: the source of the base not taken from the checkpoint
open_error_status|examples/nnt_train.c|s@(!strncmp(m, "resume:", 7) \&\& rc != NNT_E_IO) ? 2 : 1;@0 ? 2 : 1;@|nnt-train: a checkpoint of another model (resume) exits 1, not 2 (bad usage)
lora_rslora_scale|lib/models/lora.c|s@a->rslora ? alpha / sqrt(r) : alpha / r@a->rslora ? alpha / r : alpha / r@|LoRA: the rsLoRA scale alpha / r instead of alpha / sqrt(r)
lora_cattn_part|lib/layers/attention.c|s@\*part = one ? i : 0;@*part = 0;@|LoRA on the c_attn of GPT-2 (qkv_proj of Phi-3): q, k and v all take the q third of B
lora_dx_overwrite|lib/layers/lora.c|s@NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, lo->du, lo->a, 1.0, dx, 1, 0));@NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, lo->du, lo->a, 0.0, dx, 1, 0));@|LoRA backward: the input gradient of the adapter replaces the base one instead of adding to it
lora_merge_unscaled|lib/layers/lora.c|s@lo->scale, lo->b\[i\], lo->a, 1.0, w, 1, 0));@1.0, lo->b[i], lo->a, 1.0, w, 1, 0));@|LoRA merge: W += B A without the scale
lora_base_trained|lib/models/lora.c|s@        if (p->adapter .. p->frozen)$@        if (!p->adapter \&\& !p->frozen)@|LoRA: the adapters frozen instead of the base, whose gradients are then computed
freeze_pattern_inverted|lib/layers/layer.c|s@if (fnmatch(pattern, tree->listed_names\[i\], 0) != 0 \&\&@if (fnmatch(pattern, tree->listed_names[i], 0) == 0 \&\&@|nnt_layer_freeze: the parameters that do not match frozen, the gradients of the matching ones computed
bf16_widen_shift|lib/tensor.c|s@uint32_t bits = (uint32_t)h << 16;@uint32_t bits = (uint32_t)h << 15;@|a parameter kept in bf16 read into the model files with its bits shifted
merge_bf16_unrounded|lib/layers/lora.c|s@return nnt_tensor_retype(w, kept);@return NNT_OK;@|LoRA merge into a base kept in bf16: the sum left in fp32 (not rounded as the next product would)
narrow_keep_ignored|lib/layers/layer.c|s@p->keep_fp32 = mode == NNT_FREEZE_KEEP_FP32;@p->keep_fp32 = 0;@|NNT_FREEZE_KEEP_FP32 ignored: every frozen matrix kept in bf16 under bf16 products
sft_trim_ascii|lib/data/sft.c|s@return white ? len : 0;@return 0;@|chat templates: trim strips ASCII white space only (not U+00A0, U+3000 as Python strip does)
sft_qwen3_think_kept|lib/data/sft.c|s@answer = after_last(content->s, content->len, "</think>", \&alen);@answer = content->s, alen = content->len;@|Qwen3: the reasoning in content kept in the answer after the think block
sft_llama31_date|lib/data/sft.c|s@Cutting Knowledge Date: December 2023@Cutting Knowledge Date: December 2024@|Llama 3.1: the knowledge date of the system block wrong
sft_llama31_system_kept|lib/data/sft.c|/^static int render_llama31_system/,/^}/s@    \*skip = strcmp(role->s, "system") == 0;@    *skip = 0;@|Llama 3.1: a first system message rendered as a turn, not in the dated system block
sft_gemma3_system_lost|lib/data/sft.c|s@if (prefix \&\& turn == 0) {@if (prefix \&\& turn == 1) {@|Gemma 3: the content of a first system message not put before the first user message
sft_gemma3_system_parts|lib/data/sft.c|s@if ((\*prefix)->n != 1)@if ((*prefix)->n < 1)@|Gemma 3: a system message of several parts accepted (the template renders its first alone)
sft_gemma3_parts_first_only|lib/data/sft.c|s@    size_t nparts = content->type == JV_STR ? 1 : content->n, start = s->text.n;@    size_t nparts = 1, start = s->text.n;@|Gemma 3: only the first text part of a content list rendered
sft_gemma_assistant_role|lib/data/sft.c|s@NNT_TRY(assistant ? puts0(s, "model") : put(s, role->s, role->len));@NNT_TRY(put(s, role->s, role->len));@|Gemma: the turns of the assistant headed "assistant", not "model"
sft_prompt_no_generation|lib/data/sft.c|s@NNT_TRY(puts0(s, generation_prompt(s->tmpl)));@NNT_TRY(puts0(s, ""));@|chat prompts: the generation prompt of the template left out
sft_qwen3_prompt_think|lib/data/sft.c|s@    if (!block) {   /\* the published template@    if (0) {   /* the published template@|Qwen3 prompts: earlier assistant turns with their think blocks (the training form)
generate_messages_as_text|examples/nnt_generate.c|s@        memcpy(rec, o->prompt, k = o->prompt_len);@        chat_record(o, rec, \&k);@|nnt-generate --messages: the file rendered as the text of one user message
small_tasks_never_said|lib/train/trainer.c|s@ mean_us >= SMALL_TASK_US)@ mean_us >= 0)@|trainer: a step of a million one-microsecond tasks not warned of
kept_cap_ignored|lib/ops/gemm.c|s@    int fits = kept_in_use + bytes <= kept_cap \&\&@    int fits = kept_in_use <= kept_cap \&\&@|kept packs: a B tile packed and kept past the cap (the cap checked without its bytes)
json_records_as_text|lib/data/data.c|s@    int records = nnt_json_end(\&j) == 0 \&\& root.type == JV_OBJ;@    int records = 0;@|nnt_data_open: a file of JSON records read as text without a word
no_targets_unsaid|lib/train/trainer.c|s@    if (tr->masked \&\& divisor == 0 \&\& !tr->no_targets_said \&\& tr->rank == 0) {@    if (0) {@|trainer: a step whose rows count no target trained without a word
eos_ids_ignored|lib/models/generate.c|s@    for (int64_t k = 0; k < s->n_eos_ids; k++)@    for (int64_t k = 0; k < 0; k++)@|generation: the eos_ids list never stops it
hf_eos_config_first|lib/models/config_json.c|s@    if (\*n <= 0)@    if (1)@|nnt_model_hf_eos_ids: config.json read over generation_config.json
hf_tokenizer_files_skipped|lib/models/hf.c|s@        if (stat(src, \&ss) == 0)$@        if (0)@|nnt_model_save_hf_ex: the files beside tokenizer.json (tokenizer_config.json, ...) not copied
ids_vocab_edge|lib/layers/leaf.c|s@x->ids_max < V))@x->ids_max <= V))@|embedding layer: the token id V itself let through (one past the vocabulary)
ids_last_place|lib/tensor.c|s@if (v\[i\] > t->ids_max)@if (v[i] >= t->ids_max)@|token ids from the host: the place of the largest taken at its last occurrence, not its first
dropout_bwd_unmasked|lib/layers/lora.c|s@NNT_TRY(nnt_tensor_dropout(lo->dxd, mask_seed(l, lo), lo->dropout, lo->dxd));@;@|LoRA dropout: the input gradient not masked
dropout_keep_scale|cpu/random.c|s@out\[j\] = u < (double)a ? 0.0f : out\[j\] \* b;@out[j] = u < (double)a ? 0.0f : out[j];@|dropout: kept elements not divided by 1 - p
moe_no_renorm|cpu/moe_route.h|s@w\[j\] = norm ? p\[idx\[j\]\] / s : p\[idx\[j\]\];@w[j] = p[idx[j]];@|MoE routing: the top-k weights not renormalised (norm_topk_prob ignored)
moe_aux_dropped|lib/models/moe.c|s@    c->router_aux_coef = on ? coef : 0.0;@    c->router_aux_coef = 0.0;@|MoE config.json: router_aux_loss_coef dropped (no load-balancing loss)
moe_tie_lowest|cpu/moe_route.h|s@moe_nth_element(q, (int)k - 1, (int)E);@moe_insertion_sort(q, 0, (int)E);@|MoE top-k: equal probabilities choose the lowest expert index (not the choice of torch.topk)
moe_renorm_bwd|cpu/moe_route.h|s@dz\[it\[j\]\] += (float)((dwt\[j\] - dot) / s);@dz[it[j]] += (float)(dwt[j] / s);@|MoE routing backward: the sum term of the renormalisation left out
moe_aux_grad_r|lib/layers/moe.c|s@grad\[e\] = (float)(s.coef \* (double)s.E \* count\[e\] / (R \* R));@grad[e] = (float)(s.coef * (double)s.E * count[e] / R);@|MoE load-balancing loss gradient divided by R instead of R^2
olmoe_qk_per_head|lib/models/moe.c|s@c->qk_norm = 2;@c->qk_norm = 1;@|OLMoE config.json: q/k norms per head (Qwen3 style) instead of over the whole projection
moe_topk_no_heap|cpu/moe_route.h|s@if (k \* 64 <= E) {@if (0) {@|MoE top-k: the partial-sort regime of torch.topk (k 64 <= E) selected as the nth_element one
moe_dense_layers|lib/models/transformer.c|s@return !NNT_MODEL_DENSE_LAYER(c, i);@return 1;@|MoE: mlp_only_layers ignored (every block sparse)
moe_shared_ungated|cpu/moe.c|s@y\[r \* width + c\] += g \* s\[r \* width + c\];@y[r * width + c] += s[r * width + c];@|Qwen2-MoE: the shared expert output added without its sigmoid gate
moe_shared_softmax|cpu/moe.c|s@return 1.0f / (1.0f + expf(-z));@return expf(z - z);@|Qwen2-MoE: the shared expert gate a softmax over its one logit (always 1) instead of a sigmoid
moe_shared_gate_grad|cpu/moe.c|s@float d = (float)((double)g \* (1.0 - (double)g) \* dot);@float d = (float)((double)g * dot);@|Qwen2-MoE backward: the sigmoid derivative g (1 - g) taken as g
moe_shared_tiles|lib/ops/moe.c|s@NNT_TRY(nnt_insert_moe_shared_bwd(s->ctx, tile\[2\], c > 0,@NNT_TRY(nnt_insert_moe_shared_bwd(s->ctx, tile[2], 0,@|Qwen2-MoE backward: each channel tile part of the gate gradient overwrites the previous ones
moe_fused_up_offset|lib/models/moe.c|s@alt->offset = proj == 2 ? e \* C \* I : e \* 2 \* I \* C + proj \* I \* C;@alt->offset = proj == 2 ? e * C * I : e * 2 * I * C;@|MoE fused layout: each expert up_proj read from its gate_proj rows of gate_up_proj
ksum_join_overlap|cpu/gemm_dnnl.c|s@        off += k\[i\];@        off += k[i] - (i == 0);@|k-summed bf16 product: the second k tile joined over the last k row of the first
ksum_never|lib/ops/gemm.c|s@return 4.0 \* m \* n > 2.0 \* k \* (m + n);@return 4.0 * m * n < 0.0;@|bf16 products never summed over their k tiles in one task
kept_never_repacked|lib/ops/gemm.c|s@if (kl->handle\[i\] \&\& kl->packed_at\[i\] == version)@if (kl->handle[i])@|packs kept with B never packed again after B changes
kept_task_writes_unseen|lib/codelets/submit.c|s@nnt_handle_written(bufs\[i\].handle);@(void)bufs[i].handle;@|writes by tasks not counted: packs kept with B stale after a task writes B
parallel_mlp_on_attn|lib/layers/composite.c|s@    NNT_TRY(nnt_layer_forward(child(l, MLP), h2, \&m));@    NNT_TRY(nnt_layer_forward(child(l, MLP), a, \&m));@|parallel block (Phi, GPT-NeoX): the MLP on the attention output instead of the norm
parallel_mlp_grad_dropped|lib/layers/composite.c|s@    NNT_TRY(add_to_new(l, da, dm, \&k->dr2));@    NNT_TRY(add_to_new(l, da, da, \&k->dr2));@|parallel block backward: the MLP input gradient replaced by the attention one
phi_partial_default|lib/models/phi.c|s@    return nnt_cfg_rope_partial(o, 10000.0, c->max_seq, 0.5, \&c->rope);@    return nnt_cfg_rope_partial(o, 10000.0, c->max_seq, 1.0, \&c->rope);@|Phi config.json: no partial_rotary_factor read as 1, not the 0.5 of PhiConfig
lora_names_not_renamed|lib/models/lora.c|s@    if (mn->f->hf_rename)@    if (0 \&\& mn->f->hf_rename)@|LoRA modules under the tree names, not those of the family (Phi: dense, fc1, fc2)
granite_residual_ignored|lib/layers/composite.c|s@->scale = o->residual_scale > 0.0 ? o->residual_scale : 1.0;@->scale = 1.0;@|Granite: residual_multiplier not applied
granite_residual_bwd_unscaled|lib/layers/composite.c|s@    NNT_TRY(scaled(l, k->dr2, k->scale, \&k->dr2s, \&d));@    NNT_TRY(scaled(l, k->dr2, 1.0, \&k->dr2s, \&d));@|Granite backward: the gradient into the attention part not times residual_multiplier
granite_logits_times|lib/layers/leaf.c|s@    NNT_TRY(nnt_tensor_scale(x, 1.0 / s->divisor));@    NNT_TRY(nnt_tensor_scale(x, s->divisor));@|Granite: the logits multiplied by logits_scaling instead of divided
granite_logits_bwd_unscaled|lib/layers/leaf.c|s@    NNT_TRY(nnt_tensor_scale(g, 1.0 / s->divisor));@    NNT_TRY(nnt_tensor_scale(g, 1.0));@|Granite backward: the logits gradient not divided by logits_scaling
granite_attention_multiplier_ignored|lib/models/transformer.c|s@                                              : c->attention_multiplier;@                                              : 0.0;@|Granite: attention_multiplier ignored (scores scaled by 1 / sqrt(hd))
stablelm_partial_default|lib/models/stablelm.c|s@    return nnt_cfg_rope_partial(o, 10000.0, c->max_seq, 0.25, \&c->rope);@    return nnt_cfg_rope_partial(o, 10000.0, c->max_seq, 1.0, \&c->rope);@|StableLM config.json: no partial_rotary_factor read as 1, not the 0.25 of StableLmConfig
parallel2_one_norm|lib/layers/composite.c|s@        NNT_TRY(nnt_layer_forward(child(l, LN_2), x, \&h2));@        (void)0;@|parallel block on two norms (GPT-NeoX): the MLP on the first norm, the second unused
parallel2_norm_grad_dropped|lib/layers/composite.c|s@        NNT_TRY(norm_backward(l, LN_2, \&dm));@        (void)0;@|parallel block on two norms backward: the MLP input gradient not through its norm
neox_serial_ignored|lib/models/transformer.c|s@    if (c->serial_blocks)$@    if (0)@|GPT-NeoX: use_parallel_residual false (serial_blocks) ignored
neox_rotary_pct_default|lib/models/gptneox.c|s@rotary_pct", 10000.0, 0.25,@rotary_pct", 10000.0, 1.0,@|GPT-NeoX config.json: no rotary_pct read as 1, not the 0.25 of GPTNeoXConfig
neox_qkv_not_per_head|lib/models/hf.c|s@    t->groups = shape\[0\];@    t->groups = 1;@|GPT-NeoX files: query_key_value read and written as q, k, v one after the other, not head by head
neox_peft_b_not_per_head|lib/models/lora.c|s@        b.groups = lo->b\[1\]->shape\[0\];@        b.groups = 0;@|GPT-NeoX PEFT files: the query_key_value B rows as q, k, v one after the other, not head by head
neox_buffers_refused|lib/models/gptneox.c|s@static const char \*const IGNORED\[\] = {".attention.bias", ".attention.masked_bias", NULL};@static const char *const IGNORED[] = {NULL};@|GPT-NeoX: the causal-mask buffers of transformers 4 files refused as unknown tensors
freeze_file_names_ignored|lib/layers/layer.c|s@            !(files \&\& files\[i\] \&\& fnmatch(pattern, files\[i\], 0) == 0))@            1)@|nnt_layer_freeze: the names of the file tensors holding the parameters of a model not matched
mfu_lookups_counted|lib/train/trainer.c|s@        if (among(p.value, lookups, nlookups))@        if (0)@|MFU: the tables only lookups read (positions, an untied token table) counted as products
mfu_tied_table_dropped|lib/layers/leaf.c|s@        const nnt_tensor \*found\[2\] = {e->wpe, head_tied_to(tree, l) ? NULL : e->wte};@        const nnt_tensor *found[2] = {e->wpe, e->wte};@|MFU: a token table tied to the head not counted
reserved_last_word_unchecked|lib/error.c|s@    for (size_t i = 0; i < n; i++)@    for (size_t i = 0; i + 1 < n; i++)@|frozen structures: the last reserved word (a newer field) not checked
starcoder2_biases_not_together|lib/models/starcoder2.c|s@    c->out_bias = c->mlp_bias = c->qkv_bias;@    c->out_bias = c->mlp_bias = 1;@|StarCoder2 config.json: use_bias false leaving the o_proj and MLP biases on
starcoder2_untied_by_default|lib/models/starcoder2.c|s@"tie_word_embeddings", 1, \&c->tied@"tie_word_embeddings", 0, \&c->tied@|StarCoder2 config.json: no tie_word_embeddings read as untied, not true as in Starcoder2Config
starcoder2_window_not_written|lib/models/starcoder2.c|s@    if (c->sliding_window)@    if (0)@|StarCoder2 config.json written with sliding_window null whatever the window
starcoder2_window_layers_unchecked|lib/models/starcoder2.c|s@    if (c->sliding_window \&\& (c->window_from@    if (0 \&\& (c->window_from@|StarCoder2: a window on some layers only (which its config.json cannot say) accepted
bigcode_groups_by_query_heads|lib/models/hf.c|s@NNT_TRY(nnt_tensor_shape(t->p\[t->np > 1 ? 1 : 0\].value, shape));@NNT_TRY(nnt_tensor_shape(t->p[0].value, shape));@|fused q, k, v by key/value head: grouped by the query heads (GPT-BigCode multi-query c_attn read wrong)
bigcode_multi_query_ignored|lib/models/gptbigcode.c|s@    c->kv_heads = mq ? 1 : c->heads;@    c->kv_heads = c->heads;@|GPT-BigCode config.json: multi_query read as one key/value head per head
bigcode_gelu_ignored|lib/models/gptbigcode.c|s@gelus\[4\] = {0, 0, 0, NNT_GELU_ERF};@gelus[4] = {0, 0, 0, 0};@|GPT-BigCode config.json: activation_function gelu read as the tanh GELU
bigcode_lora_groups_by_query_heads|lib/models/lora.c|s@        b.groups = lo->b\[1\]->shape\[0\];@        b.groups = lo->b[0]->shape[0];@|PEFT lora_B of a fused q, k, v: rows grouped by the query heads (GPT-BigCode multi-query c_attn)
rows_by_group_equal_parts|lib/models/hf.c|s@        group_at += rows;@        group_at += part_n[0] / groups;@|fused tensors by key/value head: every part taken as wide as the first (GPT-BigCode multi-query c_attn)
falcon_two_norms_ignored|lib/models/falcon.c|s@    c->parallel_norms = parallel \&\& norms == 2 ? 2 : 0;@    c->parallel_norms = 0;@|Falcon config.json: the two norms of the new architecture read as one
falcon_multi_query_ignored|lib/models/falcon.c|s@!mq ? kv : 1;@!mq ? kv : kv;@|Falcon config.json: multi_query (Falcon-7B) read as one key/value head per head
falcon_serial_ignored|lib/models/falcon.c|s@    c->serial_blocks = !parallel;@    c->serial_blocks = 0;@|Falcon config.json: parallel_attn false read as side by side
parallel_norms_unused|lib/models/transformer.c|s@    return c->parallel_norms ? (int)c->parallel_norms@    return 0 ? (int)c->parallel_norms@|blocks: parallel_norms 2 built on the one norm of the family
falcon_new_arch_not_written|lib/models/falcon.c|s@    int new_arch = new_architecture(c);@    int new_arch = 0;@|Falcon config.json written without new_decoder_architecture whatever the heads and norms
mlp_gelu_ignored|lib/models/transformer.c|s@    if (c->mlp_gelu \&\& (kind == NNT_MLP_GELU@    if (0 \&\& (kind == NNT_MLP_GELU@|the MLP GELU of the family whatever mlp_gelu says (GPT-NeoX-20B gelu_fast run as the exact GELU)
block_names_gpt2_for_llama_attention|lib/layers/composite.c|s@ (o->attention && o->attention->llama_names);@ (0);@|LayerNorm blocks with the Llama layout (StableLM) named as GPT-2 blocks (ln_1, attn, ln_2)
unwritten_values_counted|lib/layers/layer.c|s@tile, l->ctx->defer_init > 0, \&v);@tile, 0, \&v);@|a model built unwritten: its parameters counted in the budget at creation in fp32, not at their first write or conversion to bf16
retype_count_not_moved|lib/tensor.c|s@    t->deferred = n->deferred;@    t->deferred = keep.deferred;@|nnt_tensor_retype of a parameter not counted yet: its new tiles left uncounted with it
create_values_counted_late|lib/models/transformer.c|s@    int rc = nnt_layer_count_values(\*out, fn);@    int rc = 0;@|nnt_model_create: its values counted one by one as they are initialised, refused midway, not at once
read_values_counted_late|lib/models/hf.c|s@        rc = nnt_tensor_count_first_write(t->p\[i\].value, ps->fn);@        (void)0;@|nnt_model_read_hf into a model built unwritten: its values counted by the host copy after the file was read, the refusal naming it
init_not_settled|lib/layers/layer.c|s@^    nnt_ram_settle();@    (void)0;@|a frozen bf16 base initialised: the blocks of its fp32 tiles kept for the steps (the peak of the initialisation held to)
ram_kept_over_budget|lib/ctx_ram.c|s@kept_bytes > ram_limit@kept_bytes > SIZE_MAX@|RAM hooks in RAM: freed blocks kept beyond the room left in the budget (under 9/8 of the peak)
default_budget_main_memory|lib/ctx.c|s@        if (room > 0 \&\& room < ctx->ram_budget)@        if (0)@|the default RAM budget the whole main memory, not 15/16 of what was available at start
packs_outside_room|lib/ops/gemm.c|s@ \&\& kept_in_use + bytes <= room;@;@|kept packs made beyond the room the RAM budget leaves beside the tiles
packs_kept_past_room|lib/ctx_tensors.c|s@    if (ctx->pack_keep \&\& !t->deferred)@    if (0)@|kept packs left in place when later tiles take the room they were kept in
packs_given_to_pool|lib/ops/gemm.c|s@kept_free(with\[k\], 0, 0);@kept_free(with[k], 0, 1);@|kept packs given back to the pool of their RAM, not freed, when tiles take their room
sft_pc_prompt_counted|lib/data/sft.c|s@memset(s->counts + same, 1, s->n - same);@memset(s->counts, 1, s->n);@|conversational prompt/completion: the prompt counted with the completion
sft_pc_qwen3_no_think|lib/data/sft.c|s@s->last_query \&\& (last @s->last_query \&\& (0 @|Qwen3 published: a last assistant turn without reasoning rendered without its (empty) think block
sft_qwen3_last_query_first|lib/data/sft.c|s@    for (size_t i = msgs->n; i-- > 0;) {@    for (size_t i = 0; i < msgs->n; i++) {@|Qwen3 published: the first user message taken for the last query
sft_sharegpt_kept|lib/data/sft.c|s@                if (strcmp(m->keys\[k\], OLD\[w\]) != 0)@                if (1)@|ShareGPT records: from and value not renamed role and content
sft_sharegpt_pc_kept|lib/data/sft.c|s@for (int k = 0; rc == 0 \&\& k < 6; k++)@for (int k = 2; rc == 0 \&\& k < 6; k++)@|ShareGPT records: from and value not renamed in the lists of a conversational prompt/completion
sft_all_training_render|lib/data/sft.c|s@    s->published = prompt .*;   /\* TRL without@    s->published = prompt;   /* TRL without@|all_tokens: conversations rendered by the training variant, not the published template
sft_all_not_counted|lib/data/sft.c|s@        if (rc == 0 \&\& s->all_tokens \&\& !prompt)@        if (0)@|all_tokens: only the answers counted
tokenize_loss_ignored|examples/tokenize_jsonl.c|s@    so.all_tokens = o->all_tokens;@    so.all_tokens = 0;@|nnt-tokenize --loss all: the answers only counted
sft_no_thinking_ignored|lib/data/sft.c|s@        if (s->no_thinking)   /\* Qwen3@        if (0)   /* Qwen3@|Qwen3 prompts: no_thinking without its empty think block
sft_no_thinking_any_template|lib/data/sft.c|s@    if (s->no_thinking \&\& s->tmpl != NNT_CHAT_QWEN3) {@    if (0) {@|no_thinking taken with templates that have no switch for it
sft_kwargs_kept|lib/data/sft.c|s@        memcpy(s->date, date, sizeof date);@        (void)date;@|the chat_template_kwargs of a record kept for the records after it
sft_kwargs_thinking_ignored|lib/data/sft.c|s@            s->no_thinking = s->tmpl == NNT_CHAT_QWEN3 \&\& !v->b;@            s->no_thinking = 0;@|enable_thinking false in the chat_template_kwargs of a record ignored
budget_not_shared|lib/ctx.c|s@int64_t room = (avail - avail / 16) / node_ranks;@int64_t room = avail - avail / 16;@|MPI: each rank on a node takes the whole default RAM budget, not its share
sft_2507_newline_counted|lib/data/sft.c|s@s->tmpl == NNT_CHAT_QWEN3_2507 ? s->text.n : newline;@newline;@|Qwen3-Instruct-2507: the newline after the assistant role counted (as Qwen2.5 counts it)
sft_r1_first_system|lib/data/sft.c|s@        if (strcmp(role->s, "system") == 0)@        if (strcmp(role->s, "system") == 0 \&\& !system)@|DeepSeek-R1: the first system message put after bos, not the last
sft_r1_prompt_reasoning|lib/data/sft.c|s@const char \*answer = s->published ? after_last@const char *answer = 0 ? after_last@|DeepSeek-R1 prompts: earlier assistant turns with their reasoning (the training form)
sft_r1_assistant_tag|lib/data/sft.c|s@a->at\[2 \* a->n\] = tag;@a->at[2 * a->n] = tag + strlen(R1_ASSISTANT);@|DeepSeek-R1: the assistant tag not counted with the answer
sinks_lse_kept|cpu/attention.c|s@            lse\[r\] = Lp;@            lse[r] = L;@|attention sinks: the log-sum-exp left without the sink (the backward probabilities off)
sinks_grad_sign|cpu/attention.c|s@        dsinks\[h\] -= (float)acc;@        dsinks[h] += (float)acc;@|attention sinks: their gradient with its sign flipped
sinks_next_head|cpu/attention.c|s@        float sink = sinks\[s % nh\];@        float sink = sinks[(s + 1) % nh];@|attention sinks: each head given the next head sink
sinks_not_passed|lib/layers/attention.c|s@    o.sinks = a->sinks;@    o.sinks = NULL;@|attention layer: the sinks parameter not given to the op
clamp_gate_unclamped|cpu/swiglu.c|s@    \*gc = _mm256_min_ps(limit, g);@    *gc = g;@|clamped SwiGLU (AVX2): the gate not clamped to the limit
clamp_up_no_plus_one|cpu/swiglu.c|s@    \*u1 = _mm256_add_ps(uc, one);@    *u1 = uc;@|clamped SwiGLU (AVX2): up without its + 1
gptoss_gate_up_swapped|lib/models/moe.c|s@        m->offset = e \* 2 \* I \* (bias ? 1 : C) + p;@        m->offset = e * 2 * I * (bias ? 1 : C) + 1 - p;@|gpt-oss stacked experts: gate_proj read from the up columns and up_proj from the gate ones
gptoss_alpha_default|lib/models/moe.c|s@"swiglu_alpha", 0, 1.702,@"swiglu_alpha", 0, 1.0,@|gpt-oss config.json: an absent swiglu_alpha read as 1, not 1.702
mxfp4_nibbles_swapped|lib/io/mxfp4.c|s@o\[2 \* j\] = ldexpf(FP4_VALUES\[in\[j\] \& 15\], e);@o[2 * j] = ldexpf(FP4_VALUES[in[j] >> 4], e);@|MXFP4 decoding: the high nibble taken for the even element
sft_gptoss_every_turn_closing|lib/data/sft.c|s@    int closing = last \&\& !s->prompt;@    int closing = !s->prompt;@|gpt-oss: every assistant turn rendered as the last (its thinking on the analysis channel, <return> for <end>)
sft_gptoss_empty_developer|lib/data/sft.c|s@int instructions = \*skip \&\& content->len > 0;@int instructions = *skip;@|gpt-oss: a developer block for a first system message whose content is empty
sft_gptoss_developer_not_first|lib/data/sft.c|s@(role->s, "developer") == 0;@(role->s, "developer") == 9;@|gpt-oss: a first developer message not taken as the instructions of the developer block
sft_gptoss_last_alias_wins|lib/data/sft.c|s@        if (!found \&\& v \&\& v->type == JV_STR)@        if (v \&\& v->type == JV_STR)@|gpt-oss: reasoning_content or reasoning taken over a thinking of the message (not as transformers aliases them)
sft_gptoss_channel_tags_taken|lib/data/sft.c|s@        NNT_TRY(gptoss_no_channel(\*content, i, "content"));@        (void)0;@|gpt-oss: an assistant content holding a channel tag rendered, not refused as the template refuses it
sft_gptoss_date_string_taken|lib/data/sft.c|s@            if (s->tmpl != NNT_CHAT_GPT_OSS)   /\* (gpt-oss@            if (1)   /* (gpt-oss@|gpt-oss: the date_string of chat_template_kwargs taken for its date (its template reads strftime_now alone)
sft_gptoss_effort_ignored|lib/data/sft.c|s@    NNT_TRY(s->effort ? put(s, s->effort->s, s->effort->len) : puts0(s, "medium"));@    NNT_TRY(puts0(s, "medium"));@|gpt-oss: the reasoning_effort of chat_template_kwargs ignored
sft_gptoss_kwargs_kept|lib/data/sft.c|s@    s->effort = s->identity = s->tools = NULL;@    s->tools = NULL;@|gpt-oss: the reasoning_effort and model_identity of a record kept for the records after it
sft_gptoss_default_date|lib/data/sft.c|s@    else if (s->tmpl == NNT_CHAT_GPT_OSS \&\& localtime_r(\&now, \&tm))@    else if (0)@|gpt-oss: by default dated 26 Jul 2024, not today (strftime_now)
sft_gptoss_generation_prompt|lib/data/sft.c|s@    if (t == NNT_CHAT_GPT_OSS)@    if (0)@|gpt-oss prompts: the generation prompt of ChatML, not <start>assistant
train_jsonl_pack_ignored|examples/nnt_train.c|s@    jsonl_opts jo = {o->loop.seq, o->jsonl_pack, o->jsonl_too_long == 0,@    jsonl_opts jo = {o->loop.seq, 0, o->jsonl_too_long == 0,@|nnt-train: --pack of .jsonl data ignored (one example a row)
train_jsonl_loss_ignored|examples/nnt_train.c|s@                     o->jsonl_loss == 1, o->jsonl_loss == 2,$@                     0, o->jsonl_loss == 2,@|nnt-train: --loss all of .jsonl data ignored (the answers only)
train_jsonl_assistant_ignored|examples/nnt_train.c|s@                     o->jsonl_loss == 1, o->jsonl_loss == 2,$@                     o->jsonl_loss == 1, 0,@|nnt-train: --loss assistant of .jsonl data ignored (the tool responses of completions counted)
generate_chat_date_ignored|examples/nnt_generate.c|s@    so.date = o->chat_date;@    so.date = NULL;@|nnt-generate: --chat-date not passed on (the template dated today)
min_rank_ram_whole_node|lib/mpi/mpi.c|s@    if (!(o->mem_cpu_mib > 0) \&\& \*node_ranks > 1)@    if (0)@|MPI: the smallest rank memory counted as its whole node, not its share of it
sft_qwen3_thinking_first|lib/data/sft.c|s@                 : qwen3 ? reasoning_of(m, QWEN3_REASONING, \&bad) : NULL;@                 : qwen3 ? reasoning_of(m, GPTOSS_THINKING, \&bad) : NULL;@|Qwen3: a thinking taken over the reasoning_content of the message (not the order transformers aliases them in)
tools_null_kept|lib/data/sft.c|s@return v \&\& v->type != JV_NULL ? v : NULL;@return v;@|tools: a null value of a message (tool_calls null) taken as given, not dropped as apply_chat_template drops it
tools_qwen25_call_newline|lib/data/sft.c|s@if (qwen25 @if (0 \&\& qwen25 @|tools, Qwen2.5: no newline before a first tool call after no content
tools_qwen3_call_newline|lib/data/sft.c|s@\(if (qwen25 ..\) content@\1 (0 \&\& content)@|tools, Qwen3: no newline between the content and the first tool call
tools_qwen3_string_quoted|lib/data/sft.c|s@if (c.arguments->type == JV_STR \&\& !qwen25)@if (c.arguments->type == JV_STR \&\& 0)@|tools, Qwen3: arguments given as a string quoted as JSON, not printed as they are
tools_qwen_turn_not_shared|lib/data/sft.c|s@if (!prev .. strcmp(prev->s, "tool") != 0)@if (1)@|tools, Qwen: each tool response opens a user turn of its own (consecutive ones share one)
tools_qwen_default_system_lost|lib/data/sft.c|/^static int chatml_start/,/^}/s@    else if (s->tmpl == NNT_CHAT_QWEN2_5)@    else if (0)@|tools, Qwen2.5: its tools block without the default system message
tools_llama_header|lib/data/sft.c|s@>ipython<@>tool<@|tools, Llama 3.1: a tool response under a tool header, not ipython
tools_llama_empty_list|lib/data/sft.c|s@^    if (s->tools)$@    if (s->tools \&\& s->tools->n > 0)@|tools, Llama 3.1: an empty list of tools renders nothing (the templates render their boilerplate)
tools_llama_kwarg_inverted|lib/data/sft.c|s@s->tools_in_system = !v->b;@s->tools_in_system = v->b;@|tools, Llama 3.1: tools_in_user_message read the wrong way round
sft_assistant_only_ignored|lib/data/sft.c|s@    s->assistant_only = o.assistant_only;@    s->assistant_only = 0;@|prompt/completion: assistant_only ignored (the completion tool responses counted, the published template)
tojson_indent_separator|lib/data/tojson.c|s@indent < 0 ? ", " : ","@", "@|tojson: the lines of indent=4 end with a comma and a space
tojson_exponent_from_17|lib/data/tojson.c|s@exp10 >= 16)@exp10 >= 17)@|tojson: 1e16 written as 10000000000000000.0, not 1e+16 as Python
tojson_no_neighbours|lib/data/tojson.c|s@if (above .. strtod(down, NULL) == x) {@if (0) {@|tojson: a power of two given 17 digits where Python finds 16 next to the nearest
tojson_first_value|lib/data/tojson.c|s@            last = e;@            (void)e;@|tojson: a repeated key keeps its first value (Python keeps the last)
tojson_hex_upper|lib/data/tojson.c|s@\\\\u%04x@\\\\u%04X@|tojson: control characters escaped with upper-case hex digits
harmony_object_spaces|lib/data/harmony.c|s@NNT_TRY(puts0(b, ": \\n                "));@NNT_TRY(puts0(b, ": "));@|gpt-oss tools: an object property type right after its name (the template leaves a newline and 16 spaces)
harmony_any_threshold|lib/data/harmony.c|s@characters(\&inner) > 50@characters(\&inner) > 99@|gpt-oss tools: an array of a long element type written out, not any[]
harmony_array_not_nullable|lib/data/harmony.c|/^static int ts_array/,/^}/s@    return truthy(get(spec, "nullable")) ? @    return 0 \&\& truthy(get(spec, "nullable")) ? @|gpt-oss tools: a nullable array without its null
harmony_required_ignored|lib/data/harmony.c|s@    if (!listed(required, name))@    if (1)@|gpt-oss tools: every parameter optional (the required list ignored)
harmony_enum_default_json|lib/data/harmony.c|s@        NNT_TRY(put(b, dflt->s, dflt->len));@        NNT_TRY(hft_jv_tojson(b, dflt, -1));@|gpt-oss tools: the default of an enum quoted as JSON (the template writes it as it is)
harmony_analysis_kept|lib/data/sft.c|s@if (analysis \&\& !final_after(msgs, i)) {@if (analysis) {@|gpt-oss tools: the analysis of a call kept when a final answer follows (the template drops it)
harmony_call_kept|lib/data/sft.c|s@    s->call = NULL;   /\*@    (void)0;   /*@|gpt-oss tools: a tool response after an answer takes the call before it (the template refuses it)
nf4_tie_upper|cpu/nf4.c|s@        q += x > mid\[i\];@        q += x >= mid[i];@|NF4: a value on a midpoint quantized to the upper code (bitsandbytes takes the lower)
nf4_divide|cpu/nf4.c|s@float s0 = x\[i\] \* inv, s1 = x\[i + 1\] \* inv;@float s0 = x[i] / absmax, s1 = x[i + 1] / absmax;@|NF4: values divided by the absmax (bitsandbytes multiplies by its reciprocal, clamped)
nf4_dequant_high_half_lost|cpu/nf4.c|s@        o\[2 \* i\] = v\[c\[i\] >> 4\];@        o[2 * i] = v[c[i] \& 15];@|NF4 dequantized to floats (portable kernel): the first value of a byte read from its low half
nf4_avx512_quantize_tie_upper|cpu/nf4.c|s@_mm512_cmp_ps_mask(sc, mv\[i\], _CMP_GT_OQ)@_mm512_cmp_ps_mask(sc, mv[i], _CMP_GE_OQ)@|NF4 quantized (AVX-512): a value on a midpoint given the upper code
nf4_avx512_absmax_nan|cpu/nf4.c|s@        m = _mm512_max_ps(_mm512_abs_ps(v\[h\]), m);@        m = _mm512_max_ps(m, _mm512_abs_ps(v[h]));@|NF4 quantized (AVX-512): a NaN taken as the block absmax (the scalar compare passes over it)
nf4_avx512_halves_swapped|cpu/nf4.c|s@    \*first = _mm512_permutex2var_epi32(hi, pick0, lo);@    *first = _mm512_permutex2var_epi32(lo, pick0, hi);@|NF4 dequantized and multiplied (AVX-512): the two values of a byte in the wrong order
nf4_avx2_upper_table_lost|cpu/nf4.c|s@_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(7))@_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(15))@|NF4 dequantized (AVX2): codes 8 to 15 read from the table of codes 0 to 7
nf4_gemm_bf16_always|lib/ops/gemm.c|s@nnt_dtype dt = c->ctx->precision == NNT_PRECISION_BF16 ? NNT_BF16 : NNT_FP32;@nnt_dtype dt = NNT_BF16;@|NF4 products: B dequantized to bf16 for float products too
nf4_head_quantized|lib/models/transformer.c|s@        head->params\[i\].output_head = 1;@        head->params[i].output_head = 0;@|NF4: the untied lm_head quantized (bitsandbytes leaves it)
nf4_freeze_mode_ignored|lib/layers/layer.c|s@p->nf4 = (mode == NNT_FREEZE_NF4 \&\& !p->output_head) .. p->value->dtype == NNT_NF4;@p->nf4 = p->value->dtype == NNT_NF4;@|NNT_FREEZE_NF4 frozen as NNT_FREEZE
nf4_quantize_as_dequantize|lib/codelets/convert.c|s@return nnt_submit(ctx, to == NNT_NF4 ? \&nf4_quantize_cl : \&nf4_cl, after@return nnt_submit(ctx, \&nf4_cl, after@|NF4: a conversion to NF4 submitted as a dequantization
rep_penalty_sign|lib/models/sample.c|s@sm->penalized\[t\] = l\[t\] < 0.0f ? l\[t\] \* p : l\[t\] / p;@sm->penalized[t] = l[t] < 0.0f ? l[t] / p : l[t] * p;@|repetition penalty: negative logits divided, positive multiplied
rep_penalty_stale_stamps|lib/models/sample.c|s@const int64_t stamp = ++sm->picks;@const int64_t stamp = (sm->picks = 1);@|repetition penalty: the tokens marked by an earlier pick skipped (not penalized again)
rep_penalty_prompt_only|lib/models/generate.c|s@const nnt_sample_seq seq = {g->p.ids\[src\], g->p.len\[src\], o, i};@const nnt_sample_seq seq = {g->p.ids[src], g->p.len[src], o, 0};@|repetition penalty: the generated tokens not penalized
rep_penalty_first_prompt|lib/models/generate.c|s@        const int64_t src = prompt_of_seq(g, r);@        const int64_t src = 0;@|repetition penalty: every sequence of a batch penalized by the first prompt
min_p_before_temperature|lib/models/sample.c|s@        if (exp((c\[j\].logit - max) / sm->temperature) >= sm->min_p)@        if (exp(c[j].logit - max) >= sm->min_p)@|min_p on the probabilities before the temperature
nf4_view_rows_unchecked|lib/tensor.c|s@    return \*run % NNT_NF4_BLOCK == 0 \&\& shape\[j\] \* inner % NNT_NF4_BLOCK == 0 ? j : -1;@    return *run % NNT_NF4_BLOCK == 0 ? j : -1;@|NF4 tiling: a last tile that cuts a block accepted
nf4_host_absmax_at_start|lib/tensor.c|s@    copy_part(nd, hs, ts, org, host, tile, to_tiles, NNT_NF4_BLOCK, sizeof(float), numel / 2,@    copy_part(nd, hs, ts, org, host, tile, to_tiles, NNT_NF4_BLOCK, sizeof(float), numel / 4,@|NF4 host copies: the absmax placed inside the codes
nf4_merge_left_fp32|lib/layers/lora.c|s@    return nnt_tensor_retype(w, kept);@    return NNT_OK;@|LoRA merge: a base kept in bf16 or NF4 left in fp32 after the merge
generate_quantize_as_freeze|examples/nnt_generate.c|s@        rc = nnt_layer_freeze(\*model, "\*", NNT_FREEZE_NF4, NULL);@        rc = nnt_layer_freeze(*model, "*", NNT_FREEZE, NULL);@|nnt-generate --quantize nf4: the matrices frozen but kept in fp32
bnb_nested_offset_lost|lib/models/bnb4.c|s@        dst\[i\] = v + q->offset;@        dst[i] = v;@|bitsandbytes checkpoints: double quantization without its offset
bnb_nested_first_block|lib/models/bnb4.c|s@float v = q->nested_code\[a8\[i\]\] \* scale\[(b0 + i) / q->nested_blocksize - n0\];@float v = q->nested_code[a8[i]] * scale[0];@|bitsandbytes checkpoints: every block scaled by the first nested absmax
run_freeze_mode_lora_ignored|lib/train/run.c|s@        lora.freeze_base = r->freeze_mode;@        (void)0;@|nnt_run_config.freeze_mode not given to the LoRA adapters (their base frozen as NNT_FREEZE)
train_quantize_ignored|examples/nnt_train.c|s@    r->freeze_mode = o->quantize ? NNT_FREEZE_NF4 : 0;@    r->freeze_mode = 0;@|nnt-train --quantize nf4 ignored
nf4_rows_order|cpu/nf4.c|s@                hi\[r\] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 16), v1, hi\[r\]);@                lo[r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 16), v1, lo[r]);@|NF4 row products (AVX-512): values 16 to 31 of a block summed with 0 to 15 (not the one-row kernels order)
nf4_rows_bf16_unrounded|cpu/nf4.c|s@    if (!bf16)@    if (1)@|NF4 row products (AVX-512): the weights not rounded to bf16 under bf16 products
nf4_rows_group_absmax|cpu/nf4.c|s@absmax + r0 \* k / NNT_NF4_BLOCK, buf,@absmax, buf,@|NF4 row products (groups of rows): every group scaled by the first group absmax
nf4_rows_first_row_only|cpu/nf4.c|s@rows_avx512(m - r < 4 ? (int)(m - r) : 4,@rows_avx512(1,@|NF4 row products (AVX-512): only the first of up to 4 rows of x multiplied
nf4_dequant16_quarters|cpu/nf4.c|s@const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);@const __m512i first = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0);@|NF4 dequantized to bf16 (AVX512BW): the quarters of each block out of order
nf4_dot16_pair_swapped|cpu/nf4.c|s@    \*v0 = _mm512_permutexvar_epi16(_mm512_unpacklo_epi16(hi, w), tab);@    *v0 = _mm512_permutexvar_epi16(_mm512_unpacklo_epi16(w, hi), tab);@|NF4 bf16 value pairs (AVX512BW, row products and dequantization): the two values of a byte swapped in the first half of each 16
nf4_dot16_x_halves|cpu/nf4.c|s@x16\[t + (v % 16 >= 8) \* 32 + v / 16 \* 8 + v % 8\]@x16[t + (v % 16 >= 8) * 32 + v / 16 * 8 + v % 16 / 2]@|NF4 row products (AVX512-BF16): x laid out in the wrong order for the weight pairs
nf4_rows_never|lib/ops/gemm.c|s@#define NF4_ROWS_MAX 16@#define NF4_ROWS_MAX 0@|NF4 products: one-row products dequantize the weight (the row codelet never used)
nf4_rows_untransposed|lib/ops/gemm.c|s@    return trans_a == NNT_NOTRANS \&\& trans_b == NNT_TRANS \&\& d->nb == 0@    return trans_a == NNT_NOTRANS \&\& d->nb == 0@|NF4 products: dy W (W not transposed) given to the row codelet, which reads W transposed
lora_stack_interleave|lib/models/lora.c|s@int64_t p = lo->nparts == 1 ? 0 : t->interleaved ? o % 2 : o / half;@int64_t p = lo->nparts == 1 ? 0 : !t->interleaved ? o % 2 : o / half;@|LoRA on experts: gate_up_proj rows read as interleaved for transformers 5 and as gate then up for gpt-oss
lora_stack_not_nested|lib/models/lora.c|s@int nested = gate_up \&\& expert_lora(m->moe, 2, 0) != NULL;@int nested = 0;@|LoRA on experts: gate_up_proj not under base_layer when down_proj is adapted too (PEFT nests it)
lora_rank_pattern_ignored|lib/models/lora.c|s@            return p->value\[i\];@            return dflt;@|LoRA: rank_pattern and alpha_pattern ignored (PEFT all-linear gate_up_proj of rank 2r)
generate_n_prompt_caches_row0|lib/layers/attention.c|s@        for (int64_t r = 0; r < nseq \&\& rc == NNT_OK; r++)@        for (int64_t r = 0; r < 1 \&\& rc == NNT_OK; r++)@|generation side by side: the prompt keys and values copied to the first sequence only
generate_n_spare_kept|lib/layers/attention.c|s@        if (rc == NNT_OK \&\& a->spare\[i\] \&\& (rc = batch_like@        if (0 \&\& a->spare[i] \&\& (rc = batch_like@|generation side by side: a window spare caches left with one sequence
generate_n_one_seed|lib/models/generate.c|s@        nnt_sampler_seed(g->rng\[r\], g->p.seeds ? g->p.seeds\[r\] : seed + r);@        nnt_sampler_seed(g->rng[r], g->p.seeds ? g->p.seeds[r] : seed);@|generation side by side: every sequence seeded alike
generate_n_logits_row0|lib/models/generate.c|s@        const float \*lr = g->logits + (g->rows == g->nseq ? r : prompt_of_seq(g, r)) \* V;@        const float *lr = g->logits;@|generation side by side: every sequence picks from the first sequence logits
generate_n_token_index|lib/models/generate.c|s@            s->on_token(s->on_token_arg, r \* ngen + i, o\[i\]);@            s->on_token(s->on_token_arg, i, o[i]);@|generation side by side: on_token given the step, not the index in out
generate_n_ended_go_on|lib/models/generate.c|s@        if (i > 0 \&\& is_eos(s, o\[i - 1\]))@        if (0)@|generation side by side: a sequence that ended is sampled again
sampler_first_k_unsorted|lib/models/sample.c|s@    qsort(c, (size_t)k, sizeof \*c, cand_cmp);@    (void)c;@|sampling top_k: the k best left in heap order
sampler_first_k_heap_inverted|lib/models/sample.c|s@        if (cand_after(\&c\[0\], \&c\[v\])) {@        if (cand_after(\&c[v], \&c[0])) {@|sampling top_k: the heap keeps the worse candidate
generate_samples_first_only|examples/nnt_generate.c|s@    for (size_t r = 0; r < nseq \&\& status == 0; r++) {@    for (size_t r = 0; r < 1 \&\& status == 0; r++) {@|nnt-generate --num-samples: only the first sample printed
dpo_rejected_sign|lib/train/dpo.c|s@            double w = -dpi\[side\] / (double)d->per_batch,@            double w = -dpi[0] / (double)d->per_batch,@|DPO: the rejected sequence pulled up like the chosen one
dpo_softplus_sign|lib/train/dpo.c|s@^    return nnt_softplus(-z);@    return nnt_softplus(z);@|DPO: the loss of z instead of -z
dpo_pairs_divisor|lib/train/dpo.c|s@            double w = -dpi\[side\] / (double)d->per_batch,@            double w = -dpi[side],@|DPO: the gradient summed over a micro-batch pairs, not their mean
dpo_target_mask_offset|lib/train/dpo.c|s@        counts\[t\] = t + 1 < T \&\& mask\[t + 1\];@        counts[t] = t + 1 < T \&\& mask[t];@|DPO: the targets counted by the mask of their input, one off
dpo_tie_correct|lib/train/dpo.c|s@        s->correct += chosen > rejected;@        s->correct += chosen >= rejected;@|DPO: a tie counted as a correct pair
dpo_val_ref_offset|lib/train/dpo.c|s@    const double \*val_ref = d->ref + 2 \* d->npairs;@    const double *val_ref = d->ref;@|DPO: held-out pairs against the training pairs references
dpo_resume_recompute|lib/train/dpo.c|s@    d->ref_ready = 1;   /\* the recorded reference, not recomputed \*/@    d->ref_ready = 0;@|DPO: a resumed run recomputes the reference from its trained weights
xent_weight_target_term|cpu/xent.c|s@            dx\[t\] -= sr;@            dx[t] -= scale;@|cross-entropy backward: the target term left unweighted
pref_space_backoff|lib/data/sft.c|s@        if (c->type == JV_STR \&\& i > 0 \&\& c->s\[i - 1\] == . .)@        if (0)@|preference records: the space before the first differing word kept in the prompt
dpo_unshared_unsaid|lib/train/dpo.c|s@    if (tr->rank == 0 \&\& d->unshared > pairs / 2)@    if (tr->rank == 0 \&\& d->unshared > pairs)@|DPO: rows of one example each (not pairs) trained without a warning
dpo_ipo_unaveraged|lib/train/dpo.c|s@        \*dc = 2.0 \* e / ac, \*dr = -2.0 \* e / ar;@        *dc = 2.0 * e, *dr = -2.0 * e;@|DPO, IPO: the gradient of the log ratios not divided by the sequences lengths
dpo_hinge_sign|lib/train/dpo.c|s@    double g = 1.0 - z > 0 ? -beta : 0.0;@    double g = 1.0 - z > 0 ? beta : 0.0;@|DPO, hinge: the gradient sign flipped
orpo_nll_answers_only|lib/train/dpo.c|s@    int whole = b % 2 == 0 \&\& d->ref_free \&\& tr->o.dpo_loss == NNT_DPO_ORPO;@    int whole = 0;@|ORPO: the nll term over the chosen answers only, not their prompts
orpo_nll_rejected_too|lib/train/dpo.c|s@            double w = -dpi\[side\] / (double)d->per_batch, nll = side ? 0.0 : per_target;@            double w = -dpi[side] / (double)d->per_batch, nll = per_target;@|CPO, SimPO, ORPO: the nll term gradient on the rejected rows too
simpo_gamma_lost|lib/train/dpo.c|s@            loss = sigmoid_term(beta \* (ac - ar) - o->simpo_gamma, beta, \&g);@            loss = sigmoid_term(beta * (ac - ar), beta, \&g);@|SimPO: the target margin gamma not subtracted
free_means_gradient|lib/train/dpo.c|s@        \*dc /= (double)nc, \*dr /= (double)nr;@        *dc /= (double)nc, *dr /= (double)nc;@|SimPO, ORPO: the rejected mean gradient divided by the chosen length
free_rewards_sums|lib/train/dpo.c|s@            chosen /= (double)d->counted\[2 \* j\], rejected /= (double)d->counted\[2 \* j + 1\];@            chosen /= 1.0, rejected /= 1.0;@|SimPO, ORPO: the rewards of the sums, not the means
orpo_odds_derivative|lib/train/dpo.c|s@    \*dc = -s \* (1.0 - gc), \*dr = -s \* (-1.0 + gr);@    *dc = -s * (1.0 + gc), *dr = -s * (-1.0 + gr);@|ORPO: the log odds derivative by the chosen mean with a sign flipped
cpo_alpha_ignored|lib/train/dpo.c|s@                    : o->dpo_loss == NNT_DPO_ORPO ? 1.0 : o->cpo_alpha;@                    : 1.0;@|CPO, SimPO: the nll term weight 1 whatever cpo_alpha
free_nll_count_off|lib/train/dpo.c|s@    \*per_target = n ? d->nll_weight / (double)n : 0.0;@    *per_target = n ? d->nll_weight / (double)(n + 1) : 0.0;@|CPO, SimPO, ORPO: the nll term gradient over one target more
free_nll_loss_once|lib/train/dpo.c|s@        s->loss += nll_term(d, \&per_target) \* (double)d->per_batch;@        s->loss += nll_term(d, \&per_target);@|CPO, SimPO, ORPO: the reported loss with the nll term divided by the pairs
free_empty_row_taken|lib/train/dpo.c|s@        if (d->averaged \&\& !d->counted\[b\])@        if (0)@|SimPO, ORPO: a row of no counted target averaged (0 / 0)
free_alone_refused|lib/train/trainer.c|s@    if (o->dpo_beta > 0 \&\& !data \&\& !nnt_dpo_loss_free(o->dpo_loss))@    if (o->dpo_beta > 0 \&\& !data)@|CPO, SimPO, ORPO: validation alone refused for want of a reference they do not need
nucleus_first_short|lib/models/sample.c|s@^                return j + 1;@                return j;@|top_p: the nucleus found among the first candidates one token short
nucleus_total_untempered|lib/models/sample.c|s@        total += exp(((double)l\[v\] - max) / sm->temperature);@        total += exp((double)l[v] - max);@|top_p: the weights of all tokens summed without the temperature
train_dir_names_unread|examples/nnt_train.c|s@    \*names = out, \*n = L;@    *names = NULL, *n = 0;@|nnt-train: records naming the labels of the classifier directory they train refused
rpo_alpha_ignored|lib/train/dpo.c|s@    d->nll_weight = !d->ref_free ? o->rpo_alpha$@    d->nll_weight = !d->ref_free ? 0.0@|RPO: DPO without the chosen nll term whatever rpo_alpha
cli_cpo_alpha_default|examples/train_opts.c|s@    OPT_REAL("cpo-alpha", loop.cpo_alpha, 0, 1e6, "1", RES, "X",@    OPT_REAL("cpo-alpha", loop.cpo_alpha, 0, 1e6, "0", RES, "X",@|nnt-train: --cpo-alpha 0 by default, not TRL 1
pref_counts_min|lib/data/sft.c|s@    size_t k = k0 < k1 ? k0 : k1;@    size_t k = k0;@|preference records: the completions counted from the chosen side start only
cls_pool_all_pad|lib/models/transformer.c|s@            for (at = T - 1; at > 0@            for (at = T - 1; at > 1@|classifier: a row of padding pooled at position 1, not 0
pairwise_sign|lib/layers/leaf.c|s@        sum += nnt_softplus(-(rc_ - rr))@        sum += nnt_softplus(rc_ - rr)@|reward model: the loss of the rejected sequence winning
pairwise_center_grad|lib/layers/leaf.c|s@        double centered = 2.0 \* c->center \* (rc_ + rr);@        double centered = c->center * (rc_ + rr);@|reward model: the center term gradient halved
pairwise_divisor|lib/layers/leaf.c|s@(double)(pairs ? B / 2 : B);@(double)B;@|reward model: the loss a mean over rows, not pairs
cls_labels_count|lib/models/config_json.c|s@        c->num_labels = (int64_t)labels->n;@        c->num_labels = (int64_t)labels->n + 1;@|config.json: one label more than id2label names
reward_margin_sign|lib/train/dpo.c|s@        s->margin += (double)r\[0\] - r\[1\];@        s->margin += (double)r[1] - r[0];@|reward trainer: the margin rejected minus chosen
reward_pool_pad|lib/train/dpo.c|s@    d->pad = reward ? mc.pad_token_id : -1;@    d->pad = -1;@|reward trainer: rows pooled at their last position, padding or not
cls_pooled_logits_row|lib/models/transformer.c|s@all + (b \* per_row + at) \* L@all + (b * per_row + at - 1) * L@|classifier: the pooled logits of the token before
cls_label_digits|lib/data/sft.c|s@        if (digit > 9)@        if (digit > 0x35)@|classification records: a label with letters (1e2) read as digits
cls_row_label_at|examples/tokenize_jsonl.c|s@    (\*row)\[nids\] = (int32_t)label;@    (*row)[nids - 1] = (int32_t)label;@|nnt-tokenize --num-labels: the label over the text last token
cls_row_counts_at|examples/tokenize_jsonl.c|s@    (\*counts)\[nids\] = 1;@    (*counts)[nids - 1] = 1;@|nnt-tokenize --num-labels: the text last token counts, not its label
cls_row_cut|examples/tokenize_jsonl.c|s@        nids = (size_t)o->seq - 1;@        nids = (size_t)o->seq;@|nnt-tokenize --num-labels: a long text cut to T tokens, its label past the row
cls_trainer_label_bound|lib/train/trainer.c|s@targets\[i\] >= tr->labels))@targets[i] > tr->labels))@|classifier trainer: a target equal to num_labels taken as a label
cls_trainer_unmasked|lib/train/trainer.c|s@nnt_data_info_get(sources\[k\], \&di) == 0 \&\& !di.masked)@nnt_data_info_get(sources[k], \&di) == 0 \&\& 0)@|classifier trainer: data without a loss mask taken
cls_hits_argmin|lib/models/transformer.c|s@            best = row\[k\] > row\[best\] ? k : best;@            best = row[k] < row[best] ? k : best;@|classifier validation: the accuracy of the smallest logit
cls_accuracy_divisor|lib/train/trainer.c|s@    r->accuracy = nnt_trainer_has_accuracy(tr) \&\& c->labels ? (double)c->hits / (double)c->labels@    r->accuracy = nnt_trainer_has_accuracy(tr) \&\& c->labels ? (double)c->hits / (double)(c->labels + 1)@|classifier validation: the accuracy over one example more
trainer_accum_unchecked|lib/train/trainer.c|s@    if (o.accum >= 1 \&\& o.accum != opt->opts.accum_steps)@    if (0)@|trainer: an optimizer summing another number of micro-batches taken
gen_cls_pooled_at|examples/nnt_generate.c|s@        memcpy(out + b \* L, logits + (b \* T + at\[b\]) \* L,@        memcpy(out + b * L, logits + (b * T + (at[b] > 0 ? at[b] - 1 : 0)) * L,@|nnt-generate on a classifier: the logits of the token before the pooled one
gen_classify_pad_over_text|examples/nnt_generate.c|s@        for (int64_t t = n\[b\]; t < T; t++)@        for (int64_t t = n[b] > 1 ? n[b] - 1 : 0; t < T; t++)@|nnt-generate --classify: a short text last token overwritten by the padding
gen_classify_accuracy_all|examples/nnt_generate.c|s@                labelled++, hits += best == c->label;@                labelled++, hits += best >= 0;@|nnt-generate --classify: every labelled record counted a hit
source_names_state_as_dir|lib/models/source.c|s@    NNT_TRY(kind == SOURCE_HF@    NNT_TRY(kind == SOURCE_STATE@|nnt_model_source_label_name: a directory read as a training checkpoint and a checkpoint as a directory
source_names_default_k|lib/models/transformer.c|s@    const char \*name = nnt_label_name_at(names, k, dflt, sizeof dflt);@    const char *name = nnt_label_name_at(names, k ? k - 1 : 0, dflt, sizeof dflt);@|label names: label k given the name of label k - 1
values_mean_not_over_labels|lib/layers/leaf.c|s@            sum += value_loss(c->problem, c->score\[i\], c->values\[i\], \&unused) / (double)L;@            sum += value_loss(c->problem, c->score[i], c->values[i], \&unused);@|label values: the loss summed over the labels, not their mean
values_bce_no_max|lib/layers/leaf.c|s@    return (z > 0 ? z : 0.0) - z \* y + log1p(exp(-fabs(z)));@    return -z * y + log1p(exp(-fabs(z)));@|multi-label: the binary cross-entropy without max(z, 0)
values_mse_half_grad|lib/layers/leaf.c|s@        \*dz = 2.0 \* (z - y);@        *dz = z - y;@|regression: the gradient of (z - y)^2 halved
values_rows_divisor|lib/layers/leaf.c|s@                (float)(dz / (double)L / c->fwd_divisor);@                (float)(dz / c->fwd_divisor);@|label values: the gradient not divided by the labels
problem_type_regression_one|lib/models/config_json.c|s@        c->problem_type = c->num_labels == 1 ? NNT_PROBLEM_DEFAULT : NNT_PROBLEM_REGRESSION;@        c->problem_type = NNT_PROBLEM_DEFAULT;@|config.json: regression read as single-label classification
gen_values_sigmoid_sign|examples/nnt_generate.c|s@        p\[k\] = problem == NNT_PROBLEM_MULTI_LABEL ? 1.0 / (1.0 + exp(-(double)row\[k\]))@        p[k] = problem == NNT_PROBLEM_MULTI_LABEL ? 1.0 / (1.0 + exp((double)row[k]))@|nnt-generate: a multi-label probability as sigmoid of minus the logit
values_rows_unshuffled|lib/train/trainer.c|s@        int64_t at = rows ? (int64_t)nnt_shuffled_row(tr->o.seed, tr->nrows, pos + (uint64_t)b) \* T@        int64_t at = rows ? (int64_t)(pos + (uint64_t)b) * T@|trainer: shuffled rows given the values of the rows in file order
values_window_next_row|lib/train/trainer.c|s@        NNT_TRY(nnt_data_read_row_values(data, at / T, tr->values + b \* k, k));@        NNT_TRY(nnt_data_read_row_values(data, at / T + 1, tr->values + b * k, k));@|trainer: each row given the values of the row after it
values_section_offset|lib/io/tokens.c|s@    r->values_off = k ? sections : 0;@    r->values_off = k ? sections - 4 : 0;@|token files: the row values read 4 bytes early
kto_kl_next_row|lib/train/dpo.c|s@            NNT_TRY(kl_row(tr, b, (b + B - 1) % B));@            NNT_TRY(kl_row(tr, b, (b + 1) % B));@|KTO: a row KL row takes the completion of the row after it, not before
kto_kl_unclamped|lib/train/dpo.c|s@        kl = kl / (double)B > 0.0 ? kl / (double)B : 0.0;@        kl = kl / (double)B;@|KTO: kl not clamped at 0
kto_weights_swapped|lib/train/dpo.c|s@    double beta = o->dpo_beta, w = desirable ? o->desirable_weight : o->undesirable_weight;@    double beta = o->dpo_beta, w = desirable ? o->undesirable_weight : o->desirable_weight;@|KTO: the desirable rows weighed by undesirable_weight and the other way round
kto_kl_added|lib/train/dpo.c|s@    double z = o->dpo_loss == NNT_DPO_KTO ? sign \* beta \* (lr - kl) : sign \* beta \* lr;@    double z = o->dpo_loss == NNT_DPO_KTO ? sign * beta * (lr + kl) : sign * beta * lr;@|KTO: kl added to the log ratio, not subtracted
kto_kl_first_target|lib/train/dpo.c|s@        counts\[t\] = t + 1 >= prompt \&\& t + 1 < n;@        counts[t] = t >= prompt \&\& t + 1 < n;@|KTO: a KL row first completion token not counted
kto_rows_shuffled_apart|lib/train/dpo.c|s@    return tr->dpo->unpaired ? nnt_shuffled_row(tr->o.seed, npairs / B, i / B) \* B + i % B@    return tr->dpo->unpaired ? nnt_shuffled_row(tr->o.seed, npairs, i)@|KTO shuffled: rows shuffled one by one, their runs (and KL rows) broken
kto_val_labels_training|lib/train/dpo.c|s@        const uint8_t \*labels = d->desirable + (held_out ? d->npairs : 0);@        const uint8_t *labels = d->desirable;@|KTO: held-out rows given the training rows labels
kto_margin_one_kind|lib/train/dpo.c|s@    if (count\[0\] \&\& count\[1\])@    if (count[1])@|KTO: the reward margin of micro-batches of desirable rows alone counted
kto_ref_kl_zero|lib/train/dpo.c|s@                out\[2 \* d->pairs\[b\] + 1\] = d->with_kl ? d->kl_logp\[b\] : 0.0;@                out[2 * d->pairs[b] + 1] = 0.0;@|KTO: the KL rows reference log-likelihoods left 0
kto_batch_one|lib/train/dpo.c|s@    if (unpaired \&\& o->dpo_loss == NNT_DPO_KTO \&\& B < 2)@    if (unpaired \&\& o->dpo_loss == NNT_DPO_KTO \&\& B < 1)@|KTO: a batch of 1 taken (kl the row own log ratio)
unpair_chunk_999|examples/tokenize_jsonl.c|s@enum { UNPAIR_CHUNK = 1000 };@enum { UNPAIR_CHUNK = 999 };@|KTO on paired records: the chosen then rejected rows of each 999 records, not 1000 (TRL)
unpair_chosen_undesirable|lib/data/sft.c|s@    ids\[0\] = s->pair_ids, counts\[0\] = s->pair_counts, n\[0\] = s->npair, desirable\[0\] = 1;@    ids[0] = s->pair_ids, counts[0] = s->pair_counts, n[0] = s->npair, desirable[0] = 0;@|KTO on paired records: the chosen completion labelled undesirable
unpair_held_desirable|examples/tokenize_jsonl.c|s@    const float undesirable = 0.0f;@    const float undesirable = 1.0f;@|KTO on paired records: the rejected rows written with the desirable label
prompt_text_no_affix|lib/data/sft.c|s@        NNT_TRY(encode_record(s, p->s, p->len, 1));@        NNT_TRY(encode_record(s, p->s, p->len, 0));@|a prompt-only record of text without the tokenizer special tokens before it (no bos)
prompts_never_stop|examples/nnt_generate.c|s@    \*stopped = m < ngen;@    *stopped = 0;@|nnt-generate --prompts: every continuation reported as cut by the length, never stopped by its eos
classify_exact_any|examples/nnt_generate.c|s@    m->records++, m->values += L, m->right += right, m->exact += right == L;@    m->records++, m->values += L, m->right += right, m->exact += right > 0;@|nnt-generate --classify, multi-label: a record counted exact when any label is right
classify_mse_abs|examples/nnt_generate.c|s@        m->sq += d \* d, m->abs += fabs(d);@        m->sq += fabs(d), m->abs += fabs(d);@|nnt-generate --classify, regression: the absolute error reported as the squared one
val_label_logit_half|lib/train/trainer.c|s@            int said = logits\[j\] > 0.0f, is = tr->values\[j\] > 0.5f;@            int said = logits[j] > 0.5f, is = tr->values[j] > 0.5f;@|multi-label validation: a label predicted when its logit (not its probability) is above 0.5
unpaired_label_inverted|lib/data/sft.c|s@    \*label = lab->b != 0;@    *label = lab->b == 0;@|unpaired records: true read as undesirable
writer_values_row_shift|lib/io/tokens.c|s@    memcpy(w->values + row \* k, values, k \* sizeof \*values);@    memcpy(w->values + (row ? row - 1 : row) * k, values, k * sizeof *values);@|token writer: a row values written over the row before
sft_valued_multi_unchecked|lib/data/sft.c|s@        if (multi \&\& !(values\[i\] >= 0.0f \&\& values\[i\] <= 1.0f))@        if (0 \&\& multi)@|multi-label records: values outside 0..1 taken
train_problem_ignored|examples/nnt_train.c|s@    int problem = labels > 0 ? run_problem(t) : NNT_PROBLEM_DEFAULT;@    int problem = NNT_PROBLEM_DEFAULT;@|nnt-train: records of values read as classification records
run_problem_ignored|lib/train/run.c|s@    if (reproblem)@    if (0)@|nnt_trainer_open: problem_type not applied to the model
val_rows_whole|lib/train/trainer.c|s@    return val \&\& nnt_data_info_get(val, \&di) == 0 \&\& di.block > 0;@    return 0;@|held-out rows: a row more needed than B of them
lora_cls_head_adapted|lib/models/lora.c|s@        return !is_head(m);@        return !(m->top \&\& strcmp(m->path, "lm_head") == 0);@|LoRA on a classifier: all-linear adapts the score head
lora_cls_head_frozen|lib/models/lora.c|s@        if (p == keep)@        if (0)@|LoRA on a classifier: the head frozen with the base
lora_cls_head_not_unfrozen|lib/models/lora.c|s@    if (rc == 0 \&\& keep \&\& keep->frozen)@    if (0)@|LoRA on a classifier: a frozen head left frozen, not trained whole
lora_cls_head_unsaved|lib/models/lora.c|s@->head ? head_param(tree) : NULL;@->head ? NULL : NULL;@|LoRA on a classifier: the head not saved with the adapters
lora_cls_task_type|lib/models/lora.c|s@st->head ? "SEQ_CLS" : "CAUSAL_LM"@"CAUSAL_LM"@|LoRA on a classifier: adapter_config.json task_type CAUSAL_LM
lora_cls_modules_to_save_ignored|lib/models/lora.c|s@            \*head = 1;@            *head = 0;@|PEFT adapters: modules_to_save score ignored
gen_num_labels_ignored|examples/nnt_generate.c|s@    cfg->num_labels = o->num_labels;@    cfg->num_labels = 0;@|nnt-generate --num-labels: the language model kept as it is
reward_val_alone_unread|lib/train/trainer.c|s@    nnt_data \*pairs = tr->data ? tr->data : nnt_trainer_val_source(tr);@    nnt_data *pairs = tr->data;@|reward model: validations alone (steps 0) read the held-out pairs as plain rows
names_unwritten|lib/models/transformer.c|s@    return names ? names\[k\] : buf;@    return buf;@|label names: config.json written with the default names LABEL_k
names_backslash_unescaped|lib/models/config_json.c|s@        nnt_cfg_add(t, strchr("\\"\\\\", \*s) ? "\\\\%c" : "%c", \*s);@        nnt_cfg_add(t, strchr("\\"", *s) ? "\\\\%c" : "%c", *s);@|label names: a backslash written unescaped in config.json
names_unread|lib/models/transformer.c|s@    int rc = names ? nnt_model_set_label_names(model, (const char \*const \*)names, cfg.num_labels)@    int rc = 0 ? nnt_model_set_label_names(model, (const char *const *)names, cfg.num_labels)@|label names: config.json and training-state names not read
names_read_hf_skipped|lib/models/hf.c|s@    if (rc == 0 \&\& !keep_score)   /\* a classifier@    if (0)   /* a classifier@|label names: nnt_model_read_hf of a classifier directory leaves the model names
names_state_unsaved|lib/optim/state.c|s@                                   ? nnt_model_label_names_of(opt->layers\[0\]) : NULL;@                                   ? NULL : NULL;@|label names: training-state files without them
names_state_load_skipped|lib/optim/state.c|s@    if (rc == 0 \&\& opt->has_model \&\& opt->nlayers == 1 \&\& sm.values\[META_MODEL\])@    if (0)@|label names: nnt_train_state_load leaves the model names
names_duplicates_taken|lib/models/transformer.c|s@            if (strcmp(names\[j\], names\[k\]) == 0)   /\* (label2id@            if (0)   /* (label2id@|label names: two labels of one name taken
gen_names_unprinted|examples/nnt_generate.c|s@        printf("  %s", name);@        (void)name;@|nnt-generate: the label names not printed
sft_names_unmapped|lib/data/sft.c|s@    if (rc == 0 \&\& value \&\& s->nlabel_names \&\& value->type == JV_STR \&\&@    if (0 \&\& value \&\& s->nlabel_names \&\& value->type == JV_STR \&\&@|classification records: a label given by its name not taken
sft_names_prefix|lib/data/sft.c|s@        if (strlen(s->label_names\[k\]) == v->len \&\& memcmp(s->label_names\[k\], v->s, v->len) == 0)@        if (memcmp(s->label_names[k], v->s, v->len) == 0)@|classification records: a label name matched by its first letters
batch_decode_positions_dropped|lib/layers/attention.c|s@    NNT_TRY(take_positions(l, a, x, at->positions));@    NNT_TRY(take_positions(l, a, x, NULL));@|prompts side by side: the cached attention and rotations at the padded positions (the pads seen)
batch_wpe_positions_dropped|lib/layers/leaf.c|s@        return embedding_forward_pos(l, x, positions, y);@        return embedding_forward_pos(l, x, NULL, y);@|prompts side by side: GPT-2 position embeddings of the padded positions
batch_pad_position_off|lib/models/generate.c|s@    \*pos = (int32_t)(c < pad ? c : c - pad);@    *pos = (int32_t)(c < pad ? c : c - pad + 1);@|prompts side by side: each prompt token one position late
batch_same_length_same_prompt|lib/models/generate.c|s@                            !memcmp(ids\[k\], prompts\[r\], (size_t)len\[k\] \* sizeof \*ids\[k\]))))@                            1)))@|prompts side by side: two prompts of one length taken for one
batch_caches_from_row0|lib/layers/attention.c|s@            rc = gl_copy_rows(a->cache\[i\], 0, src ? src\[r\] : 0, many, r, 1);@            rc = gl_copy_rows(a->cache[i], 0, 0, many, r, 1);@|prompts side by side: every sequence continues the first prompt keys and values
kv_examples_begin_last|lib/ops/attention.c|s@            lo = qp - p < lo ? qp - p : lo;@            lo = qp - p;@|packed or padded queries: the key tiles before the last query example skipped for the whole tile
prompts_sample_seeds|examples/nnt_generate.c|s@        seeds\[row\] = s->seed + row % nseq;@        seeds[row] = s->seed + row;@|nnt-generate --prompts: a record samples seeded by their row in the batch, not as the record alone
val_exact_any|lib/train/trainer.c|s@        c->examples++, c->labels += k, c->hits += multi ? right : 0, c->exact += right == k;@        c->examples++, c->labels += k, c->hits += multi ? right : 0, c->exact += right > 0;@|nnt-train, multi-label validation: an example counted exact when any label is right
val_f1_said_tp|lib/train/trainer.c|s@            c->tp += multi \&\& said \&\& is, c->fp += multi \&\& said \&\& !is;@            c->tp += multi \&\& said, c->fp += multi \&\& said \&\& !is;@|nnt-train, multi-label validation: every positive prediction counted a true positive in the F1
val_mae_squared|lib/train/trainer.c|s@            c->abs_err += multi ? 0.0 : fabs((double)logits\[j\] - tr->values\[j\]);@            c->abs_err += multi ? 0.0 : ((double)logits[j] - tr->values[j]) * ((double)logits[j] - tr->values[j]);@|nnt-train, regression validation: the squared error reported as the absolute one
jsonl_pad_id_ignored|examples/tokenize_jsonl.c|s@    if (o->pad_id >= 0)@    if (0)@|nnt-train --pad-id with .jsonl records: the rows padded with the tokenizer pad, pooled by the given id
gen_top_p_dropped|examples/nnt_generate.c|s@    s.top_p = o->top_p;@    s.top_p = 1.0;@|nnt-generate --top-p not passed to the sampler
train_qk_norm_dropped|examples/nnt_train.c|s@    if (o->qk_norm) c.qk_norm = 1;@    if (0) c.qk_norm = 1;@|nnt-train --qk-norm: the fresh model made without q/k norms
hf_sampling_double_unwritten|lib/models/config_json.c|s@            \*(double \*)((char \*)s + h->offset) = vals\[i\];@            (void)vals[i];@|nnt_model_hf_sampling: the settings held as doubles (temperature, top_p, ...) not written
gen_config_over_given|examples/nnt_generate.c|s@        if (!(found \& hf_taken\[i\].bit) .. was_given(hf_taken\[i\].option))@        if (!(found \& hf_taken[i].bit))@|nnt-generate --generation-config auto: the file settings over those given on the command line
dora_no_cross_term|lib/layers/lora.c|s@    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 2.0 \* s, lo->a, w, 0.0, lo->pt\[i\],@    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 0.0 * s, lo->a, w, 0.0, lo->pt[i],@|DoRA: the norm without its 2 s W A^T term
dora_nf4_sumsq_absmax|cpu/nf4.c|s@            float w = nf4_table\[q\] \* absmax\[k / NNT_NF4_BLOCK\];@            float w = nf4_table[q] * absmax[k / NNT_NF4_BLOCK / 2];@|QDoRA: the NF4 rows squared with the wrong blocks absmax
dora_no_square_term|lib/layers/lora.c|s@    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, s \* s, b, lo->aat, 1.0, lo->q\[i\], 1, 0));@    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, s, b, lo->aat, 1.0, lo->q[i], 1, 0));@|DoRA: the norm with s B A A^T B^T for s^2
dora_magnitude_squared|lib/layers/lora.c|s@        NNT_TRY(nnt_tensor_rsqrt_mul(lo->n2\[i\], lo->n2\[i\], lo->m\[i\]));@        NNT_TRY(nnt_tensor_copy(lo->n2[i], lo->m[i]));@|DoRA: the magnitudes start at the squared norms
dora_bias_scaled|lib/layers/lora.c|s@            NNT_TRY(nnt_tensor_add_broadcast(lo->nbias\[i\], lo->t\[i\]));@            (void)0;@|DoRA: the bias scaled with the rest (t = y, not y - b)
dora_gain_whole|lib/layers/lora.c|s@    return nnt_tensor_mul_broadcast(lo->t\[i\], lo->gain\[i\], -1.0, 0, 1.0, y);@    return nnt_tensor_mul_broadcast(lo->t[i], lo->gain[i], 0.0, 0, 1.0, y);@|DoRA: y += g t for (g - 1) t
dora_dm_no_norm|lib/layers/lora.c|s@        NNT_TRY(nnt_tensor_dot_leading(g, lo->t\[i\], lo->rinv\[i\], nnt_layer_grad_beta(l, dm),@        NNT_TRY(nnt_tensor_dot_leading(g, lo->t[i], NULL, nnt_layer_grad_beta(l, dm),@|DoRA: the magnitudes gradient not divided by the norm
dora_dropped_no_hw|lib/layers/lora.c|s@            NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, lo->h\[i\], lo->wop\[i\], 1.0, dx,@            NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 0.0, lo->h[i], lo->wop[i], 1.0, dx,@|DoRA with dropout: the input gradient without (g - 1) G W
dora_dropped_no_dw|lib/layers/lora.c|s@                NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, lo->h\[i\], lo->x,@                NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 0.0, lo->h[i], lo->x,@|DoRA with dropout: a trainable base weight without its (g - 1) G^T x term
dora_merge_no_gain|lib/layers/lora.c|s@        NNT_TRY(nnt_tensor_mul_broadcast(w, lo->gain\[i\], 0.0, 1, 0.0, w));@        (void)0;@|DoRA merge: the rows not rescaled
dora_weight_norm_stale|lib/layers/lora.c|s@    if (lo->w2\[i\] \&\& lo->w2_of\[i\] == (const void \*)w->tiles \&\& lo->w2_seen\[i\] == seen)@    if (lo->w2[i])@|DoRA: the squared row norms of a base weight kept after it was written (a reloaded or trainable base)
dora_peft_no_magnitude|lib/models/lora.c|s@    return lo->dora ? p->fn(\&mag, p->arg) : NNT_OK;@    return NNT_OK;@|PEFT files: DoRA magnitudes neither written nor read
tokenize_pad_id_ignored|examples/nnt_tokenize.c|s@                    o->unpaired, o->pad_id};@                    o->unpaired, -1};@|nnt-tokenize --pad-id: the rows padded with the tokenizer pad
row_tiles_100M|lib/models/tiling.c|s@    int64_t by_flops = (int64_t)(down / AUTO_MIN_ROW_TASK_FLOP);@    int64_t by_flops = (int64_t)(down / AUTO_MIN_TASK_FLOP);@|automatic tiling: row tiles asked 100 MFLOP a product again (one row tile for small models)
gen_nomem_not_halved|examples/nnt_generate.c|s@        \*too_many = rc == NNT_E_NOMEM \&\& n > 1;@        *too_many = 0;@|nnt-generate --prompts: a batch that does not fit in memory ends the run instead of being halved
gen_samples_nomem_not_halved|examples/nnt_generate.c|s@        if (rc == NNT_E_NOMEM \&\& n > 1) {@        if (0) {@|nnt-generate --num-samples: samples that do not fit in memory side by side end the run instead of going in smaller groups
rep_penalty_argmax_raw|lib/models/sample.c|s@        best = argmax(pl, V), l = pl;@        l = pl;@|repetition penalty: greedy and the candidates measured from the largest raw logit, not the largest penalized one
typical_entropy_sign|lib/models/sample.c|s@    return log(s) - sa / s;   /\* -sum p log p, p = w / s \*/@    return log(s) + sa / s;@|typical_p and eta_cutoff: the entropy with the wrong sign
typical_no_ties|lib/models/sample.c|s@    last = last < k - 1 ? last : k - 1;@    last = last > 0 ? last - 1 : 0;@|typical_p: one candidate fewer than the mass asks
typical_probability_before_temperature|lib/models/sample.c|s@        acc += exp((c\[o\[j\].id\].logit - \*max) / t) / sum;@        acc += exp(c[o[j].id].logit - *max) / sum;@|typical_p: the running probability without the temperature
epsilon_max_dropped|lib/models/sample.c|s@        if (c\[j\].logit == max @        if (0 @|epsilon/eta cutoffs: the most likely token not kept when under the cut
eta_no_min|lib/models/sample.c|s@        k = probability_cut(sm, k, max, sum, cut < eta ? cut : eta);@        k = probability_cut(sm, k, max, sum, cut);@|eta_cutoff: sqrt(eta) exp(-H) without the min with eta
ngram_last_window|lib/models/sample.c|s@    for (int64_t i = 0; i + n <= len; i++) {   /\* the n-gram at i \*/@    for (int64_t i = 0; i + n < len; i++) {@|no_repeat_ngram_size: the latest n-gram not seen
ngram_all_banned_unchecked|lib/models/sample.c|s@    if (l\[best\] == -INFINITY)@    if (0)@|no_repeat_ngram_size: a vocabulary all banned chooses token 0
eta_not_passed|lib/models/generate.c|s@    g.sm.eta_cutoff = s->eta_cutoff;@    g.sm.eta_cutoff = 0.0;@|eta_cutoff never reaches the sampler
hf_typical_range|lib/models/config_json.c|s@     NNT_HF_SAMPLING_TYPICAL_P, 0, 0, 1, 1, 0},@     NNT_HF_SAMPLING_TYPICAL_P, 0, 0, 1, 0, 0},@|generation_config.json: a typical_p of 0 taken
generate_ngram_as_double|examples/nnt_generate.c|s@     offsetof(nnt_sampling, no_repeat_ngram_size), offsetof(opts, no_repeat_ngram), 1},@     offsetof(nnt_sampling, no_repeat_ngram_size), offsetof(opts, no_repeat_ngram), 0},@|nnt-generate: no_repeat_ngram_size of generation_config.json copied as a double
gen_record_samples_not_split|examples/nnt_generate.c|s@        if (rc == NNT_E_NOMEM \&\& n == 1 \&\& nseq > 1) {@        if (0) {@|nnt-generate --prompts: the samples of one record that do not fit side by side end the run
early_stop_count_not_resumed|lib/train/record.c|s@    if (n <= 0)@    if (1)@|nnt_trainer_resume: the validations before the checkpoint (early_stop count, lowest, last) forgotten without a log_dir
dpo_robust_undivided|lib/train/dpo.c|s@        return ((1.0 - e) \* nnt_softplus(-z) - e \* nnt_softplus(z)) / (1.0 - 2.0 \* e);@        return (1.0 - e) * nnt_softplus(-z) - e * nnt_softplus(z);@|robust DPO: the loss not divided by 1 - 2 e
dpo_exo_logs_swapped|lib/train/dpo.c|s@        double a = log1p(-e), b = log(e);@        double a = log(e), b = log1p(-e);@|EXO: log(1 - e) and log e swapped
dpo_discopop_no_dm|lib/train/dpo.c|s@        \*g = beta \* (-sm \* (1.0 - m) - ex \* m + dm \* (ex - lg));@        *g = beta * (-sm * (1.0 - m) - ex * m);@|DiscoPOP: the derivative without that of the mixing weight
dpo_nca_rejected_whole|lib/train/dpo.c|s@        return nnt_softplus(-c) + 0.5 \* nnt_softplus(c) + 0.5 \* nnt_softplus(r);@        return nnt_softplus(-c) + 0.5 * nnt_softplus(c) + nnt_softplus(r);@|NCA: the rejected term not halved
dpo_sigmoid_norm_summed|lib/train/dpo.c|s@        double loss = sigmoid_term(beta \* (lc / ac - lr / ar), beta, \&g);@        double loss = sigmoid_term(beta * (lc - lr), beta, \&g);@|sigmoid_norm: the log ratios summed, not averaged
dpo_robust_smoothing_unchecked|lib/train/trainer.c|s@    if (flips \&\& !(e >= 0 \&\& e < 0.5))@    if (0)@|robust DPO and AOT: a flip probability of 0.5 or more taken
dpo_aot_routed_by_x|lib/train/dpo.c|s@            dr\[ry\[i\].j\] = -g;@            dr[rx[i].j] = -g;@|aot_unpaired: the rejected derivatives given by the chosen order
dpo_aot_rejected_as_chosen|lib/train/dpo.c|s@            dr\[rx\[i\].j\] = -g;@            dr[ry[i].j] = -g;@|aot: the rejected derivatives given by the reference order
row_max_tail_short|cpu/softmax.c|s@_mm512_mask_loadu_ps(lowest, nnt_avx512_maskn(n - j), x + j)@_mm512_mask_loadu_ps(lowest, nnt_avx512_maskn(n - j - 1), x + j)@|AVX-512 row maximum: the last float of a masked tail left out
row_max_fourth_lost|cpu/softmax.c|s@_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3))@_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m2))@|AVX-512 row maximum: the fourth running maximum not reduced
aligned_keys_short|cpu/attention.c|s@\*khi = (\*khi + 15) / 16 \* 16 < tk ? (\*khi + 15) / 16 \* 16 : tk;@*khi = *khi / 16 * 16;@|attention: the keys prepared for a call rounded down at their end (the last transposed rows missing)
abt_first_key_up|cpu/attn_band_impl.h|s@            k0 -= k0 % VW;@            k0 += k0 % VW;@|band products: the scores of a group start past its first key
band_fit_no_window|lib/ops/attention.c|s@    int64_t keys = window + 64 + 15;@    int64_t keys = 64 + 15;@|band tasks: the backward L2 rule without the keys of the window
'

list() { printf '%s\n' "$MUTATIONS" | grep -v '^$'; }
names=$*
[ -n "$names" ] || names=$(list | cut -d'|' -f1)
for n in $names; do
    list | grep -q "^$n|" || { echo "unknown mutation '$n'; known: $(list | cut -d'|' -f1 | tr '\n' ' ')" >&2; exit 2; }
done

# changed_lines NAME: how many lines of its file NAME's expression changes in the source
changed_lines() {
    cl_line=$(list | grep "^$1|")
    cl_file=$(printf "%s\n" "$cl_line" | cut -d'|' -f2)
    cl_expr=$(printf "%s\n" "$cl_line" | cut -d'|' -f3)
    [ -f "$src/$cl_file" ] || { echo 0; return; }
    sed -e "$cl_expr" "$src/$cl_file" 2> /dev/null | diff "$src/$cl_file" - | grep -c '^<'
}
if [ $check_only -eq 1 ]; then
    stale=0
    for n in $names; do
        c=$(changed_lines "$n")
        [ "$c" -eq 1 ] || { echo "$n: the expression changes $c lines of $(list | grep "^$n|" | cut -d'|' -f2) (must be 1): mutation out of date"; stale=$((stale + 1)); }
    done
    echo "$(echo $names | wc -w) mutations, $stale out of date"
    [ $stale -eq 0 ]
    exit
fi

work=${NNT_MUTATE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/nnt-mutate-XXXXXX")} || exit 2
[ $keep -eq 1 ] && echo "scratch directory: $work" || trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/build"
(cd "$src" && git ls-files -co --exclude-standard | grep -v '^gpu-bundle/\|^starpu-cuda/' |
    tar cf - -T -) | (cd "$work/src" && tar xf -) || exit 2
cd "$work/src" && { [ -x configure ] || ./autogen.sh > "$work/autogen.log" 2>&1; } || {
    echo "autogen failed: $work/autogen.log" >&2; exit 2; }
cd "$work/build" && "$work/src/configure" -q > "$work/configure.log" 2>&1 &&
    make -j"$(nproc)" > "$work/make.log" 2>&1 && make -j"$(nproc)" check TESTS= > "$work/make.log" 2>&1 || {
    echo "the unmutated tree does not build: $work/make.log" >&2; exit 2; }
if [ -z "$only_tests" ]; then
    only_tests=$(cd "$work/build" && ls tests/test_* | grep -v '\.' | grep -v test_cuda_kernels | tr '\n' ' ')
    only_tests="$only_tests tests/check_train.sh"
fi

caught_all=0 total=0
for n in $names; do
    line=$(list | grep "^$n|")
    file=$(printf "%s\n" "$line" | cut -d'|' -f2)
    expr=$(printf "%s\n" "$line" | cut -d'|' -f3)
    what=$(printf "%s\n" "$line" | cut -d'|' -f4)
    total=$((total + 1))
    cp "$work/src/$file" "$work/orig"
    sed -e "$expr" "$work/orig" > "$work/src/$file"
    changed=$(diff "$work/orig" "$work/src/$file" | grep -c '^<')
    if [ "$changed" -ne 1 ]; then
        echo "$n: the expression changed $changed lines of $file (must be 1): mutation out of date"
        cp "$work/orig" "$work/src/$file"
        continue
    fi
    if ! (cd "$work/build" && make -j"$(nproc)" > "$work/make-$n.log" 2>&1 &&
          make -j"$(nproc)" check TESTS= >> "$work/make-$n.log" 2>&1); then
        echo "$n: the mutated tree does not build ($work/make-$n.log)"
        cp "$work/orig" "$work/src/$file"
        continue
    fi
    caught=
    for t in $only_tests; do
        t=tests/${t#tests/}
        (cd "$work/build" && make check TESTS="$t" > "$work/check-$n-${t#tests/}.log" 2>&1) ||
            caught="$caught ${t#tests/}"
    done
    if [ -n "$caught" ]; then
        caught_all=$((caught_all + 1))
        echo "$n ($what): caught by$caught"
    else
        echo "$n ($what): NOT CAUGHT"
    fi
    cp "$work/orig" "$work/src/$file"
    touch "$work/src/$file"
done
(cd "$work/build" && make -j"$(nproc)" > /dev/null 2>&1)
echo "caught $caught_all of $total"
[ "$caught_all" -eq "$total" ]
