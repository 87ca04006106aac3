"""The OpenCL C that every qd kernel program starts with (`opencl_c.PRELUDE`): extension pragmas, the status and
print slot atomics with their 32-bit fallbacks, f16 conversions that keep NaN payloads, opaque copies and wrapping
negations that NVIDIA's compiler does not fold (DESIGN section 4), integer helpers (floor division, modulo, power),
the counter-based random numbers (`qd_mix64`, from the launch ABI) and the atomic helpers. Text only: `opencl_c` emits
the kernels after it."""

from qd.base.abi import mix64_c


def _atomics(space: str, suffix: str) -> str:
    """The compare-and-swap atomic helpers on pointers of address space `space`, named `qd_atomic_<op>_<type>` +
    `suffix` (8/16-bit ints and f16 on their word; floats; multiplication; 64-bit ones where the device has them)."""
    return (f"QD_NARROW_ATOMICS(char, uchar, {space}, {suffix}) QD_NARROW_ATOMICS(uchar, uchar, {space}, {suffix})\n"
            f"QD_NARROW_ATOMICS(short, ushort, {space}, {suffix}) QD_NARROW_ATOMICS(ushort, ushort, {space}, {suffix})\n"
            f"QD_HALF_ATOMICS({space}, {suffix})\nQD_CAS_ATOMICS({space}, {suffix})\n"
            f"#ifdef cl_khr_int64_base_atomics\nQD_CAS64_ATOMICS({space}, {suffix})\n"
            f"#ifdef cl_khr_fp64\nQD_CAS_F64_ATOMICS({space}, {suffix})\n#endif\n#endif\n")

