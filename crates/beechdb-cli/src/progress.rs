//! Progress of long work (load, dump, verify): a bar with a total and an ETA on a terminal,
//! otherwise a line on standard error every few seconds, so that a log of a scripted run
//! shows how far it got.
//!
//! Owns: when and how progress is shown. Callers report positions; counting is cheap
//! (a clock is read once every 1,024 steps).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// What the numbers count, for the text.
#[derive(Clone, Copy)]
pub(crate) enum Unit {
    Bytes,
    Records,
    Pages,
}

pub(crate) struct Progress {
    what: String,
    total: Option<u64>,
    unit: Unit,
    done: u64,
    bar: Option<indicatif::ProgressBar>,
    start: Instant,
    next_line: Instant,
    every: Duration,
    steps: u32,
}

impl Progress {
    pub fn new(what: impl Into<String>, total: Option<u64>, unit: Unit) -> Progress {
        let what = what.into();
        let bar = std::io::stderr().is_terminal().then(|| {
            let template = match (total, unit) {
                (Some(_), Unit::Bytes) => {
                    "{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, ETA {eta})"
                }
                (Some(_), Unit::Records | Unit::Pages) => {
                    "{msg} [{bar:30}] {pos}/{len} ({per_sec}, ETA {eta})"
                }
                (None, Unit::Bytes) => "{spinner} {msg} {bytes} ({bytes_per_sec})",
                (None, Unit::Records | Unit::Pages) => "{spinner} {msg} {pos} ({per_sec})",
            };
            let bar = match total {
                Some(t) => indicatif::ProgressBar::new(t),
                None => indicatif::ProgressBar::new_spinner(),
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(what.clone());
            bar
        });
        // Tests shorten the interval to see the lines.
        let every = std::env::var("BEECH_PROGRESS_INTERVAL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Duration::from_secs(10), Duration::from_millis);
        let start = Instant::now();
        Progress {
            what,
            total,
            unit,
            done: 0,
            bar,
            start,
            next_line: start + every,
            every,
            steps: 0,
        }
    }

    /// Moves to position `done`.
    pub fn set(&mut self, done: u64) {
        self.done = done;
        self.steps = self.steps.wrapping_add(1);
        if self.steps.is_multiple_of(1024) {
            self.show();
        }
    }

    /// Moves to position `done` and shows it (for callers that report rarely).
    pub fn update(&mut self, done: u64) {
        self.done = done;
        self.show();
    }

    pub fn inc(&mut self, n: u64) {
        self.set(self.done + n);
    }

    fn show(&mut self) {
        if let Some(bar) = &self.bar {
            bar.set_position(self.done);
            return;
        }
        let now = Instant::now();
        if now < self.next_line {
            return;
        }
        self.next_line = now + self.every;
        let count = |n: u64| match self.unit {
            Unit::Bytes => format!("{:.1} MB", n as f64 / 1e6),
            Unit::Records => format!("{n} records"),
            Unit::Pages => format!("{n} pages"),
        };
        let elapsed = self.start.elapsed().as_secs_f64();
        let line = match self.total.filter(|&t| t > 0) {
            Some(t) => {
                let frac = (self.done as f64 / t as f64).min(1.0);
                let eta = if frac > 0.0 {
                    format!(", ETA {:.0} s", elapsed * (1.0 - frac) / frac)
                } else {
                    String::new()
                };
                format!(
                    "{:.0}% ({} of {}){eta}",
                    frac * 100.0,
                    count(self.done),
                    count(t)
                )
            }
            None => format!("{} in {elapsed:.0} s", count(self.done)),
        };
        eprintln!("beech: {}: {line}", self.what);
    }

    /// Clears the bar (the caller prints its own summary).
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
