/*
 * discovery.c - finds plugins in <dir of libgllmk>/gllmk/, loads and probes
 * them, and picks the one a context uses (DESIGN §1.4-1.6, §4).
 *
 * Every *.so file in the directory gets a record, whatever happens to it; a
 * bad file is rejected with a reason and never stops the others.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define PLUGIN_PREFIX "gllmk-"
#define PLUGIN_SUFFIX ".so"

/* Held while a plugin is loaded, queried (probe, device_info, describe) or
 * unloaded, by any thread: see load_plugin. Recursive: a plugin refused
 * while loading is unloaded with it held. */
static pthread_mutex_t plugin_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void core_plugin_unload(void *handle) {
  pthread_mutex_lock(&plugin_lock);
  dlclose(handle);
  pthread_mutex_unlock(&plugin_lock);
}

static void set_reason(gllmk_plugin_record *record, gllmk_plugin_state state,
                       const char *format, ...) __attribute__((format(printf, 3, 4)));
static void set_reason(gllmk_plugin_record *record, gllmk_plugin_state state,
                       const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(record->reason, sizeof record->reason, format, args);
  va_end(args);
  record->state = (uint32_t)state;
}

/* <directory of the file holding libgllmk's code>/gllmk, resolved with dladdr
 * so that the build tree and an installed tree behave the same. */
static gllmk_status default_plugin_dir(char *out, size_t out_size) {
  Dl_info info;
  if (dladdr((const void *)&gllmk_discover_ex, &info) == 0 || info.dli_fname == NULL)
    return core_fail(GLLMK_ERR_INTERNAL, "gllmk_discover: dladdr cannot locate libgllmk");
  char real[PATH_MAX];
  if (realpath(info.dli_fname, real) == NULL)
    return core_fail(GLLMK_ERR_INTERNAL, "gllmk_discover: realpath(%s): %s", info.dli_fname,
                     strerror(errno));
  char *slash = strrchr(real, '/');
  if (slash) *slash = '\0';
  if ((size_t)snprintf(out, out_size, "%s/gllmk", real) >= out_size)
    return core_fail(GLLMK_ERR_INTERNAL, "gllmk_discover: plugin directory path too long");
  return GLLMK_OK;
}

static bool has_suffix(const char *name, const char *suffix) {
  size_t n = strlen(name), s = strlen(suffix);
  return n > s && strcmp(name + n - s, suffix) == 0;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted *.so names in `dir`. A directory that cannot be opened is an
 * empty list; `why` then says why (errno's text), else it is "". */
static gllmk_status list_plugin_files(const char *dir, char ***out_names, uint32_t *out_count,
                                      char *why, size_t why_size) {
  *out_names = NULL;
  *out_count = 0;
  why[0] = '\0';
  DIR *d = opendir(dir);
  if (d == NULL) {
    core_format(why, why_size, "%s", strerror(errno));
    return GLLMK_OK;
  }
  char **names = NULL;
  uint32_t count = 0, capacity = 0;
  gllmk_status status = GLLMK_OK;
  for (struct dirent *entry; (entry = readdir(d)) != NULL;) {
    if (!has_suffix(entry->d_name, PLUGIN_SUFFIX)) continue;
    if (count == capacity) {
      capacity = capacity ? capacity * 2 : 8;
      char **grown = realloc(names, capacity * sizeof *names);
      if (grown == NULL) { status = GLLMK_ERR_OUT_OF_MEMORY; break; }
      names = grown;
    }
    if ((names[count] = strdup(entry->d_name)) == NULL) { status = GLLMK_ERR_OUT_OF_MEMORY; break; }
    count++;
  }
  closedir(d);
  if (status != GLLMK_OK) {
    for (uint32_t i = 0; i < count; i++) free(names[i]);
    free(names);
    return core_fail(status, "gllmk_discover: out of memory listing %s", dir);
  }
  if (count) qsort(names, count, sizeof *names, compare_names);
  *out_names = names;
  *out_count = count;
  return GLLMK_OK;
}

/* "gllmk-cuda.so" -> "cuda": the name a plugin is excluded by before it is loaded. */
static void stem_of(const char *file, char *out, size_t out_size) {
  const char *start = strncmp(file, PLUGIN_PREFIX, strlen(PLUGIN_PREFIX)) == 0
                          ? file + strlen(PLUGIN_PREFIX) : file;
  size_t n = strlen(start) - strlen(PLUGIN_SUFFIX);
  snprintf(out, out_size, "%.*s", (int)n, start);
}

static bool is_excluded(const gllmk_context_options *options, const char *name) {
  for (uint32_t i = 0; options && i < options->exclude_count; i++)
    if (options->exclude[i] && strcmp(options->exclude[i], name) == 0) return true;
  return false;
}

/* File checks before any code of the plugin runs. */
static bool file_is_acceptable(gllmk_plugin_record *record) {
  struct stat st;
  if (stat(record->path, &st) != 0) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "cannot stat: %s", strerror(errno));
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "not a regular file");
    return false;
  }
  if (st.st_mode & S_IWOTH) {
    set_reason(record, GLLMK_PLUGIN_REJECTED,
               "writable by others (mode %04o): refusing to load code anyone can replace",
               (unsigned)(st.st_mode & 07777));
    return false;
  }
  unsigned char magic[4] = {0};
  int fd = open(record->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "cannot open: %s", strerror(errno));
    return false;
  }
  ssize_t got;
  do got = read(fd, magic, sizeof magic);
  while (got < 0 && errno == EINTR);
  int read_error = errno;
  close(fd);
  if (got < 0) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "cannot read: %s", strerror(read_error));
    return false;
  }
  if (got != (ssize_t)sizeof magic || memcmp(magic, "\177ELF", 4) != 0) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "not an ELF shared object");
    return false;
  }
  return true;
}

