#!/bin/bash
# deploy.k8s_pod: hilo_server started with exactly the command and arguments
# the rendered StatefulSet gives its container, as a pod would run it:
#   - in its own UTS, network, mount and PID namespaces (unshare), with the
#     host name hilo-2 (and then hilo-27), only a loopback interface, so the
#     fixed ports of the manifest collide with nothing;
#   - the built binary bind-mounted at the container's command path, a fresh
#     tmpfs at the data volume's mountPath, owned by the pod's fsGroup;
#   - as the pod's runAsUser/runAsGroup (setpriv);
# then from inside the same namespace: the gRPC health check the probes use
# answers SERVING on the probes' port, NextRange answers exactly low 1,
# high 32 and node tag C (AB for hilo-27), the pod's prometheus.io/port and
# path answer with Prometheus samples, the database file appears at --db
# owned by the pod's user, and SIGTERM drains and exits 0.
#   test_k8s_pod.sh SOURCE_DIR HILO_SERVER
set -euo pipefail
TEST_NAME=deploy.k8s_pod  # used by common.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/common.sh
. "$here/common.sh"

if [ "${1:-}" = --inner ]; then
  # Inside the namespaces: --inner WORK HOSTNAME EXPECTED_TAG PROTO_ROOT
  work=$2 host=$3 want_tag=$4 proto_root=$5
  spec=$work/pod.json
  field() { "$PYTHON" -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(v)' "$spec" "$1"; }
  mapfile -d '' -t cmd < <("$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.stdout.write("".join(a + "\0" for a in s["command"] + s["args"]))' "$spec")
  db=$(field db) data=$(field dataMount) grpc_port=$(field grpcPort)
  probe_port=$(field readinessProbePort) metrics_port=$(field metricsPort)
  metrics_path=$(field metricsPath) grace=$(field shutdownGraceSeconds)
  uid=$(field runAsUser) gid=$(field runAsGroup) fs_group=$(field fsGroup)

  hostname "$host"
  [ "$(hostname)" = "$host" ] || fail "could not set the host name"
  ip link set lo up
  # The container's command path shows the built binary.
  fresh_dir "$(dirname "${cmd[0]}")"
  : >"${cmd[0]}"
  mount --bind "$work/hilo_server" "${cmd[0]}"
  # The pod's PersistentVolumeClaim: empty, group-owned by fsGroup.
  fresh_dir "$data"
  chown "0:$fs_group" "$data"
  chmod 2775 "$data"

  log "$host: $(printf '%q ' "${cmd[@]}")(as $uid:$gid)"
  setpriv --reuid="$uid" --regid="$gid" --groups="$fs_group" -- "${cmd[@]}" \
    2>"$work/server-$host.log" &
  server=$!
  wait_for_line "$work/server-$host.log" 'serving node' 30 "$server"
  grep -q "^hilo_server: serving node $want_tag on port $grpc_port " "$work/server-$host.log" ||
    fail "$host: expected 'serving node $want_tag on port $grpc_port', got: $(cat "$work/server-$host.log")"
  "$PYTHON" "$here/hilo_probe.py" --target "127.0.0.1:$probe_port" \
    --proto_root "$proto_root" --expect_tag "$want_tag" --expect_low 1 --expect_high 32 \
    --metrics_url "http://127.0.0.1:$metrics_port$metrics_path" ||
    fail "$host: the probe failed; server output: $(cat "$work/server-$host.log")"
  [ -f "$db" ] || fail "$host: no database at --db=$db"
  owner=$(stat -c %u "$db")
  [ "$owner" = "$uid" ] || fail "$host: $db is owned by uid $owner, not the pod's runAsUser $uid"
  [ "$(stat -c %u "/proc/$server")" = "$uid" ] || fail "$host: the server does not run as uid $uid"

  kill -TERM "$server"
  wait_exit "$server" "$(( ${grace%.*} + 5 ))"
  [ "$EXIT_STATUS" = 0 ] || fail "$host: exit status $EXIT_STATUS after SIGTERM; output: $(cat "$work/server-$host.log")"
  grep -q 'hilo_server: stopped' "$work/server-$host.log" || fail "$host: no 'stopped' line after SIGTERM"
  log "$host: ok: node tag $want_tag, range [1, 32], health SERVING, metrics served, db owned by $uid, drained on SIGTERM"
  exit 0
fi

src=$(cd "${1:?usage: test_k8s_pod.sh SOURCE_DIR HILO_SERVER}" && pwd)
server_bin=${2:?usage: test_k8s_pod.sh SOURCE_DIR HILO_SERVER}
[ -x "$server_bin" ] || fail "no hilo_server at $server_bin"
need_node_modules "$src"
need_python_grpc
for tool in unshare setpriv ip mount; do
  command -v "$tool" >/dev/null || fail "$tool is missing (Debian packages util-linux, iproute2, mount)"
done

ns=(unshare --uts --net --mount --pid --fork --kill-child --mount-proc)
need_namespaces "needs root: namespaces, mounts and switching to the pod's uid" \
  "cannot create the pod's namespaces here (%s: %s); run as root" "${ns[@]}"

make_work_dir hilo-k8s-pod
work=$WORK_DIR
cp "$server_bin" "$work/hilo_server"
render "$src/deploy/k8s" "$work/base.yaml"
node "$here/manifests.mjs" pod-spec --src "$src" "$work/base.yaml" >"$work/pod.json"
log "rendered container: $(cat "$work/pod.json")"

for case in hilo-2:C hilo-27:AB; do
  "${ns[@]}" "$BASH" "${BASH_SOURCE[0]}" --inner "$work" "${case%:*}" "${case#*:}" "$src/proto" ||
    fail "the pod ${case%:*} failed (see above)"
done
log "ok"
