//! W1's way of measuring: one task, lock + unlock pairs timed one by one, the contenders
//! taking turns a block of pairs each rather than one after the other, so that what else
//! the machine does at any moment weighs on all of them alike and the ratios between them
//! hold even when the absolute figures drift.
//!
//! Each contender has a runtime of its own, of the flavour measured, with nothing on it but
//! its own connections and tasks: the raw floor's runtime has none of the library's
//! background tasks (nor their timers, which change how a multi-thread runtime hands work
//! between its threads), and no contender pays for another's background work.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use tokio::runtime::Runtime;

use crate::common::runtime::{shut_down, Flavour};
use crate::common::stats::{Counters, Figures};

/// One lock + unlock of a contender.
pub type PairFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A lock's pair (`RLock`, `RedLock`, rslock's manager), as a boxed future made anew on
/// each call.
pub fn pair_of<L: Send + Sync + 'static>(
    lock: L,
    pair: fn(std::sync::Arc<L>) -> PairFuture,
) -> impl FnMut() -> PairFuture + Send + 'static {
    let lock = std::sync::Arc::new(lock);
    move || pair(lock.clone())
}

/// Makes a contender's next pair.
pub type Pair = Box<dyn FnMut() -> PairFuture + Send>;

/// Pairs of consecutive contenders run in blocks of this many, in turn.
pub const BLOCK: usize = 100;

/// A contender of W1 (or of W5's W1).
pub struct Contender {
    /// Short, for `CONTENDERS` and the JSON lines.
    pub id: &'static str,
    pub name: &'static str,
    pub pair: Pair,
}

impl Contender {
    pub fn new(
        id: &'static str,
        name: &'static str,
        pair: impl FnMut() -> PairFuture + Send + 'static,
    ) -> Contender {
        Contender {
            id,
            name,
            pair: Box::new(pair),
        }
    }
}

/// A contender on its own runtime, where it was made.
pub struct Placed {
    runtime: Runtime,
    id: &'static str,
    name: &'static str,
    /// Taken out while a block runs on the runtime.
    pair: Option<Pair>,
}

/// Makes a contender with `make` on a fresh runtime of `flavour`.
pub fn place<F>(flavour: Flavour, make: F) -> Placed
where
    F: Future<Output = Contender> + Send + 'static,
{
    let runtime = flavour.runtime();
    let contender = flavour.run(&runtime, make);
    Placed {
        runtime,
        id: contender.id,
        name: contender.name,
        pair: Some(contender.pair),
    }
}

/// Runs `pairs` pairs one after the other; returns the pair maker and each pair's time, µs.
async fn block(mut pair: Pair, pairs: usize) -> (Pair, Vec<f64>) {
    let mut micros = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        let started = Instant::now();
        pair().await;
        micros.push(started.elapsed().as_secs_f64() * 1e6);
    }
    (pair, micros)
}

impl Placed {
    /// Runs a block of `pairs` pairs on the contender's runtime, as `flavour` runs work.
    fn run_block(&mut self, flavour: Flavour, pairs: usize) -> Vec<f64> {
        let pair = self
            .pair
            .take()
            .expect("a contender runs one block at a time");
        let (pair, micros) = flavour.run(&self.runtime, block(pair, pairs));
        self.pair = Some(pair);
        micros
    }
}

/// Runs `warmup` untimed pairs of each contender, then `pairs` timed ones in turns of
/// [`BLOCK`] (rounded up to whole blocks); counts CPU, context switches and worker
/// wake-ups around each block. Shuts the contenders' runtimes down.
pub fn interleaved(
    flavour: Flavour,
    mut contenders: Vec<Placed>,
    warmup: usize,
    pairs: usize,
) -> Vec<Figures> {
    for contender in &mut contenders {
        contender.run_block(flavour, warmup);
    }
    let mut figures: Vec<Figures> = contenders
        .iter()
        .map(|c| Figures::new(c.id, c.name, pairs))
        .collect();
    for _ in 0..pairs.div_ceil(BLOCK) {
        for (contender, figures) in contenders.iter_mut().zip(&mut figures) {
            let before = Counters::now();
            let micros = contender.run_block(flavour, BLOCK);
            figures.counters.add(Counters::since(before));
            figures.micros.extend(micros);
        }
    }
    for contender in contenders {
        shut_down(contender.runtime);
    }
    for figures in &mut figures {
        figures.finish();
    }
    figures
}
