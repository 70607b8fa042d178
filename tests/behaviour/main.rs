//! The conformance suite (`tower_lock::conformance`) on every backend of this crate: the
//! in-memory backend, one Redis, the local Redis Cluster, a master found through Sentinel,
//! RedLock over three servers, PostgreSQL, ZooKeeper and MariaDB (by subject:
//! `redis::exclusion::mutual_exclusion`, …).
//! Checks that need what a backend does not have pass saying so. Beside them, what only
//! Redis shows: Redisson's layouts, subscriptions given up, batching, listings.

#[path = "../support/mod.rs"]
mod support;

mod layouts;
mod listing;

mod memory {
    tower_lock::conformance_suite!(tower_lock::conformance::Memory::new());
}

mod redis {
    tower_lock::conformance_suite!(crate::support::subjects::redis());
}

mod cluster {
    tower_lock::conformance_suite!(crate::support::subjects::cluster());
}

mod sentinel {
    tower_lock::conformance_suite!(crate::support::subjects::sentinel());
}

mod redlock {
    tower_lock::conformance_suite!(crate::support::subjects::redlock());
}

mod postgres {
    tower_lock::conformance_suite!(crate::support::subjects::postgres());
}

mod zookeeper {
    tower_lock::conformance_suite!(crate::support::subjects::zookeeper());
}

mod mysql {
    tower_lock::conformance_suite!(crate::support::subjects::mysql());
}
