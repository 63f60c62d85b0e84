#!/bin/sh
# run-checks.sh - runs Check test programs one after the other, keeps
# going after a failure, and ends with each program's Check summary line.
#
# usage: run-checks.sh [-w WRAPPER] [-a ARGS] DIR PROGRAM...
#   WRAPPER  command the programs run under (e.g. "env CK_FORK=no valgrind")
#   ARGS     arguments for every program (e.g. --quick)
# Each program's output is also kept in DIR/PROGRAM.log.
set -u

wrapper=""
args=""
while getopts w:a: opt; do
  case $opt in
    w) wrapper=$OPTARG ;;
    a) args=$OPTARG ;;
    *) echo "usage: $0 [-w WRAPPER] [-a ARGS] DIR PROGRAM..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
dir=$1
shift

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
status=0
for program in "$@"; do
  log="$dir/$program.log"
  echo "== $program"
  # shellcheck disable=SC2086 # wrapper and args are word lists
  { $wrapper "$dir/$program" $args 2>&1; echo "exit status $?" >"$log.status"; } | tee "$log"
  code=$(sed -n 's/^exit status //p' "$log.status")
  rm -f "$log.status"
  line=$(grep -E '^[0-9]+%: Checks:' "$log" | tail -n 1)
  if [ "$code" != 0 ]; then
    status=1
    echo "$program: ${line:-no Check summary} (exit status $code)" >>"$summary"
  else
    echo "$program: $line" >>"$summary"
  fi
done
echo "== summary"
cat "$summary"
exit $status
