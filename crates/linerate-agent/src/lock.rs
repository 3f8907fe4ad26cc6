//! A lock every file takes the same way: a leaf, so the running flows
//! (`crate::campaign`) and the peers' receivers (`crate::peer`) need not
//! import each other for it.

use std::sync::Mutex;

/// A lock that a panicked holder does not poison for the rest (counts
/// are plain numbers: a half-written update is still numbers).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
