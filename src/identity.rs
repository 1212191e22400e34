//! Stable identities for findings and plan actions: a prefix and a short hash of the parts
//! that say what the thing is about, never of row numbers or run times.

use sha2::{Digest, Sha256};

pub fn stable_id<'a>(prefix: &str, parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prefix.as_bytes());
    for part in parts {
        hasher.update([0]);
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{prefix}-{hex}")
}