static bool descriptor_is_acceptable(gllmk_plugin_record *record, const gllmk_plugin *p) {
  uint32_t major = p->abi_version >> 16;
  record->abi_version = p->abi_version;
  if (major != GLLMK_PLUGIN_ABI_MAJOR) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "plugin ABI %u.%u, this libgllmk needs %u.x",
               major, p->abi_version & 0xffffu, GLLMK_PLUGIN_ABI_MAJOR);
    return false;
  }
  if ((p->abi_version & 0xffffu) > GLLMK_PLUGIN_ABI_MINOR) {
    set_reason(record, GLLMK_PLUGIN_REJECTED,
               "plugin ABI %u.%u is newer than this libgllmk's %u.%u", major,
               p->abi_version & 0xffffu, GLLMK_PLUGIN_ABI_MAJOR, GLLMK_PLUGIN_ABI_MINOR);
    return false;
  }
  size_t needed = offsetof(gllmk_plugin, ops_size) + sizeof p->ops_size;
  if (p->struct_size < needed) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "descriptor struct_size=%u is below the %zu bytes "
               "ABI %u needs", p->struct_size, needed, GLLMK_PLUGIN_ABI_MAJOR);
    return false;
  }
  if (p->name == NULL || p->name[0] == '\0' || strlen(p->name) >= sizeof record->name) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "descriptor has no valid name");
    return false;
  }
  snprintf(record->name, sizeof record->name, "%s", p->name);
  snprintf(record->version, sizeof record->version, "%s", p->version ? p->version : "");
  if (p->kind >= GLLMK_BACKEND_KIND_COUNT) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "unknown backend kind %u", p->kind);
    return false;
  }
  record->kind = p->kind;
  record->rank = p->kind; /* the kind enum is in rank order */
  if (!p->probe || !p->device_info || !p->open || !p->close || !p->synchronize ||
      !p->mem_alloc || !p->mem_free || !p->mem_write || !p->mem_read || !p->mem_copy ||
      !p->mem_fill || (p->ops == NULL && p->ops_size != 0)) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "descriptor lacks a required function");
    return false;
  }
  return true;
}

static void unload(core_plugin_slot *slot) {
  free(slot->devices);
  slot->devices = NULL;
  if (slot->handle) core_plugin_unload(slot->handle);
  slot->handle = NULL;
  slot->plugin = NULL;
}

static bool name_taken(const gllmk_discovery *d, uint32_t before, const char *name) {
  for (uint32_t i = 0; i < before; i++)
    if (d->slots[i].plugin && strcmp(d->slots[i].record.name, name) == 0) return true;
  return false;
}

