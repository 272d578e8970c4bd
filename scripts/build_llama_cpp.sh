#!/usr/bin/env bash
# Install llama-cpp-python (the engine of plangate's `local` model) into a virtualenv from a cached wheel,
# building that wheel once when the cache has none.
#
#   scripts/build_llama_cpp.sh [PYTHON]        PYTHON defaults to .venv/bin/python
#
# Why a script: PyPI ships llama-cpp-python as source only, and a default build compiles for the build
# machine's own CPU (-march=native), which dies with SIGILL on machines whose CPU differs. It is built here
# with GGML_NATIVE=OFF (portable AVX2/FMA/F16C code), which takes minutes, so the wheel is kept in
#   ${PLANGATE_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/plangate/wheels}/llama-cpp-python-<version>-generic/
# and reused by every later setup. pip's and uv's own caches are bypassed on purpose: their keys ignore
# CMAKE_ARGS, so they could hand back a native build made by someone else.
#
# Environment: LLAMA_CPP_PYTHON_VERSION (default below), PLANGATE_WHEEL_CACHE, PLANGATE_REBUILD_LLAMA=1 to
# throw the cached wheel away and build again.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${1:-.venv/bin/python}
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
FLAGS="-DGGML_NATIVE=OFF"
CACHE=${PLANGATE_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/plangate/wheels}/llama-cpp-python-$VERSION-generic

if [ ! -x "$PY" ]; then
  echo "build_llama_cpp: no Python at $PY (make the virtualenv first)" >&2
  exit 1
fi

installed=$("$PY" -c 'import importlib.metadata as m
try:
    print(m.version("llama-cpp-python"))
except m.PackageNotFoundError:
    pass')
if [ "$installed" = "$VERSION" ] && [ "${PLANGATE_REBUILD_LLAMA:-0}" != 1 ]; then
  exit 0
fi

if [ "${PLANGATE_REBUILD_LLAMA:-0}" = 1 ]; then
  rm -rf "$CACHE"
fi

wheel=$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  mkdir -p "$CACHE"
  tmp=$(mktemp -d "$CACHE/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "build_llama_cpp: building llama-cpp-python $VERSION with $FLAGS (several minutes, once)" >&2
  start=$SECONDS
  CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
    "$PY" -m pip wheel --quiet --disable-pip-version-check --no-cache-dir --no-deps \
    -w "$tmp" "llama-cpp-python==$VERSION"
  built=$(ls "$tmp"/llama_cpp_python-"$VERSION"-*.whl)
  # Moved in only when complete, so an interrupted build never leaves a broken wheel in the cache.
  mv "$built" "$CACHE/"
  wheel=$CACHE/$(basename "$built")
  echo "build_llama_cpp: built $(basename "$wheel") in $((SECONDS - start)) s" >&2
fi

if [ -x "$(dirname "$PY")/uv" ]; then
  "$(dirname "$PY")/uv" pip install --quiet --python "$PY" --reinstall-package llama-cpp-python "$wheel"
else
  "$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-cache-dir "$wheel"
fi
