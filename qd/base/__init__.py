"""The floor every layer may import: configuration, arch, option checks and the launch ABI (`abi`)."""
