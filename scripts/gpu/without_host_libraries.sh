#!/usr/bin/env bash
# Runs a command with this machine's copies of what a GPU check pack carries hidden, as on
# the GPU machine, which has none of them: every library in PACK/lib at its place here
# (but zlib, which every Linux has and Python loads before the check sets its library
# path), Open MPI's and PMIx's folders, binaries and configuration, and ssh (a container
# may have none, and Open MPI's launcher looks for it). So a rehearsal of the check
# proves the pack self-contained rather than finding what it forgot here. Needs root and a
# mount namespace of its own (unshare -m): it mounts an empty tmpfs over each folder and
# /dev/null over each file, and leaves this machine's mounts as they were.
#
# usage: scripts/gpu/without_host_libraries.sh PACK COMMAND [ARG...]
set -euo pipefail
if [[ ${1:-} != --inside ]]; then
  pack=$(cd "$1" && pwd)
  shift
  exec unshare --mount --propagation private "$0" --inside "$pack" "$@"
fi
pack=$2
shift 2
hide_folder() { [[ -d $1 ]] && mount -t tmpfs none "$1"; return 0; }
hide_file() { [[ -e $1 ]] && mount --bind /dev/null "$(readlink -f "$1")"; return 0; }
multiarch=/usr/lib/x86_64-linux-gnu
for folder in $multiarch/openmpi $multiarch/pmix2 /usr/share/openmpi /etc/openmpi; do
  hide_folder "$folder"
done
for binary in mpirun mpiexec orterun orted ompi_info ssh rsh; do hide_file "/usr/bin/$binary"; done
for library in "$pack"/lib/*; do
  name=${library##*/}
  [[ $name == libz.so.* ]] && continue
  for place in "$multiarch/$name" "/lib/x86_64-linux-gnu/$name"; do hide_file "$place"; done
done
exec "$@"
