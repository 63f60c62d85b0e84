# plugins/vulkan/tests.mk - tests of the vulkan plugin, for tests/tests.mk to
# include. A device with 16-bit storage and subgroup operations (lavapipe
# too) runs the native shader form, so the portable one (devices without
# them) would go untested here. This test-only variant (plugin_test_variant)
# is plugin.c built again as "vulkan-portable", which gives every device
# the portable form.

ifneq ($(filter vulkan,$(PLUGINS)),)
$(eval $(call plugin_test_variant,vulkan-portable,vulkan,plugin,-DGLLMK_VK_TEST_PORTABLE))
endif
