//! [`truncate`]: a provider's text cut to a length a message may quote.

/// The first `max` bytes of `text` (at a char boundary), marked when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}
