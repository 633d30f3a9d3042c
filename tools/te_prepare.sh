#!/usr/bin/env bash
# Issue 27: Transformer Engine 2.14.1 for the lent H200 (torch 2.11+cu130, Python 3.12, no network),
# made here from public sources and small enough to carry (docs/transformer-engine.md).
#
#   bash tools/te_prepare.sh [DIR]     default DIR: .dev/h27 (git-ignored; carry it)
#
# 1. downloads, with pip, the binary wheels transformer_engine==2.14.1 (the Python package) and
#    transformer_engine_cu13==2.14.1 (libtransformer_engine.so, every GPU architecture), and the
#    source distribution transformer_engine_torch==2.14.1 (the PyTorch extension, C++ only);
# 2. cuts libtransformer_engine.so to sm_90: strip --strip-all, then tools/te_fatbin_sm90.py zeroes
#    every fat-binary entry that is not an sm_90 cubin (sizes and offsets unchanged);
# 3. builds transformer_engine_torch against torch 2.11.0 (the PyPI wheel is +cu130, the device's)
#    in a Python 3.12 virtual environment: NVTE_CUDA_ARCHS=90, headers from the nvidia-* wheels
#    torch pulls in plus CUDA 13.0's crt/ headers (nvcc here), MAX_JOBS=2;
# 4. packs the Python package, the cut library, the extension and their dist-info into
#    DIR/te-sm90.tar.xz (extracted into the device Python's site-packages by tools/te_device.sh),
#    and pydantic's wheels (TE's recipe module imports it; the device image lacks it) into DIR/whl.
#
# Needs: python3.12 (PY312), nvcc 13.0 at CUDA_HOME, xz, strip, network. Takes about an hour on two
# shared cores, nearly all of it step 3.
set -euo pipefail

DIR=${1:-.dev/h27}
PY312=${PY312:-python3.12}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
VERSION=2.14.1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$DIR/dl" "$DIR/whl" "$DIR/src" "$DIR/whl_te" "$DIR/stage"
DIR=$(cd "$DIR" && pwd)
pick=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)

# 1. the wheels and the sdist (pip download of an sdist would try to build its metadata, which
#    needs torch: take the file pip names instead)
python3 -m pip download -q "${pick[@]}" -d "$DIR/dl" "transformer_engine==$VERSION" "transformer_engine_cu13==$VERSION"
if [ ! -f "$DIR/dl/transformer_engine_torch-$VERSION.tar.gz" ]; then
  url=$(python3 -m pip download -vvv --no-deps --no-binary=:all: --no-build-isolation -d "$DIR/dl" \
        "transformer_engine_torch==$VERSION" 2>&1 | grep -oE "https://files.pythonhosted.org[^ #]*transformer_engine_torch-$VERSION.tar.gz" | head -n 1)
  curl -sSLo "$DIR/dl/transformer_engine_torch-$VERSION.tar.gz" "$url"
fi
python3 -m pip download -q "${pick[@]}" -d "$DIR/whl" pydantic==2.11.7 pydantic-core==2.33.2 annotated-types==0.7.0 \
  typing-inspection==0.4.1

# 2. the library, cut to sm_90
rm -rf "$DIR/stage" && mkdir -p "$DIR/stage"
(cd "$DIR/stage" && python3 -m zipfile -e "$DIR/dl/transformer_engine-$VERSION-py3-none-any.whl" . \
  && python3 -m zipfile -e "$DIR/dl/transformer_engine_cu13-$VERSION-py3-none-manylinux_2_28_x86_64.whl" .)
lib="$DIR/stage/transformer_engine/wheel_lib/libtransformer_engine.so"
strip --strip-all "$lib"
python3 "$here/te_fatbin_sm90.py" "$lib" "$lib.sm90" --json "$DIR/cut.json"
mv "$lib.sm90" "$lib"

# 3. the PyTorch extension
if [ ! -x "$DIR/venv312/bin/python" ]; then
  "$PY312" -m venv "$DIR/venv312"
  "$DIR/venv312/bin/python" -m pip install -q torch==2.11.0 wheel setuptools packaging pybind11 ninja
fi
rm -rf "$DIR/src/transformer_engine_torch-$VERSION"
tar -xzf "$DIR/dl/transformer_engine_torch-$VERSION.tar.gz" -C "$DIR/src"
(cd "$DIR/src/transformer_engine_torch-$VERSION" &&
  CPLUS_INCLUDE_PATH="$CUDA_HOME/include" NVTE_PYTORCH_FORCE_BUILD=TRUE NVTE_BUILD_USE_NVIDIA_WHEELS=1 \
  NVTE_CUDA_ARCHS=90 NVTE_FRAMEWORK=pytorch NVTE_NO_LOCAL_VERSION=1 MAX_JOBS=${MAX_JOBS:-2} \
  PATH="$DIR/venv312/bin:$PATH" "$DIR/venv312/bin/python" setup.py bdist_wheel -d "$DIR/whl_te")
(cd "$DIR/stage" && python3 -m zipfile -e "$DIR"/whl_te/transformer_engine_torch-"$VERSION"-*.whl .)

# 4. one archive for site-packages
tar -C "$DIR/stage" -cf - . | xz -T2 -9 >"$DIR/te-sm90.tar.xz"
ls -l "$DIR/te-sm90.tar.xz" "$DIR"/whl/*.whl

# 5. the stand-in for the one cuBLASLt 13.2 symbol the library needs (tools/te_cublaslt_compat.c)
gcc -shared -fPIC -O2 -o "$DIR/libte_cublaslt_compat.so" "$here/te_cublaslt_compat.c" \
  -Wl,--version-script=<(printf 'libcublasLt.so.13 { global: cublasLtGroupedMatrixLayoutInit_internal; local: *; };\n')
