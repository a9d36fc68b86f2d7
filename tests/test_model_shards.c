/* SPDX-License-Identifier: MIT */
/* Sharded Hugging Face checkpoints: nnt_model_load_hf on a model.safetensors.index.json and
 * its shards, nnt_model_save_hf_ex(max_shard_bytes).
 *   - tests/fixtures/sharded/{gqa,mqa_bf16,gpt2} (transformers' save_pretrained with
 *     max_shard_size, tests/gen_shard_fixtures.py) load to the same parameters, bit for bit,
 *     as the single-file directories they were made from;
 *   - nnt's sharded save: the shard files (names, count, each shard's data within the limit
 *     and no two consecutive shards mergeable; a tensor above the limit alone), the index
 *     (total_size, every tensor mapped to the shard that holds it), and a reload bit for bit;
 *     NNT_SHARDS_KEEP=DIR keeps the saved directories as DIR/gqa, DIR/mqa, DIR/gpt2 for
 *     tests/gen_shard_fixtures.py --check-saved;
 *   - files of an earlier save with another layout are removed;
 *   - refusals of a bad index or shard set, each with its code and a message naming the file
 *     and key, and *out NULL. */
#include "testutil.h"
#include "fixture_st.h"

#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static nnt_ctx *ctx;
static char tmpdir[256];

static void setup(void)
{
    ctx = test_ctx();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nnt-test-shards-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[600];
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ctx = NULL;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* ---- paths and files ------------------------------------------------------------------- */

static const char *fix(const char *sub)
{
    static char paths[4][4200];
    static int next;
    char *p = paths[next++ % 4];
    const char *top = getenv("top_srcdir");
    snprintf(p, 4200, "%s/tests/fixtures/%s", top ? top : ".", sub);
    return p;
}

/* dir/name (static buffer, one of eight in turn). */
static const char *at(const char *dir, const char *name)
{
    static char paths[8][4400];
    static int next;
    char *p = paths[next++ % 8], copy[4096];
    snprintf(copy, sizeof copy, "%.4000s", dir);   /* dir may be an earlier result */
    snprintf(p, 4400, "%.4000s/%.200s", copy, name);
    return p;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Copy every file of the directory from into to (created). */
static void copy_dir(const char *from, const char *to)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    ck_assert_int_eq(system(cmd), 0);
}

/* Files of dir named model-NNNNN-of-MMMMM.safetensors. */
static int count_shards(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, "model-", 6) == 0 && strstr(e->d_name, "-of-") != NULL &&
             strlen(e->d_name) == strlen("model-00001-of-00001.safetensors") &&
             strcmp(e->d_name + strlen(e->d_name) - 12, ".safetensors") == 0;
    closedir(d);
    return n;
}

/* ---- comparing models ----------------------------------------------------------------- */

static void expect_same_params(nnt_layer *a, nnt_layer *b)
{
    int64_t na = 0, nb = 0;
    EXPECT_OK(nnt_layer_num_params(a, &na, NULL));
    EXPECT_OK(nnt_layer_num_params(b, &nb, NULL));
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++) {
        nnt_param_info pa = {sizeof pa, NULL, NULL, NULL, 0, 0}, pb = pa;
        EXPECT_OK(nnt_layer_param(a, i, &pa));
        EXPECT_OK(nnt_layer_param(b, i, &pb));
        ck_assert_str_eq(pa.name, pb.name);
        int64_t n = 0, m = 0;
        float *va = test_to_host(pa.value, &n), *vb = test_to_host(pb.value, &m);
        ck_assert_int_eq(n, m);
        ck_assert_msg(memcmp(va, vb, (size_t)n * sizeof *va) == 0, "%s differs", pa.name);
        free(va);
        free(vb);
    }
}

/* ---- (a) transformers' sharded fixtures ------------------------------------------------ */

static const struct {
    const char *sharded, *single;
    int64_t b, t;
} FIXTURES[] = {
    {"sharded/gqa", "llama_tiny/gqa", 2, 8},
    {"sharded/mqa_bf16", "llama_tiny/mqa_bf16", 2, 8},
    {"sharded/gpt2", "gpt2_tiny", 2, 12},
};

START_TEST(test_fixture)
{
    const char *sharded = fix(FIXTURES[_i].sharded), *single = fix(FIXTURES[_i].single);
    ck_assert(!exists(at(sharded, "model.safetensors")));
    ck_assert_int_ge(count_shards(sharded), 3);
    nnt_layer *a = NULL, *b = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, single, FIXTURES[_i].b, FIXTURES[_i].t, NULL, &a));
    EXPECT_OK(nnt_model_load_hf(ctx, sharded, FIXTURES[_i].b, FIXTURES[_i].t, NULL, &b));
    expect_same_params(a, b);
    nnt_layer_destroy(a);
    nnt_layer_destroy(b);
}
END_TEST

