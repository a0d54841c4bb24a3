#!/usr/bin/env bash
# The installed package works for a plugin author: `cmake --install` into a temporary
# prefix, then schedules/examples built out of tree against it with find_package(ppstage)
# (its include directory must be the prefix's, not this source tree's), then the
# installed ppstage loads the plugin and simulates its schedule.
#
# usage: install_package.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/harness.sh"
build=$1
source=$2
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for path in bin/ppstage include/ppstage/schedule/schedule_api.h \
            lib/cmake/ppstage/ppstageConfig.cmake lib/cmake/ppstage/ppstageTargets.cmake; do
  [ -e "$prefix/$path" ] || { echo "FAIL: the install lacks $path"; exit 1; }
done
cmake -S "$source/schedules/examples" -B "$work/plugin" -DCMAKE_PREFIX_PATH="$prefix" \
  > "$work/configure.log"
cmake --build "$work/plugin" > "$work/build.log"
grep -rq -- "-I$prefix/include\|-isystem $prefix/include" "$work/plugin/CMakeFiles" ||
  { echo "FAIL: the plugin was not compiled against the installed headers"; exit 1; }
plugin=$(find "$work/plugin" -name 'libreverse_gpipe_schedule.so' | head -1)
"$prefix/bin/ppstage" schedule --pipeline.schedule_plugin "$plugin" \
  --pipeline.schedule reverse-gpipe --pipeline.stages 4 --pipeline.microbatches 8 > "$work/out.txt"
cat "$work/out.txt"
grep -q "^schedule reverse-gpipe" "$work/out.txt" && grep -q "bubble fraction" "$work/out.txt" ||
  { echo "FAIL: the installed ppstage did not run the plugin's schedule"; exit 1; }
echo "ok: installed to $prefix, plugin built out of tree and run by the installed ppstage"
