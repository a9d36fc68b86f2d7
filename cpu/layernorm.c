/* nnt CPU kernels: LayerNorm over the last dimension, whole rows of n. */
#include "nnt_cpu.h"

#include <math.h>

/* x, y: (rows, n); gamma, beta: (n); mean, rstd: (rows) set. Two-pass stats in double. */
void nnt_cpu_layernorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *restrict x,
                               const float *restrict gamma, const float *restrict beta,
                               float *restrict y, float *restrict mean, float *restrict rstd)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * n;
        float *restrict yr = y + r * n;
        double sum = 0.0, sq = 0.0;
        for (int64_t j = 0; j < n; j++)
            sum += xr[j];
        double mu = sum / (double)n;
        for (int64_t j = 0; j < n; j++) {
            double t = xr[j] - mu;
            sq += t * t;
        }
        double rs = 1.0 / sqrt(sq / (double)n + (double)eps);
        float muf = (float)mu, rsf = (float)rs;
        for (int64_t j = 0; j < n; j++)
            yr[j] = (xr[j] - muf) * rsf * gamma[j] + beta[j];
        mean[r] = muf;
        rstd[r] = rsf;
    }
}

/* xhat = (x - mean) rstd, g = dy gamma:
 *   dx = rstd (g - mean_j(g) - xhat mean_j(g xhat));  dgamma += dy xhat;  dbeta += dy. */
void nnt_cpu_layernorm_bwd_f32(int64_t rows, int64_t n, const float *restrict x,
                               const float *restrict dy, const float *restrict gamma,
                               const float *restrict mean, const float *restrict rstd,
                               float *restrict dx, float *restrict dgamma,
                               float *restrict dbeta)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * n;
        const float *restrict dyr = dy + r * n;
        float *restrict dxr = dx + r * n;
        float mu = mean[r], rs = rstd[r];
        double sg = 0.0, sgx = 0.0;
        for (int64_t j = 0; j < n; j++) {
            float xh = (xr[j] - mu) * rs;
            float g = dyr[j] * gamma[j];
            sg += g;
            sgx += (double)g * xh;
            dgamma[j] += dyr[j] * xh;
            dbeta[j] += dyr[j];
        }
        float mg = (float)(sg / (double)n), mgx = (float)(sgx / (double)n);
        for (int64_t j = 0; j < n; j++) {
            float xh = (xr[j] - mu) * rs;
            dxr[j] = rs * (dyr[j] * gamma[j] - mg - xh * mgx);
        }
    }
}
