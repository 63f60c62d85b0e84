# plugins/vulkan/tests.mk - tests of the vulkan plugin, for tests/tests.mk to
# include. A device with 16-bit storage and subgroup operations (lavapipe
# too) runs the native shader form, so the portable one (devices without
# them) would go untested here. This TEST-ONLY build is the same plugin with
# vk_plugin.c built again under the name "vulkan-portable", which gives every
# device the portable form, alone in its own directory for the conformance
# suite (--plugin-dir, --backend). Never installed.

ifneq ($(filter vulkan,$(PLUGINS)),)
VK_TEST_PLUGIN      := $(B)/tests/vulkan-portable/gllmk-vulkan-portable.so
VK_TEST_CONFORMANCE := '$(B)/tests/conformance --plugin-dir $(B)/tests/vulkan-portable --backend vulkan-portable'
VK_TEST_OBJS        := $(filter-out $(B)/obj/plugins/vulkan/vk_plugin.o,$(vulkan_OBJS)) \
                       $(B)/obj/plugins/vulkan/vk_plugin_portable_test.o

$(B)/obj/plugins/vulkan/vk_plugin_portable_test.o: plugins/vulkan/vk_plugin.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(vulkan_CFLAGS) -DGLLMK_VK_TEST_PORTABLE -MMD -MP -c $< -o $@

$(VK_TEST_PLUGIN): $(VK_TEST_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared $(ALL_LDFLAGS) -o $@ $^ $(vulkan_LDLIBS)
endif
