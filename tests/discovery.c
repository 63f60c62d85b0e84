/*
 * discovery.c - plugin discovery, ranking and selection with fake plugins
 * (tests/fake_plugin.c) and the real cpu plugin, each test in a temporary
 * plugin directory of its own (options.plugin_dir).
 *
 * tests.mk passes the absolute paths TEST_FAKE_DIR (the built fakes),
 * TEST_CPU_PLUGIN (the built cpu plugin) and TEST_LIB_DIR (the directory of
 * the libgllmk.so.0 the tests link against).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#ifndef TEST_FAKE_DIR
#error "tests.mk defines TEST_FAKE_DIR"
#endif

/* The plugin ABI as gllmk_plugin.h defines it (this test sticks to gllmk.h). */
#define PLUGIN_ABI_VERSION ((2u << 16) | 6u) /* 2.6 */
#define PLUGIN_ENTRY_SYMBOL "gllmk_plugin_entry"

static char plugin_dir[PATH_MAX];

/* --------------------------------------------------------- temp dirs */

static void setup(void) { test_temp_dir(plugin_dir, sizeof plugin_dir, "gllmk-discovery"); }

static void teardown(void) { test_remove_dir(plugin_dir); }

/* Copies `src` into the plugin dir as `name` with `mode`. */
static void add_file(const char *src, const char *name, mode_t mode) {
  test_copy_file(src, plugin_dir, name, mode);
}

/* A built fake variant ("vulkan", "nodevice", ...) as `name`. */
static void add_fake(const char *variant, const char *name) {
  char src[PATH_MAX];
  snprintf(src, sizeof src, "%s/%s.so", TEST_FAKE_DIR, variant);
  add_file(src, name, 0644);
}

static void add_cpu(void) { add_file(TEST_CPU_PLUGIN, "gllmk-cpu.so", 0644); }

static void add_text(const char *name, const char *text) {
  char dst[PATH_MAX + 256];
  snprintf(dst, sizeof dst, "%s/%s", plugin_dir, name);
  FILE *out = fopen(dst, "w");
  ck_assert_ptr_nonnull(out);
  fputs(text, out);
  ck_assert_int_eq(fclose(out), 0);
}

/* ----------------------------------------------------------- queries */

static gllmk_context_options options_here(void) {
  return (gllmk_context_options){.plugin_dir = plugin_dir};
}

static gllmk_discovery *discover(const gllmk_context_options *options) {
  gllmk_discovery *d = NULL;
  gllmk_status status = gllmk_discover(options, &d);
  ck_assert_msg(status == GLLMK_OK, "gllmk_discover: %s: %s", gllmk_status_string(status),
                gllmk_last_error());
  ck_assert_str_eq(gllmk_discovery_plugin_dir(d), plugin_dir);
  return d;
}

/* The record of `file` in the plugin dir; fails the test if missing. */
static const gllmk_plugin_record *record_of(const gllmk_discovery *d, const char *file,
                                            uint32_t *out_index) {
  char path[PATH_MAX + 256];
  snprintf(path, sizeof path, "%s/%s", plugin_dir, file);
  for (uint32_t i = 0; i < gllmk_discovery_plugin_count(d); i++) {
    const gllmk_plugin_record *r = gllmk_discovery_plugin(d, i);
    if (strcmp(r->path, path) == 0) {
      if (out_index) *out_index = i;
      return r;
    }
  }
  ck_abort_msg("%s is not listed", path);
  return NULL;
}

static void expect_state(const gllmk_discovery *d, const char *file, gllmk_plugin_state state,
                         const char *reason_part) {
  const gllmk_plugin_record *r = record_of(d, file, NULL);
  ck_assert_msg(r->state == (uint32_t)state, "%s: state %s (%s), expected %s", file,
                gllmk_plugin_state_name((gllmk_plugin_state)r->state), r->reason,
                gllmk_plugin_state_name(state));
  if (reason_part)
    ck_assert_msg(test_contains(r->reason, reason_part), "%s: reason \"%s\" lacks \"%s\"", file,
                  r->reason, reason_part);
}

/* Discovers the plugin directory as it stands and expects `file` in `state`. */
static void expect_discovered(const char *file, gllmk_plugin_state state, const char *reason) {
  gllmk_context_options options = options_here();
  gllmk_discovery *d = discover(&options);
  expect_state(d, file, state, reason);
  gllmk_discovery_free(d);
}

