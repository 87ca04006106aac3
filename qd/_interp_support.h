/* Helpers of the reference interpreter (qd/_interp.pyx) that read better in C than in Cython:
 * Python-semantics integer division, wrapping integer power, f16 conversion and atomics (the
 * counter-based random generator comes with the generated launch ABI, _abi.h). Every function is exact; the op table (qd/ops.py) states the
 * semantics they implement. */
#ifndef QD_INTERP_SUPPORT_H
#define QD_INTERP_SUPPORT_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#include "_abi.h" /* the launch ABI: constants and the counter-based random generator (qd_mix64, qd_rng_key) */

typedef union {
    int64_t i;
    uint64_t u;
    double d;
    float f;
    int32_t i32;
    uint32_t u32;
} qd_reg;

/* ---- integer division with Python semantics; x // 0 == 0 and x % 0 == 0 (no trap) ---- */
static inline int64_t qd_floordiv_i64(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}
static inline int64_t qd_mod_i64(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
static inline uint64_t qd_floordiv_u64(uint64_t a, uint64_t b) { return b ? a / b : 0; }
static inline uint64_t qd_mod_u64(uint64_t a, uint64_t b) { return b ? a % b : 0; }

static inline uint64_t qd_ipow_u64(uint64_t a, uint64_t b) {
    uint64_t r = 1;
    while (b) {
        if (b & 1) r *= a;
        a *= a;
        b >>= 1;
    }
    return r;
}
static inline int64_t qd_ipow_i64(int64_t a, int64_t b) {
    if (b < 0) {
        if (a == 1) return 1;
        if (a == -1) return (b & 1) ? -1 : 1;
        return 0;
    }
    return (int64_t)qd_ipow_u64((uint64_t)a, (uint64_t)b);
}

/* Python float %: a - b * floor(a / b), each step rounded at the operand width (as Quadrants). */
static inline float qd_fmodf(float a, float b) { float q = floorf(a / b); return a - b * q; }
static inline double qd_fmod(double a, double b) { double q = floor(a / b); return a - b * q; }

static inline int64_t qd_clz32(uint32_t x) { return x ? __builtin_clz(x) : 32; }
static inline int64_t qd_clz64(uint64_t x) { return x ? __builtin_clzll(x) : 64; }

/* ---- f16 storage: values compute in f32 and are rounded to the nearest f16 ---- */
static inline float qd_h2f(uint16_t h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
static inline uint16_t qd_f2h(float f) { _Float16 x = (_Float16)f; uint16_t h; memcpy(&h, &x, 2); return h; }
static inline float qd_round_f16(float f) { return (float)(_Float16)f; }
static inline float qd_round_f16_d(double d) { return (float)(_Float16)d; }
/* bit_cast between f16 and its 16 bits: exact for every pattern. Non-NaN values convert exactly (a register
   f16 holds a half value); a NaN keeps its sign and 10 payload bits as they are (a signaling NaN stays
   signaling, unlike a load or store, which quiets it as the hardware conversion does). */
static inline float qd_bits_to_f16(uint16_t h) {
    if ((h & 0x7FFFu) <= 0x7C00u) return qd_h2f(h);
    uint32_t u = ((uint32_t)(h & 0x8000u) << 16) | 0x7F800000u | ((uint32_t)(h & 0x3FFu) << 13);
    float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t qd_f16_to_bits(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) <= 0x7F800000u) return qd_f2h(f);
    uint32_t m = (u >> 13) & 0x3FFu;
    return (uint16_t)(((u >> 16) & 0x8000u) | 0x7C00u | (m ? m : 0x200u));
}

/* ---- atomics: integer add/sub/and/or/xor map to fetch-ops, everything else is a CAS loop ---- */
#define QD_ATOMIC_FETCH(NAME, T, BUILTIN) \
    static inline T NAME(T *p, T v) { return BUILTIN(p, v, __ATOMIC_SEQ_CST); }
#define QD_ATOMIC_CAS(NAME, T, UT, VT, LOAD, STORE, EXPR)                                    \
    static inline VT NAME(T *p, VT v) {                                                      \
        UT *up = (UT *)p;                                                                    \
        UT bits = __atomic_load_n(up, __ATOMIC_RELAXED);                                     \
        for (;;) {                                                                           \
            T raw; memcpy(&raw, &bits, sizeof(T));                                           \
            VT old = LOAD(raw);                                                              \
            T nraw = STORE(EXPR);                                                            \
            UT nbits; memcpy(&nbits, &nraw, sizeof(T));                                      \
            if (__atomic_compare_exchange_n(up, &bits, nbits, 1, __ATOMIC_SEQ_CST,           \
                                            __ATOMIC_RELAXED)) return old;                   \
        }                                                                                    \
    }
#define QD_ID(x) (x)
#define QD_MIN(a, b) ((b) < (a) ? (b) : (a))
#define QD_MAX(a, b) ((b) > (a) ? (b) : (a))
/* two's-complement product at T's width, with no signed overflow (64-bit unsigned arithmetic wraps) */
#define QD_WRAP_MUL(T, UT, a, b) ((T)((uint64_t)(UT)(a) * (uint64_t)(UT)(b)))

#define QD_INT_ATOMICS(N, T, UT)                                                   \
    QD_ATOMIC_FETCH(qd_atomic_add_##N, T, __atomic_fetch_add)                      \
    QD_ATOMIC_FETCH(qd_atomic_sub_##N, T, __atomic_fetch_sub)                      \
    QD_ATOMIC_FETCH(qd_atomic_bit_and_##N, T, __atomic_fetch_and)                  \
    QD_ATOMIC_FETCH(qd_atomic_bit_or_##N, T, __atomic_fetch_or)                    \
    QD_ATOMIC_FETCH(qd_atomic_bit_xor_##N, T, __atomic_fetch_xor)                  \
    QD_ATOMIC_CAS(qd_atomic_mul_##N, T, UT, T, QD_ID, QD_ID, QD_WRAP_MUL(T, UT, old, v)) \
    QD_ATOMIC_CAS(qd_atomic_min_##N, T, UT, T, QD_ID, QD_ID, QD_MIN(old, v))       \
    QD_ATOMIC_CAS(qd_atomic_max_##N, T, UT, T, QD_ID, QD_ID, QD_MAX(old, v))

QD_INT_ATOMICS(i8, int8_t, uint8_t)
QD_INT_ATOMICS(i16, int16_t, uint16_t)
QD_INT_ATOMICS(i32, int32_t, uint32_t)
QD_INT_ATOMICS(i64, int64_t, uint64_t)
QD_INT_ATOMICS(u8, uint8_t, uint8_t)
QD_INT_ATOMICS(u16, uint16_t, uint16_t)
QD_INT_ATOMICS(u32, uint32_t, uint32_t)
QD_INT_ATOMICS(u64, uint64_t, uint64_t)

#define QD_FLOAT_ATOMICS(N, T, UT, VT, LOAD, STORE, S)                                 \
    QD_ATOMIC_CAS(qd_atomic_add_##N, T, UT, VT, LOAD, STORE, (VT)(old + v))            \
    QD_ATOMIC_CAS(qd_atomic_sub_##N, T, UT, VT, LOAD, STORE, (VT)(old - v))            \
    QD_ATOMIC_CAS(qd_atomic_mul_##N, T, UT, VT, LOAD, STORE, (VT)(old * v))            \
    QD_ATOMIC_CAS(qd_atomic_min_##N, T, UT, VT, LOAD, STORE, fmin##S(old, v))          \
    QD_ATOMIC_CAS(qd_atomic_max_##N, T, UT, VT, LOAD, STORE, fmax##S(old, v))

QD_FLOAT_ATOMICS(f16, uint16_t, uint16_t, float, qd_h2f, qd_f2h, f)
QD_FLOAT_ATOMICS(f32, float, uint32_t, float, QD_ID, QD_ID, f)
QD_FLOAT_ATOMICS(f64, double, uint64_t, double, QD_ID, QD_ID, )

/* ---- exchange and compare-and-swap (32- and 64-bit words; a float exchanges its bits) ---- */
#define QD_SWAP_ATOMICS(N, T, UT)                                                                 \
    static inline T qd_atomic_xchg_##N(T *p, T v) {                                               \
        UT bits; memcpy(&bits, &v, sizeof(T));                                                    \
        UT old = __atomic_exchange_n((UT *)p, bits, __ATOMIC_SEQ_CST);                            \
        T out; memcpy(&out, &old, sizeof(T)); return out;                                         \
    }
#define QD_CAS_ATOMIC(N, T)                                                                       \
    static inline T qd_atomic_cas_##N(T *p, T expected, T desired) {                              \
        __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
        return expected; /* the old value: left as it was on success, read on failure */          \
    }
QD_SWAP_ATOMICS(i32, int32_t, uint32_t) QD_SWAP_ATOMICS(u32, uint32_t, uint32_t)
QD_SWAP_ATOMICS(i64, int64_t, uint64_t) QD_SWAP_ATOMICS(u64, uint64_t, uint64_t)
QD_SWAP_ATOMICS(f32, float, uint32_t) QD_SWAP_ATOMICS(f64, double, uint64_t)
QD_CAS_ATOMIC(i32, int32_t) QD_CAS_ATOMIC(u32, uint32_t) QD_CAS_ATOMIC(i64, int64_t) QD_CAS_ATOMIC(u64, uint64_t)

#endif
