#!/usr/bin/env bash
# The GPU node check (issue 20): on a machine with one NVIDIA GPU and no network, install what twinscan
# needs from an environment carried with the working tree, run the CUDA tests, time `twinscan capture`
# at `standard` on the bundled sample and on a generated 2-minute 1080p walkthrough, and print the results
# as markdown for docs/benchmarks.md ("GPU node").
#
#   benchmarks/gpu_check.sh prepare        here, with pip and the network: pack .gpu-env/ (git-ignored) in
#                                          parts of at most 48 MiB (a device call carries 64 MiB at most,
#                                          the working tree's 15 MB, the bundled sample mostly, included)
#   benchmarks/gpu_check.sh receive        on the device, one call per part (carry .gpu-env/part-NN and
#                                          .gpu-env/parts.sha256): keeps the part in /tmp/twinscan-gpu
#   benchmarks/gpu_check.sh run [sample|walk|all]
#                                          on the device: unpack, gsplat's kernels, CUDA tests, timings, table;
#                                          stops after the kernels when gsplat's do not load; the captures get
#                                          what is left of GPU_CHECK_SECONDS (default 570: a 10-minute call)
#   benchmarks/gpu_check.sh dry-run        here, on the CPU: the tests and the walk's steps at the smoke
#                                          preset, the tiny capture standing in for the walk (2 minutes)
#
# What the device image has (the workplace's KINDS.md, nvidia-h200): Python 3.12 with CUDA torch, numpy,
# scipy, numba, OpenCV, pillow, typer, rich, jaxtyping, ninja, pytest and nvcc; it lacks gsplat, pycolmap,
# open3d, usd-core, PyAV, trimesh, xatlas, fast-simplification, plyfile and the X11 libraries pycolmap's
# CUDA build links. Those are the environment `prepare` packs: 261 MB of wheels (2026-12-03), installed
# here for cp312 manylinux x86_64 (870 MB without open3d's unused TensorFlow and PyTorch ops) and
# compressed with `xz -1` to 198 MB: 4 parts (1.7 CPU-minutes; `XZ_LEVEL=6` packs smaller, about 5 times
# slower). NVIDIA Newton is not carried (warp alone is ~100 MB): the check stage validates the twin
# without dropping probes, and says so.
#
# Device time, estimated (nothing of this has run on a GPU yet): `receive` ~20 s a call; `run sample`
# ~9 min (unpack 0.5, gsplat's CUDA build ~3 on first use, CUDA tests and the memory benchmark ~1.5, the
# sample at standard ~4); `run walk` ~8 min (rendering the walk on 16 processes ~2, its capture ~6). A
# 15-minute lease holds the parts and `run sample`; `run walk` needs a second one (or `--walk-seconds 60`).
# The machine goes back after 30 s idle: make the calls back to back.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"
ENV_DIR="$REPO/.gpu-env"                       # here: the packed parts (git-ignored)
DEVICE_DIR="${TWINSCAN_GPU_DIR:-/tmp/twinscan-gpu}"   # there: parts, unpacked environment, kernel cache
PART_BYTES=$((48 * 1024 * 1024))  # + the 15 MB working tree < 64 MiB a call
XZ_LEVEL="${XZ_LEVEL:-1}"
# The versions this project is tested at (pycolmap-cuda12 at the CPU wheel's version).
PINS=(gsplat==1.5.3 pycolmap-cuda12==4.2.1 open3d-cpu==0.20.0 usd-core==26.11 av==18.1.0 trimesh==5.2.0
      fast-simplification==0.2.0 xatlas==0.0.11 plyfile==1.1.5 libusb-package==1.0.30.0
      omniverse-asset-validator==1.18.0
      # `import open3d` imports its plotly viewer: dash and plotly, and what they need beyond the image
      dash plotly flask blinker itsdangerous retrying nest-asyncio importlib-metadata)
CUDART12=nvidia-cuda-runtime-cu12              # libcudart.so.12 for pycolmap-cuda12 (the image has CUDA 13)
X11_DEBS=(libx11-6 libxext6 libsm6 libice6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0)
PLATFORM=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_35_x86_64
          --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64
          --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64)
WALK_SECONDS=120
say() { printf '\n== %s\n' "$*"; }
timed() { local started=$SECONDS; "$@"; echo "($((SECONDS - started)) s)"; }

