# Sourced by the Go client's build and test scripts:
#
#   . "$ROOT/clients/go/goenv.sh"; hilo_go_env "$ROOT" GEN_DIR WORK_DIR
#
# sets up GOPATH mode, offline, against Debian's Go packages: the generated
# package github.com/hilo-id/hilo/gen/go/hilo/v1 from GEN_DIR/go (what
# scripts/gen-stubs.sh writes), this client as
# github.com/hilo-id/hilo/clients/go through a link under WORK_DIR/gopath,
# and /usr/share/gocode. Nothing is downloaded (GOPROXY=off).
hilo_go_env() {
  _gen=$(CDPATH= cd -- "$2" && pwd)
  mkdir -p "$3/gopath/src/github.com/hilo-id/hilo/clients"
  _work=$(CDPATH= cd -- "$3" && pwd)
  ln -sfn "$1/clients/go" "$_work/gopath/src/github.com/hilo-id/hilo/clients/go"
  export GO111MODULE=off GOPROXY=off GOFLAGS= \
    GOPATH="$_gen/go:$_work/gopath:/usr/share/gocode"
  [ -n "${HOME:-}" ] || export GOCACHE="$_work/gocache"
}
