#!/bin/bash
# deploy.image: builds the OCI image with deploy/build-image.sh and buildah
# (vfs storage in a temporary folder, chroot isolation), then checks:
#   - the tag is hilo:<project version>, never :latest; the config runs
#     /usr/local/bin/hilo_server as user 10001:10001 with a volume at the
#     --db folder of its default arguments;
#   - the file system holds only the binary, the libraries ldd lists, the
#     dynamic loader, the CA certificates, passwd and group: no shell;
#   - its size (printed; fails above 64 MiB uncompressed);
#   - `buildah run` of the image's own entrypoint and arguments serves: from
#     outside the container, over loopback, Health/Check says SERVING,
#     NextRange answers exactly low 1, high 32, node tag A, and /metrics
#     answers on 9464 (the default --metrics_listen); the process runs
#     as uid 10001 and writes the database into the mounted volume; SIGTERM
#     drains and exits 0;
#   - the same image on a read-only root file system (a read-only bind mount
#     of it, chroot as 10001:10001, the volume mounted) serves too.
# All of it runs in a private network and mount namespace (unshare), so the
# image's fixed ports collide with nothing and no mount outlives the test;
# the buildah storage is deleted afterwards. Skipped, with the reason, where
# buildah is missing or cannot build and run a container here.
#   test_image.sh SOURCE_DIR HILO_SERVER
set -euo pipefail
TEST_NAME=deploy.image  # used by common.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/common.sh
. "$here/common.sh"

max_uncompressed=$((64 * 1024 * 1024))
export BUILDAH_ISOLATION=chroot

