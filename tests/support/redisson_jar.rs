//! Builds the interop jars (`interop/redisson/`, `interop/curator/`: `mvn package`) once
//! per test process, when missing or older than their sources.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// What to do without Java or Maven.
pub const JAVA_HINT: &str =
    "the Redisson interop suite needs Java 17+ and Maven: install them with \
`apt-get install -y openjdk-17-jdk-headless maven` (or run `./scripts/test.sh`, which installs \
them when absent)";

/// The runnable Redisson jar, built once per test process when missing or older than its
/// sources.
pub fn jar() -> PathBuf {
    built("redisson", "redisson-interop.jar", JAVA_HINT)
}

/// The runnable jar `jar` of the Maven project `interop/<project>/`, built (`mvn package`)
/// once per test process when missing or older than its sources.
pub fn built(project: &str, jar: &str, hint: &str) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = built.iter().find(|(name, _)| name == project) {
        return path.clone();
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("interop")
        .join(project);
    let path = dir.join("target").join(jar);
    let java = Command::new("java").arg("-version").output();
    if !matches!(&java, Ok(out) if out.status.success()) {
        panic!("java does not run ({java:?}); {hint}");
    }
    if modified(&path) < newest_source(&dir) {
        let output = Command::new("mvn")
            .args(["-B", "-q", "package", "-f"])
            .arg(dir.join("pom.xml"))
            .output()
            .unwrap_or_else(|e| panic!("cannot run mvn ({e}); {hint}"));
        assert!(
            output.status.success(),
            "building interop/{project} failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    built.push((project.to_owned(), path.clone()));
    path
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(UNIX_EPOCH)
}

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = UNIX_EPOCH;
    for entry in std::fs::read_dir(dir)
        .expect("the interop project exists")
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