/* ---- (b) nnt's sharded save ------------------------------------------------------------ */

/* The tensor data bytes of a safetensors file; *first: its first tensor's. */
static uint64_t data_bytes(const char *path, uint64_t *first)
{
    nnt_st_reader *r = fixture_open_st_path(path);
    uint64_t sum = 0;
    for (size_t i = 0; i < nnt_st_count(r); i++)
        sum += nnt_st_entry_at(r, i)->nbytes;
    *first = nnt_st_count(r) ? nnt_st_entry_at(r, 0)->nbytes : 0;
    nnt_st_close(r);
    return sum;
}

/* dir holds n shards that split the data as asked: each within max (or one tensor), none
 * that could have taken the next shard's first tensor; the index's total_size is the sum
 * and maps every tensor to the shard that holds it. */
static void expect_split(const char *dir_arg, int n, uint64_t max)
{
    char name[64], *index = NULL, dir[4400];
    snprintf(dir, sizeof dir, "%s", dir_arg);
    size_t len = 0;
    uint64_t total = 0, prev = 0;
    ck_assert_int_eq(count_shards(dir), n);
    ck_assert(!exists(at(dir, "model.safetensors")));
    index = (char *)slurp(at(dir, "model.safetensors.index.json"), &len);
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, n);
        uint64_t first = 0, bytes = data_bytes(at(dir, name), &first);
        nnt_st_reader *r = fixture_open_st_path(at(dir, name));
        ck_assert_msg(bytes <= max || nnt_st_count(r) == 1, "%s: %llu bytes", name,
                      (unsigned long long)bytes);
        ck_assert_msg(k == 0 || prev + first > max, "%s could join the shard before", name);
        for (size_t i = 0; i < nnt_st_count(r); i++) {   /* "name": "shard" in the index */
            char pair[1200];
            snprintf(pair, sizeof pair, "\"%s\": \"%s\"", nnt_st_entry_at(r, i)->name, name);
            ck_assert_msg(strstr(index, pair) != NULL, "index lacks %s", pair);
        }
        ck_assert_str_eq(nnt_st_metadata_get(r, "format"), "pt");
        nnt_st_close(r);
        prev = bytes;
        total += bytes;
    }
    char want[64];
    snprintf(want, sizeof want, "\"total_size\": %llu", (unsigned long long)total);
    ck_assert_msg(strstr(index, want) != NULL, "index lacks %s", want);
    free(index);
}

static const struct {
    const char *dir, *keep;
    int64_t b, t;
    uint64_t max;
    int shards;   /* what max gives: the greedy split of the single file's tensors, in its
                     order, computed in Python */
} SAVES[] = {
    /* gqa: 21 tensors, 77696 bytes, the largest 7808 (embed_tokens, lm_head) */
    {"llama_tiny/gqa", "gqa", 2, 8, 20000, 5},
    /* mqa (tied: no lm_head): 28 tensors, 40608 bytes, the largest 5088 */
    {"llama_tiny/mqa", "mqa", 2, 8, 8000, 6},
    /* gpt2_tiny: 28 tensors (tied), 65952 bytes, c_fc / c_proj 9216 */
    {"gpt2_tiny", "gpt2", 2, 12, 20000, 4},
};

START_TEST(test_save)
{
    const char *keep = getenv("NNT_SHARDS_KEEP");
    char out[700];
    if (keep && *keep) {
        mkdir(keep, 0755);
        snprintf(out, sizeof out, "%s/%s", keep, SAVES[_i].keep);
    } else {
        snprintf(out, sizeof out, "%s/saved", tmpdir);
    }
    nnt_layer *a = NULL, *c = NULL;
    nnt_hf_save_options o = NNT_HF_SAVE_OPTIONS_INIT;
    o.max_shard_bytes = SAVES[_i].max;
    EXPECT_OK(nnt_model_load_hf(ctx, fix(SAVES[_i].dir), SAVES[_i].b, SAVES[_i].t, NULL, &a));
    EXPECT_OK(nnt_model_save_hf_ex(a, out, &o));
    expect_split(out, SAVES[_i].shards, SAVES[_i].max);
    EXPECT_OK(nnt_model_load_hf(ctx, out, SAVES[_i].b, SAVES[_i].t, NULL, &c));
    expect_same_params(a, c);
    nnt_layer_destroy(c);
    /* a limit below every tensor: one tensor a shard */
    o.max_shard_bytes = 1;
    int64_t nparams = 0;
    EXPECT_OK(nnt_model_save_hf_ex(a, at(tmpdir, "each"), &o));
    nnt_st_reader *r = NULL;
    char err[NNT_IO_ERRLEN];
    snprintf(err, sizeof err, "%s", at(fix(SAVES[_i].dir), "model.safetensors"));
    r = fixture_open_st_path(err);
    nparams = (int64_t)nnt_st_count(r);
    nnt_st_close(r);
    expect_split(at(tmpdir, "each"), (int)nparams, 1);
    EXPECT_OK(nnt_model_load_hf(ctx, at(tmpdir, "each"), SAVES[_i].b, SAVES[_i].t, NULL, &c));
    expect_same_params(a, c);
    nnt_layer_destroy(c);
    nnt_layer_destroy(a);
}
END_TEST

