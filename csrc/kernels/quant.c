/*
 * The quantization arithmetic of Android's reference CPU implementation (the
 * fixed-point helpers gemmlowp defines and TFLite names), and IEEE half
 * conversions.  Written from the definitions: a Q31 multiplier and a shift
 * stand for a positive real, products keep the high 32 bits with rounding,
 * and a division by a power of two rounds halves away from zero.
 */
#include <math.h>
#include <string.h>

#include "ops_internal.h"

int npu_quantize_multiplier(double real, int32_t *multiplier, int32_t *shift)
{
    if (multiplier == NULL || shift == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (!(real >= 0.0) || !isfinite(real))
        return NPU_E_BAD_SCALAR;
    *multiplier = 0;
    *shift = 0;
    if (real == 0.0)
        return NPU_OK;
    int e;
    double mantissa = frexp(real, &e);  /* real = mantissa * 2^e, mantissa in [0.5, 1) */
    long long q = llround(mantissa * 2147483648.0);  /* halves away from zero */
    if (q == 2147483648LL) {
        q /= 2;
        e++;
    }
    if (e < -31)
        return NPU_OK;  /* too small to matter: the product is zero */
    if (e > 31)
        return NPU_E_BAD_SCALAR;  /* no int32 left shift reaches it */
    *multiplier = (int32_t)q;
    *shift = e;
    return NPU_OK;
}

int32_t npu_saturating_rounding_doubling_high_mul(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN)
        return INT32_MAX;
    int64_t ab = (int64_t)a * b;
    int64_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
    /* C's division truncates toward zero, as the definition asks */
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

int32_t npu_rounding_divide_by_pot(int32_t x, int32_t exponent)
{
    if (exponent <= 0)
        return x;
    if (exponent > 31)
        exponent = 31;
    int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
    int32_t remainder = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

int32_t npu_multiply_by_quantized_multiplier(int32_t x, int32_t multiplier, int32_t shift)
{
    int32_t left = shift > 0 ? shift : 0;
    int32_t right = shift > 0 ? 0 : -shift;
    if (left > 31)
        left = 31;
    int64_t shifted = (int64_t)x * ((int64_t)1 << left);
    if (shifted > INT32_MAX)
        shifted = INT32_MAX;
    if (shifted < INT32_MIN)
        shifted = INT32_MIN;
    return npu_rounding_divide_by_pot(npu_saturating_rounding_doubling_high_mul((int32_t)shifted, multiplier), right);
}

float npu_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    uint32_t bits;
    if (exponent == 0) {
        float v = (float)mantissa * 5.9604644775390625e-8f;  /* 2^-24: exact */
        return sign ? -v : v;
    }
    if (exponent == 31)
        bits = sign | 0x7f800000u | (mantissa << 13);
    else
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t npu_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    if (a >= 0x7f800000u)  /* inf, or NaN (kept quiet) */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
    if (a >= 0x477ff000u)  /* 65520 and above round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {  /* below 2^-14: a subnormal half (or zero) */
        float v;
        memcpy(&v, &a, sizeof v);
        return (uint16_t)(sign | (uint16_t)rintf(v * 16777216.0f));  /* nearest even */
    }
    uint32_t h = (a >> 13) - (112u << 10);
    uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}
