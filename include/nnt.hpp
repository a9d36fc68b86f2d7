/* SPDX-License-Identifier: MIT */
/* nnt.hpp — C++17 RAII wrappers over the C API of nnt.h. Header-only: every function is
 * inline and calls the C API; libnnt exports nothing for it (no ABI of its own).
 *
 *   nnt::context      owns an nnt_ctx          (nnt_ctx_destroy)
 *   nnt::tensor       owns an nnt_tensor       (nnt_tensor_destroy); nnt::tensor_ref borrows one
 *   nnt::layer        owns an nnt_layer        (nnt_layer_destroy);  nnt::layer_ref borrows one
 *   nnt::optimizer    owns an nnt_optim        (nnt_optim_destroy)
 *   nnt::tokenizer    owns an nnt_tokenizer    (nnt_tokenizer_destroy)
 *   nnt::data         owns an nnt_data         (nnt_data_close)
 *   nnt::train_state  owns an nnt_train_state  (nnt_train_state_clear)
 *   nnt::trainer      owns an nnt_trainer      (nnt_trainer_destroy)
 *
 * Owning classes are move-only; a moved-from object is empty (get() == nullptr) and its
 * destructor does nothing. get() returns the raw handle for any C function; release()
 * gives it up. A failed call throws nnt::error carrying the status code (code()) and the
 * library's message of that failure (what()). Objects that use a context must be
 * destroyed before it: declare the context first. See nnt-cpp(7).
 */
#ifndef NNT_HPP
#define NNT_HPP

#include <nnt.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace nnt {

/* ---- errors ----------------------------------------------------------------------------- */

/* A failed nnt call: code() is the NNT_E_* status, what() the library's message (or the
 * code's name when the library gave none). */
class error : public std::runtime_error {
public:
    error(int code, const std::string &message)
        : std::runtime_error(message.empty() ? std::string(nnt_strerror(code)) : message),
          code_(code)
    {
    }
    int code() const noexcept { return code_; }
    /* nnt_strerror(code()): "invalid argument", ... */
    const char *name() const noexcept { return nnt_strerror(code_); }

private:
    int code_;
};

/* Throws nnt::error for a negative status, with the message of the failure the calling
 * thread saw last (every failure of the library records it: nnt_ctx_last_error(NULL));
 * returns rc otherwise. */
inline int check(int rc)
{
    if (rc < 0)
        throw error(rc, nnt_ctx_last_error(nullptr));
    return rc;
}

namespace detail {

/* A NUL-terminated copy for the C API (a string_view need not end in NUL). */
inline std::string cstr(std::string_view s) { return std::string(s); }

[[noreturn]] inline void fail(int code, const std::string &message) { throw error(code, message); }

/* Owns a T* released by Destroy (a function returning int or void that accepts NULL).
 * Move-only; a moved-from handle is empty. Every owning class of this header is one of
 * these plus its methods: wrapping a new handle type is one class over handle<>. */
template <class T, auto Destroy>
class handle {
public:
    using element_type = T;
    handle() noexcept = default;
    explicit handle(T *p) noexcept : p_(p) {}
    handle(const handle &) = delete;
    handle &operator=(const handle &) = delete;
    handle(handle &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    handle &operator=(handle &&o) noexcept
    {
        if (this != &o)
            reset(std::exchange(o.p_, nullptr));
        return *this;
    }
    ~handle() { reset(); }

    T *get() const noexcept { return p_; }
    /* Give up ownership: the caller destroys the handle. */
    T *release() noexcept { return std::exchange(p_, nullptr); }
    /* Destroy the current handle (if any) and own p. */
    void reset(T *p = nullptr) noexcept
    {
        T *old = std::exchange(p_, p);
        if (old)
            (void)Destroy(old);
    }
    explicit operator bool() const noexcept { return p_ != nullptr; }

private:
    T *p_ = nullptr;
};

/* Runs create(&p) (a C creation function's call with its out argument) and returns
 * Owner(p), or throws. Wrapping a new creation function is one lambda. */
template <class Owner, class F>
Owner make(F &&create)
{
    typename Owner::element_type *p = nullptr;
    check(create(&p));
    return Owner(p);
}

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr nnt_dtype value = NNT_FP32; };
template <> struct dtype_of<std::int32_t> { static constexpr nnt_dtype value = NNT_INT32; };
template <> struct dtype_of<std::uint16_t> { static constexpr nnt_dtype value = NNT_BF16; };
/* NNT_NF4's host form: bytes (its codes, then its absmax) */
template <> struct dtype_of<std::uint8_t> { static constexpr nnt_dtype value = NNT_NF4; };

} // namespace detail

/* ---- a minimal span (C++17 has no std::span) ------------------------------------------
 * Pointer and size, a C array or a contiguous container (std::vector, std::array). Functions
 * that commonly take a literal list also have an std::initializer_list overload. */

template <class T>
class span {
public:
    constexpr span() noexcept = default;
    constexpr span(T *data, std::size_t size) noexcept : data_(data), size_(size) {}
    template <std::size_t N>
    constexpr span(T (&a)[N]) noexcept : data_(a), size_(N) {}
    /* Any contiguous container with data() and size(): std::vector, std::array, ... */
    template <class C, class = std::enable_if_t<
                           !std::is_same_v<std::decay_t<C>, span> &&
                           std::is_convertible_v<decltype(std::declval<C &>().data()), T *>>>
    constexpr span(C &&c) noexcept : data_(c.data()), size_(c.size())
    {
    }
    constexpr T *data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return size_; }
    constexpr bool empty() const noexcept { return size_ == 0; }
    constexpr T *begin() const noexcept { return data_; }
    constexpr T *end() const noexcept { return data_ + size_; }
    constexpr T &operator[](std::size_t i) const noexcept { return data_[i]; }

private:
    T *data_ = nullptr;
    std::size_t size_ = 0;
};

/* ---- option structs with their defaults ------------------------------------------------
 * Each derives from the C struct and starts with its _INIT values, so &opts passes where
 * the C API takes a const nnt_X_options *. */

struct ctx_options : nnt_ctx_options {
    ctx_options() noexcept : nnt_ctx_options NNT_CTX_OPTIONS_INIT {}
};
struct tiling : nnt_tiling {
    tiling() noexcept : nnt_tiling NNT_TILING_INIT {}
};
struct optim_options : nnt_optim_options {
    optim_options() noexcept : nnt_optim_options NNT_OPTIM_OPTIONS_INIT {}
};
struct sampling : nnt_sampling {
    sampling() noexcept : nnt_sampling NNT_SAMPLING_INIT {}
};
struct adam_options : nnt_adam_options {
    adam_options() noexcept : nnt_adam_options NNT_ADAM_OPTIONS_INIT {}
};
struct rope_options : nnt_rope_options {
    rope_options() noexcept : nnt_rope_options NNT_ROPE_OPTIONS_INIT {}
};
struct attention_options : nnt_attention_options {
    attention_options() noexcept : nnt_attention_options NNT_ATTENTION_OPTIONS_INIT {}
};
struct mlp_options : nnt_mlp_options {
    mlp_options() noexcept : nnt_mlp_options NNT_MLP_OPTIONS_INIT {}
};
struct block_options : nnt_block_options {
    block_options() noexcept : nnt_block_options NNT_BLOCK_OPTIONS_INIT {}
};
struct hf_save_options : nnt_hf_save_options {
    hf_save_options() noexcept : nnt_hf_save_options NNT_HF_SAVE_OPTIONS_INIT {}
};
struct trainer_options : nnt_trainer_options {
    trainer_options() noexcept : nnt_trainer_options NNT_TRAINER_OPTIONS_INIT {}
};
/* A whole run described by names (nnt_trainer_open); its pointers stay the caller's. */
struct run_config : nnt_run_config {
    run_config() noexcept : nnt_run_config NNT_RUN_CONFIG_INIT {}
};
/* GPT-2 124M until changed (NNT_MODEL_CONFIG_INIT); see model_preset(). */
struct model_config : nnt_model_config {
    model_config() noexcept : nnt_model_config NNT_MODEL_CONFIG_INIT {}
};
struct gpt_config : nnt_gpt_config {
    gpt_config() noexcept : nnt_gpt_config NNT_GPT_CONFIG_INIT {}
};
struct token_writer_options : nnt_token_writer_options {
    token_writer_options() noexcept : nnt_token_writer_options NNT_TOKEN_WRITER_OPTIONS_INIT {}
};
/* Its pointers stay the caller's (nnt_sft_create). */
struct sft_options : nnt_sft_options {
    sft_options() noexcept : nnt_sft_options NNT_SFT_OPTIONS_INIT {}
};

/* ---- library-wide functions ------------------------------------------------------------ */

struct version_info {
    int number;          /* NNT_VERSION_NUMBER of the linked library */
    const char *string;  /* "0.3.0" */
};
inline version_info version()
{
    version_info v{0, nullptr};
    check(nnt_version(&v.number, &v.string));
    return v;
}
inline void log_set(nnt_log_fn fn, void *user) { check(nnt_log_set(fn, user)); }
inline void log_set_level(int level) { check(nnt_log_set_level(level)); }
inline int log_level()
{
    int level = 0;
    check(nnt_log_get_level(&level));
    return level;
}

/* ---- context ---------------------------------------------------------------------------- */

struct workers_info {
    int ncpus, ncuda;
};
struct rank_info {
    int rank, size;
};

