//! Builds the Redisson interop jar (`interop/redisson/`, `mvn package`) once per test
//! process, when it is missing or older than its sources.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// What to do without Java or Maven.
pub const JAVA_HINT: &str =
    "the Redisson interop suite needs Java 17+ and Maven: install them with \
`apt-get install -y openjdk-17-jdk-headless maven` (or run `./scripts/test.sh`, which installs \
them when absent)";

/// The runnable jar, built once per test process when missing or older than its sources.
pub fn jar() -> PathBuf {
    static JAR: OnceLock<PathBuf> = OnceLock::new();
    JAR.get_or_init(|| {
        let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/redisson");
        let jar = project.join("target/redisson-interop.jar");
        let java = Command::new("java").arg("-version").output();
        if !matches!(&java, Ok(out) if out.status.success()) {
            panic!("java does not run ({java:?}); {JAVA_HINT}");
        }
        if modified(&jar) < newest_source(&project) {
            let built = Command::new("mvn")
                .args(["-B", "-q", "package", "-f"])
                .arg(project.join("pom.xml"))
                .output()
                .unwrap_or_else(|e| panic!("cannot run mvn ({e}); {JAVA_HINT}"));
            assert!(
                built.status.success(),
                "building the Redisson interop jar failed:\n{}{}",
                String::from_utf8_lossy(&built.stdout),
                String::from_utf8_lossy(&built.stderr)
            );
        }
        jar
    })
    .clone()
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(UNIX_EPOCH)
}

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = UNIX_EPOCH;
    for entry in std::fs::read_dir(dir)
        .expect("interop/redisson exists")
        .flatten()
    {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "target") {
            continue;
        }
        newest = newest.max(if path.is_dir() {
            newest_source(&path)
        } else {
            modified(&path)
        });
    }
    newest
}
