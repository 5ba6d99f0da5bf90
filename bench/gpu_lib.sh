# Shared by bench/gpu_check.sh and bench/gpu_followup.sh (sourced, not run): a step under its own time limit, and
# the carried wheels (bench/gpu_wheels.sh: .whl/, or $WHEELS) installed where the lent GPU machine's Python finds
# them.

export PYTHONUNBUFFERED=1 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0  # output as it comes; Ray on loopback
PYTHON=${PYTHON:-python3}

step() {  # step NAME SECONDS COMMAND...: run COMMAND under a time limit, say how it ended, go on either way
    local name=$1 limit=$2
    shift 2
    echo "=== $name (at most ${limit}s): $*"
    local start=$SECONDS status
    # in a process group of its own, ended whole afterwards: what a stopped step leaves running (a process pool's
    # workers, a Ray driver and its workers) must not run on into the next step's measurements
    setsid timeout --kill-after=10 "$limit" "$@" &
    local group=$!
    wait "$group"
    status=$?
    kill -KILL -- -"$group" 2>/dev/null
    echo "=== $name: exit $status after $((SECONDS - start))s$([[ $status == 124 ]] && echo ' (time limit)')"
}

describe_machine() {  # describe_machine MODULE...: the GPU, the cores, Python, torch and each MODULE's version,
    # and whether torch sees CUDA; fails when a MODULE or torchforce does not import
    echo "=== machine"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    echo "cores: $(nproc)"
    "$PYTHON" - "$@" <<'PYTHON'
import importlib, platform, sys
import torch, torchforce
versions = [f"{name} {importlib.import_module(name).__version__}" for name in sys.argv[1:]]
cuda = torch.cuda.is_available()
print(", ".join([f"Python {platform.python_version()}", f"torch {torch.__version__}", *versions, f"CUDA {cuda}"])
      + (f": {torch.cuda.get_device_name()}" if cuda else ""))
PYTHON
}

install_wheels() {  # $WHEELS/*.whl, and Ray from $WHEELS/ray/, into a folder of their own first on PYTHONPATH
    local wheels=${WHEELS:-.whl}
    export PYTHONPATH=$PWD
    compgen -G "$wheels/*.whl" >/dev/null || return 0
    local site=${TMPDIR:-/tmp}/torchforce-site
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
        "$wheels"/*.whl || return 1
    export PYTHONPATH=$site:$PWD
    compgen -G "$wheels/ray/ray-*-core.tar.xz" >/dev/null || return 0
    mkdir -p "$site"
    tar -C "$site" -xJf "$wheels"/ray/ray-*-core.tar.xz || return 1
    local wheel name missing=()
    for wheel in "$wheels"/ray/*.whl; do  # Ray's dependencies, only those the machine lacks (it has protobuf...)
        name=$(basename "$wheel")
        name=${name%%-*}
        case $name in
            attrs) name=attr ;;
            protobuf) name=google.protobuf ;;
            pyyaml) name=yaml ;;
            rpds_py) name=rpds ;;
        esac
        "$PYTHON" -c "import $name" 2>/dev/null || missing+=("$wheel")
    done
    echo "Ray's dependencies installed here: ${missing[*]:-none}"
    ((${#missing[@]} == 0)) || "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target "$site" "${missing[@]}"
}

PATH_FILE=torchforce-gpu-check.pth

isolated_path() {  # the folders on PYTHONPATH, as a .pth file in the interpreter's site-packages, for processes that
    # run 'python -I' (tfcli's local worker, which ignores PYTHONPATH): the GPU machine has torchforce and the
    # carried wheels only there. Where that folder is not writable, those processes do not find them (test_cuda's
    # tfcli test then skips). remove_isolated_path takes the file away again.
    local purelib
    purelib=$("$PYTHON" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") || return 0
    if tr ':' '\n' <<<"$PYTHONPATH" >"$purelib/$PATH_FILE" 2>/dev/null; then
        echo "PYTHONPATH for isolated processes in $purelib/$PATH_FILE"
    else
        echo "note: $purelib is not writable: processes run with 'python -I' will not find torchforce"
    fi
}

remove_isolated_path() {
    local purelib
    purelib=$("$PYTHON" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") && rm -f "$purelib/$PATH_FILE"
}
