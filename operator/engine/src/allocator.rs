//! The process allocator of the `sluice` binary and the engine's profiles: mimalloc, asked for memory the way the
//! engine's many small vectors need it.
//!
//! The `mimalloc` crate's allocator sends every request through mimalloc's aligned entry points, which check the
//! alignment on each call (about a third of the engine's allocation instructions under callgrind). Every
//! mimalloc block is at least 8-byte aligned (size classes are multiples of 8 and pages start aligned), so requests
//! aligned to 8 or less go straight to `mi_malloc`; stricter ones keep the aligned calls.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// Alignment every mimalloc block has.
const BLOCK_ALIGN: usize = 8;

/// mimalloc as the global allocator (`#[global_allocator] static A: Allocator = Allocator;`).
pub struct Allocator;

// SAFETY: every pointer returned comes from mimalloc with at least the layout's alignment (plain calls only where
// every block has it), and mimalloc frees and reallocates any of its blocks whatever call made them.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation calls have no preconditions beyond a valid alignment, which Layout ensures.
        unsafe {
            if layout.align() <= BLOCK_ALIGN {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if layout.align() <= BLOCK_ALIGN {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: the caller passes a block this allocator returned, i.e. one of mimalloc's.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` is one of mimalloc's blocks; the new block keeps the layout's alignment as in `alloc`.
        unsafe {
            if layout.align() <= BLOCK_ALIGN {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every small size and of the alignments Rust asks for come back aligned, zeroed when asked, and
    /// keep their bytes through a reallocation.
    #[test]
    fn blocks_have_the_layouts_alignment() {
        let a = Allocator;
        for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
            for size in (1..=300).chain([1 << 12, 1 << 16, 1 << 20]) {
                let layout = Layout::from_size_align(size, align).expect("valid layout");
                // SAFETY: non-zero sizes; every block is freed with the allocator that made it.
                unsafe {
                    let p = a.alloc_zeroed(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    assert!((0..size).all(|i| *p.add(i) == 0));
                    p.write_bytes(0xab, size);
                    let q = a.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "realloc size {size} align {align}");
                    assert!((0..size).all(|i| *q.add(i) == 0xab));
                    a.dealloc(q, Layout::from_size_align(size * 3, align).expect("valid"));
                }
            }
        }
    }
}