static gllmk_context *create(const gllmk_context_options *options) {
  gllmk_context *ctx = NULL;
  gllmk_status status = gllmk_context_create(options, &ctx);
  ck_assert_msg(status == GLLMK_OK, "gllmk_context_create: %s: %s", gllmk_status_string(status),
                gllmk_last_error());
  return ctx;
}

/* Fills a small f32 tensor on ctx and reads it back. */
static void expect_fill_works(gllmk_context *ctx) {
  gllmk_buffer *buffer;
  gllmk_tensor t;
  float values[6];
  ck_assert_int_eq(gllmk_buffer_alloc(ctx, sizeof values, &buffer), GLLMK_OK);
  ck_assert_int_eq(gllmk_tensor_make(buffer, 0, GLLMK_F32, 2, (const int64_t[]){2, 3}, &t),
                   GLLMK_OK);
  ck_assert_int_eq(gllmk_fill(ctx, &(gllmk_fill_args){&t, 2.5f}), GLLMK_OK);
  ck_assert_int_eq(gllmk_buffer_read(buffer, 0, values, sizeof values), GLLMK_OK);
  for (int i = 0; i < 6; i++) ck_assert_float_eq(values[i], 2.5f);
  gllmk_buffer_free(buffer);
}

/* A context with these options lands on `backend` and runs an op there. */
static void expect_context_on(const gllmk_context_options *options, const char *backend) {
  gllmk_context *ctx = create(options);
  ck_assert_str_eq(gllmk_context_backend(ctx), backend);
  expect_fill_works(ctx);
  gllmk_context_destroy(ctx);
}

/* ------------------------------------------------------- rejections */

START_TEST(wrong_abi_major_is_rejected) {
  add_fake("wrongabi", "gllmk-fakeabi.so");
  gllmk_context_options options = options_here();
  gllmk_discovery *d = discover(&options);
  expect_state(d, "gllmk-fakeabi.so", GLLMK_PLUGIN_REJECTED, "ABI");
  ck_assert_uint_eq(record_of(d, "gllmk-fakeabi.so", NULL)->abi_version,
                    (3u << 16)); /* major + 1 */
  gllmk_discovery_free(d);
}
END_TEST

START_TEST(missing_entry_is_rejected) {
  add_fake("noentry", "gllmk-fakenoentry.so");
  expect_discovered("gllmk-fakenoentry.so", GLLMK_PLUGIN_REJECTED, PLUGIN_ENTRY_SYMBOL);
}
END_TEST

START_TEST(text_file_is_rejected) {
  add_text("x.so", "this is not a shared object\n");
  expect_discovered("x.so", GLLMK_PLUGIN_REJECTED, "not an ELF");
}
END_TEST

/* A file that cannot be read is rejected with the system's reason, not as
 * "not an ELF shared object" (issue 20). The file is a link to
 * /proc/self/mem: a regular file that opens, but whose first bytes (address
 * 0) cannot be read, whoever runs the test. */
START_TEST(unreadable_file_says_why) {
  char path[PATH_MAX + 64], expected[128];
  snprintf(path, sizeof path, "%s/gllmk-unreadable.so", plugin_dir);
  ck_assert_int_eq(symlink("/proc/self/mem", path), 0);
  snprintf(expected, sizeof expected, "cannot read: %s", strerror(EIO));
  expect_discovered("gllmk-unreadable.so", GLLMK_PLUGIN_REJECTED, expected);
  if (geteuid() != 0) { /* root opens a file of mode 0000 */
    add_fake("vulkan", "gllmk-noaccess.so");
    snprintf(path, sizeof path, "%s/gllmk-noaccess.so", plugin_dir);
    ck_assert_int_eq(chmod(path, 0), 0);
    snprintf(expected, sizeof expected, "cannot open: %s", strerror(EACCES));
    expect_discovered("gllmk-noaccess.so", GLLMK_PLUGIN_REJECTED, expected);
  }
}
END_TEST

