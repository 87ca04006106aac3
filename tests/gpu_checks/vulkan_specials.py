"""Checks a Vulkan driver for issue 27 items 3 and 4 (run it on a GPU machine, from the repository root):

    python -m tests.gpu_checks.vulkan_specials            # QD_VULKAN_DEVICE=<name part> picks a device

It prints the device's float controls, then runs twice, each time in a fresh process:

1. `QD_VULKAN_HIDE_ZEROS=0`: constant zeros reach the driver as constants, so only the float-controls execution
   modes (`SignedZeroInfNanPreserve` ...) keep `x * 0.0`, `x / 0.0`, `x % 0.0`, `x * -0.0` ... IEEE. A failure here
   means the driver folds constant zeros against its own float controls (as llvmpipe does): qd must hide zeros
   there too (`qd/gpu/vulkan_tier._hide_zeros`).
2. qd's default for the device (`QD_VULKAN_HIDE_ZEROS` unset): this must pass.

Each run compares 19 expressions over inf, NaN, +-0, subnormals and ordinary values in f16, f32 and f64 with numpy,
bit for bit (any NaN equals any NaN; `tests/test_ieee_specials.py`), and counts through 90 nested `if`s
(`tests/test_deep_nesting.py`). Exit status 0 when the default run passes.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import qd


def _device_report() -> dict:
    from qd.runtime import device

    be = device.current().backend
    return {"device": be.device_name, "float_controls": be.dev.features["float_controls"],
            "hide_zeros": be.caps.hide_zeros, "max_nesting": be.caps.max_nesting}


def _specials() -> list[str]:
    from tests.test_ieee_specials import DTYPES, K, X, _kernel, _reference, _same_bits

    fails = []
    for name, (dt, npdt) in sorted(DTYPES.items()):
        with np.errstate(over="ignore"):
            x = np.array(X, npdt)
        out = np.zeros((len(X), K), npdt)
        _kernel(dt)(x, out)
        want = _reference(x)
        fails += [f"{name} x = {x[i]!r}, expression {k}: want {want[i, k]!r}, got {out[i, k]!r}"
                  for i, k in np.argwhere(~_same_bits(want, out))]
    return fails


def _nesting() -> list[str]:
    from tests.test_deep_nesting import MOD, counting_source, counting_want, load_kernel

    with tempfile.TemporaryDirectory() as d:
        kern = load_kernel(counting_source(), d)
        a = np.arange(MOD, dtype=np.int32)
        o = np.zeros((MOD, 2), np.int32)
        kern(a, o)
    want = counting_want(a)
    return [f"90 nested ifs, w = {i}: want {want[i].tolist()}, got {o[i].tolist()}"
            for i in np.nonzero((o != want).any(axis=1))[0]]


def child() -> int:
    qd.init(arch=qd.vulkan, fast_math=False, offline_cache=False, log_level="error")
    report = _device_report()
    report["specials"] = _specials()
    report["nesting"] = _nesting()
    print("REPORT " + json.dumps(report))
    return 0


def main() -> int:
    results = {}
    for label, hide in (("float controls alone (QD_VULKAN_HIDE_ZEROS=0)", "0"), ("qd's default", None)):
        env = dict(os.environ)
        env.pop("QD_VULKAN_HIDE_ZEROS", None)
        if hide is not None:
            env["QD_VULKAN_HIDE_ZEROS"] = hide
        r = subprocess.run([sys.executable, "-m", "tests.gpu_checks.vulkan_specials", "--child"], env=env,
                           capture_output=True, text=True, check=False)
        line = next((x for x in r.stdout.splitlines() if x.startswith("REPORT ")), None)
        if line is None:
            print(f"{label}: the run failed (exit {r.returncode})\n{r.stdout}\n{r.stderr}")
            results[label] = False
            continue
        rep = json.loads(line[len("REPORT "):])
        bad = rep["specials"] + rep["nesting"]
        print(f"== {label}: device {rep['device']}, hide_zeros={rep['hide_zeros']}, "
              f"max_nesting={rep['max_nesting']}\n   float controls {rep['float_controls']}\n   "
              + ("PASS" if not bad else f"FAIL ({len(bad)} mismatches)"))
        for b in bad[:20]:
            print("     " + b)
        results[label] = not bad
    return 0 if results.get("qd's default") else 1


if __name__ == "__main__":
    sys.exit(child() if "--child" in sys.argv else main())
