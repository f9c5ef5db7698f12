#!/bin/bash
# The Debian packages (packaging/), one step per ctest test; they share
# WORK_DIR, which the "build" step fills and the "clean" step removes.
#
#   deb_test.sh build   BUILD_DIR WORK_DIR VERSION  cpack the .debs, check
#                                                   names, versions, Depends,
#                                                   and unpack them
#   deb_test.sh lintian WORK_DIR   no lintian errors
#   deb_test.sh unit    WORK_DIR   systemd-analyze verify accepts the unit,
#                                  the drain fits TimeoutStopSec, sysusers.d
#                                  makes the hilo user
#   deb_test.sh serve   WORK_DIR   the unpacked hilo_server, started with the
#                                  unit's ExecStart line, answers NextRange
#   deb_test.sh clean   WORK_DIR
set -euo pipefail

step=$1
shift

fail() {
  echo "deb_test $step: FAIL: $*" >&2
  exit 1
}

# The value of KEY= in the unpacked unit (its only line with that key).
unit_value() {
  local values
  values=$(sed -n "s/^$1=//p" "$root/lib/systemd/system/hilo.service")
  [ "$(printf '%s\n' "$values" | wc -l)" -eq 1 ] && [ -n "$values" ] ||
    fail "hilo.service has no single $1= line"
  printf '%s' "$values"
}

# The ExecStart= line with $HILO_FLAGS expanded from the packaged
# EnvironmentFile, as systemd expands an unbraced $VAR: split into words.
exec_start_words() {
  local line flags env_file
  line=$(unit_value ExecStart)
  env_file=$(unit_value EnvironmentFile)
  flags=$(set -a && . "$root$env_file" && printf '%s' "$HILO_FLAGS")
  read -r -a words <<<"${line//\$HILO_FLAGS/$flags}"
}

# The seconds of --NAME=Ns among the words (DEFAULT when absent).
flag_seconds() {
  local name=$1 value=$2 word
  for word in "${words[@]}"; do
    case "$word" in
      --"$name"=*s) value=${word#--"$name"=}; value=${value%s} ;;
      --"$name"=*) fail "--$name is not in whole seconds: $word" ;;
    esac
  done
  [[ "$value" =~ ^[0-9]+$ ]] || fail "--$name=${value}s is not whole seconds"
  printf '%s' "$value"
}