if [ "${1:-}" = --inner ]; then
  # Inside the namespaces: --inner SOURCE_DIR HILO_SERVER STORAGE
  src=$2 server_bin=$3 store=$4
  export BUILDAH_OPTS="--root $store/root --runroot $store/run --storage-driver vfs"
  # shellcheck disable=SC2086
  bah() { buildah $BUILDAH_OPTS "$@"; }
  ip link set lo up

  version=$(sed -n 's/^project(hilo VERSION \([0-9][0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
  t0=$SECONDS
  tag=$("$src/deploy/build-image.sh" --binary "$server_bin" --oci-archive "$store/image.oci.tar" 2>"$store/build.log") ||
    fail "deploy/build-image.sh failed: $(cat "$store/build.log")"
  log "built $tag in $((SECONDS - t0))s"
  [ "$tag" = "hilo:$version" ] || fail "the image is tagged $tag, expected hilo:$version"
  names=$(bah images --format '{{.Name}}:{{.Tag}}')
  ! grep -q ':latest$' <<<"$names" || fail "an image is tagged :latest: $names"

  # Config.
  bah inspect --type image "$tag" >"$store/inspect.json"
  "$PYTHON" - "$store/inspect.json" "$max_uncompressed" "$store/image.oci.tar" <<'EOF' || exit 1
import json, os, sys
inspect = json.load(open(sys.argv[1]))
config = inspect["OCIv1"]["config"]
limit = int(sys.argv[2])
errors = []
def want(ok, what):
    if not ok: errors.append(what)
want(config.get("User") == "10001:10001", f"User is {config.get('User')!r}, expected '10001:10001'")
want(config.get("Entrypoint") == ["/usr/local/bin/hilo_server"], f"Entrypoint is {config.get('Entrypoint')}")
cmd = config.get("Cmd") or []
db = next((a.split("=", 1)[1] for a in cmd if a.startswith("--db=")), "")
want(db.startswith("/") and os.path.dirname(db) in (config.get("Volumes") or {}),
     f"Cmd's --db={db} is not inside a declared volume {list(config.get('Volumes') or {})}")
want("--listen=0.0.0.0:50051" in cmd, f"Cmd {cmd} does not listen on 0.0.0.0:50051")
# Two containers left at the defaults must not both be node A: the operator
# gives each its tag (deploy/README.md).
want("--require_node_tag" in cmd and not any(a.startswith("--node_tag") for a in cmd),
     f"Cmd {cmd} must say --require_node_tag and give no tag")
want("50051/tcp" in (config.get("ExposedPorts") or {}), "port 50051/tcp not exposed")
layers = json.loads(inspect["Manifest"])["layers"]
size = sum(layer["size"] for layer in layers)
want(len(layers) == 1, f"{len(layers)} layers, expected 1 (empty base)")
want(size <= limit, f"the image is {size} bytes uncompressed, over {limit}")
compressed = os.path.getsize(sys.argv[3])
if errors:
    for e in errors: print(f"deploy.image: FAIL: image config: {e}", file=sys.stderr)
    sys.exit(1)
print(f"deploy.image: config ok: User 10001:10001, Entrypoint {config['Entrypoint']}, "
      f"volume {os.path.dirname(db)}; size {size / 2**20:.1f} MiB uncompressed, "
      f"{compressed / 2**20:.1f} MiB as a compressed OCI archive")
EOF
  mapfile -t run_cmd < <("$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]))["OCIv1"]["config"]; print("\n".join(c["Entrypoint"] + c["Cmd"]))' "$store/inspect.json")
  # The image's command refuses to start without a tag (--require_node_tag);
  # an operator adds one, and --create_db for the first start on an empty
  # volume, as deploy/README.md shows.
  run_cmd+=(--node_tag=A --create_db)
  db=$(printf '%s\n' "${run_cmd[@]}" | sed -n 's/^--db=//p')
  volume=$(dirname "$db")

  # File system: nothing but what the server needs.
  ctr=$(bah from --pull-never "$tag")
  root=$(bah mount "$ctr")
  ( cd "$root" && find . -type f | sort ) >"$store/files"
  expected=$( (echo ./usr/local/bin/hilo_server; echo ./etc/passwd; echo ./etc/group
               echo ./etc/ssl/certs/ca-certificates.crt
               ldd "$server_bin" | awk '$2 == "=>" && $3 ~ /^\// { print "." $3; next } $1 ~ /^\// { print "." $1 }'
             ) | sort -u)
  [ "$(cat "$store/files")" = "$expected" ] ||
    fail "the image's files differ from binary + ldd's libraries + certificates + passwd/group: $(diff <(echo "$expected") "$store/files" | grep '^[<>]' | head -20 | tr '\n' ' ')"
  if [ -e "$root/bin/sh" ] || [ -e "$root/usr/bin/sh" ]; then fail "the image has a shell"; fi
  cmp -s "$root/etc/ssl/certs/ca-certificates.crt" /etc/ssl/certs/ca-certificates.crt || fail "CA certificates differ from the build machine's"
  grep -qx 'hilo:x:10001:10001:hilo:/var/lib/hilo:/sbin/nologin' "$root/etc/passwd" || fail "/etc/passwd lacks the hilo user 10001"
  [ "$(stat -c '%u:%g' "$root$volume")" = 10001:10001 ] || fail "$volume is not owned by 10001:10001 in the image"
  [ "$(stat -c '%u' "$root/usr/local/bin/hilo_server")" = 0 ] || fail "the binary is not root-owned (the server could rewrite it)"
  log "file system ok: $(wc -l <"$store/files") files, no shell"
  bah umount "$ctr" >/dev/null

  # buildah run: the image's own entrypoint and arguments, a host folder as
  # the volume, host (= this namespace's loopback-only) network.
  mkdir -p "$store/data"
  chown 10001:10001 "$store/data"
  log "buildah run $(printf '%q ' "${run_cmd[@]}")"
  bah run --isolation chroot --network host --volume "$store/data:$volume" "$ctr" -- \
    "${run_cmd[@]}" 2>"$store/run.log" &
  runner=$!
  wait_for_line "$store/run.log" 'serving node' 30 "$runner"
  grep -q '^hilo_server: serving node A on port 50051 ' "$store/run.log" ||
    fail "unexpected start line: $(cat "$store/run.log")"
  "$PYTHON" "$here/hilo_probe.py" --target 127.0.0.1:50051 --proto_root "$src/proto" \
    --expect_tag A --expect_low 1 --expect_high 32 --metrics_url http://127.0.0.1:9464/metrics ||
    fail "the probe of the buildah-run server failed; its output: $(cat "$store/run.log")"
  # buildah run -> buildah-chroot-runtime -> buildah-chroot-exec -> hilo_server
  server=""
  queue=("$runner")
  while [ ${#queue[@]} -gt 0 ] && [ -z "$server" ]; do
    p=${queue[0]}; queue=("${queue[@]:1}")
    # shellcheck disable=SC2013  # the file is a list of pids
    for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
      if [ "$(cat "/proc/$c/comm" 2>/dev/null)" = hilo_server ]; then server=$c; break; fi
      queue+=("$c")
    done
  done
  [ -n "$server" ] || fail "cannot find the server process under buildah run ($runner)"
  uids=$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$server/status")
  [ "$uids" = "10001 10001 10001 10001" ] || fail "the server runs with uids $uids, not 10001"
  [ "$(stat -c '%u:%g' "$store/data/$(basename "$db")")" = 10001:10001 ] ||
    fail "the database is not in the volume, owned by 10001:10001: $(ls -ln "$store/data")"
  kill -TERM "$server"
  wait_exit "$runner" 30
  [ "$EXIT_STATUS" = 0 ] || fail "buildah run exited $EXIT_STATUS after SIGTERM to the server: $(cat "$store/run.log")"
  grep -q 'hilo_server: stopped' "$store/run.log" || fail "no 'stopped' line after SIGTERM"
  log "buildah run ok: health SERVING, range [1, 32] of node A, uid 10001, database in the volume, drained on SIGTERM"

  # Read-only root file system: the image's tree, mounted read-only.
  ctr2=$(bah from --pull-never "$tag")
  tree=$(bah mount "$ctr2")
  ro=$store/ro
  mkdir -p "$ro" "$store/data2"
  chown 10001:10001 "$store/data2"
  mount --bind "$tree" "$ro"
  mount -o remount,bind,ro "$ro"
  mount --bind "$store/data2" "$ro$volume"
  if touch "$ro/probe" 2>/dev/null; then fail "the root file system of the read-only run is writable"; fi
  chroot --userspec=10001:10001 --groups=10001 "$ro" "${run_cmd[@]}" 2>"$store/ro.log" &
  server=$!
  wait_for_line "$store/ro.log" 'serving node' 30 "$server"
  "$PYTHON" "$here/hilo_probe.py" --target 127.0.0.1:50051 --proto_root "$src/proto" \
    --expect_tag A --expect_low 1 --expect_high 32 ||
    fail "the probe of the read-only-root server failed; its output: $(cat "$store/ro.log")"
  [ -f "$store/data2/$(basename "$db")" ] || fail "the read-only run wrote no database into the volume"
  kill -TERM "$server"
  wait_exit "$server" 30
  [ "$EXIT_STATUS" = 0 ] || fail "the read-only run exited $EXIT_STATUS: $(cat "$store/ro.log")"
  log "read-only root ok: served range [1, 32] with only the volume writable"

  umount "$ro$volume" "$ro"
  bah umount --all >/dev/null
  bah rm --all >/dev/null
  bah rmi --all --force >/dev/null
  exit 0
fi

src=$(cd "${1:?usage: test_image.sh SOURCE_DIR HILO_SERVER}" && pwd)
server_bin=$(cd "$(dirname "${2:?usage: test_image.sh SOURCE_DIR HILO_SERVER}")" && pwd)/$(basename "$2")
[ -x "$server_bin" ] || fail "no hilo_server at $server_bin"
command -v buildah >/dev/null ||
  skip "buildah is not installed (Debian package buildah; scripts/install-deps-deploy.sh installs it)"
need_python_grpc
ns=(unshare --net --mount --pid --fork --kill-child --mount-proc)
need_namespaces "buildah with vfs storage and chroot isolation needs root here" \
  "cannot create a private network and mount namespace (%s): %s" "${ns[@]}"

make_work_dir hilo-image-test
store=$WORK_DIR

# Can buildah run a container at all here? A scratch container holding only
# the build machine's `true` and its libraries.
# shellcheck disable=SC2016  # expanded by the inner shell
probe_out=$("${ns[@]}" "$BASH" -c '
  set -e
  b="buildah --root $1/root --runroot $1/run --storage-driver vfs"
  c=$($b from scratch)
  for f in /bin/true $(ldd /bin/true | awk "\$2 == \"=>\" && \$3 ~ /^\\// { print \$3; next } \$1 ~ /^\\// { print \$1 }"); do
    $b copy "$c" "$f" "$f" >/dev/null
  done
  $b run --isolation chroot --network host "$c" -- /bin/true
  $b rm "$c" >/dev/null' probe "$store/probe" 2>&1) ||
  skip "buildah cannot build and run a container here: $(tail -3 <<<"$probe_out" | tr '\n' ' ')"
rm -rf "$store/probe"

"${ns[@]}" "$BASH" "${BASH_SOURCE[0]}" --inner "$src" "$server_bin" "$store" ||
  fail "see above"
log "ok"
