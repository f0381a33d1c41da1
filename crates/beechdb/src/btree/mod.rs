//! B+tree: nodes (slotted pages), search, insert with splits, delete with merges, overflow
//! values and cursor positioning.
//!
//! Owns: the tree algorithms, as methods of the engine. May call: `engine` for pages and
//! allocation, `storage::page` for headers. Invariants: all leaves are at the same depth;
//! every key in the subtree of branch child `i` lies in `[key(i-1), key(i))`; a page is
//! modified only after `make_writable` relocated it off the durable checkpoint.

pub(crate) mod cursor;
pub(crate) mod node;
mod overflow;
mod tree;

pub use cursor::{Cursor, Iter, KeyRange};
pub(crate) use tree::{check_sizes, Seek, MAX_KEY_LEN, MAX_VALUE_LEN_USIZE};
