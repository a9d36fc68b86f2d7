/* SPDX-License-Identifier: MIT */
// include/nnt.hpp, the C++17 wrapper, built with AddressSanitizer where the compiler has it
// (configure's ASAN_CXXFLAGS; the library itself is not instrumented, but ASan's allocator
// sees every malloc and free, so a handle destroyed twice is a double free it reports):
//   - RAII: the classes are move-only; a moved-from object is empty and destroys nothing;
//     destructors release what they own (the context's owned_bytes falls back, and a second
//     context can start once the first object is gone);
//   - errors: nnt::error carries the status code and the library's message (an unknown
//     preset, a missing directory, a shape mismatch, a second context);
//   - a "llama-tiny" model trained a few AdamW steps with gradient accumulation through the
//     wrapper gives exactly the losses and parameters of the same steps through the C API;
//     generation returns the same tokens as nnt_model_generate;
//   - a Hugging Face directory (tests/fixtures/llama_tiny/gqa) loads, saves and reloads;
//     tokenizers, token data and the training state;
//   - nnt::trainer: a few steps with accumulation and a validation through the wrapper give
//     the losses (steps and validation) of the same trainer through the C API, bit for bit;
//     so does a run opened from its description (trainer::open), with its texts.
#include <nnt.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <unistd.h>

// LeakSanitizer is off: StarPU, OpenMP and oneDNN keep allocations to process exit that
// are not ours (thread-local pools, worker structures), and leaks are not what this test
// checks. Set in the program so that it holds however the test is run (make check or by
// hand); ASAN_OPTIONS from the environment still adds to it.
extern "C" const char *__asan_default_options(void);
extern "C" const char *__asan_default_options(void) { return "detect_leaks=0"; }