static void probe_devices(core_plugin_slot *slot) {
  gllmk_plugin_record *record = &slot->record;
  uint32_t count = 0;
  char reason[sizeof record->reason] = "";
  core_clear_error();
  gllmk_status status = slot->plugin->probe(&core_plugin_host, &count, reason, sizeof reason);
  if (status != GLLMK_OK) {
    set_reason(record, GLLMK_PLUGIN_NO_DEVICE, "probe failed: %s: %s",
               gllmk_status_string(status), gllmk_last_error());
    return;
  }
  if (count == 0) {
    set_reason(record, GLLMK_PLUGIN_NO_DEVICE, "%s", reason[0] ? reason : "no device found");
    return;
  }
  slot->devices = calloc(count, sizeof *slot->devices);
  if (slot->devices == NULL) {
    set_reason(record, GLLMK_PLUGIN_NO_DEVICE, "out of memory");
    return;
  }
  for (uint32_t i = 0; i < count; i++) {
    if (slot->plugin->device_info(i, &slot->devices[i]) != GLLMK_OK)
      snprintf(slot->devices[i].name, sizeof slot->devices[i].name, "device %u (no info: %s)",
               i, gllmk_last_error());
  }
  record->device_count = count;
  set_reason(record, GLLMK_PLUGIN_AVAILABLE, "available");
}

static void load_plugin_locked(gllmk_discovery *d, uint32_t index,
                               const gllmk_context_options *options) {
  core_plugin_slot *slot = &d->slots[index];
  gllmk_plugin_record *record = &slot->record;
  const char *file = strrchr(record->path, '/') + 1;
  char stem[sizeof record->name];
  stem_of(file, stem, sizeof stem);
  if (is_excluded(options, stem)) {
    snprintf(record->name, sizeof record->name, "%s", stem);
    set_reason(record, GLLMK_PLUGIN_EXCLUDED, "excluded by the context options");
    return;
  }
  if (!file_is_acceptable(record)) return;
  dlerror();
  slot->handle = dlopen(record->path, RTLD_NOW | RTLD_LOCAL);
  if (slot->handle == NULL) {
    const char *why = dlerror();
    set_reason(record, GLLMK_PLUGIN_REJECTED, "dlopen failed: %s", why ? why : "unknown error");
    return;
  }
  gllmk_plugin_entry_fn entry;
  *(void **)&entry = dlsym(slot->handle, GLLMK_PLUGIN_ENTRY_SYMBOL);
  const gllmk_plugin *plugin = entry ? entry() : NULL;
  if (plugin == NULL) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, entry ? "%s() returned NULL"
               : "no symbol %s: not a gllmk plugin", GLLMK_PLUGIN_ENTRY_SYMBOL);
    unload(slot);
    return;
  }
  if (!descriptor_is_acceptable(record, plugin)) {
    unload(slot);
    return;
  }
  if (is_excluded(options, record->name)) {
    set_reason(record, GLLMK_PLUGIN_EXCLUDED, "excluded by the context options");
    unload(slot);
    return;
  }
  if (name_taken(d, index, record->name)) {
    set_reason(record, GLLMK_PLUGIN_REJECTED, "another plugin named \"%s\" was loaded first",
               record->name);
    unload(slot);
    return;
  }
  slot->plugin = plugin;
  probe_devices(slot);
  if (plugin->describe) {
    plugin->describe(record->details, sizeof record->details);
    record->details[sizeof record->details - 1] = '\0';
  }
}

/* Threads that create contexts at once load and probe the same plugin file
 * at once (one copy of it in the process). The plugin ABI lets a plugin
 * keep what probe finds in globals, so the core never runs the loading,
 * probe, device_info, describe or unloading of plugins on two threads at
 * the same time (docs/plugin-abi.md); a plugin must still not rewrite, in a
 * later probe, what its open devices read (issue 20). The lock also orders
 * a plugin's destructor (at the last dlclose) after every other thread's
 * use of it, which ThreadSanitizer cannot see through the dynamic loader's
 * own lock. */
static void load_plugin(gllmk_discovery *d, uint32_t index, const gllmk_context_options *options) {
  pthread_mutex_lock(&plugin_lock);
  load_plugin_locked(d, index, options);
  pthread_mutex_unlock(&plugin_lock);
}

