#!/usr/bin/env bash
# Builds the project's Containerfile for real with buildah and runs the acceptance suite inside the
# image, on a machine that reaches no container registry (CI, the development VM).
#
# No public PyTorch base image can be pulled here, so a small stand-in base is made first:
# Debian (debootstrap) + python3 + a venv holding torch and torchvision from PyPI, the same
# shape as the public images (a `python` on PATH with torch installed, pip, no harness). The
# Containerfile is then built on it with --build-arg BASE_IMAGE=<that base>, exactly as a user
# builds it on pytorch/pytorch or an NGC image.
#
#   .ci/container-build.sh base                 # make (or reuse) the stand-in base; prints its name
#   .ci/container-build.sh image                # build the Containerfile on it; prints the image name
#   .ci/container-build.sh acceptance DIR [ARGS] # the image's entrypoint + ARGS, DIR mounted at /reports
#   .ci/container-build.sh exec CMD...          # any command in the built image (as its user)
#   .ci/container-build.sh inspect              # buildah inspect of the built image (JSON)
#   .ci/container-build.sh clean                # remove the cache (storage, wheels, debs)
#
# Everything cacheable lives under $HARNESS_CI_CACHE (default /var/cache/harness-ci), outside the
# repository: buildah's storage (the base image and the Containerfile's layers), the torch wheels
# and debootstrap's .debs. A re-run on the same machine reuses them; a fresh machine builds them.
# Needs root and: buildah, debootstrap (apt-get install buildah debootstrap).
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) stops the script too

REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${HARNESS_CI_CACHE:-/var/cache/harness-ci}
SUITE=${HARNESS_CI_SUITE:-bookworm}               # Debian's python3 is 3.11 there: cp311 wheels
MIRROR=${HARNESS_CI_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Pinned so that the cached base is what its name says. torch and torchvision come together
# (there is no CPU torchvision on PyPI; the CUDA build runs on a CPU).
TORCH_SPEC=${HARNESS_CI_TORCH_SPEC:-torch==2.14.1 torchvision==0.29.1}
BASE_TAG=$(printf '%s|%s' "$SUITE" "$TORCH_SPEC" | sha256sum | cut -c1-12)
BASE_IMAGE=localhost/harness-ci-base:$SUITE-$BASE_TAG
# The base as this machine's builds see it: plus the host's CA bundle, because PyPI may be
# reached through a TLS-intercepting proxy whose CA only the host trusts (pip reads PIP_CERT).
SITE_BASE_IMAGE=$BASE_IMAGE-site
IMAGE=${HARNESS_CI_IMAGE:-localhost/gpu-acceptance-harness:ci}

buildah_() {
    # A storage of our own: nothing else on the machine sees these images, and the cache dir
    # is the only state. chroot isolation: no user namespaces or runc needed.
    buildah --root "$CACHE/storage" --runroot "$CACHE/run" --storage-driver "${HARNESS_CI_STORAGE_DRIVER:-overlay}" "$@"
}

log() { printf '[container-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

need() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "container-build: $tool is not installed (apt-get install $tool)" >&2; exit 3; }
    done
    [ "$(id -u)" = 0 ] || { echo "container-build: needs root (debootstrap, buildah storage)" >&2; exit 3; }
}

lock() {
    # One build at a time per cache: concurrent test runs share the storage and the base.
    mkdir -p "$CACHE"
    exec 9>"$CACHE/lock"
    flock 9
    # Every command here holds the lock while it uses a working container, so any container
    # found now was left by an interrupted run: remove it (and its disk).
    if [ -d "$CACHE/storage" ]; then
        buildah_ rm --all >/dev/null 2>&1 || true
    fi
}

image_exists() { buildah_ inspect --type image "$1" >/dev/null 2>&1; }

wheels() {
    # Downloaded with the host's pip (its index settings and cache); installed in the base offline.
    local dir=$CACHE/wheels/$BASE_TAG
    if [ ! -f "$dir/.complete" ]; then
        log "downloading $TORCH_SPEC (+ dependencies) into $dir"
        mkdir -p "$dir"
        # The host's Python must have the base's tags (cp311, glibc manylinux): pip's --platform
        # would match one manylinux tag only, and torch's dependencies use several.
        python3 -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null \
            || { echo "container-build: needs python3 3.11 on the host (the base's Python)" >&2; exit 3; }
        # shellcheck disable=SC2086 # TORCH_SPEC is a list of requirements
        if ! python3 -m pip download --quiet --only-binary=:all: -d "$dir" $TORCH_SPEC >"$dir.log" 2>&1; then
            grep -v "is ignored: it is neither a file nor a directory" "$dir.log" >&2
            echo "container-build: pip download $TORCH_SPEC failed" >&2
            exit 1
        fi
        touch "$dir/.complete"
    fi
    echo "$dir"
}