/* A limit the whole model fits in, and the default options: one model.safetensors, as
 * nnt_model_save_hf writes it, byte for byte. */
START_TEST(test_save_one_file)
{
    nnt_layer *a = NULL;
    nnt_hf_save_options o = NNT_HF_SAVE_OPTIONS_INIT;
    o.max_shard_bytes = 77696;   /* gqa's data exactly */
    EXPECT_OK(nnt_model_load_hf(ctx, fix("llama_tiny/gqa"), 2, 8, NULL, &a));
    EXPECT_OK(nnt_model_save_hf(a, at(tmpdir, "plain")));
    EXPECT_OK(nnt_model_save_hf_ex(a, at(tmpdir, "fits"), &o));
    EXPECT_OK(nnt_model_save_hf_ex(a, at(tmpdir, "null"), NULL));
    size_t n0 = 0, n1 = 0, n2 = 0;
    unsigned char *f0 = slurp(at(at(tmpdir, "plain"), "model.safetensors"), &n0);
    unsigned char *f1 = slurp(at(at(tmpdir, "fits"), "model.safetensors"), &n1);
    unsigned char *f2 = slurp(at(at(tmpdir, "null"), "model.safetensors"), &n2);
    ck_assert(n0 == n1 && n0 == n2 && !memcmp(f0, f1, n0) && !memcmp(f0, f2, n0));
    ck_assert_int_eq(count_shards(at(tmpdir, "fits")), 0);
    ck_assert(!exists(at(at(tmpdir, "fits"), "model.safetensors.index.json")));
    o.max_shard_bytes = 77695;   /* one byte less: two shards */
    EXPECT_OK(nnt_model_save_hf_ex(a, at(tmpdir, "two"), &o));
    expect_split(at(tmpdir, "two"), 2, 77695);
    free(f0);
    free(f1);
    free(f2);
    nnt_layer_destroy(a);
}
END_TEST

/* Saves of other layouts into one directory leave only the last one's files. */
START_TEST(test_stale)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/d", tmpdir);
    nnt_layer *a = NULL, *c = NULL;
    nnt_hf_save_options o = NNT_HF_SAVE_OPTIONS_INIT;
    EXPECT_OK(nnt_model_load_hf(ctx, fix("llama_tiny/gqa"), 2, 8, NULL, &a));
    EXPECT_OK(nnt_model_save_hf(a, dir));
    mkdir(dir, 0755);
    write_file(at(dir, "model-extra.safetensors"), "x", 1);   /* not a shard name: kept */
    write_file(at(dir, "model-00001-of-00009.safetensorsx"), "x", 1);
    o.max_shard_bytes = 20000;
    EXPECT_OK(nnt_model_save_hf_ex(a, dir, &o));   /* over a single file */
    ck_assert(!exists(at(dir, "model.safetensors")));
    expect_split(dir, 5, 20000);
    o.max_shard_bytes = 40000;
    EXPECT_OK(nnt_model_save_hf_ex(a, dir, &o));   /* fewer shards: 00003..00005 gone */
    expect_split(dir, 2, 40000);
    ck_assert(!exists(at(dir, "model-00003-of-00005.safetensors")));
    EXPECT_OK(nnt_model_load_hf(ctx, dir, 2, 8, NULL, &c));
    expect_same_params(a, c);
    nnt_layer_destroy(c);
    EXPECT_OK(nnt_model_save_hf(a, dir));          /* back to one file */
    ck_assert_int_eq(count_shards(dir), 0);
    ck_assert(!exists(at(dir, "model.safetensors.index.json")));
    ck_assert(exists(at(dir, "model.safetensors")));
    ck_assert(exists(at(dir, "model-extra.safetensors")));
    ck_assert(exists(at(dir, "model-00001-of-00009.safetensorsx")));
    nnt_layer_destroy(a);
}
END_TEST

/* tokenizer_json: the file (or its directory's) copied byte for byte beside the weights; a
 * second save into the directory it came from leaves it; a missing one fails naming it. */
