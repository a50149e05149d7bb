//! The valid names an "unknown name" message lists: comma-separated, and cut short with a
//! count when there are many, so the message stays one readable line.

/// How many names a message lists before it says how many more there are.
const SHOWN: usize = 12;

/// `a, b, c`; past [`SHOWN`] names, the first ones and `and 3 more`; `none` when there are
/// none.
pub fn listed<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> String {
    let names: Vec<S> = names.into_iter().collect();
    if names.is_empty() {
        return "none".to_owned();
    }
    let shown: Vec<&str> = names.iter().take(SHOWN).map(AsRef::as_ref).collect();
    let mut text = shown.join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_listed_and_many_are_cut_short_with_a_count() {
        assert_eq!(listed(["a", "b"]), "a, b");
        assert_eq!(listed(Vec::<String>::new()), "none");
        let many: Vec<String> = (1..=15).map(|i| format!("t{i}")).collect();
        assert_eq!(
            listed(&many),
            "t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12 and 3 more"
        );
        assert_eq!(
            listed(&many[..SHOWN]),
            "t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12",
            "exactly as many names as are shown: no count"
        );
    }
}
