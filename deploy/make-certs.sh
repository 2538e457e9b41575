#!/bin/sh
# make-certs.sh: a private CA and one certificate per ringsync service, for mutual TLS
# (ringsyncd --tls_ca --tls_cert --tls_key). openssl only (Debian: openssl).
#
#   deploy/make-certs.sh DIR coordinator worker/w0 worker/w1 client/ringsyncctl prometheus
#
# DIR/ca.pem (+ ca.key, which signs; keep it off the cluster) is made once and reused, so
# running the script again adds services or renews their certificates under the same CA.
# Each NAME gets DIR/NAME.pem and DIR/NAME.key ("/" becomes "-": worker/w0 -> worker-w0.pem)
# with these subject alternative names:
#   URI:ringsync://ROLE/ID   who it is: the identity ringsyncd checks. A worker's Join for
#                            worker id W and its ring hellos as W are accepted only with
#                            URI:ringsync://worker/W.
#   DNS:ID, DNS:localhost, IP:127.0.0.1, and each of RINGSYNC_CERT_HOSTS (comma-separated,
#                            e.g. "w0.example.org,10.0.0.5")  where it is: the names
#                            clients dial, checked by TLS host name verification.
# Keys are EC P-256 (fast handshakes), mode 0600; certificates are valid RINGSYNC_CERT_DAYS
# (default 825) days. Both serverAuth and clientAuth: a worker serves peers and dials them.
set -eu

if [ $# -lt 2 ]; then
  echo "usage: $0 DIR NAME... (NAME: coordinator, worker/ID, client/ID, prometheus)" >&2
  exit 2
fi
dir=$1; shift
days=${RINGSYNC_CERT_DAYS:-825}
umask 077
mkdir -p "$dir"

if [ ! -s "$dir/ca.pem" ] || [ ! -s "$dir/ca.key" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" -days "$days" -subj "/CN=ringsync CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
  echo "made CA $dir/ca.pem"
fi

for name in "$@"; do
  case $name in
    coordinator|prometheus) role=$name; id=$name ;;
    worker/*|client/*) role=${name%%/*}; id=${name#*/} ;;
    *) echo "$0: '$name' is not coordinator, prometheus, worker/ID or client/ID" >&2; exit 2 ;;
  esac
  case $id in
    ''|*[!A-Za-z0-9._-]*) echo "$0: '$id' must be letters, digits, '.', '_' or '-'" >&2; exit 2 ;;
  esac
  file=$(echo "$name" | tr / -)
  sans="URI:ringsync://$role/$id,DNS:$id,DNS:localhost,IP:127.0.0.1"
  for host in $(echo "${RINGSYNC_CERT_HOSTS:-}" | tr , ' '); do
    case $host in
      *[!0-9.]*) sans="$sans,DNS:$host" ;;
      *) sans="$sans,IP:$host" ;;
    esac
  done
  ext=$(mktemp)
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\nbasicConstraints=critical,CA:FALSE\n' \
    "$sans" >"$ext"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/$file.key.new" -out "$dir/$file.csr" -subj "/CN=$id" 2>/dev/null
  openssl x509 -req -in "$dir/$file.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days "$days" -extfile "$ext" -out "$dir/$file.pem.new" 2>/dev/null
  rm -f "$ext" "$dir/$file.csr"
  # Key first, then certificate, each renamed into place: a daemon reloading between the
  # two renames sees a mismatched pair for at most one reload interval and keeps its old one.
  mv "$dir/$file.key.new" "$dir/$file.key"
  mv "$dir/$file.pem.new" "$dir/$file.pem"
  echo "made $dir/$file.pem ($sans)"
done
