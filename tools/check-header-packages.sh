#!/bin/sh
# check-header-packages.sh [--without PKG]... BUILD_DIR [RUN_DEPFILE...]
#
# Fails when the build includes a system header from a Debian package that
# tools/ensure-deps.sh does not install, so that a fresh Debian machine
# cannot stop on a missing header that the machine the tests ran on
# happened to have (issue 19: CL/cl.h, from opencl-c-headers).
#
#   BUILD_DIR     every *.d file under it is read (the compiler's dependency
#                 lists, system headers included: tests/tests.mk adds -MD);
#                 each header outside the repository and BUILD_DIR must come
#                 from a package that `ensure-deps.sh check` installs.
#   RUN_DEPFILE   the .d files of what `make run` builds (given by
#                 tests/tests.mk): their headers must come from a package
#                 that `ensure-deps.sh build` installs. Missing ones (objects
#                 assembled from .S files have none) are skipped.
#   --without PKG checks as if PKG were not in ensure-deps.sh's lists (to
#                 see this check fail; may be given more than once).
#
# The rule: a header's package is installed by ensure-deps.sh if the list
# names it, or if it is in the Depends/Pre-Depends closure of the named
# packages (`apt-cache depends --recurse --important`), following only the
# first package of an "a | b" alternative (the one apt installs when none
# is there yet) and every provider of a virtual package. Recommends do not
# count: ensure-deps.sh installs with --no-install-recommends. Essential
# packages and their closure count as installed: every Debian system has
# them.
#
# Each header is looked up with dpkg -S under the names dpkg may know it by:
# its path with the directory's symlinks resolved, and the same path with
# or without /usr where / is merged (/lib -> usr/lib: Debian 12's libc6
# ships /lib/x86_64-linux-gnu, the compiler reports /usr/lib/...). A header
# that is itself a symlink needs the packages of both the link and the file
# it points to. A diverted path (dpkg-divert --list) belongs to the
# diverting package; the renamed original to the package that ships it; a
# local diversion to no package. A header from no package at all fails too:
# a fresh machine would not have it.
set -eu

me="header packages"
usage() {
  echo "usage: $0 [--without PKG]... BUILD_DIR [RUN_DEPFILE...]" >&2
  exit 2
}

without=""
while [ $# -gt 0 ]; do
  case $1 in
    --without) [ $# -ge 2 ] || usage; without="$without $2"; shift 2 ;;
    --without=*) without="$without ${1#--without=}"; shift ;;
    -*) usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
build_dir=$1
shift

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-cache >/dev/null 2>&1; then
  echo "$me: not a Debian system, not checked"
  exit 0
fi
if [ ! -d "$build_dir" ]; then
  echo "$me: no build directory $build_dir" >&2
  exit 1
fi
root=$(cd "$(dirname "$0")/.." && pwd -P)
root_logical=$(cd "$(dirname "$0")/.." && pwd)
build_abs=$(cd "$build_dir" && pwd -P)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

# Runs COMMAND on the lines of stdin as its arguments (any number of them),
# in order, whatever they contain.
lines_to_args() {
  tr '\n' '\0' | xargs -0 -r "$@"
}

# --- the lists: ensure-deps.sh's own, less the --without packages -----------
list() {
  sh "$root/tools/ensure-deps.sh" list "$1" |
    awk -v drop="$without" 'BEGIN { n = split(drop, d, " "); for (i = 1; i <= n; i++) skip[d[i]] = 1 }
                            !($0 in skip)'
}
list build > "$tmp/list-build"
list check > "$tmp/list-check"
dpkg-query -W -f='${Essential} ${Package}\n' 2>/dev/null |
  awk '$1 == "yes" { print $2 }' > "$tmp/essential"

# --- the headers: every absolute path in a .d file, outside the tree --------
find "$build_dir" -name '*.d' -type f | sort | lines_to_args realpath -- > "$tmp/depfiles"
if [ ! -s "$tmp/depfiles" ]; then
  echo "$me: no .d files under $build_dir: build first" >&2
  exit 1
fi
for depfile in "$@"; do
  [ -f "$depfile" ] && realpath -- "$depfile"
done > "$tmp/run-depfiles"