namespace {

int failures = 0;

#define EXPECT(cond)                                                                           \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            std::fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond);              \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

// Runs f, which must throw nnt::error with code and a message containing part.
template <class F>
void expect_error(int line, int code, const char *part, F &&f)
{
    try {
        f();
        std::fprintf(stderr, "%s:%d: FAIL: no exception (expected %s)\n", __FILE__, line,
                     nnt_strerror(code));
        failures++;
    } catch (const nnt::error &e) {
        if (e.code() != code || std::strstr(e.what(), part) == nullptr) {
            std::fprintf(stderr, "%s:%d: FAIL: got %d (%s) \"%s\", expected %d with \"%s\"\n",
                         __FILE__, line, e.code(), e.name(), e.what(), code, part);
            failures++;
        }
    }
}
#define EXPECT_ERROR(code, part, ...) expect_error(__LINE__, code, part, [&] { __VA_ARGS__; })

#define C_OK(call) EXPECT((call) == NNT_OK)

std::string fixture(const char *sub)
{
    const char *top = std::getenv("top_srcdir");
    return std::string(top ? top : ".") + "/tests/fixtures/" + sub;
}

std::string tmpdir;

// ---- compile-time properties of the classes ------------------------------------------------

template <class T>
constexpr bool move_only = !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> &&
                           std::is_nothrow_move_constructible_v<T> &&
                           std::is_nothrow_move_assignable_v<T>;
static_assert(move_only<nnt::context>);
static_assert(move_only<nnt::tensor>);
static_assert(move_only<nnt::layer>);
static_assert(move_only<nnt::optimizer>);
static_assert(move_only<nnt::tokenizer>);
static_assert(move_only<nnt::data>);
static_assert(move_only<nnt::sft>);
static_assert(move_only<nnt::token_writer>);
static_assert(move_only<nnt::train_state>);
static_assert(move_only<nnt::trainer>);
static_assert(std::is_base_of_v<std::runtime_error, nnt::error>);
static_assert(std::is_trivially_copyable_v<nnt::tensor_ref>);
static_assert(std::is_trivially_copyable_v<nnt::layer_ref>);

// ---- the context ------------------------------------------------------------------------

// Runs before any other context exists: one context per process, so a second create is
// NNT_E_BUSY until the first is destroyed (by its last owner's destructor, once).
void test_context_raii()
{
    nnt::context a = nnt::context::create();
    nnt_ctx *raw = a.get();
    EXPECT(raw != nullptr);
    nnt::context b(std::move(a));
    EXPECT(a.get() == nullptr && !a);
    EXPECT(b.get() == raw);
    EXPECT_ERROR(NNT_E_BUSY, "", nnt::context::create());
    nnt::context c;
    c = std::move(b);   // move-assign into an empty context
    EXPECT(b.get() == nullptr && c.get() == raw);
    EXPECT(c.workers().ncpus >= 1);
    EXPECT(!c.sched().empty());
    { nnt::context gone = std::move(c); }   // destroyed here, once
    EXPECT(c.get() == nullptr);
    nnt::context again = nnt::context::create();   // possible only if it was destroyed
    EXPECT(again.get() != nullptr);
    // release(): the caller destroys
    nnt_ctx *r = again.release();
    EXPECT(again.get() == nullptr);
    C_OK(nnt_ctx_destroy(r));
}

// ---- tensors ------------------------------------------------------------------------------

std::int64_t owned(nnt::context &ctx) { return ctx.mem_stats().owned_bytes; }

void test_tensor_raii(nnt::context &ctx)
{
    std::int64_t base = owned(ctx);
    {
        nnt::tensor t(ctx, NNT_FP32, {4, 6}, {2, 4});
        EXPECT(owned(ctx) == base + 4 * 6 * 4);
        EXPECT((t.shape() == std::vector<std::int64_t>{4, 6}));
        EXPECT((t.tile_shape() == std::vector<std::int64_t>{2, 4}));
        EXPECT((t.grid() == std::vector<std::int64_t>{2, 2}));
        EXPECT(t.numel() == 24 && t.ntiles() == 4 && t.ndim() == 2 && t.dtype() == NNT_FP32);
        nnt_tensor *raw = t.get();
        nnt::tensor u(std::move(t));
        EXPECT(t.get() == nullptr && u.get() == raw);
        nnt::tensor w;
        w = std::move(u);
        EXPECT(u.get() == nullptr && w.get() == raw);
        w = std::move(w);   // self-move keeps it
        EXPECT(w.get() == raw);
        EXPECT(owned(ctx) == base + 96);   // moves release nothing
        // move-assigning over a live tensor destroys the old one
        w = nnt::tensor(ctx, NNT_INT32, {3});
        EXPECT(owned(ctx) == base + 12);
        w.reset();
        EXPECT(owned(ctx) == base && !w);
    }
    EXPECT(owned(ctx) == base);

    // host copies, fills, refs
    nnt::tensor x(ctx, NNT_FP32, {2, 3});
    x.copy_from_host(std::vector<float>{1, 2, 3, 4, 5, 6});
    nnt::tensor y(ctx, NNT_FP32, {2, 3}, {1, 3}), x2(ctx, NNT_FP32, {2, 3});
    nnt::copy(x, y);               // retile
    nnt::copy(y, x2);              // and back
    nnt::axpby(2.0, x, 1.0, x2);   // x2 = 3x
    nnt::copy(x2, y);
    EXPECT((y.to_vector<float>() == std::vector<float>{3, 6, 9, 12, 15, 18}));
    nnt::tensor_ref r = y;
    r.fill(0.5);
    std::vector<float> h(6);
    y.copy_to_host(h);
    EXPECT(h[5] == 0.5f);
    nnt::tensor_ref a[] = {x, y};
    EXPECT(nnt::sumsq(a) == 91.0 + 6 * 0.25);
    // NF4: quantized by convert, its host form bytes (64 codes of 15, absmax 0.5)
    nnt::tensor q(ctx, NNT_NF4, {2, 64}), f(ctx, NNT_FP32, {2, 64});
    f.fill(0.5);
    nnt::convert(f, q);
    std::vector<std::uint8_t> qb = q.to_vector<std::uint8_t>();
    float half = 0.5f;
    EXPECT(qb.size() == 64 + 8 && qb[0] == 0xff && qb[63] == 0xff &&
           std::memcmp(qb.data() + 64, &half, 4) == 0);
    EXPECT_ERROR(NNT_E_SHAPE, "dtype", q.to_vector<float>());

    // errors: the library's code and message
    nnt::tensor z(ctx, NNT_FP32, {3, 2});
    EXPECT_ERROR(NNT_E_SHAPE, "dimension 0 has size 3", nnt::copy(x, z));
    EXPECT_ERROR(NNT_E_SHAPE, "buffer has 20 bytes", x.copy_from_host(std::vector<float>(5)));
    EXPECT_ERROR(NNT_E_SHAPE, "dtype", x.copy_from_host(std::vector<std::int32_t>(6)));
    EXPECT_ERROR(NNT_E_INVAL, "tile", nnt::tensor(ctx, NNT_FP32, {2, 3}, {2}));
    EXPECT_ERROR(NNT_E_INVAL, "", nnt::tensor(ctx, NNT_FP32, {2, -3}));
    try {
        nnt::copy(x, z);
    } catch (const nnt::error &e) {
        EXPECT(std::string(e.what()) == ctx.last_error());
        EXPECT(std::string(e.name()) == nnt_strerror(NNT_E_SHAPE));
    }
}

// ---- training: the wrapper against the C API -----------------------------------------------

constexpr std::int64_t B = 2, T = 8;
constexpr int STEPS = 3, ACCUM = 2;

// Micro-batch m of step s: tokens and next-token targets of a fixed pseudo-random stream.
std::vector<std::int32_t> window(int s, int m, int shift, std::int64_t vocab)
{
    std::vector<std::int32_t> w(B * T);
    for (std::int64_t i = 0; i < B * T; i++)
        w[i] = static_cast<std::int32_t>(((s * ACCUM + m) * 977 + (i + shift) * 131) % vocab);
    return w;
}

nnt_optim_options optim_opts()
{
    nnt::optim_options o;   // AdamW
    o.lr = 1e-2;
    o.weight_decay = 0.1;
    o.grad_clip = 1.0;
    o.accum_steps = ACCUM;
    return o;
}

struct run {
    std::vector<double> losses;
    std::vector<std::vector<float>> params;
    std::vector<std::int32_t> generated;
};

const std::int32_t prompt[] = {1, 2, 3};

run train_c(nnt_ctx *ctx, const nnt_model_config *cfg)
{
    run r;
    nnt_layer *m = nullptr;
    nnt_optim *opt = nullptr;
    nnt_tensor *tok = nullptr, *tgt = nullptr;
    nnt_optim_options oo = optim_opts();
    int64_t shape[2] = {B, T};
    C_OK(nnt_model_create(ctx, cfg, B, T, nullptr, &m));
    C_OK(nnt_optim_create(ctx, &oo, &opt));
    C_OK(nnt_optim_add_layer(opt, m));
    C_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, nullptr, &tok));
    C_OK(nnt_tensor_create(ctx, NNT_INT32, 2, shape, nullptr, &tgt));
    for (int s = 0; s < STEPS; s++) {
        C_OK(nnt_layer_zero_grad(m));
        for (int mb = 0; mb < ACCUM; mb++) {
            std::vector<std::int32_t> x = window(s, mb, 0, cfg->vocab);
            std::vector<std::int32_t> y = window(s, mb, 1, cfg->vocab);
            double loss = 0.0;
            C_OK(nnt_tensor_copy_from_host(tok, x.data(), x.size() * 4));
            C_OK(nnt_tensor_copy_from_host(tgt, y.data(), y.size() * 4));
            C_OK(nnt_layer_set_targets(m, tgt));
            C_OK(nnt_layer_forward(m, tok, nullptr));
            C_OK(nnt_layer_loss(m, &loss));
            C_OK(nnt_layer_backward(m, nullptr, nullptr));
            r.losses.push_back(loss);
        }
        C_OK(nnt_optim_step(opt));
    }
    int64_t n = 0;
    C_OK(nnt_layer_num_params(m, &n, nullptr));
    for (int64_t i = 0; i < n; i++) {
        nnt_param_info p;
        p.size = sizeof p;
        int64_t numel = 0;
        C_OK(nnt_layer_param(m, i, &p));
        C_OK(nnt_tensor_numel(p.value, &numel));
        std::vector<float> v(static_cast<std::size_t>(numel));
        C_OK(nnt_tensor_copy_to_host(p.value, v.data(), v.size() * 4));
        r.params.push_back(v);
    }
    r.generated.resize(5);
    C_OK(nnt_model_generate(m, prompt, 3, 5, nullptr, r.generated.data()));
    nnt_tensor_destroy(tok);
    nnt_tensor_destroy(tgt);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    return r;
}