START_TEST(world_writable_is_rejected) {
  add_fake("vulkan", "gllmk-fakevk.so");
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/gllmk-fakevk.so", plugin_dir);
  ck_assert_int_eq(chmod(path, 0666), 0);
  expect_discovered("gllmk-fakevk.so", GLLMK_PLUGIN_REJECTED, "writable");
}
END_TEST

START_TEST(too_small_struct_is_rejected) {
  add_fake("smallstruct", "gllmk-fakesmall.so");
  expect_discovered("gllmk-fakesmall.so", GLLMK_PLUGIN_REJECTED, "struct_size");
}
END_TEST

START_TEST(duplicate_name_is_rejected) {
  /* Files are scanned in name order: a-... first. */
  add_fake("vulkan", "gllmk-a-vk.so");
  add_fake("vulkan", "gllmk-b-vk.so");
  gllmk_context_options options = options_here();
  gllmk_discovery *d = discover(&options);
  expect_state(d, "gllmk-a-vk.so", GLLMK_PLUGIN_SELECTED, NULL);
  expect_state(d, "gllmk-b-vk.so", GLLMK_PLUGIN_REJECTED, "fakevk");
  gllmk_discovery_free(d);
}
END_TEST

START_TEST(no_device_keeps_the_plugins_reason) {
  add_fake("nodevice", "gllmk-fakenodev.so");
  add_cpu();
  gllmk_context_options options = options_here();
  gllmk_discovery *d = discover(&options);
  expect_state(d, "gllmk-fakenodev.so", GLLMK_PLUGIN_NO_DEVICE,
               "fake: this test machine has no such device");
  ck_assert_uint_eq(record_of(d, "gllmk-fakenodev.so", NULL)->device_count, 0);
  expect_state(d, "gllmk-cpu.so", GLLMK_PLUGIN_SELECTED, NULL);
  gllmk_discovery_free(d);

  expect_context_on(&options, "cpu");

  options.backend = "fakenodev";
  gllmk_context *ctx = NULL;
  ck_assert_int_eq(gllmk_context_create(&options, &ctx), GLLMK_ERR_NO_BACKEND);
  ck_assert_msg(test_contains(gllmk_last_error(), "fakenodev"), "message \"%s\"",
                gllmk_last_error());
  ck_assert_ptr_null(ctx);
}
END_TEST

/* ------------------------------------------------------ ranking */

START_TEST(third_party_vulkan_outranks_cpu) {
  add_cpu();
  add_fake("vulkan", "gllmk-fakevk.so");
  gllmk_context_options options = options_here();
  gllmk_discovery *d = discover(&options);
  uint32_t fake_index;
  const gllmk_plugin_record *fake = record_of(d, "gllmk-fakevk.so", &fake_index);
  const gllmk_plugin_record *cpu = record_of(d, "gllmk-cpu.so", NULL);
  expect_state(d, "gllmk-fakevk.so", GLLMK_PLUGIN_SELECTED, NULL);
  expect_state(d, "gllmk-cpu.so", GLLMK_PLUGIN_AVAILABLE, NULL);
  ck_assert_str_eq(fake->name, "fakevk");
  ck_assert_str_eq(fake->version, "9.9.9-fake");
  ck_assert_uint_eq(fake->kind, GLLMK_BACKEND_VULKAN);
  ck_assert_uint_eq(fake->rank, 3);
  ck_assert_uint_eq(fake->abi_version, PLUGIN_ABI_VERSION);
  ck_assert_uint_eq(fake->device_count, 1);
  ck_assert_uint_eq(cpu->kind, GLLMK_BACKEND_CPU);
  ck_assert_uint_eq(cpu->rank, 4);
  ck_assert_int_eq(gllmk_discovery_plugin_supports(d, fake_index, GLLMK_OP_fill), 1);
  ck_assert_int_eq(gllmk_discovery_plugin_supports(d, fake_index, GLLMK_OP_add), 0);
  gllmk_device_info info;
  ck_assert_int_eq(gllmk_discovery_device(d, fake_index, 0, &info), GLLMK_OK);
  ck_assert_str_eq(info.name, "Fake device 0");
  gllmk_discovery_free(d);

  gllmk_context *ctx = create(&options);
  ck_assert_str_eq(gllmk_context_backend(ctx), "fakevk");
  expect_fill_works(ctx);
  /* The fake leaves add out: the core refuses it by name. */
  gllmk_buffer *buffer;
  gllmk_tensor t;
  ck_assert_int_eq(gllmk_buffer_alloc(ctx, 64, &buffer), GLLMK_OK);
  ck_assert_int_eq(gllmk_tensor_make(buffer, 0, GLLMK_F32, 1, (const int64_t[]){4}, &t), GLLMK_OK);
  ck_assert_int_eq(gllmk_add(ctx, &(gllmk_add_args){&t, &t, &t}), GLLMK_ERR_UNSUPPORTED);
  ck_assert_msg(test_contains(gllmk_last_error(), "gllmk_add"), "message \"%s\"",
                gllmk_last_error());
  gllmk_context_destroy(ctx);
}
END_TEST

