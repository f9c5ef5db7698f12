# Shared helpers of the deploy tests; sourced, with TEST_NAME set.
# shellcheck shell=bash disable=SC2034  # TEST_NAME, EXIT_STATUS: used across files

SKIP_CODE=77  # the SKIP_RETURN_CODE the tests are registered with

log() { echo "$TEST_NAME: $*"; }
fail() { echo "$TEST_NAME: FAIL: $*" >&2; exit 1; }
skip() { echo "$TEST_NAME: SKIPPED: $*"; exit "$SKIP_CODE"; }

# Debian's python3 with python3-grpcio; pyenv and the like lack it.
PYTHON=/usr/bin/python3
need_python_grpc() {
  if ! "$PYTHON" -c 'import grpc' 2>/dev/null; then
    fail "$PYTHON cannot import grpc: install Debian's python3-grpcio (scripts/install-deps-deploy.sh)"
  fi
  command -v protoc >/dev/null || fail "protoc is missing (Debian package protobuf-compiler)"
}

need_node_modules() {
  local src=$1
  command -v node >/dev/null || fail "node is not installed"
  local modules="$src/tests/deploy/node_modules"
  if [ ! -d "$modules/kubernetes-models" ] || [ ! -d "$modules/typescript" ]; then
    fail "$modules is not installed: run scripts/install-deps-deploy.sh"
  fi
}

# need_namespaces WHY_ROOT WHY_NOT UNSHARE...: skips the test unless it runs
# as root and can create the namespaces of the unshare command line
# UNSHARE...; WHY_ROOT says what needs root, WHY_NOT (given the unshare
# command line and its error) why the namespaces matter.
need_namespaces() {
  local why_root=$1 why_not=$2 why
  shift 2
  if [ "$(id -u)" != 0 ]; then
    skip "$why_root (running as uid $(id -u))"
  fi
  if ! why=$("$@" true 2>&1); then
    # shellcheck disable=SC2059  # the format is the caller's literal
    skip "$(printf "$why_not" "$*" "$why")"
  fi
}

# make_work_dir PREFIX: sets WORK_DIR to a new folder under $TMPDIR that every
# user may enter (the server may run as another uid), removed when the test
# exits.
make_work_dir() {
  WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  chmod 0755 "$WORK_DIR"
  # shellcheck disable=SC2064  # the folder is known now
  trap "rm -rf '$WORK_DIR'" EXIT
}

# render KUSTOMIZATION_DIR OUT: kubectl's built-in kustomize, or a standalone
# kustomize binary if that is all there is.
render() {
  local dir=$1 out=$2
  if command -v kubectl >/dev/null; then
    kubectl kustomize "$dir" >"$out" 2>"$out.err" ||
      fail "kubectl kustomize $dir failed: $(cat "$out.err")"
  elif command -v kustomize >/dev/null; then
    kustomize build "$dir" >"$out" 2>"$out.err" ||
      fail "kustomize build $dir failed: $(cat "$out.err")"
  else
    fail "neither kubectl nor kustomize is installed: run scripts/install-deps-deploy.sh"
  fi
  [ -s "$out" ] || fail "rendering $dir gave nothing"
}

# wait_for_line FILE REGEX SECONDS PID: until FILE has a line matching REGEX;
# fails early if PID exits.
wait_for_line() {
  local file=$1 regex=$2 seconds=$3 pid=$4 deadline
  deadline=$((SECONDS + seconds))
  while ! grep -Eq -- "$regex" "$file" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      fail "the server exited before printing /$regex/; its output: $(cat "$file")"
    fi
    [ $SECONDS -lt $deadline ] || fail "no /$regex/ within ${seconds}s; output so far: $(cat "$file")"
    sleep 0.1
  done
}

# wait_exit PID SECONDS: waits for a child to exit; sets EXIT_STATUS.
wait_exit() {
  local pid=$1 seconds=$2 deadline
  deadline=$((SECONDS + seconds))
  while kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      kill -KILL "$pid" 2>/dev/null
      fail "process $pid did not exit within ${seconds}s"
    fi
    sleep 0.1
  done
  EXIT_STATUS=0
  wait "$pid" || EXIT_STATUS=$?
}

# fresh_dir PATH: in this (private) mount namespace, make PATH an empty
# writable folder on a tmpfs, by mounting the tmpfs at PATH or at its nearest
# existing ancestor, which this namespace then no longer sees the contents
# of. Extra arguments are tmpfs mount options.
fresh_dir() {
  local target=$1 ancestor opts=${2:-mode=0755}
  ancestor=$target
  while [ ! -d "$ancestor" ]; do ancestor=$(dirname "$ancestor"); done
  case "$ancestor" in
    / | /usr | /etc | /proc | /dev | /sys | /lib* | /bin | /sbin | /usr/bin | /usr/lib* | /usr/sbin)
      fail "cannot shadow $ancestor to create $target in this namespace" ;;
  esac
  mount -t tmpfs -o "$opts" hilo-test "$ancestor" || fail "mount tmpfs at $ancestor failed"
  mkdir -p "$target"
}
