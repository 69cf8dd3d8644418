#!/usr/bin/env bash
# Laconic as a downstream project uses it: `cmake --install` of this build into a fresh prefix,
# then every examples/*/ project configured, built and run in a build tree of its own against the
# installed package (find_package(Laconic), CMAKE_PREFIX_PATH), as a user's repository would; and
# the installed trainer finds its plot script from its own location (share/laconic/scripts), a
# program built against the package from the path the package gives it.
# usage: examples.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
build=$(dirname "$trainer")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
for f in bin/trainer lib/cmake/Laconic/LaconicConfig.cmake lib/cmake/Laconic/LaconicConfigVersion.cmake \
         include/laconic/laconic.h include/laconic/workloads/models/model.h share/laconic/scripts/plot \
         share/laconic/recipes/lamb_bert.toml; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
if find "$prefix/include" -path '*/cuda/*' | grep -q .; then echo "CUDA kernel headers were installed"; exit 1; fi

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
for dir in "$src"/examples/*/; do
  [ -f "$dir/CMakeLists.txt" ] || continue  # a Python example (torch_gpt: python.torch_gpt_example)
  name=$(basename "$dir")
  echo "== example $name"
  cmake -S "$dir" -B "$tmp/build-$name" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
    > "$tmp/$name.configure.log" || { cat "$tmp/$name.configure.log"; exit 1; }
  cmake --build "$tmp/build-$name" -j2 > "$tmp/$name.build.log" 2>&1 || { cat "$tmp/$name.build.log"; exit 1; }
  mkdir -p "$tmp/runs-$name"
  if [ -x "$dir/run.sh" ]; then "$dir/run.sh" "$tmp/build-$name" "$tmp/runs-$name"; else "$tmp/build-$name/$name" "$tmp/runs-$name"; fi
done

# The installed trainer compares the example's runs and draws the plots with the installed script.
if /usr/bin/python3 -c "import matplotlib" 2> /dev/null; then
  "$prefix/bin/trainer" compare --runs "$tmp/runs-train_from_cpp/allreduce" "$tmp/runs-train_from_cpp/diloco" \
    --out "$tmp/report" > "$tmp/compare.log"
  [ -f "$tmp/report/loss_vs_steps.png" ] || { echo "the installed trainer drew no plots"; cat "$tmp/compare.log"; exit 1; }
fi
# So does a program of the user's built against the package, whose binary lies outside the prefix:
# the installed script's path comes with Laconic::cli (LACONIC_PLOT_SCRIPT, train_main.h).
"$tmp/build-random_k/randk_trainer" compare --runs "$tmp/runs-train_from_cpp/allreduce" "$tmp/runs-train_from_cpp/diloco" \
  --out "$tmp/report_user" > "$tmp/compare_user.log"
if grep -q "not found" "$tmp/compare_user.log" "$tmp/report_user/report.md"; then
  echo "a program built against the package does not find the installed plot script"; cat "$tmp/compare_user.log"; exit 1
fi
if /usr/bin/python3 -c "import matplotlib" 2> /dev/null; then
  [ -f "$tmp/report_user/loss_vs_steps.png" ] || { echo "the user's program drew no plots"; cat "$tmp/compare_user.log"; exit 1; }
fi
echo "examples: ok"
