#!/usr/bin/env bash
# Regenerates every measurement behind docs/benchmarks.md: JSON records in docs/results/ and
# the printed tables in docs/results/*.md. Needs Berkeley DB 5.3 headers (libdb5.3-dev, and libdb5.3-sql-dev for the SQL benchmarks).
# Takes about 75 minutes on a 2-core machine. Run from the repository root.
set -euo pipefail
out=docs/results
mkdir -p "$out"
cargo build --release -p beechdb-bench --features peers
bench=target/release/beechdb-bench
run() { # name, then benchmark arguments
  local name=$1; shift
  echo "== $name: $*"
  "$bench" kv "$@" --json "$out/$name.json" | tee "$out/$name.md"
}
# Seed 000 Table 3: Data Store, full size; Berkeley DB with its default and with 16 KiB pages.
run ds-table3 --mode ds --runs 5
run ds-table3-bdb16k --mode ds --runs 5 --engines beechdb,bdb --bdb-page-size 16384
# Fetch scaling over two cores, full size (NOSYNC keeps the write phases short).
run tds-fetch-threads --mode tds-nosync --threads 1,2 --runs 5 --engines beechdb,bdb
# Table 4: every TDS configuration, one thread. SYNC costs an fsync per operation, so these
# run 2% of the paper's batches (11,520 records per phase).
run tds-table4 --mode tds --threads 1 --scale 0.02 --runs 5
# Table 5: SYNC commits from 1 to 16 threads (group commit), same size.
run tds-table5 --mode tds-sync --threads 1,2,3,4,8,12,16 --engines beechdb,bdb --scale 0.02 --runs 5
# Table 5, NOSYNC: commits from 1 to 16 threads.
run tds-nosync-threads --mode tds-nosync --threads 1,2,3,4,8,12,16 --engines beechdb,bdb --scale 0.02 --runs 5
# Cheap durability over 4 threads (the weakness group commit's polling waits fixed).
run tds-cheap-4threads --mode tds-write-nosync,tds-tmpfs-sync --threads 4 --engines beechdb,bdb --scale 0.02 --runs 5
# Seed 004, TPC-B (Table 6) and Wisconsin (Table 7): one C program on BeechDB's libsqlite3,
# SQLite (journal and WAL) and Berkeley DB SQL (libdb5.3-sql-dev), and BeechDB's Rust API;
# the plots of TPS against threads go to docs/. About 25 minutes.
echo "== sql-bench"
"$bench" sql --seconds 5 --runs 3 --wisconsin-tuples 10000 --wisconsin-runs 10 \
  --json "$out/sql-bench.json" --plots docs | tee "$out/sql-bench.md"
