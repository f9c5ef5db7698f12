# Sourced by the install-deps scripts: apt_install_missing NAME PACKAGE...
# installs (with apt-get, through sudo when not root) only the Debian
# packages that are not installed yet, and says which; NAME prefixes its
# lines.
apt_install_missing() {
  _name=$1
  shift
  _missing=""
  for _p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$_p" 2>/dev/null | grep -q "ok installed"; then
      _missing="$_missing $_p"
    fi
  done
  if [ -z "$_missing" ]; then
    echo "$_name: all Debian packages present"
    return 0
  fi
  _sudo=""
  if [ "$(id -u)" -ne 0 ]; then _sudo="sudo"; fi
  echo "$_name: installing:$_missing"
  $_sudo apt-get update -q
  # shellcheck disable=SC2086  # a list of package names
  DEBIAN_FRONTEND=noninteractive $_sudo apt-get install -y -q \
    --no-install-recommends $_missing
}
