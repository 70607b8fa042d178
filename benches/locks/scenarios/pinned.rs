//! S4c's setup: this process on one core and redis-server on another, with `taskset`.

use std::process::Command;

use fred::prelude::*;

/// This process pinned to one core and redis-server to another (with `taskset`), each
/// given back its own cores when dropped.
pub(super) struct Pinned {
    /// Each process and its affinity mask before.
    before: Vec<(u32, String)>,
}

impl Pinned {
    pub(super) async fn apply(client: &Client) -> Result<Pinned, String> {
        let info: String = client
            .info(Some(fred::types::InfoKind::Server))
            .await
            .map_err(|e| format!("INFO server: {e}"))?;
        let redis_pid = info
            .lines()
            .find_map(|line| line.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
            .ok_or("no process_id in INFO server")?;
        let own_pid = std::process::id();
        let own_mask = affinity(own_pid)?;
        // The first two cores this process may run on.
        let mask = u128::from_str_radix(&own_mask, 16)
            .map_err(|_| format!("an affinity mask of more than 128 cores: {own_mask}"))?;
        let cores: Vec<u32> = (0..128).filter(|core| mask & (1 << core) != 0).collect();
        let [service, redis, ..] = cores[..] else {
            return Err(format!("{} core", cores.len()));
        };
        let pinned = Pinned {
            before: vec![(own_pid, own_mask), (redis_pid, affinity(redis_pid)?)],
        };
        taskset(&["-c", &service.to_string()], own_pid)?;
        taskset(&["-c", &redis.to_string()], redis_pid)?;
        Ok(pinned)
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        for (pid, mask) in &self.before {
            let _ = taskset(&[mask], *pid);
        }
    }
}

/// The affinity mask of `pid` (hexadecimal, as `taskset` prints it).
fn affinity(pid: u32) -> Result<String, String> {
    let text = run_taskset(&["-p", &pid.to_string()])?;
    // "pid 123's current affinity mask: 3"
    text.rsplit(' ')
        .next()
        .map(|mask| mask.trim().to_owned())
        .filter(|mask| !mask.is_empty())
        .ok_or_else(|| format!("unexpected taskset output: {text}"))
}

/// Sets the cores (`-c LIST` or a mask) of every thread of `pid`.
fn taskset(cores: &[&str], pid: u32) -> Result<(), String> {
    let pid = pid.to_string();
    let mut args = vec!["-a", "-p"];
    args.extend_from_slice(cores);
    args.push(&pid);
    run_taskset(&args).map(drop)
}

fn run_taskset(args: &[&str]) -> Result<String, String> {
    let output = Command::new("taskset")
        .args(args)
        .output()
        .map_err(|e| format!("taskset (util-linux) not available: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(format!(
            "taskset failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}
