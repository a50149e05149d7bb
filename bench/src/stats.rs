//! The statistics the bench's verdicts rest on: the nearest-rank percentile of latencies, the
//! median of repeated runs, the after/before ratio of two medians, and whether a cost grows
//! linearly in a size ([`growth`]: Tukey's three-group resistant line, robust to the odd slow
//! turn a shared machine produces, for the slope; a least-squares fit with a quadratic term,
//! judged against the noise by resampling, for the bend).

use std::time::Duration;

/// The nearest-rank percentile `p` (0–100) of sorted `values`.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median of `values` (the mean of the middle two for an even count); none when empty or
/// when a value is not a number.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    } else {
        sorted[middle]
    })
}

/// `after / before`; none when `before` is zero or either is not a finite number.
pub(crate) fn ratio(after: f64, before: f64) -> Option<f64> {
    (before != 0.0 && before.is_finite() && after.is_finite()).then(|| after / before)
}

/// How many resamples of the points judge whether a bend is more than noise.
const RESAMPLES: usize = 400;

/// The share of resamples whose quadratic share must exceed [`SUPERLINEAR_SHARE`].
const CONFIDENCE: f64 = 0.9;

/// Above this quadratic share (in [`CONFIDENCE`] of resamples) the cost grows faster than
/// linearly: the `x²` term is this much of the cost at the largest size. Calibrated in this
/// module's tests: with ±30 % noise (more than S4 sees) no straight line of 100 is called
/// bent, where the half-slope ratio alone called 7; a U-shaped run (dearer first turns) is not
/// either; quadratic costs are found.
pub(crate) const SUPERLINEAR_SHARE: f64 = 1.0 / 3.0;

/// Below this rise from the first third to the last (a share of the first third's cost), the
/// cost does not grow measurably with the size: the fixed cost per turn dominates.
pub(crate) const MEASURABLE_RISE: f64 = 0.10;

/// How a cost `y` grows with a size `x`, from Tukey's resistant line: the points sorted by
/// `x`, cut in thirds, each third summarised by its medians.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Growth {
    /// The slope from the left third's medians to the right third's: cost per unit of size.
    pub(crate) slope: f64,
    /// The cost at zero size on that line.
    pub(crate) intercept: f64,
    /// The right half's slope over the left half's (middle third to right, over left to
    /// middle): 1 for a straight line, higher where the cost bends upwards.
    pub(crate) half_slope_ratio: f64,
    /// How much of the cost at the largest size is quadratic: `c·x²` over the fitted cost,
    /// from the least-squares fit of `a + b·x + c·x²` with `b, c ≥ 0` (a cost does not fall
    /// as the size grows: a dip is noise, not a negative slope). 0 for a straight line.
    pub(crate) quadratic_share: f64,
    /// The quadratic share that [`CONFIDENCE`] of resamples of the points exceed: what it is
    /// at least, given the noise (on 50 turns of a shared machine, one run's half-slope ratio
    /// moves by ±0.5 with no bend at all, and dearer first turns make a U).
    pub(crate) quadratic_share_low: f64,
    /// (right third's median cost − left third's) / left third's.
    pub(crate) rise: f64,
    /// What the figures say.
    pub(crate) verdict: Verdict,
}

/// Whether a cost is linear in a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It does not grow measurably ([`MEASURABLE_RISE`]).
    Flat,
    /// It grows, along a straight line.
    Linear,
    /// It grows faster than the size: its quadratic share is over [`SUPERLINEAR_SHARE`] in
    /// [`CONFIDENCE`] of resamples.
    Superlinear,
}

/// [`Growth`] of the points `(x, y)`; none under 6 points or when the thirds' sizes do not
/// differ (no slope to measure).
pub(crate) fn growth(points: &[(f64, f64)]) -> Option<Growth> {
    let line = resistant_line(points)?;
    let quadratic_share = quadratic_share(points);
    let quadratic_share_low = quadratic_share_low(points);
    let verdict = if line.rise < MEASURABLE_RISE {
        Verdict::Flat
    } else if quadratic_share_low > SUPERLINEAR_SHARE {
        Verdict::Superlinear
    } else {
        Verdict::Linear
    };
    Some(Growth {
        slope: line.slope,
        intercept: line.intercept,
        half_slope_ratio: line.half_slope_ratio,
        quadratic_share,
        quadratic_share_low,
        rise: line.rise,
        verdict,
    })
}

