//! Before/after in one session (`--baseline OLD/rojos`): the same scenarios run against two
//! host binaries interleaved, before, after, before, after… (`--rounds`), each run on a fresh
//! host, so a slow spell of a shared machine falls on both; then each figure's median per
//! binary, the after/before ratio of those medians, the median of each round's own ratio, and
//! that median over the rounds the hypervisor left alone. This is what performance work
//! quotes; ratios against other systems come from the side-by-side harness, never from here.

use crate::{figures::Figure, stats};

/// One figure over the rounds of both binaries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// The figure's name.
    pub(crate) name: String,
    /// Its unit.
    pub(crate) unit: &'static str,
    /// Each round's value with the baseline.
    pub(crate) before: Vec<f64>,
    /// Each round's value with the binary under test.
    pub(crate) after: Vec<f64>,
}

impl Row {
    /// The median of the baseline's values.
    pub(crate) fn before_median(&self) -> Option<f64> {
        stats::median(&self.before)
    }

    /// The median of the tested binary's values.
    pub(crate) fn after_median(&self) -> Option<f64> {
        stats::median(&self.after)
    }

    /// After's median over before's.
    pub(crate) fn ratio(&self) -> Option<f64> {
        stats::ratio(self.after_median()?, self.before_median()?)
    }

    /// The median of each round's after/before. A round's two runs are back to back, so a
    /// slow spell of the machine that lasts a round falls on both of its runs, where it may
    /// fall on one binary's median only. `None` unless both binaries have the figure in
    /// every round.
    pub(crate) fn round_ratio(&self) -> Option<f64> {
        if self.before.len() != self.after.len() {
            return None;
        }
        let ratios = self
            .before
            .iter()
            .zip(&self.after)
            .map(|(before, after)| stats::ratio(*after, *before))
            .collect::<Option<Vec<f64>>>()?;
        stats::median(&ratios)
    }
}

/// The most of the machine's time (in %) its hypervisor may have stolen during both runs of
/// a round for the round to count as quiet ([`quiet_round_ratio`]).
pub(crate) const QUIET_STOLEN: f64 = 2.0;

/// The median of the round ratios of `row` over its quiet rounds, and how many there were: the
/// rounds in which both runs of its scenario had under [`QUIET_STOLEN`] % of the machine's
/// time stolen (its row `<scenario> machine time stolen` in `rows`). A round with much stolen
/// in one run only compares two machines. `None` without that row, for that row itself, or
/// with no quiet round.
pub(crate) fn quiet_round_ratio(rows: &[Row], row: &Row) -> Option<(f64, usize)> {
    let scenario = row.name.split_whitespace().next()?;
    let stolen_name = format!("{scenario} machine time stolen");
    if row.name == stolen_name {
        return None;
    }
    let stolen = rows.iter().find(|r| r.name == stolen_name)?;
    let ratios: Vec<f64> = (0..row.before.len().min(row.after.len()))
        .filter(|&i| {
            let quiet = |side: &[f64]| side.get(i).is_some_and(|&s| s < QUIET_STOLEN);
            quiet(&stolen.before) && quiet(&stolen.after)
        })
        .filter_map(|i| stats::ratio(row.after[i], row.before[i]))
        .collect();
    Some((stats::median(&ratios)?, ratios.len()))
}

