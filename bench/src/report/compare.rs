//! The before/after table: each figure's median per binary over the rounds, the after/before
//! ratio, the median of each round's ratio (of all rounds, and of the quiet ones), and the
//! values of every round so the spread shows.

use crate::compare::{quiet_round_ratio, Row, QUIET_STOLEN};

/// Prints the comparison of `rows` over `rounds` rounds.
pub(crate) fn comparison(rows: &[Row], rounds: usize, before: &str, after: &str) {
    println!("before: {before}");
    println!("after:  {after}");
    println!(
        "before/after, interleaved (before, after) × {rounds}, medians per binary; the runs of each in brackets"
    );
    println!(
        "| figure | before | after | after ÷ before | median of the rounds' ratios | of the quiet rounds' (rounds) | before runs | after runs |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let number = |v: Option<f64>, unit: &str| {
        v.map_or_else(|| "n/a".to_owned(), |v| format!("{} {unit}", short(v)))
    };
    let ratio = |r: Option<f64>| r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}"));
    let runs = |values: &[f64]| {
        values
            .iter()
            .map(|v| short(*v))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let quiet = |row: &Row| {
        quiet_round_ratio(rows, row)
            .map_or_else(|| "n/a".to_owned(), |(r, n)| format!("{r:.2} ({n})"))
    };
    for row in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row.name,
            number(row.before_median(), row.unit),
            number(row.after_median(), row.unit),
            ratio(row.ratio()),
            ratio(row.round_ratio()),
            quiet(row),
            runs(&row.before),
            runs(&row.after)
        );
    }
    println!(
        "(this machine's run-to-run spread is about ±25 %: read a ratio against the runs beside it; a quiet round is one whose two runs had under {QUIET_STOLEN} % of the machine's time stolen by its hypervisor)"
    );
}

/// A value with about three significant digits.
fn short(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