/* The runtime (one live per process). Destroy every object that uses it first. */
class context : public detail::handle<nnt_ctx, nnt_ctx_destroy> {
public:
    context() noexcept = default;                      /* empty: starts nothing */
    explicit context(nnt_ctx *owned) noexcept : handle(owned) {}
    /* nnt_ctx_create(&opts) */
    explicit context(const nnt_ctx_options &opts) { open(&opts); }
    /* nnt_ctx_create(opts); null: the defaults (all cores, default scheduler). */
    static context create(const nnt_ctx_options *opts = nullptr)
    {
        context c;
        c.open(opts);
        return c;
    }

    void wait() const { check(nnt_ctx_wait(get())); }
    workers_info workers() const
    {
        workers_info w{0, 0};
        check(nnt_ctx_workers(get(), &w.ncpus, &w.ncuda));
        return w;
    }
    std::string_view sched() const
    {
        const char *name = nullptr;
        check(nnt_ctx_sched(get(), &name));
        return name ? name : "";
    }
    std::string_view kernels() const
    {
        const char *desc = nullptr;
        check(nnt_ctx_kernels(get(), &desc));
        return desc ? desc : "";
    }
    rank_info rank() const
    {
        rank_info r{0, 1};
        check(nnt_ctx_rank(get(), &r.rank, &r.size));
        return r;
    }
    std::string last_error() const { return nnt_ctx_last_error(get()); }
    void set_precision(nnt_precision p) { check(nnt_ctx_set_precision(get(), p)); }
    nnt_precision precision() const
    {
        nnt_precision p = NNT_PRECISION_FP32;
        check(nnt_ctx_precision(get(), &p));
        return p;
    }
    nnt_mem_stats mem_stats(bool reset = false)
    {
        nnt_mem_stats s{};
        s.size = sizeof s;
        check(nnt_ctx_mem_stats(get(), &s, reset ? 1 : 0));
        return s;
    }
    void trace_start() { check(nnt_trace_start(get())); }
    /* Empty paths: not written. */
    void trace_stop(std::string_view svg_path = {}, std::string_view table_path = {})
    {
        std::string svg(svg_path), table(table_path);
        check(nnt_trace_stop(get(), svg.empty() ? nullptr : svg.c_str(),
                             table.empty() ? nullptr : table.c_str()));
    }

private:
    void open(const nnt_ctx_options *opts)
    {
        nnt_ctx *c = nullptr;
        check(nnt_ctx_create(opts, &c));
        reset(c);
    }
};

/* ---- tensors ---------------------------------------------------------------------------- */

/* The queries, host copies and fills of a tensor, shared by tensor and tensor_ref. Like
 * std::unique_ptr's, const applies to the handle, not to the tensor's values. */
template <class D>
class tensor_api {
    nnt_tensor *h() const noexcept { return static_cast<const D &>(*this).get(); }

public:
    nnt_dtype dtype() const
    {
        nnt_dtype d = NNT_FP32;
        check(nnt_tensor_dtype(h(), &d));
        return d;
    }
    int ndim() const
    {
        int n = 0;
        check(nnt_tensor_ndim(h(), &n));
        return n;
    }
    std::vector<std::int64_t> shape() const { return dims(nnt_tensor_shape); }
    std::vector<std::int64_t> tile_shape() const { return dims(nnt_tensor_tile_shape); }
    std::vector<std::int64_t> grid() const { return dims(nnt_tensor_grid); }
    std::int64_t numel() const
    {
        std::int64_t n = 0;
        check(nnt_tensor_numel(h(), &n));
        return n;
    }
    std::int64_t ntiles() const
    {
        std::int64_t n = 0;
        check(nnt_tensor_ntiles(h(), &n));
        return n;
    }

    /* Whole-tensor host copies; T float (NNT_FP32), int32_t (NNT_INT32), uint16_t
     * (NNT_BF16 bit patterns) or uint8_t (NNT_NF4's bytes: numel / 2 of codes, then
     * numel / 64 float absmax), checked against the dtype (NNT_E_SHAPE). */
    template <class T>
    void copy_from_host(span<const T> src) const
    {
        check_type<T>();
        check(nnt_tensor_copy_from_host(h(), src.data(), src.size() * sizeof(T)));
    }
    template <class T>
    void copy_from_host(const std::vector<T> &src) const { copy_from_host(span<const T>(src)); }
    template <class T>
    void copy_to_host(span<T> dst) const
    {
        check_type<T>();
        check(nnt_tensor_copy_to_host(h(), dst.data(), dst.size() * sizeof(T)));
    }
    template <class T>
    void copy_to_host(std::vector<T> &dst) const { copy_to_host(span<T>(dst)); }
    /* The whole tensor in a new vector of numel() elements (NNT_NF4: of its host form's
     * bytes). */
    template <class T>
    std::vector<T> to_vector() const
    {
        const std::int64_t n = numel();
        std::vector<T> v(static_cast<std::size_t>(dtype() == NNT_NF4 ? n / 2 + n / 16 : n));
        copy_to_host(span<T>(v));
        return v;
    }

    void fill(double value) const { check(nnt_tensor_fill(h(), value)); }
    void fill_uniform(std::uint64_t seed, double low, double high) const
    {
        check(nnt_tensor_fill_uniform(h(), seed, low, high));
    }
    void fill_normal(std::uint64_t seed, double mean, double stddev) const
    {
        check(nnt_tensor_fill_normal(h(), seed, mean, stddev));
    }

private:
    std::vector<std::int64_t> dims(int (*fn)(const nnt_tensor *, std::int64_t *)) const
    {
        std::int64_t d[NNT_MAX_DIMS] = {0};
        check(fn(h(), d));
        return std::vector<std::int64_t>(d, d + ndim());
    }
    template <class T>
    void check_type() const
    {
        if (dtype() != detail::dtype_of<T>::value)
            detail::fail(NNT_E_SHAPE, "nnt::tensor: host element type does not match the "
                                      "tensor's dtype");
    }
};

/* A tensor the caller does not own (a layer's output or parameter, or any raw handle);
 * may be null (an optional argument). */
class tensor_ref : public tensor_api<tensor_ref> {
public:
    tensor_ref() noexcept = default;
    tensor_ref(nnt_tensor *p) noexcept : p_(p) {}
    nnt_tensor *get() const noexcept { return p_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }

private:
    nnt_tensor *p_ = nullptr;
};

class tensor : public detail::handle<nnt_tensor, nnt_tensor_destroy>,
               public tensor_api<tensor> {
public:
    tensor() noexcept = default;
    explicit tensor(nnt_tensor *owned) noexcept : handle(owned) {}
    /* nnt_tensor_create: shape (ndim = its size), tile of the same size or empty (one
     * tile). */
    tensor(context &ctx, nnt_dtype dtype, span<const std::int64_t> shape,
           span<const std::int64_t> tile = {})
    {
        if (!tile.empty() && tile.size() != shape.size())
            detail::fail(NNT_E_INVAL, "nnt::tensor: tile has " + std::to_string(tile.size()) +
                                          " entries, shape " + std::to_string(shape.size()));
        nnt_tensor *t = nullptr;
        check(nnt_tensor_create(ctx.get(), dtype, static_cast<int>(shape.size()), shape.data(),
                                tile.empty() ? nullptr : tile.data(), &t));
        reset(t);
    }
    /* The same with literal lists: nnt::tensor t(ctx, NNT_FP32, {B, T, C}, {1, T, 64}). */
    tensor(context &ctx, nnt_dtype dtype, std::initializer_list<std::int64_t> shape,
           std::initializer_list<std::int64_t> tile = {})
        : tensor(ctx, dtype, span<const std::int64_t>(shape.begin(), shape.size()),
                 span<const std::int64_t>(tile.begin(), tile.size()))
    {
    }
    using handle::get;
    operator tensor_ref() const noexcept { return tensor_ref(get()); }
};

/* ---- tensor operations (nnt_tensor_*; see their man pages). A null tensor_ref passes
 * NULL where the C function accepts it. ---------------------------------------------------- */