START_TEST(test_save_tokenizer)
{
    nnt_layer *a = NULL;
    nnt_hf_save_options o = NNT_HF_SAVE_OPTIONS_INIT;
    const char *dir = at(tmpdir, "tok");
    char want_path[4400];
    snprintf(want_path, sizeof want_path, "%s", fix("hftok/gpt2.json"));
    EXPECT_OK(nnt_model_load_hf(ctx, fix("llama_tiny/gqa"), 2, 8, NULL, &a));
    o.tokenizer_json = want_path;
    EXPECT_OK(nnt_model_save_hf_ex(a, dir, &o));
    size_t nw = 0, ng = 0;
    unsigned char *want = slurp(want_path, &nw), *got = slurp(at(dir, "tokenizer.json"), &ng);
    ck_assert(nw > 0 && nw == ng && !memcmp(want, got, nw));
    free(got);
    o.tokenizer_json = at(tmpdir, "tok");   /* its own directory: the same file, kept */
    EXPECT_OK(nnt_model_save_hf_ex(a, dir, &o));
    got = slurp(at(dir, "tokenizer.json"), &ng);
    ck_assert(nw == ng && !memcmp(want, got, nw));
    o.tokenizer_json = at(tmpdir, "none.json");
    EXPECT_FAIL_MSG(nnt_model_save_hf_ex(a, at(tmpdir, "tok2"), &o), NNT_E_IO, "none.json");
    free(want);
    free(got);
    nnt_layer_destroy(a);
}
END_TEST

/* dir/name holds exactly len bytes of want */
static int same_file(const char *path, const unsigned char *want, size_t len)
{
    size_t n = 0;
    unsigned char *got = slurp(path, &n);
    int same = got && n == len && memcmp(got, want, len) == 0;
    free(got);
    return same;
}

/* a model directory's tokenizer: tokenizer.json with the files transformers reads beside it
 * (tokenizer_config.json, chat_template.jinja, special_tokens_map.json,
 * generation_config.json) copied byte for byte; a second source without some of them: those
 * removed; saving into the source directory keeps everything; a tokenizer file of another
 * name brings only itself. */
START_TEST(test_save_tokenizer_files)
{
    static const char *const NAMES[] = {"tokenizer_config.json", "chat_template.jinja",
                                        "special_tokens_map.json", "generation_config.json"};
    char src[4400], dst[4400], src2[4400];
    snprintf(src, sizeof src, "%s", at(tmpdir, "src"));
    snprintf(src2, sizeof src2, "%s", at(tmpdir, "src2"));
    snprintf(dst, sizeof dst, "%s", at(tmpdir, "saved-tok"));
    ck_assert_int_eq(mkdir(src, 0755), 0);
    ck_assert_int_eq(mkdir(src2, 0755), 0);
    size_t ntok = 0;
    unsigned char *tok = slurp(fix("sft/qwen3/tokenizer.json"), &ntok);
    write_file(at(src, "tokenizer.json"), tok, ntok);
    write_file(at(src2, "tokenizer.json"), tok, ntok);
    char text[4][64];
    for (int i = 0; i < 4; i++) {
        snprintf(text[i], sizeof text[i], "{\"file\": %d}\n", i);
        write_file(at(src, NAMES[i]), text[i], strlen(text[i]));
    }
    write_file(at(src2, NAMES[0]), "{}", 2);
    nnt_layer *a = NULL;
    nnt_hf_save_options o = NNT_HF_SAVE_OPTIONS_INIT;
    EXPECT_OK(nnt_model_load_hf(ctx, fix("llama_tiny/gqa"), 2, 8, NULL, &a));
    o.tokenizer_json = src;   /* the directory */
    EXPECT_OK(nnt_model_save_hf_ex(a, dst, &o));
    ck_assert(same_file(at(dst, "tokenizer.json"), tok, ntok));
    for (int i = 0; i < 4; i++)
        ck_assert_msg(same_file(at(dst, NAMES[i]), (const unsigned char *)text[i],
                                strlen(text[i])), "%s not copied", NAMES[i]);
    o.tokenizer_json = at(src2, "tokenizer.json");   /* the file, named tokenizer.json */
    EXPECT_OK(nnt_model_save_hf_ex(a, dst, &o));
    ck_assert(same_file(at(dst, NAMES[0]), (const unsigned char *)"{}", 2));
    for (int i = 1; i < 4; i++)
        ck_assert_msg(!exists(at(dst, NAMES[i])), "%s of another tokenizer left", NAMES[i]);
    o.tokenizer_json = dst;   /* its own directory: kept as it is */
    EXPECT_OK(nnt_model_save_hf_ex(a, dst, &o));
    ck_assert(same_file(at(dst, NAMES[0]), (const unsigned char *)"{}", 2));
    ck_assert(same_file(at(dst, "tokenizer.json"), tok, ntok));
    write_file(at(src, "other.json"), tok, ntok);   /* not a model directory's: alone */
    o.tokenizer_json = at(src, "other.json");
    EXPECT_OK(nnt_model_save_hf_ex(a, at(tmpdir, "saved-tok2"), &o));
    ck_assert(same_file(at(at(tmpdir, "saved-tok2"), "tokenizer.json"), tok, ntok));
    ck_assert(!exists(at(at(tmpdir, "saved-tok2"), NAMES[0])));
    free(tok);
    nnt_layer_destroy(a);
}
END_TEST