build_base() {
    if image_exists "$BASE_IMAGE"; then
        log "base $BASE_IMAGE is cached"
        return
    fi
    need debootstrap
    local wheel_dir ctr mnt
    wheel_dir=$(wheels)
    ctr=$(buildah_ from scratch)
    WORKING_CONTAINER=$ctr
    trap 'buildah_ rm "$WORKING_CONTAINER" >/dev/null 2>&1 || true' EXIT
    mnt=$(buildah_ mount "$ctr")
    log "debootstrap $SUITE into the base"
    mkdir -p "$CACHE/debs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        --cache-dir="$CACHE/debs" "$SUITE" "$mnt" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
        || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
    rm -rf "$mnt"/var/cache/apt/archives/*.deb "$mnt"/var/lib/apt/lists/*
    buildah_ config --env PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 "$ctr"
    log "installing $TORCH_SPEC into /opt/venv of the base"
    buildah_ run --isolation chroot --volume "$wheel_dir:/wheels:ro" "$ctr" -- sh -euc "
        python3 -m venv /opt/venv
        # shellcheck disable=SC2086
        /opt/venv/bin/pip install --quiet --no-cache-dir --no-index --find-links /wheels $TORCH_SPEC
        /opt/venv/bin/python -c 'import torch, torchvision; print(\"base:\", torch.__version__, torchvision.__version__)'
    "
    buildah_ umount "$ctr" >/dev/null
    buildah_ commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
    trap - EXIT
    log "base $BASE_IMAGE committed"
}

build_site_base() {
    build_base
    local bundle=${HARNESS_CI_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt} ctr
    if image_exists "$SITE_BASE_IMAGE" && [ "$(cat "$CACHE/site-ca.sha256" 2>/dev/null)" = "$(sha256sum <"$bundle")" ]; then
        return
    fi
    ctr=$(buildah_ from --quiet "$BASE_IMAGE")
    buildah_ copy --quiet "$ctr" "$bundle" /etc/ssl/certs/ca-certificates.crt >/dev/null
    buildah_ config --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$ctr"
    buildah_ commit --quiet --rm "$ctr" "$SITE_BASE_IMAGE" >/dev/null
    sha256sum <"$bundle" >"$CACHE/site-ca.sha256"
    log "site base $SITE_BASE_IMAGE committed (host CA bundle)"
}

build_image() {
    build_site_base
    log "building $REPO/Containerfile on $SITE_BASE_IMAGE"
    # --layers: the dependency layer is reused while only the harness's source changes.
    buildah_ bud --isolation chroot --layers --quiet \
        --build-arg "BASE_IMAGE=$SITE_BASE_IMAGE" --build-arg "HARNESS_VERSION=$(version)" \
        --build-arg "VCS_REF=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)" \
        --build-arg "SOURCE_URL=$(git -C "$REPO" remote get-url origin 2>/dev/null || echo unknown)" \
        -f "$REPO/Containerfile" -t "$IMAGE" "$REPO" >/dev/null
    # Images left untagged by earlier builds of other sources: the layers in use stay.
    buildah_ rmi --prune >/dev/null 2>&1 || true
    log "built $IMAGE"
}

version() {
    sed -n 's/^__version__ = "\(.*\)"/\1/p' "$REPO/harness/__init__.py"
}

run_in_image() {
    # run_in_image [--volume H:C]... -- CMD...: a fresh working container of the image, removed after.
    local volumes=() ctr rc=0
    while [ "$1" != "--" ]; do volumes+=("$1"); shift; done
    shift
    # A host name that resolves, as `docker run` gives one (buildah's default, the container ID,
    # is not in /etc/hosts, and torchrun's rendezvous looks its own host name up).
    ctr=$(buildah_ from --quiet --add-host harness-ci:127.0.0.1 "$IMAGE")
    # The image's user, working directory and environment, as `docker run` would apply them.
    local user workdir
    user=$(buildah_ inspect --format '{{.OCIv1.Config.User}}' "$ctr")
    workdir=$(buildah_ inspect --format '{{.OCIv1.Config.WorkingDir}}' "$ctr")
    buildah_ run --isolation chroot --hostname harness-ci --user "${user:-0}" --workingdir "${workdir:-/}" "${volumes[@]}" "$ctr" -- "$@" || rc=$?
    buildah_ rm "$ctr" >/dev/null
    return $rc
}

case "${1:-}" in
    base)
        need buildah; lock; build_base; echo "$BASE_IMAGE" ;;
    image)
        need buildah; lock; build_image; echo "$IMAGE" ;;
    acceptance)
        need buildah
        reports=${2:?usage: $0 acceptance REPORT_DIR [pytest args]}
        shift 2
        lock
        image_exists "$IMAGE" || build_image
        mkdir -p "$reports"
        # The image runs as an unprivileged user: the mounted directory must be writable by it
        # (the documented `docker run --user` / podman --userns=keep-id do the same for a user).
        uid=$(buildah_ inspect --type image --format '{{.OCIv1.Config.User}}' "$IMAGE")
        chown "${uid%%:*}" "$reports"
        # The entrypoint as the image declares it, then the narrowing arguments.
        mapfile -t entrypoint < <(buildah_ inspect --type image --format '{{range .OCIv1.Config.Entrypoint}}{{println .}}{{end}}' "$IMAGE" | sed '/^$/d')
        run_in_image --volume "$(cd "$reports" && pwd):/reports" -- "${entrypoint[@]}" "$@" ;;
    exec)
        need buildah; shift; lock
        image_exists "$IMAGE" || build_image
        run_in_image -- "$@" ;;
    inspect)
        need buildah; lock
        image_exists "$IMAGE" || build_image
        buildah_ inspect --type image "$IMAGE" ;;
    base-exec)
        need buildah; shift; lock; build_base
        ctr=$(buildah_ from --quiet "$BASE_IMAGE")
        rc=0; buildah_ run --isolation chroot "$ctr" -- "$@" || rc=$?
        buildah_ rm "$ctr" >/dev/null; exit $rc ;;
    clean)
        lock
        if command -v buildah >/dev/null && [ -d "$CACHE/storage" ]; then
            buildah_ rm --all >/dev/null 2>&1 || true
            buildah_ rmi --all --force >/dev/null 2>&1 || true
        fi
        rm -rf "$CACHE/storage" "$CACHE/run" "$CACHE/wheels" "$CACHE/debs" ;;
    *)
        sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