inline void copy(tensor_ref src, tensor_ref dst) { check(nnt_tensor_copy(src.get(), dst.get())); }
inline void convert(tensor_ref src, tensor_ref dst)
{
    check(nnt_tensor_convert(src.get(), dst.get()));
}
inline void permute(tensor_ref src, span<const int> perm, tensor_ref dst)
{
    int n = 0;
    check(nnt_tensor_ndim(src.get(), &n));
    if (perm.size() != static_cast<std::size_t>(n))
        detail::fail(NNT_E_INVAL, "nnt::permute: perm has " + std::to_string(perm.size()) +
                                      " entries, the tensor " + std::to_string(n) + " dims");
    check(nnt_tensor_permute(src.get(), perm.data(), dst.get()));
}
inline void scale(tensor_ref x, double alpha) { check(nnt_tensor_scale(x.get(), alpha)); }
inline void axpby(double alpha, tensor_ref x, double beta, tensor_ref y)
{
    check(nnt_tensor_axpby(alpha, x.get(), beta, y.get()));
}
inline void gelu(tensor_ref x, tensor_ref y) { check(nnt_tensor_gelu(x.get(), y.get())); }
inline void gelu_backward(tensor_ref x, tensor_ref dy, tensor_ref dx)
{
    check(nnt_tensor_gelu_backward(x.get(), dy.get(), dx.get()));
}
inline void gelu_erf(tensor_ref x, tensor_ref y) { check(nnt_tensor_gelu_erf(x.get(), y.get())); }
inline void gelu_erf_backward(tensor_ref x, tensor_ref dy, tensor_ref dx)
{
    check(nnt_tensor_gelu_erf_backward(x.get(), dy.get(), dx.get()));
}
inline void add_broadcast(tensor_ref x, tensor_ref y)
{
    check(nnt_tensor_add_broadcast(x.get(), y.get()));
}
inline void sum_leading(double alpha, tensor_ref x, double beta, tensor_ref y)
{
    check(nnt_tensor_sum_leading(alpha, x.get(), beta, y.get()));
}
inline void gemm(nnt_trans ta, nnt_trans tb, double alpha, tensor_ref a, tensor_ref b,
                 double beta, tensor_ref c, int ndim_k = 1, int ndim_batch = 0)
{
    check(nnt_tensor_gemm(ta, tb, alpha, a.get(), b.get(), beta, c.get(), ndim_k, ndim_batch));
}
inline void gemm_ex(nnt_trans ta, nnt_trans tb, double alpha, tensor_ref a, tensor_ref b,
                    double beta, tensor_ref c, int ndim_k, int ndim_batch, nnt_epilogue ep,
                    tensor_ref bias = {}, tensor_ref aux = {})
{
    check(nnt_tensor_gemm_ex(ta, tb, alpha, a.get(), b.get(), beta, c.get(), ndim_k, ndim_batch,
                             ep, bias.get(), aux.get()));
}
inline void layernorm(tensor_ref x, tensor_ref gamma, tensor_ref beta, double eps, tensor_ref y,
                      tensor_ref mean, tensor_ref rstd)
{
    check(nnt_tensor_layernorm(x.get(), gamma.get(), beta.get(), eps, y.get(), mean.get(),
                               rstd.get()));
}
inline void layernorm_backward(tensor_ref x, tensor_ref gamma, tensor_ref mean, tensor_ref rstd,
                               tensor_ref dy, tensor_ref dx, tensor_ref dgamma, tensor_ref dbeta)
{
    check(nnt_tensor_layernorm_backward(x.get(), gamma.get(), mean.get(), rstd.get(), dy.get(),
                                        dx.get(), dgamma.get(), dbeta.get()));
}
inline void rmsnorm(tensor_ref x, tensor_ref gamma, double eps, tensor_ref y, tensor_ref rstd)
{
    check(nnt_tensor_rmsnorm(x.get(), gamma.get(), eps, y.get(), rstd.get()));
}
inline void rmsnorm_backward(tensor_ref x, tensor_ref gamma, tensor_ref rstd, tensor_ref dy,
                             tensor_ref dx, tensor_ref dgamma)
{
    check(nnt_tensor_rmsnorm_backward(x.get(), gamma.get(), rstd.get(), dy.get(), dx.get(),
                                      dgamma.get()));
}
inline void embedding(tensor_ref tokens, tensor_ref wte, tensor_ref wpe, tensor_ref out)
{
    check(nnt_tensor_embedding(tokens.get(), wte.get(), wpe.get(), out.get()));
}
inline void embedding_backward(tensor_ref tokens, tensor_ref dout, tensor_ref dwte,
                               tensor_ref dwpe = {})
{
    check(nnt_tensor_embedding_backward(tokens.get(), dout.get(), dwte.get(), dwpe.get()));
}
inline void attention(tensor_ref q, tensor_ref k, tensor_ref v, double scale, tensor_ref o,
                      tensor_ref lse)
{
    check(nnt_tensor_attention(q.get(), k.get(), v.get(), scale, o.get(), lse.get()));
}
inline void attention_backward(tensor_ref q, tensor_ref k, tensor_ref v, tensor_ref o,
                               tensor_ref lse, tensor_ref dout, double scale, tensor_ref dq,
                               tensor_ref dk, tensor_ref dv)
{
    check(nnt_tensor_attention_backward(q.get(), k.get(), v.get(), o.get(), lse.get(),
                                        dout.get(), scale, dq.get(), dk.get(), dv.get()));
}
inline void attention_kv(tensor_ref q, tensor_ref k, tensor_ref v, std::int64_t past,
                         double scale, tensor_ref o)
{
    check(nnt_tensor_attention_kv(q.get(), k.get(), v.get(), past, scale, o.get()));
}
inline void cross_entropy(tensor_ref logits, tensor_ref targets, std::int32_t ignore_index,
                          tensor_ref loss, tensor_ref lse)
{
    check(nnt_tensor_cross_entropy(logits.get(), targets.get(), ignore_index, loss.get(),
                                   lse.get()));
}
inline void cross_entropy_backward(tensor_ref logits, tensor_ref targets,
                                   std::int32_t ignore_index, tensor_ref lse, double scale,
                                   tensor_ref dlogits)
{
    check(nnt_tensor_cross_entropy_backward(logits.get(), targets.get(), ignore_index, lse.get(),
                                            scale, dlogits.get()));
}
/* Label smoothing eps: the cross-entropy against (1 - eps) one-hot + eps / V, and its
 * gradient with per-row weights (a null tensor_ref: 1). */
inline void cross_entropy_smoothed(tensor_ref logits, tensor_ref targets,
                                   std::int32_t ignore_index, double eps, tensor_ref loss,
                                   tensor_ref lse)
{
    check(nnt_tensor_cross_entropy_smoothed(logits.get(), targets.get(), ignore_index, eps,
                                            loss.get(), lse.get()));
}
inline void cross_entropy_smoothed_backward(tensor_ref logits, tensor_ref targets,
                                            std::int32_t ignore_index, tensor_ref lse,
                                            double eps, double scale, tensor_ref weights,
                                            tensor_ref dlogits)
{
    check(nnt_tensor_cross_entropy_smoothed_backward(logits.get(), targets.get(), ignore_index,
                                                     lse.get(), eps, scale, weights.get(),
                                                     dlogits.get()));
}
inline void swiglu(tensor_ref gate, tensor_ref up, tensor_ref y)
{
    check(nnt_tensor_swiglu(gate.get(), up.get(), y.get()));
}
inline void swiglu_backward(tensor_ref gate, tensor_ref up, tensor_ref dy, tensor_ref dgate,
                            tensor_ref dup)
{
    check(nnt_tensor_swiglu_backward(gate.get(), up.get(), dy.get(), dgate.get(), dup.get()));
}
inline void rope(tensor_ref x, const nnt_rope_options *opts, std::int64_t pos_offset,
                 tensor_ref y)
{
    check(nnt_tensor_rope(x.get(), opts, pos_offset, y.get()));
}
inline void rope_backward(tensor_ref dy, const nnt_rope_options *opts, std::int64_t pos_offset,
                          tensor_ref dx)
{
    check(nnt_tensor_rope_backward(dy.get(), opts, pos_offset, dx.get()));
}
/* RoPE at a position per token, positions (B, T) int32 (packed examples), and its gradient. */
inline void rope_positions(tensor_ref x, const nnt_rope_options *opts, tensor_ref positions,
                           tensor_ref y)
{
    check(nnt_tensor_rope_positions(x.get(), opts, positions.get(), y.get()));
}
inline void rope_positions_backward(tensor_ref dy, const nnt_rope_options *opts,
                                    tensor_ref positions, tensor_ref dx)
{
    check(nnt_tensor_rope_positions_backward(dy.get(), opts, positions.get(), dx.get()));
}
/* Sum of squares of every element of the tensors (waits). */
inline double sumsq(span<const tensor_ref> tensors)
{
    std::vector<nnt_tensor *> raw;
    raw.reserve(tensors.size());
    for (const tensor_ref &t : tensors)
        raw.push_back(t.get());
    double s = 0.0;
    check(nnt_tensors_sumsq(static_cast<int>(raw.size()), raw.data(), &s));
    return s;
}
inline void adam_step(const nnt_adam_options &opts, std::int64_t step, tensor_ref p,
                      tensor_ref g, tensor_ref m, tensor_ref v)
{
    check(nnt_tensor_adam_step(&opts, step, p.get(), g.get(), m.get(), v.get()));
}
inline void sgd_step(double lr, double momentum, double weight_decay, double grad_scale,
                     std::int64_t step, tensor_ref p, tensor_ref g, tensor_ref buf = {})
{
    check(nnt_tensor_sgd_step(lr, momentum, weight_decay, grad_scale, step, p.get(), g.get(),
                              buf.get()));
}

/* ---- model configurations ------------------------------------------------------------- */

/* nnt_model_preset: "gpt2", "tiny", "llama-tiny", "smollm2-135m", ... */
inline model_config model_preset(std::string_view name)
{
    model_config c;
    check(nnt_model_preset(detail::cstr(name).c_str(), &c));
    return c;
}
inline gpt_config gpt_preset(std::string_view name)
{
    gpt_config c;
    check(nnt_gpt_preset(detail::cstr(name).c_str(), &c));
    return c;
}
/* A Hugging Face directory's config.json (nnt_model_hf_config, no context needed). */
inline model_config model_hf_config(std::string_view dir)
{
    model_config c;
    check(nnt_model_hf_config(nullptr, detail::cstr(dir).c_str(), &c));
    return c;
}
/* Its end-of-sequence ids (nnt_model_hf_eos_ids): generation_config.json's, else
 * config.json's; empty when it names none. */
inline std::vector<std::int32_t> model_hf_eos_ids(std::string_view dir)
{
    std::string d = detail::cstr(dir);
    std::int64_t n = 0;
    check(nnt_model_hf_eos_ids(d.c_str(), nullptr, 0, &n));
    std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
    if (n > 0)
        check(nnt_model_hf_eos_ids(d.c_str(), ids.data(), n, &n));
    return ids;
}
/* Its recommended sampling (nnt_model_hf_sampling): generation_config.json's temperature,
 * top_k, top_p, repetition_penalty, min_p, typical_p, epsilon_cutoff, eta_cutoff and
 * no_repeat_ngram_size written into s where it names them; returns the NNT_HF_SAMPLING_* bits
 * of those it wrote (0 without the file). */
