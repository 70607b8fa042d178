//! A semaphore's permits: their usage as a backend reports it ([`PermitUsage`]), and their
//! ids, 16 bytes each (Redisson's `RPermitExpirableSemaphore` members since 3.17), derived
//! from the owner of the acquisition, so that the guard, the watchdog, a re-sent command and
//! a background release all name the same permits without storing them.

use uuid::Uuid;

use crate::key::OwnerId;

/// The namespace of the name-based ids (a fixed random UUID of tower-lock's).
const NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2b9e_4d0a_4f55_9a3e_7c21_d8b4_e013);

/// The ids of the `count` permits that `owner` holds (or asks for): distinct for every
/// owner and index, as owner ids are unique (they start with the manager's random id).
pub(crate) fn permit_ids(owner: &OwnerId, count: u32) -> impl Iterator<Item = [u8; 16]> + '_ {
    (0..count).map(move |index| {
        let mut name = Vec::with_capacity(owner.as_bytes().len() + 11);
        name.extend_from_slice(owner.as_bytes());
        name.push(b'/');
        name.extend_from_slice(itoa::Buffer::new().format(index).as_bytes());
        Uuid::new_v5(&NAMESPACE, &name).into_bytes()
    })
}

/// [`permit_ids`] as Redisson shows them: 32 lowercase hex digits each.
pub(crate) fn permit_ids_hex(owner: &OwnerId, count: u32) -> Vec<String> {
    permit_ids(owner, count)
        .map(|id| Uuid::from_bytes(id).simple().to_string())
        .collect()
}

/// A semaphore's permits now, as the backend sees them (see
/// [`LockManager::semaphore_usage`](crate::LockManager::semaphore_usage)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitUsage {
    /// The limit in force (available and held permits together), or `None` when the name
    /// was never used (its first acquisition sets it).
    pub limit: Option<u32>,
    /// Permits held now with a lease that has not ended.
    pub in_use: u32,
}

impl PermitUsage {
    /// A name's usage: `limit` (`None`: never set) and the permits in use.
    pub fn new(limit: Option<u32>, in_use: u32) -> Self {
        PermitUsage { limit, in_use }
    }

    /// Permits that an acquisition could take now (0 while the limit was lowered under
    /// the permits still held).
    pub fn available(&self) -> u32 {
        self.limit.unwrap_or(0).saturating_sub(self.in_use)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_per_owner_and_distinct_between_owners_and_permits() {
        let a = OwnerId::from_raw("7a6c0e1e-0000-4000-8000-000000000001:1");
        let b = OwnerId::from_raw("7a6c0e1e-0000-4000-8000-000000000001:2");
        let first: Vec<_> = permit_ids(&a, 3).collect();
        assert_eq!(first, permit_ids(&a, 3).collect::<Vec<_>>());
        let mut all: Vec<_> = first
            .iter()
            .chain(&permit_ids(&b, 3).collect::<Vec<_>>())
            .copied()
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 6);
        let hex = permit_ids_hex(&a, 1);
        assert_eq!(hex[0].len(), 32);
        assert!(hex[0]
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }
}