START_TEST(forced_cpu_is_used) {
  add_cpu();
  add_fake("vulkan", "gllmk-fakevk.so");
  gllmk_context_options options = options_here();
  options.backend = "cpu";
  gllmk_discovery *d = discover(&options);
  expect_state(d, "gllmk-cpu.so", GLLMK_PLUGIN_SELECTED, NULL);
  expect_state(d, "gllmk-fakevk.so", GLLMK_PLUGIN_AVAILABLE, NULL);
  gllmk_discovery_free(d);
  expect_context_on(&options, "cpu");
}
END_TEST

START_TEST(excluded_plugin_is_skipped) {
  add_cpu();
  add_fake("vulkan", "gllmk-fakevk.so");
  const char *const exclude[] = {"fakevk"};
  gllmk_context_options options = options_here();
  options.exclude = exclude;
  options.exclude_count = 1;
  gllmk_discovery *d = discover(&options);
  expect_state(d, "gllmk-fakevk.so", GLLMK_PLUGIN_EXCLUDED, NULL);
  expect_state(d, "gllmk-cpu.so", GLLMK_PLUGIN_SELECTED, NULL);
  gllmk_discovery_free(d);
  expect_context_on(&options, "cpu");
}
END_TEST

START_TEST(software_device_only_when_forced) {
  add_cpu();
  add_fake("software", "gllmk-fakesw.so");
  gllmk_context_options options = options_here();
  gllmk_discovery *d = discover(&options);
  expect_state(d, "gllmk-cpu.so", GLLMK_PLUGIN_SELECTED, NULL);
  expect_state(d, "gllmk-fakesw.so", GLLMK_PLUGIN_AVAILABLE, "software");
  gllmk_discovery_free(d);
  expect_context_on(&options, "cpu");

  options.backend = "fakesw";
  gllmk_context *ctx = create(&options);
  ck_assert_str_eq(gllmk_context_backend(ctx), "fakesw");
  gllmk_device_info info;
  ck_assert_int_eq(gllmk_context_device_info(ctx, &info), GLLMK_OK);
  ck_assert_uint_eq(info.flags & GLLMK_DEVICE_SOFTWARE, GLLMK_DEVICE_SOFTWARE);
  expect_fill_works(ctx);
  gllmk_context_destroy(ctx);
}
END_TEST

START_TEST(software_device_alone_is_no_backend) {
  add_fake("software", "gllmk-fakesw.so");
  gllmk_context_options options = options_here();
  gllmk_context *ctx = NULL;
  ck_assert_int_eq(gllmk_context_create(&options, &ctx), GLLMK_ERR_NO_BACKEND);
  ck_assert_str_ne(gllmk_last_error(), "");
  ck_assert_ptr_null(ctx);
}
END_TEST

/* Every kind of bad file at once: each listed with its path and a reason,
 * none of them in the way of the cpu plugin. */