/* Whether a context with these options may run on this slot; if not, why. */
static bool is_usable(const core_plugin_slot *slot, const gllmk_context_options *options,
                      bool forced, char *why, size_t why_size) {
  uint32_t device = options ? options->device_index : 0;
  if (slot->record.state != GLLMK_PLUGIN_AVAILABLE) {
    core_format(why, why_size, "%s", slot->record.reason);
    return false;
  }
  if (device >= slot->record.device_count) {
    core_format(why, why_size, "device_index=%u but it has %u device(s)", device,
             slot->record.device_count);
    return false;
  }
  if (!forced && (slot->devices[device].flags & GLLMK_DEVICE_SOFTWARE)) {
    core_format(why, why_size, "software device (%s): used only when forced",
             slot->devices[device].name);
    return false;
  }
  return true;
}

static void select_plugin(gllmk_discovery *d, const gllmk_context_options *options) {
  const char *forced = options ? options->backend : NULL;
  char why[sizeof d->no_backend_reason];
  d->selected = -1;
  for (uint32_t i = 0; i < d->count; i++) {
    core_plugin_slot *slot = &d->slots[i];
    if (forced && strcmp(slot->record.name, forced) != 0) continue;
    if (!is_usable(slot, options, forced != NULL, why, sizeof why)) {
      if (forced)
        core_format(d->no_backend_reason, sizeof d->no_backend_reason,
                 "backend \"%s\" (%s) cannot be used: %s", forced, slot->record.path, why);
      else if (slot->record.state == GLLMK_PLUGIN_AVAILABLE)
        core_format(slot->record.reason, sizeof slot->record.reason, "not chosen: %s", why);
      continue;
    }
    if (d->selected < 0 || slot->record.rank < d->slots[d->selected].record.rank)
      d->selected = (int32_t)i;
  }
  if (d->selected >= 0) {
    core_plugin_slot *chosen = &d->slots[d->selected];
    set_reason(&chosen->record, GLLMK_PLUGIN_SELECTED, forced ? "forced by the context options"
               : "highest-ranked plugin with a usable device");
    for (uint32_t i = 0; i < d->count; i++) {
      gllmk_plugin_record *r = &d->slots[i].record;
      if (r->state == GLLMK_PLUGIN_AVAILABLE && strcmp(r->reason, "available") == 0)
        core_format(r->reason, sizeof r->reason, "available; ranked below %s", chosen->record.name);
    }
  } else if (d->no_backend_reason[0] != '\0') {
    /* already says why: the directory cannot be read, or the forced backend's reason */
  } else if (forced) {
    core_format(d->no_backend_reason, sizeof d->no_backend_reason,
             "no plugin named \"%s\" in %s", forced, d->plugin_dir);
  } else if (d->count == 0) {
    core_format(d->no_backend_reason, sizeof d->no_backend_reason,
                "the plugin directory %s holds no plugin file (*.so)", d->plugin_dir);
  } else {
    core_format(d->no_backend_reason, sizeof d->no_backend_reason,
             "no plugin in %s has a usable device (gllmk-info lists why)", d->plugin_dir);
  }
}

gllmk_status core_discover(const gllmk_context_options *options, gllmk_discovery **out) {
  gllmk_discovery *d = calloc(1, sizeof *d);
  if (d == NULL) return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_discover: out of memory");
  gllmk_status status;
  if (options && options->plugin_dir) {
    if (strlen(options->plugin_dir) >= sizeof d->plugin_dir) {
      free(d);
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_discover: plugin_dir is too long");
    }
    snprintf(d->plugin_dir, sizeof d->plugin_dir, "%s", options->plugin_dir);
  } else if ((status = default_plugin_dir(d->plugin_dir, sizeof d->plugin_dir)) != GLLMK_OK) {
    free(d);
    return status;
  }
  char **names, dir_error[256];
  if ((status = list_plugin_files(d->plugin_dir, &names, &d->count, dir_error,
                                  sizeof dir_error)) != GLLMK_OK) {
    free(d);
    return status;
  }
  if (dir_error[0])
    core_format(d->no_backend_reason, sizeof d->no_backend_reason,
                "the plugin directory %s cannot be opened: %s", d->plugin_dir, dir_error);
  d->slots = d->count ? calloc(d->count, sizeof *d->slots) : NULL;
  if (d->count && d->slots == NULL) {
    for (uint32_t i = 0; i < d->count; i++) free(names[i]);
    free(names);
    free(d);
    return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_discover: out of memory");
  }
  for (uint32_t i = 0; i < d->count; i++) {
    core_format(d->slots[i].record.path, sizeof d->slots[i].record.path, "%s/%s", d->plugin_dir,
             names[i]);
    free(names[i]);
    d->slots[i].record.rank = GLLMK_BACKEND_OTHER;
    d->slots[i].record.kind = GLLMK_BACKEND_OTHER;
    load_plugin(d, i, options);
  }
  free(names);
  select_plugin(d, options);
  core_clear_error();
  *out = d;
  return GLLMK_OK;
}