inline unsigned model_hf_sampling(std::string_view dir, nnt_sampling &s)
{
    unsigned found = 0;
    check(nnt_model_hf_sampling(detail::cstr(dir).c_str(), &s, &found));
    return found;
}
inline model_config model_train_state_config(std::string_view path)
{
    model_config c;
    check(nnt_model_train_state_config(nullptr, detail::cstr(path).c_str(), &c));
    return c;
}
/* The configuration of a preset, a Hugging Face directory, an llm.c or a training
 * checkpoint (nnt_model_source_config). */
inline model_config model_source_config(std::string_view source)
{
    model_config c;
    check(nnt_model_source_config(nullptr, detail::cstr(source).c_str(), &c));
    return c;
}
/* The names of the labels of the classifier a source holds, without building it
 * (nnt_model_source_label_name; new in 0.4). */
inline std::vector<std::string> model_source_label_names(std::string_view source)
{
    const std::string path = detail::cstr(source);
    const model_config c = model_source_config(path);
    std::vector<std::string> names;
    char buf[256];
    for (std::int64_t k = 0; k < c.num_labels; k++) {
        check(nnt_model_source_label_name(nullptr, path.c_str(), k, buf, sizeof buf));
        names.emplace_back(buf);
    }
    return names;
}
inline tiling model_tiling(context &ctx, const nnt_model_config &cfg, std::int64_t B,
                           std::int64_t T, const nnt_tiling *overrides = nullptr)
{
    tiling t;
    check(nnt_model_tiling(ctx.get(), &cfg, B, T, overrides, &t));
    return t;
}
inline tiling gpt_tiling(context &ctx, const nnt_gpt_config &cfg, std::int64_t B,
                         std::int64_t T, const nnt_tiling *overrides = nullptr)
{
    tiling t;
    check(nnt_gpt_tiling(ctx.get(), &cfg, B, T, overrides, &t));
    return t;
}

/* ---- training state ------------------------------------------------------------------ */

/* The caller's section of a training-state file (data position, RNG words, options
 * string). Move-only; owns the options string (its own copy, or the library's after a
 * load, released with nnt_train_state_clear). */
/* nnt_options_get: the value of member key of an options string (a checkpoint's, as
 * nnt_trainer records it) as text; empty when there is no such member. */
inline std::optional<std::string> options_get(std::string_view options, std::string_view key)
{
    std::string text(options), buf(text.size() + 1, '\0');
    int found = 0;
    check(nnt_options_get(text.c_str(), detail::cstr(key).c_str(), &buf[0], buf.size(),
                          &found));
    if (!found)
        return std::nullopt;
    buf.resize(std::char_traits<char>::length(buf.c_str()));
    return buf;
}

class train_state {
public:
    train_state() noexcept : st_{sizeof(nnt_train_state), 0, {0, 0, 0, 0}, nullptr} {}
    train_state(const train_state &) = delete;
    train_state &operator=(const train_state &) = delete;
    train_state(train_state &&o) noexcept : train_state() { take(o); }
    train_state &operator=(train_state &&o) noexcept
    {
        if (this != &o) {
            clear();
            take(o);
        }
        return *this;
    }
    ~train_state() { clear(); }

    /* nnt_train_state_info: a file's section without loading it. */
    static train_state info(std::string_view path)
    {
        train_state s;
        check(nnt_train_state_info(nullptr, detail::cstr(path).c_str(), s.get()));
        return s;
    }

    std::uint64_t data_pos() const noexcept { return st_.data_pos; }
    void set_data_pos(std::uint64_t pos) noexcept { st_.data_pos = pos; }
    std::array<std::uint64_t, 4> rng() const noexcept
    {
        return {st_.rng[0], st_.rng[1], st_.rng[2], st_.rng[3]};
    }
    void set_rng(const std::array<std::uint64_t, 4> &r) noexcept
    {
        for (int i = 0; i < 4; i++)
            st_.rng[i] = r[static_cast<std::size_t>(i)];
    }
    /* Empty when none. */
    std::string_view options() const noexcept
    {
        return st_.options ? std::string_view(st_.options) : std::string_view();
    }
    /* A member of the options (nnt_options_get); empty when absent or without options. */
    std::optional<std::string> option(std::string_view key) const
    {
        return st_.options ? options_get(st_.options, key) : std::nullopt;
    }
    void set_options(std::string_view s)
    {
        std::string copy(s);
        release_options();
        mine_ = std::move(copy);
        st_.options = &mine_[0];
        mine_set_ = true;
    }
    /* Release the options and reset every field (size kept). */
    void clear() noexcept
    {
        release_options();
        st_ = nnt_train_state{st_.size, 0, {0, 0, 0, 0}, nullptr};
    }
    /* For the C API. A load through it leaves options allocated by the library: this object
     * then releases them with nnt_train_state_clear. Set options only through set_options. */
    nnt_train_state *get() noexcept { return &st_; }
    const nnt_train_state *get() const noexcept { return &st_; }

private:
    /* options points into mine_ (set_options), not at a string of the library. */
    bool options_are_mine() const noexcept
    {
        return mine_set_ && st_.options == &mine_[0];
    }
    void release_options() noexcept
    {
        if (st_.options && !options_are_mine()) {
            nnt_train_state keep = st_;
            nnt_train_state_clear(&st_);   /* frees the library's string, zeroes the rest */
            keep.options = nullptr;
            st_ = keep;
        }
        st_.options = nullptr;
        mine_.clear();
        mine_.shrink_to_fit();
        mine_set_ = false;
    }
    void take(train_state &o) noexcept
    {
        bool mine = o.options_are_mine();
        st_ = o.st_;
        mine_ = std::move(o.mine_);
        mine_set_ = mine;
        if (mine)
            st_.options = &mine_[0];   /* a moved string may have moved its characters */
        o.st_ = nnt_train_state{o.st_.size, 0, {0, 0, 0, 0}, nullptr};
        o.mine_.clear();
        o.mine_set_ = false;
    }

    nnt_train_state st_;
    std::string mine_;
    bool mine_set_ = false;
};

/* ---- layers and models ------------------------------------------------------------------ */

/* One parameter of a layer tree (nnt_layer_param): its tensors belong to the layer. */
struct param_info {
    std::string_view name;
    tensor_ref value;
    tensor_ref grad;         /* null when frozen */
    bool decay;
    bool frozen;
};

class layer_ref;

/* What every layer does, shared by layer and layer_ref. */
template <class D>
class layer_api {
    nnt_layer *h() const noexcept { return static_cast<const D &>(*this).get(); }

public:
    nnt_layer_kind kind() const
    {
        nnt_layer_kind k = NNT_LAYER_SEQUENTIAL;
        check(nnt_layer_kind_of(h(), &k));
        return k;
    }
    int num_children() const
    {
        int n = 0;
        check(nnt_layer_num_children(h(), &n));
        return n;
    }
    /* The i-th child (owned by this layer). Defined after layer_ref. */
    layer_ref child(int i) const;