/* nnt_model_open and nnt_model_source_config: each kind of source gives what its own loader
 * gives (the same configuration, the same parameters, bit for bit). */
static void expect_opens_as(const char *source, const nnt_model_config *cfg, nnt_layer *ref)
{
    nnt_layer *m = NULL;
    nnt_model_config a, b;
    EXPECT_OK(nnt_model_open(ctx, source, cfg, 2, 8, NULL, 5, &m));
    EXPECT_OK(nnt_model_config_of(m, &a));
    EXPECT_OK(nnt_model_config_of(ref, &b));
    ck_assert(a.family == b.family && a.vocab == b.vocab && a.max_seq == b.max_seq &&
              a.layers == b.layers && a.kv_heads == b.kv_heads && a.hidden == b.hidden);
    expect_same_params(m, ref);
    nnt_layer_destroy(m);
    nnt_layer_destroy(ref);
}

START_TEST(test_model_open)
{
    char gqa[4400], llmc[4400], weights[4400], gpt2[4400], run[4400];
    snprintf(gqa, sizeof gqa, "%s", fix("llama_tiny/gqa"));
    snprintf(llmc, sizeof llmc, "%s", fix("gpt2_tiny/gpt2_tiny.llmc.bin"));
    snprintf(weights, sizeof weights, "%s", fix("gpt2_tiny/model.safetensors"));
    snprintf(gpt2, sizeof gpt2, "%s", fix("gpt2_tiny"));
    snprintf(run, sizeof run, "%s", at(tmpdir, "run"));
    nnt_model_config c, want;
    nnt_layer *ref = NULL;
    EXPECT_OK(nnt_model_source_config(NULL, gqa, &c));   /* a Hugging Face directory */
    EXPECT_OK(nnt_model_hf_config(NULL, gqa, &want));
    ck_assert(c.family == want.family && c.kv_heads == want.kv_heads && c.layers == want.layers);
    EXPECT_OK(nnt_model_load_hf(ctx, gqa, 2, 8, NULL, &ref));
    expect_opens_as(gqa, NULL, ref);
    EXPECT_OK(nnt_model_source_config(NULL, llmc, &c));   /* an llm.c checkpoint */
    EXPECT_OK(nnt_gpt_load_llmc(ctx, llmc, 2, 8, NULL, &ref));
    EXPECT_OK(nnt_model_config_of(ref, &want));
    ck_assert(c.vocab == want.vocab && c.max_seq == want.max_seq && c.channels == want.channels);
    expect_opens_as(llmc, NULL, ref);
    /* GPT-2 weights alone: the configuration comes from the caller */
    EXPECT_FAIL_MSG(nnt_model_source_config(NULL, weights, &c), NNT_E_INVAL, "configuration");
    EXPECT_FAIL_MSG(nnt_model_open(ctx, weights, NULL, 2, 8, NULL, 0, &ref), NNT_E_INVAL,
                    "give cfg");
    ck_assert_ptr_null(ref);
    EXPECT_OK(nnt_model_source_config(NULL, gpt2, &c));
    EXPECT_OK(nnt_model_load_hf(ctx, gpt2, 2, 8, NULL, &ref));
    expect_opens_as(weights, &c, ref);
    /* a training checkpoint: its --out directory and its file */
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_model_load_hf(ctx, gqa, 2, 8, NULL, &ref));
    mkdir(run, 0755);
    EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
    EXPECT_OK(nnt_optim_add_layer(opt, ref));
    EXPECT_OK(nnt_train_state_save(opt, at(run, "checkpoint.safetensors"), NULL));
    nnt_optim_destroy(opt);
    EXPECT_OK(nnt_model_source_config(NULL, run, &c));
    EXPECT_OK(nnt_model_hf_config(NULL, gqa, &want));
    ck_assert(c.family == want.family && c.kv_heads == want.kv_heads &&
              c.hidden == want.hidden && c.layers == want.layers);
    expect_opens_as(run, NULL, ref);
    EXPECT_OK(nnt_model_load_hf(ctx, gqa, 2, 8, NULL, &ref));
    expect_opens_as(at(run, "checkpoint.safetensors"), NULL, ref);
    /* a preset: created and initialised from the seed (5), as nnt_model_create does */
    EXPECT_OK(nnt_model_preset("llama-tiny", &c));
    EXPECT_OK(nnt_model_create(ctx, &c, 2, 8, NULL, &ref));
    EXPECT_OK(nnt_layer_init(ref, 5));
    expect_opens_as("llama-tiny", NULL, ref);
    c.layers = 1;   /* a configuration of the caller's, source NULL */
    EXPECT_OK(nnt_model_create(ctx, &c, 2, 8, NULL, &ref));
    EXPECT_OK(nnt_layer_init(ref, 5));
    expect_opens_as(NULL, &c, ref);
    EXPECT_FAIL_MSG(nnt_model_source_config(NULL, "no-such-model", &c), NNT_E_IO,
                    "no-such-model");
    EXPECT_FAIL_MSG(nnt_model_open(ctx, tmpdir, NULL, 2, 8, NULL, 0, &ref), NNT_E_IO,
                    "neither config.json");
    write_file(at(tmpdir, "junk.bin"), "junk", 4);
    ck_assert_int_lt(nnt_model_source_config(NULL, at(tmpdir, "junk.bin"), &c), 0);
    ck_assert(strstr(nnt_ctx_last_error(NULL), "junk.bin"));
}
END_TEST

