//! Any bytes as `beech load` input: sections and pairs, or a typed error; never a panic.
#![no_main]

use beechdb::dump::DumpReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = DumpReader::new(data);
    while let Ok(Some(_)) = r.next_section() {
        loop {
            match r.next_pair() {
                Ok(Some(_)) => {}
                _ => break,
            }
        }
    }
});
