//! The thread states of a scenario (`--thread-states`): the scheduler's totals (on a CPU,
//! waiting for one), then where the threads were, as the average number of threads in each
//! place, by pool.

use std::collections::BTreeMap;

use crate::threads::{pool_name, ThreadStates, SAMPLE_EVERY};

/// Places shown at most.
const SHOWN: usize = 12;

/// Prints where the host's threads were.
pub(crate) fn thread_states(states: &ThreadStates) {
    let wall = states.wall.as_secs_f64().max(f64::MIN_POSITIVE);
    println!(
        "  threads         on a CPU {:.2} cores, runnable but waiting for a CPU {:.2} threads on average (schedstat, {:.1} s)",
        states.on_cpu.as_secs_f64() / wall,
        states.runqueue.as_secs_f64() / wall,
        wall
    );
    let rounds = states.rounds.max(1) as f64;
    let mut by_place: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (place, count) in &states.places {
        let pool = pool_name(&place.thread);
        let at = match place.state {
            'R' => "R running or runnable".to_owned(),
            state => format!("{state} {} ({})", place.syscall, place.wchan),
        };
        *by_place.entry((pool, at)).or_default() += count;
    }
    let mut places: Vec<_> = by_place.into_iter().collect();
    places.sort_by_key(|place| std::cmp::Reverse(place.1));
    println!(
        "  where           average threads in each place ({} samples, one every {} ms):",
        states.rounds,
        SAMPLE_EVERY.as_millis()
    );
    for ((pool, at), count) in places.iter().take(SHOWN) {
        println!("    {:>6.2}  {pool:<16} {at}", *count as f64 / rounds);
    }
}
