/*
 * fatbin.c - reads the list of code images out of the embedded fatbin.
 *
 * Layout (little-endian): a 16-byte header {u32 magic 0xBA55ED50, u16
 * version, u16 header size, u64 size of the entries}, then entries, each a
 * header {u16 kind (1 = PTX, 2 = SASS), u16 version, u32 header size, u64
 * payload size, ..., u32 architecture at byte 28, u64 flags at byte 40}
 * followed by its payload. Flag 0x100000 marks arch-specific code (sm_90a).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fatbin.h"

extern const unsigned char gllmk_cuda_fatbin[];
extern const unsigned char gllmk_cuda_fatbin_end[];

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_SASS 2
#define FATBIN_ARCH_SPECIFIC 0x100000u
#define FATBIN_MAX_IMAGES 32

typedef struct fatbin_image {
  int kind, sm, arch_specific;
} fatbin_image;

const void *cuda_fatbin_data(void) { return gllmk_cuda_fatbin; }

static uint64_t read_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Lists the images; returns how many (0 if the blob is not a fatbin). */
static int list_images(fatbin_image *images, int max) {
  const unsigned char *p = gllmk_cuda_fatbin;
  const size_t total = (size_t)(gllmk_cuda_fatbin_end - gllmk_cuda_fatbin);
  if (total < 16 || read_le(p, 4) != FATBIN_MAGIC) return 0;
  const uint64_t header = read_le(p + 6, 2), entries = read_le(p + 8, 8);
  if (header > total || entries > total - header) return 0;
  const unsigned char *at = p + header, *end = at + entries;
  int count = 0;
  while (at + 48 <= end && count < max) {
    const uint64_t entry_header = read_le(at + 4, 4), payload = read_le(at + 8, 8);
    if (entry_header < 48 || entry_header > (uint64_t)(end - at) || payload > (uint64_t)(end - at) - entry_header) break;
    images[count].kind = (int)read_le(at, 2);
    images[count].sm = (int)read_le(at + 28, 4);
    images[count].arch_specific = (read_le(at + 40, 8) & FATBIN_ARCH_SPECIFIC) != 0;
    count++;
    at += entry_header + payload;
  }
  return count;
}

/* snprintf at text + used; returns the new length (truncating at size). */
static size_t append(char *text, size_t size, size_t used, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static size_t append(char *text, size_t size, size_t used, const char *format, ...) {
  if (used + 1 >= size) return used;
  va_list args;
  va_start(args, format);
  const int n = vsnprintf(text + used, size - used, format, args);
  va_end(args);
  if (n < 0) return used;
  return (size_t)n >= size - used ? size - 1 : used + (size_t)n;
}

size_t cuda_fatbin_describe(char *text, size_t size) {
  fatbin_image images[FATBIN_MAX_IMAGES];
  const int count = list_images(images, FATBIN_MAX_IMAGES);
  size_t used = 0;
  if (size == 0) return 0;
  text[0] = '\0';
  if (count == 0) return append(text, size, 0, "kernels: the embedded fatbin is unreadable");
  used = append(text, size, used, "kernels: SASS");
  for (int i = 0; i < count; i++)
    if (images[i].kind == FATBIN_KIND_SASS)
      used = append(text, size, used, " sm_%d%s", images[i].sm, images[i].arch_specific ? "a" : "");
  used = append(text, size, used, ", PTX");
  for (int i = 0; i < count; i++)
    if (images[i].kind == FATBIN_KIND_PTX)
      used = append(text, size, used, " compute_%d%s", images[i].sm, images[i].arch_specific ? "a" : "");
  return used;
}

size_t cuda_fatbin_choice(int sm, char *text, size_t size) {
  fatbin_image images[FATBIN_MAX_IMAGES];
  const int count = list_images(images, FATBIN_MAX_IMAGES);
  int sass = -1, ptx = -1;
  for (int i = 0; i < count; i++) {
    const fatbin_image *im = &images[i];
    /* Of equal candidates the driver prefers the arch-specific image. */
    if (im->kind == FATBIN_KIND_SASS && im->sm / 10 == sm / 10 && im->sm <= sm && (!im->arch_specific || im->sm == sm) &&
        (sass < 0 || im->sm > images[sass].sm || (im->sm == images[sass].sm && im->arch_specific)))
      sass = i;
    if (im->kind == FATBIN_KIND_PTX && !im->arch_specific && im->sm <= sm && (ptx < 0 || im->sm > images[ptx].sm))
      ptx = i;
  }
  if (size == 0) return 0;
  text[0] = '\0';
  if (sass >= 0) return append(text, size, 0, "SASS sm_%d%s", images[sass].sm, images[sass].arch_specific ? "a" : "");
  if (ptx >= 0) return append(text, size, 0, "PTX compute_%d (compiled by the driver)", images[ptx].sm);
  return append(text, size, 0, "no code for sm_%d", sm);
}
