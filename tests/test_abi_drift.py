"""The launch ABI (`qd/base/abi.py`) is one source: the C/Cython renderings are current, the random streams are the
ones every tier has drawn so far (pinned values), and every tier's draws follow it."""

from __future__ import annotations

import numpy as np

import qd
from qd import _launch
from qd.base import abi, gen_abi
from qd.jit.llvm_fn import CTX_TYPE


def test_rendered_abi_is_current() -> None:
    assert gen_abi.OUT_H.read_text() == gen_abi.render_h(), "run `python -m qd.base.gen_abi` and rebuild"
    assert gen_abi.OUT_PXD.read_text() == gen_abi.render_pxd(), "run `python -m qd.base.gen_abi` and rebuild"


def test_random_stream_is_pinned() -> None:
    """Changing a constant of the generator changes every kernel's `qd.random` numbers: these must not move."""
    base = abi.rng_key(1234, 7, 2, 0)
    assert base == 0x6492B0CA0E46CC0E
    assert abi.rng_key(0, 0, 0, 0) == 0x33FE8BD4F9C57863
    key = abi.mix64(base ^ ((5 * abi.RNG_TID_MIX) & abi.M64))
    draws = [abi.mix64((key + c * abi.RNG_GOLDEN) & abi.M64) for c in (1, 2, 3)]
    assert draws == [0x74297EB11570D2A9, 0x2CB8F6ABC4AE7C9E, 0xF4C8540A47F49C3C]
    assert (abi.RAND_F32_SHIFT, abi.RAND_F32_SCALE) == (40, 2.0 ** -24)
    assert (abi.RAND_F64_SHIFT, abi.RAND_F64_SCALE) == (11, 2.0 ** -53)


def test_ctx_layout_is_the_native_struct() -> None:
    assert len(CTX_TYPE.elements) == len(abi.CTX_FIELDS) == len(set(abi.CTX_FIELDS))
    assert all(ctype.endswith(("*", "int64_t")) for _, ctype in abi.CTX_LAYOUT)  # 8 bytes each


def test_status_layout_fits() -> None:
    assert abi.STATUS_ARGS + abi.MAX_CHECK_ARGS <= abi.STATUS_DROPPED < abi.ZERO_WORD < abi.STATUS_WORDS
    assert abi.PRINTLEN_WORD == abi.STATUS_WORDS and abi.HEADER_WORDS == abi.PRINTLEN_WORD + 1
    assert len({abi.RC_DONE, abi.RC_FAILED, abi.RC_RETURNED, abi.RC_INTERRUPTED}) == 4


def test_every_tier_draws_the_abi_stream(arch: object) -> None:
    """A kernel's raw u64 draws on this tier are `abi`'s: key base of (seed, launch, task), thread key, counter."""
    n = 4
    out = qd.ndarray(qd.u64, shape=(n, 2))

    @qd.kernel
    def draw(o: qd.types.ndarray()) -> None:
        for i in range(n):
            o[i, 0] = qd.random(qd.u64)
            o[i, 1] = qd.random(qd.u64)

    draw(out)  # compiles and takes a launch number; the next launch's number is known
    seed = int(qd.lang.impl.current_cfg().random_seed) & abi.M64
    launch = _launch.next_launch_id() + 1
    draw(out)
    base = abi.rng_key(seed, launch, 0, 0)
    want = np.zeros((n, 2), np.uint64)
    for i in range(n):
        key = abi.mix64(base ^ ((i * abi.RNG_TID_MIX) & abi.M64))
        want[i] = [abi.mix64((key + c * abi.RNG_GOLDEN) & abi.M64) for c in (1, 2)]
    np.testing.assert_array_equal(out.to_numpy(), want)
