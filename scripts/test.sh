#!/usr/bin/env bash
# Runs the whole test suite against real redis-server, PostgreSQL, ZooKeeper and MariaDB
# processes (started by the tests on free loopback ports) and, for the interop suites, the
# real Redisson and Curator (Java). Installs what is absent from Debian's packages:
# redis-server, PostgreSQL, ZooKeeper, MariaDB, a headless JDK and Maven.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
{ command -v java && command -v javac; } >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
# PostgreSQL for its backend's tests (Debian keeps initdb off PATH).
{ command -v initdb || compgen -G "/usr/lib/postgresql/*/bin/initdb"; } >/dev/null 2>&1 \
  || missing+=(postgresql)
# ZooKeeper for its backend's tests (the server's jars; the tests start it with java).
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
# MariaDB for the MySQL backend's tests (the tests start their own mariadbd).
{ command -v mariadbd || [ -x /usr/sbin/mariadbd ]; } >/dev/null 2>&1 || missing+=(mariadb-server)
if [ ${#missing[@]} -gt 0 ]; then
  echo "not found: installing ${missing[*]} from Debian's packages"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
redis-server --version
java -version 2>&1 | head -1

# The interop suites' clients, Redisson's and Curator's: one runnable jar each (Maven caches
# downloads in ~/.m2).
started=$(date +%s)
mvn -B -q -f interop/redisson/pom.xml package
mvn -B -q -f interop/curator/pom.xml package
echo "Redisson and Curator interop jars built in $(( $(date +%s) - started )) s"

# A run from a clean checkout gains nothing from incremental caches, which would double the
# disk the build takes (CI's machine has little to spare).
export CARGO_INCREMENTAL=0

cargo fmt --all -- --check
# No two files of src/ reach each other through their imports.
python3 scripts/import-cycles.py src
# Cargo.toml's rust-version is what the locked dependency tree really needs.
python3 scripts/rust-version.py --check
cargo clippy --all-targets --all-features --quiet -- -D warnings
# Each feature on its own builds cleanly (the engine and the in-memory backend need neither).
for features in "" "redis" "axum" "idempotency" "metrics" "conformance" "postgres" "zookeeper" "mysql" "coalesce"; do
  cargo clippy --lib --quiet --no-default-features --features "$features" -- -D warnings
done
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
# The package builds as published (only the library, its docs and the licences).
cargo publish --dry-run --allow-dirty --quiet
# Every test, with the features the tests ask for. (`cargo test --no-default-features` would
# run the very same binaries again: the tests' dependency on this crate turns its default
# features on; the feature loop above checks that each feature builds on its own.)
cargo test
# The metrics feature's own test (left out of the default features).
cargo test --features metrics --test metrics
# The benchmark's shortened run: it must complete (figures are reported, not judged here).
cargo bench --bench locks -- --quick