    /* Targets (copied); forward then also computes the mean loss. */
    void set_targets(tensor_ref targets) { check(nnt_layer_set_targets(h(), targets.get())); }
    /* The loss of the following forwards: the summed cross-entropy / divisor (0: the mean). */
    void set_targets(tensor_ref targets, double divisor)
    {
        check(nnt_layer_set_targets_ex(h(), targets.get(), divisor));
    }
    void clear_targets() { check(nnt_layer_set_targets(h(), nullptr)); }
    /* Packed rows: each token's position in its example, (B, T) int32 (not copied: keep it
     * until the forwards are submitted); the examples attend to themselves only. */
    void set_positions(tensor_ref positions)
    {
        check(nnt_layer_set_positions(h(), positions.get()));
    }
    void clear_positions() { check(nnt_layer_set_positions(h(), nullptr)); }
    /* y = layer(x); y belongs to the layer, valid until its next forward or backward. */
    tensor_ref forward(tensor_ref x)
    {
        nnt_tensor *y = nullptr;
        check(nnt_layer_forward(h(), x.get(), &y));
        return y;
    }
    /* Mean loss of the last forward with targets (waits). */
    double loss() const
    {
        double l = 0.0;
        check(nnt_layer_loss(h(), &l));
        return l;
    }
    /* Every target's loss of the last forward with targets into out (its size the targets'
     * count), 0 where ignored (waits). */
    void target_losses(span<float> out) const
    {
        check(nnt_layer_target_losses(h(), out.data(), static_cast<std::int64_t>(out.size())));
    }
    /* Weights of the last forward's targets (as many) for the next backward: the gradient of
     * sum_t w_t loss_t / divisor. */
    void set_target_weights(span<const float> weights)
    {
        check(nnt_layer_set_target_weights(h(), weights.data(),
                                           static_cast<std::int64_t>(weights.size())));
    }
    void clear_target_weights() { check(nnt_layer_set_target_weights(h(), nullptr, 0)); }
    /* Label smoothing eps in [0, 1) of the cross-entropy of the following forwards and
     * backwards (transformers' label_smoothing_factor); 0: none. */
    void set_label_smoothing(double eps) { check(nnt_layer_set_label_smoothing(h(), eps)); }
    /* NEFTune: uniform noise in +-alpha / sqrt(T C) on the embeddings of the following
     * forwards that train, drawn from seed; 0: none. */
    void set_neftune(double alpha, std::uint64_t seed = 0)
    {
        check(nnt_layer_set_neftune(h(), alpha, seed));
    }
    /* A classifier's logits of the last forward with targets at each row's pooled position
     * into out (B x num_labels floats; before the backward). */
    void pooled_logits(span<float> out)
    {
        check(nnt_model_pooled_logits(h(), out.data(), static_cast<std::int64_t>(out.size())));
    }
    /* A classifier's label names (id2label), num_labels of them (empty: LABEL_0, ...). */
    void set_label_names(const std::vector<std::string> &names)
    {
        std::vector<const char *> ptrs;
        for (const std::string &n : names)
            ptrs.push_back(n.c_str());
        check(nnt_model_set_label_names(h(), ptrs.empty() ? nullptr : ptrs.data(),
                                        static_cast<std::int64_t>(ptrs.size())));
    }
    /* The name of a classifier's label k. */
    std::string label_name(std::int64_t k) const
    {
        char buf[256];
        check(nnt_model_label_name(h(), k, buf, sizeof buf));
        return buf;
    }
    /* The center term of this layer's (or a reward model's) pairwise loss. */
    void set_pairwise_center(double center)
    {
        check(nnt_layer_set_pairwise_center(h(), center));
    }
    /* The values (B * num_labels, row by row) of this layer's (or a classifier's)
     * regression or multi-label loss (nnt_layer_set_label_values; new in 0.4). */
    void set_label_values(const std::vector<float> &values)
    {
        check(nnt_layer_set_label_values(h(), values.data(),
                                         static_cast<std::int64_t>(values.size())));
    }
    /* Backward of the last forward; dy null for a layer with targets. Returns dx (owned by
     * the layer; null for an embedding). Gradients accumulate. */
    tensor_ref backward(tensor_ref dy = {})
    {
        nnt_tensor *dx = nullptr;
        check(nnt_layer_backward(h(), dy.get(), &dx));
        return dx;
    }
    void zero_grad() { check(nnt_layer_zero_grad(h())); }
    void clear_grad() { check(nnt_layer_clear_grad(h())); }
    /* Number of parameter tensors of the tree, and of their elements. */
    std::int64_t num_params() const
    {
        std::int64_t n = 0;
        check(nnt_layer_num_params(h(), &n, nullptr));
        return n;
    }
    std::int64_t num_param_elements() const
    {
        std::int64_t n = 0;
        check(nnt_layer_num_params(h(), nullptr, &n));
        return n;
    }
    param_info param(std::int64_t i) const
    {
        nnt_param_info p{};
        p.size = sizeof p;
        check(nnt_layer_param(h(), i, &p));
        return param_info{p.name ? p.name : "", p.value, p.grad, p.decay != 0, p.frozen != 0};
    }
    std::vector<param_info> params() const
    {
        std::vector<param_info> v;
        std::int64_t n = num_params();
        v.reserve(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; i++)
            v.push_back(param(i));
        return v;
    }
    void init(std::uint64_t seed) { check(nnt_layer_init(h(), seed)); }
    void set_recompute(bool enable) { check(nnt_layer_set_recompute(h(), enable ? 1 : 0)); }
    /* Freeze (or unfreeze) the parameters whose names match a glob (nnt_layer_freeze); the
     * number matched. */
    std::int64_t freeze(std::string_view pattern, bool frozen = true)
    {
        return freeze(pattern, frozen ? NNT_FREEZE : NNT_UNFREEZE);
    }
    /* The same in a mode (NNT_FREEZE_KEEP_FP32, NNT_FREEZE_NF4: QLoRA's base). */
    std::int64_t freeze(std::string_view pattern, nnt_freeze_mode mode)
    {
        std::int64_t n = 0;
        check(nnt_layer_freeze(h(), detail::cstr(pattern).c_str(), mode, &n));
        return n;
    }

    /* LoRA adapters (nnt_model_lora_add, _merge) and PEFT's files. */
    void lora_add(const nnt_lora_options &opts) { check(nnt_model_lora_add(h(), &opts)); }
    void lora_merge() { check(nnt_model_lora_merge(h())); }
    void save_peft(std::string_view dir)
    {
        check(nnt_model_save_peft(h(), detail::cstr(dir).c_str()));
    }
    /* A Hugging Face directory's weights into this model (nnt_model_read_hf). */
    void read_hf(std::string_view dir)
    {
        check(nnt_model_read_hf(h(), detail::cstr(dir).c_str()));
    }
    void load_peft(std::string_view dir)
    {
        check(nnt_model_load_peft(h(), detail::cstr(dir).c_str()));
    }

    /* Models (nnt_model_create, nnt_model_load_hf, nnt_gpt_*). */
    model_config config() const
    {
        model_config c;
        check(nnt_model_config_of(h(), &c));
        return c;
    }
    gpt_config gpt_config_of() const
    {
        gpt_config c;
        check(nnt_gpt_config_of(h(), &c));
        return c;
    }
    /* ngen tokens after the prompt (nnt_model_generate); s null: greedy. */
    std::vector<std::int32_t> generate(span<const std::int32_t> prompt, std::int64_t ngen,
                                       const nnt_sampling *s = nullptr)
    {
        std::vector<std::int32_t> out(static_cast<std::size_t>(ngen > 0 ? ngen : 0));
        check(nnt_model_generate(h(), prompt.data(), static_cast<std::int64_t>(prompt.size()),
                                 ngen, s, out.data()));
        return out;
    }
    std::vector<std::int32_t> generate(std::initializer_list<std::int32_t> prompt,
                                       std::int64_t ngen, const nnt_sampling *s = nullptr)
    {
        return generate(span<const std::int32_t>(prompt.begin(), prompt.size()), ngen, s);
    }
    /* nseq continuations of the prompt side by side (nnt_model_generate_n): one vector of
     * ngen tokens a sequence, sequence r with s's seed + r. */
    std::vector<std::vector<std::int32_t>> generate_n(span<const std::int32_t> prompt,
                                                      std::int64_t nseq, std::int64_t ngen,
                                                      const nnt_sampling *s = nullptr)
    {
        std::size_t rows = static_cast<std::size_t>(nseq > 0 ? nseq : 0);
        std::size_t cols = static_cast<std::size_t>(ngen > 0 ? ngen : 0);
        std::vector<std::int32_t> all(rows * cols);
        check(nnt_model_generate_n(h(), prompt.data(), static_cast<std::int64_t>(prompt.size()),
                                   nseq, ngen, s, all.data()));
        std::vector<std::vector<std::int32_t>> out(rows);
        for (std::size_t r = 0; r < rows; r++)
            out[r].assign(all.begin() + static_cast<std::ptrdiff_t>(r * cols),
                          all.begin() + static_cast<std::ptrdiff_t>((r + 1) * cols));
        return out;
    }
    /* prompts of their own continued side by side (nnt_model_generate_batch): one vector of
     * ngen tokens a prompt, prompt r with seeds[r] (seeds empty: s's seed + r). */
    std::vector<std::vector<std::int32_t>>
    generate_batch(const std::vector<std::vector<std::int32_t>> &prompts, std::int64_t ngen,
                   const nnt_sampling *s = nullptr, span<const std::uint64_t> seeds = {})
    {
        std::size_t rows = prompts.size(), cols = static_cast<std::size_t>(ngen > 0 ? ngen : 0);
        if (!seeds.empty() && seeds.size() != rows)
            detail::fail(NNT_E_INVAL, "nnt::model::generate_batch: " +
                                         std::to_string(seeds.size()) + " seeds for " +
                                         std::to_string(rows) + " prompts");
        std::vector<const std::int32_t *> ids(rows);
        std::vector<std::int64_t> lens(rows);
        for (std::size_t r = 0; r < rows; r++) {
            ids[r] = prompts[r].data();
            lens[r] = static_cast<std::int64_t>(prompts[r].size());
        }
        std::vector<std::int32_t> all(rows * cols);
        check(nnt_model_generate_batch(h(), static_cast<std::int64_t>(rows), ids.data(),
                                       lens.data(), seeds.empty() ? nullptr : seeds.data(),
                                       ngen, s, all.data()));
        std::vector<std::vector<std::int32_t>> out(rows);
        for (std::size_t r = 0; r < rows; r++)
            out[r].assign(all.begin() + static_cast<std::ptrdiff_t>(r * cols),
                          all.begin() + static_cast<std::ptrdiff_t>((r + 1) * cols));
        return out;
    }
    /* The prompt and ngen tokens after it as text (nnt_model_generate_text; tok: a
     * tokenizer's get()). */
    std::string generate_text(const nnt_tokenizer *tok, std::string_view prompt,
                              std::int64_t ngen, const nnt_sampling *s = nullptr)
    {
        char *text = nullptr;
        std::size_t len = 0;
        check(nnt_model_generate_text(h(), tok, detail::cstr(prompt).c_str(), ngen, s, &text,
                                      &len));
        std::string out(text, len);
        std::free(text);
        return out;
    }
    void save_hf(std::string_view dir) { check(nnt_model_save_hf(h(), detail::cstr(dir).c_str())); }
    void save_hf(std::string_view dir, const nnt_hf_save_options &opts)
    {
        check(nnt_model_save_hf_ex(h(), detail::cstr(dir).c_str(), &opts));
    }
    void save_llmc(std::string_view path)
    {
        check(nnt_gpt_save_llmc(h(), detail::cstr(path).c_str()));
    }
    void save_safetensors(std::string_view path)
    {
        check(nnt_gpt_save_safetensors(h(), detail::cstr(path).c_str()));
    }
};