case "$step" in
  build)
    build_dir=$1 work=$2 version=$3
    rm -rf "$work"
    mkdir -p "$work/debs" "$work/root"
    cpack --config "$build_dir/CPackConfig.cmake" -B "$work/debs" \
      >"$work/cpack.log" || { cat "$work/cpack.log"; fail "cpack"; }
    for package in hilo-server libhilo-client-dev; do
      deb=$work/debs/${package}_${version}-1_$(dpkg --print-architecture).deb
      [ -f "$deb" ] || fail "no $deb; cpack made: $(ls "$work/debs")"
      [ "$(dpkg-deb -f "$deb" Package)" = "$package" ] || fail "$deb: Package"
      [ "$(dpkg-deb -f "$deb" Version)" = "$version-1" ] || fail "$deb: Version"
      dpkg-deb -x "$deb" "$work/root"
    done
    # Depends of hilo-server come from the libraries it links
    # (dpkg-shlibdeps); each must be there.
    depends=$(dpkg-deb -f "$work"/debs/hilo-server_*.deb Depends)
    names=$(printf '%s\n' "$depends" | tr ',' '\n' | sed 's/^ *//; s/ .*//')
    for lib in libgrpc++1.51 libprotobuf32 libabsl20220623 libsqlite3-0 \
      libpq5 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libc6 \
      systemd-sysusers; do
      grep -qxF "$lib" <<<"$names" || fail "hilo-server Depends lacks $lib: $depends"
    done
    echo "hilo-server Depends: $depends"
    echo "libhilo-client-dev Depends: $(dpkg-deb -f "$work"/debs/libhilo-client-dev_*.deb Depends)"
    ;;

  lintian)
    work=$1
    lintian --tag-display-limit 0 "$work"/debs/*.deb >"$work/lintian.log" 2>&1 ||
      true
    cat "$work/lintian.log"
    if grep -q '^E: ' "$work/lintian.log"; then fail "lintian reports errors"; fi
    # A crashed lintian prints no tags at all; make sure it ran.
    lintian --version >/dev/null || fail "lintian does not run"
    ;;

  unit)
    work=$1 root=$1/root
    # systemd-analyze verify wants ExecStart's binary on this machine: verify a
    # copy whose ExecStart names the unpacked binary; every other line is the
    # packaged one. It must exit 0 and print nothing (it only warns about
    # unknown keys and bad values).
    mkdir -p "$work/verify"
    sed "s#^ExecStart=/usr/#ExecStart=$root/usr/#" \
      "$root/lib/systemd/system/hilo.service" >"$work/verify/hilo.service"
    if ! out=$(systemd-analyze verify "$work/verify/hilo.service" 2>&1) ||
       [ -n "$out" ]; then
      fail "systemd-analyze verify: $out"
    fi
    # SIGTERM drains: --drain_delay + --shutdown_grace, and a few seconds for
    # the database to close, must fit in TimeoutStopSec.
    exec_start_words
    stop=$(unit_value TimeoutStopSec)
    [[ "$stop" =~ ^[0-9]+s$ ]] || fail "TimeoutStopSec=$stop is not in seconds"
    drain=$(flag_seconds drain_delay 0)
    grace=$(flag_seconds shutdown_grace 10)
    [ $((drain + grace + 5)) -le "${stop%s}" ] ||
      fail "drain ${drain}s + grace ${grace}s + 5s exceeds TimeoutStopSec=$stop"
    # sysusers.d makes the unit's user and group.
    user=$(unit_value User)
    rm -rf "$work/sysroot"
    mkdir -p "$work/sysroot/etc"
    systemd-sysusers --root="$work/sysroot" \
      "$root/usr/lib/sysusers.d/hilo.conf" >/dev/null 2>&1 ||
      fail "systemd-sysusers hilo.conf"
    grep -q "^$user:x:[0-9]*:[0-9]*:[^:]*:/var/lib/hilo:/usr/sbin/nologin$" \
      "$work/sysroot/etc/passwd" || fail "no system user $user: $(cat "$work/sysroot/etc/passwd")"
    echo "hilo.service verified; stop ${drain}s + ${grace}s within $stop; user $user"
    ;;

  serve)
    work=$1 root=$1/root
    exec_start_words
    state=$work/state
    rm -rf "$state"
    mkdir -p "$state"
    # The unit's command, mapped into the temporary tree: binaries under the
    # unpacked root, the StateDirectory /var/lib/hilo under $state, and every
    # listen address on port 0. Nothing else changes.
    state_dir=/var/lib/$(unit_value StateDirectory)
    [ "$(unit_value WorkingDirectory)" = "$state_dir" ] ||
      fail "WorkingDirectory is not the StateDirectory"
    argv=("$root${words[0]}")
    for word in "${words[@]:1}"; do
      word=${word//$state_dir/$state}
      case "$word" in
        --listen=*:* | --metrics_listen=*:*) word=${word%:*}:0 ;;
      esac
      argv+=("$word")
    done
    echo "unit:   ${words[*]}"
    echo "mapped: ${argv[*]}"
    # What postinst leaves on a fresh install: the state directory and the
    # marker that lets the first start create the database.
    marker=$(printf '%s\n' "${argv[@]}" | sed -n 's/^--create_db_marker=//p')
    [ "$marker" = "$state/create-db" ] ||
      fail "the unit's command has no --create_db_marker in its StateDirectory"
    : >"$marker"
    # As shipped, /etc/default/hilo names no node tag: the service must
    # refuse to start, in one line, and create nothing, until the operator
    # adds one, as the file's comment says.
    refused=0
    (cd "$state" && exec timeout -s KILL 30 "${argv[@]}") \
      2>"$work/refused.log" || refused=$?
    [ "$refused" -ne 0 ] ||
      fail "the unit's command started without a node tag"
    grep -q -- "--require_node_tag: no node tag given" "$work/refused.log" ||
      fail "no clear refusal without a node tag: $(cat "$work/refused.log")"
    [ "$(ls -A "$state")" = create-db ] ||
      fail "the refused start wrote into $state, or took the marker: $(ls -A "$state")"
    argv+=(--node_tag=A)
    echo "with the operator's tag: ${argv[*]}"
    # timeout: the server cannot outlive a killed test; it passes SIGTERM on.
    (cd "$state" && exec timeout -s KILL 120 "${argv[@]}") \
      2>"$work/server.log" &
    server_pid=$!
    trap 'kill -KILL "$server_pid" 2>/dev/null || true' EXIT
    port=""
    for _ in $(seq 1 200); do
      port=$(sed -n 's/^hilo_server: serving node [^ ]* on port \([0-9][0-9]*\).*/\1/p' \
        "$work/server.log")
      [ -n "$port" ] && break
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.05
    done
    [ -n "$port" ] || fail "the server did not start: $(cat "$work/server.log")"
    ids=$("$root/usr/bin/hilo" --target="127.0.0.1:$port" next smoke -n 2) ||
      fail "hilo next: $(cat "$work/server.log")"
    [ "$ids" = $'smoke/1-A\nsmoke/2-A' ] || fail "hilo next printed: $ids"
    [ -s "$state/hilo.db" ] || fail "no database in the StateDirectory"
    [ ! -e "$marker" ] || fail "the marker $marker is still there after the first start"
    grep -q "created NEW database $state/hilo.db with 0 collections" "$work/server.log" ||
      fail "the start line does not say it created the database: $(cat "$work/server.log")"
    stop=$(unit_value TimeoutStopSec)
    kill -TERM "$server_pid"
    for _ in $(seq 1 $((${stop%s} * 10))); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$server_pid" 2>/dev/null && fail "still running $stop after SIGTERM"
    status=0
    wait "$server_pid" || status=$?
    [ "$status" -eq 0 ] || fail "exit status $status on SIGTERM: $(cat "$work/server.log")"
    cat "$work/server.log"
    echo "served $ids from $state/hilo.db"
    ;;

  clean)
    rm -rf "$1"
    ;;

  *)
    echo "usage: $0 build|lintian|unit|serve|clean ..." >&2
    exit 2
    ;;
esac
