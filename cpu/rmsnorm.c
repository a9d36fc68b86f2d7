/* nnt CPU kernels: RMSNorm over the last dimension, whole rows of n. */
#include "nnt_cpu.h"

#include <math.h>

/* x, y: (rows, n); gamma: (n); rstd: (rows) set. Mean square in double. */
void nnt_cpu_rmsnorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *restrict x,
                             const float *restrict gamma, float *restrict y,
                             float *restrict rstd)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * n;
        float *restrict yr = y + r * n;
        double sq = 0.0;
        for (int64_t j = 0; j < n; j++)
            sq += (double)xr[j] * xr[j];
        double rs = 1.0 / sqrt(sq / (double)n + (double)eps);
        float rsf = (float)rs;
        for (int64_t j = 0; j < n; j++)
            yr[j] = xr[j] * rsf * gamma[j];
        rstd[r] = rsf;
    }
}

/* xhat = x rstd, g = dy gamma:
 *   dx = rstd (g - xhat mean_j(g xhat));  dgamma += dy xhat. */
void nnt_cpu_rmsnorm_bwd_f32(int64_t rows, int64_t n, const float *restrict x,
                             const float *restrict dy, const float *restrict gamma,
                             const float *restrict rstd, float *restrict dx,
                             float *restrict dgamma)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * n;
        const float *restrict dyr = dy + r * n;
        float *restrict dxr = dx + r * n;
        float rs = rstd[r];
        double sgx = 0.0;
        for (int64_t j = 0; j < n; j++) {
            float xh = xr[j] * rs;
            float g = dyr[j] * gamma[j];
            sgx += (double)g * xh;
            dgamma[j] += dyr[j] * xh;
        }
        float mgx = (float)(sgx / (double)n);
        for (int64_t j = 0; j < n; j++) {
            float xh = xr[j] * rs;
            dxr[j] = rs * (dyr[j] * gamma[j] - xh * mgx);
        }
    }
}
