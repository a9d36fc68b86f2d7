/* SPDX-License-Identifier: MIT */
/* The next token of text generation from the logits of the last position, and the argument
 * checks every generate function shares (sample.h). */
#include "sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- xoshiro256** (Blackman and Vigna), its state seeded through splitmix64 ------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t result = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double xoshiro_uniform(uint64_t s[4])
{
    return (double)(xoshiro_next(s) >> 11) * 0x1p-53;
}

/* ---- checks ------------------------------------------------------------------------------ */

int nnt_generate_check(const nnt_ctx *ctx, const char *fn, int64_t V, const int32_t *prompt,
                       int64_t nprompt, int64_t ngen, double temperature, int64_t top_k,
                       const int32_t *out)
{
    if (!prompt || (!out && ngen > 0))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is NULL", fn, prompt ? "out" : "prompt");
    if (nprompt < 1 || ngen < 0 || ngen > INT64_MAX - nprompt)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: nprompt = %lld must be >= 1 and ngen = %lld "
                        ">= 0", fn, (long long)nprompt, (long long)ngen);
    if (!(temperature >= 0.0 && isfinite(temperature)))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: temperature %g must be finite and >= 0", fn,
                        temperature);
    if (top_k < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: top_k = %lld must be >= 0 (0: all)", fn,
                        (long long)top_k);
    for (int64_t i = 0; i < nprompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return nnt_fail(ctx, NNT_E_INVAL, "%s: prompt token %d at position %lld is "
                            "outside [0, %lld)", fn, (int)prompt[i], (long long)i,
                            (long long)V);
    return NNT_OK;
}

/* ---- the sampler ------------------------------------------------------------------------- */

void nnt_sampler_seed(uint64_t rng[4], uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng[i] = splitmix64(&x);
}

int nnt_sampler_init(nnt_sampler *sm, const nnt_ctx *ctx, const char *fn, int64_t V,
                     double temperature, int64_t top_k)
{
    memset(sm, 0, sizeof *sm);
    sm->temperature = temperature;
    sm->top_k = top_k;
    sm->top_p = 1.0;
    sm->repetition_penalty = 1.0;
    sm->typical_p = 1.0;
    sm->V = V;
    sm->cand = malloc((size_t)V * sizeof *sm->cand);
    if (!sm->cand)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    return NNT_OK;
}

void nnt_sampler_free(nnt_sampler *sm)
{
    free(sm->cand);
    free(sm->order);
    free(sm->penalized);
    free(sm->stamp);
    sm->cand = NULL;
    sm->order = NULL;
    sm->penalized = NULL;
    sm->stamp = NULL;
}