run train_cpp(nnt::context &ctx, const nnt::model_config &cfg)
{
    run r;
    nnt::layer m = nnt::layer::model(ctx, cfg, B, T);
    nnt::optimizer opt(ctx, optim_opts());
    opt.add(m);
    nnt::tensor tok(ctx, NNT_INT32, {B, T}), tgt(ctx, NNT_INT32, {B, T});
    for (int s = 0; s < STEPS; s++) {
        m.zero_grad();
        for (int mb = 0; mb < ACCUM; mb++) {
            tok.copy_from_host(window(s, mb, 0, cfg.vocab));
            tgt.copy_from_host(window(s, mb, 1, cfg.vocab));
            m.set_targets(tgt);
            nnt::tensor_ref logits = m.forward(tok);
            EXPECT((logits.shape() == std::vector<std::int64_t>{B, T, cfg.vocab}));
            r.losses.push_back(m.loss());
            m.backward();
        }
        opt.step();
    }
    EXPECT(opt.stats().step == STEPS);
    EXPECT(opt.stats().grad_norm > 0.0);
    m.set_targets(tgt);   /* a divisor of 2 B T halves the mean (forward only) */
    m.forward(tok);
    double mean = m.loss();
    m.set_targets(tgt, 2.0 * B * T);
    m.forward(tok);
    EXPECT(std::fabs(m.loss() - mean / 2) <= 1e-12 * mean);
    /* the targets' losses sum to the loss times the divisor; weights as many as they */
    std::vector<float> each(static_cast<std::size_t>(B * T));
    m.target_losses(each);
    double sum = 0.0;
    for (float v : each)
        sum += v;
    EXPECT(std::fabs(sum - mean * B * T) <= 1e-5 * sum);
    std::vector<float> w(each.size(), 0.5f);
    m.set_target_weights(w);
    EXPECT_ERROR(NNT_E_SHAPE, "the last forward had", m.set_target_weights(
                                                        nnt::span<const float>(w.data(), 3)));
    m.clear_target_weights();
    m.set_targets(tgt);
    nnt::tensor pos(ctx, NNT_INT32, {B, T});   /* positions 0 .. T-1 a row: the same loss */
    std::vector<std::int32_t> at(static_cast<std::size_t>(B * T));
    for (std::size_t i = 0; i < at.size(); i++)
        at[i] = static_cast<std::int32_t>(i % T);
    pos.copy_from_host(at);
    m.set_positions(pos);
    m.forward(tok);
    EXPECT(m.loss() == mean);
    m.clear_positions();
    /* label smoothing 0.2: another loss, the plain one again at 0; NEFTune: another loss of
     * a forward that trains */
    m.set_label_smoothing(0.2);
    m.forward(tok);
    EXPECT(m.loss() != mean);
    EXPECT_ERROR(NNT_E_INVAL, "outside [0, 1)", m.set_label_smoothing(1.0));
    m.set_label_smoothing(0.0);
    m.set_neftune(5.0, 3);
    m.forward(tok);
    EXPECT(m.loss() != mean);
    m.set_neftune(0.0);
    m.forward(tok);
    EXPECT(m.loss() == mean);
    for (const nnt::param_info &p : m.params())
        r.params.push_back(p.value.to_vector<float>());
    r.generated = m.generate(prompt, 5);
    return r;
}

void test_training(nnt::context &ctx)
{
    nnt::model_config cfg = nnt::model_preset("llama-tiny");
    EXPECT(cfg.family == NNT_FAMILY_LLAMA && cfg.vocab == 256);
    std::int64_t base = owned(ctx);
    run c = train_c(ctx.get(), &cfg);
    EXPECT(owned(ctx) == base);
    run cpp = train_cpp(ctx, cfg);
    EXPECT(owned(ctx) == base);   // model, optimizer and tensors released
    EXPECT(c.losses.size() == STEPS * ACCUM);
    EXPECT(cpp.losses == c.losses);    // bit for bit: the same calls
    EXPECT(cpp.params == c.params);
    EXPECT(!c.params.empty());
    EXPECT(cpp.generated == c.generated);
    EXPECT(cpp.generated.size() == 5);
    for (std::int32_t t : cpp.generated)
        EXPECT(t >= 0 && t < cfg.vocab);
    EXPECT(c.losses.back() < c.losses.front());   // it learns
    for (std::size_t i = 0; i < c.losses.size(); i++)
        std::printf("micro-batch %zu: loss C %.9g, C++ %.9g\n", i, c.losses[i], cpp.losses[i]);

    // sampling options pass through
    nnt::layer m = nnt::layer::model(ctx, cfg, 1, T);
    nnt::sampling s;
    s.temperature = 1.0;
    s.top_k = 5;
    s.seed = 7;
    std::vector<std::int32_t> g1 = m.generate({4, 5}, 6, &s), g2 = m.generate({4, 5}, 6, &s);
    EXPECT(g1.size() == 6 && g1 == g2);
    nnt::sampling sp = s;   // the fields new in 0.4 through the C++ structure too
    sp.repetition_penalty = 1.5;
    sp.min_p = 0.05;
    std::vector<std::int32_t> g3 = m.generate({4, 5}, 6, &sp), g4 = m.generate({4, 5}, 6, &sp);
    EXPECT(g3.size() == 6 && g3 == g4);
    sp.min_p = 2.0;
    EXPECT_ERROR(NNT_E_INVAL, "min_p 2 must be in [0, 1]", m.generate({4, 5}, 6, &sp));
    // text in, text out: the prompt's ids (bytes below the model's vocabulary), then g1's
    nnt::tokenizer bytes = nnt::tokenizer::bytes();
    std::string text = m.generate_text(bytes.get(), "\x04\x05", 6, &s), want = "\x04\x05";
    for (std::int32_t t : g1)
        want += t < 256 ? std::string(1, static_cast<char>(t)) : "<" + std::to_string(t) + ">";
    EXPECT(text == want);
    EXPECT_ERROR(NNT_E_INVAL, "gives no token", m.generate_text(bytes.get(), "", 2));
    // several sequences side by side: sequence 0 is g1 (seed 7), sequence 1 seed 8's
    std::vector<std::int32_t> prompt45 = {4, 5};
    std::vector<std::vector<std::int32_t>> many = m.generate_n(prompt45, 2, 6, &s);
    s.seed = 8;
    std::vector<std::int32_t> g8 = m.generate({4, 5}, 6, &s);
    EXPECT(many.size() == 2 && many[0] == g1 && many[1] == g8);
    EXPECT_ERROR(NNT_E_INVAL, "nseq", m.generate_n(prompt45, 0, 6, &s));
    // prompts of their own side by side: {4, 5} with seed 7 is g1, {9} with seed 8 as alone
    s.seed = 7;
    std::vector<std::uint64_t> seeds = {7, 8};
    std::vector<std::vector<std::int32_t>> two = m.generate_batch({prompt45, {9}}, 6, &s, seeds);
    s.seed = 8;
    std::vector<std::int32_t> g9 = m.generate({9}, 6, &s);
    EXPECT(two.size() == 2 && two[0] == g1 && two[1] == g9);
    s.seed = 7;   // seeds empty: seed + r
    EXPECT(m.generate_batch({prompt45, {9}}, 6, &s) == two);
    std::vector<std::uint64_t> one_seed = {7};
    EXPECT_ERROR(NNT_E_INVAL, "1 seeds for 2 prompts",
                 m.generate_batch({prompt45, {9}}, 6, &s, one_seed));
    EXPECT_ERROR(NNT_E_INVAL, "prompt 1", m.generate_batch({prompt45, {}}, 6, &s));

    EXPECT_ERROR(NNT_E_INVAL, "no-such-preset", nnt::model_preset("no-such-preset"));
    EXPECT_ERROR(NNT_E_INVAL, "", nnt::layer::model(ctx, cfg, 0, T));
}

