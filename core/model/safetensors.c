/*
 * safetensors.c - reads safetensors files (mmap'd) and sharded checkpoints.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
 * then the data, offsets counted from the end of the header. Everything the
 * header claims is checked against the file before a tensor is handed out:
 * a known dtype, a shape whose size matches its byte range, a range inside
 * the file, and no two tensors sharing bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_internal.h"

/* Headers larger than this are refused (the format's own reference
 * implementation uses 100 MB). */
#define ST_MAX_HEADER (100u << 20)

static gllmk_status parse_dtype(const char *path, const char *name, const char *dtype,
                                int32_t *out) {
  static const struct { const char *name; gllmk_dtype dtype; } known[] = {
      {"F32", GLLMK_F32}, {"F16", GLLMK_F16}, {"BF16", GLLMK_BF16}};
  for (size_t i = 0; dtype && i < sizeof known / sizeof known[0]; i++)
    if (strcmp(dtype, known[i].name) == 0) {
      *out = known[i].dtype;
      return GLLMK_OK;
    }
  return MODEL_FAIL(GLLMK_ERR_UNSUPPORTED, "%s: tensor \"%s\" has dtype %s (F32, F16 or BF16 needed)",
                    path, name, dtype ? dtype : "(none)");
}

/* shape: up to GLLMK_MAX_DIMS non-negative integers; the byte count they
 * imply must not overflow. */
static gllmk_status parse_shape(const char *path, const char *name, const json_t *shape,
                                st_tensor *t) {
  size_t ndim = json_array_size(shape);
  if (!json_is_array(shape) || ndim > GLLMK_MAX_DIMS)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: tensor \"%s\" has a bad shape", path, name);
  uint64_t bytes = gllmk_dtype_size((gllmk_dtype)t->dtype);
  for (size_t i = 0; i < ndim; i++) {
    const json_t *dim = json_array_get(shape, i);
    json_int_t value = json_is_integer(dim) ? json_integer_value(dim) : -1;
    if (value < 0 || value > ((json_int_t)1 << 40) || (value && bytes > UINT64_MAX / (uint64_t)value))
      return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: tensor \"%s\" has a bad shape", path,
                        name);
    t->shape[i] = value;
    bytes *= (uint64_t)value;
  }
  t->ndim = (int32_t)ndim;
  t->bytes = bytes;
  return GLLMK_OK;
}

static gllmk_status parse_entry(const char *path, const char *name, const json_t *entry,
                                const uint8_t *data, uint64_t data_size, st_tensor *t) {
  if (!json_is_object(entry))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: tensor \"%s\" is not an object", path, name);
  MODEL_TRY(parse_dtype(path, name, json_string_value(json_object_get(entry, "dtype")), &t->dtype));
  MODEL_TRY(parse_shape(path, name, json_object_get(entry, "shape"), t));
  const json_t *offsets = json_object_get(entry, "data_offsets");
  const json_t *begin = json_array_get(offsets, 0), *end = json_array_get(offsets, 1);
  if (json_array_size(offsets) != 2 || !json_is_integer(begin) || !json_is_integer(end))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: tensor \"%s\" has bad data_offsets", path,
                      name);
  json_int_t b = json_integer_value(begin), e = json_integer_value(end);
  if (b < 0 || e < b || (uint64_t)e > data_size)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "%s: tensor \"%s\" data_offsets [%lld, %lld] run past the %llu data bytes "
                      "(truncated file?)",
                      path, name, (long long)b, (long long)e, (unsigned long long)data_size);
  if ((uint64_t)(e - b) != t->bytes)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "%s: tensor \"%s\" has %lld bytes but its shape and dtype need %llu", path,
                      name, (long long)(e - b), (unsigned long long)t->bytes);
  t->data = data + b;
  t->name = strdup(name);
  t->file = path;
  return t->name ? GLLMK_OK : MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
}

static int by_data(const void *a, const void *b) {
  const st_tensor *x = a, *y = b;
  return x->data < y->data ? -1 : x->data > y->data;
}

/* Sorted by position, each tensor must end before the next begins. */
static gllmk_status check_no_overlap(const st_file *f) {
  if (f->count == 0) return GLLMK_OK;
  st_tensor *sorted = malloc(f->count * sizeof *sorted);
  if (sorted == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", f->path);
  memcpy(sorted, f->tensors, f->count * sizeof *sorted);
  qsort(sorted, f->count, sizeof *sorted, by_data);
  gllmk_status status = GLLMK_OK;
  for (uint32_t i = 1; i < f->count && status == GLLMK_OK; i++)
    if (sorted[i].data < sorted[i - 1].data + sorted[i - 1].bytes)
      status = MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: tensors \"%s\" and \"%s\" overlap",
                          f->path, sorted[i - 1].name, sorted[i].name);
  free(sorted);
  return status;
}