/// Tukey's resistant line through the points: its slope and intercept, half-slope ratio and
/// rise.
struct Line {
    slope: f64,
    intercept: f64,
    half_slope_ratio: f64,
    rise: f64,
}

fn resistant_line(points: &[(f64, f64)]) -> Option<Line> {
    if points.len() < 6 {
        return None;
    }
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let third = sorted.len() / 3;
    let summary = |part: &[(f64, f64)]| -> Option<(f64, f64)> {
        let xs: Vec<f64> = part.iter().map(|p| p.0).collect();
        let ys: Vec<f64> = part.iter().map(|p| p.1).collect();
        Some((median(&xs)?, median(&ys)?))
    };
    let left = summary(&sorted[..third])?;
    let middle = summary(&sorted[third..sorted.len() - third])?;
    let right = summary(&sorted[sorted.len() - third..])?;
    if !(left.0 < middle.0 && middle.0 < right.0) {
        return None;
    }
    let slope_between = |a: (f64, f64), b: (f64, f64)| (b.1 - a.1) / (b.0 - a.0);
    let slope = slope_between(left, right);
    let (left_slope, right_slope) = (slope_between(left, middle), slope_between(middle, right));
    // A left half that does not rise while the right half does is as bent as it gets.
    let half_slope_ratio = if left_slope > 0.0 {
        right_slope / left_slope
    } else if right_slope > 0.0 {
        f64::INFINITY
    } else {
        1.0
    };
    Some(Line {
        slope,
        intercept: (left.1 + middle.1 + right.1 - slope * (left.0 + middle.0 + right.0)) / 3.0,
        half_slope_ratio,
        rise: (right.1 - left.1) / left.1.abs().max(f64::MIN_POSITIVE),
    })
}

/// The quadratic share exceeded by [`CONFIDENCE`] of [`RESAMPLES`] resamples of the points
/// (drawn with replacement, from a fixed seed: the same points give the same bound).
fn quadratic_share_low(points: &[(f64, f64)]) -> f64 {
    let mut draw = Draws(0x9E37_79B9_7F4A_7C15);
    let mut shares: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let resample: Vec<(f64, f64)> = (0..points.len())
                .map(|_| points[draw.below(points.len())])
                .collect();
            quadratic_share(&resample)
        })
        .collect();
    shares.sort_by(f64::total_cmp);
    let at = ((1.0 - CONFIDENCE) * shares.len() as f64) as usize;
    shares.get(at).copied().unwrap_or(0.0)
}

/// The quadratic share of a fit of `a + b·u + c·u²` with `b, c ≥ 0`, `u` the size over the
/// largest size: `c / (a + b + c)`, the `x²` term's part of the fitted cost at the largest
/// size (0 when nothing fits).
fn quadratic_share(points: &[(f64, f64)]) -> f64 {
    let largest = points.iter().map(|p| p.0).fold(0.0, f64::max);
    if largest <= 0.0 {
        return 0.0;
    }
    let scaled: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x / largest, y)).collect();
    // Each shape: whether it uses `u` and `u²` besides the constant. The best fit with no
    // negative coefficient wins (the constrained least squares of the three terms).
    let shapes = [(true, true), (false, true), (true, false), (false, false)];
    let mut best: Option<(f64, f64)> = None; // (squared error, share)
    for (linear, quadratic) in shapes {
        let mut terms: Vec<fn(f64) -> f64> = vec![|_| 1.0];
        if linear {
            terms.push(|u| u);
        }
        if quadratic {
            terms.push(|u| u * u);
        }
        let Some(coefficients) = least_squares(&scaled, &terms) else {
            continue;
        };
        if coefficients[1..].iter().any(|&k| k < 0.0) {
            continue;
        }
        let error: f64 = scaled
            .iter()
            .map(|&(u, y)| {
                let fitted: f64 = terms.iter().zip(&coefficients).map(|(t, k)| k * t(u)).sum();
                (y - fitted).powi(2)
            })
            .sum();
        let quadratic = if quadratic {
            coefficients[terms.len() - 1]
        } else {
            0.0
        };
        let at_largest: f64 = coefficients.iter().sum();
        let share = if at_largest > 0.0 {
            (quadratic / at_largest).clamp(0.0, 1.0)
        } else {
            0.0
        };
        if best.is_none_or(|(least, _)| error < least) {
            best = Some((error, share));
        }
    }
    best.map_or(0.0, |(_, share)| share)
}