prepare() {
    local work; work="$(mktemp -d)"
    local pip=("${PYTHON:-$REPO/.venv/bin/python}" -m pip)
    say "downloading wheels for the device (cp312, manylinux x86_64) into $work"
    "${pip[@]}" download -q --no-deps "${PLATFORM[@]}" -d "$work/wheels" "${PINS[@]}" "$CUDART12"
    say "installing them into a tree (site/ for PYTHONPATH, lib/ for LD_LIBRARY_PATH)"
    mkdir -p "$work/tree/site" "$work/tree/lib/x11"
    "${pip[@]}" install -q --no-deps --no-compile "${PLATFORM[@]}" --target "$work/tree/site" \
        $(ls "$work"/wheels/*.whl | grep -v nvidia_cuda_runtime)
    rm "$work"/tree/site/open3d/open3d_{torch,tf}_ops.so  # open3d.ml's ops: twinscan never imports them
    (cd "$work" && python3 -m zipfile -e wheels/nvidia_cuda_runtime_cu12-*.whl cudart \
        && cp cudart/nvidia/cuda_runtime/lib/libcudart.so.12 tree/lib/)
    if command -v apt-get >/dev/null; then
        say "the X11 libraries pycolmap's CUDA build links (amd64 packages, unpacked into lib/x11/)"
        local apt=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists="$work/apt-lists")
        mkdir -p "$work/apt-lists/partial" "$work/debs"
        apt-get "${apt[@]}" update -q >/dev/null
        (cd "$work/debs" && apt-get "${apt[@]}" download "${X11_DEBS[@]}" >/dev/null)
        for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/x11"; done
        cp -a "$work"/x11/usr/lib/x86_64-linux-gnu/*.so.* "$work/tree/lib/x11/"
    else
        echo "warning: no apt-get here: the X11 libraries are not packed (pycolmap-cuda12 fails to import without them)"
    fi
    say "packing (xz) into $ENV_DIR in parts of at most $((PART_BYTES / 1024 / 1024)) MiB"
    rm -rf "$ENV_DIR" && mkdir -p "$ENV_DIR"
    tar -C "$work/tree" -cf - . | xz "-$XZ_LEVEL" -T0 | split -b "$PART_BYTES" -d -a 2 - "$ENV_DIR/part-"
    (cd "$ENV_DIR" && sha256sum part-* > parts.sha256)
    rm -rf "$work"
    grep -qx '/.gpu-env/' .gitignore || echo "warning: .gpu-env/ is not in .gitignore"
    du -h "$ENV_DIR"/part-*
    local parts; parts=$(ls "$ENV_DIR"/part-* | wc -l)
    say "device calls: one per part, then the run (back to back: the machine goes back after 30 s idle)"
    for part in "$ENV_DIR"/part-*; do
        echo "  run(command='bash benchmarks/gpu_check.sh receive', carry=['.gpu-env/$(basename "$part")', '.gpu-env/parts.sha256'], timeout_s=120)"
    done
    echo "  run(command='bash benchmarks/gpu_check.sh run sample', carry=['.gpu-env/parts.sha256'], timeout_s=600)"
    echo "  ($parts parts; then, in a second lease after the same $parts receives: run walk)"
}

receive() {
    mkdir -p "$DEVICE_DIR/parts"
    local part
    for part in "$ENV_DIR"/part-*; do
        [[ -e "$part" ]] && mv "$part" "$DEVICE_DIR/parts/"
    done
    [[ -e "$ENV_DIR/parts.sha256" ]] && cp "$ENV_DIR/parts.sha256" "$DEVICE_DIR/parts/"
    echo "holding $(ls "$DEVICE_DIR"/parts/part-* 2>/dev/null | wc -l) of" \
         "$(cat "$DEVICE_DIR/parts/parts.sha256" 2>/dev/null | wc -l) parts in $DEVICE_DIR/parts"
}

unpack() {
    local env="$DEVICE_DIR/env"
    if [[ ! -e "$env/.complete" ]]; then
        receive >/dev/null
        (cd "$DEVICE_DIR/parts" && sha256sum --quiet -c parts.sha256) \
            || { echo "error: parts missing or damaged: send every part with 'receive' first"; exit 2; }
        say "unpacking the environment"
        rm -rf "$env" && mkdir -p "$env"
        cat "$DEVICE_DIR"/parts/part-* > "$DEVICE_DIR/env.tar.xz"
        python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" \
            "$DEVICE_DIR/env.tar.xz" "$env"
        rm "$DEVICE_DIR/env.tar.xz"
        touch "$env/.complete"
    fi
    local curand
    curand="$(find "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" /usr/local/cuda*/ \
        -name 'libcurand.so.10*' 2>/dev/null | head -1 || true)"
    [[ -n "$curand" ]] || echo "warning: no libcurand.so.10 found: pycolmap-cuda12 will not import"
    local libs="$env/lib:$(dirname "${curand:-/}")"
    # CUDA 13 moved CUB and Thrust under include/cccl: host compilers of gsplat's sources look there too
    local cccl; cccl="$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/../include/cccl"
    [[ -d "$cccl" ]] && export CPLUS_INCLUDE_PATH="$cccl${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
    # the carried X11 libraries only where the image has none (they would shadow its own)
    ldconfig -p 2>/dev/null | grep -q 'libX11.so.6 ' || libs="$libs:$env/lib/x11"
    export PYTHONPATH="$REPO:$env/site" LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# Sample GPU memory (MiB used, all processes) every 200 ms while a command runs; the peak goes to $1.
with_peak_memory() {
    local out="$1"; shift
    if ! command -v nvidia-smi >/dev/null; then echo "-" > "$out"; "$@"; return; fi
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$out.samples" &
    local sampler=$!
    local status=0
    "$@" || status=$?
    kill "$sampler"; wait "$sampler" 2>/dev/null || true
    sort -n "$out.samples" | tail -1 > "$out"
    return "$status"
}

seconds_left() { echo $((DEADLINE - SECONDS)); }

timed_capture() {  # NAME VIDEO GROUND_TRUTH_DIR QUALITY DEVICE
    local name="$1" video="$2" truth="$3" quality="$4" device="$5"
    # what is left of the call, less a minute for the render benchmark and the table
    local budget=$(( $(seconds_left) - 60 ))
    (( budget > 60 )) || { echo "no time left for the $name capture"; return; }
    say "twinscan capture $name at $quality (--device $device; stopped after ${budget} s, its finished stages kept)"
    rm -rf "${RESULTS:?}/$name"  # timed from nothing, not resumed
    with_peak_memory "$RESULTS/$name.peak_mib" timeout "$budget" "$PY" -m twinscan.cli.app capture "$video" \
        -o "$RESULTS/$name" -q "$quality" --device "$device" --marker-size 0.30 \
        || echo "error: the $name capture failed or ran out of time (its finished stages below)"
    "$PY" benchmarks/eval_twin.py "$RESULTS/$name" --sample "$truth" > "$RESULTS/$name.eval.md" 2>&1 \
        || echo "(eval_twin.py could not score it)" >> "$RESULTS/$name.eval.md"
    CAPTURES+=("$name=$RESULTS/$name:$(cat "$RESULTS/$name.peak_mib")")
    if [[ -e "$RESULTS/$name/twin.usda" && $(seconds_left) -gt 30 ]]; then
        say "twinscan render from the $name twin: views per second, CUDA against the CPU rasterizer (bench_render.py)"
        timeout $(( $(seconds_left) - 10 )) "$PY" benchmarks/bench_render.py "$RESULTS/$name" --views 40 --device cuda \
            | tee "$RESULTS/render.txt" || true
        timeout $(( $(seconds_left) - 5 )) "$PY" benchmarks/bench_render.py "$RESULTS/$name" --views 5 --device cpu \
            | tee -a "$RESULTS/render.txt" || true
    fi
}

run_checks() {  # STEPS QUALITY DEVICE RESULTS_DIR WALK_PRESET; STEPS: some of tests, sample, walk
    local steps="$1" quality="$2" device="$3" walk_preset="$5"
    RESULTS="$4"
    mkdir -p "$RESULTS"
    CAPTURES=()
    DEADLINE=$((SECONDS + ${GPU_CHECK_SECONDS:-570}))
    "$PY" - <<'EOF'
import platform, torch, pycolmap, gsplat
print(f"python {platform.python_version()}, torch {torch.__version__}, gsplat {gsplat.__version__}, "
      f"pycolmap {pycolmap.__version__} (CUDA build: {bool(pycolmap.has_cuda)})")
print("GPU:", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
EOF
    if [[ "$steps" == *tests* ]]; then
        say "gsplat's CUDA kernels (built on first use; TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-all})"
        timed "$PY" -c "from twinscan.gaussians.raster import cuda_available; print('usable CUDA:', cuda_available())" \
            | tee "$RESULTS/kernels.txt"
        if [[ "$device" == cuda ]] && ! grep -q "usable CUDA: True" "$RESULTS/kernels.txt"; then
            echo "error: gsplat's CUDA kernels did not load (above): nothing else here would run on the GPU"; exit 3
        fi
        say "CUDA tests: CPU rasterizer against gsplat.rasterization; the GPU node's choices"
        "$PY" -m pytest -q -p no:cacheprovider tests/test_cuda_parity.py tests/test_gpu_node.py tests/test_splat_geometry.py \
            -k "not a_capture_records" | tee "$RESULTS/tests.txt" || true
    fi
    if [[ "$steps" == *sample* ]]; then
        timed_capture sample samples/factory_cell/video.mp4 samples/factory_cell "$quality" "$device"
    fi
    if [[ "$steps" == *walk* ]]; then
        say "generating the walkthrough ($walk_preset, $WALK_SECONDS s) on $(nproc) processes"
        timed "$PY" - "$RESULTS/walk_capture" "$walk_preset" "$WALK_SECONDS" "$(nproc)" <<'EOF'
import dataclasses, sys
from twinscan.synth.capture import PRESETS, make_capture
cfg = dataclasses.replace(PRESETS[sys.argv[2]], duration_s=float(sys.argv[3]))
truth = make_capture(cfg, sys.argv[1], workers=int(sys.argv[4]))
print(f"{truth.frame_count} frames {truth.width}x{truth.height} at {truth.fps:g} fps")
EOF
        timed_capture walk "$RESULTS/walk_capture/video.mp4" "$RESULTS/walk_capture" "$quality" "$device"
    fi
    if [[ "$steps" == *tests* && $(seconds_left) -gt 60 ]]; then
        say "peak GPU memory of splat training (benchmarks/bench_gpu_memory.py)"
        timeout $(( $(seconds_left) - 20 )) "$PY" benchmarks/bench_gpu_memory.py | tee "$RESULTS/memory.txt" || true
    fi
    say "results (markdown, for docs/benchmarks.md)"
    {
        echo "$(date -u +%F), $("$PY" -c 'import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU only")'), $(nproc) cores"
        echo
        "$PY" benchmarks/capture_table.py "${CAPTURES[@]}"
        for capture in "${CAPTURES[@]}"; do
            local name="${capture%%=*}"
            echo; echo "Geometry and cameras, $name (benchmarks/eval_twin.py):"; cat "$RESULTS/$name.eval.md"
        done
    } | tee "$RESULTS/gpu_check.md"
    if [[ -n "${OUT:-}" ]]; then  # the device tool returns at most 8 small files from $OUT
        cp "$RESULTS"/gpu_check.md "$RESULTS"/tests.txt "$RESULTS"/memory.txt "$RESULTS"/render.txt "$OUT"/ 2>/dev/null || true
    fi
}

case "${1:-}" in
    prepare) prepare ;;
    receive) receive ;;
    run)
        case "${2:-sample}" in
            sample) steps="tests sample" ;;
            walk) steps="walk" ;;
            all) steps="tests sample walk" ;;
            *) echo "error: run takes sample, walk or all"; exit 2 ;;
        esac
        [[ "${3:-}" == --walk-seconds ]] && WALK_SECONDS="$4"
        command -v nvidia-smi >/dev/null || { echo "error: run needs an NVIDIA GPU (no nvidia-smi here); on the CPU use dry-run"; exit 2; }
        # the whole log comes back from the device even when the call runs out of time
        [[ -n "${OUT:-}" ]] && exec > >(tee "$OUT/run.log") 2>&1
        unpack
        PY=python3
        arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)"
        export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$arch}" MAX_JOBS="$(nproc)" \
            TORCH_EXTENSIONS_DIR="$DEVICE_DIR/torch_extensions" PYTHONUNBUFFERED=1
        run_checks "$steps" standard cuda "$DEVICE_DIR/runs" walk1080
        ;;
    dry-run)
        # smoke cannot reconstruct the sample (40 frames over its 48 s: 3 of 40 registered), and preview takes
        # 11 minutes here: the tiny capture alone stands in for the captures
        PY="${PYTHON:-$REPO/.venv/bin/python}"
        export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
        WALK_SECONDS=20
        run_checks "tests walk" smoke cpu "$REPO/runs/gpu_check" tiny
        ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
esac
