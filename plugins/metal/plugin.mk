# metal plugin: on Linux (the only platform gllmk builds on today) a real,
# loadable plugin that reports that Metal is not available here; it has no
# kernels and no devices. docs/metal.md says what a macOS build would add.
# Op families (elementwise, norm, rope, gather, matmul, attention, sample):
# all absent, no family files: no device on Linux (docs/metal.md).
metal_SRCS := plugins/metal/metal_plugin.c
