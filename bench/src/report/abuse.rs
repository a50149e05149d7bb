//! The abuse scenario's report: each attack's heading, then the host's memory, `/healthz`,
//! what the attack saw (the chat's ending and what was stored, or the connections held) and
//! the goal.

use std::time::Duration;

use super::format::{mib, ms};
use super::percentiles::percentiles;
use crate::{
    abuse::{self, Attack, Finding, Phase},
    client::Ending,
    host::ABUSE_HEADER_READ_TIMEOUT_SECS,
    upstream::{FLOOD_CALLS, FLOOD_FILE, HUGE_LINE_BYTES},
    watch::PROBE_TIMEOUT,
};

/// The abuse goal: the host's peak stays under its idle RSS plus this, in bytes.
const ABUSE_MEMORY_HEADROOM: u64 = 64 << 20;
/// The abuse goal: `/healthz` p99 stays under this.
const ABUSE_HEALTHZ_P99: Duration = Duration::from_millis(50);

/// The heading of an attack, before it runs.
pub(crate) fn attack(attack: Attack) {
    println!("{}", describe_attack(attack));
}

/// One attack of the abuse scenario: memory, `/healthz`, what the attack saw, the goal.
pub(crate) fn abuse(phase: &Phase) {
    println!("  took            {:.2} s", phase.elapsed.as_secs_f64());
    let growth = phase.peak_rss.saturating_sub(phase.idle_rss);
    println!(
        "  host RSS        idle {}, peak {} (+{})",
        mib(phase.idle_rss),
        mib(phase.peak_rss),
        mib(growth)
    );
    let (probes, failed) = &phase.healthz;
    let health = percentiles(probes.clone());
    println!(
        "  /healthz        p50 {}  p99 {}  max {}  ({} answered, {failed} failed; one every {})",
        ms(health.p50),
        ms(health.p99),
        ms(health.max),
        probes.len(),
        ms(abuse::PROBE_EVERY)
    );
    match &phase.finding {
        Finding::Chat { ending, stored } => chat_ending(ending, stored.as_ref()),
        Finding::Heads(heads) => {
            println!(
                "  connections     {} opened in {:.2} s, {} failed{}",
                heads.opened,
                heads.opening.as_secs_f64(),
                heads.failed.0,
                heads
                    .failed
                    .1
                    .as_ref()
                    .map_or(String::new(), |e| format!(" (first: {e})"))
            );
            println!(
                "  after the hold  {} closed by the server, {} answered by it, {} still open",
                heads.closed,
                heads.answered,
                heads.opened - heads.closed
            );
        }
    }
    if let Some(log) = &phase.host_died {
        println!("  the host DIED during the attack\n{log}");
    }
    abuse_goal(phase);
}

fn describe_attack(attack: Attack) -> String {
    match attack {
        Attack::ToolFlood => format!(
            "abuse: tool-call flood: one turn of {FLOOD_CALLS} get_text_content calls on {FLOOD_FILE} ({:.1} MB; paths spelt ./ .// apart), then a text answer",
            abuse::FLOOD_FILE_BYTES as f64 / 1e6
        ),
        Attack::HugeLine => format!(
            "abuse: huge line: the upstream answers with one SSE data: line of {:.0} MB (its content), written in 64 KiB pieces",
            HUGE_LINE_BYTES as f64 / 1e6
        ),
        Attack::PartialHeads => format!(
            "abuse: partial heads: {} connections send {:?} and then nothing, held {} s once open (header_read_timeout_secs = {ABUSE_HEADER_READ_TIMEOUT_SECS}); /healthz from fresh connections",
            abuse::CONNECTIONS,
            String::from_utf8_lossy(abuse::PARTIAL_HEAD),
            abuse::HOLD.as_secs()
        ),
    }
}

fn chat_ending(ending: &Ending, stored: Option<&Result<abuse::Stored, String>>) {
    println!(
        "  chat            DONE {}; {} TOOL_CALL, TOOL_RESULT {} ok / {} errors; CHAT text {}; NDJSON {}",
        ending.stop_reason.as_deref().unwrap_or("never came"),
        ending.tool_calls,
        ending.results.0,
        ending.results.1,
        if ending.chat_bytes < 1 << 20 {
            format!("{} bytes", ending.chat_bytes)
        } else {
            mib(ending.chat_bytes)
        },
        mib(ending.body_bytes)
    );
    for error in &ending.errors {
        println!("    ERROR event: {error}");
    }
    if let Some(problem) = &ending.problem {
        println!("    stream problem: {problem}");
    }
    match stored {
        Some(Ok(s)) => println!(
            "  stored          GET /conversations/{{id}}: {} in {} message(s), {} page(s)",
            mib(s.bytes),
            s.messages,
            s.pages
        ),
        Some(Err(e)) => println!("  stored          GET /conversations/{{id}} failed: {e}"),
        None => {}
    }
}

/// The goal line: peak under idle + 64 MiB, `/healthz` p99 under 50 ms (failed probes count as
/// the probe timeout).
fn abuse_goal(phase: &Phase) {
    let limit = phase.idle_rss + ABUSE_MEMORY_HEADROOM;
    let (probes, failed) = &phase.healthz;
    let mut all = probes.clone();
    all.extend(std::iter::repeat_n(PROBE_TIMEOUT, *failed as usize));
    let p99 = percentiles(all).p99;
    let mark = |ok: bool| if ok { "✓" } else { "✗" };
    println!(
        "  goal            peak {} < idle + 64 MiB = {} {}; /healthz p99 {} < {} {}{}",
        mib(phase.peak_rss),
        mib(limit),
        mark(phase.peak_rss < limit),
        ms(p99),
        ms(ABUSE_HEALTHZ_P99),
        mark(p99 < ABUSE_HEALTHZ_P99 && !probes.is_empty()),
        if *failed > 0 {
            format!(" (failed probes counted as {})", ms(PROBE_TIMEOUT))
        } else {
            String::new()
        }
    );
}
