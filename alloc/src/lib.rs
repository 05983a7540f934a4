//! The memory allocator of the Ebb server: mimalloc, which measured faster than the system's
//! (glibc's) on Ebb's write path (`cargo bench --bench allocator`), unless the environment
//! variable `EBB_ALLOCATOR` is `system` when the process starts, which keeps the system's
//! allocator (for measuring one against the other in the same build, and as a way out should
//! mimalloc misbehave somewhere).
//!
//! The choice is made at the first allocation, before `main`, and never changes: memory is
//! always freed by the allocator that gave it. The variable is read with `getenv`, which does
//! not allocate.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

/// Not chosen yet.
const UNDECIDED: u8 = 0;
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;

static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The allocator: mimalloc, or the system's (see the crate's documentation).
pub struct Allocator;

impl Allocator {
    /// The name of the allocator in use: `"mimalloc"` or `"system"`.
    #[must_use]
    pub fn name() -> &'static str {
        match choice() {
            SYSTEM => "system",
            _ => "mimalloc",
        }
    }
}

fn choice() -> u8 {
    match CHOICE.load(Ordering::Relaxed) {
        UNDECIDED => decide(),
        chosen => chosen,
    }
}

#[cold]
fn decide() -> u8 {
    // SAFETY: `getenv` is given a NUL-terminated name; it returns NULL or a pointer to a
    // NUL-terminated value in the environment, read before any thread could change it (the
    // first allocation happens while the process starts, on its one thread).
    let value = unsafe { libc::getenv(c"EBB_ALLOCATOR".as_ptr()) };
    let wanted = if value.is_null() {
        MIMALLOC
    } else {
        // SAFETY: non-null, so a NUL-terminated string (see above).
        let value = unsafe { std::ffi::CStr::from_ptr(value) };
        if value.to_bytes() == b"system" {
            SYSTEM
        } else {
            MIMALLOC
        }
    };
    match CHOICE.compare_exchange(UNDECIDED, wanted, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => wanted,
        Err(chosen) => chosen,
    }
}

// SAFETY: every call is forwarded to one of two allocators that uphold `GlobalAlloc`'s
// contract, always the same one (the choice never changes once made), so a block is freed or
// resized by the allocator that gave it.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees are passed on unchanged.
        unsafe {
            match choice() {
                SYSTEM => System.alloc(layout),
                _ => mimalloc::MiMalloc.alloc(layout),
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe {
            match choice() {
                SYSTEM => System.alloc_zeroed(layout),
                _ => mimalloc::MiMalloc.alloc_zeroed(layout),
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, hence from the one chosen.
        unsafe {
            match choice() {
                SYSTEM => System.dealloc(ptr, layout),
                _ => mimalloc::MiMalloc.dealloc(ptr, layout),
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`.
        unsafe {
            match choice() {
                SYSTEM => System.realloc(ptr, layout, new_size),
                _ => mimalloc::MiMalloc.realloc(ptr, layout, new_size),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_is_made_once_and_serves_every_size() {
        let name = Allocator::name();
        assert!(name == "mimalloc" || name == "system");
        assert_eq!(Allocator::name(), name);
        // Blocks of several sizes and alignments, grown and freed, through the chosen one.
        for size in [1_usize, 24, 4096, 1 << 20] {
            let layout = Layout::from_size_align(size, 64).expect("a valid layout");
            // SAFETY: a non-zero size; the block is freed with the layout it was made with.
            unsafe {
                let p = Allocator.alloc_zeroed(layout);
                assert!(!p.is_null());
                assert_eq!(p.align_offset(64), 0);
                assert_eq!(*p, 0);
                let q = Allocator.realloc(p, layout, size * 2);
                assert!(!q.is_null());
                Allocator.dealloc(q, Layout::from_size_align(size * 2, 64).expect("valid"));
            }
        }
    }
}