/// The coefficients of `terms` that fit `points` best (least squares, by the normal
/// equations); none when they are singular.
fn least_squares(points: &[(f64, f64)], terms: &[fn(f64) -> f64]) -> Option<Vec<f64>> {
    let n = terms.len();
    // The augmented normal equations: [XᵀX | Xᵀy].
    let mut m = vec![vec![0.0; n + 1]; n];
    for &(u, y) in points {
        let row: Vec<f64> = terms.iter().map(|t| t(u)).collect();
        for i in 0..n {
            for j in 0..n {
                m[i][j] += row[i] * row[j];
            }
            m[i][n] += row[i] * y;
        }
    }
    // Gauss–Jordan elimination with partial pivoting.
    for col in 0..n {
        let pivot = (col..n).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col].clone();
        for (index, row) in m.iter_mut().enumerate() {
            if index != col {
                let factor = row[col] / pivot_row[col];
                for (value, above) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *value -= factor * above;
                }
            }
        }
    }
    Some((0..n).map(|i| m[i][n] / m[i][i]).collect())
}

/// A small deterministic generator (xorshift64*) for the resamples.
struct Draws(u64);

impl Draws {
    /// A number in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let value = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (value % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The half-slope ratio above which the bench once called a cost SUPERLINEAR (a cost
    /// `c·x²` over sizes spread evenly from near zero gives about 1.9, a straight line 1.0):
    /// noise alone crosses it.
    const SUPERLINEAR_HALF_SLOPES: f64 = 1.5;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let values: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&values, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&values, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&values[..1], 99.0), Duration::from_millis(1));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn the_median_is_the_middle_value_or_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN, 2.0]), None);
    }

    #[test]
    fn the_ratio_is_after_over_before_and_none_without_a_before() {
        assert_eq!(ratio(50.0, 200.0), Some(0.25));
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 2.0), None);
    }

    /// 50 turns whose size grows from 4 to 200 units, as S4's history does.
    fn sizes() -> Vec<f64> {
        (1..=50).map(|turn| 4.0 * f64::from(turn)).collect()
    }

    /// A ±10 % wobble that repeats every 7 turns, as a shared machine's noise.
    fn wobble(turn: usize) -> f64 {
        1.0 + 0.1 * ((turn % 7) as f64 - 3.0) / 3.0
    }

    #[test]
    fn a_linear_cost_with_a_fixed_part_and_noise_is_linear() {
        let points: Vec<(f64, f64)> = sizes()
            .into_iter()
            .enumerate()
            .map(|(turn, x)| (x, (500.0 + 10.0 * x) * wobble(turn)))
            .collect();
        let growth = growth(&points).expect("enough points");
        assert_eq!(growth.verdict, Verdict::Linear, "{growth:?}");
        assert!((growth.slope - 10.0).abs() < 2.0, "{growth:?}");
    }

    #[test]
    fn a_quadratic_cost_is_superlinear() {
        let points: Vec<(f64, f64)> = sizes()
            .into_iter()
            .enumerate()
            .map(|(turn, x)| (x, (500.0 + 10.0 * x + 0.2 * x * x) * wobble(turn)))
            .collect();
        let growth = growth(&points).expect("enough points");
        assert_eq!(growth.verdict, Verdict::Superlinear, "{growth:?}");
        assert!(growth.half_slope_ratio > 1.5, "{growth:?}");
    }

    /// `cost` over [`sizes`] with ±30 % noise drawn from `seed`: more than S4 sees.
    fn noisy(seed: u64, cost: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
        let mut draw = Draws(seed);
        sizes()
            .into_iter()
            .map(|x| (x, cost(x) * (0.7 + 0.6 * draw.below(1001) as f64 / 1000.0)))
            .collect()
    }

    #[test]
    fn noise_alone_is_not_taken_for_a_bend_and_a_real_bend_is_found_through_it() {
        let linear = |x: f64| 500.0 + 10.0 * x;
        let quadratic = |x: f64| 500.0 + 0.2 * x * x;
        let (mut looked_bent, mut bends_found) = (0, 0);
        let mut worst_straight = 0.0_f64;
        for seed in 1..=100 {
            let straight = growth(&noisy(seed, linear)).expect("enough points");
            worst_straight = worst_straight.max(straight.quadratic_share_low);
            assert_eq!(
                straight.verdict,
                Verdict::Linear,
                "seed {seed}: {straight:?}"
            );
            looked_bent += usize::from(straight.half_slope_ratio > SUPERLINEAR_HALF_SLOPES);
            let bent = growth(&noisy(seed, quadratic)).expect("enough points");
            bends_found += usize::from(bent.verdict == Verdict::Superlinear);
        }
        assert!(worst_straight < SUPERLINEAR_SHARE, "{worst_straight}");
        // The ratio alone would have called some of the straight lines bent.
        assert!(looked_bent > 0, "the noise never bent a single estimate");
        assert!(
            bends_found >= 75,
            "{bends_found} of 100 quadratic costs found"
        );
    }

    #[test]
    fn the_fit_recovers_a_quadratic_and_never_makes_a_cost_fall() {
        let exact: Vec<(f64, f64)> = sizes()
            .into_iter()
            .map(|x| (x, 100.0 + 2.0 * x + 0.01 * x * x))
            .collect();
        // At the largest size, 200: 100 + 400 + 400, of which 400 quadratic.
        assert!((quadratic_share(&exact) - 400.0 / 900.0).abs() < 1e-9);
        let falling: Vec<(f64, f64)> = sizes().into_iter().map(|x| (x, 1000.0 - 2.0 * x)).collect();
        assert_eq!(quadratic_share(&falling), 0.0);
    }

    #[test]
    fn dearer_first_turns_are_not_a_bend() {
        // An S4 run seen on the benchmark machine: the first turns dearer than the middle
        // ones (warming up), the last third rising along the size again.
        let points: Vec<(f64, f64)> = sizes()
            .into_iter()
            .enumerate()
            .map(|(turn, x)| {
                let cost = if x < 70.0 {
                    1900.0
                } else if x < 130.0 {
                    1600.0
                } else {
                    1600.0 + 20.0 * (x - 130.0)
                };
                (x, cost * wobble(turn))
            })
            .collect();
        let growth = growth(&points).expect("enough points");
        assert!(growth.rise > MEASURABLE_RISE, "{growth:?}");
        assert!(
            growth.half_slope_ratio > SUPERLINEAR_HALF_SLOPES,
            "the ratio alone calls it bent: {growth:?}"
        );
        assert_eq!(growth.verdict, Verdict::Linear, "{growth:?}");
    }

    #[test]
    fn a_cost_that_does_not_follow_the_size_is_flat() {
        let points: Vec<(f64, f64)> = sizes()
            .into_iter()
            .enumerate()
            .map(|(turn, x)| (x, 800.0 * wobble(turn)))
            .collect();
        assert_eq!(
            growth(&points).map(|g| g.verdict),
            Some(Verdict::Flat),
            "{points:?}"
        );
    }

    #[test]
    fn too_few_points_or_one_size_give_no_growth() {
        assert_eq!(growth(&[(1.0, 1.0); 5]), None);
        assert_eq!(growth(&[(1.0, 1.0); 9]), None);
    }
}
