"""qd's floor below the IR: the architectures (`arch.py`), the program configuration (`config.py`, checked by
`option_check.py`) and the launch ABI (`abi.py`). Imports nothing of qd above `qd.errors` and `qd.types`."""