/* ------------------------------------------------------------ public */

bool core_options_are_valid(const char *fn, const gllmk_context_options *options) {
  if (options && options->plugin_dir && options->plugin_dir[0] == '\0') {
    core_fail(GLLMK_ERR_INVALID_ARGUMENT,
              "%s: options.plugin_dir is an empty string (NULL means the default directory)",
              fn);
    return false;
  }
  if (options && options->exclude_count && options->exclude == NULL) {
    core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: options.exclude is NULL but exclude_count=%u",
              fn, options->exclude_count);
    return false;
  }
  return true;
}

gllmk_status gllmk_discover_ex(const gllmk_context_options *options, size_t options_size,
                               gllmk_discovery **out_discovery) {
  static const char fn[] = "gllmk_discover";
  core_clear_error();
  if (out_discovery == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_discovery is NULL", fn);
  gllmk_context_options full;
  CORE_TRY(core_options_copy(fn, options, options_size, &full));
  if (!core_options_are_valid(fn, options ? &full : NULL)) return GLLMK_ERR_INVALID_ARGUMENT;
  return core_discover(options ? &full : NULL, out_discovery);
}

void gllmk_discovery_free(gllmk_discovery *discovery) {
  if (discovery == NULL) return;
  for (uint32_t i = 0; i < discovery->count; i++) unload(&discovery->slots[i]);
  free(discovery->slots);
  free(discovery);
}

const char *gllmk_discovery_plugin_dir(const gllmk_discovery *discovery) {
  return discovery ? discovery->plugin_dir : NULL;
}

uint32_t gllmk_discovery_plugin_count(const gllmk_discovery *discovery) {
  return discovery ? discovery->count : 0;
}

const gllmk_plugin_record *gllmk_discovery_plugin(const gllmk_discovery *discovery,
                                                 uint32_t index) {
  return discovery && index < discovery->count ? &discovery->slots[index].record : NULL;
}

gllmk_status gllmk_discovery_device(const gllmk_discovery *discovery, uint32_t plugin_index,
                                    uint32_t device_index, gllmk_device_info *out_info) {
  core_clear_error();
  if (discovery == NULL || out_info == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_discovery_device: %s is NULL",
                     discovery ? "out_info" : "discovery");
  if (plugin_index >= discovery->count)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "gllmk_discovery_device: plugin_index=%u, only %u plugin(s)", plugin_index,
                     discovery->count);
  const core_plugin_slot *slot = &discovery->slots[plugin_index];
  if (device_index >= slot->record.device_count)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "gllmk_discovery_device: device_index=%u, plugin %s has %u device(s)",
                     device_index, slot->record.name, slot->record.device_count);
  *out_info = slot->devices[device_index];
  return GLLMK_OK;
}

const void *core_plugin_op(const gllmk_plugin *plugin, gllmk_op op) {
  size_t offset = (size_t)op * sizeof(void (*)(void));
  if (plugin == NULL || plugin->ops == NULL || (unsigned)op >= GLLMK_OP_COUNT ||
      plugin->ops_size < offset + sizeof(void (*)(void)))
    return NULL;
  const void *slot;
  memcpy(&slot, (const char *)plugin->ops + offset, sizeof slot);
  return slot;
}

bool core_plugin_reaches(const gllmk_plugin *plugin, size_t offset, size_t size) {
  return plugin != NULL && plugin->struct_size >= offset + size;
}

int gllmk_discovery_plugin_supports(const gllmk_discovery *discovery, uint32_t plugin_index,
                                    gllmk_op op) {
  if (discovery == NULL || plugin_index >= discovery->count) return 0;
  return core_plugin_op(discovery->slots[plugin_index].plugin, op) != NULL;
}
