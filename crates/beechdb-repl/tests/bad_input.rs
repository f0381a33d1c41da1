//! Damaged input where replication reads it from outside: frames on a connection, a
//! member's log file, the pages of a copy of an environment arriving from a master. Random bytes and mutations of
//! well-formed headers give typed errors, never a panic (the fuzz target
//! `replication_input` runs the same entry points for longer).

use beechdb_repl::fuzzing::{open_log, read_frame, receive_copy};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn damaged_frames_logs_and_copies_are_refused_without_panic() {
    let mut rng = StdRng::seed_from_u64(11);
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3000 {
        let len = rng.gen_range(0..200);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        // A third of the inputs are frames whose header and checksum are right: the
        // payload decoder itself must refuse them.
        if i % 3 == 0 {
            bytes = frame(&bytes);
        }
        assert!(read_frame(&bytes).is_err() || bytes.len() >= 8);
        let log_dir = dir.path().join(format!("log{i}"));
        std::fs::create_dir_all(&log_dir).unwrap();
        // Garbage is a torn tail (an empty log); a whole frame that does not decode is
        // damage, reported.
        match open_log(&log_dir, &bytes) {
            Ok(()) => {}
            Err(beechdb::Error::Corrupt { .. }) if i % 3 == 0 => {}
            Err(e) => panic!("input {i}: {e}"),
        }
        let _ = receive_copy(&bytes, &dir.path().join(format!("copy{i}")));
    }
    // Frames that claim more than the limit are refused before anything is allocated.
    let mut huge = u32::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(&[0; 12]);
    assert!(read_frame(&huge).is_err());
    // A payload announcing a vector of 2^60 elements does not allocate it.
    let mut greedy = vec![3u8, 0, 0, 0];
    greedy.extend_from_slice(&(1u64 << 60).to_le_bytes());
    assert!(read_frame(&frame(&greedy)).is_err());
}
