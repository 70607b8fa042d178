//! CPU time, to split a request's cost between this process and redis-server.
//!
//! On two shared cores, redis-server's CPU time is taken from the service's: S4b reports
//! both per request so that a reader can see where a throughput ratio comes from.

use std::time::Duration;

use fred::prelude::*;

/// CPU time used by this process and by redis-server, each when known.
#[derive(Clone, Copy)]
pub struct CpuTime {
    pub process: Option<Duration>,
    pub redis: Option<Duration>,
}

impl CpuTime {
    /// None used yet.
    pub const ZERO: CpuTime = CpuTime {
        process: Some(Duration::ZERO),
        redis: Some(Duration::ZERO),
    };

    /// Used so far; redis-server's from `INFO cpu` through `client`.
    pub async fn now(client: &Client) -> CpuTime {
        CpuTime {
            redis: redis_cpu(client).await,
            process: process_cpu(),
        }
    }

    /// The time used since `earlier`.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        let delta =
            |now: Option<Duration>, then: Option<Duration>| Some(now?.saturating_sub(then?));
        CpuTime {
            process: delta(self.process, earlier.process),
            redis: delta(self.redis, earlier.redis),
        }
    }

    /// The sum of both (each unknown if either is).
    pub fn add(self, other: CpuTime) -> CpuTime {
        let sum = |a: Option<Duration>, b: Option<Duration>| Some(a? + b?);
        CpuTime {
            process: sum(self.process, other.process),
            redis: sum(self.redis, other.redis),
        }
    }
}

/// This process's CPU time: the sum over its threads of their time on a CPU (Linux's
/// `/proc/self/task/*/schedstat`, in nanoseconds; threads that already ended are missed).
fn process_cpu() -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

/// redis-server's CPU time (user + system, main thread and others), from `INFO cpu`.
async fn redis_cpu(client: &Client) -> Option<Duration> {
    let info: String = client.info(Some(fred::types::InfoKind::Cpu)).await.ok()?;
    let seconds = |field: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|value| value.trim().parse::<f64>().ok())
    };
    Some(Duration::from_secs_f64(
        seconds("used_cpu_user:")? + seconds("used_cpu_sys:")?,
    ))
}
