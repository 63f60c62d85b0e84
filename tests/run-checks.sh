#!/bin/sh
# run-checks.sh - runs Check test programs one after the other, keeps
# going after a failure, and ends with each program's Check summary line.
#
# usage: run-checks.sh [-w WRAPPER] [-a ARGS] LOGDIR COMMAND...
#   WRAPPER  what the programs run under (e.g. "env CK_FORK=no valgrind")
#   ARGS     arguments added to every command (e.g. --quick)
#   COMMAND  a program, with its own arguments if any, as one argument
# The output of each command is also kept in LOGDIR/<name>.log, <name>
# being the program's file name and its arguments.
set -u

wrapper=""
args=""
while getopts w:a: opt; do
  case $opt in
    w) wrapper=$OPTARG ;;
    a) args=$OPTARG ;;
    *) echo "usage: $0 [-w WRAPPER] [-a ARGS] LOGDIR COMMAND..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
logdir=$1
shift
mkdir -p "$logdir"

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
status=0
for command in "$@"; do
  # shellcheck disable=SC2086 # the command and its arguments are a word list
  set -- $command
  name=$(basename "$1")
  shift
  [ $# -gt 0 ] && name="$name $*"
  log="$logdir/$(echo "$name" | tr -c 'A-Za-z0-9_.\n-' '_').log"
  echo "== $name"
  # shellcheck disable=SC2086 # wrapper and args are word lists
  { $wrapper $command $args 2>&1; echo "exit status $?" >"$log.status"; } | tee "$log"
  code=$(sed -n 's/^exit status //p' "$log.status")
  rm -f "$log.status"
  line=$(grep -E '^[0-9]+%: Checks:' "$log" | tail -n 1)
  if [ "$code" != 0 ]; then
    status=1
    echo "$name: ${line:-no Check summary} (exit status $code)" >>"$summary"
  else
    echo "$name: $line" >>"$summary"
  fi
done
echo "== summary"
cat "$summary"
exit $status
