/*
 * hsa_codeobj.c - checks the code objects embedded in the hsa plugin
 * without an AMD GPU.
 *
 * The test links the plugin's own blobs.o (the very bytes the plugin
 * embeds), its target table and its kernel table (kernels/gk_kernels.def).
 * For every target it parses the ELF file and the AMDGPU metadata note
 * (MessagePack) and checks that each kernel the host dispatches is there,
 * with the argument layout the host writes (kernarg size, alignment, the
 * offset and size of every explicit argument, no hidden argument the host
 * would have to fill), the work-group size the host launches, and the
 * ELF header of an HSA code object for that processor.
 */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "code_objects.h"
#include "testlib.h"

#define NT_AMDGPU_METADATA 32
#define ELFOSABI_AMDGPU_HSA 64
#define ELFABIVERSION_AMDGPU_HSA_V4 2
#define EF_AMDGPU_MACH 0x0ffu
#define EF_AMDGPU_FEATURE_XNACK_V4 0x300u
#define EF_AMDGPU_FEATURE_SRAMECC_V4 0xc00u
#define EF_AMDGPU_FEATURE_ANY_XNACK 0x100u
#define EF_AMDGPU_FEATURE_ANY_SRAMECC 0x400u
/* Work-group memory of every target here (the LDS of one CU/WGP). */
#define LDS_LIMIT 65536

/* ELF e_flags machine values (LLVM's EF_AMDGPU_MACH_AMDGCN_*). */
static const struct {
  const char *target;
  unsigned mach;
} machines[] = {
    {"gfx90a", 0x3f},  {"gfx1030", 0x36}, {"gfx1031", 0x37},
    {"gfx1100", 0x41}, {"gfx1101", 0x46}, {"gfx1102", 0x47},
};

/* ------------------------------------------------------------ MessagePack */

typedef enum mp_kind { MP_NIL, MP_BOOL, MP_INT, MP_FLOAT, MP_STR, MP_ARRAY, MP_MAP } mp_kind;

typedef struct mp_node {
  mp_kind kind;
  int64_t integer;      /* MP_INT, MP_BOOL */
  const char *str;      /* MP_STR: not NUL-terminated */
  uint32_t length;      /* MP_STR: bytes; MP_ARRAY: items; MP_MAP: pairs */
  struct mp_node *items; /* MP_ARRAY: items; MP_MAP: key, value, key, ... */
} mp_node;

typedef struct mp_reader {
  const unsigned char *at, *end;
  int failed;
} mp_reader;

