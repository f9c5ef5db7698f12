# shellcheck shell=sh
# Sourced (". build_lib.sh") by the scripts that build what the conformance
# suite and scripts/hilo-draw run: the drivers
# (clients/conformance/drivers/<lang>/build.sh) and the draw programs
# (examples/java/build-draw.sh, examples/go/draw/build.sh,
# clients/node/build.sh). What they all do the same way: check their
# arguments, make the output folder, take turns on it, build only when the
# sources changed, compile a Java program against the client, and write the
# wrapper script that the runner or scripts/hilo-draw starts.
# POSIX sh; every function exits the calling script on an error.

# hilo_args COUNT USAGE ARG...: exits 2 with "usage: $0 USAGE" unless
# there are COUNT ARGs.
hilo_args() {
  _count=$1 _usage=$2
  shift 2
  if [ $# -ne "$_count" ]; then
    echo "usage: $0 $_usage" >&2
    exit 2
  fi
}

# hilo_dir DIR: makes DIR if it is missing and prints its absolute path.
hilo_dir() {
  mkdir -p "$1"
  CDPATH='' cd -- "$1" && pwd
}

# hilo_take_turns LOCK WHO: holds LOCK (on file descriptor 9, until the
# script ends), waiting at most 300 s for another build that holds it;
# after that exits 1, naming LOCK.
hilo_take_turns() {
  exec 9>"$1"
  if ! flock -w 300 9; then
    echo "$2: $1 is still held after 300 s (another build into $(dirname -- "$1"))" >&2
    exit 1
  fi
}

# hilo_up_to_date SUMS_FILE SUMS: true when the last build recorded SUMS
# (the checksums of everything it read) in SUMS_FILE.
hilo_up_to_date() {
  [ "$2" = "$(cat "$1" 2>/dev/null)" ]
}

# hilo_javac CLASSES CLASSPATH SOURCE LINT: compiles SOURCE into CLASSES
# (made afresh) for Java 17, with -Xlint:LINT and warnings as errors.
hilo_javac() {
  rm -rf "$1"
  mkdir -p "$1"
  javac --release 17 -Xlint:"$4" -Werror -d "$1" -cp "$2" "$3"
}

# hilo_wrapper FILE COMMAND...: writes FILE, an executable script that runs
# COMMAND (each word quoted as given) with the script's own arguments.
hilo_wrapper() {
  _file=$1
  shift
  _line='exec'
  for _word in "$@"; do
    _line="$_line '$(printf '%s' "$_word" | sed "s/'/'\\\\''/g")'"
  done
  printf '#!/bin/sh\n%s "$@"\n' "$_line" >"$_file"
  chmod +x "$_file"
}