START_TEST(bad_plugins_never_stop_the_others) {
  const char *const files[] = {"gllmk-a-vk.so",       "gllmk-b-vk.so",      "gllmk-cpu.so",
                               "gllmk-fakeabi.so",    "gllmk-fakenodev.so", "gllmk-fakenoentry.so",
                               "gllmk-fakesmall.so",  "gllmk-writable.so",  "x.so"};
  add_fake("vulkan", "gllmk-a-vk.so");
  add_fake("vulkan", "gllmk-b-vk.so");
  add_cpu();
  add_fake("wrongabi", "gllmk-fakeabi.so");
  add_fake("nodevice", "gllmk-fakenodev.so");
  add_fake("noentry", "gllmk-fakenoentry.so");
  add_fake("smallstruct", "gllmk-fakesmall.so");
  add_fake("software", "gllmk-writable.so");
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/gllmk-writable.so", plugin_dir);
  ck_assert_int_eq(chmod(path, 0666), 0);
  add_text("x.so", "#!/bin/sh\n");
  const char *const exclude[] = {"fakevk"};
  gllmk_context_options options = options_here();
  options.exclude = exclude;
  options.exclude_count = 1;

  gllmk_discovery *d = discover(&options);
  uint32_t count = gllmk_discovery_plugin_count(d);
  ck_assert_uint_eq(count, sizeof files / sizeof files[0]);
  for (size_t i = 0; i < count; i++) {
    const gllmk_plugin_record *r = record_of(d, files[i], NULL);
    ck_assert_msg(r->reason[0] != '\0', "%s has no reason", files[i]);
  }
  expect_state(d, "gllmk-cpu.so", GLLMK_PLUGIN_SELECTED, NULL);
  expect_state(d, "gllmk-a-vk.so", GLLMK_PLUGIN_EXCLUDED, NULL);
  expect_state(d, "gllmk-b-vk.so", GLLMK_PLUGIN_EXCLUDED, NULL);
  expect_state(d, "gllmk-fakeabi.so", GLLMK_PLUGIN_REJECTED, NULL);
  expect_state(d, "gllmk-fakenodev.so", GLLMK_PLUGIN_NO_DEVICE, NULL);
  expect_state(d, "gllmk-fakenoentry.so", GLLMK_PLUGIN_REJECTED, NULL);
  expect_state(d, "gllmk-fakesmall.so", GLLMK_PLUGIN_REJECTED, NULL);
  expect_state(d, "gllmk-writable.so", GLLMK_PLUGIN_REJECTED, "writable");
  expect_state(d, "x.so", GLLMK_PLUGIN_REJECTED, NULL);
  gllmk_discovery_free(d);

  expect_context_on(&options, "cpu");
}
END_TEST

START_TEST(empty_directory_is_no_backend) {
  gllmk_context_options options = options_here();
  gllmk_discovery *d = discover(&options);
  ck_assert_uint_eq(gllmk_discovery_plugin_count(d), 0);
  gllmk_discovery_free(d);
  gllmk_context *ctx = NULL;
  ck_assert_int_eq(gllmk_context_create(&options, &ctx), GLLMK_ERR_NO_BACKEND);
  ck_assert_msg(test_contains(gllmk_last_error(), plugin_dir), "message \"%s\"",
                gllmk_last_error());
  ck_assert_msg(test_contains(gllmk_last_error(), "no plugin file"), "message \"%s\"",
                gllmk_last_error());
  ck_assert_ptr_null(ctx);
}
END_TEST

/* A plugin_dir that does not exist is named as such (issue 20), not as a
 * directory whose plugins have no usable device. */
START_TEST(missing_directory_says_so) {
  char missing[PATH_MAX + 16], reason[128];
  snprintf(missing, sizeof missing, "%s/missing", plugin_dir);
  snprintf(reason, sizeof reason, "cannot be opened: %s", strerror(ENOENT));
  gllmk_context_options options = {.plugin_dir = missing};
  gllmk_discovery *d = NULL;
  ck_assert_int_eq(gllmk_discover(&options, &d), GLLMK_OK);
  ck_assert_uint_eq(gllmk_discovery_plugin_count(d), 0);
  gllmk_discovery_free(d);
  gllmk_context *ctx = NULL;
  ck_assert_int_eq(gllmk_context_create(&options, &ctx), GLLMK_ERR_NO_BACKEND);
  ck_assert_ptr_null(ctx);
  ck_assert_msg(test_contains(gllmk_last_error(), missing) &&
                    test_contains(gllmk_last_error(), reason),
                "message \"%s\" lacks \"%s\" or \"%s\"", gllmk_last_error(), missing, reason);
  options.backend = "cpu"; /* forced: the same reason */
  ck_assert_int_eq(gllmk_context_create(&options, &ctx), GLLMK_ERR_NO_BACKEND);
  ck_assert_msg(test_contains(gllmk_last_error(), reason), "message \"%s\"", gllmk_last_error());
}
END_TEST