// ---- composite layers, Hugging Face directories, state files ---------------------------------

int warnings = 0;
void count_warnings(int level, const char *msg, void *)
{
    if (level <= NNT_LOG_WARN) {
        warnings++;
        std::fprintf(stderr, "nnt: %s\n", msg);
    }
}

void test_layers(nnt::context &ctx)
{
    std::int64_t base = owned(ctx);
    // no warning either: e.g. a child destroyed by its old owner after sequential took it
    nnt::log_set(count_warnings, nullptr);
    {
        std::vector<nnt::layer> children;
        children.push_back(nnt::layer::embedding(ctx, 32, 0, 16));
        children.push_back(nnt::layer::rmsnorm(ctx, 16, 1e-5));
        nnt::layer_ref emb = children[0];
        children.push_back(nnt::layer::lm_head(emb));
        children.push_back(nnt::layer::cross_entropy(ctx));
        nnt::layer seq = nnt::layer::sequential(ctx, std::move(children));
        EXPECT(seq.kind() == NNT_LAYER_SEQUENTIAL && seq.num_children() == 4);
        EXPECT(seq.child(0).kind() == NNT_LAYER_EMBEDDING);
        EXPECT(seq.child(0).get() == emb.get());
        EXPECT(seq.num_params() == 2);   // wte (tied head), norm weight
        EXPECT(seq.num_param_elements() == 32 * 16 + 16);
        EXPECT(!seq.param(0).name.empty());
        EXPECT(owned(ctx) > base);
    }
    EXPECT(owned(ctx) == base);
    nnt::log_set(nullptr, nullptr);
    EXPECT(warnings == 0);
}

// frozen parameters and LoRA adapters through the wrapper: freeze, lora_add, save_peft,
// load_peft, lora_merge, DoRA; a missing adapter or a bad option throws
void test_lora(nnt::context &ctx)
{
    nnt::layer m = nnt::layer::load_hf(ctx, fixture("llama_tiny/gqa"), B, T);
    EXPECT(m.freeze("*.mlp.*") == 6);
    EXPECT(m.param(0).frozen == false && m.param(0).grad);
    EXPECT(m.freeze("*.mlp.*", false) == 6);
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    lo.rank = 2;
    lo.targets = "q_proj";
    std::int64_t before = m.num_params();
    m.lora_add(lo);
    EXPECT(m.num_params() == before + 4);   // A and B of 2 blocks' q_proj
    EXPECT(m.param(0).frozen && !m.param(0).grad);
    std::vector<std::int32_t> with = m.generate({1, 2}, 4);
    std::string dir = tmpdir + "/adapter";
    m.save_peft(dir);
    nnt::layer m2 = nnt::layer::load_hf(ctx, fixture("llama_tiny/gqa"), B, T);
    m2.load_peft(dir);
    EXPECT(m2.generate({1, 2}, 4) == with);
    m2.lora_merge();
    EXPECT(m2.num_params() == before);
    EXPECT_ERROR(NNT_E_IO, "/no/such/adapter", m2.load_peft("/no/such/adapter"));
    // DoRA: a magnitude vector more per module; it starts as the base computes
    nnt::layer m3 = nnt::layer::load_hf(ctx, fixture("llama_tiny/gqa"), B, T);
    std::vector<std::int32_t> plain = m3.generate({1, 2}, 4);
    lo.dora = 1;
    m3.lora_add(lo);
    EXPECT(m3.num_params() == before + 6);   // A, B and lora_magnitude_vector, 2 blocks
    EXPECT(m3.generate({1, 2}, 4) == plain);
    lo.dora = 2;
    nnt::layer m4 = nnt::layer::load_hf(ctx, fixture("llama_tiny/gqa"), B, T);
    EXPECT_ERROR(NNT_E_INVAL, "dora 2", m4.lora_add(lo));
}

