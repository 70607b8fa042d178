//! A lockable order number, as the tests' handlers use it.

use tower_lock::extract::{KeySource, Lockable};

/// An order number from the path parameter `orderId`; its lock is `order:<n>`. Its parse
/// error quotes the value, as most do.
#[derive(Debug)]
pub struct OrderId(pub u64);

impl Lockable for OrderId {
    fn source() -> KeySource {
        KeySource::path("orderId")
    }
    fn parse(raw: &str) -> Result<Self, String> {
        raw.parse()
            .map(OrderId)
            .map_err(|_| format!("`{raw}` is not an order number"))
    }
    fn lock_name(&self) -> String {
        format!("order:{}", self.0)
    }
}