/* plugin_dir = "" is a caller's bug (NULL is the default directory), not a
 * directory to search (issue 20: it printed "no plugin in  has..."). */
START_TEST(empty_plugin_dir_is_refused) {
  gllmk_context_options options = {.plugin_dir = ""};
  gllmk_discovery *d = NULL;
  ck_assert_int_eq(gllmk_discover(&options, &d), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(d);
  ck_assert_msg(test_contains(gllmk_last_error(), "gllmk_discover: options.plugin_dir"),
                "message \"%s\"", gllmk_last_error());
  gllmk_context *ctx = NULL;
  ck_assert_int_eq(gllmk_context_create(&options, &ctx), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(ctx);
  ck_assert_msg(test_contains(gllmk_last_error(), "gllmk_context_create: options.plugin_dir"),
                "message \"%s\"", gllmk_last_error());
}
END_TEST

/* Without plugin_dir: <directory of libgllmk.so.0>/gllmk, every file
 * listed under it, and the real cpu plugin among them. */
START_TEST(default_plugin_dir_is_next_to_the_library) {
  Dl_info info;
  ck_assert_int_ne(dladdr((const void *)&gllmk_discover_ex, &info), 0);
  char lib[PATH_MAX], lib_dir[PATH_MAX], expected[PATH_MAX + 16];
  ck_assert_ptr_nonnull(realpath(info.dli_fname, lib));
  ck_assert_ptr_nonnull(realpath(TEST_LIB_DIR, lib_dir));
  char *slash = strrchr(lib, '/');
  *slash = '\0';
  ck_assert_str_eq(lib, lib_dir); /* the tests run against the build tree */
  snprintf(expected, sizeof expected, "%s/gllmk", lib);

  gllmk_discovery *d = NULL;
  ck_assert_int_eq(gllmk_discover(NULL, &d), GLLMK_OK);
  char scanned[PATH_MAX];
  ck_assert_ptr_nonnull(realpath(gllmk_discovery_plugin_dir(d), scanned));
  ck_assert_str_eq(scanned, expected);
  bool found_cpu = false;
  for (uint32_t i = 0; i < gllmk_discovery_plugin_count(d); i++) {
    const gllmk_plugin_record *r = gllmk_discovery_plugin(d, i);
    ck_assert_msg(strncmp(r->path, gllmk_discovery_plugin_dir(d),
                          strlen(gllmk_discovery_plugin_dir(d))) == 0,
                  "%s is outside %s", r->path, gllmk_discovery_plugin_dir(d));
    if (strcmp(r->name, "cpu") == 0) found_cpu = true;
  }
  ck_assert_msg(found_cpu, "no cpu plugin in %s", expected);
  gllmk_discovery_free(d);
}
END_TEST

int main(int argc, char **argv) {
  test_parse_args(argc, argv);
  Suite *suite = suite_create("discovery");
  TCase *tc = test_tcase("plugins");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, wrong_abi_major_is_rejected);
  tcase_add_test(tc, missing_entry_is_rejected);
  tcase_add_test(tc, text_file_is_rejected);
  tcase_add_test(tc, unreadable_file_says_why);
  tcase_add_test(tc, world_writable_is_rejected);
  tcase_add_test(tc, too_small_struct_is_rejected);
  tcase_add_test(tc, duplicate_name_is_rejected);
  tcase_add_test(tc, no_device_keeps_the_plugins_reason);
  tcase_add_test(tc, third_party_vulkan_outranks_cpu);
  tcase_add_test(tc, forced_cpu_is_used);
  tcase_add_test(tc, excluded_plugin_is_skipped);
  tcase_add_test(tc, software_device_only_when_forced);
  tcase_add_test(tc, software_device_alone_is_no_backend);
  tcase_add_test(tc, bad_plugins_never_stop_the_others);
  tcase_add_test(tc, empty_directory_is_no_backend);
  tcase_add_test(tc, missing_directory_says_so);
  tcase_add_test(tc, empty_plugin_dir_is_refused);
  tcase_add_test(tc, default_plugin_dir_is_next_to_the_library);
  suite_add_tcase(suite, tc);
  return test_run_suite(suite);
}