static uint64_t mp_take(mp_reader *r, int bytes) {
  if (r->failed || r->end - r->at < bytes) {
    r->failed = 1;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v = v << 8 | *r->at++;
  return v;
}

static void mp_free(mp_node *n) {
  if (n->kind != MP_ARRAY && n->kind != MP_MAP) return;
  uint32_t count = n->kind == MP_MAP ? 2 * n->length : n->length;
  for (uint32_t i = 0; n->items && i < count; i++) mp_free(&n->items[i]);
  free(n->items);
}

static void mp_parse(mp_reader *r, mp_node *out, int depth);

static void mp_parse_items(mp_reader *r, mp_node *out, mp_kind kind, uint32_t length, int depth) {
  out->kind = kind;
  out->length = length;
  uint32_t count = kind == MP_MAP ? 2 * length : length;
  if (count > (uint32_t)(r->end - r->at)) { /* every item takes a byte at least */
    r->failed = 1;
    return;
  }
  out->items = calloc(count ? count : 1, sizeof *out->items);
  if (out->items == NULL) {
    r->failed = 1;
    return;
  }
  for (uint32_t i = 0; i < count && !r->failed; i++) mp_parse(r, &out->items[i], depth + 1);
}

static void mp_parse_str(mp_reader *r, mp_node *out, uint32_t length) {
  if ((uint64_t)(r->end - r->at) < length) {
    r->failed = 1;
    return;
  }
  out->kind = MP_STR;
  out->str = (const char *)r->at;
  out->length = length;
  r->at += length;
}

static void mp_parse(mp_reader *r, mp_node *out, int depth) {
  memset(out, 0, sizeof *out);
  unsigned byte = (unsigned)mp_take(r, 1);
  if (r->failed || depth > 32) {
    r->failed = 1;
    return;
  }
  if (byte <= 0x7f || byte >= 0xe0) { /* positive / negative fixint */
    out->kind = MP_INT;
    out->integer = (int8_t)byte;
    if (byte <= 0x7f) out->integer = byte;
  } else if (byte <= 0x8f) {
    mp_parse_items(r, out, MP_MAP, byte & 0x0f, depth);
  } else if (byte <= 0x9f) {
    mp_parse_items(r, out, MP_ARRAY, byte & 0x0f, depth);
  } else if (byte <= 0xbf) {
    mp_parse_str(r, out, byte & 0x1f);
  } else {
    switch (byte) {
      case 0xc0: out->kind = MP_NIL; break;
      case 0xc2: case 0xc3: out->kind = MP_BOOL; out->integer = byte == 0xc3; break;
      case 0xc4: case 0xd9: mp_parse_str(r, out, (uint32_t)mp_take(r, 1)); break;
      case 0xc5: case 0xda: mp_parse_str(r, out, (uint32_t)mp_take(r, 2)); break;
      case 0xc6: case 0xdb: mp_parse_str(r, out, (uint32_t)mp_take(r, 4)); break;
      case 0xca: out->kind = MP_FLOAT; mp_take(r, 4); break;
      case 0xcb: out->kind = MP_FLOAT; mp_take(r, 8); break;
      case 0xcc: out->kind = MP_INT; out->integer = (int64_t)mp_take(r, 1); break;
      case 0xcd: out->kind = MP_INT; out->integer = (int64_t)mp_take(r, 2); break;
      case 0xce: out->kind = MP_INT; out->integer = (int64_t)mp_take(r, 4); break;
      case 0xcf: out->kind = MP_INT; out->integer = (int64_t)mp_take(r, 8); break;
      case 0xd0: out->kind = MP_INT; out->integer = (int8_t)mp_take(r, 1); break;
      case 0xd1: out->kind = MP_INT; out->integer = (int16_t)mp_take(r, 2); break;
      case 0xd2: out->kind = MP_INT; out->integer = (int32_t)mp_take(r, 4); break;
      case 0xd3: out->kind = MP_INT; out->integer = (int64_t)mp_take(r, 8); break;
      case 0xdc: mp_parse_items(r, out, MP_ARRAY, (uint32_t)mp_take(r, 2), depth); break;
      case 0xdd: mp_parse_items(r, out, MP_ARRAY, (uint32_t)mp_take(r, 4), depth); break;
      case 0xde: mp_parse_items(r, out, MP_MAP, (uint32_t)mp_take(r, 2), depth); break;
      case 0xdf: mp_parse_items(r, out, MP_MAP, (uint32_t)mp_take(r, 4), depth); break;
      default: r->failed = 1; break; /* ext types: not used by AMDGPU metadata */
    }
  }
}

static int mp_str_is(const mp_node *n, const char *text) {
  return n && n->kind == MP_STR && n->length == strlen(text) && memcmp(n->str, text, n->length) == 0;
}

/* The value for `key` in a map, or NULL. */
static const mp_node *mp_get(const mp_node *map, const char *key) {
  if (map == NULL || map->kind != MP_MAP) return NULL;
  for (uint32_t i = 0; i < map->length; i++)
    if (mp_str_is(&map->items[2 * i], key)) return &map->items[2 * i + 1];
  return NULL;
}

/* An integer value of a map, or -1 if it is missing or not an integer. */
static int64_t mp_int(const mp_node *map, const char *key) {
  const mp_node *n = mp_get(map, key);
  return n && n->kind == MP_INT ? n->integer : -1;
}

/* ------------------------------------------------------------ ELF */

typedef struct code_object_view {
  const hsa_code_object *co;
  const Elf64_Ehdr *header;
  const Elf64_Shdr *sections;
  mp_node metadata;
  int has_metadata;
} code_object_view;

static const unsigned char *at_offset(const hsa_code_object *co, uint64_t offset, uint64_t size) {
  size_t total = hsa_code_object_size(co);
  if (offset > total || size > total - offset) return NULL;
  return co->begin + offset;
}

/* Finds the NT_AMDGPU_METADATA note of owner "AMDGPU" and parses it. */
static int read_metadata(code_object_view *v) {
  for (int i = 0; i < v->header->e_shnum; i++) {
    const Elf64_Shdr *s = &v->sections[i];
    if (s->sh_type != SHT_NOTE) continue;
    const unsigned char *note = at_offset(v->co, s->sh_offset, s->sh_size);
    ck_assert_msg(note != NULL, "%s: note section outside the file", v->co->target);
    for (uint64_t pos = 0; pos + sizeof(Elf64_Nhdr) <= s->sh_size;) {
      Elf64_Nhdr nh;
      memcpy(&nh, note + pos, sizeof nh);
      uint64_t name_at = pos + sizeof nh, desc_at = name_at + ((nh.n_namesz + 3u) & ~3u);
      uint64_t next = desc_at + ((nh.n_descsz + 3u) & ~3u);
      ck_assert_msg(next <= s->sh_size, "%s: truncated note", v->co->target);
      if (nh.n_type == NT_AMDGPU_METADATA && nh.n_namesz == 7 &&
          memcmp(note + name_at, "AMDGPU", 7) == 0) {
        mp_reader r = {note + desc_at, note + desc_at + nh.n_descsz, 0};
        mp_parse(&r, &v->metadata, 0);
        ck_assert_msg(!r.failed, "%s: the AMDGPU metadata is not valid MessagePack", v->co->target);
        v->has_metadata = 1;
        return 1;
      }
      pos = next;
    }
  }
  return 0;
}

/* Whether the dynamic symbol table defines `name`. */
static int has_dynamic_symbol(const code_object_view *v, const char *name) {
  for (int i = 0; i < v->header->e_shnum; i++) {
    const Elf64_Shdr *s = &v->sections[i];
    if (s->sh_type != SHT_DYNSYM || s->sh_link >= v->header->e_shnum) continue;
    const Elf64_Shdr *strtab = &v->sections[s->sh_link];
    const unsigned char *syms = at_offset(v->co, s->sh_offset, s->sh_size);
    const char *names = (const char *)at_offset(v->co, strtab->sh_offset, strtab->sh_size);
    ck_assert(syms != NULL && names != NULL);
    for (uint64_t j = 0; j < s->sh_size / sizeof(Elf64_Sym); j++) {
      Elf64_Sym sym;
      memcpy(&sym, syms + j * sizeof sym, sizeof sym);
      if (sym.st_name < strtab->sh_size && sym.st_shndx != SHN_UNDEF &&
          strncmp(names + sym.st_name, name, strtab->sh_size - sym.st_name) == 0)
        return 1;
    }
  }
  return 0;
}

static void open_view(const hsa_code_object *co, code_object_view *v) {
  memset(v, 0, sizeof *v);
  v->co = co;
  v->header = (const Elf64_Ehdr *)(const void *)at_offset(co, 0, sizeof(Elf64_Ehdr));
  ck_assert_msg(v->header != NULL, "%s: shorter than an ELF header", co->target);
  const Elf64_Ehdr *h = v->header;
  ck_assert_msg(memcmp(h->e_ident, ELFMAG, SELFMAG) == 0, "%s: not ELF", co->target);
  ck_assert_msg(h->e_ident[EI_CLASS] == ELFCLASS64 && h->e_ident[EI_DATA] == ELFDATA2LSB,
                "%s: not a little-endian ELF64 file", co->target);
  ck_assert_msg(h->e_machine == EM_AMDGPU, "%s: e_machine %u, not EM_AMDGPU", co->target,
                h->e_machine);
  ck_assert_msg(h->e_ident[EI_OSABI] == ELFOSABI_AMDGPU_HSA, "%s: OS ABI %u, not AMDGPU HSA",
                co->target, h->e_ident[EI_OSABI]);
  ck_assert_msg(h->e_ident[EI_ABIVERSION] == ELFABIVERSION_AMDGPU_HSA_V4,
                "%s: ABI version %u, not code object v4", co->target, h->e_ident[EI_ABIVERSION]);
  ck_assert_msg(h->e_type == ET_DYN, "%s: not a shared object", co->target);
  ck_assert(h->e_shentsize == sizeof(Elf64_Shdr));
  v->sections = (const Elf64_Shdr *)(const void *)at_offset(
      co, h->e_shoff, (uint64_t)h->e_shnum * sizeof(Elf64_Shdr));
  ck_assert_msg(v->sections != NULL, "%s: section headers outside the file", co->target);
  ck_assert_msg(read_metadata(v), "%s: no AMDGPU metadata note", co->target);
}

static void close_view(code_object_view *v) {
  if (v->has_metadata) mp_free(&v->metadata);
}

/* ------------------------------------------------------------ kernels */

static const mp_node *find_kernel(const mp_node *kernels, const char *name) {
  for (uint32_t i = 0; i < kernels->length; i++)
    if (mp_str_is(mp_get(&kernels->items[i], ".name"), name)) return &kernels->items[i];
  return NULL;
}

/* The explicit arguments the host writes (backend.h): `buffers` global
 * pointers at 0, 8, ..., then the params struct; anything after them must
 * be a hidden argument for which the host's zeros are right. */
static void check_arguments(const char *target, const gk_kernel_info *info, const mp_node *k) {
  const mp_node *args = mp_get(k, ".args");
  ck_assert_msg(args && args->kind == MP_ARRAY, "%s: %s has no .args", target, info->symbol);
  ck_assert_msg(args->length >= info->buffers + 1, "%s: %s has %u arguments, the host passes %u",
                target, info->symbol, args->length, info->buffers + 1);
  for (uint32_t i = 0; i < info->buffers; i++) {
    const mp_node *a = &args->items[i];
    ck_assert_msg(mp_str_is(mp_get(a, ".value_kind"), "global_buffer") &&
                      mp_int(a, ".offset") == 8 * (int64_t)i && mp_int(a, ".size") == 8,
                  "%s: %s argument %u is not a global pointer at offset %u", target, info->symbol,
                  i, 8 * i);
  }
  const mp_node *p = &args->items[info->buffers];
  ck_assert_msg(mp_str_is(mp_get(p, ".value_kind"), "by_value") &&
                    mp_int(p, ".offset") == gk_params_offset(info) &&
                    mp_int(p, ".size") == info->params_size,
                "%s: %s params: offset %lld size %lld, the host writes %u bytes at %u", target,
                info->symbol, (long long)mp_int(p, ".offset"), (long long)mp_int(p, ".size"),
                info->params_size, gk_params_offset(info));
  for (uint32_t i = info->buffers + 1; i < args->length; i++) {
    const mp_node *kind = mp_get(&args->items[i], ".value_kind");
    ck_assert_msg(mp_str_is(kind, "hidden_global_offset_x") ||
                      mp_str_is(kind, "hidden_global_offset_y") ||
                      mp_str_is(kind, "hidden_global_offset_z") || mp_str_is(kind, "hidden_none"),
                  "%s: %s argument %u is a hidden argument the host does not fill (%.*s)", target,
                  info->symbol, i, kind && kind->kind == MP_STR ? (int)kind->length : 1,
                  kind && kind->kind == MP_STR ? kind->str : "?");
  }
}

static void check_kernel(const code_object_view *v, const mp_node *kernels, const gk_kernel_info *info) {
  const char *target = v->co->target;
  const mp_node *k = find_kernel(kernels, info->symbol);
  ck_assert_msg(k != NULL, "%s: kernel %s is missing", target, info->symbol);

  char descriptor[96];
  snprintf(descriptor, sizeof descriptor, "%s.kd", info->symbol);
  ck_assert_msg(mp_str_is(mp_get(k, ".symbol"), descriptor), "%s: %s: .symbol is not %s", target,
                info->symbol, descriptor);
  ck_assert_msg(has_dynamic_symbol(v, descriptor), "%s: no symbol %s", target, descriptor);

  int64_t size = mp_int(k, ".kernarg_segment_size"), align = mp_int(k, ".kernarg_segment_align");
  ck_assert_msg(size >= gk_kernarg_size(info), "%s: %s: kernarg segment %lld < %u written by the host",
                target, info->symbol, (long long)size, gk_kernarg_size(info));
  /* The host's kernarg slots are 64-byte aligned; the params need 8. */
  ck_assert_msg(align >= 8 && align <= 64, "%s: %s: kernarg alignment %lld", target, info->symbol,
                (long long)align);
  check_arguments(target, info, k);

  const mp_node *wg = mp_get(k, ".reqd_workgroup_size");
  ck_assert_msg(wg && wg->kind == MP_ARRAY && wg->length == 3 &&
                    wg->items[0].integer == info->workgroup_size && wg->items[1].integer == 1 &&
                    wg->items[2].integer == 1,
                "%s: %s: .reqd_workgroup_size is not [%u, 1, 1]", target, info->symbol,
                info->workgroup_size);
  ck_assert_msg(mp_int(k, ".max_flat_workgroup_size") >= info->workgroup_size,
                "%s: %s: max flat work-group size below %u", target, info->symbol,
                info->workgroup_size);
  int64_t lds = mp_int(k, ".group_segment_fixed_size");
  ck_assert_msg(lds >= 0 && lds <= LDS_LIMIT, "%s: %s: %lld bytes of work-group memory", target,
                info->symbol, (long long)lds);
}

START_TEST(code_object_is_complete) {
  const hsa_code_object *co = &hsa_code_objects[_i];
  code_object_view v;
  open_view(co, &v);

  unsigned mach = 0;
  for (size_t i = 0; i < sizeof machines / sizeof machines[0]; i++)
    if (strcmp(machines[i].target, co->target) == 0) mach = machines[i].mach;
  ck_assert_msg(mach != 0, "%s: target unknown to this test", co->target);
  uint32_t flags = v.header->e_flags;
  ck_assert_msg((flags & EF_AMDGPU_MACH) == mach, "%s: e_flags machine 0x%x, expected 0x%x",
                co->target, flags & EF_AMDGPU_MACH, mach);
  /* Built for any xnack/sramecc mode (or a target without them), so the
   * runtime loads it whatever the agent's setting. */
  uint32_t xnack = flags & EF_AMDGPU_FEATURE_XNACK_V4, sramecc = flags & EF_AMDGPU_FEATURE_SRAMECC_V4;
  ck_assert_msg(xnack == 0 || xnack == EF_AMDGPU_FEATURE_ANY_XNACK, "%s: xnack pinned", co->target);
  ck_assert_msg(sramecc == 0 || sramecc == EF_AMDGPU_FEATURE_ANY_SRAMECC, "%s: sramecc pinned",
                co->target);

  char target[64];
  snprintf(target, sizeof target, "amdgcn-amd-amdhsa--%s", co->target);
  ck_assert_msg(mp_str_is(mp_get(&v.metadata, "amdhsa.target"), target),
                "%s: amdhsa.target is not %s", co->target, target);
  const mp_node *version = mp_get(&v.metadata, "amdhsa.version");
  ck_assert_msg(version && version->kind == MP_ARRAY && version->length == 2 &&
                    version->items[0].integer == 1,
                "%s: amdhsa.version is not 1.x (code object v4 metadata)", co->target);
  const mp_node *kernels = mp_get(&v.metadata, "amdhsa.kernels");
  ck_assert_msg(kernels && kernels->kind == MP_ARRAY, "%s: no amdhsa.kernels", co->target);
  ck_assert_msg(kernels->length == GK_KERNEL_COUNT, "%s: %u kernels, the host table has %d",
                co->target, kernels->length, GK_KERNEL_COUNT);
  for (int i = 0; i < GK_KERNEL_COUNT; i++) check_kernel(&v, kernels, &gk_kernels[i]);
  printf("%s: %zu bytes, %u kernels match the host's table\n", co->target,
         hsa_code_object_size(co), kernels->length);
  close_view(&v);
}
END_TEST

START_TEST(every_target_has_a_code_object) {
  ck_assert_uint_eq(hsa_code_object_count, sizeof machines / sizeof machines[0]);
  for (size_t i = 0; i < hsa_code_object_count; i++)
    ck_assert_msg(hsa_code_object_size(&hsa_code_objects[i]) > sizeof(Elf64_Ehdr),
                  "%s: empty code object", hsa_code_objects[i].target);
}
END_TEST

START_TEST(isa_names_choose_the_code_object) {
  static const struct {
    const char *isa, *target; /* NULL: none */
  } cases[] = {
      {"amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-", "gfx90a"},
      {"amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack+", "gfx90a"},
      {"amdgcn-amd-amdhsa--gfx1030", "gfx1030"},
      {"amdgcn-amd-amdhsa--gfx1031", "gfx1031"},
      {"amdgcn-amd-amdhsa--gfx1100", "gfx1100"},
      {"amdgcn-amd-amdhsa--gfx1101", "gfx1101"},
      {"amdgcn-amd-amdhsa--gfx1102", "gfx1102"},
      {"amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", NULL},
      {"amdgcn-amd-amdhsa--gfx110", NULL}, /* a prefix of a target is no match */
      {"amdgcn-amd-amdhsa--gfx11000", NULL},
      {"gfx1100", NULL},
      {"", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const hsa_code_object *co = hsa_code_object_for_isa(cases[i].isa);
    if (cases[i].target == NULL)
      ck_assert_msg(co == NULL, "\"%s\" matched %s", cases[i].isa, co ? co->target : "");
    else
      ck_assert_msg(co != NULL && strcmp(co->target, cases[i].target) == 0,
                    "\"%s\" did not choose %s", cases[i].isa, cases[i].target);
  }
  char targets[128];
  hsa_code_object_targets(targets, sizeof targets);
  ck_assert_str_eq(targets, "gfx90a, gfx1030, gfx1031, gfx1100, gfx1101, gfx1102");
}
END_TEST

int main(int argc, char **argv) {
  test_parse_args(argc, argv);
  Suite *suite = suite_create("hsa_codeobj");
  TCase *tc = test_tcase("code objects");
  tcase_add_test(tc, every_target_has_a_code_object);
  tcase_add_loop_test(tc, code_object_is_complete, 0, (int)hsa_code_object_count);
  tcase_add_test(tc, isa_names_choose_the_code_object);
  suite_add_tcase(suite, tc);
  return test_run_suite(suite);
}