/* A layer the caller does not own (a child, or any raw handle). */
class layer_ref : public layer_api<layer_ref> {
public:
    layer_ref() noexcept = default;
    layer_ref(nnt_layer *p) noexcept : p_(p) {}
    nnt_layer *get() const noexcept { return p_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }

private:
    nnt_layer *p_ = nullptr;
};

template <class D>
inline layer_ref layer_api<D>::child(int i) const
{
    nnt_layer *c = nullptr;
    check(nnt_layer_child(h(), i, &c));
    return c;
}

/* A layer tree the caller owns: a whole model or a building block. */
class layer : public detail::handle<nnt_layer, nnt_layer_destroy>, public layer_api<layer> {
public:
    layer() noexcept = default;
    explicit layer(nnt_layer *owned) noexcept : handle(owned) {}
    using handle::get;
    operator layer_ref() const noexcept { return layer_ref(get()); }

    /* ---- models (B sequences of T tokens; tiling null: automatic) */
    /* A classifier's targets (B x T) for rows ids (B x T): each row's label (labels empty:
     * 0, a reward model's) at its last position whose id is not pad_id (< 0: none), -1
     * elsewhere (nnt_model_pool_targets(3)). */
    static void pool_targets(span<const std::int32_t> ids, std::int64_t B, std::int64_t T,
                             std::int64_t pad_id, span<const std::int32_t> labels,
                             span<std::int32_t> targets)
    {
        auto bt = static_cast<std::size_t>(B > 0 && T > 0 ? B * T : 0);
        if (ids.size() != bt || targets.size() != bt ||
            (labels.size() && labels.size() != static_cast<std::size_t>(B)))
            throw error(NNT_E_INVAL, "nnt::layer::pool_targets: ids and targets hold B x T "
                                     "ids, labels B or none");
        check(nnt_model_pool_targets(ids.data(), B, T, pad_id,
                                     labels.size() ? labels.data() : nullptr, targets.data()));
    }
    static layer model(context &ctx, const nnt_model_config &cfg, std::int64_t B, std::int64_t T,
                       const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_model_create(ctx.get(), &cfg, B, T, t, o);
        });
    }
    /* Its parameters left unwritten (nnt_model_create_empty): freeze it or add adapters,
     * then read_hf or init. */
    static layer model_empty(context &ctx, const nnt_model_config &cfg, std::int64_t B,
                             std::int64_t T, const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_model_create_empty(ctx.get(), &cfg, B, T, t, o);
        });
    }
    /* A Hugging Face directory (config.json and model.safetensors or its shards). */
    /* Whatever source names (nnt_model_open): a preset or (empty source) cfg created from
     * seed, a directory or checkpoint loaded, GPT-2 weights in configuration cfg. */
    static layer open(context &ctx, std::string_view source, const nnt_model_config *cfg,
                      std::int64_t B, std::int64_t T, const nnt_tiling *t = nullptr,
                      std::uint64_t seed = 0)
    {
        std::string s(source);
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_model_open(ctx.get(), s.empty() ? nullptr : s.c_str(), cfg, B, T, t,
                                  seed, o);
        });
    }
    static layer load_hf(context &ctx, std::string_view dir, std::int64_t B, std::int64_t T,
                         const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_model_load_hf(ctx.get(), detail::cstr(dir).c_str(), B, T, t, o);
        });
    }
    /* A training-state file's configuration and parameters; st (may be null) gets its
     * caller's section. */
    static layer load_train_state(context &ctx, std::string_view path, std::int64_t B,
                                  std::int64_t T, const nnt_tiling *t = nullptr,
                                  train_state *st = nullptr)
    {
        if (st)
            st->clear();
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_model_load_train_state(ctx.get(), detail::cstr(path).c_str(), B, T, t,
                                              st ? st->get() : nullptr, o);
        });
    }
    static layer gpt(context &ctx, const nnt_gpt_config &cfg, std::int64_t B, std::int64_t T,
                     const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_gpt_create(ctx.get(), &cfg, B, T, t, o);
        });
    }
    static layer gpt_load_llmc(context &ctx, std::string_view path, std::int64_t B,
                               std::int64_t T, const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_gpt_load_llmc(ctx.get(), detail::cstr(path).c_str(), B, T, t, o);
        });
    }
    static layer gpt_load_safetensors(context &ctx, std::string_view path,
                                      const nnt_gpt_config &cfg, std::int64_t B, std::int64_t T,
                                      const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_gpt_load_safetensors(ctx.get(), detail::cstr(path).c_str(), &cfg, B, T,
                                            t, o);
        });
    }

    /* ---- building blocks (nnt_layer_*_create) */
    static layer embedding(context &ctx, std::int64_t vocab, std::int64_t max_seq,
                           std::int64_t channels, const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_embedding_create(ctx.get(), vocab, max_seq, channels, t, o);
        });
    }
    static layer layernorm(context &ctx, std::int64_t channels, double eps,
                           const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_layernorm_create(ctx.get(), channels, eps, t, o);
        });
    }
    static layer rmsnorm(context &ctx, std::int64_t channels, double eps,
                         const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_rmsnorm_create(ctx.get(), channels, eps, t, o);
        });
    }
    /* flags: NNT_LINEAR_BIAS, NNT_LINEAR_GELU */
    static layer linear(context &ctx, std::int64_t in, std::int64_t out, unsigned flags = 0,
                        const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_linear_create(ctx.get(), in, out, flags, t, o);
        });
    }
    static layer attention(context &ctx, std::int64_t channels, std::int64_t heads,
                           const nnt_attention_options *opts = nullptr,
                           const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_attention_create_ex(ctx.get(), channels, heads, opts, t, o);
        });
    }
    static layer mlp(context &ctx, std::int64_t channels, std::int64_t hidden,
                     const nnt_mlp_options *opts = nullptr, const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_mlp_create_ex(ctx.get(), channels, hidden, opts, t, o);
        });
    }
    static layer block(context &ctx, std::int64_t channels, std::int64_t heads,
                       std::int64_t hidden, const nnt_block_options *opts = nullptr,
                       const nnt_tiling *t = nullptr)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_block_create_ex(ctx.get(), channels, heads, hidden, opts, t, o);
        });
    }
    /* Ties the token matrix of embedding, which must outlive the head. */
    static layer lm_head(layer_ref embedding) { return detail::make<layer>([&](nnt_layer **o) {
     return nnt_layer_lm_head_create(embedding.get(), o);
 }); }
    static layer cross_entropy(context &ctx, std::int32_t ignore_index = -1)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_cross_entropy_create(ctx.get(), ignore_index, o);
        });
    }
    /* The pairwise loss of reward models (nnt_layer_pairwise_create(3)). */
    static layer pairwise(context &ctx, std::int32_t ignore_index = -1, double center = 0.0)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_pairwise_create(ctx.get(), ignore_index, center, o);
        });
    }
    /* The regression or multi-label loss of classifiers (nnt_layer_label_values_create(3),
     * problem NNT_PROBLEM_REGRESSION or NNT_PROBLEM_MULTI_LABEL; new in 0.4). */
    static layer label_values(context &ctx, int problem, std::int32_t ignore_index = -1)
    {
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_label_values_create(ctx.get(), ignore_index, problem, o);
        });
    }
    /* Takes the children (they are empty afterwards, also when this throws: the C function
     * destroys them on failure). */
    static layer sequential(context &ctx, std::vector<layer> children)
    {
        std::vector<nnt_layer *> raw;
        raw.reserve(children.size());
        for (layer &c : children)
            raw.push_back(c.release());
        return detail::make<layer>([&](nnt_layer **o) {
            return nnt_layer_sequential_create(ctx.get(), static_cast<int>(raw.size()),
                                               raw.data(), o);
        });
    }
};

/* ---- optimizers ------------------------------------------------------------------------ */

/* An optimizer over parameters that must outlive it (declare the model first). */
class optimizer : public detail::handle<nnt_optim, nnt_optim_destroy> {
public:
    optimizer() noexcept = default;
    explicit optimizer(nnt_optim *owned) noexcept : handle(owned) {}
    optimizer(context &ctx, const nnt_optim_options &opts)
    {
        nnt_optim *o = nullptr;
        check(nnt_optim_create(ctx.get(), &opts, &o));
        reset(o);
    }
    /* Every parameter of a layer tree, with its name and decay flag. */
    void add(layer_ref l) { check(nnt_optim_add_layer(get(), l.get())); }
    void add_param(std::string_view name, tensor_ref value, tensor_ref grad, bool decay)
    {
        check(nnt_optim_add_param(get(), detail::cstr(name).c_str(), value.get(), grad.get(),
                                  decay ? 1 : 0));
    }
    void set_decay(std::string_view name, bool decay)
    {
        check(nnt_optim_set_decay(get(), detail::cstr(name).c_str(), decay ? 1 : 0));
    }
    /* One update (gradients divided by accum_steps, clipped, then the rule). */
    void step() { check(nnt_optim_step(get())); }
    /* Update each parameter during the next backward, once its gradient is complete. */
    void update_in_backward() { check(nnt_optim_update_in_backward(get())); }
    nnt_optim_stats stats() const
    {
        nnt_optim_stats s{};
        s.size = sizeof s;
        check(nnt_optim_stats_get(get(), &s));
        return s;
    }
    double lr_at(std::int64_t step) const
    {
        double lr = 0.0;
        check(nnt_optim_lr_at(get(), step, &lr));
        return lr;
    }
    /* nnt_train_state_save: parameters, moments, step and st's section. */
    void save_state(std::string_view path)
    {
        check(nnt_train_state_save(get(), detail::cstr(path).c_str(), nullptr));
    }
    void save_state(std::string_view path, const train_state &st)
    {
        check(nnt_train_state_save(get(), detail::cstr(path).c_str(), st.get()));
    }
    /* nnt_train_state_load; returns the file's caller section. */
    train_state load_state(std::string_view path)
    {
        train_state st;
        check(nnt_train_state_load(get(), detail::cstr(path).c_str(), st.get()));
        return st;
    }
};