PRELUDE = r"""
#ifdef cl_khr_int64_base_atomics
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
#define QD_SLOT_ADD(p, n) atom_add((volatile __global long*)(p), (long)(n))
#define QD_STATUS_CAS(p) atom_cmpxchg((volatile __global long*)(p), 0L, 1L)
#else
/* no 64-bit atomics: the status and print words' low halves (little-endian devices; the host reads 64 bits) */
#define QD_SLOT_ADD(p, n) ((long)atomic_add((volatile __global uint*)(p), (uint)(n)))
#define QD_STATUS_CAS(p) ((long)atomic_cmpxchg((volatile __global uint*)(p), 0u, 1u))
#endif
#ifdef cl_khr_int64_extended_atomics
#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable
#endif
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
/* f16 <-> float. A NaN keeps its sign and the top 10 bits of its payload, quieted, on a store or rounding (as
   the x86 conversions of the other tiers do; PoCL's vstore_half gives 0x7FFF for every NaN); bit_cast keeps a
   NaN's bits as they are (a signaling NaN stays signaling). */
/* an identity the compiler cannot see through (NVIDIA: a PTX mov), so |x| is never its abs instruction, which
   NVIDIA's compiler takes to be non-negative (abs(INT_MIN) % m became an unsigned remainder) */
#ifdef __NV_CL_C_VERSION
static inline uchar qd_opaque_uchar(uchar x) { ushort y; asm("mov.b16 %0, %1;" : "=h"(y) : "h"((ushort)x)); return (uchar)y; }
static inline ushort qd_opaque_ushort(ushort x) { ushort y; asm("mov.b16 %0, %1;" : "=h"(y) : "h"(x)); return y; }
static inline uint qd_opaque_uint(uint x) { uint y; asm("mov.b32 %0, %1;" : "=r"(y) : "r"(x)); return y; }
static inline ulong qd_opaque_ulong(ulong x) { ulong y; asm("mov.b64 %0, %1;" : "=l"(y) : "l"(x)); return y; }
#else
static inline uchar qd_opaque_uchar(uchar x) { return x; }
static inline ushort qd_opaque_ushort(ushort x) { return x; }
static inline uint qd_opaque_uint(uint x) { return x; }
static inline ulong qd_opaque_ulong(ulong x) { return x; }
#endif
/* -x wrapping. On NVIDIA as ~x + 1 in PTX: ptxas folds a neg into a three-way integer min/max (VIMNMX3) and
   drops the negation (max(acc, max(a, -a)) was max(acc, a, a) on an H200: DESIGN section 4) */
#ifdef __NV_CL_C_VERSION
static inline uchar qd_neg_uchar(uchar x) { ushort y; asm("not.b16 %0, %1; add.s16 %0, %0, 1;" : "=h"(y) : "h"((ushort)x)); return (uchar)y; }
static inline ushort qd_neg_ushort(ushort x) { ushort y; asm("not.b16 %0, %1; add.s16 %0, %0, 1;" : "=h"(y) : "h"(x)); return y; }
static inline uint qd_neg_uint(uint x) { uint y; asm("not.b32 %0, %1; add.s32 %0, %0, 1;" : "=r"(y) : "r"(x)); return y; }
static inline ulong qd_neg_ulong(ulong x) { ulong y; asm("not.b64 %0, %1; add.s64 %0, %0, 1;" : "=l"(y) : "l"(x)); return y; }
#else
static inline uchar qd_neg_uchar(uchar x) { return (uchar)(0 - x); }
static inline ushort qd_neg_ushort(ushort x) { return (ushort)(0 - x); }
static inline uint qd_neg_uint(uint x) { return 0u - x; }
static inline ulong qd_neg_ulong(ulong x) { return 0UL - x; }
#endif
static inline int qd_isnan_bits(uint u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }
static inline ushort qd_f2hb(float x) {
  uint u = as_uint(x); ushort h;
  if (qd_isnan_bits(u)) return (ushort)(((u >> 16) & 0x8000u) | 0x7E00u | ((u >> 13) & 0x3FFu));
  vstore_half_rte(x, 0, (__private half*)&h); return h;
}
static inline float qd_h2f(ushort h) {  /* a load: NaNs keep sign and payload, quieted (NVIDIA's vload_half doesn't) */
  if ((h & 0x7FFFu) <= 0x7C00u) return vload_half(0, (__private half*)&h);
  return as_float((((uint)h & 0x8000u) << 16) | 0x7FC00000u | (((uint)h & 0x3FFu) << 13));
}
static inline float qd_rh(float x) { return qd_h2f(qd_f2hb(x)); }
static inline short qd_f16_bits(float x) {
  uint u = as_uint(x), m = (u >> 13) & 0x3FFu;
  return qd_isnan_bits(u) ? (short)(((u >> 16) & 0x8000u) | 0x7C00u | (m ? m : 0x200u)) : (short)qd_f2hb(x);
}
static inline float qd_bits_f16(ushort h) {
  if ((h & 0x7FFFu) <= 0x7C00u) return vload_half(0, (__private half*)&h);
  return as_float((((uint)h & 0x8000u) << 16) | 0x7F800000u | (((uint)h & 0x3FFu) << 13));
}
#ifdef cl_khr_fp64
static inline float qd_d2h(double x) {
  ulong u = as_ulong(x); ushort h;
  if ((u & 0x7FFFFFFFFFFFFFFFUL) > 0x7FF0000000000000UL)
    return as_float((uint)((u >> 32) & 0x80000000UL) | 0x7FC00000u | (uint)(((u >> 42) & 0x3FFUL) << 13));
  vstore_half_rte(x, 0, (__private half*)&h); return vload_half(0, (__private half*)&h);
}
#endif
""" + mix64_c("ulong", "UL") + r"""
#define QD_INT_HELPERS(T, U, BITS, SIGNED)                                                    \
static inline T qd_floordiv_##T(T a, T b) {                                                  \
  if (b == 0) return 0;                                                                      \
  if (SIGNED && b == (T)-1) return (T)((U)0 - (U)a);                                          \
  T q = a / b, r = a % b;                                                                    \
  return (SIGNED && r != 0 && ((a ^ b) < 0)) ? (T)(q - 1) : q;                               \
}                                                                                            \
static inline T qd_mod_##T(T a, T b) {                                                       \
  if (b == 0 || (SIGNED && b == (T)-1)) return 0;                                            \
  T r = a % b;                                                                               \
  return (SIGNED && r != 0 && ((r ^ b) < 0)) ? (T)(r + b) : r;                               \
}                                                                                            \
static inline T qd_ipow_##T(T a, T e) {                                                      \
  if (SIGNED && e < 0) return a == 1 ? (T)1 : (a == (T)-1 ? ((e & 1) ? (T)-1 : (T)1) : (T)0); \
  U r = 1, x = (U)a, n = (U)e;                                                               \
  while (n) { if (n & 1) r = (U)(r * x); x = (U)(x * x); n >>= 1; }                          \
  return (T)r;                                                                               \
}
QD_INT_HELPERS(char, uchar, 8, 1) QD_INT_HELPERS(uchar, uchar, 8, 0)
QD_INT_HELPERS(short, ushort, 16, 1) QD_INT_HELPERS(ushort, ushort, 16, 0)
QD_INT_HELPERS(int, uint, 32, 1) QD_INT_HELPERS(uint, uint, 32, 0)
QD_INT_HELPERS(long, ulong, 64, 1) QD_INT_HELPERS(ulong, ulong, 64, 0)
static inline float qd_fmod_float(float a, float b) {
#pragma OPENCL FP_CONTRACT OFF
  float q = floor(a / b); return a - b * q;
}
#ifdef cl_khr_fp64
static inline double qd_fmod_double(double a, double b) {
#pragma OPENCL FP_CONTRACT OFF
  double q = floor(a / b); return a - b * q;
}
#endif
/* an 8- or 16-bit atomic: compare-and-swap on the aligned 32-bit word holding it */
#define QD_NARROW_ATOMIC(NAME, AS, T, U, EXPR)                                               \
static inline T NAME(volatile AS T* p, T v) {                                                 \
  ulong addr = (ulong)p; volatile AS uint* w = (volatile AS uint*)(addr & ~3UL);              \
  uint shift = (uint)(addr & 3UL) * 8u, mask = ((1u << (8u * sizeof(T))) - 1u) << shift;     \
  uint old = *w;                                                                             \
  for (;;) { T o = (T)(U)((old & mask) >> shift); T n = (T)(EXPR);                           \
             uint nw = (old & ~mask) | (((uint)(U)n << shift) & mask);                       \
             uint seen = atomic_cmpxchg(w, old, nw); if (seen == old) return o; old = seen; }  \
}
#define QD_NARROW_ATOMICS(T, U, AS, S)                                                       \
QD_NARROW_ATOMIC(qd_atomic_add_##T##S, AS, T, U, (U)o + (U)v)                                 \
QD_NARROW_ATOMIC(qd_atomic_sub_##T##S, AS, T, U, (U)o - (U)v)                                 \
QD_NARROW_ATOMIC(qd_atomic_mul_##T##S, AS, T, U, (U)o * (U)v)                                 \
QD_NARROW_ATOMIC(qd_atomic_min_##T##S, AS, T, U, o < v ? o : v)                               \
QD_NARROW_ATOMIC(qd_atomic_max_##T##S, AS, T, U, o > v ? o : v)                               \
QD_NARROW_ATOMIC(qd_atomic_and_##T##S, AS, T, U, o & v)                                       \
QD_NARROW_ATOMIC(qd_atomic_or_##T##S, AS, T, U, o | v) QD_NARROW_ATOMIC(qd_atomic_xor_##T##S, AS, T, U, o ^ v)
/* an f16 atomic: the same on its word, the half's bits converted to float and the result rounded back (storage-only
   `half`: no cl_khr_fp16 needed) */
#define QD_HALF_ATOMIC(NAME, AS, EXPR)                                                       \
static inline float NAME(volatile AS half* p, float v) {                                     \
  ulong addr = (ulong)p; volatile AS uint* w = (volatile AS uint*)(addr & ~3UL);              \
  uint shift = (uint)(addr & 3UL) * 8u, mask = 0xFFFFu << shift;                             \
  uint old = *w;                                                                             \
  for (;;) { ushort ob = (ushort)((old & mask) >> shift); float o = qd_h2f(ob); \
             float n = (EXPR); ushort nb = qd_f2hb(n);                                      \
             uint nw = (old & ~mask) | ((uint)nb << shift);                                  \
             uint seen = atomic_cmpxchg(w, old, nw); if (seen == old) return o; old = seen; }  \
}
#define QD_HALF_ATOMICS(AS, S)                                                               \
QD_HALF_ATOMIC(qd_atomic_add_half##S, AS, o + v) QD_HALF_ATOMIC(qd_atomic_sub_half##S, AS, o - v) \
QD_HALF_ATOMIC(qd_atomic_mul_half##S, AS, o * v)                                              \
QD_HALF_ATOMIC(qd_atomic_min_half##S, AS, (o <= v || isnan(v)) ? o : v)                       \
QD_HALF_ATOMIC(qd_atomic_max_half##S, AS, (o >= v || isnan(v)) ? o : v)
#define QD_CAS32(NAME, AS, VT, EXPR)                                                         \
static inline VT NAME(volatile AS VT* p, VT v) {                                              \
  volatile AS uint* q = (volatile AS uint*)p; uint old = *q;                                 \
  for (;;) { VT o = as_##VT(old); VT n = (EXPR); uint seen = atomic_cmpxchg(q, old, as_uint(n)); \
             if (seen == old) return o; old = seen; }                                        \
}
#define QD_CAS64(NAME, AS, VT, EXPR)                                                         \
static inline VT NAME(volatile AS VT* p, VT v) {                                              \
  volatile AS ulong* q = (volatile AS ulong*)p; ulong old = *q;                              \
  for (;;) { VT o = as_##VT(old); VT n = (EXPR); ulong seen = atom_cmpxchg(q, old, as_ulong(n)); \
             if (seen == old) return o; old = seen; }                                        \
}
#define QD_CAS_ATOMICS(AS, S)                                                                \
QD_CAS32(qd_atomic_add_float##S, AS, float, o + v) QD_CAS32(qd_atomic_sub_float##S, AS, float, o - v) \
QD_CAS32(qd_atomic_mul_float##S, AS, float, o * v)                                            \
QD_CAS32(qd_atomic_min_float##S, AS, float, (o <= v || isnan(v)) ? o : v)                     \
QD_CAS32(qd_atomic_max_float##S, AS, float, (o >= v || isnan(v)) ? o : v)                     \
QD_CAS32(qd_atomic_mul_int##S, AS, int, (int)((uint)o * (uint)v))                             \
QD_CAS32(qd_atomic_mul_uint##S, AS, uint, o * v)
#define QD_CAS64_ATOMICS(AS, S)                                                              \
QD_CAS64(qd_atomic_mul_long##S, AS, long, (long)((ulong)o * (ulong)v))                        \
QD_CAS64(qd_atomic_mul_ulong##S, AS, ulong, o * v)
#define QD_CAS_F64_ATOMICS(AS, S)                                                            \
QD_CAS64(qd_atomic_add_double##S, AS, double, o + v) QD_CAS64(qd_atomic_sub_double##S, AS, double, o - v) \
QD_CAS64(qd_atomic_mul_double##S, AS, double, o * v)                                          \
QD_CAS64(qd_atomic_min_double##S, AS, double, (o <= v || isnan(v)) ? o : v)                   \
QD_CAS64(qd_atomic_max_double##S, AS, double, (o >= v || isnan(v)) ? o : v)
/* `qd.simt.grid.mem_fence`: device scope (NVIDIA: membar.gl; OpenCL C 1.2's global fence elsewhere) */
#ifdef __NV_CL_C_VERSION
#define QD_GRID_FENCE() asm volatile("membar.gl;" ::: "memory")
#else
#define QD_GRID_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif
""" + _atomics("__global", "")

# the `__local` twins of the compare-and-swap helpers (`_local` suffix), for atomics on `qd.simt` shared arrays: only
# in programs that use them (`opencl_c.build`)
LOCAL_ATOMICS = _atomics("__local", "_local")
