/*
 * code_objects.h - the code objects embedded in the hsa plugin, one
 * per target of targets.def (blobs.S).
 */
#ifndef GLLMK_HSA_CODE_OBJECTS_H_
#define GLLMK_HSA_CODE_OBJECTS_H_

#include <stddef.h>
#include <stdint.h>

typedef struct hsa_code_object {
  const char *target; /* "gfx1100": the processor part of an ISA name */
  const unsigned char *begin, *end;
} hsa_code_object;

static inline size_t hsa_code_object_size(const hsa_code_object *co) {
  return (size_t)((uintptr_t)co->end - (uintptr_t)co->begin);
}

extern const hsa_code_object hsa_code_objects[];
extern const size_t hsa_code_object_count;

/* The code object for an agent's ISA name ("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"),
 * or NULL. Target features after ':' do not matter: the code objects are
 * built for any xnack and sramecc setting. */
const hsa_code_object *hsa_code_object_for_isa(const char *isa_name);

/* "gfx90a, gfx1030, ..." into text. */
void hsa_code_object_targets(char *text, size_t text_size);

#endif /* GLLMK_HSA_CODE_OBJECTS_H_ */