/* ---- tokenizers and token data ----------------------------------------------------------- */

class tokenizer : public detail::handle<nnt_tokenizer, nnt_tokenizer_destroy> {
public:
    tokenizer() noexcept = default;
    explicit tokenizer(nnt_tokenizer *owned) noexcept : handle(owned) {}
    /* Byte-level: token = byte, vocab 256. */
    static tokenizer bytes()
    {
        nnt_tokenizer *t = nullptr;
        check(nnt_tokenizer_bytes_create(&t));
        return tokenizer(t);
    }
    /* GPT-2 BPE from vocab.json and merges.txt. */
    static tokenizer bpe(std::string_view vocab_json, std::string_view merges_txt)
    {
        nnt_tokenizer *t = nullptr;
        check(nnt_tokenizer_bpe_load(detail::cstr(vocab_json).c_str(),
                                     detail::cstr(merges_txt).c_str(), &t));
        return tokenizer(t);
    }
    /* A Hugging Face tokenizer.json (or a directory holding one). */
    static tokenizer hf(std::string_view path)
    {
        nnt_tokenizer *t = nullptr;
        check(nnt_tokenizer_hf_load(detail::cstr(path).c_str(), &t));
        return tokenizer(t);
    }
    /* The tokenizer a model source comes with (nnt_tokenizer_of_source); empty (get() ==
     * nullptr) when it names none. */
    static tokenizer of_source(std::string_view source)
    {
        nnt_tokenizer *t = nullptr;
        check(nnt_tokenizer_of_source(detail::cstr(source).c_str(), &t));
        return tokenizer(t);
    }
    std::int64_t vocab_size() const
    {
        std::int64_t v = 0;
        check(nnt_tokenizer_vocab_size(get(), &v));
        return v;
    }
    std::vector<std::int32_t> encode(std::string_view text) const
    {
        std::size_t n = 0;
        check(nnt_tokenizer_encode(get(), text.data(), text.size(), nullptr, 0, &n));
        std::vector<std::int32_t> ids(n);
        check(nnt_tokenizer_encode(get(), text.data(), text.size(), ids.data(), ids.size(), &n));
        ids.resize(n);
        return ids;
    }
    std::string decode(span<const std::int32_t> ids) const
    {
        std::string text(ids.size() * 4 + 16, '\0');
        std::size_t len = 0;
        int rc = nnt_tokenizer_decode(get(), ids.data(), ids.size(), &text[0], text.size(), &len);
        if (rc == NNT_E_INVAL && len + 1 > text.size()) {   /* too small: len is the need */
            text.assign(len + 1, '\0');
            rc = nnt_tokenizer_decode(get(), ids.data(), ids.size(), &text[0], text.size(), &len);
        }
        check(rc);
        text.resize(len);
        return text;
    }
};

/* A token source (nnt_data_open): llm.c shards, nanoGPT .bin, or text through a tokenizer. */
class data : public detail::handle<nnt_data, nnt_data_close> {
public:
    data() noexcept = default;
    explicit data(nnt_data *owned) noexcept : handle(owned) {}
    /* tok: for text (null: bytes; may be destroyed afterwards). vocab > 0: ids >= vocab are
     * refused. */
    explicit data(std::string_view path, nnt_data_format format = NNT_DATA_AUTO,
                  const tokenizer *tok = nullptr, std::int64_t vocab = 0)
    {
        nnt_data *d = nullptr;
        check(nnt_data_open(detail::cstr(path).c_str(), format, tok ? tok->get() : nullptr,
                            vocab, &d));
        reset(d);
    }
    std::int64_t num_tokens() const
    {
        std::int64_t n = 0;
        check(nnt_data_num_tokens(get(), &n));
        return n;
    }
    nnt_data_format format() const
    {
        nnt_data_format f = NNT_DATA_AUTO;
        check(nnt_data_format_of(get(), &f));
        return f;
    }
    /* ids.size() tokens from pos (modulo the count, wrapping). */
    void read(std::int64_t pos, span<std::int32_t> ids)
    {
        check(nnt_data_read(get(), pos, ids.data(), static_cast<std::int64_t>(ids.size())));
    }
    std::vector<std::int32_t> read(std::int64_t pos, std::int64_t n)
    {
        std::vector<std::int32_t> ids(static_cast<std::size_t>(n > 0 ? n : 0));
        check(nnt_data_read(get(), pos, ids.data(), n));
        return ids;
    }
    /* Whether the n tokens from pos count as targets in the loss (1) or not (0). */
    std::vector<std::uint8_t> read_mask(std::int64_t pos, std::int64_t n)
    {
        std::vector<std::uint8_t> counts(static_cast<std::size_t>(n > 0 ? n : 0));
        check(nnt_data_read_mask(get(), pos, counts.data(), n));
        return counts;
    }
    /* Whether the n tokens from pos start an example (1) or not (0): packed files. */
    std::vector<std::uint8_t> read_starts(std::int64_t pos, std::int64_t n)
    {
        std::vector<std::uint8_t> starts(static_cast<std::size_t>(n > 0 ? n : 0));
        check(nnt_data_read_starts(get(), pos, starts.data(), n));
        return starts;
    }
    /* The values of rows row, row + 1, ... (n = info().row_values times the rows read;
     * nnt_data_read_row_values, new in 0.4). */
    std::vector<float> read_row_values(std::int64_t row, std::int64_t n)
    {
        std::vector<float> values(static_cast<std::size_t>(n > 0 ? n : 0));
        check(nnt_data_read_row_values(get(), row, values.data(), n));
        return values;
    }
    nnt_data_info info() const
    {
        nnt_data_info i = NNT_DATA_INFO_INIT;
        check(nnt_data_info_get(get(), &i));
        return i;
    }
};

/* A token file being written (nnt_token_writer_open(3)): ids, or ids with the targets that
 * count in the loss, laid in rows for prompt/answer data. close() puts it in place (atomic);
 * a writer destroyed without close() leaves no file and the path untouched. */
class token_writer : public detail::handle<nnt_token_writer, nnt_token_writer_destroy> {
public:
    token_writer() noexcept = default;
    explicit token_writer(nnt_token_writer *owned) noexcept : handle(owned) {}
    /* ctx (null: none) records the failures. */
    explicit token_writer(std::string_view path,
                          const nnt_token_writer_options &opts = token_writer_options(),
                          const context *ctx = nullptr)
    {
        nnt_token_writer *w = nullptr;
        check(nnt_token_writer_open(ctx ? ctx->get() : nullptr, detail::cstr(path).c_str(),
                                    &opts, &w));
        reset(w);
    }
    void write(span<const std::int32_t> ids)
    {
        check(nnt_token_writer_write(get(), ids.data(), ids.size()));
    }
    /* counts: one a token (!= 0: a target), or empty: all count. */
    void write_masked(span<const std::int32_t> ids, span<const std::uint8_t> counts = {})
    {
        if (!counts.empty())
            same_sizes("write_masked", ids, counts);
        check(nnt_token_writer_write_masked(get(), ids.data(),
                                            counts.empty() ? nullptr : counts.data(), ids.size()));
    }
    /* One example laid whole in rows (the block, pack and cut options). */
    void write_example(span<const std::int32_t> ids, span<const std::uint8_t> counts)
    {
        same_sizes("write_example", ids, counts);
        check(nnt_token_writer_write_example(get(), ids.data(), counts.data(), ids.size()));
    }
    /* One example in a row of its own carrying its values (the row_values option;
     * nnt_token_writer_write_example_values, new in 0.4). */
    void write_example_values(span<const std::int32_t> ids, span<const std::uint8_t> counts,
                              span<const float> values)
    {
        same_sizes("write_example_values", ids, counts);
        check(nnt_token_writer_write_example_values(get(), ids.data(), counts.data(),
                                                    ids.size(), values.data()));
    }
    std::int64_t count() const
    {
        std::int64_t n = 0;
        check(nnt_token_writer_count(get(), &n));
        return n;
    }
    /* The file into place; the writer is empty afterwards, whatever the outcome. */
    void close() { check(nnt_token_writer_close(release())); }

private:
    static void same_sizes(const char *fn, span<const std::int32_t> ids,
                           span<const std::uint8_t> counts)
    {
        if (counts.size() != ids.size())
            detail::fail(NNT_E_INVAL, std::string("nnt::token_writer::") + fn + ": " +
                                          std::to_string(counts.size()) + " counts for " +
                                          std::to_string(ids.size()) + " ids");
    }
};

/* Prompt/answer records to ids and targets (nnt_sft_create(3)): the tokenizer must outlive
 * the encoder. The spans encode() and encode_prompt() return stay valid until the next call
 * on this encoder. */