void test_hf(nnt::context &ctx)
{
    std::string dir = fixture("llama_tiny/gqa");
    nnt::model_config cfg = nnt::model_hf_config(dir);
    EXPECT(cfg.vocab == 61 && cfg.layers == 2 && cfg.kv_heads == 2);
    nnt::layer m = nnt::layer::load_hf(ctx, dir, B, T);
    EXPECT(m.config().channels == 32);
    EXPECT(m.param(0).name.find("model.") == 0);
    std::string out = tmpdir + "/saved";
    m.save_hf(out);
    nnt::layer m2 = nnt::layer::load_hf(ctx, out, B, T);
    EXPECT(m2.num_params() == m.num_params());
    for (std::int64_t i = 0; i < m.num_params(); i++) {
        EXPECT(m.param(i).name == m2.param(i).name);
        EXPECT(m.param(i).value.to_vector<float>() == m2.param(i).value.to_vector<float>());
    }
    EXPECT(m.generate({1, 2}, 4) == m2.generate({1, 2}, 4));
    // created empty, then read: the loaded model's parameters; unread, it cannot run
    nnt::layer e = nnt::layer::model_empty(ctx, cfg, B, T);
    EXPECT_ERROR(NNT_E_STATE, "holds no data", e.generate({1, 2}, 4));
    e.read_hf(dir);
    for (std::int64_t i = 0; i < m.num_params(); i++)
        EXPECT(m.param(i).value.to_vector<float>() == e.param(i).value.to_vector<float>());

    EXPECT_ERROR(NNT_E_IO, "/no/such/dir", nnt::layer::load_hf(ctx, "/no/such/dir", B, T));
    EXPECT_ERROR(NNT_E_IO, "/no/such/dir", nnt::model_hf_config("/no/such/dir"));
    EXPECT(nnt::model_hf_eos_ids(dir).empty());   // eos_token_id null
    EXPECT(nnt::model_hf_eos_ids(fixture("gpt2_tiny")) == std::vector<std::int32_t>{50256});
    EXPECT_ERROR(NNT_E_IO, "/no/such/dir", nnt::model_hf_eos_ids("/no/such/dir"));
    nnt::sampling hs;   // no generation_config.json: nothing named, nothing changed
    EXPECT(nnt::model_hf_sampling(dir, hs) == 0 && hs.top_k == 40 && hs.temperature == 1.0);
    // any source the way a user names it (nnt_model_open): a preset, created from the seed
    nnt::layer p1 = nnt::layer::open(ctx, "llama-tiny", nullptr, B, T, nullptr, 3);
    EXPECT(p1.config().kv_heads == nnt::model_source_config("llama-tiny").kv_heads);
    EXPECT_ERROR(NNT_E_IO, "no-such-model", nnt::model_source_config("no-such-model"));

    // the training state: the caller's section round-trips, a model loads from it
    nnt::optimizer opt(ctx, nnt::optim_options());
    opt.add(m);
    nnt::train_state st;
    st.set_data_pos(1234);
    st.set_rng({1, 2, 3, 4});
    st.set_options("--lr 0.01");
    nnt::train_state moved = std::move(st);
    EXPECT(st.options().empty() && st.data_pos() == 0);
    EXPECT(moved.options() == "--lr 0.01" && moved.data_pos() == 1234);
    std::string path = tmpdir + "/state.safetensors";
    opt.save_state(path, moved);
    nnt::train_state info = nnt::train_state::info(path);
    EXPECT(info.options() == "--lr 0.01" && info.data_pos() == 1234);
    EXPECT((info.rng() == std::array<std::uint64_t, 4>{1, 2, 3, 4}));
    info.set_options("other");   // replaces (and frees) the library's string
    EXPECT(info.options() == "other" && info.data_pos() == 1234);
    nnt::train_state loaded = opt.load_state(path);
    EXPECT(loaded.options() == "--lr 0.01");
    loaded = std::move(info);
    EXPECT(loaded.options() == "other");
    nnt::train_state st3;
    nnt::layer m3 = nnt::layer::load_train_state(ctx, path, B, T, nullptr, &st3);
    EXPECT(st3.data_pos() == 1234 && m3.config().vocab == 61);
    EXPECT_ERROR(NNT_E_IO, "", nnt::train_state::info(tmpdir + "/none"));
    // a member of an options string (nnt_options_get), nested ones too
    info.set_options("{\"model\": {\"vocab\": 61}, \"tokenizer\": \"json\"}");
    EXPECT(info.option("vocab") == std::optional<std::string>("61"));
    EXPECT(info.option("tokenizer") == std::optional<std::string>("json"));
    EXPECT(!info.option("seed"));   // absent
    EXPECT_ERROR(NNT_E_FORMAT, "nnt_options_get", nnt::options_get("{\"a\" 1}", "a"));
}

void test_tokens(nnt::context &)
{
    nnt::tokenizer bytes = nnt::tokenizer::bytes();
    EXPECT(bytes.vocab_size() == 256);
    std::vector<std::int32_t> ids = bytes.encode("héllo");
    EXPECT(ids.size() == 6 && ids[0] == 'h');
    EXPECT(bytes.decode(ids) == "héllo");
    nnt::tokenizer moved = std::move(bytes);
    EXPECT(!bytes && moved);

    nnt::tokenizer gpt2 = nnt::tokenizer::hf(fixture("hftok/gpt2.json"));
    std::string text = "Hello, world! A longer sentence, to decode with a bigger buffer.";
    std::vector<std::int32_t> t2 = gpt2.encode(text);
    EXPECT(!t2.empty() && t2.size() < text.size());
    EXPECT(gpt2.decode(t2) == text);
    EXPECT(gpt2.encode("").empty());
    EXPECT_ERROR(NNT_E_IO, "", nnt::tokenizer::hf(tmpdir + "/none.json"));

    std::string path = tmpdir + "/text.txt";
    FILE *f = std::fopen(path.c_str(), "w");
    EXPECT(f != nullptr);
    std::fputs("abcdef", f);
    std::fclose(f);
    nnt::data d(path, NNT_DATA_TEXT, &moved, 256);
    EXPECT(d.num_tokens() == 6 && d.format() == NNT_DATA_TEXT);
    EXPECT((d.read(4, 4) == std::vector<std::int32_t>{'e', 'f', 'a', 'b'}));
    EXPECT((d.read_mask(4, 3) == std::vector<std::uint8_t>{1, 1, 1}));   /* text: no mask */
    EXPECT((d.read_starts(4, 3) == std::vector<std::uint8_t>{0, 0, 0}));   /* nor starts */
    EXPECT(d.info().masked == 0 && d.info().tokens == d.num_tokens() && d.info().block == 0);
    nnt::data d2 = std::move(d);
    EXPECT(!d && d2.num_tokens() == 6);
    EXPECT_ERROR(NNT_E_IO, "", nnt::data(tmpdir + "/none.bin"));
}

/* nnt::sft against the C calls on the fixture's ChatML tokenizer (a record of each kind, a
 * prompt), the template named and refused; nnt::token_writer laying them in rows of 128 read
 * back through nnt::data with their mask; a writer dropped unclosed leaves no file. */