static gllmk_status parse_header(st_file *f, const json_t *header, const uint8_t *data,
                                 uint64_t data_size) {
  size_t count = json_object_size(header);
  f->tensors = calloc(count ? count : 1, sizeof *f->tensors);
  if (f->tensors == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", f->path);
  const char *name;
  json_t *entry;
  json_object_foreach((json_t *)header, name, entry) {
    if (strcmp(name, "__metadata__") == 0) continue;
    MODEL_TRY(parse_entry(f->path, name, entry, data, data_size, &f->tensors[f->count]));
    f->count++;
  }
  return check_no_overlap(f);
}

gllmk_status st_parse(const uint8_t *bytes, uint64_t size, const char *path, st_file *out_file) {
  st_file f;
  memset(&f, 0, sizeof f);
  f.path = strdup(path);
  if (f.path == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  f.map = bytes;
  f.size = size;
  uint64_t header_size = 0;
  for (int i = 0; i < 8 && size >= 8; i++) header_size |= (uint64_t)bytes[i] << (8 * i);
  gllmk_status status = GLLMK_OK;
  if (size < 8 || header_size > size - 8 || header_size > ST_MAX_HEADER)
    status = MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                        "%s: not a safetensors file (header length %llu, file %llu bytes)", path,
                        (unsigned long long)header_size, (unsigned long long)size);
  json_t *header = NULL;
  if (status == GLLMK_OK) {
    json_error_t error;
    header = json_loadb((const char *)bytes + 8, header_size, JSON_REJECT_DUPLICATES, &error);
    if (!json_is_object(header))
      status = MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: bad safetensors header: %s", path,
                          header ? "not an object" : error.text);
  }
  if (status == GLLMK_OK)
    status = parse_header(&f, header, bytes + 8 + header_size, size - 8 - header_size);
  json_decref(header);
  if (status != GLLMK_OK) {
    st_close(&f);
    return status;
  }
  *out_file = f;
  return GLLMK_OK;
}

gllmk_status st_open(const char *path, st_file *out_file) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
    close(fd);
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: not a regular non-empty file", path);
  }
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "%s: mmap: %s", path, strerror(errno));
  /* Read ahead: the upload walks the file front to back. */
  madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL | MADV_WILLNEED);
  gllmk_status status = st_parse(map, (uint64_t)st.st_size, path, out_file);
  if (status != GLLMK_OK) {
    munmap(map, (size_t)st.st_size);
    return status;
  }
  out_file->mapped = true;
  return GLLMK_OK;
}

void st_close(st_file *f) {
  for (uint32_t i = 0; i < f->count; i++) free(f->tensors[i].name);
  free(f->tensors);
  if (f->mapped) munmap((void *)f->map, f->size);
  free(f->path);
  memset(f, 0, sizeof *f);
}

/* ------------------------------------------------------------ checkpoint */

static char *join_path(const char *dir, const char *name) {
  size_t length = strlen(dir) + strlen(name) + 2;
  char *path = malloc(length);
  if (path) snprintf(path, length, "%s/%s", dir, name);
  return path;
}

static gllmk_status add_file(st_model *m, const char *dir, const char *name) {
  for (uint32_t i = 0; i < m->file_count; i++) /* shards repeat in weight_map */
    if (strcmp(strrchr(m->files[i].path, '/') + 1, name) == 0) return GLLMK_OK;
  if (strchr(name, '/') || strcmp(name, "..") == 0 || name[0] == '\0')
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: shard name \"%s\" is not a file name", dir,
                      name);
  st_file *grown = realloc(m->files, (m->file_count + 1) * sizeof *grown);
  char *path = join_path(dir, name);
  if (grown) m->files = grown;
  if (grown == NULL || path == NULL) {
    free(path);
    return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
  }
  gllmk_status status = st_open(path, &m->files[m->file_count]);
  free(path);
  if (status == GLLMK_OK) m->file_count++;
  return status;
}

/* model.safetensors.index.json: {"weight_map": {tensor: shard file}}. */
static gllmk_status open_shards(st_model *m, const char *dir, const char *index_path) {
  json_error_t error;
  json_t *index = json_load_file(index_path, JSON_REJECT_DUPLICATES, &error);
  const json_t *map = json_object_get(index, "weight_map");
  gllmk_status status = json_is_object(map)
      ? GLLMK_OK
      : MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s", index_path,
                   index ? "no \"weight_map\" object" : error.text);
  const char *tensor;
  json_t *file;
  if (status == GLLMK_OK) json_object_foreach((json_t *)map, tensor, file) {
      const char *name = json_string_value(file);
      status = name ? add_file(m, dir, name)
                    : MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: \"%s\" maps to no file name",
                                 index_path, tensor);
      if (status != GLLMK_OK) break;
    }
  json_decref(index);
  return status;
}

gllmk_status st_model_open(const char *dir, st_model *out_model) {
  st_model m = {NULL, 0};
  char *index_path = join_path(dir, "model.safetensors.index.json");
  if (index_path == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
  gllmk_status status = access(index_path, F_OK) == 0 ? open_shards(&m, dir, index_path)
                                                      : add_file(&m, dir, "model.safetensors");
  free(index_path);
  if (status != GLLMK_OK) {
    st_model_close(&m);
    return status;
  }
  *out_model = m;
  return GLLMK_OK;
}

void st_model_close(st_model *m) {
  for (uint32_t i = 0; i < m->file_count; i++) st_close(&m->files[i]);
  free(m->files);
  m->files = NULL;
  m->file_count = 0;
}

const st_tensor *st_model_find(const st_model *m, const char *name) {
  for (uint32_t f = 0; f < m->file_count; f++)
    for (uint32_t i = 0; i < m->files[f].count; i++)
      if (strcmp(m->files[f].tensors[i].name, name) == 0) return &m->files[f].tensors[i];
  return NULL;
}
