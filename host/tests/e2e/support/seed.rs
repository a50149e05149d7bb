//! The reference docs/intro conversation of docs/api.md (3 model turns, 2 tool calls), shared by the tests that
//! only need a known, complete conversation: metrics and load.

use serde_json::{json, Value};

use super::upstream::Turn;

/// The user's message.
pub const MESSAGE: &str = "Create a directory at docs/intro and write an index.page file there with a page header and a short intro paragraph.";
/// What the second turn writes to `docs/intro/index.page`.
pub const PAGE: &str = "# Introduction\n\nWelcome to the documentation. This section gives a short overview of the project and where to start.";
/// The final answer.
pub const ANSWER: &str = "Done! I created `docs/intro` and wrote `docs/intro/index.page`.";

/// The three turns: `create_directory`, `write_text_content`, then the text answer.
pub fn turns() -> Vec<Turn> {
    vec![
        Turn::tool_calls(&[(
            "call_mkdir",
            "create_directory",
            json!({"path": "docs/intro"}),
        )]),
        Turn::tool_calls(&[(
            "call_write",
            "write_text_content",
            json!({"path": "docs/intro/index.page", "text": PAGE}),
        )]),
        Turn::text(ANSWER),
    ]
}

/// The `POST /chat` body of the reference message in `project`.
pub fn body(project: &str) -> Value {
    json!({"projectId": project, "message": MESSAGE})
}