void test_sft(nnt::context &ctx)
{
    nnt::tokenizer tok = nnt::tokenizer::hf(fixture("sft/chatml/tokenizer.json"));
    nnt::sft s(tok, fixture("sft/chatml"));
    EXPECT(s.chat_template() == NNT_CHAT_CHATML);
    EXPECT(nnt::sft::template_named("deepseek-r1") == NNT_CHAT_DEEPSEEK_R1);
    EXPECT_ERROR(NNT_E_UNSUPPORTED, "chat template \"nope\"", nnt::sft::template_named("nope"));
    std::string config = fixture("sft/chatml");
    nnt_sft_options o = NNT_SFT_OPTIONS_INIT;
    o.tokenizer_config = config.c_str();
    nnt_sft *c = nullptr;
    C_OK(nnt_sft_create(tok.get(), &o, &c));
    const char *records[] = {
        "{\"text\": \"The cat sat on the mat.\"}",
        "{\"prompt\": \"Question: what colour is the sky?\", \"completion\": \" Blue.\"}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
        "{\"role\": \"assistant\", \"content\": \"Hello!\"}]}"};
    nnt::token_writer_options wo;
    wo.mask = 1, wo.block = 128, wo.pad = s.pad_id(), wo.vocab = tok.vocab_size();
    std::string path = tmpdir + "/sft.bin";
    nnt::token_writer w(path, wo, &ctx);
    std::vector<std::int32_t> all_ids;
    std::vector<std::uint8_t> all_counts;
    for (const char *r : records) {
        nnt::sft::example e = s.encode(r);
        const std::int32_t *ids = nullptr;
        const std::uint8_t *counts = nullptr;
        std::size_t n = 0;
        C_OK(nnt_sft_encode(c, r, std::strlen(r), &ids, &counts, &n));
        EXPECT(n > 0 && e.ids.size() == n && e.counts.size() == n);
        EXPECT(std::equal(ids, ids + n, e.ids.begin()) &&
               std::equal(counts, counts + n, e.counts.begin()));
        EXPECT(n <= 128);
        w.write_example(e.ids, e.counts);
        all_ids.insert(all_ids.end(), e.ids.begin(), e.ids.end());
        all_ids.resize(all_ids.size() + 128 - n, s.pad_id());
        all_counts.insert(all_counts.end(), e.counts.begin(), e.counts.end());
        all_counts[all_counts.size() - n] = 0;   /* a row's first token never counts */
        all_counts.resize(all_counts.size() + 128 - n, 0);
    }
    const char *prompt = "[{\"role\": \"user\", \"content\": \"Hi\"}]";
    nnt::span<const std::int32_t> p = s.encode_prompt(prompt);
    const std::int32_t *pids = nullptr;
    std::size_t np = 0;
    C_OK(nnt_sft_encode_prompt(c, prompt, std::strlen(prompt), &pids, &np));
    EXPECT(np > 0 && p.size() == np && std::equal(pids, pids + np, p.begin()));
    const char *pref = "{\"prompt\": \"The sky is\", \"chosen\": \" blue.\", \"rejected\": "
                       "\" green.\"}";
    std::array<nnt::sft::example, 2> pe = s.encode_preference(pref);
    std::vector<std::int32_t> chosen(pe[0].ids.begin(), pe[0].ids.end());
    const std::int32_t *pi[2];
    const std::uint8_t *pc[2];
    std::size_t pn[2];
    C_OK(nnt_sft_encode_preference(c, pref, std::strlen(pref), pi, pc, pn));
    EXPECT(pn[0] == chosen.size() && std::equal(pi[0], pi[0] + pn[0], chosen.begin()));
    EXPECT(pn[1] > 0 && pc[1][pn[1] - 1] == 1 && pc[1][0] == 0);
    const char *unpaired = "{\"prompt\": \"The sky is\", \"completion\": \" blue.\", "
                           "\"label\": false}";
    int desirable = -1;
    nnt::sft::example ue = s.encode_unpaired(unpaired, &desirable);
    EXPECT(desirable == 0 && ue.ids.size() == chosen.size() &&
           std::equal(ue.ids.begin(), ue.ids.end(), chosen.begin()) &&
           std::equal(ue.counts.begin(), ue.counts.end(), pc[0]));
    EXPECT_ERROR(NNT_E_FORMAT, "paired", s.encode_unpaired(pref, &desirable));
    /* the KTO rows of a paired record: its chosen side (desirable), then its rejected one,
     * each as the unpaired record of that side; of an unpaired record, itself */
    std::vector<std::pair<nnt::sft::example, int>> kr = s.encode_unpaired_rows(pref);
    EXPECT(kr.size() == 2 && kr[0].second == 1 && kr[1].second == 0 &&
           kr[0].first.ids.size() == chosen.size() &&
           std::equal(kr[0].first.ids.begin(), kr[0].first.ids.end(), chosen.begin()) &&
           std::equal(kr[0].first.counts.begin(), kr[0].first.counts.end(), pc[0]));
    const std::int32_t *ri[2];
    const std::uint8_t *rc[2];
    std::size_t rn[2];
    int rd[2], rows = 0;
    C_OK(nnt_sft_encode_unpaired_rows(c, unpaired, std::strlen(unpaired), ri, rc, rn, rd,
                                      &rows));
    EXPECT(rows == 1 && rd[0] == 0 && rn[0] == chosen.size());
    EXPECT(s.encode_unpaired_rows(unpaired).size() == 1);
    EXPECT_ERROR(NNT_E_FORMAT, "nnt_sft_encode_unpaired_rows", s.encode_unpaired_rows("{}"));
    const char *labelled = "{\"text\": \"The sky is blue.\", \"label\": 2}";
    std::int64_t label = -1, c_label = -1;
    nnt::span<const std::int32_t> li = s.encode_labelled(labelled, &label);
    std::vector<std::int32_t> text_ids(li.begin(), li.end());
    const std::int32_t *lids = nullptr;
    std::size_t nl = 0;
    C_OK(nnt_sft_encode_labelled(c, labelled, std::strlen(labelled), &lids, &nl, &c_label));
    EXPECT(label == 2 && c_label == 2 && nl == text_ids.size() && nl > 0 &&
           std::equal(lids, lids + nl, text_ids.begin()));
    nnt_sft_destroy(c);
    EXPECT_ERROR(NNT_E_FORMAT, "the label -1 is not", s.encode_labelled("{\"text\": \"a\", "
                                                                        "\"label\": -1}", &label));
    s.set_label_names({"cold", "mild", "warm"});
    s.encode_labelled("{\"text\": \"The sky is blue.\", \"label\": \"mild\"}", &label);
    EXPECT(label == 1);
    EXPECT_ERROR(NNT_E_INVAL, "both named", s.set_label_names({"a", "a"}));
    s.set_label_names({});
    EXPECT_ERROR(NNT_E_FORMAT, "the label \"mild\" is not",
                 s.encode_labelled("{\"text\": \"a\", \"label\": \"mild\"}", &label));
    std::vector<float> vals(2);
    nnt::span<const std::int32_t> vi = s.encode_valued(
        "{\"text\": \"The sky is blue.\", \"label\": [0.5, 1]}", NNT_PROBLEM_MULTI_LABEL, vals);
    EXPECT(vals[0] == 0.5f && vals[1] == 1.0f && vi.size() == text_ids.size() &&
           std::equal(vi.begin(), vi.end(), text_ids.begin()));
    EXPECT_ERROR(NNT_E_FORMAT, "is 2: a multi-label",
                 s.encode_valued("{\"text\": \"a\", \"label\": [0, 2]}",
                                 NNT_PROBLEM_MULTI_LABEL, vals));
    EXPECT_ERROR(NNT_E_FORMAT, "rejected", s.encode_preference("{\"prompt\": \"a\", "
                                                               "\"chosen\": \"b\"}"));
    EXPECT_ERROR(NNT_E_FORMAT, "nnt_sft_encode: unknown key \"x\"",
                 s.encode("{\"text\": \"a\", \"x\": 1}"));
    std::vector<std::uint8_t> short_counts(2, 1);
    EXPECT_ERROR(NNT_E_INVAL, "2 counts for 3 ids",
                 w.write_example(std::vector<std::int32_t>{1, 2, 3}, short_counts));
    /* two rows, and the third's example until close pads it */
    EXPECT(w.count() == 2 * 128 + static_cast<std::int64_t>(s.encode(records[2]).ids.size()));
    w.close();
    EXPECT(!w);
    nnt::data d(path);
    EXPECT(d.num_tokens() == 3 * 128 && d.info().masked == 1 && d.info().block == 128);
    EXPECT(d.read(0, 3 * 128) == all_ids);
    EXPECT(d.read_mask(0, 3 * 128) == all_counts);
    {
        nnt::token_writer dropped(tmpdir + "/dropped.bin");
        dropped.write(std::vector<std::int32_t>{1, 2, 3});
    }
    EXPECT(std::fopen((tmpdir + "/dropped.bin").c_str(), "r") == nullptr);
}