/* nnt_hf_size_parse: transformers' max_shard_size text (powers of 1000 and 1024, any case). */
START_TEST(test_size_parse)
{
    static const struct { const char *text; uint64_t bytes; } good[] = {
        {"2GB", 2000000000ULL}, {"1GiB", 1ULL << 30}, {"500mb", 500000000ULL},
        {"3kib", 3072}, {"7", 7}, {"12b", 12}, {"1TB", 1000000000000ULL},
        {"18446744073709551615", UINT64_MAX}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t b = 0;
        EXPECT_OK(nnt_hf_size_parse(good[i].text, &b));
        ck_assert_msg(b == good[i].bytes, "%s: %llu", good[i].text, (unsigned long long)b);
    }
    static const char *const bad[] = {"", "0", "0GB", "-1GB", "2 GB", "2G", "GB", "2GBs",
                                      "1.5GB", "20000000000000000TB", "18446744073709551616"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t b = 5;
        EXPECT_FAIL_MSG(nnt_hf_size_parse(bad[i], &b), NNT_E_INVAL, "is not a size");
        ck_assert_uint_eq(b, 5);
    }
    EXPECT_RC(nnt_hf_size_parse(NULL, NULL), NNT_E_INVAL);
}
END_TEST

START_TEST(test_save_errors)
{
    nnt_layer *a = NULL;
    nnt_hf_save_options o = NNT_HF_SAVE_OPTIONS_INIT;
    EXPECT_FAIL_MSG(nnt_model_save_hf_ex(NULL, at(tmpdir, "x"), &o), NNT_E_INVAL,
                    "nnt_model_save_hf_ex");
    EXPECT_OK(nnt_model_load_hf(ctx, fix("llama_tiny/mqa"), 2, 8, NULL, &a));
    EXPECT_FAIL_MSG(nnt_model_save_hf_ex(a, NULL, &o), NNT_E_INVAL, "dir is NULL");
    o.size = sizeof o - 1;
    EXPECT_FAIL_MSG(nnt_model_save_hf_ex(a, at(tmpdir, "x"), &o), NNT_E_INVAL,
                    "NNT_HF_SAVE_OPTIONS_INIT");
    ck_assert(!exists(at(tmpdir, "x")));
    write_file(at(tmpdir, "file"), "x", 1);
    o.size = sizeof o;
    o.max_shard_bytes = 1000;
    EXPECT_FAIL_MSG(nnt_model_save_hf_ex(a, at(tmpdir, "file"), &o), NNT_E_IO,
                    "not a directory");
    nnt_layer_destroy(a);
}
END_TEST

/* ---- (c) refusals ---------------------------------------------------------------------- */

/* tmpdir/bad: a copy of the gqa shard set whose index has `from` replaced by `to` (the
 * first occurrence; from NULL: the whole index is `to`; both NULL: unchanged). */
static const char *bad_copy(const char *from, const char *to)
{
    static char dir[4400];
    snprintf(dir, sizeof dir, "%s/bad", tmpdir);
    copy_dir(fix("sharded/gqa"), dir);
    char path[4400];
    snprintf(path, sizeof path, "%s", at(dir, "model.safetensors.index.json"));
    size_t len = 0;
    char *text = (char *)slurp(path, &len);
    if (!from && to) {
        write_file(path, to, strlen(to));
    } else if (!from) {
    } else {
        char *p = strstr(text, from);
        ck_assert_msg(p != NULL, "index lacks %s", from);
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        fwrite(text, 1, (size_t)(p - text), f);
        fputs(to, f);
        fputs(p + strlen(from), f);
        ck_assert_int_eq(fclose(f), 0);
    }
    free(text);
    return dir;
}

/* Refused with code and a message holding both what and what2 (may be NULL); *out NULL. */
static void expect_refused(const char *dir_arg, int code, const char *what, const char *what2)
{
    nnt_layer *l = (nnt_layer *)&code;
    char dir[4400];
    snprintf(dir, sizeof dir, "%s", dir_arg);
    EXPECT_FAIL_MSG(nnt_model_load_hf(ctx, dir, 2, 8, NULL, &l), code, what);
    ck_assert_ptr_null(l);
    const char *msg = nnt_ctx_last_error(ctx);
    ck_assert_msg(strstr(msg, "nnt_model_load_hf") != NULL, "%s", msg);
    ck_assert_msg(!what2 || strstr(msg, what2) != NULL, "'%s' lacks '%s'", msg, what2);
}

