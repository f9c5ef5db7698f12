# Shell helpers of the fault tests, sourced by run_stress.sh and
# bad_start_test.sh. Not executable on its own.

# Set by the caller to the pid of its one background child ("" until then).
child=""

# on_signal CODE: stops the child (TERM) and waits for it, so the caller's
# EXIT trap never removes files the child still writes, then exits CODE.
on_signal() {
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child"
  fi
  exit "$1"
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

# require_private_tmpfs NAME DIR SIZE: returns if a tmpfs of SIZE can be
# mounted on DIR in a private mount namespace (tried in a throwaway one, so
# nothing stays mounted). Otherwise exits: 77 (skipped) if this user may not
# mount (not root, or a container without CAP_SYS_ADMIN), 1 for any other
# failure. NAME starts the line it prints.
require_private_tmpfs() {
  local name=$1 dir=$2 size=$3 probe
  if probe=$(unshare --mount --propagation private -- \
    mount -t tmpfs -o "size=$size" hilo-faults "$dir" 2>&1); then
    return 0
  fi
  case "$probe" in
    *"Operation not permitted"* | *"ermission denied"* | *superuser*)
      echo "$name: SKIPPED: may not mount a tmpfs in a private mount namespace: $probe"
      exit 77 ;;
  esac
  echo "$name: FAILED: cannot mount a tmpfs in a private mount namespace: $probe"
  exit 1
}