/// The rows of every figure either binary produced, in the order they first appear.
pub(crate) fn rows(before: &[Vec<Figure>], after: &[Vec<Figure>]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut add = |figure: &Figure, is_after: bool| {
        let at = match rows.iter().position(|r| r.name == figure.name) {
            Some(at) => at,
            None => {
                rows.push(Row {
                    name: figure.name.clone(),
                    unit: figure.unit,
                    before: Vec::new(),
                    after: Vec::new(),
                });
                rows.len() - 1
            }
        };
        let side = if is_after {
            &mut rows[at].after
        } else {
            &mut rows[at].before
        };
        side.push(figure.value);
    };
    for figure in before.iter().flatten() {
        add(figure, false);
    }
    for figure in after.iter().flatten() {
        add(figure, true);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(throughput: f64, cpu: f64) -> Vec<Figure> {
        vec![
            Figure {
                name: "S2 conversations/s".to_owned(),
                value: throughput,
                unit: "/s",
            },
            Figure {
                name: "S2 CPU per conversation".to_owned(),
                value: cpu,
                unit: "µs",
            },
        ]
    }

    #[test]
    fn each_figure_gets_its_median_per_binary_and_the_after_over_before_ratio() {
        let before = [run(1000.0, 1000.0), run(1100.0, 900.0), run(5000.0, 1200.0)];
        let after = [run(2000.0, 300.0), run(1900.0, 360.0), run(2200.0, 350.0)];
        let rows = rows(&before, &after);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].name, "S2 conversations/s");
        // The outlier 5000 moves no median.
        assert_eq!(rows[0].before_median(), Some(1100.0));
        assert_eq!(rows[0].after_median(), Some(2000.0));
        assert_eq!(rows[0].ratio(), Some(2000.0 / 1100.0));
        assert_eq!(rows[1].ratio(), Some(350.0 / 1000.0));
    }

    #[test]
    fn a_figure_only_one_binary_has_gets_no_ratio() {
        let mut after = run(1.0, 1.0);
        after.push(Figure {
            name: "S4 CPU per turn, median".to_owned(),
            value: 5.0,
            unit: "µs",
        });
        let rows = rows(&[run(1.0, 1.0)], &[after]);
        assert_eq!(rows[2].before, Vec::<f64>::new());
        assert_eq!(rows[2].ratio(), None);
        assert_eq!(rows[2].round_ratio(), None);
    }

    #[test]
    fn the_rounds_ratio_pairs_each_round_s_two_runs() {
        // A slow spell in rounds 2 and 3 for both binaries: each round says 1.10, while the
        // medians per binary compare a fast run with a slow one.
        let before = [run(1.0, 1000.0), run(1.0, 1400.0), run(1.0, 1400.0)];
        let after = [run(1.0, 1100.0), run(1.0, 1540.0), run(1.0, 1540.0)];
        let rows = rows(&before, &after);
        let round_ratio = rows[1].round_ratio().expect("every round has both runs");
        assert!((round_ratio - 1.1).abs() < 1e-9, "{round_ratio}");
        assert_eq!(rows[1].ratio(), Some(1.1));
        let fast_after = [run(1.0, 1100.0), run(1.0, 1100.0), run(1.0, 1540.0)];
        let rows = super::rows(&before, &fast_after);
        assert_eq!(rows[1].ratio(), Some(1100.0 / 1400.0));
        let round_ratio = rows[1].round_ratio().expect("every round has both runs");
        assert!((round_ratio - 1.1).abs() < 1e-9, "{round_ratio}");
    }

    #[test]
    fn the_quiet_rounds_are_those_with_little_stolen_in_both_runs() {
        let with_stolen = |cpu: f64, stolen: f64| {
            let mut figures = run(1.0, cpu);
            figures.push(Figure {
                name: "S2 machine time stolen".to_owned(),
                value: stolen,
                unit: "%",
            });
            figures
        };
        // Round 1 quiet (1.2), round 2 stolen in the after run (2.0), round 3 quiet (1.3),
        // round 4 stolen in the before run (2.5): 1.25 of the quiet, 1.65 of all.
        let before = [
            with_stolen(1000.0, 0.1),
            with_stolen(1000.0, 0.5),
            with_stolen(1000.0, 1.9),
            with_stolen(1000.0, 25.0),
        ];
        let after = [
            with_stolen(1200.0, 0.0),
            with_stolen(2000.0, 20.0),
            with_stolen(1300.0, 0.2),
            with_stolen(2500.0, 0.3),
        ];
        let rows = rows(&before, &after);
        let (ratio, quiet) = quiet_round_ratio(&rows, &rows[1]).expect("two quiet rounds");
        assert_eq!(quiet, 2);
        assert!((ratio - 1.25).abs() < 1e-9, "{ratio}");
        let all = rows[1].round_ratio().expect("every round has both runs");
        assert!((all - 1.65).abs() < 1e-9, "{all}");
        assert_eq!(quiet_round_ratio(&rows, &rows[2]), None, "not of itself");
        // Without the stolen figure (an older bench's runs), no quiet rounds are known.
        let rows = super::rows(&[run(1.0, 1.0)], &[run(1.0, 1.0)]);
        assert_eq!(quiet_round_ratio(&rows, &rows[1]), None);
    }
}