#define SHARD3 "model-00003-of-00005.safetensors"
#define NORM "\"model.norm.weight\": \"model-00005-of-00005.safetensors\""

static const struct {
    const char *from, *to;
    int code;
    const char *what, *what2;
} BAD_INDEX[] = {
    /* malformed index */
    {NULL, "{\"weight_map\": {", NNT_E_FORMAT, "model.safetensors.index.json", "at byte"},
    {NULL, "[]", NNT_E_FORMAT, "model.safetensors.index.json", "the index must be an object"},
    {NULL, "{}", NNT_E_FORMAT, "model.safetensors.index.json: no key weight_map", NULL},
    {"model-00005-of-00005.safetensors\"\n  }", "model-00005-of-00005.safetensors\"\n  },",
     NNT_E_FORMAT, "model.safetensors.index.json", "(a key)"},   /* a trailing comma */
    {NULL, "{\"weight_map\": {}}", NNT_E_FORMAT, "weight_map is empty", NULL},
    {NULL, "{\"weight_map\": []}", NNT_E_FORMAT, "weight_map must be an object", NULL},
    {NULL, "{\"weight_map\": {\"a\": 1}}", NNT_E_FORMAT, "weight_map[\"a\"] must be a string",
     NULL},
    {"\"metadata\": {", "\"metadata\": 3, \"x\": {", NNT_E_FORMAT,
     "metadata must be an object or null", NULL},
    {"\"weight_map\": {", "\"weight_map\": {" NORM ", ", NNT_E_FORMAT,
     "weight_map: duplicate key \"model.norm.weight\"", "model.safetensors.index.json"},
    {"\"metadata\"", "\"weight_map\": {\"a\": \"b\"}, \"metadata\"", NNT_E_FORMAT,
     "duplicate key \"weight_map\"", NULL},
    /* shard names */
    {NORM, "\"model.norm.weight\": \"../gqa/model-00005-of-00005.safetensors\"", NNT_E_FORMAT,
     "weight_map[\"model.norm.weight\"]: shard name \"../gqa/model-00005-of-00005.safetensors\"",
     "model.safetensors.index.json"},
    {NORM, "\"model.norm.weight\": \"..\"", NNT_E_FORMAT, "shard name \"..\"", NULL},
    {NORM, "\"model.norm.weight\": \"sub\\\\model.safetensors\"", NNT_E_FORMAT,
     "shard name \"sub\\model.safetensors\"", NULL},
    {NORM, "\"model.norm.weight\": \"\"", NNT_E_FORMAT, "shard name \"\"", NULL},
    /* a shard that does not exist */
    {NORM, "\"model.norm.weight\": \"model-00006-of-00005.safetensors\"", NNT_E_IO,
     "weight_map[\"model.norm.weight\"]: shard model-00006-of-00005.safetensors",
     "model.safetensors.index.json"},
    /* a tensor in the map but not in its shard; in a shard but not in the map */
    {NORM, "\"model.norm.weight\": \"model-00001-of-00005.safetensors\"", NNT_E_FORMAT,
     "weight_map[\"model.norm.weight\"] is model-00001-of-00005.safetensors, which holds no "
     "tensor model.norm.weight", "model.safetensors.index.json"},
    {"\"lm_head.weight\": \"model-00001-of-00005.safetensors\",", "", NNT_E_FORMAT,
     "model-00001-of-00005.safetensors: tensor lm_head.weight is not in the weight_map",
     "model.safetensors.index.json"},
};

START_TEST(test_bad_index)
{
    const char *dir = bad_copy(BAD_INDEX[_i].from, BAD_INDEX[_i].to);
    expect_refused(dir, BAD_INDEX[_i].code, BAD_INDEX[_i].what, BAD_INDEX[_i].what2);
}
END_TEST