/* The losses the trainer reports (steps and validations, in order). */
int record_loss(const nnt_trainer_report *r, void *user)
{
    static_cast<std::vector<double> *>(user)->push_back(r->loss);
    return 0;
}

nnt_trainer_options trainer_opts(nnt_data *d, std::vector<double> *losses)
{
    nnt_trainer_options o = NNT_TRAINER_OPTIONS_INIT;
    o.batch = B, o.seq = T, o.accum = 2, o.steps = 3, o.seed = 5;
    o.train_tokens = 300, o.val_data = d, o.val_start = 300, o.val_len = 100;
    o.val_batches = 2, o.val_every = 2, o.callback = record_loss, o.user = losses;
    return o;
}

void test_trainer(nnt::context &ctx)
{
    std::string path = tmpdir + "/trainer.txt";
    FILE *f = std::fopen(path.c_str(), "w");
    EXPECT(f != nullptr);
    for (int i = 0; i < 400; i++)
        std::fputc("the quick brown fox jumps over a lazy dog. "[i * 7 % 43], f);
    std::fclose(f);
    nnt::model_config cfg = nnt::model_preset("llama-tiny");
    std::vector<double> c_losses, cpp_losses;
    {   // the C API
        nnt_layer *m = nullptr;
        nnt_optim *opt = nullptr;
        nnt_data *d = nullptr;
        nnt_trainer *tr = nullptr;
        nnt_optim_options oo = optim_opts();
        C_OK(nnt_model_create(ctx.get(), &cfg, B, T, nullptr, &m));
        C_OK(nnt_layer_init(m, 3));
        C_OK(nnt_optim_create(ctx.get(), &oo, &opt));
        C_OK(nnt_optim_add_layer(opt, m));
        C_OK(nnt_data_open(path.c_str(), NNT_DATA_TEXT, nullptr, 256, &d));
        nnt_trainer_options o = trainer_opts(d, &c_losses);
        C_OK(nnt_trainer_create(m, opt, d, &o, &tr));
        C_OK(nnt_trainer_run(tr, 0));
        nnt_trainer_destroy(tr);
        nnt_data_close(d);
        nnt_optim_destroy(opt);
        nnt_layer_destroy(m);
    }
    nnt::layer m = nnt::layer::model(ctx, cfg, B, T);
    m.init(3);
    nnt::optimizer opt(ctx, optim_opts());
    opt.add(m);
    nnt::data d(path, NNT_DATA_TEXT, nullptr, 256);
    nnt::trainer tr(m, opt, &d, trainer_opts(d.get(), &cpp_losses));
    tr.step();
    tr.run();
    nnt_trainer_info info = tr.info();
    EXPECT(info.step == 3 && info.validations == 2 && info.last_val_step == 3);
    EXPECT(c_losses.size() == 5 && cpp_losses == c_losses);   // 3 steps, 2 validations
    nnt::trainer moved = std::move(tr);
    EXPECT(!tr && moved && moved.info().step == 3);
    EXPECT_ERROR(NNT_E_INVAL, "", moved.save());   // no checkpoint option, no path
    moved.save(tmpdir + "/trainer.safetensors");
    moved.resume(tmpdir + "/trainer.safetensors");
    EXPECT(moved.info().step == 3);
    moved.handle_signals();
    moved.handle_signals(false);

    // a run built from its description (nnt_trainer_open): the wrapper's losses are those of
    // the same description through the C API; its model, tokenizer and texts
    nnt::run_config run;
    nnt_optim_options oo = optim_opts();
    run.model_config = &cfg, run.data = path.c_str(), run.data_format = NNT_DATA_TEXT;
    run.val_split = 0.25, run.val_batches = 2, run.optim = &oo;
    std::vector<double> c_open, cpp_open;
    nnt_trainer_options o = trainer_opts(nullptr, &c_open);
    {
        nnt_trainer *t = nullptr;
        C_OK(nnt_trainer_open(ctx.get(), &run, &o, &t));
        C_OK(nnt_trainer_run(t, 0));
        nnt_trainer_destroy(t);
    }
    o.user = &cpp_open;
    nnt::trainer ot = nnt::trainer::open(ctx, run, o);
    ot.run();
    EXPECT(c_open.size() == 5 && cpp_open == c_open);
    EXPECT(ot.info().train_tokens == 300 && ot.info().val_tokens == 100);
    EXPECT(ot.parts().tok != nullptr && ot.model().kind() == NNT_LAYER_MODEL);
    EXPECT(ot.text(NNT_TRAINER_TEXT_MODEL).rfind("Llama L 2, C 64, NH 4, NKV 2", 0) == 0);
    EXPECT(ot.text(NNT_TRAINER_TEXT_RUN).rfind("trained steps 1..3 in ", 0) == 0);
    EXPECT(ot.text(NNT_TRAINER_TEXT_SUMMARY).find("data:      " + path + ", text") !=
           std::string::npos);
    EXPECT(!nnt::tokenizer::of_source(tmpdir));   // (no tokenizer files there)
    run.val_split = 1.5;
    EXPECT_ERROR(NNT_E_INVAL, "val_split: ", nnt::trainer::open(ctx, run, o));
}

} // namespace