class sft : public detail::handle<nnt_sft, nnt_sft_destroy> {
public:
    struct example {
        span<const std::int32_t> ids;
        span<const std::uint8_t> counts;   /* 1: the token counts as a target */
    };
    sft() noexcept = default;
    explicit sft(nnt_sft *owned) noexcept : handle(owned) {}
    explicit sft(const tokenizer &tok, const nnt_sft_options &opts = sft_options())
    {
        nnt_sft *p = nullptr;
        check(nnt_sft_create(tok.get(), &opts, &p));
        reset(p);
    }
    /* tokenizer_config: a tokenizer_config.json or its directory; its chat template, or
     * template_ (not NNT_CHAT_AUTO) whatever it says. */
    sft(const tokenizer &tok, std::string_view tokenizer_config,
        nnt_chat_template template_ = NNT_CHAT_AUTO)
    {
        std::string config = detail::cstr(tokenizer_config);
        sft_options o;
        o.tokenizer_config = config.c_str();
        o.chat_template = template_;
        nnt_sft *p = nullptr;
        check(nnt_sft_create(tok.get(), &o, &p));
        reset(p);
    }
    /* "chatml", "llama3", ..., "deepseek-r1", "gpt-oss", "none" (nnt_chat_template_from_name) */
    static nnt_chat_template template_named(std::string_view name)
    {
        nnt_chat_template t = NNT_CHAT_AUTO;
        check(nnt_chat_template_from_name(detail::cstr(name).c_str(), &t));
        return t;
    }
    nnt_chat_template chat_template() const
    {
        nnt_chat_template t = NNT_CHAT_AUTO;
        check(nnt_sft_template_of(get(), &t));
        return t;
    }
    std::int32_t pad_id() const
    {
        std::int32_t id = 0;
        check(nnt_sft_pad_id(get(), &id));
        return id;
    }
    /* One record (a JSON object: text, prompt/completion, messages or conversations). */
    example encode(std::string_view record)
    {
        const std::int32_t *ids = nullptr;
        const std::uint8_t *counts = nullptr;
        std::size_t n = 0;
        check(nnt_sft_encode(get(), record.data(), record.size(), &ids, &counts, &n));
        return {{ids, n}, {counts, n}};
    }
    /* A preference record (prompt, chosen, rejected; TRL's DPO forms): [0] the chosen
     * sequence, [1] the rejected one. */
    std::array<example, 2> encode_preference(std::string_view record)
    {
        const std::int32_t *ids[2] = {nullptr, nullptr};
        const std::uint8_t *counts[2] = {nullptr, nullptr};
        std::size_t n[2] = {0, 0};
        check(nnt_sft_encode_preference(get(), record.data(), record.size(), ids, counts, n));
        return {example{{ids[0], n[0]}, {counts[0], n[0]}},
                example{{ids[1], n[1]}, {counts[1], n[1]}}};
    }
    /* An unpaired preference record {"prompt", "completion", "label": true|false} (TRL's KTO
     * form): its sequence, and into *desirable 1 for true, 0 for false
     * (nnt_sft_encode_unpaired, new in 0.4). */
    example encode_unpaired(std::string_view record, int *desirable)
    {
        const std::int32_t *ids = nullptr;
        const std::uint8_t *counts = nullptr;
        std::size_t n = 0;
        check(nnt_sft_encode_unpaired(get(), record.data(), record.size(), &ids, &counts, &n,
                                      desirable));
        return example{{ids, n}, {counts, n}};
    }
    /* The rows KTOTrainer reads of a record, paired or not: one (an unpaired record) or two
     * (a preference record's chosen, desirable, then rejected, undesirable), each with its
     * label, 1 desirable (nnt_sft_encode_unpaired_rows, new in 0.4). */
    std::vector<std::pair<example, int>> encode_unpaired_rows(std::string_view record)
    {
        const std::int32_t *ids[2] = {nullptr, nullptr};
        const std::uint8_t *counts[2] = {nullptr, nullptr};
        std::size_t n[2] = {0, 0};
        int desirable[2] = {0, 0}, rows = 0;
        check(nnt_sft_encode_unpaired_rows(get(), record.data(), record.size(), ids, counts, n,
                                           desirable, &rows));
        std::vector<std::pair<example, int>> out;
        for (int k = 0; k < rows; k++)
            out.emplace_back(example{{ids[k], n[k]}, {counts[k], n[k]}}, desirable[k]);
        return out;
    }
    /* A classification record {"text", "label"}: the text's ids (tokenizer(text)), and its
     * label into *label (nnt_sft_encode_labelled). */
    span<const std::int32_t> encode_labelled(std::string_view record, std::int64_t *label)
    {
        const std::int32_t *ids = nullptr;
        std::size_t n = 0;
        check(nnt_sft_encode_labelled(get(), record.data(), record.size(), &ids, &n, label));
        return {ids, n};
    }
    /* A record of a classifier trained on values {"text", "label": [k numbers]}: the text's
     * ids, and its k values into values (nnt_sft_encode_valued, new in 0.4). */
    span<const std::int32_t> encode_valued(std::string_view record, int problem,
                                           std::vector<float> &values)
    {
        const std::int32_t *ids = nullptr;
        std::size_t n = 0;
        check(nnt_sft_encode_valued(get(), record.data(), record.size(), problem,
                                    static_cast<std::int64_t>(values.size()), &ids, &n,
                                    values.data()));
        return {ids, n};
    }
    /* Labels by name in classification records (nnt_sft_set_label_names; empty: none). */
    void set_label_names(const std::vector<std::string> &names)
    {
        std::vector<const char *> ptrs;
        for (const std::string &n : names)
            ptrs.push_back(n.c_str());
        check(nnt_sft_set_label_names(get(), ptrs.empty() ? nullptr : ptrs.data(),
                                      static_cast<std::int64_t>(ptrs.size())));
    }
    /* A conversation up to a user's message, with the template's generation prompt. */
    span<const std::int32_t> encode_prompt(std::string_view record)
    {
        const std::int32_t *ids = nullptr;
        std::size_t n = 0;
        check(nnt_sft_encode_prompt(get(), record.data(), record.size(), &ids, &n));
        return {ids, n};
    }
};

/* ---- the training loop ------------------------------------------------------------------- */

/* nnt_trainer: steps of accum micro-batches, validation, checkpoints, resume, the run's log
 * (nnt_trainer_create(3)). The model, optimizer and data (and opts.val_data) must outlive it;
 * opts.callback is a plain function pointer (nnt_trainer_callback) with opts.user. */
class trainer : public detail::handle<nnt_trainer, nnt_trainer_destroy> {
public:
    trainer() noexcept = default;
    explicit trainer(nnt_trainer *owned) noexcept : handle(owned) {}
    /* data may be null when opts.steps is 0 (validation only). */
    trainer(layer_ref model, optimizer &opt, data *d, const nnt_trainer_options &opts)
    {
        nnt_trainer *t = nullptr;
        check(nnt_trainer_create(model.get(), opt.get(), d ? d->get() : nullptr, &opts, &t));
        reset(t);
    }
    void step() { check(nnt_trainer_step(get())); }
    /* Steps until step until (<= 0: opts.steps) or a stop request. */
    void run(std::int64_t until = 0) { check(nnt_trainer_run(get(), until)); }
    double validate()
    {
        double loss = 0.0;
        check(nnt_trainer_validate(get(), &loss));
        return loss;
    }
    /* An empty path: opts.checkpoint. */
    void save(std::string_view path = {})
    {
        std::string p = detail::cstr(path);
        check(nnt_trainer_save(get(), path.empty() ? nullptr : p.c_str()));
    }
    void resume(std::string_view path)
    {
        check(nnt_trainer_resume(get(), detail::cstr(path).c_str()));
    }
    /* Async-signal-safe: the run stops after the step in progress. */
    void request_stop() noexcept { (void)nnt_trainer_request_stop(get()); }
    /* SIGINT/SIGTERM stop after the step, SIGUSR1 a checkpoint (nnt_trainer_handle_signals). */
    void handle_signals(bool on = true) { check(nnt_trainer_handle_signals(get(), on ? 1 : 0)); }
    nnt_trainer_info info() const
    {
        nnt_trainer_info i{};
        i.size = sizeof i;
        check(nnt_trainer_info_get(get(), &i));
        return i;
    }

    /* A run built from its description, owning what it builds (nnt_trainer_open). */
    static trainer open(context &ctx, const nnt_run_config &run, const nnt_trainer_options &opts)
    {
        nnt_trainer *t = nullptr;
        check(nnt_trainer_open(ctx.get(), &run, &opts, &t));
        return trainer(t);
    }
    /* The handles it works with (nnt_trainer_parts), valid while it lives; tok is null for
     * a trainer of nnt_trainer_create. */
    struct parts_t {
        nnt_layer *model;
        nnt_optim *opt;
        nnt_data *data;
        nnt_tokenizer *tok;
    };
    parts_t parts() const
    {
        parts_t p{nullptr, nullptr, nullptr, nullptr};
        check(nnt_trainer_parts(get(), &p.model, &p.opt, &p.data, &p.tok));
        return p;
    }
    layer_ref model() const { return layer_ref(parts().model); }
    /* The text nnt-train prints (nnt_trainer_text): the model, a report's line (report: the
     * callback's; width > 0: fields cut to it), the run's or the memory's summary, the run's
     * description, warnings, files. */
    std::string text(nnt_trainer_text_kind what, const nnt_trainer_report *report = nullptr,
                     int width = 0) const
    {
        std::string buf(32768, '\0');
        check(nnt_trainer_text(get(), what, report, width, buf.data(), buf.size()));
        buf.resize(std::char_traits<char>::length(buf.data()));
        return buf;
    }
};

} // namespace nnt

#endif /* NNT_HPP */
