/*
 * code_objects.c - the table of embedded code objects and the choice
 * of one by ISA name.
 */
#include "code_objects.h"

#include <stdio.h>
#include <string.h>

#define HSA_TARGET(target) \
  extern const unsigned char hsa_blob_##target[], hsa_blob_##target##_end[];
#include "targets.def"

const hsa_code_object hsa_code_objects[] = {
#define HSA_TARGET(target) {#target, hsa_blob_##target, hsa_blob_##target##_end},
#include "targets.def"
};
const size_t hsa_code_object_count = sizeof hsa_code_objects / sizeof hsa_code_objects[0];

#define ISA_PREFIX "amdgcn-amd-amdhsa--"

const hsa_code_object *hsa_code_object_for_isa(const char *isa_name) {
  if (strncmp(isa_name, ISA_PREFIX, strlen(ISA_PREFIX)) != 0) return NULL;
  const char *processor = isa_name + strlen(ISA_PREFIX);
  size_t length = strcspn(processor, ":");
  for (size_t i = 0; i < hsa_code_object_count; i++) {
    const char *target = hsa_code_objects[i].target;
    if (strlen(target) == length && strncmp(target, processor, length) == 0)
      return &hsa_code_objects[i];
  }
  return NULL;
}

void hsa_code_object_targets(char *text, size_t text_size) {
  size_t used = 0;
  text[0] = '\0';
  for (size_t i = 0; i < hsa_code_object_count && used < text_size; i++) {
    int n = snprintf(text + used, text_size - used, "%s%s", i ? ", " : "",
                     hsa_code_objects[i].target);
    if (n < 0) break;
    used += (size_t)n;
  }
}