# "HEADER<tab>DEPFILE" for each system header a .d file names, and
# "-<tab>DEPFILE" for a .d file that names none: every source here includes
# some (gcc always lists stdc-predef.h), so that file was written by an
# older build with -MMD, which leaves system headers out.
# shellcheck disable=SC2016 # $i, $0: awk's, not the shell's
lines_to_args awk -v root="$root" -v root2="$root_logical" -v build="$build_abs" '
  function done_file() { if (file != "" && !found) print "-\t" file }
  FNR == 1 { done_file(); file = FILENAME; found = 0 }
  {
    sub(/\\$/, "")                   # a continued line
    for (i = 1; i <= NF; i++) {
      path = $i
      sub(/:$/, "", path)            # a target, or -MP phony target
      if (path !~ /^\//) continue    # relative: a file of the repository
      if (index(path, root "/") == 1 || index(path, root2 "/") == 1 || index(path, build "/") == 1)
        continue
      print path "\t" FILENAME
      found = 1
    }
  }
  END { done_file() }' < "$tmp/depfiles" | sort -u > "$tmp/uses"

stale=$(awk -F '\t' '$1 == "-" { print $2 }' "$tmp/uses" | sed "s|^$(pwd -P)/||")
if [ -n "$stale" ]; then
  echo "$stale" | sed "s|\$| lists no system header: written by a build without -MD|; s|^|$me: |" >&2
  echo "$me: cannot check those; remove $build_dir and build again" >&2
  exit 1
fi

# --- where each header is ---------------------------------------------------
# headers: the paths as the compiler wrote them; dirs: their directories
# with every symlink resolved; targets: the files themselves resolved.
awk -F '\t' '{ print $1 }' "$tmp/uses" | sort -u > "$tmp/headers"
sed 's|/[^/]*$||; s|^$|/|' "$tmp/headers" | lines_to_args realpath -m -- > "$tmp/dirs"
lines_to_args realpath -m -- < "$tmp/headers" > "$tmp/targets"
paste "$tmp/headers" "$tmp/dirs" "$tmp/targets" > "$tmp/resolved"
# A header that no longer exists is in a .d file of an object this build
# did not make again (make would have rebuilt it): a leftover, not checked.
while IFS= read -r header; do
  [ -e "$header" ] || printf '%s\n' "$header"
done < "$tmp/headers" > "$tmp/gone"

# Top-level directories merged into /usr, under either name of which dpkg
# may know a file.
merged=""
for dir in bin sbin lib lib32 lib64 libx32; do
  if [ -L "/$dir" ] && [ "$(realpath "/$dir")" = "/usr/$dir" ]; then
    merged="$merged $dir"
  fi
done

dpkg-divert --list > "$tmp/diversions" 2>/dev/null || true

# The awk functions shared by the two steps below: diversions, and the
# names a path may have in dpkg's database.
names_awk='
  function base(path) { sub(/.*\//, "", path); return path }
  # The same file under its other name where / is merged with /usr, or "".
  function alias(path,    n, i, d) {
    n = split(merged, d, " ")
    for (i = 1; i <= n; i++) {
      if (index(path, "/usr/" d[i] "/") == 1) return substr(path, 5)
      if (index(path, "/" d[i] "/") == 1) return "/usr" path
    }
    return ""
  }
  # dpkg-divert --list: "diversion of FROM to TO by PKG" or
  # "local diversion of FROM to TO".
  function read_diversions(file,    line, f, n, from, to, by) {
    while ((getline line < file) > 0) {
      n = split(line, f, " ")
      if (f[1] == "local" && n >= 6) { from = f[4]; to = f[6]; by = "" }
      else if (f[1] == "diversion" && n >= 7) { from = f[3]; to = f[5]; by = f[7] }
      else continue
      diverted_by[from] = by; diverted_to[to] = from; diverter_of_to[to] = by
    }
  }
  # The names dpkg may know the header on row (header, dir, target) by:
  # link_names[] for the header itself and, when it is a symlink (is_link),
  # target_names[] for the file it points to.
  function names_of(header, dir, target,    link, a) {
    split("", link_names); split("", target_names); is_link = 0
    link = (dir == "/" ? "" : dir) "/" base(header)
    link_names[link] = 1
    if ((a = alias(link)) != "") link_names[a] = 1
    if (header !~ /\/\.\.?\// && header !~ /\/\//) link_names[header] = 1
    if (target != link) {
      is_link = 1
      target_names[target] = 1
      if ((a = alias(target)) != "") target_names[a] = 1
    }
  }'

# --- one dpkg -S for every name ---------------------------------------------
awk -F '\t' -v merged="$merged" -v diversions="$tmp/diversions" "$names_awk"'
  BEGIN { read_diversions(diversions) }
  {
    names_of($1, $2, $3)
    for (n in link_names) want(n)
    for (n in target_names) want(n)
  }
  function want(name) {
    print name
    if (name in diverted_to) print diverted_to[name]   # the original name
  }' "$tmp/resolved" | sort -u > "$tmp/names"
# "PATH<tab>PKG PKG..." for each name dpkg knows; diversion lines are read
# from dpkg-divert above; unknown names only print to stderr.
lines_to_args dpkg-query -S -- < "$tmp/names" 2>/dev/null |
  awk '/^(local )?diversion / { next }
       { i = index($0, ": "); if (!i) next
         pkgs = substr($0, 1, i - 1); path = substr($0, i + 2)
         gsub(/:[a-z0-9_-]+/, "", pkgs); gsub(/,/, "", pkgs)   # arch qualifiers
         print path "\t" pkgs }' > "$tmp/owners" || true

# --- what ensure-deps.sh installs -------------------------------------------
# The dependency graph of everything the check list can reach, one
# "PKG<tab>DEPENDENCY" line per edge it follows.
cat "$tmp/list-check" "$tmp/essential" |
  lines_to_args apt-cache depends --recurse --important 2>/dev/null |
  awk '
    function clean(name) { gsub(/[<>]/, "", name); sub(/:.*/, "", name); return name }
    /^[^ ]/ { pkg = clean($1); or_open = 0; providers = 0; next }
    /^ [ |][A-Za-z-]+:/ {
      first = !or_open                 # first package of an or-group
      or_open = substr($0, 2, 1) == "|"
      providers = 0
      if (!first) next
      if ($2 ~ /^</) providers = 1     # virtual: every provider, listed below
      else print pkg "\t" clean($2)
      next
    }
    /^    / { if (providers) print pkg "\t" clean($1) }' > "$tmp/graph" || true

# The closure of a list: "PKG<tab>NAMED" for every package it installs,
# NAMED being the package of the list that pulls it in ("-": an essential
# package does).
closure() {
  awk -F '\t' '
    FILENAME == ARGV[1] { edges[$1] = edges[$1] " " $2; next }
    FILENAME == ARGV[2] { if (!($1 in via)) { via[$1] = $1; queue[++tail] = $1 }; next }
    { if (!($1 in via)) { via[$1] = "-"; queue[++tail] = $1 } }
    END {
      for (head = 1; head <= tail; head++) {
        pkg = queue[head]
        n = split(edges[pkg], next_pkgs, " ")
        for (i = 1; i <= n; i++)
          if (!(next_pkgs[i] in via)) { via[next_pkgs[i]] = via[pkg]; queue[++tail] = next_pkgs[i] }
      }
      for (pkg in via) print pkg "\t" via[pkg]
    }' "$tmp/graph" "$1" "$tmp/essential"
}
closure "$tmp/list-build" > "$tmp/installed-build"
closure "$tmp/list-check" > "$tmp/installed-check"

# --- the verdict --------------------------------------------------------------
awk -F '\t' -v merged="$merged" -v diversions="$tmp/diversions" -v me="$me" -v cwd="$(pwd -P)" \
    "$names_awk"'
  BEGIN { read_diversions(diversions) }
  FILENAME == ARGV[1] { installed["build", $1] = $2; next }
  FILENAME == ARGV[2] { installed["check", $1] = $2; next }
  FILENAME == ARGV[3] { dpkg[$1] = $2; next }
  FILENAME == ARGV[4] { run[$1] = 1; next }
  FILENAME == ARGV[5] { gone[$1] = 1; next }
  FILENAME == ARGV[6] {                      # header -> the .d files naming it
    if (!($1 in first_user)) first_user[$1] = $2
    if ($2 in run) for_run[$1] = 1
    nfiles[$2] = 1
    next
  }
  {                                          # resolved: header, dir, target
    header = $1
    if (header in gone) { ngone++; next }
    nheaders++
    names_of(header, $2, $3)
    judge(header, owners(link_names), "")
    if (is_link) judge(header, owners(target_names), " (the file its symlink points to)")
  }

  # A .d file as the path from here when it is below here.
  function here(path) { return index(path, cwd "/") == 1 ? substr(path, length(cwd) + 2) : path }

  # The packages that own any of the names, as " pkg pkg ".
  function owners(names,    name, set, result, n, p, i) {
    result = " "
    for (name in names) {
      if (name in diverted_by) {            # the diverting package put it there
        set = diverted_by[name]
      } else if (name in diverted_to) {     # the original, renamed: its
        set = " " dpkg[diverted_to[name]] " " # owners but the diverter
        gsub(" " diverter_of_to[name] " ", " ", set)
      } else {
        set = dpkg[name]
      }
      n = split(set, p, " ")
      for (i = 1; i <= n; i++)
        if (index(result, " " p[i] " ") == 0) result = result p[i] " "
    }
    return result
  }

  # A header is fine when one of its packages is installed by the list
  # for what includes it: `ensure-deps.sh build` for what `make run` builds,
  # `ensure-deps.sh check` for the rest (the check list holds the build list,
  # so a package missing from both is reported once, for BUILD_PACKAGES).
  function judge(header, pkgs, what,    n, p, i, by_build, by_check) {
    n = split(pkgs, p, " ")
    if (n == 0) {
      print me ": " here(first_user[header]) " includes " header what ", which is from no " \
            "Debian package: a fresh machine would not have it" > "/dev/stderr"
      failed = 1
      return
    }
    by_build = by_check = ""
    for (i = n; i >= 1; i--) {
      if (("build", p[i]) in installed) by_build = p[i]
      if (("check", p[i]) in installed) by_check = p[i]
    }
    if (header in for_run && by_build == "") missing_from(p[1], "build", header, what)
    else if (by_check == "") missing_from(p[1], "check", header, what)
    else {
      key = by_check SUBSEP installed["check", by_check]
      if (!(key in count)) npkgs++
      count[key]++
    }
  }

  # One message per package and list, naming its first header.
  function missing_from(pkg, list, header, what,    key) {
    key = pkg SUBSEP list
    if (!(key in missing)) {
      missing[key] = header what
      missing_user[key] = first_user[header]
      order[++nmissing] = key
    }
    if (!((key, header) in counted)) { counted[key, header] = 1; missing_count[key]++ }
    failed = 1
  }

  END {
    for (i = 1; i <= nmissing; i++) {
      split(order[i], k, SUBSEP)
      pkg = k[1]; which = k[2]
      more = missing_count[order[i]] - 1
      printf "%s: %s includes %s%s from the Debian package %s, which tools/ensure-deps.sh " \
             "does not install for `make %s`: add %s to %s in tools/ensure-deps.sh\n", \
             me, here(missing_user[order[i]]), missing[order[i]], \
             more ? " (and " more " more of its headers)" : "", pkg, \
             which == "build" ? "run" : "check", pkg, \
             which == "build" ? "BUILD_PACKAGES" : "CHECK_PACKAGES" > "/dev/stderr"
    }
    if (failed) exit 1
    for (f in nfiles) ndepfiles++
    printf "%s: %d system headers in %d .d files, from %d packages, all installed by " \
           "tools/ensure-deps.sh%s\n", \
           me, nheaders, ndepfiles, npkgs, ngone ? " (" ngone " gone, not checked)" : ""
    for (key in count) {
      split(key, k, SUBSEP)
      printf "  %-24s %4d header(s)  %s\n", k[1], count[key], \
             (k[1] == k[2] ? "named" : k[2] == "-" ? "essential" : "through " k[2]) | "sort"
    }
    close("sort")
  }' "$tmp/installed-build" "$tmp/installed-check" "$tmp/owners" "$tmp/run-depfiles" \
     "$tmp/gone" "$tmp/uses" "$tmp/resolved"
