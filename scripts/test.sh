#!/usr/bin/env bash
# Runs the whole test suite against real redis-server processes (started by the tests on
# free loopback ports). Installs redis-server from Debian's packages when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server not found: installing it from Debian's packages (apt-get install redis-server)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
fi
redis-server --version

cargo fmt --all -- --check
# Cargo.toml's rust-version is what the locked dependency tree really needs.
python3 scripts/rust-version.py --check
cargo clippy --all-targets --all-features --quiet -- -D warnings
# Each feature on its own builds cleanly (the engine and the in-memory backend need neither).
for features in "" "redis" "axum" "metrics"; do
  cargo clippy --lib --quiet --no-default-features --features "$features" -- -D warnings
done
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
# The package builds as published (only the library, its docs and the licences).
cargo publish --dry-run --allow-dirty --quiet
cargo test
# The metrics feature's own test (left out of the default features).
cargo test --features metrics --test metrics
# The benchmark's shortened run: it must complete (figures are reported, not judged here).
cargo bench --bench locks -- --quick
