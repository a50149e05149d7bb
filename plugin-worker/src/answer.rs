//! A call's answer as a worker sends it: the plugin's result, made to fit in one frame
//! ([`MAX_FRAME`]). A result text longer than [`MAX_RESULT_TEXT`] is cut at a character
//! boundary, with a line saying so; the server cuts every result to `max_result_bytes`
//! anyway, so the model reads the same start as from a plugin in the server's process. An
//! error longer than that is replaced by one saying so. Without this, the worker could not
//! send the answer at all, and the call would end as if the plugin had crashed.

use rojos_plugin_api::{ErrorKind, ToolError};

use crate::protocol::MAX_FRAME;

/// The longest result a worker sends whole: JSON escaping makes text at most six times longer
/// (a control character becomes `\u00XX`), so this much always fits in a frame.
pub const MAX_RESULT_TEXT: usize = MAX_FRAME / 8;

/// The plugin's `result`, cut to fit in a frame.
pub fn fit(result: Result<String, String>) -> Result<String, String> {
    match result {
        Ok(text) if text.len() > MAX_RESULT_TEXT => Ok(cut(text)),
        Err(json) if json.len() > MAX_RESULT_TEXT => {
            let error = ToolError::new(
                ErrorKind::INTERNAL,
                format!(
                    "the tool's error message was {} bytes, more than a plugin worker passes on ({MAX_RESULT_TEXT} bytes)",
                    json.len()
                ),
            );
            Err(serde_json::to_string(&error).expect("a ToolError always serialises"))
        }
        other => other,
    }
}

fn cut(mut text: String) -> String {
    let length = text.len();
    let mut end = MAX_RESULT_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!(
        "\n[the rest was cut by the plugin worker: the result was {length} bytes, more than it passes on ({MAX_RESULT_TEXT} bytes)]"
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_that_fits_is_sent_as_it_is() {
        let text = "x".repeat(MAX_RESULT_TEXT);
        assert_eq!(fit(Ok(text.clone())), Ok(text));
        let json = r#"{"kind":"io","message":"gone"}"#.to_owned();
        assert_eq!(fit(Err(json.clone())), Err(json));
    }

    #[test]
    fn a_longer_text_is_cut_at_a_character_boundary_with_a_line_saying_so() {
        // A three-byte character across the cut.
        let text = format!("{}€€", "x".repeat(MAX_RESULT_TEXT - 1));
        let Ok(sent) = fit(Ok(text.clone())) else {
            panic!("a text stays a text");
        };
        let (kept, note) = sent.split_once('\n').expect("the note's line");
        assert_eq!(kept, "x".repeat(MAX_RESULT_TEXT - 1));
        assert_eq!(
            note,
            format!(
                "[the rest was cut by the plugin worker: the result was {} bytes, more than it passes on ({MAX_RESULT_TEXT} bytes)]",
                text.len()
            )
        );
        // Even all control characters, escaped six times longer, fit in a frame.
        let escaped = crate::protocol::encode(&fit(Ok("\u{1}".repeat(MAX_RESULT_TEXT + 10))));
        assert!(escaped.len() <= MAX_FRAME, "{}", escaped.len());
    }

    #[test]
    fn a_longer_error_is_replaced_by_one_saying_so() {
        let long = "e".repeat(MAX_RESULT_TEXT + 1);
        let Err(json) = fit(Err(long)) else {
            panic!("an error stays an error");
        };
        let error: ToolError = serde_json::from_str(&json).expect("a ToolError");
        assert_eq!(error.kind, ErrorKind::INTERNAL);
        assert!(
            error.message.starts_with(&format!(
                "the tool's error message was {} bytes",
                MAX_RESULT_TEXT + 1
            )),
            "{}",
            error.message
        );
    }
}