/* Larger logit first, then the lower id: a total order, so qsort's result is unique. */
static int cand_cmp(const void *pa, const void *pb)
{
    const nnt_sample_cand *a = pa, *b = pb;
    if (a->logit != b->logit)
        return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Smaller logit (key) first, then the lower id */
static int cand_cmp_up(const void *pa, const void *pb)
{
    const nnt_sample_cand *a = pa, *b = pb;
    if (a->logit != b->logit)
        return a->logit < b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Candidate a comes after b in the (logit, id) order */
static int cand_after(const nnt_sample_cand *a, const nnt_sample_cand *b)
{
    return a->logit != b->logit ? a->logit < b->logit : a->id > b->id;
}

/* The heap c[0..k) (the last candidate of the order at its root) with its root replaced:
 * sifted down */
static void sift_down(nnt_sample_cand *c, int64_t k, int64_t i)
{
    nnt_sample_cand x = c[i];
    for (int64_t child; (child = 2 * i + 1) < k; i = child) {
        if (child + 1 < k && cand_after(&c[child + 1], &c[child]))
            child++;
        if (!cand_after(&c[child], &x))
            break;
        c[i] = c[child];
    }
    c[i] = x;
}

/* The first k (0 < k < V) of the V candidates in the (logit, id) order into c[0..k), in
 * that order: a heap of the k first seen so far (O(V log k), most candidates rejected by one
 * comparison with its root), then sorted. The same candidates in the same order as sorting
 * all V (the order is total: ids differ). */
static void first_k(nnt_sample_cand *c, int64_t V, int64_t k)
{
    for (int64_t i = k / 2 - 1; i >= 0; i--)
        sift_down(c, k, i);
    for (int64_t v = k; v < V; v++)
        if (cand_after(&c[0], &c[v])) {
            c[0] = c[v];
            sift_down(c, k, 0);
        }
    qsort(c, (size_t)k, sizeof *c, cand_cmp);
}

/* Draw one of the first k candidates with weights softmax((logit - max) / temperature), one
 * uniform number from rng. */
static int32_t draw(nnt_sampler *sm, uint64_t rng[4], int64_t k, double max)
{
    nnt_sample_cand *c = sm->cand;
    double sum = 0.0;
    for (int64_t j = 0; j < k; j++) {   /* in double, summed in order */
        c[j].logit = exp((c[j].logit - max) / sm->temperature);
        sum += c[j].logit;
    }
    double r = xoshiro_uniform(rng) * sum, acc = 0.0;
    int64_t pick = -1;
    for (int64_t j = 0; j < k && pick < 0; j++) {
        acc += c[j].logit;
        pick = acc > r ? j : -1;
    }
    for (int64_t j = k - 1; pick < 0 && j >= 0; j--)   /* rounding: the last possible one */
        pick = c[j].logit > 0.0 ? j : -1;
    return c[pick].id;
}

/* The fewest of the first k (sorted) candidates whose weights sum to >= top_p times the
 * weights of all k, sum (< 0: summed here) (at least 1). */
static int64_t nucleus_size(const nnt_sampler *sm, int64_t k, double max, double sum)
{
    const nnt_sample_cand *c = sm->cand;
    double acc = 0.0;
    if (sum < 0.0) {
        sum = 0.0;
        for (int64_t j = 0; j < k; j++)
            sum += exp((c[j].logit - max) / sm->temperature);
    }
    for (int64_t j = 0; j < k; j++) {
        acc += exp((c[j].logit - max) / sm->temperature);
        if (acc >= sm->top_p * sum)
            return j + 1;
    }
    return k;
}

/* The candidates of every token whose logit is not -inf (not banned), by id, into sm->cand;
 * their number. */
static int64_t all_candidates(nnt_sampler *sm, const float *l)
{
    int64_t n = 0;
    for (int64_t v = 0; v < sm->V; v++)
        if (l[v] > -INFINITY) {
            sm->cand[n].logit = l[v];
            sm->cand[n++].id = (int32_t)v;
        }
    return n;
}

/* The nucleus of the n candidates (all_candidates) without sorting them all: the first k in
 * (logit, id) order (first_k), k 64 then n / 32, until their weights reach top_p times the
 * weights of all n (summed by id, into *total); 0 when neither holds it (then the caller sorts
 * every candidate; the second round is skipped when the 64th weight times n / 32 cannot reach
 * it), else the nucleus's size, sm->cand holding it first. The nucleus of a peaked
 * distribution is a few tokens of a vocabulary of 10^5: this reads the logits a few times
 * instead of sorting them (bench/sample_top_p.c). */
static int64_t nucleus_of_first(nnt_sampler *sm, const float *l, int64_t n, double max,
                                double *all)
{
    double total = 0.0;
    for (int64_t v = 0; v < sm->V; v++)   /* (a banned token's -inf weighs 0) */
        total += exp(((double)l[v] - max) / sm->temperature);
    *all = total;
    for (int64_t k = 64; k <= n / 32; k = k == 64 && n / 32 > 64 ? n / 32 : n) {
        if (k > 64)   /* (the caller's candidates, in id order, for the first round) */
            all_candidates(sm, l);
        first_k(sm->cand, n, k);
        double acc = 0.0, w = 0.0;
        for (int64_t j = 0; j < k; j++) {
            acc += w = exp((sm->cand[j].logit - max) / sm->temperature);
            if (acc >= sm->top_p * total)
                return j + 1;
        }
        /* the next k' - k candidates weigh at most w each: past reach, sort at once */
        if (k == 64 && acc + (double)(n / 32 - k) * w < sm->top_p * total)
            break;
    }
    if (n / 32 >= 64)   /* (a round reordered them) */
        all_candidates(sm, l);
    return 0;
}

/* Of the first k candidates, those of weight >= min_p (the largest logit's weight is 1), in
 * their order: a prefix when they are in (logit, id) order, else compacted (at least 1). */
static int64_t min_p_cut(nnt_sampler *sm, int64_t k, double max)
{
    nnt_sample_cand *c = sm->cand;
    int64_t kept = 0;
    for (int64_t j = 0; j < k; j++)
        if (exp((c[j].logit - max) / sm->temperature) >= sm->min_p)
            c[kept++] = c[j];
    return kept > 0 ? kept : 1;
}

/* The softmax over the first k candidates, their weights exp((logit - max) / t) (max their
 * largest logit): the weights' sum into *sum, the entropy (nats) returned. */
static double entropy(const nnt_sample_cand *c, int64_t k, double max, double t, double *sum)
{
    double s = 0.0, sa = 0.0;
    for (int64_t j = 0; j < k; j++) {
        double a = (c[j].logit - max) / t, w = exp(a);
        s += w;
        sa += w * a;
    }
    *sum = s;
    return log(s) - sa / s;   /* -sum p log p, p = w / s */
}

/* Of the first k candidates (*max their largest logit), the locally typical ones
 * (transformers' TypicalLogitsWarper): ordered by |-log p - H| (H the entropy), the fewest
 * whose probabilities sum to typical_p, and every other as near as the last of those (at
 * least 1), compacted in their order; *max then the largest of theirs. -1: out of memory. */
static int64_t typical_cut(nnt_sampler *sm, int64_t k, double *max)
{
    nnt_sample_cand *c = sm->cand;
    if (!sm->order && !(sm->order = malloc((size_t)sm->V * sizeof *sm->order)))
        return -1;
    nnt_sample_cand *o = sm->order;   /* (distance from the entropy, index in c) */
    const double t = sm->temperature;
    double sum, h = entropy(c, k, *max, t, &sum), lsum = log(sum);
    for (int64_t j = 0; j < k; j++) {
        o[j].logit = fabs(lsum - (c[j].logit - *max) / t - h);   /* -log p = lsum - a */
        o[j].id = (int32_t)j;
    }
    qsort(o, (size_t)k, sizeof *o, cand_cmp_up);
    int64_t last = 0;   /* the positions whose running probability is below typical_p */
    double acc = 0.0;
    for (int64_t j = 0; j < k; j++) {
        acc += exp((c[o[j].id].logit - *max) / t) / sum;
        last += acc < sm->typical_p;
    }
    last = last < k - 1 ? last : k - 1;
    for (int64_t j = last + 1; j < k; j++)   /* ties with the last kept are kept */
        if (o[j].logit > o[last].logit)
            c[o[j].id].logit = -INFINITY;   /* (candidates are finite: a mark) */
    int64_t kept = 0;
    double m = -INFINITY;
    for (int64_t j = 0; j < k; j++)
        if (c[j].logit > -INFINITY) {
            m = c[j].logit > m ? c[j].logit : m;
            c[kept++] = c[j];
        }
    *max = m;
    return kept;
}

/* Of the first k candidates (max their largest logit), those of probability (the softmax over
 * them) at least cut, and those of logit max, compacted in their order */
static int64_t probability_cut(nnt_sampler *sm, int64_t k, double max, double sum, double cut)
{
    nnt_sample_cand *c = sm->cand;
    int64_t kept = 0;
    for (int64_t j = 0; j < k; j++)
        if (c[j].logit == max || exp((c[j].logit - max) / sm->temperature) / sum >= cut)
            c[kept++] = c[j];
    return kept;
}

/* epsilon_cutoff and eta_cutoff (transformers' EpsilonLogitsWarper and EtaLogitsWarper) on
 * the first k candidates, max their largest logit */
static int64_t cutoffs(nnt_sampler *sm, int64_t k, double max)
{
    double sum, h;
    if (sm->epsilon_cutoff > 0.0 && sm->epsilon_cutoff < 1.0) {
        entropy(sm->cand, k, max, sm->temperature, &sum);
        k = probability_cut(sm, k, max, sum, sm->epsilon_cutoff);
    }
    if (sm->eta_cutoff > 0.0 && sm->eta_cutoff < 1.0) {
        h = entropy(sm->cand, k, max, sm->temperature, &sum);
        double eta = sm->eta_cutoff, cut = sqrt(eta) * exp(-h);
        k = probability_cut(sm, k, max, sum, cut < eta ? cut : eta);
    }
    return k;
}

/* The largest logit's index (the lowest id on ties) */
static int64_t argmax(const float *l, int64_t V)
{
    int64_t best = 0;
    for (int64_t v = 1; v < V; v++)
        best = l[v] > l[best] ? v : best;
    return best;
}

int64_t nnt_sampler_candidates(nnt_sampler *sm, const float *l, double *max)
{
    int64_t n = all_candidates(sm, l), k = n;
    int nucleus = sm->top_p > 0.0 && sm->top_p < 1.0;
    double total = -1.0;   /* the candidates' weights (< 0: not summed yet) */
    if (sm->top_k > 0 && sm->top_k < n) {   /* the k best, in (logit, id) order */
        k = sm->top_k;
        first_k(sm->cand, n, k);
        if (nucleus)
            k = nucleus_size(sm, k, *max, total);
    } else if (nucleus && (k = nucleus_of_first(sm, l, n, *max, &total)) == 0) {
        qsort(sm->cand, (size_t)n, sizeof *sm->cand, cand_cmp);   /* all, in (logit, id) order */
        k = nucleus_size(sm, n, *max, total);
    }
    if (sm->min_p > 0.0)
        k = min_p_cut(sm, k, *max);
    if (sm->typical_p > 0.0 && sm->typical_p < 1.0 && (k = typical_cut(sm, k, max)) < 0)
        return -1;
    return cutoffs(sm, k, *max);
}

/* transformers' repetition penalty: sm->penalized (a copy of l) with the logit of each token
 * of q divided by it where positive, multiplied where negative, once a token */
static void repetition_penalty(nnt_sampler *sm, const float *l, const nnt_sample_seq *q)
{
    const float p = (float)sm->repetition_penalty;
    const int64_t stamp = ++sm->picks;
    for (int64_t i = 0; i < q->nprompt + q->ngen; i++) {
        int32_t t = nnt_generate_token_at(q->prompt, q->nprompt, q->gen, i);
        if (sm->stamp[t] == stamp)
            continue;   /* seen already in this pick (transformers' mask of the ids seen) */
        sm->stamp[t] = stamp;
        sm->penalized[t] = l[t] < 0.0f ? l[t] * p : l[t] / p;
    }
}

/* The tokens that would end an n-gram (n >= 1) already in sequence q (of n tokens at least):
 * those that follow an earlier occurrence of its last n - 1 tokens (transformers'
 * NoRepeatNGramLogitsProcessor), set to -inf in sm->penalized, made a copy of l at the first
 * one unless copied (the penalty's copy); whether there was one. */
static int ngram_bans(nnt_sampler *sm, const float *l, const nnt_sample_seq *q, int64_t n,
                      int copied)
{
    const int64_t len = q->nprompt + q->ngen, tail = len - (n - 1);   /* the suffix's start */
    int found = 0;
    for (int64_t i = 0; i + n <= len; i++) {   /* the n-gram at i */
        int64_t j = 0;
        while (j < n - 1 && nnt_generate_token_at(q->prompt, q->nprompt, q->gen, i + j) ==
                                nnt_generate_token_at(q->prompt, q->nprompt, q->gen, tail + j))
            j++;
        if (j < n - 1)
            continue;
        if (!copied && !found)
            memcpy(sm->penalized, l, (size_t)sm->V * sizeof *l);
        found = 1;
        sm->penalized[nnt_generate_token_at(q->prompt, q->nprompt, q->gen, i + n - 1)] =
            -INFINITY;
    }
    return found;
}

const float *nnt_sampler_penalize(nnt_sampler *sm, const float *l, const nnt_sample_seq *q)
{
    const int64_t n = sm->no_repeat_ngram;
    const int penalty = q && sm->repetition_penalty != 1.0;
    const int ngram = q && n > 0 && q->nprompt + q->ngen >= n;
    if (!penalty && !ngram)
        return l;
    if (!sm->penalized && !(sm->penalized = malloc((size_t)sm->V * sizeof *sm->penalized)))
        return NULL;
    if (penalty && !sm->stamp && !(sm->stamp = calloc((size_t)sm->V, sizeof *sm->stamp)))
        return NULL;
    if (penalty) {
        memcpy(sm->penalized, l, (size_t)sm->V * sizeof *l);
        repetition_penalty(sm, l, q);
    }
    int banned = ngram && ngram_bans(sm, l, q, n, penalty);
    return penalty || banned ? sm->penalized : l;
}

int nnt_sampler_pick(nnt_sampler *sm, const nnt_ctx *ctx, const char *fn, const float *l,
                     const nnt_sample_seq *seq, uint64_t rng[4], int32_t *token)
{
    int64_t V = sm->V, best = 0;
    for (int64_t v = 0; v < V; v++) {
        if (!isfinite(l[v]))
            return nnt_fail(ctx, NNT_E_STATE, "%s: logit of token %lld is %g (diverged "
                            "weights?)", fn, (long long)v, (double)l[v]);
        best = l[v] > l[best] ? v : best;   /* the lowest id on ties */
    }
    const float *pl = nnt_sampler_penalize(sm, l, seq);
    if (!pl)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory (repetition penalty)", fn);
    if (pl != l)   /* the penalty and bans may move the largest */
        best = argmax(pl, V), l = pl;
    if (l[best] == -INFINITY)
        return nnt_fail(ctx, NNT_E_STATE, "%s: no_repeat_ngram_size %lld bans every token of "
                        "the vocabulary here", fn, (long long)sm->no_repeat_ngram);
    if (sm->temperature == 0.0) {
        *token = (int32_t)best;
        return NNT_OK;
    }
    double max = l[best];
    int64_t k = nnt_sampler_candidates(sm, l, &max);
    if (k < 0)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory (typical_p)", fn);
    *token = draw(sm, rng, k, max);
    return NNT_OK;
}
