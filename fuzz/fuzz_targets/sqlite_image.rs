//! Any bytes as a `sqlite3_deserialize` image: decoded or refused with a reason, never a
//! panic or an allocation a count asked for without the bytes to back it. Each input is
//! tried as given and with a correct checksum appended, so that the decoder's structure,
//! not only its checksum, is explored.
#![no_main]

use beechdb_sqlite3::check_image;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = check_image(data);
    let mut sealed = data.to_vec();
    sealed.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
    let _ = check_image(&sealed);
});
