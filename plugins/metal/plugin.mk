# metal plugin: on Linux (the only platform gllmk builds on today) a real,
# loadable plugin that reports that Metal is not available here; it has no
# kernels and no devices. docs/metal.md says what a macOS build would add.
metal_SRCS := plugins/metal/metal_plugin.c
