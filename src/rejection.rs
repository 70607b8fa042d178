//! What the layer and the extractors answer when a request does not get its lock: one
//! [`LockRejection`] per cause, each with its status, its `Retry-After` where one helps, and
//! a message that names the fix.
//!
//! ```
//! use http::StatusCode;
//! use tower_lock::rejection::LockRejection;
//!
//! let rejection = LockRejection::NoManager;
//! assert_eq!(rejection.status(), StatusCode::INTERNAL_SERVER_ERROR);
//! assert!(rejection.body_text().contains("LockManager"));
//! ```

pub use crate::http::{LockRejection, DEFAULT_BUSY_RETRY_AFTER, SHOWN_CHARS};