// A reward model (num_labels 1) through the wrappers: the pooled targets as the C call
// writes them, the pooled scores, the pairwise loss with its center term from them; a
// classifier's label names.
void test_classifier(nnt::context &ctx)
{
    nnt::model_config cfg = nnt::model_preset("llama-tiny");
    cfg.num_labels = 1, cfg.has_pad_token = 1, cfg.pad_token_id = 0;
    nnt::layer m = nnt::layer::model(ctx, cfg, B, T);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(B * T)), targets(ids.size()),
        want(ids.size());
    for (std::size_t i = 0; i < ids.size(); i++)
        ids[i] = i % T < T - 1 - (i / T) % 3 ? 1 + static_cast<std::int32_t>(i % 200) : 0;
    nnt::layer::pool_targets(ids, B, T, 0, {}, targets);
    EXPECT(nnt_model_pool_targets(ids.data(), B, T, 0, nullptr, want.data()) == 0);
    EXPECT(targets == want);
    EXPECT_ERROR(NNT_E_INVAL, "B x T", nnt::layer::pool_targets(
                                          nnt::span<const std::int32_t>(ids.data(), 3), B, T,
                                          0, {}, targets));
    nnt::tensor tok(ctx, NNT_INT32, {B, T}), tgt(ctx, NNT_INT32, {B, T});
    tok.copy_from_host(ids);
    tgt.copy_from_host(targets);
    m.set_pairwise_center(0.5);
    m.set_targets(tgt);
    m.forward(tok);
    std::vector<float> r(static_cast<std::size_t>(B));
    m.pooled_logits(r);
    double want_loss = 0.0;
    for (int p = 0; p < B / 2; p++) {
        double z = double(r[2 * p]) - r[2 * p + 1], s = double(r[2 * p]) + r[2 * p + 1];
        want_loss += (std::log1p(std::exp(-z)) + 0.5 * s * s) / (B / 2);
    }
    EXPECT(std::fabs(m.loss() - want_loss) <= 1e-12 * std::fabs(want_loss) + 1e-15);
    m.backward();
    EXPECT_ERROR(NNT_E_STATE, "nnt_model_pooled_logits", m.pooled_logits(r));
    EXPECT_ERROR(NNT_E_INVAL, "center", m.set_pairwise_center(-1.0));
    nnt::layer loss = nnt::layer::pairwise(ctx, -1, 0.25);
    EXPECT_ERROR(NNT_E_INVAL, "nnt_layer_pairwise_create", nnt::layer::pairwise(ctx, -1, -2));
    EXPECT(m.label_name(0) == "LABEL_0");
    m.set_label_names({"good"});
    EXPECT(m.label_name(0) == "good");
    EXPECT_ERROR(NNT_E_INVAL, "n 2: give a name to each", m.set_label_names({"a", "b"}));
    EXPECT_ERROR(NNT_E_INVAL, "label 1 of 1", m.label_name(1));
    m.set_label_names({});
    EXPECT(m.label_name(0) == "LABEL_0");
    /* trained on values: a multi-label classifier's loss from its pooled logits */
    nnt::model_config mc = cfg;
    mc.num_labels = 3, mc.problem_type = NNT_PROBLEM_MULTI_LABEL;
    nnt::layer ml = nnt::layer::model(ctx, mc, B, T);
    std::vector<float> y(static_cast<std::size_t>(B * 3));
    for (std::size_t i = 0; i < y.size(); i++)
        y[i] = i % 4 == 0 ? 1.0f : i % 4 == 1 ? 0.25f : 0.0f;
    ml.set_label_values(y);
    ml.set_targets(tgt);
    ml.forward(tok);
    std::vector<float> z(y.size());
    ml.pooled_logits(z);
    double want_bce = 0.0;
    for (std::size_t i = 0; i < y.size(); i++)   /* -(y log s + (1 - y) log(1 - s)) */
        want_bce -= (y[i] * std::log(1.0 / (1.0 + std::exp(-double(z[i])))) +
                     (1.0 - y[i]) * std::log(1.0 - 1.0 / (1.0 + std::exp(-double(z[i]))))) /
                    double(y.size());
    EXPECT(std::fabs(ml.loss() - want_bce) <= 1e-9 * want_bce);
    ml.backward();
    EXPECT_ERROR(NNT_E_INVAL, "value 0 is 2", ml.set_label_values(std::vector<float>(y.size(), 2.0f)));
    EXPECT_ERROR(NNT_E_INVAL, "no label-values loss", m.set_label_values(y));
    EXPECT_ERROR(NNT_E_INVAL, "problem 0", nnt::layer::label_values(ctx, NNT_PROBLEM_DEFAULT));
    nnt::layer lv = nnt::layer::label_values(ctx, NNT_PROBLEM_REGRESSION);
    /* rows carrying values: written, read back */
    std::string vpath = tmpdir + "/valued.bin";
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.mask = 1, wo.block = 4, wo.row_values = 2;
    nnt::token_writer tw(vpath, wo, &ctx);
    std::vector<std::int32_t> ex = {3, 4, 5};
    std::vector<std::uint8_t> exc = {0, 0, 1};
    tw.write_example_values(ex, exc, std::vector<float>{0.5f, -1.5f});
    tw.write_example_values(ex, exc, std::vector<float>{2.0f, 0.25f});
    tw.close();
    nnt::data vd(vpath);
    EXPECT(vd.info().row_values == 2);
    EXPECT((vd.read_row_values(1, 4) == std::vector<float>{2.0f, 0.25f, 0.5f, -1.5f}));
    EXPECT_ERROR(NNT_E_INVAL, "whole rows of 2", vd.read_row_values(0, 3));
    /* a source's names without its model: a classifier directory's id2label */
    const std::vector<std::string> named = nnt::model_source_label_names(
        fixture("cls_tiny/llama_named"));
    EXPECT(named.size() == 3 && named[0] == "n\xc3\xa9gatif" && named[1] == "say \"maybe\"" &&
           named[2] == "positive\\ok");
    EXPECT(nnt::model_source_label_names(fixture("cls_tiny/llama_lm")).empty());
    EXPECT_ERROR(NNT_E_IO, "nnt_model_source_config",
                 nnt::model_source_label_names(tmpdir + "/absent"));
}

int main()
{
    char tmpl[] = "/tmp/nnt-test-cpp-XXXXXX";
    if (!mkdtemp(tmpl)) {
        std::perror("mkdtemp");
        return 99;
    }
    tmpdir = tmpl;
    try {
        EXPECT(nnt::version().number == NNT_VERSION_NUMBER);
        test_context_raii();
        nnt::context ctx(nnt::ctx_options{});
        test_tensor_raii(ctx);
        test_training(ctx);
        test_layers(ctx);
        test_hf(ctx);
        test_lora(ctx);
        test_tokens(ctx);
        test_sft(ctx);
        test_trainer(ctx);
        test_classifier(ctx);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "FAIL: unexpected exception: %s\n", e.what());
        failures++;
    }
    std::string rm = "rm -rf '" + tmpdir + "'";
    if (std::system(rm.c_str()) != 0)
        failures++;
    if (failures) {
        std::fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    std::printf("ok: nnt.hpp\n");
    return 0;
}
