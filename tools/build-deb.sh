#!/usr/bin/env bash
# Builds the Debian package from this tree: tools/build-deb.sh [BUILD_DIR] (default build-deb)
# writes BUILD_DIR/rnic_<version>_<arch>.deb and prints its path on the last line.
# A tree of its own, configured as Debian builds CMake packages (build type None, the flags of
# dpkg-buildflags: hardening, -O2, -g then stripped), prefix /usr and RNIC_PACKAGING=ON; only
# the installed targets are built (no tests). CPack writes the package; dpkg-shlibdeps fills
# in the runtime dependencies (docs/packaging.md).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-deb}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
cppflags=$(dpkg-buildflags --get CPPFLAGS)
export CFLAGS="$(dpkg-buildflags --get CFLAGS) $cppflags"
export CXXFLAGS="$(dpkg-buildflags --get CXXFLAGS) $cppflags"
export LDFLAGS=$(dpkg-buildflags --get LDFLAGS)
launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# RNIC_WERROR=OFF: a warning a newer compiler or Debian's flags add must not fail a package build.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=None -DCMAKE_INSTALL_PREFIX=/usr -DRNIC_PACKAGING=ON \
    -DRNIC_WERROR=OFF -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON "${launcher[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)" --target rnicd rnicctl rnic-pcap rnic-sysfs rnic_verbs_shim \
    rnic_stub_mlx5 rnic_stub_efa rnic_rdmacm rnic_man_pages rnic_changelog
rm -f "$dir"/rnic_*.deb
(cd "$dir" && cpack -G DEB >cpack.log 2>&1) || { cat "$dir/cpack.log" >&2; exit 1; }
ls "$dir"/rnic_*.deb