/* Shard files and configurations that do not fit. */
START_TEST(test_bad_shards)
{
    char cfg[4400];
    /* a truncated shard: lib/io's message names the shard, ours the index and a key */
    const char *dir = bad_copy(NULL, NULL);
    size_t len = 0;
    unsigned char *buf = slurp(at(dir, SHARD3), &len);
    write_file(at(dir, SHARD3), buf, len - 10);
    free(buf);
    expect_refused(dir, NNT_E_FORMAT, at(dir, SHARD3), "model.safetensors.index.json: "
                   "weight_map[\"model.layers.0.self_attn.k_proj.weight\"]: shard " SHARD3);
    /* a shard that is not safetensors at all */
    write_file(at(dir, SHARD3), "{}", 2);
    expect_refused(dir, NNT_E_FORMAT, SHARD3, NULL);
    /* a tensor in two shards: the map's shard holds it and another one too */
    dir = bad_copy(NULL, NULL);
    {
        char err[NNT_IO_ERRLEN];
        nnt_st_reader *r = fixture_open_st_path(at(dir, "model-00005-of-00005.safetensors"));
        nnt_st_writer *w = NULL;
        float *bufs[16];
        size_t nb = 0;
        EXPECT_OK(nnt_st_writer_begin(at(dir, "model-00005-of-00005.safetensors"), &w, err,
                                      sizeof err));
        for (size_t i = 0; i < nnt_st_count(r); i++) {
            const nnt_st_entry *e = nnt_st_entry_at(r, i);
            bufs[nb] = fixture_read(r, e->name, NNT_IO_F32, NULL);
            EXPECT_OK(nnt_st_writer_add(w, e->name, NNT_IO_F32, e->ndim, e->shape, bufs[nb++],
                                        err, sizeof err));
        }
        /* lm_head.weight is in shard 1 by the index */
        nnt_st_reader *r1 = fixture_open_st_path(at(dir, "model-00001-of-00005.safetensors"));
        const nnt_st_entry *e = nnt_st_find(r1, "lm_head.weight");
        bufs[nb] = fixture_read(r1, "lm_head.weight", NNT_IO_F32, NULL);
        EXPECT_OK(nnt_st_writer_add(w, e->name, NNT_IO_F32, e->ndim, e->shape, bufs[nb++], err,
                                    sizeof err));
        EXPECT_OK(nnt_st_writer_finish(w, err, sizeof err));
        for (size_t i = 0; i < nb; i++)
            free(bufs[i]);
        nnt_st_close(r);
        nnt_st_close(r1);
    }
    expect_refused(dir, NNT_E_FORMAT, "model-00005-of-00005.safetensors: tensor lm_head.weight "
                   "is also in", "a tensor in two shards");
    /* a configuration the tensors do not fit: a third layer (named by the index), a wider
     * MLP (named by the shard) */
    dir = bad_copy(NULL, NULL);
    snprintf(cfg, sizeof cfg, "%s", at(dir, "config.json"));
    buf = slurp(cfg, &len);
    char *text = (char *)buf, *p = strstr(text, "\"num_hidden_layers\": 2");
    ck_assert_ptr_nonnull(p);
    p[21] = '3';
    write_file(cfg, text, len);
    expect_refused(dir, NNT_E_FORMAT, "model.safetensors.index.json: no tensor model.layers.2.",
                   NULL);
    p[21] = '2';
    p = strstr(text, "\"intermediate_size\": 48");
    ck_assert_ptr_nonnull(p);
    p[21] = '5';
    write_file(cfg, text, len);
    expect_refused(dir, NNT_E_FORMAT, "model-00002-of-00005.safetensors: tensor "
                   "model.layers.0.mlp.gate_proj.weight has shape (48, 32), expected (58, 32)",
                   NULL);
    free(buf);
    /* no model.safetensors and no index */
    unlink(at(dir, "model.safetensors.index.json"));
    expect_refused(dir, NNT_E_IO, "model.safetensors", NULL);
}
END_TEST

/* GPT-2 through its tree and the single file's name still wins over an index. */
START_TEST(test_single_wins)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/both", tmpdir);
    nnt_layer *a = NULL, *b = NULL;
    copy_dir(fix("sharded/gpt2"), dir);
    size_t len = 0;
    unsigned char *buf = slurp(fix("gpt2_tiny/model.safetensors"), &len);
    write_file(at(dir, "model.safetensors"), buf, len);
    free(buf);
    /* a broken index is not even read */
    write_file(at(dir, "model.safetensors.index.json"), "{", 1);
    EXPECT_OK(nnt_model_load_hf(ctx, dir, 2, 12, NULL, &a));
    EXPECT_OK(nnt_model_load_hf(ctx, fix("gpt2_tiny"), 2, 12, NULL, &b));
    expect_same_params(a, b);
    nnt_layer_destroy(a);
    nnt_layer_destroy(b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("model_shards");
    TCase *tc = tcase_create("shards");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_fixture, 0, 3);
    tcase_add_loop_test(tc, test_save, 0, 3);
    tcase_add_test(tc, test_save_one_file);
    tcase_add_test(tc, test_stale);
    tcase_add_test(tc, test_size_parse);
    tcase_add_test(tc, test_save_errors);
    tcase_add_test(tc, test_save_tokenizer);
    tcase_add_test(tc, test_save_tokenizer_files);
    tcase_add_test(tc, test_model_open);
    tcase_add_loop_test(tc, test_bad_index, 0, (int)(sizeof BAD_INDEX / sizeof BAD_INDEX[0]));
    tcase_add_test(tc, test_bad_shards);
    tcase_add_test(tc, test_single_wins);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
