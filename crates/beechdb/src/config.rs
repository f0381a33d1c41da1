//! Environment configuration.

use crate::error::{Error, Result};

/// Smallest page size accepted.
pub const MIN_PAGE_SIZE: usize = 4096;
/// Largest page size accepted.
pub const MAX_PAGE_SIZE: usize = 65536;
/// Page size of a new environment unless configured otherwise.
pub const DEFAULT_PAGE_SIZE: usize = 16384;
/// Cache size unless configured otherwise: 64 MiB.
pub const DEFAULT_CACHE_SIZE: usize = 64 << 20;
/// The cache never holds fewer pages than this, whatever its configured size: an operation
/// needs a root-to-leaf path and a few siblings resident at once.
pub const MIN_CACHE_PAGES: usize = 16;

pub(crate) fn valid_page_size(s: usize) -> bool {
    s.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&s)
}

/// How to open an environment.
///
/// ```
/// let cfg = beechdb::Config::new().page_size(4096).cache_size(8 << 20);
/// assert_eq!(cfg.page_size_value(), 4096);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    page_size: usize,
    cache_size: usize,
    create: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            page_size: DEFAULT_PAGE_SIZE,
            cache_size: DEFAULT_CACHE_SIZE,
            create: true,
        }
    }
}

impl Config {
    /// The defaults: 16 KiB pages, a 64 MiB cache, create the environment if missing.
    pub fn new() -> Config {
        Config::default()
    }
    /// Page size for a new environment: a power of two from 4 KiB to 64 KiB. An existing
    /// environment keeps the page size it was created with.
    pub fn page_size(mut self, bytes: usize) -> Config {
        self.page_size = bytes;
        self
    }
    /// Cache budget in bytes (page images held in memory).
    pub fn cache_size(mut self, bytes: usize) -> Config {
        self.cache_size = bytes;
        self
    }
    /// Whether opening a missing environment creates it (default true).
    pub fn create(mut self, create: bool) -> Config {
        self.create = create;
        self
    }
    /// The configured page size.
    pub fn page_size_value(&self) -> usize {
        self.page_size
    }
    pub(crate) fn cache_size_value(&self) -> usize {
        self.cache_size
    }
    pub(crate) fn create_value(&self) -> bool {
        self.create
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if !valid_page_size(self.page_size) {
            return Err(Error::InvalidArgument(format!(
                "page size {} is not a power of two between {MIN_PAGE_SIZE} and {MAX_PAGE_SIZE}",
                self.page_size
            )));
        }
        Ok(())
    }
}
