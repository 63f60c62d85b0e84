/*
 * gllmk-info - what gllmk finds on this machine: every plugin file with its
 * state and reason, every device, the backend a default context selects,
 * and the ops each plugin implements. `--json` for machines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gllmk/gllmk.h"

typedef struct options {
  int json;
  gllmk_context_options context;
  const char *excluded[16];
} options;

static void usage(FILE *to) {
  fputs("usage: gllmk-info [--json] [--backend NAME] [--device N] [--exclude NAME]...\n"
        "                  [--plugin-dir DIR]\n"
        "Lists the plugins gllmk finds, their devices, and the backend a context with\n"
        "these options selects.\n", to);
}

static int parse(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(arg, "--json") == 0) { o->json = 1; continue; }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) { usage(stdout); exit(0); }
    if (value == NULL) { usage(stderr); return -1; }
    i++;
    if (strcmp(arg, "--backend") == 0) o->context.backend = value;
    else if (strcmp(arg, "--device") == 0) o->context.device_index = (uint32_t)strtoul(value, NULL, 10);
    else if (strcmp(arg, "--plugin-dir") == 0) o->context.plugin_dir = value;
    else if (strcmp(arg, "--exclude") == 0 && o->context.exclude_count < 16)
      o->excluded[o->context.exclude_count++] = value;
    else { usage(stderr); return -1; }
  }
  o->context.exclude = o->excluded;
  return 0;
}

/* A JSON string literal (the fields are paths, names and messages). */
static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') printf("\\%c", ch);
    else if (ch < 0x20) printf("\\u%04x", ch);
    else putchar(ch);
  }
  putchar('"');
}

static void print_ops_text(const gllmk_discovery *d, uint32_t p) {
  printf("    ops:");
  int missing = 0;
  for (int op = 0; op < GLLMK_OP_COUNT; op++) {
    if (gllmk_discovery_plugin_supports(d, p, (gllmk_op)op)) printf(" %s", gllmk_op_name((gllmk_op)op));
    else missing++;
  }
  printf("%s\n", missing == GLLMK_OP_COUNT ? " (none)" : "");
  if (missing && missing < GLLMK_OP_COUNT) {
    printf("    unsupported:");
    for (int op = 0; op < GLLMK_OP_COUNT; op++)
      if (!gllmk_discovery_plugin_supports(d, p, (gllmk_op)op)) printf(" %s", gllmk_op_name((gllmk_op)op));
    printf("\n");
  }
}

static void print_device_text(const gllmk_device_info *info, uint32_t index) {
  printf("    device %u: %s\n", index, info->name);
  printf("      arch: %s%s\n", info->arch,
         info->flags & GLLMK_DEVICE_SOFTWARE ? " (software: used only when forced)" : "");
  if (info->driver[0]) printf("      driver: %s\n", info->driver);
  if (info->uuid[0]) printf("      uuid: %s\n", info->uuid);
  printf("      memory: %.1f GiB, compute units: %u\n",
         (double)info->memory_bytes / (1024.0 * 1024.0 * 1024.0), info->compute_units);
}

static void print_text(const gllmk_discovery *d) {
  printf("plugin directory: %s\n", gllmk_discovery_plugin_dir(d));
  const char *selected = NULL;
  for (uint32_t p = 0; p < gllmk_discovery_plugin_count(d); p++) {
    const gllmk_plugin_record *r = gllmk_discovery_plugin(d, p);
    if (r->state == GLLMK_PLUGIN_SELECTED) selected = r->name;
    printf("\n%s\n", r->path);
    printf("  name: %s  kind: %s  rank: %u  abi: %u.%u  version: %s\n", r->name[0] ? r->name : "?",
           gllmk_backend_kind_name((gllmk_backend_kind)r->kind), r->rank, r->abi_version >> 16,
           r->abi_version & 0xffffu, r->version[0] ? r->version : "?");
    printf("  state: %s (%s)\n", gllmk_plugin_state_name((gllmk_plugin_state)r->state), r->reason);
    if (r->details[0]) printf("  details: %s\n", r->details);
    for (uint32_t i = 0; i < r->device_count; i++) {
      gllmk_device_info info;
      if (gllmk_discovery_device(d, p, i, &info) == GLLMK_OK) print_device_text(&info, i);
    }
    if (r->state <= GLLMK_PLUGIN_NO_DEVICE) print_ops_text(d, p);
  }
  if (gllmk_discovery_plugin_count(d) == 0) printf("\nno plugin files found\n");
  printf("\nselected backend: %s\n", selected ? selected : "none");
}

static void print_json(const gllmk_discovery *d) {
  printf("{\"plugin_dir\": ");
  json_string(gllmk_discovery_plugin_dir(d));
  const char *selected = NULL;
  printf(", \"plugins\": [");
  for (uint32_t p = 0; p < gllmk_discovery_plugin_count(d); p++) {
    const gllmk_plugin_record *r = gllmk_discovery_plugin(d, p);
    if (r->state == GLLMK_PLUGIN_SELECTED) selected = r->name;
    printf("%s\n  {\"path\": ", p ? "," : "");
    json_string(r->path);
    printf(", \"name\": ");
    json_string(r->name);
    printf(", \"kind\": \"%s\", \"rank\": %u, \"abi_version\": \"%u.%u\", \"version\": ",
           gllmk_backend_kind_name((gllmk_backend_kind)r->kind), r->rank, r->abi_version >> 16,
           r->abi_version & 0xffffu);
    json_string(r->version);
    printf(", \"state\": \"%s\", \"reason\": ", gllmk_plugin_state_name((gllmk_plugin_state)r->state));
    json_string(r->reason);
    printf(", \"details\": ");
    json_string(r->details);
    printf(", \"devices\": [");
    for (uint32_t i = 0; i < r->device_count; i++) {
      gllmk_device_info info;
      if (gllmk_discovery_device(d, p, i, &info) != GLLMK_OK) continue;
      printf("%s{\"name\": ", i ? ", " : "");
      json_string(info.name);
      printf(", \"arch\": ");
      json_string(info.arch);
      printf(", \"driver\": ");
      json_string(info.driver);
      printf(", \"uuid\": ");
      json_string(info.uuid);
      printf(", \"memory_bytes\": %llu, \"compute_units\": %u, \"software\": %s}",
             (unsigned long long)info.memory_bytes, info.compute_units,
             info.flags & GLLMK_DEVICE_SOFTWARE ? "true" : "false");
    }
    printf("], \"ops\": [");
    for (int op = 0, n = 0; op < GLLMK_OP_COUNT; op++)
      if (gllmk_discovery_plugin_supports(d, p, (gllmk_op)op))
        printf("%s\"%s\"", n++ ? ", " : "", gllmk_op_name((gllmk_op)op));
    printf("]}");
  }
  printf("\n], \"selected_backend\": ");
  if (selected) json_string(selected);
  else printf("null");
  printf("}\n");
}

int main(int argc, char **argv) {
  options o = {0};
  if (parse(argc, argv, &o) != 0) return 2;
  gllmk_discovery *d;
  if (gllmk_discover(&o.context, &d) != GLLMK_OK) {
    fprintf(stderr, "gllmk-info: %s\n", gllmk_last_error());
    return 1;
  }
  if (o.json) print_json(d);
  else print_text(d);
  gllmk_discovery_free(d);
  return 0;
}
